#!/usr/bin/env python3
"""Test tools/safetensors_torch.py against files built here, byte by byte, from the format.

The files are written with struct and json only (not with the tool), so a misreading of
the format in the tool cannot cancel out against the same misreading in the test.
Exits 77 (skip) when torch is not importable. Run with Debian's /usr/bin/python3.
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
except ImportError:
    print("torch not importable: skipping", file=sys.stderr)
    sys.exit(77)

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tools")
sys.path.insert(0, TOOLS)
import safetensors_torch as st  # noqa: E402

DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "U8": 1, "BOOL": 1, "U16": 2}


def build(tensors, metadata=None, pad=True):
    """Bytes of a safetensors file: tensors is [(name, dtype, shape, raw bytes)], laid out
    in the given order. The header is padded with spaces to 8-byte alignment when pad."""
    header, data, at = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(raw)]}
        data += raw
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def raw_header(text, data=b"", hlen=None):
    """A file from literal header text, for malformed cases."""
    text = text.encode("utf-8") if isinstance(text, str) else text
    return struct.pack("<Q", len(text) if hlen is None else hlen) + text + data


def f32_bits(bits):
    return struct.pack("<%dI" % len(bits), *bits)


class SafetensorsTorchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, content):
        path = os.path.join(self.dir.name, name)
        with open(path, "wb") as f:
            f.write(content)
        return path

    def test_f32_bit_exact(self):
        special = [0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000,
                   0x7FC12345, 0xFFBADBAD, 0x3F800000, 0xC0490FDB, 0x00000000,
                   0x7F7FFFFF, 0x00800000]
        bias = [0x3E800000, 0xBE800000, 0x41200000, 0x00000000]
        path = self.write("a.safetensors", build([
            ("fc1.weight", "F32", (3, 4), f32_bits(special)),
            ("fc1.bias", "F32", (4,), f32_bits(bias)),
            ("step", "F32", (), f32_bits([0x42280000])),
            ("empty", "F32", (2, 0), b""),
        ], metadata={"format": "pt", "rumor.layout": "cafe"}))
        sd, meta = st.load(path)
        self.assertEqual(list(sd), ["fc1.weight", "fc1.bias", "step", "empty"])
        self.assertEqual(meta, {"format": "pt", "rumor.layout": "cafe"})
        for name, shape, bits in [("fc1.weight", (3, 4), special), ("fc1.bias", (4,), bias),
                                  ("step", (), [0x42280000])]:
            t = sd[name]
            self.assertEqual(t.dtype, torch.float32)
            self.assertEqual(tuple(t.shape), shape)
            got = [b & 0xFFFFFFFF for b in t.reshape(-1).view(torch.int32).tolist()]
            self.assertEqual(got, bits, name)
        self.assertEqual(float(sd["step"]), 42.0)
        self.assertEqual(tuple(sd["empty"].shape), (2, 0))
        self.assertEqual(sd["empty"].dtype, torch.float32)
        # Tensors own separate, writable memory.
        sd["fc1.bias"].zero_()
        self.assertEqual(float(sd["step"]), 42.0)

    def test_unpadded_and_reordered(self):
        # Header not padded, entries not in offset order, metadata last: all allowed.
        text = ('{"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},'
                '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                '"__metadata__":{"k":"v"}}')
        path = self.write("b.safetensors", raw_header(text, struct.pack("<2f", 1.5, -2.5)))
        sd, meta = st.load(path)
        self.assertEqual(list(sd), ["b", "a"])
        self.assertEqual(sd["a"].item(), 1.5)
        self.assertEqual(sd["b"].item(), -2.5)
        self.assertEqual(meta, {"k": "v"})

    def test_other_dtypes(self):
        bf16 = struct.pack("<2H", 0x3F80, 0xC040)  # 1.0, -3.0
        path = self.write("c.safetensors", build([
            ("h", "F16", (2,), struct.pack("<2e", 1.5, -0.25)),
            ("bf", "BF16", (2,), bf16),
            ("d", "F64", (1, 2), struct.pack("<2d", math.pi, -1e-3)),
            ("count", "I64", (), struct.pack("<q", 7)),
            ("mask", "BOOL", (3,), b"\x01\x00\x01"),
        ]))
        sd, meta = st.load(path)
        self.assertEqual(meta, {})
        self.assertEqual(sd["h"].dtype, torch.float32)
        self.assertEqual(sd["h"].tolist(), [1.5, -0.25])
        self.assertEqual(sd["bf"].tolist(), [1.0, -3.0])
        self.assertEqual(sd["d"].dtype, torch.float32)
        self.assertEqual(sd["d"].tolist(), [[struct.unpack("<f", struct.pack("<f", math.pi))[0],
                                             struct.unpack("<f", struct.pack("<f", -1e-3))[0]]])
        self.assertEqual(sd["count"].dtype, torch.int64)
        self.assertEqual(sd["count"].item(), 7)
        self.assertEqual(sd["mask"].tolist(), [True, False, True])
        sd64, _ = st.load(path, float_dtype=torch.float64)
        self.assertEqual(sd64["d"].tolist(), [[math.pi, -1e-3]])

    def test_load_state_dict(self):
        w = [float(i) / 8 for i in range(12)]
        b = [0.5, -0.5, 1.0]
        path = self.write("m.safetensors", build([
            ("fc1.weight", "F32", (3, 4), struct.pack("<12f", *w)),
            ("fc1.bias", "F32", (3,), struct.pack("<3f", *b)),
        ]))
        sd, _ = st.load(path)
        model = torch.nn.Module()
        model.fc1 = torch.nn.Linear(4, 3)
        model.load_state_dict(sd)
        x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
        want = [sum(w[4 * r + c] * (c + 1) for c in range(4)) + b[r] for r in range(3)]
        self.assertEqual(model.fc1(x).tolist(), [want])

    def test_cli(self):
        path = self.write("cli.safetensors", build(
            [("w", "F32", (2,), struct.pack("<2f", 1.0, 2.0))], metadata={"format": "pt"}))
        out = os.path.join(self.dir.name, "cli.pt")
        tool = os.path.join(TOOLS, "safetensors_torch.py")
        run = subprocess.run([sys.executable, tool, path, "-o", out],
                             capture_output=True, text=True, check=False)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("w float32 [2]", run.stdout)
        self.assertIn("# format = pt", run.stdout)
        self.assertEqual(torch.load(out)["w"].tolist(), [1.0, 2.0])
        bad = self.write("bad.safetensors", b"\x01")
        run = subprocess.run([sys.executable, tool, bad], capture_output=True, text=True,
                             check=False)
        self.assertEqual(run.returncode, 1)
        self.assertIn("truncated", run.stderr)

    def test_rejects(self):
        good = build([("a", "F32", (2,), struct.pack("<2f", 1, 2)),
                      ("b", "F32", (1,), struct.pack("<f", 3))])
        hlen = struct.unpack("<Q", good[:8])[0]

        def entry(name, dtype, shape, begin, end):
            return '"%s":{"dtype":"%s","shape":%s,"data_offsets":[%s,%s]}' % (
                name, dtype, shape, begin, end)

        cases = [
            ("cut at 4", good[:4], "truncated: 4 bytes"),
            ("cut in header", good[:8 + hlen // 2], "truncated: header says"),
            ("cut in data", good[:-1], "run past the data area"),
            ("one byte extra", good + b"\0", "1 bytes at the end of the data area"),
            ("length 1", raw_header("{}", hlen=1), "too short"),
            ("length huge", raw_header("{}", hlen=1 << 40), "over the limit"),
            ("length past end", raw_header('{"a":1}', b"\0" * 10, hlen=1234),
             "header says 1234 bytes but file has 17"),
            ("not json", raw_header('{"a": '), "not valid JSON"),
            ("array", raw_header("[1, 2]"), "JSON array, not an object"),
            ("bad utf-8", raw_header(b'{"\xff":1}'), "not valid UTF-8"),
            ("NaN literal", raw_header('{"__metadata__":{"k":NaN}}'), "NaN"),
            ("NUL escape", raw_header('{"__metadata__":{"k\\u0000":"v"}}'), "NUL"),
            ("lone surrogate", raw_header('{"__metadata__":{"k":"\\ud800"}}'), "lone surrogate"),
            ("dim 2.0", raw_header("{%s}" % entry("a", "F32", "[2.0]", 0, 8), b"\0" * 8),
             "shape dim 0"),
            ("overlap", raw_header("{%s,%s}" % (entry("a", "F32", "[2]", 0, 8),
                                                entry("b", "F32", "[2]", 4, 12)), b"\0" * 12),
             "tensor 'b' [4, 12] overlaps tensor 'a' [0, 8]"),
            ("gap", raw_header("{%s,%s}" % (entry("a", "F32", "[2]", 0, 8),
                                            entry("b", "F32", "[2]", 12, 20)), b"\0" * 20),
             "gap of 4 bytes"),
            ("mismatch", raw_header("{%s}" % entry("fc1.weight", "F32", "[10, 11]", 0, 400),
                                    b"\0" * 400),
             "tensor 'fc1.weight': data_offsets [0, 400] disagree with F32 shape [10, 11] "
             "(440 bytes)"),
            ("negative dim", raw_header("{%s}" % entry("a", "F32", "[-1]", 0, 4), b"\0" * 4),
             "shape dim 0 is not a non-negative integer"),
            ("float dim", raw_header("{%s}" % entry("a", "F32", "[1.5]", 0, 4), b"\0" * 4),
             "shape dim 0"),
            ("float offset", raw_header("{%s}" % entry("a", "F32", "[1]", 0, 4.0), b"\0" * 4),
             "data_offsets must be two"),
            ("begin after end", raw_header("{%s}" % entry("a", "F32", "[0]", 8, 4), b"\0" * 8),
             "begin after end"),
            ("unknown dtype", raw_header("{%s}" % entry("a", "F31", "[1]", 0, 4), b"\0" * 4),
             "unknown dtype 'F31'"),
            ("dup names", raw_header("{%s,%s}" % (entry("a", "F32", "[1]", 0, 4),
                                                  entry("a", "F32", "[1]", 4, 8)), b"\0" * 8),
             "repeated key 'a'"),
            ("meta not string", raw_header('{"__metadata__":{"k":1}}'),
             "__metadata__ 'k' is not a string"),
            ("meta not object", raw_header('{"__metadata__":[]}'), "is not an object"),
            ("no torch dtype", raw_header("{%s}" % entry("a", "U16", "[1]", 0, 2), b"\0" * 2),
             "dtype U16 has no torch"),
        ]
        for what, content, want in cases:
            with self.subTest(what):
                path = self.write("bad.safetensors", content)
                with self.assertRaises(st.SafetensorsError) as cm:
                    st.load(path)
                msg = str(cm.exception)
                self.assertTrue(msg.startswith(path + ": "), msg)
                self.assertIn(want, msg)


if __name__ == "__main__":
    unittest.main()
