"""The Debian packages on a clean Debian 12 system: built by tools/package from this tree and
from the commit before, installed into a fresh bookworm root (mmdebstrap: apt, systemd and
man-db, nothing of rumor's), where apt pulls their dependencies from Debian's archive:

- the previous commit's packages install, and this tree's upgrade them;
- `rumor --version`, `man -w rumor` and `man -w rumor-node` answer, the Python package imports,
  the system user rumor exists, and `rumor node --check --config /etc/rumor/example.conf` takes
  every line (it names the one thing a node must still be given, its key; with an identity it
  prints the settings);
- two nodes, each started as the unit rumor-node@NAME.service starts it (its ExecStart, user
  rumor, umask 0077, a 0700 state directory), from a settings file in /etc/rumor, join on
  127.0.0.1 and train logreg on the packaged Fashion-MNIST: both reach their last round having
  heard each other, their accuracy rises, and what they write is the user's only; started
  again, a finished node says so and exits 0 (`resume = auto`);
- a purge (with apt's autoremove of what came with the packages) leaves nothing behind: every
  path is as before the install but the settings files the administrator wrote in /etc/rumor,
  and the system user rumor, which Debian's packages keep.

It takes a few minutes and Debian's archive, so `tools/test` skips it unless RUMOR_TEST_DEPLOY=1
(`tools/test --deploy` sets it and installs what it needs). Also skips without root, mmdebstrap,
debhelper or a previous commit with debian/. The root is its own mount namespace (unshare), so
nothing mounted outlives the test. Usage: test_deb_install.py SOURCE_ROOT
"""
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

from rumortest import FAILS, check

ROOT = None     # the Debian root
SKIP = 77
# Paths whose contents a purge leaves changed on any Debian system: package and apt state, logs,
# caches, the linker's cache and scratch space; the account files are compared line by line.
VOLATILE = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/var/lib/dpkg", "/var/lib/apt",
            "/var/cache", "/var/log", "/etc/ld.so.cache", "/var/lib/systemd/deb-systemd-helper-enabled",
            "/var/lib/systemd/deb-systemd-helper-masked", "/var/lib/ucf")
ACCOUNTS = ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow")
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive", "LANG": "C.UTF-8",
       "HOME": "/root"}  # what a command in the root runs with


def inroot(cmd, user=None, timeout=600, check_rc=True):
    """Runs sh -c CMD in the root (as USER's uid:gid when given); returns (rc, output)."""
    r = subprocess.run(chroot(cmd, user), capture_output=True, text=True, timeout=timeout, env=ENV)
    if check_rc and r.returncode != 0:
        print(r.stdout[-3000:] + r.stderr[-3000:])
    return r.returncode, r.stdout + r.stderr


def chroot(cmd, user=None):
    """The command line that runs sh -c CMD in the root, as USER ("uid:gid") when given."""
    return ["chroot"] + (["--userspec=%s" % user, "--groups="] if user else []) + [ROOT, "/bin/sh", "-c", cmd]


def tree():
    """Every path of the root (outside VOLATILE and the account files)."""
    paths = set()
    for top, dirs, files in os.walk(ROOT):
        rel = "/" + os.path.relpath(top, ROOT).lstrip(".")
        rel = "/" if rel == "/" else rel.rstrip("/")
        keep = []
        for d in dirs:
            p = os.path.join(rel, d)
            if p not in VOLATILE:
                keep.append(d)
                paths.add(p)
        dirs[:] = keep
        paths.update(os.path.join(rel, f) for f in files
                     if os.path.join(rel, f) not in VOLATILE and os.path.join(rel, f) not in ACCOUNTS)
    return paths


def accounts():
    lines = {}
    for f in ACCOUNTS:
        with open(ROOT + f) as fh:
            lines[f] = set(fh.read().splitlines())
    return lines


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def version(deb):
    return subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True,
                          check=True).stdout.strip()


def debs(folder):
    """The packages to install: all but rumor-cuda (NVIDIA's runtime is no Debian package) and
    the debug symbols."""
    return sorted(f for f in os.listdir(folder)
                  if f.endswith(".deb") and not f.startswith(("rumor-cuda", "rumor-dbgsym")))


def build(src, tmp):
    """Builds this tree's packages and the previous commit's, while mmdebstrap makes the root."""
    # This machine's Debian sources where they are bookworm's (a mirror, the security archive).
    sources = [f for f in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list")
               if os.path.exists(f) and "bookworm" in open(f).read()][:1]
    boot = subprocess.Popen(["mmdebstrap", "--quiet", "--variant=apt", "--include=systemd,man-db",
                             "bookworm", ROOT] + sources, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tool = os.path.join(src, "tools", "package")
    new = subprocess.run([tool, os.path.join(tmp, "new")], capture_output=True, text=True, timeout=1500)
    old = subprocess.run([tool, "--rev", "HEAD~1", os.path.join(tmp, "old")], capture_output=True, text=True,
                         timeout=1500, cwd=src)
    out = boot.communicate(timeout=1500)[0]
    check(new.returncode == 0, "tools/package builds this tree's packages: %s" % new.stderr[-600:])
    check(old.returncode == 0, "tools/package --rev HEAD~1 builds the previous commit's: %s" % old.stderr[-600:])
    check(boot.returncode == 0, "mmdebstrap makes a bookworm root: %s" % out[-600:])
    return not FAILS


def install(tmp, which):
    folder = os.path.join(ROOT, "tmp", which)
    shutil.copytree(os.path.join(tmp, which), folder)
    files = " ".join("/tmp/%s/%s" % (which, f) for f in debs(folder))
    rc, out = inroot("apt-get -o Dpkg::Use-Pty=0 install -y -q %s" % files)
    return rc == 0, out


def unit_command(name, state):
    """The ExecStart of the installed rumor-node@.service for instance NAME."""
    with open(os.path.join(ROOT, "lib/systemd/system/rumor-node@.service")) as f:
        line = next(l for l in f.read().splitlines() if l.startswith("ExecStart="))
    return line[len("ExecStart="):].replace("%i", name).replace("${STATE_DIRECTORY}", state)


def metrics(name):
    path = os.path.join(ROOT, "var/lib/rumor", name, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def nodes(uid, gid):
    """Two nodes from settings files, started as the unit starts them; they train together."""
    rc, out = inroot("rumor swarm init /root/swarm && install -m 0644 /root/swarm/authority.pub /etc/rumor/ && "
                     "install -d -o rumor -g rumor -m 0700 /var/lib/rumor /var/lib/rumor/keys")
    check(rc == 0, "a swarm authority and the keys folder: %s" % out[-300:])
    pub = {}
    for name in ("a", "b"):
        rc, out = inroot("umask 077; rumor keygen -o /var/lib/rumor/keys/%s" % name, user="%d:%d" % (uid, gid))
        pub[name] = out.strip().splitlines()[0] if rc == 0 else ""
        rc2, out2 = inroot("rumor swarm admit -a /root/swarm -o /var/lib/rumor/keys/{0}.cert --name {0} "
                           "/var/lib/rumor/keys/{0}.pub".format(name))
        check(rc == 0 and rc2 == 0, "node %s: keygen as rumor, admitted: %s" % (name, (out + out2)[-300:]))
    ports = {"a": free_port(), "b": free_port()}
    for rank, name in enumerate(("a", "b")):
        conf = ["key = /var/lib/rumor/keys/%s.key" % name, "cert = /var/lib/rumor/keys/%s.cert" % name,
                "swarm = /etc/rumor/authority.pub", "listen = tcp://127.0.0.1:%d" % ports[name],
                "model = logreg", "partition = iid", "rank = %d" % rank, "of = 2", "limit = 4000",
                "rounds = 15", "batch = 32", "lr = 0.1", "local-steps = 2", "eval-every = 0", "threads = 1",
                "min-peers = 2", "linger = 3", "resume = auto"]
        if name == "b":
            conf.append("bootstrap = rumor://%s@127.0.0.1:%d" % (pub["a"], ports["a"]))
        with open(os.path.join(ROOT, "etc/rumor/%s.conf" % name), "w") as f:
            f.write("# node %s, as an administrator writes it\n%s\n" % (name, "\n".join(conf)))
    # What systemd does for the unit: the state directory (StateDirectory=, 0700), the user, the umask.
    inroot("install -d -o rumor -g rumor -m 0700 /var/lib/rumor/a /var/lib/rumor/b")
    procs = {}
    for name in ("a", "b"):
        cmd = unit_command(name, "/var/lib/rumor/" + name)
        log = open(os.path.join(ROOT, "tmp", "node-%s.log" % name), "w")
        procs[name] = subprocess.Popen(chroot("umask 077; exec " + cmd, "%d:%d" % (uid, gid)), stdout=log,
                                       stderr=subprocess.STDOUT, env=ENV)
        log.close()
    codes = {}
    for name, p in procs.items():
        try:
            codes[name] = p.wait(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            codes[name] = "timeout"
    for name in ("a", "b"):
        with open(os.path.join(ROOT, "tmp", "node-%s.log" % name)) as f:
            log = f.read()
        ms = metrics(name)
        last = ms[-1] if ms else {}
        accs = [m["test_acc"] for m in ms if m.get("test_acc") is not None]
        check(codes[name] == 0 and last.get("round") == 15,
              "node %s (%s) trains to round 15 and exits 0: exit %s, round %s; %s"
              % (name, unit_command(name, "/var/lib/rumor/" + name), codes[name], last.get("round"), log[-400:]))
        check(all(m.get("neighbours", 0) >= 1 for m in ms if m.get("round", 0) > 0) and
              any(m.get("peers", 0) >= 1 for m in ms),
              "node %s heard the other in every round: neighbours %s" % (name, [m.get("neighbours") for m in ms]))
        check(len(accs) >= 2 and accs[-1] > accs[0] + 0.2 and accs[-1] > 0.65,
              "node %s's test accuracy rises: %s" % (name, accs))
        state = os.path.join(ROOT, "var/lib/rumor", name)
        own = [os.lstat(os.path.join(d, f)) for d, _, fs in os.walk(state) for f in fs] + [os.lstat(state)]
        check(len(own) > 2 and all(s.st_uid == uid and s.st_mode & 0o077 == 0 for s in own),
              "node %s's state (%d files) is the user rumor's and nobody else's" % (name, len(own)))
    rc, out = inroot("umask 077; exec " + unit_command("a", "/var/lib/rumor/a"), user="%d:%d" % (uid, gid), timeout=120)
    check(rc == 0 and "complete" in out, "started again, the finished node a says so and exits 0: %s" % out[-300:])


def main():
    global ROOT
    src = os.path.abspath(sys.argv[1])
    if os.environ.get("RUMOR_TEST_DEPLOY") != "1":
        print("skip: the Debian install test takes minutes and Debian's archive: tools/test --deploy runs it")
        return SKIP
    if os.geteuid() != 0:
        print("skip: the install test makes a Debian root and installs into it: it needs root")
        return SKIP
    need = [p for p in ("mmdebstrap", "unshare", "dpkg-buildpackage", "dh", "lintian") if not shutil.which(p)]
    if need:
        print("skip: %s not installed (tools/test --deploy installs them)" % ", ".join(need))
        return SKIP
    if subprocess.run(["git", "-C", src, "cat-file", "-e", "HEAD~1:debian/control"],
                      capture_output=True).returncode != 0:
        print("skip: the commit before HEAD has no debian/ to upgrade from")
        return SKIP
    if os.environ.get("RUMOR_DEPLOY_NS") != "1":
        # A mount namespace of its own: /proc mounted in the root goes when the test does.
        env = dict(os.environ, RUMOR_DEPLOY_NS="1")
        return subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable] + sys.argv,
                              env=env).returncode
    tmp = tempfile.mkdtemp(prefix="rumor-test-deploy-")
    ROOT = os.path.join(tmp, "root")
    try:
        return steps(src, tmp)
    finally:
        subprocess.run(["umount", "-R", "-l", os.path.join(ROOT, "proc")], capture_output=True)
        with open("/proc/self/mounts") as f:
            mounted = [l.split()[1] for l in f if l.split()[1].startswith(tmp)]
        if mounted:
            print("FAIL still mounted, %s left in place: %s" % (tmp, mounted))
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def steps(src, tmp):
    if not build(src, tmp):
        return 1
    subprocess.run(["mount", "-t", "proc", "proc", os.path.join(ROOT, "proc")], check=True)
    shutil.copy("/etc/resolv.conf", os.path.join(ROOT, "etc/resolv.conf"))
    rc, out = inroot("apt-get update -q")
    check(rc == 0, "apt-get update in the root: %s" % out[-300:])
    # What the packages need from Debian comes first, so that the purge is compared with a
    # system that has it: what Debian's own packages leave on their purge is theirs to answer.
    folder = os.path.join(tmp, "new")
    names = sorted({f.split("_")[0] for f in debs(folder)})  # rumor's packages
    wants = set()
    for f in debs(folder):
        for field in ("Depends", "Recommends"):
            got = subprocess.run(["dpkg-deb", "-f", os.path.join(folder, f), field], capture_output=True,
                                 text=True).stdout
            wants.update(w.strip() for w in got.split(",") if w.strip() and w.split()[0] not in names)
    rc, out = inroot("apt-get -o Dpkg::Use-Pty=0 satisfy -y -q '%s'" % ", ".join(sorted(wants)))
    check(rc == 0, "apt-get satisfy installs what the packages need from Debian: %s" % out[-600:])
    before, users = tree(), accounts()
    packages = inroot("dpkg-query -W -f '${Package} ${Status}\\n'")[1].splitlines()
    old_v, new_v = (version(glob.glob(os.path.join(tmp, w, "rumor_*.deb"))[0]) for w in ("old", "new"))
    check(subprocess.run(["dpkg", "--compare-versions", new_v, "gt", old_v]).returncode == 0,
          "this tree's version %s is above the previous commit's %s" % (new_v, old_v))

    ok, out = install(tmp, "old")
    check(ok, "the previous commit's packages install, their dependencies from Debian: %s" % out[-600:])
    if FAILS:
        return 1
    ok, out = install(tmp, "new")
    rc, got = inroot("dpkg-query -W -f '${Version} ' %s" % " ".join(names))
    check(ok and got.split() == [new_v] * len(names),
          "this tree's packages upgrade them (%s -> %s): %s" % (old_v, got, out[-600:]))

    rc, out = inroot("rumor --version")
    check(rc == 0 and out.startswith("rumor "), "rumor --version: %s" % out.splitlines()[:1])
    rc, out = inroot("man -w rumor && man -w rumor-node")
    check(rc == 0 and out.split() == ["/usr/share/man/man1/rumor.1.gz", "/usr/share/man/man1/rumor-node.1.gz"],
          "man -w rumor, man -w rumor-node: %s" % out.strip())
    rc, out = inroot("rumor node --check --config /etc/rumor/example.conf", check_rc=False)
    check(rc == 2 and out.strip() == "rumor: error: node needs --key (see rumor node --help)",
          "rumor node --check --config /etc/rumor/example.conf takes every line and asks for a key: %s" % out.strip())
    rc, out = inroot("rumor node --check --config /etc/rumor/example.conf --key k --cert c --swarm s "
                     "--listen tcp://127.0.0.1:0")
    check(rc == 0 and json.loads(out).get("model") == "mlp:256,128", "with an identity, --check prints the settings")
    rc, out = inroot("python3 -c 'import rumor; print(rumor.version)'")
    check(rc == 0 and out.strip().startswith(new_v.split("+")[0]), "python3 -c 'import rumor': %s" % out.strip())
    rc, out = inroot("getent passwd rumor")
    fields = out.strip().split(":")
    check(rc == 0 and len(fields) == 7 and int(fields[2]) < 1000 and fields[6] == "/usr/sbin/nologin",
          "the system user rumor (uid below 1000, no login): %s" % out.strip())
    if FAILS:
        return 1
    nodes(int(fields[2]), int(fields[3]))

    rc, out = inroot("apt-get -o Dpkg::Use-Pty=0 purge -y -q %s" % " ".join(names))
    check(rc == 0, "apt-get purge: %s" % out[-400:])
    rc, out = inroot("dpkg-query -W -f '${Package} ${Status}\\n'")
    check(out.splitlines() == packages, "the purge removes rumor's packages and nothing else: %s"
          % sorted(set(out.splitlines()) ^ set(packages)))
    after = tree()
    admins = {"/etc/rumor", "/etc/rumor/a.conf", "/etc/rumor/b.conf", "/etc/rumor/authority.pub", "/root/swarm",
            "/root/swarm/authority.pub", "/root/swarm/authority.key"}
    check(after - before == admins, "the purge leaves no path behind but the administrator's own (%s): %s"
          % (sorted(admins), sorted(after - before - admins)[:20]))
    check(before - after == set(), "and removes nothing that was there before: %s" % sorted(before - after)[:20])
    added = {f: sorted(l.split(":")[0] for l in accounts()[f] - users[f]) for f in ACCOUNTS}
    check(all(v == ["rumor"] for v in added.values()), "of the accounts, the system user rumor stays: %s" % added)
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
