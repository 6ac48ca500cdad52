#!/usr/bin/python3
"""rumor sim --exec: a training program of one's own (numpy, through the Python package) run
as every peer of a simulated swarm, each from RUMOR_SETTINGS; a scenario kills one peer and
restarts it; the run ends with status 0, every peer's metrics (written by the library into its
run folder) reach the last round, and the summary has the swarm's final evaluation.
usage: test_py_launch.py RUMOR PYTHON_BUILD_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pyswarm
from pyswarm import check

PROGRAM = r'''
import os, time
import numpy as np, rumor
rank = int(os.environ["RUMOR_RANK"])
rng = np.random.default_rng(rank)
target = np.linspace(-1, 1, 1000).astype(np.float32)
with rumor.Peer.from_env() as peer:
    w = peer.register({"w": np.full(1000, 0.5, np.float32)})["w"]   # one initial model everywhere
    peer.start()
    while True:
        steps, _ = peer.phase()
        loss = 0.0
        for _ in range(steps):   # a step towards this peer's noisy view of the target
            g = w - (target + 0.1 * rng.standard_normal(1000).astype(np.float32))
            w -= 0.1 * g
            loss += float((g * g).mean())
            time.sleep(0.01)
        err = float(np.abs(w - target).mean())
        r = peer.round(loss=loss, samples=steps, test_loss=err, test_acc=1.0 - err)
        if r.finished:
            break
'''


def main():
    rumor_exe, pydir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = tempfile.mkdtemp(prefix="rumor-test-launch-")
    try:
        prog = os.path.join(tmp, "train.py")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        out = os.path.join(tmp, "run")
        r = subprocess.run([rumor_exe, "sim", "--exec", "%s %s" % (sys.executable, prog), "--peers", "3", "--rounds",
                            "16", "--topology", "complete", "--local-steps", "2", "--out", out, "--no-plots", "--quiet",
                            "--event", "kill peer 2 at round 4", "--event", "restart peer 2 at round 7"],
                           env=dict(os.environ, PYTHONPATH=pydir), capture_output=True, text=True, timeout=240)
        check(r.returncode == 0, "rumor sim --exec runs three Python peers, one killed and restarted (exit %d) %s"
              % (r.returncode, r.stderr.strip()[-400:]))
        s = json.load(open(os.path.join(out, "summary.json"))) if os.path.exists(os.path.join(out, "summary.json")) else {}
        check(s.get("rounds_done_min") == 16 and s.get("final_test_acc_mean") is not None and
              s["final_test_acc_mean"] > 0.95, "the summary: every peer at round 16, the final evaluation the peers "
              "reported (%s)" % {k: s.get(k) for k in ("rounds_done_min", "final_test_acc_mean")})
        for i in range(3):
            lines = [json.loads(x) for x in open(os.path.join(out, "peer-%03d" % i, "metrics.jsonl")) if x.strip()]
            # (the restarted peer may end on the swarm's final model, a line without its own evaluation)
            check(len(lines) > 1 and lines[-1]["round"] == 16 and lines[-1].get("finished") and
                  ("test_acc" in lines[-2] or lines[-2].get("swarm_final")) and any("test_acc" in x for x in lines),
                  "peer %d's metrics, written by the library, end at round 16, then say the peer finished (%s)"
                  % (i, lines[-2:]))
        log = open(os.path.join(out, "peer-002", "node.log")).read()
        check(log.count("listening") == 0 and log.count("finished training") >= 1 and "Traceback" not in log,
              "the restarted peer ran its program again to the end")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pyswarm.result()


if __name__ == "__main__":
    sys.exit(main())
