"""What the Python integration tests share: the check that records failures, running the
rumor binary, asking a node its status, making an admitted peer, and reading exported
models.

A test sets rumortest.RUMOR to the binary before calling run or make_peer."""
import atexit
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

RUMOR = None
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def _note_crash(kind, value, tb):
    FAILS.append("uncaught %s" % kind.__name__)
    sys.__excepthook__(kind, value, tb)


def scratch(name):
    """A private scratch directory for a test (mode 0700: it holds secret keys and models),
    removed when the test process ends with every check passed; after a failed check or an
    uncaught exception it is kept, and the test says where, for a look at the nodes' logs."""
    tmp = tempfile.mkdtemp(prefix="rumor-test-%s-" % name)
    sys.excepthook = _note_crash

    def tidy():
        if FAILS:
            print("(kept for inspection: %s)" % tmp, flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    atexit.register(tidy)
    return tmp


def run(*args):
    return subprocess.run([RUMOR, *args], capture_output=True, text=True, timeout=30)


def status(ctl):
    """`rumor status --json` of the node at control endpoint ctl; None when it does not answer."""
    r = run("status", "--control", ctl, "--json")
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def rss_kb(pid, what="VmRSS:"):
    """A process's resident memory now, or at its peak with what="VmHWM:" (kB)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(what):
                return int(line.split()[1])
    return 0


def curve_secret(path):
    """The Curve25519 secret of a rumor peer key file, as Z85 bytes for pyzmq's curve_secretkey:
    the file holds Z85 of "RMK2" and an Ed25519 seed; the Curve25519 secret is the clamped first
    half of the seed's SHA-512 (libsodium's crypto_sign_ed25519_sk_to_curve25519)."""
    import hashlib
    import zmq.utils.z85
    with open(path) as f:
        line = [l.strip() for l in f if l.strip() and not l.startswith("#")][0]
    raw = zmq.utils.z85.decode(line)
    assert raw[:4] == b"RMK2", "%s: not a rumor peer secret key" % path
    h = bytearray(hashlib.sha512(raw[4:]).digest()[:32])
    h[0] &= 248
    h[31] = (h[31] & 127) | 64
    return zmq.utils.z85.encode(bytes(h))


def _ed25519_sign(seed, msg):
    """Ed25519 (RFC 8032 section 5.1) in plain Python: (public key, signature). Slow (a few
    ms), which a test's handful of signatures does not notice."""
    import hashlib
    p, q = 2**255 - 19, 2**252 + 27742317777372353535851937790883648493
    d = -121665 * pow(121666, p - 2, p) % p

    def add(P, Q):
        a, b = (P[1] - P[0]) * (Q[1] - Q[0]) % p, (P[1] + P[0]) * (Q[1] + Q[0]) % p
        c, e = 2 * P[3] * Q[3] * d % p, 2 * P[2] * Q[2] % p
        return ((b - a) * (e - c) % p, (e + c) * (b + a) % p, (e - c) * (e + c) % p, (b - a) * (b + a) % p)

    def mul(s, P):
        Q = (0, 1, 1, 0)
        while s:
            if s & 1:
                Q = add(Q, P)
            P, s = add(P, P), s >> 1
        return Q

    def compress(P):
        zi = pow(P[2], p - 2, p)
        x, y = P[0] * zi % p, P[1] * zi % p
        return int.to_bytes(y | ((x & 1) << 255), 32, "little")
    gy = 4 * pow(5, p - 2, p) % p
    x2 = (gy * gy - 1) * pow(d * gy * gy + 1, p - 2, p) % p
    gx = pow(x2, (p + 3) // 8, p)
    if (gx * gx - x2) % p:
        gx = gx * pow(2, (p - 1) // 4, p) % p
    if gx & 1:
        gx = p - gx
    G = (gx, gy, 1, gx * gy % p)
    h = hashlib.sha512(seed).digest()
    a = (int.from_bytes(h[:32], "little") & ((1 << 254) - 8)) | (1 << 254)
    A = compress(mul(a, G))
    r = int.from_bytes(hashlib.sha512(h[32:] + msg).digest(), "little") % q
    R = compress(mul(r, G))
    k = int.from_bytes(hashlib.sha512(R + A + msg).digest(), "little") % q
    return A, R + int.to_bytes((r + k * a) % q, 32, "little")


def record_proof(key_path, inc, boot, addr, undialable=False):
    """What a member of key file key_path puts in its hello as "proof" (PROTOCOL.md, "Member
    records"): its Ed25519 public key and its signature of its record (key, inc, boot,
    undialable, addr); a hello's record is undialable when its caps have bit 4 or it names a
    site."""
    import struct
    import zmq.utils.z85
    with open(key_path) as f:
        line = [l.strip() for l in f if l.strip() and not l.startswith("#")][0]
    with open(key_path[:-4] + ".pub") as f:
        pub = zmq.utils.z85.decode([l.strip() for l in f if l.strip() and not l.startswith("#")][0])
    seed = zmq.utils.z85.decode(line)[4:]
    rec = b"rumor-member-2\0\0" + pub + struct.pack(">IQBB", inc, boot, 1 if undialable else 0, len(addr)) + addr.encode()
    signer, sig = _ed25519_sign(seed, rec)
    return signer + sig


def make_peer(tmp, swarm, name, days="30"):
    """A key pair tmp/name.{key,pub} and a certificate of the swarm for it."""
    key = os.path.join(tmp, name)
    r = run("keygen", "-o", key)
    assert r.returncode == 0, r.stderr
    r = run("swarm", "admit", "-a", swarm, "-o", key + ".cert", "--name", name, "--days", days, key + ".pub")
    assert r.returncode == 0, r.stderr
    return key


def has_dataset(data):
    """Whether data holds an MNIST-format training set (gzip or plain)."""
    return any(os.path.exists(os.path.join(data, n)) for n in ("train-images-idx3-ubyte.gz", "train-images-idx3-ubyte"))


def data_test_args(argv):
    """A test's RUMOR_BINARY and DATA_DIR arguments (RUMOR set from them); None when there is
    no dataset there, having said so (the caller skips: 77)."""
    global RUMOR
    RUMOR = os.path.abspath(argv[1])
    if not has_dataset(argv[2]):
        print("skip: no dataset at " + argv[2])
        return None
    return RUMOR, argv[2]


def tensors(path):
    """The F32 tensors of a safetensors file, as tuples of floats."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for name, t in head.items():
        if name != "__metadata__":
            b, e = t["data_offsets"]
            out[name] = struct.unpack("<%df" % ((e - b) // 4), raw[8 + n + b:8 + n + e])
    return out


def metadata(path):
    """A safetensors file's __metadata__."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n])["__metadata__"]


def rewrite_metadata(path, fn):
    """Replace a safetensors file's __metadata__ with fn(old metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    head["__metadata__"] = fn(head["__metadata__"])
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def dist(a, b):
    """Euclidean distance between two models' tensors."""
    return sum((x - y) ** 2 for k in a for x, y in zip(a[k], b[k])) ** 0.5


def norm(a):
    return dist(a, {k: [0.0] * len(v) for k, v in a.items()})
