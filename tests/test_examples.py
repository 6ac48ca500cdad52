#!/usr/bin/python3
"""The examples run as the README and their docstrings say, shortened: examples/fashion_cnn.py
(a PyTorch CNN of one's own) as four peers of `rumor sim --exec` with diloco, one peer killed
and restarted: it resumes from its own checkpoint (its rounds go on, never back to 1), the run
ends with status 0, and the summary carries the accuracy the peers reported. Skips (77)
without torch. usage: test_examples.py RUMOR PYTHON_BUILD_DIR SOURCE_DIR"""
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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pyswarm.result()


if __name__ == "__main__":
    sys.exit(main())
