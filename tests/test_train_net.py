#!/usr/bin/python3
"""Training peers on 127.0.0.1: four `rumor node` processes train logreg together and end
closer together and better than they started; a peer stopped with SIGTERM leaves a
checkpoint and resumes from it. Every wait is bounded.

usage: test_train_net.py RUMOR_BINARY DATA_DIR
"""
import json
import math
import os
import signal
import subprocess
import sys
import time

import rumortest
from rumortest import FAILS, check, make_peer, run, dist, norm, tensors

RUMOR = None
DATA = None
PROCS = []


def start(tmp, swarm, key, run_dir, extra, bootstrap=None, linger="0"):
    """A training node; it leaves as soon as it finishes unless extra gives --linger (linger
    None: the default, not given)."""
    args = [RUMOR, "node", "--key", key + ".key", "--cert", key + ".cert",
            "--swarm", os.path.join(swarm, "authority.pub"), "--listen", "tcp://127.0.0.1:0",
            "--period", "200", "--suspect", "1000", "--run-dir", run_dir, "--threads", "1",
            "--data", DATA, *([] if "--linger" in extra or linger is None else ["--linger", linger]), *extra]
    if bootstrap:
        args += ["--bootstrap", bootstrap]
    log = open(key + ".log", "a")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
    log.close()
    PROCS.append(p)
    line = p.stdout.readline()
    addr = line.strip().split()[-1] if "rumor://" in line else None
    return p, addr


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


def wait_exit(p, seconds):
    try:
        return p.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def main():
    global RUMOR, DATA
    RUMOR = rumortest.RUMOR = os.path.abspath(sys.argv[1])
    DATA = sys.argv[2]
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")) and \
            not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte")):
        print("skip: no dataset at " + DATA)
        return 77
    tmp = rumortest.scratch("train")
    swarm = os.path.join(tmp, "swarm")
    assert run("swarm", "init", swarm).returncode == 0
    keys = [make_peer(tmp, swarm, "p%d" % i) for i in range(6)]

    # 1. Four peers, one shard each, different initial parameters: they train and agree.
    common = ["--model", "logreg", "--partition", "iid", "--of", "4", "--limit", "4000", "--rounds", "40",
              "--batch", "32", "--lr", "0.1", "--local-steps", "2", "--topology", "ring", "--eval-every", "0",
              "--algo", "dpsgd"]
    runs = [os.path.join(tmp, "run%d" % i) for i in range(4)]
    p0, a0 = start(tmp, swarm, keys[0], runs[0], common + ["--rank", "0", "--init-seed", "100"])
    check(a0 is not None, "the first peer prints its address")
    procs = [p0] + [start(tmp, swarm, keys[i], runs[i], common + ["--rank", str(i), "--init-seed", str(100 + i)],
                          bootstrap=a0)[0] for i in range(1, 4)]
    codes = [wait_exit(p, 60) for p in procs]
    check(codes == [0, 0, 0, 0], "four peers finish 40 rounds (exit codes %s)" % codes)
    if codes == [0, 0, 0, 0]:
        ms = [metrics(r) for r in runs]
        acc0 = [m[0]["test_acc"] for m in ms]
        acc1 = [m[-1]["test_acc"] for m in ms]
        check(all(m[-1]["round"] == 40 for m in ms), "metrics reach round 40")
        check(all(b > a + 0.3 for a, b in zip(acc0, acc1)),
              "every peer's test accuracy rose: %s -> %s" % (acc0, acc1))
        # Round 1 is the first mix: its consensus distance is that of the different initial
        # models (two local steps on).
        c_start = [next(l["consensus"] for l in m if l.get("round") == 1 and "consensus" in l) for m in ms]
        c_end = [m[-1]["consensus"] for m in ms]
        check(all(e < 0.5 * s for s, e in zip(c_start, c_end)),
              "models end closer to their neighbourhood than they started: %s -> %s" % (c_start, c_end))
        check(all(m[-1]["missing"] == 0 and m[-1]["neighbours"] == 2 for m in ms),
              "on a ring of 4 every round mixes 2 neighbours")
        check(all(m[-1]["bytes_in"] > 0 and m[-1]["bytes_out"] > 0 for m in ms), "bytes are counted both ways")
        fin = [tensors(os.path.join(r, "model.safetensors")) for r in runs]
        pair = max(dist(fin[i], fin[j]) for i in range(4) for j in range(i + 1, 4))
        size = max(norm(f) for f in fin)
        check(pair < 0.2 * size, "final models agree: max pairwise distance %.3f, norm %.3f" % (pair, size))
        # A finished peer started again on its run (a supervisor restarting what stopped) is a
        # finished peer again: it says so, stays --linger, leaves with 0, and rewrites nothing.
        model0 = open(os.path.join(runs[0], "model.safetensors"), "rb").read()
        lines0 = len(ms[0])
        r = subprocess.run([RUMOR, "node", "--key", keys[0] + ".key", "--cert", keys[0] + ".cert", "--swarm",
                            os.path.join(swarm, "authority.pub"), "--listen", "tcp://127.0.0.1:0", "--run-dir",
                            runs[0], "--data", DATA, "--threads", "1", "--resume", "--linger", "1", *common,
                            "--rank", "0"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "this run is complete (40 rounds of 40)" in r.stderr and "done: 40 rounds" in r.stdout
              and len(metrics(runs[0])) == lines0
              and open(os.path.join(runs[0], "model.safetensors"), "rb").read() == model0,
              "a finished peer resumed stays a finished peer, exits 0, and rewrites nothing (exit %d: %s)"
              % (r.returncode, (r.stderr + r.stdout).strip()[-300:]))

    # 1a. Without --linger, a swarm that finished together leaves together: each peer goes 2 s
    #     after every member in its view said it finished (the default linger is 30 s); with
    #     --linger given, it stays that long.
    common = ["--model", "logreg", "--partition", "iid", "--of", "2", "--limit", "2000", "--rounds", "12",
              "--batch", "32", "--eval-every", "0"]
    for linger in (None, "4"):
        runs = [os.path.join(tmp, "leave%s-%d" % (linger, i)) for i in range(2)]
        for k in keys[:2]:
            open(k + ".log", "w").close()
        p0, a0 = start(tmp, swarm, keys[0], runs[0], common + ["--rank", "0"], linger=linger)
        p1, _ = start(tmp, swarm, keys[1], runs[1], common + ["--rank", "1"], bootstrap=a0, linger=linger)
        codes = [wait_exit(p, 28) for p in (p0, p1)]
        logs = [open(k + ".log").read() for k in keys[:2]]
        left = ["every member has finished: leaving" in l for l in logs]
        if linger is None:
            check(codes == [0, 0] and left == [True, True],
                  "without --linger, two peers that finished leave once both have (exit codes %s, said so: %s)"
                  % (codes, left))
        else:
            check(codes == [0, 0] and left == [False, False] and all("staying 4 s" in l for l in logs),
                  "with --linger 4 they stay the 4 s asked (exit codes %s, left early: %s)" % (codes, left))

    # 1b. Push-sum on a directed, time-varying graph, and DiLoCo: the same four peers. Push-sum
    #     has no barrier, so it gets rounds enough for all four to overlap.
    for algo, topo, rounds in (("sgp", "onepeer-expo", "1000"), ("diloco:5", "ring", "12")):
        common = ["--model", "logreg", "--partition", "iid", "--of", "4", "--limit", "4000", "--rounds", rounds,
                  "--batch", "32", "--lr", "0.1", "--topology", topo, "--eval-every", "0", "--algo", algo]
        runs = [os.path.join(tmp, "%s%d" % (algo.replace(":", ""), i)) for i in range(4)]
        p0, a0 = start(tmp, swarm, keys[0], runs[0], common + ["--rank", "0", "--init-seed", "100"])
        procs = [p0] + [start(tmp, swarm, keys[i], runs[i], common + ["--rank", str(i), "--init-seed", str(100 + i)],
                              bootstrap=a0)[0] for i in range(1, 4)]
        codes = [wait_exit(p, 60) for p in procs]
        check(codes == [0, 0, 0, 0], "%s on %s: four peers finish (exit codes %s)" % (algo, topo, codes))
        if codes != [0, 0, 0, 0]:
            continue
        ms = [metrics(r) for r in runs]
        acc0 = [m[0]["test_acc"] for m in ms]
        acc1 = [m[-1]["test_acc"] for m in ms]
        # (A fast push-sum peer may start before the others, which then join its model.)
        check(all(b > 0.6 for b in acc1) and min(acc0) < 0.3, "%s: accuracy rose: %s -> %s" % (algo, acc0, acc1))
        if algo == "sgp":
            # Peers finish at different times and the last ones train alone for a while, so
            # agreement is measured while all four run: distance to the neighbourhood's mix.
            early = [max(l.get("consensus", 0) for l in m[1:20]) for m in ms]
            mid = [sorted(l["consensus"] for l in m[400:600] if l.get("neighbours"))[len(m[400:600]) // 4] for m in ms]
            check(sum(mid) < 0.5 * sum(early),
                  "sgp: models draw together while all run: %s -> %s" % (early, mid))
        else:
            fin = [tensors(os.path.join(r, "model.safetensors")) for r in runs]
            pair = max(dist(fin[i], fin[j]) for i in range(4) for j in range(i + 1, 4))
            size = max(norm(f) for f in fin)
            check(pair < 0.3 * size, "%s: final models agree: max pairwise distance %.3f, norm %.3f" % (algo, pair, size))
        if algo == "sgp":
            ws = [[l for l in m if "w" in l][-1]["w"] for m in ms]
            check(all(0 < w < 4 for w in ws), "sgp: push-sum weights stay positive and bounded: %s" % ws)
            check(all(all(math.isfinite(l.get("loss", 0)) for l in m) for m in ms), "sgp: no loss is NaN")

    # 1c. Two peers training different models (their hellos' layouts differ) stay apart: each
    #     leaves the other out of its view, starts after --join-timeout alone and never waits
    #     a round for models it would drop (before, each round ran into the round timeout with
    #     the other missing).
    qa, qb = make_peer(tmp, swarm, "qa"), make_peer(tmp, swarm, "qb")
    other = ["--partition", "iid", "--of", "2", "--limit", "2000", "--rounds", "4", "--batch", "32", "--lr", "0.1",
             "--topology", "complete", "--eval-every", "0", "--min-peers", "2", "--join-timeout", "2",
             "--round-timeout", "3"]
    ra, rb = os.path.join(tmp, "other-a"), os.path.join(tmp, "other-b")
    pa, aa = start(tmp, swarm, qa, ra, other + ["--model", "mlp:32", "--rank", "0"], linger="4")
    pb, _ = start(tmp, swarm, qb, rb, other + ["--model", "mlp:16", "--rank", "1"], bootstrap=aa, linger="4")
    codes = [wait_exit(p, 60) for p in (pa, pb)]
    ma, mb = (metrics(r) if c == 0 else [] for r, c in zip((ra, rb), codes))
    rounds = [l for l in ma + mb if "round" in l and l["round"] > 0]
    check(codes == [0, 0] and len(rounds) == 8 and all(l.get("peers") == 1 and l.get("missing", 0) == 0 for l in rounds),
          "two peers of different models stay apart: every round of each alone, none missing a model (exit %s, "
          "rounds %s)" % (codes, [(l.get("round"), l.get("peers"), l.get("missing")) for l in rounds]))
    # ... and each names the first tensor that differs, once (the layout message).
    la, lb = (open(k + ".log").read() for k in (qa, qb))
    said = [[l for l in log.splitlines() if "trains another model" in l] for log in (la, lb)]
    check(len(said[0]) == 1 and "tensor 0 'fc1.weight' is [16, 784] there and [32, 784] here" in said[0][0] and
          len(said[1]) == 1 and "tensor 0 'fc1.weight' is [32, 784] there and [16, 784] here" in said[1][0],
          "both name the first tensor that differs, once each: %s" % said)

    # 2. A peer stopped with SIGTERM leaves a checkpoint; with --resume it goes on from there.
    common = ["--model", "logreg", "--partition", "iid", "--of", "2", "--limit", "2000", "--batch", "32",
              "--lr", "0.05", "--topology", "complete", "--eval-every", "0", "--round-timeout", "0.5",
              "--min-peers", "2"]
    ra, rb = os.path.join(tmp, "ra"), os.path.join(tmp, "rb")
    pa, aa = start(tmp, swarm, keys[4], ra, common + ["--rank", "0", "--rounds", "100000"])
    pb, _ = start(tmp, swarm, keys[5], rb, common + ["--rank", "1", "--rounds", "600"], bootstrap=aa)
    ok = False
    end = time.time() + 20
    while time.time() < end and not ok:
        time.sleep(0.1)
        try:
            ok = len(metrics(rb)) > 50
        except (OSError, ValueError):
            pass
    pb.send_signal(signal.SIGTERM)
    code = wait_exit(pb, 20)
    check(code == 130, "SIGTERM: the peer stops with exit 130 (got %s)" % code)
    before = metrics(rb)
    last = before[-1]["round"]
    check(os.path.exists(os.path.join(rb, "checkpoint.safetensors")), "and leaves a checkpoint")
    check(not os.path.exists(os.path.join(rb, "model.safetensors")), "but no final model")
    r = subprocess.run([RUMOR, "node", "--key", keys[5] + ".key", "--cert", keys[5] + ".cert",
                        "--swarm", os.path.join(swarm, "authority.pub"), "--listen", "tcp://127.0.0.1:0",
                        "--run-dir", rb, "--data", DATA, *common, "--rank", "1", "--rounds", "600"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and r.stderr.startswith("rumor: error: ") and "--resume" in r.stderr
          and r.stderr.count("\n") == 1, "a new run over a checkpoint is refused: %s" % r.stderr.strip())
    # Resumed, it falls into step with the other peer, which has gone on meanwhile: its round
    # number jumps to the other's, and it mixes with it again.
    pb2, _ = start(tmp, swarm, keys[5], rb, common + ["--rank", "1", "--rounds", "100000", "--resume"], bootstrap=aa)
    after = []
    end = time.time() + 30
    while time.time() < end and not any(l.get("neighbours") == 1 for l in after[5:]):
        time.sleep(0.2)
        try:
            after = metrics(rb)[len(before):]
        except (OSError, ValueError):
            pass
    pb2.send_signal(signal.SIGTERM)
    check(wait_exit(pb2, 20) == 130, "the resumed peer runs until stopped")
    after = metrics(rb)[len(before):]
    check(len(after) > 5 and after[0]["round"] == last + 1 and after[-1]["round"] == last + len(after),
          "it went on from round %d, one round at a time (%s..%s)"
          % (last, after[0]["round"] if after else None, after[-1]["round"] if after else None))
    check(after and after[0]["step"] > before[-1]["step"], "with its optimizer's step count")
    check(any(l.get("neighbours") == 1 for l in after[5:]), "and mixes with the other peer again")
    pa.send_signal(signal.SIGTERM)
    check(wait_exit(pa, 20) == 130, "the long-running peer stops on SIGTERM too")

    # 3. Late join: a fresh peer joining a running swarm takes a neighbour's model (hash
    #    checked) instead of starting from random weights.
    common = ["--model", "logreg", "--partition", "iid", "--of", "3", "--limit", "3000", "--batch", "32",
              "--lr", "0.05", "--topology", "complete", "--eval-every", "0", "--round-timeout", "0.5",
              "--rounds", "100000"]
    rc1, rc2, rc3 = (os.path.join(tmp, "late%d" % i) for i in range(3))
    q0, a = start(tmp, swarm, keys[0], rc1, common + ["--rank", "0", "--min-peers", "2"])
    q1, _ = start(tmp, swarm, keys[1], rc2, common + ["--rank", "1", "--min-peers", "2"], bootstrap=a)
    ok = False
    end = time.time() + 90  # (a bound on waiting, not a speed: about 3 s on an idle machine)
    while time.time() < end and not ok:
        time.sleep(0.1)
        try:
            ok = len(metrics(rc1)) > 300
        except (OSError, ValueError):
            pass
    check(ok, "two peers train for 300 rounds")
    q2, _ = start(tmp, swarm, keys[2], rc3, common + ["--rank", "2", "--init-seed", "99"], bootstrap=a)
    ok = False
    end = time.time() + 60  # (as above)
    while time.time() < end and not ok:
        time.sleep(0.1)
        try:
            ok = len(metrics(rc3)) > 20
        except (OSError, ValueError):
            pass
    first = metrics(rc3)[0] if ok else {}
    with open(keys[2] + ".log") as f:
        log = f.read()
    check("joined the swarm at round" in log and "two members' models, which confirm each other" in log,
          "the new peer says it joined a running swarm, with a model two members confirm")
    check(first.get("test_acc", 0) > 0.5,
          "and starts from the swarm's model: test accuracy %s before its first step" % first.get("test_acc"))
    for q in (q0, q1, q2):
        q.send_signal(signal.SIGTERM)
    check([wait_exit(q, 20) for q in (q0, q1, q2)] == [130, 130, 130], "all three stop on SIGTERM")

    # 4. Back after the swarm finished: finished peers linger (--linger) to answer pulls; a peer
    #    that resumes from its checkpoint then takes the mean of two members' final models and
    #    ends with them, status 0. With one member only, nobody confirms a model: it ends with
    #    its own.
    def until_round(run_dir, rounds, seconds):
        end = time.time() + seconds
        while time.time() < end:
            try:
                m = metrics(run_dir)
                if m and m[-1]["round"] >= rounds:
                    return True
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        return False

    common = ["--model", "logreg", "--partition", "iid", "--limit", "3000", "--batch", "32", "--lr", "0.05",
              "--topology", "complete", "--eval-every", "0", "--round-timeout", "0.5", "--rounds", "200",
              "--checkpoint-every", "10", "--linger", "30", "--verbose"]
    for members in (2, 1):
        n = members + 1
        dirs = [os.path.join(tmp, "fin%d-%d" % (n, i)) for i in range(n)]
        extra = ["--of", str(n), "--min-peers", str(n)]
        f0, a = start(tmp, swarm, keys[0], dirs[0], common + extra + ["--rank", "0", "--control", "ipc://" + dirs[0] + ".ctl"])
        fs = [f0] + [start(tmp, swarm, keys[i], dirs[i], common + extra + ["--rank", str(i), "--control",
                                                                          "ipc://" + dirs[i] + ".ctl"], bootstrap=a)[0]
                     for i in range(1, n)]
        last = fs[-1]
        trained = until_round(dirs[-1], 40, 30)
        check(trained, "%d peers: the last one trains 40 rounds" % n)
        if not trained:  # what it waits for: its status, and its log's last lines
            st = rumortest.status("ipc://" + dirs[-1] + ".ctl") or {}
            print("  status: %s" % {k: st.get(k) for k in ("round", "models_given_up", "counters", "rejected")})
            print("  view: %s" % [(v.get("state"), v.get("via")) for v in st.get("view", [])])
            with open(keys[n - 1] + ".log") as f:
                print("  log: " + "  log: ".join(f.readlines()[-40:]), end="")
        last.kill()
        last.wait()
        check(all(until_round(d, 200, 60) for d in dirs[:-1]), "%d peers: the others finish 200 rounds" % n)
        before = metrics(dirs[-1])[-1]["round"]
        back, _ = start(tmp, swarm, keys[n - 1], dirs[-1], common + extra + ["--rank", str(n - 1), "--resume"],
                        bootstrap=a)
        code = wait_exit(back, 45)
        with open(keys[n - 1] + ".log") as f:
            log = f.read()
        mine = tensors(os.path.join(dirs[-1], "model.safetensors")) if code == 0 else None
        fin = [tensors(os.path.join(d, "model.safetensors")) for d in dirs[:-1]]
        if members == 2:
            check(code == 0 and "the swarm finished" in log,
                  "back after the swarm finished (from round %d): it takes the final model and ends (exit %s)"
                  % (before, code))
            mean = {k: [0.5 * (u + v) for u, v in zip(fin[0][k], fin[1][k])] for k in fin[0]}
            gap = max(abs(x - y) for k in mean for x, y in zip(mean[k], mine[k])) if mine else None
            check(gap is not None and gap < 1e-6, "its model is the mean of the two final models (max gap %s)" % gap)
            last_line = metrics(dirs[-1])[-1]
            check(last_line["round"] == 200 and last_line.get("swarm_final"),
                  "and its metrics end at round 200: %s" % last_line)
        else:
            check(code == 0 and "no two of their final models confirmed each other" in log,
                  "with one member only, it ends with its own model (exit %s)" % code)
            check(mine is not None and dist(mine, fin[0]) > 1e-3,
                  "one member alone does not hand it a model (distance %s)" % (dist(mine, fin[0]) if mine else None))
        for q in fs[:-1]:
            q.send_signal(signal.SIGTERM)
        check([wait_exit(q, 20) for q in fs[:-1]] == [0] * members, "lingering peers end on SIGTERM with status 0")
    return 1 if FAILS else 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
    print("%d failed" % len(FAILS))
    sys.exit(rc)
