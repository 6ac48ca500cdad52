#!/usr/bin/python3
"""Labelled data of one's own: one safetensors file of train.x, train.y, test.x, test.y, written
here as the `safetensors` package writes it. Features (float32 [N, F], three classes of Gaussian
blobs) train an MLP to the accuracy the blobs allow, and the export records the data's input
shape and classes; images (uint8 [N, 3, 20, 20], a bright square whose corner is the class) train
a 3-channel CNN; a swarm in virtual mode partitions the file's labels; `rumor eval` gives the
run's test accuracy, and PyTorch the same loss and accuracy on both exports (the README's loader,
tools/bench/torch_models.py, shaped by the export's metadata); and every malformed file is
refused in one line, exit 2.

usage: test_own_data.py RUMOR
Exits 77 (skipped) without numpy, and without torch once the rest passed.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from rumortest import FAILS, check, metadata

SKIPPED = []  # checks not run: PyTorch is missing
DTYPES = {"float32": "F32", "float64": "F64", "uint8": "U8", "int64": "I64", "int32": "I32", "uint16": "U16"}


def save(path, tensors, meta=None):
    """safetensors.numpy.save_file, written out: a JSON header, then each array's bytes."""
    head, data = {}, b""
    for name, a in tensors.items():
        raw = a.tobytes()
        head[name] = {"dtype": DTYPES[str(a.dtype)], "shape": list(a.shape),
                      "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta:
        head["__metadata__"] = meta
    h = json.dumps(head).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def run(*args):
    return subprocess.run([RUMOR, *args], capture_output=True, text=True, timeout=300)


def refused(path, what, contains):
    r = run("train", "--model", "logreg", "--data", path, "--epochs", "1", "--quiet")
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("rumor: error: ") and contains in lines[0],
          "%s: refused in one line (%s)" % (what, r.stderr.strip()))


def in_torch(path, x, y, ev, pixels):
    """The export in PyTorch as the README loads it (tools/bench/torch_models.py, with the input
    shape and classes its metadata records): the test loss and accuracy `rumor eval` gives."""
    if torch is None:
        SKIPPED.append("%s in PyTorch" % os.path.basename(path))
        return
    state, meta = load(path)
    net = build_model(meta["model"], meta["input"], meta["classes"])
    net.load_state_dict(state)
    x = torch.from_numpy(x.astype(np.float64) / (255.0 if pixels else 1.0))
    x = ((x - float(meta["input_mean"])) / float(meta["input_std"])).float()
    with torch.no_grad():
        z = net(x)
        loss = torch.nn.functional.cross_entropy(z, torch.from_numpy(y.astype(np.int64))).item()
        acc = (z.argmax(1).numpy() == y).mean()
    check(abs(loss - ev.get("test_loss", -1)) < 1e-4 and abs(acc - ev.get("test_acc", -1)) < 1e-4,
          "%s in PyTorch (build_model on its metadata's input %s, classes %s): test loss %.6f, accuracy %.4f; rumor "
          "eval: %s, %s" % (meta["model"], meta["input"], meta["classes"], loss, acc, ev.get("test_loss"),
                            ev.get("test_acc")))


def main():
    global RUMOR
    RUMOR = os.path.abspath(sys.argv[1])
    global np, torch, load, build_model
    try:
        import numpy as np
    except ImportError:
        print("skip: no numpy (Debian's python3-numpy)")
        return 77
    try:
        import torch
        tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")
        sys.path[:0] = [tools, os.path.join(tools, "bench")]
        from safetensors_torch import load
        from torch_models import build_model
    except ImportError:
        torch = None
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        # ---- features: three Gaussian blobs in 20 dimensions, overlapping (the Bayes rule: about 0.9) ----
        centres = rng.normal(0, 1, (3, 20)).astype(np.float32) * 0.5

        def blobs(n):
            y = rng.integers(0, 3, n)
            return (centres[y] + rng.normal(0, 1, (n, 20))).astype(np.float32), y.astype(np.int64)

        xtr, ytr = blobs(3000)
        xte, yte = blobs(600)
        feats = os.path.join(tmp, "blobs.safetensors")
        save(feats, {"train.x": xtr, "train.y": ytr, "test.x": xte, "test.y": yte})
        model = os.path.join(tmp, "mlp.safetensors")
        r = run("train", "--model", "mlp:32", "--data", feats, "--epochs", "5", "--batch", "32", "--lr", "0.05",
                "--threads", "1", "--save", model, "--metrics", os.path.join(tmp, "m.jsonl"), "--quiet")
        last = json.loads(open(os.path.join(tmp, "m.jsonl")).read().splitlines()[-1]) if r.returncode == 0 else {}
        # the Bayes rate of these blobs, computed here from the known centres
        d = ((xte[:, None, :] - centres[None]) ** 2).sum(-1)
        bayes = float((d.argmin(1) == yte).mean())
        check(last.get("test_acc", 0) > bayes - 0.03,
              "an MLP learns float features of one's own: test accuracy %s, the Bayes rule's %.3f (%s)"
              % (last.get("test_acc"), bayes, r.stderr.strip()[-200:]))
        meta = metadata(model) if os.path.exists(model) else {}
        check(meta.get("input") == "1,1,20" and meta.get("classes") == "3",
              "the export records the data's input shape and classes (%s, %s)" % (meta.get("input"),
                                                                                 meta.get("classes")))
        r = run("eval", model, "--data", feats, "--json")
        ev = json.loads(r.stdout) if r.returncode == 0 else {}
        check(abs(ev.get("test_acc", -1) - last.get("test_acc", -2)) < 1e-4,
              "rumor eval gives the run's test accuracy (%s, %s)" % (ev.get("test_acc"), last.get("test_acc")))
        in_torch(model, xte, yte, ev, False)
        other = os.path.join(tmp, "blobs.bin")  # a file of another name is the same data
        os.link(feats, other)
        r = run("eval", model, "--data", other, "--json")
        check(r.returncode == 0 and json.loads(r.stdout).get("test_acc") == ev.get("test_acc"),
              "data of one's own in a file of any name (%s)" % r.stderr.strip())

        # ---- images: uint8 [N, 3, 20, 20], class k lights a square in corner k of channel k ----
        def squares(n):
            y = rng.integers(0, 4, n)
            x = rng.integers(0, 60, (n, 3, 20, 20)).astype(np.uint8)
            for i, k in enumerate(y):
                r0, c0 = (k // 2) * 10, (k % 2) * 10
                x[i, k % 3, r0:r0 + 8, c0:c0 + 8] = 250
            return x, y.astype(np.uint8)

        xtr, ytr = squares(1200)
        xte, yte = squares(300)
        imgs = os.path.join(tmp, "squares.safetensors")
        save(imgs, {"train.x": xtr, "train.y": ytr, "test.x": xte, "test.y": yte})
        model = os.path.join(tmp, "cnn.safetensors")
        r = run("train", "--model", "cnn:4,8", "--data", imgs, "--epochs", "3", "--batch", "32", "--lr", "0.05",
                "--threads", "1", "--metrics", os.path.join(tmp, "c.jsonl"), "--quiet", "--save", model)
        last = json.loads(open(os.path.join(tmp, "c.jsonl")).read().splitlines()[-1]) if r.returncode == 0 else {}
        check(last.get("test_acc", 0) > 0.95, "a CNN learns 3-channel uint8 images of one's own: test accuracy %s (%s)"
              % (last.get("test_acc"), r.stderr.strip()[-200:]))
        # Judged on noise with a faint square (where it is not sure, so the loss tells layouts apart).
        noise = os.path.join(tmp, "noise.safetensors")
        xno = (rng.integers(0, 60, (300, 3, 20, 20)) + 30 * (xte > 200)).astype(np.uint8)
        save(noise, {"train.x": xtr, "train.y": ytr, "test.x": xno, "test.y": yte})
        r = run("eval", model, "--data", noise, "--json")
        in_torch(model, xno, yte, json.loads(r.stdout) if r.returncode == 0 else {}, True)

        # ---- a swarm on the file: label skew over its four classes ----
        out = os.path.join(tmp, "sim")
        r = run("sim", "--mode", "virtual", "--model", "logreg", "--data", imgs, "--peers", "4", "--partition",
                "dirichlet:0.5", "--rounds", "20", "--no-plots", "--quiet", "--out", out)
        summary = json.load(open(os.path.join(out, "summary.json"))) if r.returncode == 0 else {}
        check(summary.get("final_test_acc_min", 0) > 0.5,
              "four virtual peers partition the file's labels and learn: worst test accuracy %s (%s)"
              % (summary.get("final_test_acc_min"), r.stderr.strip()[-200:]))

        # ---- malformed files ----
        ok = {"train.x": xtr[:10], "train.y": ytr[:10], "test.x": xte[:5], "test.y": yte[:5]}
        cases = [
            ("no test.y", {k: v for k, v in ok.items() if k != "test.y"}, None, "no tensor test.y"),
            ("float64 inputs", dict(ok, **{"train.x": xtr[:10].astype(np.float64)}), None, "inputs are U8 or F32"),
            ("a label of 300", dict(ok, **{"train.y": np.full(10, 300, np.uint16)}), None, "label 300"),
            ("a negative label", dict(ok, **{"train.y": np.full(10, -1, np.int64)}), None, "label -1"),
            ("labels of another count", dict(ok, **{"train.y": ytr[:9]}), None, "one label per sample"),
            ("test images of another size", dict(ok, **{"test.x": xte[:5, :, :10, :10]}), None, "test.x is"),
            ("a NaN", dict(ok, **{"train.x": np.full((10, 4), np.nan, np.float32),
                                  "test.x": np.zeros((5, 4), np.float32)}), None, "not finite"),
            ("one class", dict(ok, **{"train.y": np.zeros(10, np.uint8), "test.y": np.zeros(5, np.uint8)}), None,
             "two classes"),
            ("metadata classes below the labels", ok, {"classes": "2"}, "metadata classes"),
        ]
        for i, (what, tensors, meta, contains) in enumerate(cases):
            path = os.path.join(tmp, "bad%d.safetensors" % i)
            save(path, tensors, meta)
            refused(path, what, contains)
        trunc = os.path.join(tmp, "trunc.safetensors")
        with open(imgs, "rb") as f, open(trunc, "wb") as g:
            g.write(f.read()[:5000])
        refused(trunc, "a truncated file", "trunc.safetensors")
    print("%d failed" % len(FAILS))
    if FAILS:
        return 1
    if SKIPPED:
        print("skip: no torch (Debian's python3-torch): not run: %s" % ", ".join(SKIPPED))
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
