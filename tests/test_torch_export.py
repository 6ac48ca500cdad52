#!/usr/bin/python3
"""A model rumor exports loads into the PyTorch module of the same spec with
load_state_dict(strict=True), and PyTorch then gets the test accuracy rumor reports.

usage: test_torch_export.py RUMOR_BINARY SOURCE_DIR [DATA_DIR]
Exits 77 (skipped) when torch or the dataset is missing.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return raw[4 + 4 * ndim:], dims


def idx(data_dir, name):
    for p in (os.path.join(data_dir, name), os.path.join(data_dir, name + ".gz")):
        if os.path.exists(p):
            data, dims = read_idx(p)
            return np.frombuffer(data, dtype=np.uint8).reshape(dims)
    raise FileNotFoundError(name)


def main():
    rumor, src = sys.argv[1], sys.argv[2]
    data = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/datasets/fashion-mnist"
    if not os.path.isdir(data):
        print("skip: no dataset at", data)
        return SKIP
    try:
        global np, torch
        import numpy as np
        import torch
    except ImportError as e:
        print("skip: PyTorch not installed:", e)
        return SKIP
    sys.path[:0] = [os.path.join(src, "tools"), os.path.join(src, "tools", "bench")]
    from safetensors_torch import load
    from torch_models import build_model

    x = idx(data, "t10k-images-idx3-ubyte").astype(np.float32) / 255.0
    y = torch.from_numpy(idx(data, "t10k-labels-idx1-ubyte").astype(np.int64))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for spec, limit in (("mlp:64,32", "6000"), ("logreg", "6000"), ("cnn:4,8", "3000")):
            out = os.path.join(tmp, "model.safetensors")
            subprocess.run([rumor, "train", "--model", spec, "--epochs", "1", "--limit", limit,
                            "--threads", "1", "--quiet", "--no-eval", "--save", out],
                           check=True)
            ev = json.loads(subprocess.run([rumor, "eval", out, "--json", "--threads", "1"],
                                           check=True, capture_output=True, text=True).stdout)
            state, meta = load(out)
            net = build_model(meta["model"])
            net.load_state_dict(state, strict=True)
            mean, std = float(meta["input_mean"]), float(meta["input_std"])
            xt = torch.from_numpy((x - mean) / std)
            if meta["model"].startswith("cnn"):
                xt = xt.reshape(-1, 1, 28, 28)
            else:
                xt = xt.reshape(-1, 28 * 28)
            with torch.no_grad():
                acc = float((net(xt).argmax(1) == y).float().mean())
            # Summation order differs between the two, so a near-tie may flip: allow 2 of 10000.
            ok = abs(acc - ev["test_acc"]) <= 2e-4 + 1e-9 and ev["test_acc"] > 0.5
            print("%-10s rumor test_acc %.4f, PyTorch on the exported weights %.4f: %s"
                  % (spec, ev["test_acc"], acc, "ok" if ok else "MISMATCH"))
            failures += not ok
    # A tensor of the wrong shape must not load silently: the same names as the last export
    # (cnn:4,8), one convolution wider, so only a shape can tell them apart.
    bad = build_model("cnn:4,9")
    if sorted(bad.state_dict()) != sorted(state):
        print("the wrong-shape model does not have the same tensor names: the case tests nothing")
        failures += 1
    try:
        bad.load_state_dict(state, strict=True)
        print("a mismatched model loaded without error")
        failures += 1
    except RuntimeError as e:
        if "size mismatch" not in str(e):
            print("refused for another reason than the shape: %s" % str(e)[:200])
            failures += 1
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
