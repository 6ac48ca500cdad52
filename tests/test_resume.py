#!/usr/bin/env python3
"""A checkpoint records its run's settings, and --resume takes them back.

- rumor train: a run with nothing at its default, stopped and resumed with `--resume FILE`
  alone, ends byte-identical to the run never stopped; so does one resumed from the same
  checkpoint rewritten as checkpoints were before they recorded the table (other keys, no
  model, seed or optimizer among them).
- A setting that fixes the run's course, given otherwise, is refused in one line naming both
  values; one that may change is taken with one warning naming it; two spellings of a value
  are the same value.
- rumor node: a finished solo node resumed with `--run-dir DIR --resume` alone runs with the
  settings it was started with (--check shows them), and runs on when given more rounds.

usage: test_resume.py RUMOR DATA
"""
import json
import os
import shutil
import subprocess
import sys

import rumortest
from rumortest import check, metadata, rewrite_metadata


def run(*args, timeout=60):
    return subprocess.run([rumortest.RUMOR, *args], capture_output=True, text=True, timeout=timeout)


def as_before_the_table(meta):
    """A checkpoint of rumor train as written before checkpoints recorded the settings table."""
    old = {k: v for k, v in meta.items() if not k.startswith("train.")}
    for k in ("batch", "samples", "limit", "partition", "rank", "epochs", "lr", "momentum", "schedule", "warmup",
              "loss_sum", "loss_count", "window_loss", "window_count"):
        old["train." + k] = meta["train." + k]
    old["train.peers"] = meta["train.of"]
    old["train.weight_decay"] = meta["train.weight-decay"]
    old["train.nesterov"] = "1" if meta["train.nesterov"] == "yes" else "0"
    return old


def one_line_refusal(r, *words):
    lines = r.stderr.splitlines()
    return (r.returncode == 2 and len(lines) == 1 and lines[0].startswith("rumor: error: ")
            and all(w in lines[0] for w in words))


def train_part(tmp, data):
    # Nothing at its default, so that a resume which fell back on a default would show.
    args = ["train", "--data", data, "--model", "logreg", "--limit", "1200", "--batch", "100", "--epochs", "2",
            "--lr", "0.03", "--momentum", "0.5", "--nesterov", "--weight-decay", "0.001", "--schedule", "cosine",
            "--warmup", "2", "--partition", "iid", "--rank", "1", "--of", "3", "--seed", "7", "--threads", "1",
            "--quiet", "--no-eval"]
    ref, ck = os.path.join(tmp, "ref.safetensors"), os.path.join(tmp, "ck.safetensors")
    r = run(*args, "--save", ref)
    check(r.returncode == 0, "train: the reference run finishes (%s)" % r.stderr.strip()[-200:])
    r = run(*args, "--checkpoint", ck, "--max-steps", "3")
    check(r.returncode == 0 and "stopped at step 3 (--max-steps)" in r.stderr,
          "train: stopped at step 3 with a checkpoint, a planned stop (exit %d: %s)" % (r.returncode, r.stderr.strip()))
    legacy = os.path.join(tmp, "legacy.safetensors")
    shutil.copy(ck, legacy)
    rewrite_metadata(legacy, as_before_the_table)
    meta = metadata(ck)
    check(meta.get("train.lr") == "0.0299999993" and meta.get("train.model") == "logreg"
          and meta.get("train.nesterov") == "yes" and meta.get("train.of") == "3",
          "train: the checkpoint records the run's settings (%s)" % {k: v for k, v in meta.items() if "train." in k})

    r = run("train", "--resume", ck, "--check", "--data", data)
    shown = json.loads(r.stdout) if r.returncode == 0 else {}
    want = {"model": "logreg", "limit": 1200, "batch": 100, "epochs": 2, "momentum": 0.5, "nesterov": True,
            "schedule": "cosine", "warmup": 2, "partition": "iid", "rank": 1, "of": 3, "seed": 7}
    check(all(shown.get(k) == v for k, v in want.items()) and abs(shown.get("lr", 0) - 0.03) < 1e-7,
          "train: --resume FILE --check shows the checkpoint's settings (%s)" % (shown or r.stderr.strip()))

    # Refused: what fixes the run's course. Taken, with a warning: what may change.
    r = run("train", "--resume", ck, "--batch", "50", "--check")
    check(one_line_refusal(r, "--batch 50 differs from the checkpoint's 100"), "train: another --batch is refused "
          "in one line (%s)" % r.stderr.strip())
    r = run("train", "--resume", legacy, "--partition", "iid", "--rank", "0", "--of", "3", "--check")
    check(one_line_refusal(r, "--rank 0 differs from the checkpoint's 1"),
          "train: another shard is refused, from an older checkpoint too (%s)" % r.stderr.strip())
    r = run("train", "--resume", ck, "--lr", "0.01", "--check")
    check(r.returncode == 0 and "--lr 0.00999999978 (was 0.0299999993)" in r.stderr
          and json.loads(r.stdout).get("batch") == 100,
          "train: another --lr is taken and named in a warning (%s)" % r.stderr.strip())
    r = run("train", "--resume", ck, "--lr", "0.030", "--model", "logreg", "--schedule", "cosine", "--check")
    check(r.returncode == 0 and not r.stderr, "train: another spelling of the same value is the same value (%s)"
          % r.stderr.strip())

    # Peer 0's shard: --rank 0 is also the default, and still goes with the checkpoint's shard.
    ck0 = os.path.join(tmp, "ck0.safetensors")
    r0 = [a if a != "1" or args[i - 1] != "--rank" else "0" for i, a in enumerate(args)]
    r = run(*r0, "--checkpoint", ck0, "--max-steps", "2")
    r = run("train", "--resume", ck0, "--check")
    shown = json.loads(r.stdout) if r.returncode == 0 else {}
    check(shown.get("partition") == "iid" and shown.get("rank") == 0 and shown.get("of") == 3,
          "train: peer 0's shard resumed with --resume alone (%s)" % (shown or r.stderr.strip()))

    for name, path in (("its own checkpoint", ck), ("a checkpoint from before the table", legacy)):
        out = os.path.join(tmp, "out.safetensors")
        r = run("train", "--resume", path, "--data", data, "--save", out, "--threads", "1", "--quiet", "--no-eval")
        same = r.returncode == 0 and rumortest.tensors(out) == rumortest.tensors(ref)
        check(same, "train: resumed from %s with nothing else given, the model is the run's never stopped (%s)"
              % (name, r.stderr.strip()[-200:]))
        if path == ck:
            check(same and open(out, "rb").read() == open(ref, "rb").read(),
                  "train: ... byte for byte, its metadata included")


def node_part(tmp, data):
    swarm = os.path.join(tmp, "swarm")
    r = run("swarm", "init", swarm)
    check(r.returncode == 0, "swarm init (%s)" % r.stderr.strip())
    key = rumortest.make_peer(tmp, swarm, "solo")
    ident = ["node", "--key", key + ".key", "--cert", key + ".cert", "--swarm", os.path.join(swarm, "authority.pub"),
             "--listen", "tcp://127.0.0.1:0", "--linger", "0", "--threads", "1"]
    rd = os.path.join(tmp, "node")
    r = run(*ident, "--data", data, "--model", "logreg", "--limit", "600", "--local-steps", "2", "--topology", "ring",
            "--lr", "0.02", "--rounds", "3", "--eval-every", "1000", "--codec", "fp16", "--run-dir", rd, timeout=120)
    check(r.returncode == 0, "node: a solo node runs 3 rounds (%s)" % r.stderr.strip()[-200:])
    r = run(*ident, "--run-dir", rd, "--resume", "--check")
    shown = json.loads(r.stdout) if r.returncode == 0 else {}
    want = {"model": "logreg", "limit": 600, "local-steps": 2, "topology": "ring", "rounds": 3, "codec": "fp16"}
    check(all(shown.get(k) == v for k, v in want.items()) and abs(shown.get("lr", 0) - 0.02) < 1e-7,
          "node: --resume --check shows the checkpoint's settings (%s)" % (shown or r.stderr.strip()))
    r = run(*ident, "--run-dir", rd, "--resume", "--topology", "expo", "--check")
    check(one_line_refusal(r, "--topology expo differs from the checkpoint's ring"),
          "node: another --topology is refused in one line (%s)" % r.stderr.strip())
    r = run(*ident, "--data", data, "--run-dir", rd, "--resume", "--rounds", "5", timeout=120)
    lines = [json.loads(x) for x in open(os.path.join(rd, "metrics.jsonl")) if x.strip()]
    check(r.returncode == 0 and "--rounds 5 (was 3)" in r.stderr and lines and lines[-1].get("round") == 5,
          "node: resumed with more rounds and nothing else, it runs on to round 5 (%s)" % r.stderr.strip()[-200:])


def main():
    rumortest.RUMOR = os.path.abspath(sys.argv[1])
    data = sys.argv[2]
    if not rumortest.has_dataset(data):
        print("skip: no dataset at %s" % data)
        return 77
    tmp = rumortest.scratch("resume")
    train_part(tmp, data)
    node_part(tmp, data)
    print("%d failed" % len(rumortest.FAILS))
    return 1 if rumortest.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
