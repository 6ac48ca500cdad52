#!/usr/bin/python3
"""The examples run as the README and their docstrings say, shortened: examples/fashion_cnn.py
(a PyTorch CNN of one's own) as four peers of `rumor sim --exec` with diloco, one peer killed
and restarted: it resumes from its own checkpoint (its rounds go on, never back to 1), the run
ends with status 0, and the summary carries the accuracy the peers reported;
examples/shakespeare_gpt.py (a transformer of one's own) as two peers with diloco and int8: the
summary shows their validation loss. Skips (77) without torch. usage: test_examples.py RUMOR PYTHON_BUILD_DIR SOURCE_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pyswarm
from pyswarm import check


def main():
    rumor_exe, pydir, src = (os.path.abspath(a) for a in sys.argv[1:4])
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        print("SKIP: no torch for /usr/bin/python3")
        return 77
    tmp = tempfile.mkdtemp(prefix="rumor-test-examples-")
    try:
        out = os.path.join(tmp, "run")
        r = subprocess.run([rumor_exe, "sim", "--exec", "/usr/bin/python3 %s/examples/fashion_cnn.py --test 1000" % src,
                            "--peers", "4", "--algo", "diloco:25", "--rounds", "6", "--out", out, "--no-plots", "--quiet",
                            "--event", "kill peer 1 at round 2", "--event", "restart peer 1 at round 4"],
                           env=dict(os.environ, PYTHONPATH=pydir), capture_output=True, text=True, timeout=600)
        check(r.returncode == 0, "examples/fashion_cnn.py as 4 peers of rumor sim --exec, peer 1 killed and restarted "
              "(exit %d) %s" % (r.returncode, r.stderr.strip()[-300:]))
        path = os.path.join(out, "summary.json")
        s = json.load(open(path)) if os.path.exists(path) else {}
        check(s.get("rounds_done_min") == 6 and (s.get("final_test_acc_mean") or 0) > 0.5,
              "the summary: every peer at round 6, the accuracy they reported (%s)"
              % {k: s.get(k) for k in ("rounds_done_min", "final_test_acc_mean")})
        lines = [json.loads(x) for x in open(os.path.join(out, "peer-001", "metrics.jsonl")) if x.strip()]
        rounds = [x["round"] for x in lines]
        check(rounds and all(a <= b for a, b in zip(rounds, rounds[1:])) and rounds[-1] == 6,
              "the restarted peer resumed from its checkpoint: its rounds go on (%s)" % rounds)
        check(os.stat(os.path.join(out, "peer-001", "checkpoint.pt")).st_mode & 0o777 == 0o600,
              "its checkpoint is its owner's only")

        # examples/shakespeare_gpt.py: diloco with int8 models, two peers, a few steps.
        out = os.path.join(tmp, "gpt")
        r = subprocess.run([rumor_exe, "sim", "--exec", "/usr/bin/python3 %s/examples/shakespeare_gpt.py --sample 64 "
                            "--final-sample 32" % src, "--peers", "2", "--algo", "diloco:8", "--codec", "int8",
                            "--rounds", "3", "--out", out, "--no-plots", "--quiet"],
                           env=dict(os.environ, PYTHONPATH=pydir), capture_output=True, text=True, timeout=600)
        check(r.returncode == 0, "examples/shakespeare_gpt.py as 2 peers of rumor sim --exec, diloco:8 and int8 "
              "(exit %d) %s" % (r.returncode, r.stderr.strip()[-300:]))
        path = os.path.join(out, "summary.json")
        s = json.load(open(path)) if os.path.exists(path) else {}
        val = s.get("final_val_loss_mean") or 99
        check(s.get("rounds_done_min") == 3 and 2.5 < val < 5.0 and s.get("final_test_acc_mean") is None,
              "the summary: both peers at round 3, a validation loss below the uniform 5.55 nats per byte, shown "
              "as val_loss (%s)" % {k: s.get(k) for k in ("rounds_done_min", "final_val_loss_mean")})
        lines = [json.loads(x) for x in open(os.path.join(out, "peer-000", "metrics.jsonl")) if x.strip()]
        vals = [(x["round"], x["val_loss"]) for x in lines if "val_loss" in x]
        check([rd for rd, _ in vals] == [1, 2, 3] and vals[-1][1] < vals[0][1] and lines[-1].get("finished"),
              "a validation loss each round, falling, then the peer finished (%s)" % vals)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pyswarm.result()


if __name__ == "__main__":
    sys.exit(main())
