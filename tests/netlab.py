"""A network lab on real kernel links: hosts in network namespaces, joined by veth pairs and
bridges, NAT routers with nftables masquerade, bandwidth caps with tbf, partitions by taking
links down. The network tests build their networks with it.

Everything a lab makes lives inside namespaces named `rlab<PID>-<N>.<name>` (bridges too sit in a
namespace of their own), so nothing touches the host's network, only hosts inside those
namespaces are ever addressed, and deleting the namespaces removes every veth, bridge, route
and nftables table with them. A lab removes all it made when closed, when its process exits,
and on SIGTERM or SIGINT; namespaces left by a lab process that died by SIGKILL are removed by
the next lab (their PID is no longer alive).

Needs root, `ip` (iproute2), `tc` and, for NAT, `nft`: Lab.missing() says what is lacking, so
a test skips with the reason.

This kernel may lack netem: latency and random loss stay with rumor's own emulator; the
kernel gives bandwidth, partitions and NAT.
"""
import atexit
import itertools
import os
import re
import shutil
import signal
import subprocess
import threading
import time

_LABS = []
_COUNT = itertools.count(1)  # (labs made in threads take numbers from it)
_HOOKED = False


def _sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), (r.stderr or r.stdout).strip()))
    return r


def missing():
    """Why a lab cannot run here (one line), or None when it can."""
    if os.geteuid() != 0:
        return "the network lab needs root (network namespaces)"
    for tool in ("ip", "tc", "nft"):
        if shutil.which(tool) is None:
            return "the network lab needs `%s` (Debian: iproute2, nftables)" % tool
    name = "rlab%d-probe" % os.getpid()
    r = _sh("ip", "netns", "add", name, check=False)
    if r.returncode != 0:
        return "cannot make a network namespace: " + r.stderr.strip()
    try:
        r = _sh("ip", "-n", name, "link", "add", "name", "va", "type", "veth", "peer", "name", "vb", check=False)
        if r.returncode != 0:
            return "cannot make a veth pair: " + r.stderr.strip()
        r = _sh("ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "va", "root", "tbf", "rate", "100mbit",
                "burst", "32kb", "latency", "50ms", check=False)
        if r.returncode != 0:
            return "no tbf queueing discipline: " + r.stderr.strip()
        r = _sh("ip", "netns", "exec", name, "nft", "add", "table", "ip", "probe", check=False)
        if r.returncode != 0:
            return "no nftables in this kernel: " + r.stderr.strip()
    finally:
        _sh("ip", "netns", "del", name, check=False)
    return None


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_orphans():
    """Remove namespaces of labs whose process is gone (killed before it could clean up)."""
    r = _sh("ip", "netns", "list", check=False)
    for line in r.stdout.splitlines():
        m = re.match(r"(rlab(\d+)-\S+)", line)
        if m and int(m.group(2)) != os.getpid() and not _alive(int(m.group(2))):
            _sh("ip", "netns", "del", m.group(1), check=False)


def _close_all(*_):
    for lab in list(_LABS):
        lab.close()


def _on_signal(sig, _frame):
    _close_all()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


class Lab:
    """One lab: hosts, segments (bridges), links, routers and the processes run in them."""

    def __init__(self):
        _sweep_orphans()
        global _HOOKED
        self.prefix = "rlab%d-%d." % (os.getpid(), next(_COUNT))  # labs of one process never collide
        self.spaces = []          # namespaces made, in order
        self.procs = []
        self.ifs = {}             # host -> count of interfaces, for names
        self.closed = False
        if not _HOOKED:
            _HOOKED = True
            atexit.register(_close_all)
            if threading.current_thread() is threading.main_thread():
                for s in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(s, _on_signal)
        _LABS.append(self)

    def ns(self, name):
        return self.prefix + name

    def _space(self, name):
        ns = self.ns(name)
        _sh("ip", "netns", "add", ns)
        self.spaces.append(ns)
        _sh("ip", "-n", ns, "link", "set", "dev", "lo", "up")
        return ns

    def host(self, name):
        """A host: a namespace of its own with loopback up."""
        self._space(name)
        self.ifs[name] = 0
        return name

    def segment(self, name):
        """A switch: a bridge in a namespace of its own, that hosts plug into."""
        ns = self._space(name)
        _sh("ip", "-n", ns, "link", "add", "name", "br", "type", "bridge")
        _sh("ip", "-n", ns, "link", "set", "dev", "br", "up")
        self.ifs[name] = 0
        return name

    def _ifname(self, host):
        i = self.ifs[host]
        self.ifs[host] = i + 1
        return "eth%d" % i

    def plug(self, host, segment, addr):
        """Plug host into segment with address addr ("10.0.0.2/24"); the host's interface name."""
        dev = self._ifname(host)
        port = "p%d" % self.ifs[segment]
        self.ifs[segment] += 1
        _sh("ip", "link", "add", "name", dev, "netns", self.ns(host), "type", "veth", "peer", "name", port,
            "netns", self.ns(segment))
        _sh("ip", "-n", self.ns(segment), "link", "set", "dev", port, "master", "br")
        _sh("ip", "-n", self.ns(segment), "link", "set", "dev", port, "up")
        _sh("ip", "-n", self.ns(host), "addr", "add", addr, "dev", dev)
        _sh("ip", "-n", self.ns(host), "link", "set", "dev", dev, "up")
        return dev

    def wire(self, a, addr_a, b, addr_b):
        """A cable straight from host a to host b (a veth pair); their interface names."""
        da, db = self._ifname(a), self._ifname(b)
        _sh("ip", "link", "add", "name", da, "netns", self.ns(a), "type", "veth", "peer", "name", db, "netns", self.ns(b))
        for h, d, ad in ((a, da, addr_a), (b, db, addr_b)):
            _sh("ip", "-n", self.ns(h), "addr", "add", ad, "dev", d)
            _sh("ip", "-n", self.ns(h), "link", "set", "dev", d, "up")
        return da, db

    def attach(self, host, segment, addr, gateway=None):
        """A new host plugged into segment at addr, its default route via gateway when given;
        its interface's name."""
        self.host(host)
        dev = self.plug(host, segment, addr)
        if gateway:
            self.route(host, gateway)
        return dev

    def nat_router(self, name, up, up_addr, lan, lan_addr, gateway=None):
        """A new router on segment up at up_addr (default route via gateway when given), with a
        new segment lan behind it, where it is lan_addr, masqueraded (nat)."""
        out = self.attach(name, up, up_addr, gateway)
        self.segment(lan)
        self.plug(name, lan, lan_addr)
        self.nat(name, out)

    def route(self, host, via, dest="default"):
        _sh("ip", "-n", self.ns(host), "route", "add", dest, "via", via)

    def forward(self, router):
        """Make router forward between its interfaces (a plain router, no NAT)."""
        _sh("ip", "netns", "exec", self.ns(router), "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")

    def nat(self, router, outside_dev):
        """Make router forward, masquerading what leaves by outside_dev (a home router: hosts
        outside cannot open connections to those inside)."""
        ns = self.ns(router)
        self.forward(router)
        rules = ("table ip nat {\n"
                 " chain rlab_post { type nat hook postrouting priority 100; oifname \"%s\" masquerade; }\n"
                 "}\n"
                 "table ip filter {\n"
                 " chain rlab_fwd { type filter hook forward priority 0; policy drop;\n"
                 "  ct state established,related accept\n"
                 "  oifname \"%s\" accept\n"
                 " }\n"
                 "}\n") % (outside_dev, outside_dev)
        r = subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("nft: " + r.stderr.strip())

    def shape(self, host, dev, rate="100mbit", burst="256kb", latency="100ms"):
        """Cap what host sends through dev with a token bucket (tbf)."""
        _sh("ip", "netns", "exec", self.ns(host), "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
            "burst", burst, "latency", latency)

    def readdress(self, host, dev, old, new):
        """Give host's interface dev the address new in place of old ("10.0.0.5/24"): a home
        router whose provider hands it another address (its masquerade forgets its mappings)."""
        _sh("ip", "-n", self.ns(host), "addr", "del", old, "dev", dev)
        _sh("ip", "-n", self.ns(host), "addr", "add", new, "dev", dev)

    def link(self, host, dev, up):
        """Take host's interface dev down (a cut cable) or bring it back up."""
        _sh("ip", "-n", self.ns(host), "link", "set", "dev", dev, "up" if up else "down")

    def popen(self, host, args, **kw):
        """Start args inside host; the lab kills it when closed."""
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(host), *args], **kw)
        self.procs.append(p)
        return p

    def run(self, host, args, timeout=30):
        return subprocess.run(["ip", "netns", "exec", self.ns(host), *args], capture_output=True, text=True,
                              timeout=timeout)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        deadline = time.time() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
        for ns in reversed(self.spaces):
            _sh("ip", "netns", "del", ns, check=False)
        if self in _LABS:
            _LABS.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
