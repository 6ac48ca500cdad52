#!/usr/bin/python3
"""Real nodes on 127.0.0.1: join, failure detection, graceful leave, refusals and hostile
input. Every node is the `rumor` binary a user runs; every wait is bounded.

usage: test_net.py RUMOR_BINARY
"""
import json
import os
import signal
import socket
import subprocess
import sys
import struct
import time

import rumortest
from rumortest import FAILS, check, make_peer, rss_kb, run, status
SKIPS = []  # parts that could not run here, each with its reason

RUMOR = None
PROCS = []


def start(tmp, swarm, key, bootstrap=None, extra=(), period=200):
    ctl = "ipc://" + key + ".ctl"
    args = [RUMOR, "node", "--key", key + ".key", "--cert", key + ".cert",
            "--swarm", os.path.join(swarm, "authority.pub"), "--listen", "tcp://127.0.0.1:0",
            "--control", ctl, "--period", str(period), "--suspect", str(5 * period), *extra]
    if bootstrap:
        args += ["--bootstrap", bootstrap]
    # Under AddressSanitizer freed memory waits in a quarantine, which would look like growth.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
    # Logs go to a file: a pipe nobody reads would fill up and stall the node.
    log = open(key + ".log", "w")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    log.close()
    PROCS.append(p)
    line = p.stdout.readline()
    addr = line.strip().split()[-1] if "rumor://" in line else None
    return p, ctl, addr


def alive_peers(ctl):
    s = status(ctl)
    if not s:
        return None
    return sorted(v["key"] for v in s["view"] if v["state"] == "alive")


def view_keys(ctl):
    """Every member in the view, whatever its state (a suspect is still there)."""
    s = status(ctl)
    if not s:
        return None
    return sorted(v["key"] for v in s["view"])


def wait_for(pred, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def mp(o):
    """A small msgpack encoder, enough to speak (and misspeak) rumor's protocol."""
    if isinstance(o, list):
        head = bytes([0x90 | len(o)]) if len(o) < 16 else b"\xdc" + len(o).to_bytes(2, "big")
        return head + b"".join(mp(v) for v in o)
    if isinstance(o, dict):
        n = len(o)
        head = bytes([0x80 | n]) if n < 16 else b"\xde" + n.to_bytes(2, "big")
        return head + b"".join(mp(k) + mp(v) for k, v in o.items())
    if isinstance(o, str):
        b = o.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
    if isinstance(o, bytes):
        return b"\xc4" + bytes([len(o)]) + o
    if isinstance(o, float):
        return b"\xcb" + struct.pack(">d", o)
    if 0 <= o < 128:
        return bytes([o])
    return b"\xcf" + o.to_bytes(8, "big")


def key_text_lines(path):
    """The content lines of a rumor key or certificate file (comments and blanks dropped)."""
    with open(path) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def key_text(path):
    return key_text_lines(path)[0]


def cert_bytes(path):
    import zmq.utils.z85
    raw = zmq.utils.z85.decode("".join(key_text_lines(path)))
    n = raw[84]
    return raw[:86 + n + raw[85 + n] + 64] if raw[:4] == b"RMC2" else raw[:85 + n + 64]


def place_of(cert_path):
    """A member's place in the gossip graph's order (crypto.h rumor_member_place), as hex: the
    first 8 bytes of BLAKE2b-256 of a label and the authority's signature ending its certificate."""
    import hashlib
    return hashlib.blake2b(b"rumor-place-1\0\0\0" + cert_bytes(cert_path)[-64:], digest_size=32).digest()[:8].hex()


def relay_share(ctx, tmp, swarm, mallory, pubs, port, ctl):
    """The relay budget is shared among the members that ask for it: mallory asks the node to
    forward as much as it can (50 kB messages, far over the default 10 MB/s), eve asks for 2 MB/s
    (100 kB, 20 a second): every one of eve's messages is forwarded, and what mallory asks beyond
    its share is dropped and counted. (With one pool for all, mallory's stream took the budget
    and most of eve's messages were dropped.)"""
    import zmq
    eve = make_peer(tmp, swarm, "eve")
    r = run("ping", "--key", eve + ".key", "--cert", eve + ".cert", "--swarm", os.path.join(swarm, "authority.pub"),
            "rumor://%s@127.0.0.1:%d" % (pubs[1], port))
    check(r.returncode == 0, "a second member knocks: %s" % (r.stdout + r.stderr).strip())

    def member(who):
        s = ctx.socket(zmq.DEALER)
        s.linger = 0
        s.sndhwm = 64
        s.curve_secretkey = rumortest.curve_secret(who + ".key")
        s.curve_publickey = key_text(who + ".pub").encode()
        s.curve_serverkey = pubs[1].encode()
        s.connect("tcp://127.0.0.1:%d" % port)
        boot = int.from_bytes(os.urandom(4), "big") + 1
        s.send(mp({"v": 5, "t": "hello", "seq": 1, "cert": cert_bytes(who + ".cert"), "addr": "tcp://127.0.0.1:9",
                   "layout": 0, "caps": 1, "inc": 1, "boot": boot,
                   "proof": rumortest.record_proof(who + ".key", 1, boot, "tcp://127.0.0.1:9")}))
        return s
    m, e = member(mallory), member(eve)
    import zmq.utils.z85
    key = {who: zmq.utils.z85.decode(key_text(who + ".pub")) for who in (mallory, eve)}
    time.sleep(1.0)
    before = (status(ctl) or {}).get("rejected", {}).get("relay-budget", 0)

    def relay(to, ctr):
        return mp({"v": 5, "t": "relay", "seq": ctr + 1, "to": key[to], "kind": 3, "ctr": ctr})
    got = {mallory: 0, eve: 0}  # relayed messages each received from the other

    def drain(s, who):
        other = eve if who == mallory else mallory
        while s.poll(0):
            parts = s.recv_multipart()
            # (data from the other; other members' relayed inits reach them too)
            if b"\xa5relay" in parts[0] and b"\xa4from\xc4\x20" + key[other] in parts[0] and len(parts) == 2:
                got[who] += 1
    small, big = os.urandom(50_000), os.urandom(100_000)
    sent_m = sent_e = 0
    end, next_e = time.time() + 4.0, time.time()
    while time.time() < end:
        for _ in range(20):
            try:
                m.send_multipart([relay(eve, sent_m + 1), small], zmq.NOBLOCK)
                sent_m += 1
            except zmq.Again:
                break
        if time.time() >= next_e:
            e.send_multipart([relay(mallory, sent_e + 1), big])
            sent_e += 1
            next_e += 0.05
        drain(m, mallory)
        drain(e, eve)
        time.sleep(0.002)
    stop = time.time() + 1.5
    while time.time() < stop:
        drain(m, mallory)
        drain(e, eve)
        time.sleep(0.01)
    dropped = (status(ctl) or {}).get("rejected", {}).get("relay-budget", 0) - before
    print("     relay share: mallory asked %d x 50 kB, %d forwarded; eve asked %d x 100 kB, %d forwarded; "
          "%d refused (relay-budget)" % (sent_m, got[eve], sent_e, got[mallory], dropped))
    check(sent_e >= 60 and got[mallory] == sent_e,
          "a member within its share of the relay budget has every message forwarded while another asks "
          "for all of it (%d of %d)" % (got[mallory], sent_e))
    check(dropped > 0 and got[eve] * 50_000 < 0.75 * 4.0 * 10e6,
          "what the other asks beyond its share is refused and counted (%d; forwarded %.1f MB in 4 s)"
          % (dropped, got[eve] * 50_000 / 1e6))
    m.close()
    e.close()


def main():
    global RUMOR
    RUMOR = rumortest.RUMOR = os.path.abspath(sys.argv[1])
    tmp = rumortest.scratch("net")
    swarm = os.path.join(tmp, "swarm")
    assert run("swarm", "init", swarm).returncode == 0
    keys = [make_peer(tmp, swarm, "n%d" % i) for i in range(6)]
    pubs = [key_text(k + ".pub") for k in keys]

    # 1. Six nodes, one bootstrap: everyone sees everyone within a few seconds.
    p0, c0, a0 = start(tmp, swarm, keys[0])
    check(a0 is not None and a0.startswith("rumor://" + pubs[0] + "@127.0.0.1:"), "bootstrap prints its address: %s" % a0)
    nodes = [(p0, c0)]
    for k in keys[1:]:
        p, c, _ = start(tmp, swarm, k, bootstrap=a0)
        nodes.append((p, c))
    t0 = time.time()
    full = wait_for(lambda: all(alive_peers(c) == sorted(set(pubs) - {pubs[i]}) for i, (_, c) in enumerate(nodes)), 10)
    check(full, "6 nodes reach a full view (%.1f s)" % (time.time() - t0))
    check(wait_for(lambda: all((status(c) or {}).get("reachable") for _, c in nodes), 3),
          "every node is probed by its peers: its advertised address works")
    # Every node ranks every member by a place drawn from its certificate's signature, which the
    # member could not choose, and all agree on each one's place.
    want = {pubs[i]: place_of(keys[i] + ".cert") for i in range(6)}
    seen = [(status(c) or {}) for _, c in nodes]
    check(all(s.get("place") == want[pubs[i]] for i, s in enumerate(seen)) and
          all(v.get("place") == want.get(v["key"]) for s in seen for v in s.get("view", [])),
          "every node's place, by itself and by every peer, is the draw from its certificate (%s)" %
          [s.get("place") for s in seen])
    check((status(c0) or {}).get("dumpable") is False,
          "a node is not dumpable: no core dump, and no other process of its user reads its memory")

    # 2. Hostile input to node 1: raw TCP garbage, then a plain ZeroMQ handshake attempt. The node
    #    keeps serving and its memory stays flat.
    s1 = status(nodes[1][1])
    port1 = int([v for v in status(nodes[2][1])["view"] if v["key"] == pubs[1]][0]["addr"].rsplit(":", 1)[1])
    pid1 = nodes[1][0].pid

    def attack(rounds):
        for i in range(rounds):
            try:
                with socket.create_connection(("127.0.0.1", port1), timeout=1) as sock:
                    sock.sendall(os.urandom(64 + i) if i % 2 else b"\xff" * 10 + b"\x7f" + os.urandom(200))
            except OSError:
                pass
        # A ZeroMQ NULL-mechanism greeting: the CURVE server must refuse the handshake.
        for _ in range(rounds // 6):
            try:
                with socket.create_connection(("127.0.0.1", port1), timeout=1) as sock:
                    sock.sendall(b"\xff" + b"\x00" * 8 + b"\x01\x7f" + b"\x03\x00" + b"NULL" + b"\x00" * 16 + b"\x00" + b"\x00" * 31)
                    sock.settimeout(0.2)
                    try:
                        sock.recv(64)
                    except OSError:
                        pass
            except OSError:
                pass

    attack(100)  # warm-up: first-use allocations are not growth
    time.sleep(0.5)
    before = rss_kb(pid1)
    attack(300)
    time.sleep(1.0)
    after = rss_kb(pid1)
    check(nodes[1][0].poll() is None, "node survives garbage and plain handshakes")
    check(after - before < 4096, "memory stays flat under garbage (%d kB -> %d kB)" % (before, after))
    check(alive_peers(nodes[1][1]) == sorted(set(pubs) - {pubs[1]}), "node still sees its peers after the attack")
    # Unauthenticated bytes never reach the decoder: CURVE stops them first.
    check(status(nodes[1][1])["rejected"] == {}, "garbage never reached the protocol decoder")

    # 2a'. The admission port under a flood of junk datagrams (random bytes, truncated and
    #      unopenable knocks): each is counted by reason, the node keeps its peers, and a real
    #      knock is answered once the flood is over.
    #      Datagrams not even shaped like a knock are dropped before the rate limit: 3000 of
    #      them in well under a second spend none of the 500/s budget that real knocks need.
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    junk = [os.urandom(1), os.urandom(40), b"RMA2\x01" + os.urandom(100), b"RMA2\x07" + os.urandom(56),
            b"RMA1\x01" + os.urandom(320)]
    for i in range(3000):
        udp.sendto(junk[i % len(junk)], ("127.0.0.1", port1))
        if i % 500 == 499:
            time.sleep(0.02)  # let the node read: loopback drops what overflows its buffer
    time.sleep(0.5)
    rej = (status(nodes[1][1]) or {}).get("rejected", {})
    check(rej.get("admit-malformed", 0) >= 1000 and rej.get("admit-rate", 0) == 0,
          "junk that is not knock-shaped spends none of the admission budget (%s)"
          % {k: v for k, v in rej.items() if k.startswith("admit")})
    for i in range(200):  # knock-shaped, but sealed for nobody: opened (budget spent), refused
        udp.sendto(b"RMA2\x01" + os.urandom(320), ("127.0.0.1", port1))
    udp.close()
    time.sleep(1.0)
    s1 = status(nodes[1][1])
    rej = s1["rejected"] if s1 else {}
    print("     admission flood, rejected by node 1:", json.dumps({k: v for k, v in rej.items() if k.startswith("admit")}))
    check(nodes[1][0].poll() is None and rej.get("admit-malformed", 0) > 0 and rej.get("admit-unsealed", 0) > 0,
          "junk datagrams are dropped and counted by reason")
    check(alive_peers(nodes[1][1]) == sorted(set(pubs) - {pubs[1]}), "the node keeps its peers through the flood")

    # 2b. An admitted peer that sends malformed messages is counted and ignored; the node keeps
    #     serving the others. (Needs Debian's python3-zmq for a CurveZMQ client.)
    try:
        import zmq
    except ImportError:
        zmq = None
        SKIPS.append("python3-zmq missing: no authenticated hostile peer (tools/setup --test installs it)")
    if zmq is not None:
        # 2a. A CURVE client whose key never knocked is refused in the handshake, so it cannot
        #     make the node buffer anything. Here: messages of 128 frames of 1 MiB (libzmq holds
        #     every frame of a message until its last one arrives, whatever the high-water mark,
        #     so before the knock existed each one cost the node 128 MiB at its peak).
        ctx = zmq.Context()
        before = rss_kb(pid1, "VmHWM:")
        bomb = ctx.socket(zmq.DEALER)
        bomb.linger = 0
        bomb.curve_publickey, bomb.curve_secretkey = zmq.curve_keypair()
        bomb.curve_serverkey = pubs[1].encode()
        bomb.connect("tcp://127.0.0.1:%d" % port1)
        frame = b"\x00" * (1 << 20)
        for _ in range(3):
            try:
                bomb.send_multipart([frame] * 128, zmq.NOBLOCK)
            except zmq.Again:
                break
        time.sleep(1.5)
        after = rss_kb(pid1, "VmHWM:")
        bomb.close()
        s1 = status(nodes[1][1])
        check(after - before < 8192, "a key that never knocked cannot make the node buffer (peak %d kB -> %d kB)"
              % (before, after))
        check(s1 and s1["rejected"].get("not-admitted", 0) >= 1, "and its handshake is refused and counted: %s"
              % (s1 and s1["rejected"]))

        mallory = make_peer(tmp, swarm, "mallory")
        # Its certificate is valid: `rumor ping` knocks with it and the node admits it.
        node1_rumor = "rumor://%s@127.0.0.1:%d" % (pubs[1], port1)
        r = run("ping", "--key", mallory + ".key", "--cert", mallory + ".cert", "--swarm",
                os.path.join(swarm, "authority.pub"), node1_rumor)
        check(r.returncode == 0 and r.stdout.startswith("admitted by n1,"), "rumor ping: %s" % (r.stdout + r.stderr).strip())

        # 2b'. A replayed knock changes nothing: `rumor ping` knocks through a relay here that
        #      keeps the datagram; sent again later, it is answered but counted as stale (it
        #      would otherwise make node 1 believe mallory restarted).
        relay = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        relay.bind(("127.0.0.1", 0))
        relay.settimeout(0.2)
        up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        up.settimeout(0.2)
        kept = []

        def relay_once(deadline):
            while time.time() < deadline:
                try:
                    data, src = relay.recvfrom(2048)
                except OSError:
                    continue
                kept.append(data)
                up.sendto(data, ("127.0.0.1", port1))
                try:
                    relay.sendto(up.recvfrom(2048)[0], src)
                    return
                except OSError:
                    pass

        import threading
        t = threading.Thread(target=relay_once, args=(time.time() + 5,))
        t.start()
        r = run("ping", "--key", mallory + ".key", "--cert", mallory + ".cert", "--swarm",
                os.path.join(swarm, "authority.pub"), "rumor://%s@127.0.0.1:%d" % (pubs[1], relay.getsockname()[1]))
        t.join()
        stale = lambda: ((status(nodes[1][1]) or {}).get("counters") or {}).get("stale_knocks", -1)
        check(r.returncode == 0 and kept, "a knock through a relay admits (%s)" % (r.stdout + r.stderr).strip())
        time.sleep(0.3)
        before = stale()  # (a knock resent unchanged after a slow answer counts too: compare)
        if kept:
            up.sendto(kept[0], ("127.0.0.1", port1))
            try:
                up.recvfrom(2048)
            except OSError:
                pass
        time.sleep(0.3)
        after = stale()
        check(before >= 0 and after >= before + 1, "the same knock replayed is answered and counted as stale (%s -> %s)"
              % (before, after))
        relay.close()
        up.close()

        def dealer_as(key, server, port):
            """A DEALER with key's CURVE identity, connected to the node of public key server."""
            s = ctx.socket(zmq.DEALER)
            s.linger = 0
            s.curve_secretkey = rumortest.curve_secret(key + ".key")
            s.curve_publickey = key_text(key + ".pub").encode()
            s.curve_serverkey = server.encode()
            s.connect("tcp://127.0.0.1:%d" % port)
            return s
        d = dealer_as(mallory, pubs[1], port1)
        # A member that asks for the node's hello before the node holds its own (both lost the
        # other's) is answered with it, and asked for its own.
        d.send(mp({"v": 5, "t": "bye", "seq": 1, "why": "hello"}))
        got = [d.recv()] if d.poll(3000) else []
        while got and d.poll(300):
            got.append(d.recv())
        check(any(b"\xa4cert" in g for g in got) and any(b"\xa3why\xa5hello" in g for g in got),
              "asked for its hello by a member it holds none of, a node answers with it and asks back (%d replies)"
              % len(got))
        mallory_proof = rumortest.record_proof(mallory + ".key", 1, 0x5eed, "tcp://127.0.0.1:9")
        # (a hello naming a site says its member is undialable: its record, signed, says so too)
        mallory_nat = rumortest.record_proof(mallory + ".key", 1, 0x5eed, "tcp://127.0.0.1:9", undialable=True)

        def hello(seq, **more):
            d.send(mp({"v": 5, "t": "hello", "seq": seq, "cert": cert_bytes(mallory + ".cert"),
                       "addr": "tcp://127.0.0.1:9", "layout": 0, "caps": 0, "inc": 1, "boot": 0x5eed,
                       "proof": mallory_nat if more.get("site") else mallory_proof, **more}))
        hello(1)
        # Hellos come by paths that keep no order between them (a dial each way, relays): one
        # older than the last taken from this run of a member (its seq) changes nothing.
        hello(40, site=0x1111)
        hello(30, site=0x2222)

        def sites_seen(want):
            """The site node 1's view gives mallory, once it is want (or the last seen in 3 s)."""
            seen = None
            for _ in range(30):
                st = status(nodes[1][1]) or {}
                seen = next((v.get("site") for v in st.get("view", []) if v["key"] == key_text(mallory + ".pub")), seen)
                if seen == want:
                    break
                time.sleep(0.1)
            return seen, (st.get("counters") or {}).get("stale_hellos")
        got = sites_seen("0000000000001111")
        check(got[0] == "0000000000001111" and (got[1] or 0) >= 1, "a hello older than the one taken changes nothing, and is counted (%s)" %
              (got,))
        hello(41, site=0x2222)
        got = sites_seen("0000000000002222")
        check(got[0] == "0000000000002222", "... and a newer one does (%s)" % (got,))
        # A member that tells two peers two things at one incarnation (node 1: behind NAT, a
        # site; node 2: dialable) moves neither graph its way: where the graph places a member
        # comes from its signed record, and of two records at one incarnation every peer keeps
        # the greater, so nodes 1 and 2 end holding the same (undialable) and the same place.
        port2 = int([v for v in status(nodes[1][1])["view"] if v["key"] == pubs[2]][0]["addr"].rsplit(":", 1)[1])
        r = run("ping", "--key", mallory + ".key", "--cert", mallory + ".cert", "--swarm",
                os.path.join(swarm, "authority.pub"), "rumor://%s@127.0.0.1:%d" % (pubs[2], port2))
        d2 = dealer_as(mallory, pubs[2], port2)
        d2.send(mp({"v": 5, "t": "hello", "seq": 1, "cert": cert_bytes(mallory + ".cert"), "addr": "tcp://127.0.0.1:9",
                    "layout": 0, "caps": 0, "inc": 1, "boot": 0x5eed, "proof": mallory_proof}))

        def mallory_at(ctl):
            st = status(ctl) or {}
            return next(((v.get("dialable"), v.get("place")) for v in st.get("view", [])
                         if v["key"] == key_text(mallory + ".pub")), None)
        agreed = wait_for(lambda: mallory_at(nodes[1][1]) == mallory_at(nodes[2][1]) ==
                          (False, place_of(mallory + ".cert")), 3)
        check(r.returncode == 0 and agreed, "two peers told two records at one incarnation hold the same one: %s, %s"
              % (mallory_at(nodes[1][1]), mallory_at(nodes[2][1])))
        d2.close()
        bad = [
            b"\xc1garbage",                                           # reserved byte
            b"\xdf\xff\xff\xff\xff" + b"\x00" * 5,                     # a map claiming 4 billion entries
            mp({"v": 5, "t": "ping", "seq": 2}) [:-1] + b"\xdb\xff\xff\xff\xff",  # a str with a lying length
            b"\xde\x00\x28" + b"".join(mp("k%d" % i) + mp(i) for i in range(40)),  # 40 entries
            mp({"v": 6, "t": "ping", "seq": 3, "inc": 1}),               # a version from the future
            mp({"v": 4, "t": "ping", "seq": 3, "inc": 1}),               # the version before
            mp({"v": 5, "t": "nonsense", "seq": 4}),                     # an unknown type
            mp({"v": 5, "t": "ping", "seq": 5, "inc": 1}) + b"\x00",     # trailing bytes
        ]
        for b in bad:
            d.send(b)
        # A model chunk whose payload disagrees with its header, and a message of four frames.
        d.send_multipart([mp({"v": 5, "t": "model", "seq": 6, "round": 1, "w": 1.0, "codec": 0, "layout": 7,
                              "chunk": 0, "chunks": 1, "off": 0, "n": 10}), b"\x00" * 39])
        d.send_multipart([b"a", b"b", b"c"])
        time.sleep(1.0)
        s1 = status(nodes[1][1])
        rej = s1["rejected"] if s1 else {}
        print("     rejected by node 1:", json.dumps(rej, sort_keys=True))
        check(nodes[1][0].poll() is None, "node survives an admitted peer's malformed messages")
        for reason in ("malformed", "too-large", "bad-version", "bad-type", "trailing-bytes", "bad-payload", "bad-frames"):
            check(rej.get(reason, 0) >= 1, "rejected as %s and counted" % reason)
        check("cert-key-mismatch" not in rej, "the hostile peer itself was admitted (its cert is valid)")
        # (mallory itself may show up in their views until its fake address fails the probes)
        check(set(pubs) - {pubs[2]} <= set(alive_peers(nodes[2][1]) or []), "the others are unaffected")

        # 2c. Forged membership entries from the admitted hostile peer: a made-up key at an
        #     address of its choosing (without a certificate, and with one issued for another
        #     key) is neither dialled nor kept; node 2 declared dead at the top of the
        #     incarnation range, and moved to that address, stays where it is, alive.
        trap_tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        trap_tcp.bind(("127.0.0.1", 0))
        trap_tcp.listen(16)
        trap_tcp.settimeout(0.05)
        trap_port = trap_tcp.getsockname()[1]
        trap_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            trap_udp.bind(("127.0.0.1", trap_port))
        except OSError:
            trap_udp.bind(("127.0.0.1", 0)) # (the UDP port is taken: TCP is watched alone)
        trap_udp.settimeout(0.05)
        trap = "tcp://127.0.0.1:%d" % trap_port
        import zmq.utils.z85
        fake = os.urandom(32)
        node2_key = zmq.utils.z85.decode(pubs[2])
        before = (status(nodes[1][1]) or {}).get("rejected", {})
        for k in range(5):
            d.send(mp({"v": 5, "t": "peers", "seq": 20 + k, "peers": [
                {"k": fake, "a": trap, "inc": 1, "s": 0},
                {"k": fake, "a": trap, "inc": 2, "s": 0, "cert": cert_bytes(mallory + ".cert")},
                {"k": node2_key, "a": trap, "inc": 0xFFFFFFFF, "s": 2, "cert": cert_bytes(keys[2] + ".cert")},
                {"k": node2_key, "a": trap, "inc": 0xFFFFFFFE, "s": 0, "cert": cert_bytes(keys[2] + ".cert")},
            ]}))
        knocked = dialled = 0
        end = time.time() + 3.0
        while time.time() < end:
            try:
                c, _ = trap_tcp.accept()
                c.close()
                dialled += 1
            except (socket.timeout, BlockingIOError):
                pass
            try:
                trap_udp.recvfrom(2048)
                knocked += 1
            except (socket.timeout, BlockingIOError):
                pass
        trap_tcp.close()
        trap_udp.close()
        after = (status(nodes[1][1]) or {}).get("rejected", {})
        print("     forged entries, rejected by node 1:",
              json.dumps({k: after.get(k, 0) - before.get(k, 0) for k in ("entry-cert", "unsigned-record")}))
        check(knocked == 0 and dialled == 0, "a forged entry makes the node dial nothing (%d knocks, %d connections)"
              % (knocked, dialled))
        check(after.get("entry-cert", 0) - before.get("entry-cert", 0) >= 10,
              "entries without a valid certificate for their key are dropped and counted")
        check(after.get("unsigned-record", 0) - before.get("unsigned-record", 0) >= 10,
              "entries about node 2 that node 2 did not sign (dead at the top of the range, at the trap's address) "
              "are dropped and counted")
        v2 = [v for v in (status(nodes[1][1]) or {}).get("view", []) if v["key"] == pubs[2]]
        check(v2 and v2[0]["state"] == "alive" and v2[0]["addr"] != trap,
              "node 2 stays in node 1's view, alive, at its own address: %s" % v2)
        # Each made-up key with a certificate costs a verification (no cache can know it): 20
        # messages of 64 such entries at once are checked at most to the sender's budget (64 a
        # second, 64 at once), the rest dropped and counted.
        before = (status(nodes[1][1]) or {}).get("rejected", {})
        t_sent = time.time()
        for k in range(20):
            d.send(mp({"v": 5, "t": "peers", "seq": 30 + k, "peers": [
                {"k": os.urandom(32), "a": trap, "inc": 1, "s": 0, "cert": cert_bytes(mallory + ".cert")}
                for _ in range(64)]}))
        time.sleep(0.5)
        after = (status(nodes[1][1]) or {}).get("rejected", {})
        checked = after.get("entry-cert", 0) - before.get("entry-cert", 0)
        over = after.get("entry-budget", 0) - before.get("entry-budget", 0)
        allowed = 64 + 64 * (time.time() - t_sent)
        check(checked + over == 20 * 64 and checked <= allowed,
              "1280 entries with certificates of made-up keys: %d checked (at most %.0f), %d dropped over the budget "
              "(%s)" % (checked, allowed, over, {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}))

        # 2c'. Node 2's genuine record (what every member holds and passes on) replayed with a
        #      claim of death every 100 ms for 6 s, and with another boot id (which would make
        #      secure mixing's masks disagree): node 1 checks each claim with a ping, node 2
        #      answers, and it never leaves node 1's view; mallory's claims, disproved, are then
        #      ignored; the boot id stays node 2's.
        if v2:
            inc2, addr2, boot2 = v2[0]["inc"], v2[0]["addr"], int(v2[0]["boot"], 16)
            proof2 = rumortest.record_proof(keys[2] + ".key", inc2, boot2, addr2)
            entry = {"k": node2_key, "a": addr2, "inc": inc2, "s": 2, "cert": cert_bytes(keys[2] + ".cert"),
                     "boot": boot2, "proof": proof2}
            gone = 0
            log1 = keys[1] + ".log"
            before = (status(nodes[1][1]) or {}).get("rejected", {}).get("unsigned-record", 0)
            for k in range(60):
                d.send(mp({"v": 5, "t": "peers", "seq": 60 + k, "peers": [entry, dict(entry, s=0, boot=0xbad)]}))
                time.sleep(0.1)
                if k % 5 == 4:
                    view = [v for v in (status(nodes[1][1]) or {}).get("view", []) if v["key"] == pubs[2]]
                    gone += not view
            s1 = status(nodes[1][1]) or {}
            ctr = s1.get("counters", {})
            v2 = [v for v in s1.get("view", []) if v["key"] == pubs[2]]
            print("     replayed record, node 1:", {k: ctr.get(k) for k in ("disproved", "muted", "suspicions")})
            check(gone == 0 and v2 and v2[0]["state"] == "alive",
                  "6 s of node 2's own record replayed with 'dead': node 2 never leaves node 1's view (%d checks "
                  "without it, %s)" % (gone, v2))
            check(ctr.get("disproved", 0) >= 3 and ctr.get("muted", 0) >= 1,
                  "the claims node 2's answers disproved are counted, and their sender is ignored (%s)" % ctr)
            check(v2 and v2[0]["boot"] == "%016x" % boot2 and
                  s1.get("rejected", {}).get("unsigned-record", 0) - before >= 50,
                  "the boot id stays node 2's own; the entry with another is dropped as unsigned (%s)" % v2)
            if os.path.exists(log1):
                check(" dead" not in "".join(l for l in open(log1) if pubs[2][:8] in l),
                      "node 1 never logged node 2 dead")

        # 2e. A forged relay handshake (security review 3, finding 3): mallory, relaying, hands
        #     node 1 an init "from node 2" with an ephemeral key of its own. Only node 2 can
        #     sign one: node 1 answers nothing (no accept, no session through mallory) and
        #     counts it.
        while d.poll(100):
            d.recv_multipart()
        before = (status(nodes[1][1]) or {}).get("rejected", {}).get("relayed-unopened", 0)
        d.send(mp({"v": 5, "t": "relay", "seq": 90, "from": node2_key, "kind": 1, "eph": os.urandom(32),
                   "proof": os.urandom(96), "sent": int(time.time() * 1000)}))
        answers = []
        end = time.time() + 1.5
        while time.time() < end:
            if d.poll(100):
                answers += [p for p in d.recv_multipart() if b"\xa4kind\x02" in p]
        after = (status(nodes[1][1]) or {}).get("rejected", {}).get("relayed-unopened", 0)
        check(not answers and after >= before + 1,
              "a relay's init in node 2's name is refused: no accept (%d), counted (%d -> %d)"
              % (len(answers), before, after))

        # 2d. The admitted key floods: messages of 128 frames of 1 MiB (libzmq holds every frame
        #     of a message until its last one arrives, and counts no frames against its
        #     high-water mark), then a message whose last frame never comes. The node's guard cuts
        #     a connection once libzmq holds more for it than any honest traffic needs (about
        #     21 MiB; what arrives between two of its checks comes on top, and on a busy machine
        #     the node's thread may run late): its peak memory grows by far less than one such
        #     message (measured +25 to +35 MB; the bound below leaves room for a loaded machine,
        #     and the code before the guard grew by 128 MB a message).
        before = rss_kb(pid1, "VmHWM:")
        frame = b"\x00" * (1 << 20)
        for _ in range(3):
            d.send_multipart([frame] * 128, copy=False)
        for _ in range(16):
            d.send(frame, zmq.SNDMORE, copy=False)
        time.sleep(3.0)
        after = rss_kb(pid1, "VmHWM:")
        s1 = status(nodes[1][1])
        rej = s1["rejected"] if s1 else {}
        print("     multi-frame flood: peak %d kB -> %d kB, guard %s" % (before, after, s1 and {
            k: s1["counters"].get(k) for k in ("connections", "held_peak")}))
        check(nodes[1][0].poll() is None, "node survives an admitted peer's endless messages")
        check(rej.get("held-too-much", 0) >= 1, "the connection holding too much is cut and counted: %s" % rej)
        check(after - before < 80 * 1024, "an admitted key cannot make the node hold more than the guard's bound "
              "(peak %d kB -> %d kB, one message is 131072 kB)" % (before, after))
        check(set(pubs) - {pubs[1], pubs[2]} <= set(alive_peers(nodes[2][1]) or []) and
              sorted(set(pubs) - {pubs[1]}) == sorted(set(alive_peers(nodes[1][1]) or []) - {key_text(mallory + ".pub")}),
              "the node keeps its honest peers through the flood")
        d.close()
        relay_share(ctx, tmp, swarm, mallory, pubs, port1, nodes[1][1])
        ctx.term()

    # 3. SIGKILL the bootstrap: the others declare it dead within the suspicion time and keep a
    #    connected view.
    p0.send_signal(signal.SIGKILL)
    p0.wait()
    t0 = time.time()
    rest = sorted(pubs[1:])
    ok = wait_for(lambda: all(view_keys(c) == sorted(set(rest) - {pubs[i + 1]}) for i, (_, c) in enumerate(nodes[1:])), 10)
    took = time.time() - t0
    # Not before a period and the suspicion time (1.2 s here): a suspect is not yet dead.
    check(ok and took >= 1.0, "a killed bootstrap is declared dead by all (%.1f s)" % took)
    check(all(alive_peers(c) == sorted(set(rest) - {pubs[i + 1]}) for i, (_, c) in enumerate(nodes[1:])),
          "the other five still see each other alive")

    # 4. SIGTERM sends bye: the others drop the peer at once, without waiting for suspicion.
    p5, c5 = nodes[5]
    p5.send_signal(signal.SIGTERM)
    rc = p5.wait(timeout=5)
    check(rc == 0, "SIGTERM: clean exit (%s)" % rc)
    t0 = time.time()
    rest = sorted(pubs[1:5])
    ok = wait_for(lambda: all(view_keys(c) == sorted(set(rest) - {pubs[i + 1]}) for i, (_, c) in enumerate(nodes[1:5])), 10)
    took = time.time() - t0
    # At once means by its bye, not by failed probes and suspicion: each says it left, none that
    # it died (a time bound would say the same on an idle machine only; about 0.05 s there).
    logs = [open(k + ".log").read() for k in keys[1:5]]
    said = ["peer %s left" % pubs[5][:8] in l and "peer %s dead" % pubs[5][:8] not in l for l in logs]
    check(ok and all(said), "bye drops the peer at once: every other says it left, none that it died (%.2f s, %s)"
          % (took, said))

    # 5. A node of another swarm is refused and exits with a one-line reason.
    other = os.path.join(tmp, "other")
    assert run("swarm", "init", other).returncode == 0
    stranger = make_peer(tmp, other, "stranger")
    args = [RUMOR, "node", "--key", stranger + ".key", "--cert", stranger + ".cert",
            "--swarm", os.path.join(other, "authority.pub"), "--listen", "tcp://127.0.0.1:0",
            "--period", "200", "--suspect", "1000",
            "--bootstrap", "rumor://%s@%s" % (pubs[1], status(nodes[2][1])["view"][0]["addr"][6:] if False else
                                               [v for v in status(nodes[2][1])["view"] if v["key"] == pubs[1]][0]["addr"][6:])]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=15)
        lines = [l for l in r.stderr.splitlines() if l.startswith("rumor: error:")]
        check(r.returncode == 2 and len(lines) == 1 and "other-swarm" in lines[0],
              "a stranger is refused with one line: %s" % (lines[0] if lines else r.stderr.strip()[-200:]))
    except subprocess.TimeoutExpired:
        check(False, "a stranger is refused (it hung)")
    s = status(nodes[1][1])
    check(s and s["rejected"].get("cert-other-swarm", 0) >= 1, "the refusal is counted by reason")
    node1_addr = [v for v in status(nodes[2][1])["view"] if v["key"] == pubs[1]][0]["addr"][6:]
    r = run("ping", "--key", stranger + ".key", "--cert", stranger + ".cert", "--swarm",
            os.path.join(other, "authority.pub"), "rumor://%s@%s" % (pubs[1], node1_addr))
    lines = [l for l in r.stderr.splitlines() if l.startswith("rumor: error:")]
    check(r.returncode == 1 and len(lines) == 1 and "refuses this node: certificate other-swarm" in lines[0],
          "rumor ping says why a node refuses: %s" % (lines[0] if lines else r.stderr.strip()))
    r = run("ping", "--key", stranger + ".key", "--cert", stranger + ".cert", "--swarm",
            os.path.join(other, "authority.pub"), "--timeout", "1", "rumor://%s@%s" % (key_text(stranger + ".pub"), node1_addr))
    lines = [l for l in r.stderr.splitlines() if l.startswith("rumor: error:")]
    check(r.returncode != 0 and len(lines) == 1 and "has the key " + pubs[1] in lines[0],
          "rumor ping names the key a node really has: %s" % (lines[0] if lines else r.stderr.strip()))

    # 5b. A certificate for another key is caught before the node even starts.
    r = run("node", "--key", keys[2] + ".key", "--cert", keys[3] + ".cert", "--swarm", os.path.join(swarm, "authority.pub"),
            "--listen", "tcp://127.0.0.1:0")
    lines = [l for l in r.stderr.splitlines() if l.startswith("rumor: error:")]
    check(r.returncode == 2 and len(lines) == 1 and "key-mismatch" in lines[0],
          "a certificate for another key: %s" % (lines[0] if lines else r.stderr.strip()))

    # 6. A bootstrap that cannot be joined is diagnosed, not waited on forever.
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    free_port = free.getsockname()[1]
    free.close()
    node1_addr = [v for v in status(nodes[2][1])["view"] if v["key"] == pubs[1]][0]["addr"][6:]
    cases = [("rumor://%s@127.0.0.1:%d" % (pubs[1], free_port), "connection refused", ()),
             ("rumor://%s@%s" % (key_text(stranger + ".pub"), node1_addr), "has the key " + pubs[1], ())]
    for boot, want, extra in cases:
        args = [RUMOR, "node", "--key", keys[0] + ".key", "--cert", keys[0] + ".cert",
                "--swarm", os.path.join(swarm, "authority.pub"), "--listen", "tcp://127.0.0.1:0",
                "--join-timeout", "2", "--bootstrap", boot, *extra]
        t0 = time.time()
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=15)
            lines = [l for l in r.stderr.splitlines() if l.startswith("rumor: error:")]
            check(r.returncode == 2 and len(lines) == 1 and want in lines[0] and time.time() - t0 < 6,
                  "unjoinable bootstrap (%s) explained: %s" % (want, lines[0] if lines else r.stderr.strip()[-200:]))
        except subprocess.TimeoutExpired:
            check(False, "unjoinable bootstrap (%s) explained (it hung)" % want)

    # 6a. A node nobody can dial (its advertised address leads nowhere, as behind NAT) joins
    # all the same: its peers answer over the connection it opened to them, give up dialling
    # it after a bounded try, and it says that it cannot be dialled.
    na, nca, _ = start(tmp, swarm, keys[0], bootstrap="rumor://%s@%s" % (pubs[1], node1_addr),
                       extra=("--advertise", "tcp://127.0.0.1:%d" % free_port))
    t0 = time.time()
    joined = wait_for(lambda: pubs[1] in (view_keys(nca) or []), 5)
    check(joined, "a node that cannot be dialled joins through its own connection (%.1f s)" % (time.time() - t0))

    def via_at_node1():
        st = status(nodes[1][1]) or {}
        return ([v.get("via") for v in st.get("view", []) if v["key"] == pubs[0]] or [None])[0], st

    ok = wait_for(lambda: via_at_node1()[0] == "outbound" and
                  via_at_node1()[1]["counters"]["dials_given_up"] >= 1, 8)
    via, st1 = via_at_node1()
    check(ok, "its bootstrap reaches it over its own connection and gave up dialling it (via %s, dials given up %s)"
          % (via, st1.get("counters", {}).get("dials_given_up")))
    said = wait_for(lambda: "cannot be dialled" in open(keys[0] + ".log").read(), 6)
    check(said, "it says that it cannot be dialled")

    def relays_at_node1():
        st = status(nodes[1][1]) or {}
        return ([v.get("relays") for v in st.get("view", []) if v["key"] == pubs[0]] or [None])[0]

    check(wait_for(lambda: relays_at_node1() is False, 3) and
          all(v.get("relays") for v in (status(nodes[1][1]) or {}).get("view", []) if v["key"] != pubs[0]),
          "... and no longer offers to relay (it could reach nobody it does not dial); the others do")
    dialable = {v["key"]: v.get("dialable") for v in (status(nodes[1][1]) or {}).get("view", [])}
    check(dialable.get(pubs[0]) is False and all(d for k, d in dialable.items() if k != pubs[0]),
          "... and its hello says it cannot be dialled (gossip graphs keep such members apart): %s"
          % sorted(dialable.values()))
    alive = wait_for(lambda: pubs[0] in (alive_peers(nodes[1][1]) or []) and time.time() - t0 > 6, 10)
    check(alive and na.poll() is None, "... and stays an alive member (pings go back over its connection)")
    # 6c. Two such nodes cannot reach each other: they talk through node 1, sealed end to end.
    free2 = socket.socket()
    free2.bind(("127.0.0.1", 0))
    free_port2 = free2.getsockname()[1]
    free2.close()
    nb, ncb, _ = start(tmp, swarm, keys[5], bootstrap="rumor://%s@%s" % (pubs[1], node1_addr),
                       extra=("--advertise", "tcp://127.0.0.1:%d" % free_port2))

    def relayed():
        a, b = status(nca) or {}, status(ncb) or {}
        va = [v.get("via", "") for v in a.get("view", []) if v["key"] == pubs[5]]
        vb = [v.get("via", "") for v in b.get("view", []) if v["key"] == pubs[0]]
        return va, vb, a, b

    ok = wait_for(lambda: all(v and v[0].startswith("relay:") for v in relayed()[:2]) and
                  relayed()[2]["counters"]["received_via_relay_msgs"] > 0 and
                  relayed()[3]["counters"]["received_via_relay_msgs"] > 0, 20)
    va, vb, sa, sb = relayed()
    s1 = status(nodes[1][1]) or {}
    check(ok and s1.get("counters", {}).get("relayed_msgs", 0) > 0,
          "two nodes nobody can dial reach each other through a relay (via %s and %s; node 1 relayed %s messages)"
          % (va, vb, s1.get("counters", {}).get("relayed_msgs")))
    check(not sa.get("rejected", {}).get("relayed-unopened") and not sb.get("rejected", {}).get("relayed-unopened"),
          "every relayed message opened (%s, %s)" % (sa.get("rejected"), sb.get("rejected")))
    for proc in (na, nb):
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)

    # 6d. A relay that alters what it carries (--attack relay-tamper flips a bit of each sealed
    # message it forwards) is caught: nothing it forwards is taken, the refusals are counted,
    # and once an honest relay is there the two ends agree new keys through it. (A period of
    # 1 s: membership gives a member that never answers 31 s before it forgets it, time enough
    # under a sanitizer.)
    hk, rk = make_peer(tmp, swarm, "hostile"), make_peer(tmp, swarm, "honest")
    rpub = key_text(rk + ".pub")
    hp, hc, haddr = start(tmp, swarm, hk, extra=("--attack", "relay-tamper"), period=1000)
    ends = []
    for k in (keys[0], keys[5]):
        s_ = socket.socket()
        s_.bind(("127.0.0.1", 0))
        port = s_.getsockname()[1]
        s_.close()
        ends.append(start(tmp, swarm, k, bootstrap=haddr, extra=("--advertise", "tcp://127.0.0.1:%d" % port),
                          period=1000))
    (ta, tca, _), (tb, tcb, _) = ends

    def through():
        a, b = status(tca) or {}, status(tcb) or {}
        va = [v.get("via", "") for v in a.get("view", []) if v["key"] == pubs[5]]
        vb = [v.get("via", "") for v in b.get("view", []) if v["key"] == pubs[0]]
        return va, vb, a, b

    def unopened():
        return [s_.get("rejected", {}).get("relayed-unopened", 0) for s_ in through()[2:]]

    caught = wait_for(lambda: sum(unopened()) > 0, 15)
    sh = status(hc) or {}
    got = [s_.get("counters", {}).get("received_via_relay_msgs", 0) for s_ in through()[2:]]
    check(caught and got == [0, 0] and sh.get("counters", {}).get("relayed_msgs", 0) > 0,
          "what a hostile relay forwards does not open, and is counted (relayed by it: %s; refused: %s; taken: %s)"
          % (sh.get("counters", {}).get("relayed_msgs"), unopened(), got))
    rp, rc_, _ = start(tmp, swarm, rk, bootstrap=haddr, period=1000)

    def honest():
        va, vb, a, b = through()
        return (va == ["relay:" + rpub[:8]] and vb == ["relay:" + rpub[:8]] and
                a.get("counters", {}).get("received_via_relay_msgs", 0) > 0 and
                b.get("counters", {}).get("received_via_relay_msgs", 0) > 0)

    moved = wait_for(honest, 30)
    va, vb, _, _ = through()
    check(moved and all(p_.poll() is None for p_ in (hp, rp, ta, tb)),
          "... and once an honest relay is there, the two ends move to it and exchange through it (via %s and %s, "
          "honest relay %s)" % (va, vb, rpub[:8]))
    for proc in (ta, tb, hp, rp):
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)

    # 6b. A node that once joined stays up when its view empties (churn is not a failed join).
    ja, jca, jaddr = start(tmp, swarm, keys[0])
    jb, jcb, _ = start(tmp, swarm, keys[5], bootstrap=jaddr, extra=("--join-timeout", "1"))
    check(wait_for(lambda: view_keys(jcb) == [pubs[0]], 5), "a node joins")
    ja.send_signal(signal.SIGTERM)
    ja.wait(timeout=5)
    time.sleep(2.5)
    vk = view_keys(jcb)
    check(jb.poll() is None and vk == [], "alone after its bootstrap left, it keeps running (exit %s, view %s)"
          % (jb.poll(), vk))
    if jb.poll() is not None:
        with open(keys[5] + ".log") as f:
            print("     " + "     ".join(f.readlines()[-5:]))
    jb.send_signal(signal.SIGTERM)
    jb.wait(timeout=5)

    # 7. Revocation: a key added to the list and SIGHUP reloading it lose their admission.
    revoked = os.path.join(tmp, "revoked.txt")
    with open(revoked, "w") as f:
        f.write("# nobody yet\n")
    ra, rca, raddr = start(tmp, swarm, keys[0], extra=("--revoked", revoked))
    rb, rcb, _ = start(tmp, swarm, keys[5], bootstrap=raddr)
    check(wait_for(lambda: view_keys(rca) == [pubs[5]], 5), "a listed-to-be peer joins first")
    with open(revoked, "a") as f:
        f.write(pubs[5] + "\n")
    ra.send_signal(signal.SIGHUP)
    t0 = time.time()
    ok = wait_for(lambda: view_keys(rca) == [], 8)
    check(ok, "after SIGHUP the revoked peer is dropped (%.1f s)" % (time.time() - t0))
    s = status(rca)
    check(s and s["rejected"].get("cert-revoked", 0) >= 1, "and refused by reason: %s" % (s and s["rejected"]))
    for p in (ra, rb):
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=5)

    # 8. IPv6, where the machine has it.
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
        has_v6 = True
    except OSError:
        has_v6 = False
    if has_v6:
        extra = ("--listen", "tcp://[::1]:0")
        va, vca, vaddr = start(tmp, swarm, keys[0], extra=extra)
        vb, vcb, _ = start(tmp, swarm, keys[5], bootstrap=vaddr, extra=extra)
        check(vaddr is not None and "@[::1]:" in vaddr, "an IPv6 node prints a bracketed address: %s" % vaddr)
        check(wait_for(lambda: view_keys(vcb) == [pubs[0]] and view_keys(vca) == [pubs[5]], 5),
              "two nodes join over IPv6")
        for p in (va, vb):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=5)
    else:
        SKIPS.append("no IPv6 loopback here")

    for p, _ in nodes[1:5]:
        p.send_signal(signal.SIGTERM)
    for p, _ in nodes[1:5]:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
    print("%d failed" % len(FAILS))
    for why in SKIPS:
        print("skip: %s" % why)
    # A part that could not run makes the whole test a skip (meson counts exit 77 as one), never
    # a pass: the green line must not promise what was not checked.
    return 1 if FAILS else 77 if SKIPS else 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
    sys.exit(rc)
