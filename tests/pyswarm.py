"""What the Python package's tests share: ok/FAIL lines with a count, and a swarm of
certificates made with the rumor command (an authority, then a key and certificate per peer)."""
import os
import socket
import subprocess

failed = 0


def port_base(span):
    """The first of span consecutive loopback ports, all free now and below the kernel's
    ephemeral range, where no other test's outgoing connection can take one meanwhile (a
    port drawn up to 40000 once was: "Address already in use")."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            top = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        top = 32768
    room = max(top - 10000 - span, span)
    start = (os.getpid() * 7) % room
    for k in range(room // span):
        base = 10000 + (start + k * span) % room
        try:
            for p in range(base, base + span):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    return 10000 + start


def check(cond, what):
    """One line, ok or FAIL; failures are counted in pyswarm.failed."""
    global failed
    print("%s %s" % ("ok  " if cond else "FAIL", what), flush=True)
    if not cond:
        failed += 1


def make_swarm(rumor_exe, tmp, n):
    """tmp/auth (the authority), tmp/pI.key and tmp/pI.cert for I < n; peer 0's public key."""
    def run(*args):
        subprocess.run([rumor_exe, *args], check=True, capture_output=True)
    run("swarm", "init", tmp + "/auth")
    for i in range(n):
        run("keygen", "-o", "%s/p%d" % (tmp, i))
        run("swarm", "admit", "-a", tmp + "/auth", "-o", "%s/p%d.cert" % (tmp, i), "%s/p%d.pub" % (tmp, i))
    return open(tmp + "/p0.pub").read().split()[-1]  # (after its comment line)


def ident(tmp, i, **more):
    """Peer i's settings as keywords: its key, certificate, the authority, a loopback port."""
    kw = dict(key="%s/p%d.key" % (tmp, i), cert="%s/p%d.cert" % (tmp, i), swarm=tmp + "/auth/authority.pub",
              listen="tcp://127.0.0.1:0", linger=0)
    kw.update(more)
    return kw


def ident_text(tmp, i, port, pub=None, boot_port=None):
    """Peer i's settings as text (RUMOR_SETTINGS), listening on port; bootstrap to peer 0."""
    text = ("key = {t}/p{i}.key\ncert = {t}/p{i}.cert\nswarm = {t}/auth/authority.pub\n"
            "listen = tcp://127.0.0.1:{port}\n").format(t=tmp, i=i, port=port)
    if pub and boot_port:
        text += "bootstrap = rumor://%s@127.0.0.1:%d\n" % (pub, boot_port)
    return text


def together(items, fn):
    """fn(i, item) for every item, each on a thread of its own, all at once; [(i, exception)]."""
    import threading
    errors = []

    def run(i, item):
        try:
            fn(i, item)
        except Exception as e:  # noqa: BLE001
            errors.append((i, e))

    th = [threading.Thread(target=run, args=(i, item)) for i, item in enumerate(items)]
    [t.start() for t in th]
    [t.join() for t in th]
    return errors


def result():
    """The last line, and the exit status: 0 when nothing failed."""
    print("%d failed" % failed)
    return 1 if failed else 0


def cleanup(procs, tmp, lines=12):
    """Kill what still runs; after a failure, the last lines of each peer's log tmp/pI.log."""
    import os
    import shutil
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    for i in range(len(procs) if failed else 0):
        path = os.path.join(tmp, "p%d.log" % i)
        if os.path.exists(path):
            print("--- peer %d's log (last lines)" % i)
            print("".join(open(path).readlines()[-lines:]))
    shutil.rmtree(tmp, ignore_errors=True)
