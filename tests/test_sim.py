#!/usr/bin/python3
"""`rumor sim` end to end: a proc-mode swarm writes every file and agrees; a scenario kills
a peer (the others finish) and restarts it (it resumes from its checkpoint); Ctrl-C leaves a
complete summary; virtual mode is deterministic. Every wait is bounded.

usage: test_sim.py RUMOR_BINARY DATA_DIR
"""
import json
import os
import signal
import subprocess
import sys
import time

import rumortest
from rumortest import FAILS, check, dist, norm, tensors

RUMOR = None
DATA = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNG = b"\x89PNG\r\n\x1a\n"


def sim(*args, timeout=240):
    return subprocess.run([RUMOR, "sim", *args, "--data", DATA], capture_output=True, text=True, timeout=timeout)


def replayed(run):
    """A virtual run's summary.json, less what no seed replays (the real seconds it took, its
    folder's name)."""
    s = summary(run)
    s.pop("wall_s", None)
    return json.dumps(s, sort_keys=True).replace(run, "OUT")


def metrics(run, i):
    with open(os.path.join(run, "peer-%03d" % i, "metrics.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip().endswith("}")]


def summary(run):
    with open(os.path.join(run, "summary.json")) as f:
        return json.load(f)


def short_run(run, what, *args):
    """A 4-peer, 20-round run into run: its summary, or None (and a failed check) when it did not finish."""
    r = sim("--peers", "4", "--rounds", "20", "--eval-every", "0", "--out", run, "--no-plots", *args)
    try:
        with open(os.path.join(run, "summary.json")) as f:
            got = json.load(f)
    except (OSError, ValueError):
        got = None
    check(r.returncode == 0 and got, "%s finishes (exit %d) %s" % (what, r.returncode, r.stderr.strip()[-300:]))
    return got


def main():
    global RUMOR, DATA
    args = rumortest.data_test_args(sys.argv)
    if not args:
        return 77
    RUMOR, DATA = args
    tmp = rumortest.scratch("sim")
    small = ["--model", "logreg", "--limit", "4000", "--local-steps", "2", "--batch", "32", "--lr", "0.1",
             "--schedule", "constant"]

    # 1. Four real peers: every file of the run folder, and a swarm that learns and agrees.
    run = os.path.join(tmp, "basic")
    t0 = time.time()
    r = sim("--peers", "4", "--rounds", "30", "--eval-every", "5", "--out", run, *small)
    check(r.returncode == 0, "4 peers x 30 rounds finish (%.1f s, exit %d) %s" % (time.time() - t0, r.returncode,
                                                                                r.stderr.strip()[-300:]))
    s = summary(run) if os.path.exists(os.path.join(run, "summary.json")) else {}
    keys = ["peers", "rounds", "final_test_acc_mean", "final_test_acc_min", "consensus", "bytes_total", "wall_s",
            "config"]
    check(all(k in s for k in keys) and "virtual_s" not in s, "summary.json has %s (and no virtual_s)" % keys)
    check(s.get("peers") == 4 and s.get("rounds_done_min") == 30 and not s.get("interrupted"), "summary: 4 peers, 30 rounds")
    check((s.get("final_test_acc_min") or 0) > 0.6, "every peer learned: worst %s" % s.get("final_test_acc_min"))
    check(s.get("bytes_total", 0) > 0 and s.get("config", {}).get("topology") == "expo", "bytes and configuration")
    for i in range(4):
        d = os.path.join(run, "peer-%03d" % i)
        check(all(os.path.exists(os.path.join(d, n)) for n in ("metrics.jsonl", "command.txt", "node.log",
                                                              "model.safetensors", "checkpoint.safetensors")),
              "peer %d: metrics, command line, log, model, checkpoint" % i)
    with open(os.path.join(run, "peer-001", "command.txt")) as f:
        cmd = f.read()
    check("--bootstrap rumor://" in cmd and "--rank 1" in cmd and "--of 4" in cmd,
          "a peer's command line is what a user would type")
    pngs = ["accuracy_round.png", "accuracy_time.png", "accuracy_mb.png", "consensus.png", "loss.png"]
    ok = True
    for n in pngs:
        p = os.path.join(run, "plots", n)
        ok &= os.path.exists(p) and open(p, "rb").read(8) == PNG
    check(ok, "plots: %s" % pngs)
    # The peers start from one model and train on different shards (Dirichlet 0.5): gossip
    # keeps their models together.
    fin = [tensors(os.path.join(run, "peer-%03d" % i, "model.safetensors")) for i in range(4)]
    pair = max(dist(fin[i], fin[j]) for i in range(4) for j in range(i + 1, 4))
    size = max(norm(f) for f in fin)
    check(pair < 0.2 * size, "the final models agree: max pairwise distance %.3f, norm %.3f" % (pair, size))

    # 1b. A run of rumor 0.1 continued (`--resume`), its peers' keys unable to sign: the
    #     simulation's own keys are made again (the authority stays), and the run goes on.
    old = os.path.join(tmp, "old-keys")
    short_run(old, "a first run", *small)
    key = os.path.join(old, "swarm", "peer-000.key")
    with open(key, "w") as f:
        f.write("# rumor peer secret key (Curve25519), as rumor 0.1 wrote it\n" + "0" * 40 + "\n")
    os.chmod(key, 0o600)
    r = subprocess.run([RUMOR, "sim", "--resume", old, "--rounds", "24"], capture_output=True, text=True, timeout=240)
    line = [l.strip() for l in open(key) if l.strip() and not l.startswith("#")]
    check(r.returncode == 0 and summary(old).get("rounds_done_min") == 24 and line and len(line[0]) == 45,
          "a resumed run whose peer 0 holds a rumor 0.1 key gets a new one and goes on to round 24 (exit %d, a key "
          "line of %d characters) %s" % (r.returncode, len(line[0]) if line else 0, r.stderr.strip()[-200:]))

    # 2. Churn: peer 3 crashes at round 40, the others go on; it comes back at round 100,
    #    resumes from its last checkpoint (every 10 rounds) and falls into step with the swarm:
    #    the mean of two members' models that confirm each other, at their round, which its
    #    metrics go on from (or, if no two confirm, its own, at the checkpoint's round).
    #    (Rounds, not seconds: on a loaded machine a peer may still be loading its data a few
    #    seconds in.)
    run = os.path.join(tmp, "churn")
    scen = os.path.join(tmp, "churn.ini")
    with open(scen, "w") as f:
        f.write("# test\npeers = 4\nrounds = 1500\neval-every = 500\nevent = kill peer 3 at round 40\n"
                "event = restart peer 3 at round 100\n")
    r = sim(scen, "--out", run, "--no-plots", *small)
    check(r.returncode == 0, "churn scenario finishes (exit %d) %s" % (r.returncode, r.stderr.strip()[-300:]))
    if os.path.exists(os.path.join(run, "summary.json")):
        lines = metrics(run, 3)
        m3 = [l["round"] for l in lines]
        # The restarted process starts its clock again. Its first line is the swarm's model it
        # took, at the swarm's round, with the optimizer's steps of its checkpoint (20 a
        # checkpoint); or, without two confirming members, the round after the checkpoint,
        # which may be the very round it was killed at.
        back = [k for k in range(1, len(lines)) if lines[k]["t"] < lines[k - 1]["t"]]
        first = lines[back[0]] if back else {}
        if first.get("resync"):
            ok = len(back) == 1 and first["round"] > m3[back[0] - 1] and first["step"] % 20 == 0
        else:
            ok = len(back) == 1 and (m3[back[0]] - 1) % 10 == 0 and 1 < m3[back[0]] <= m3[back[0] - 1] + 1
        check(ok, "peer 3 resumed from a checkpoint%s: round %s after %s (step %s)" % (
            " and took the swarm's model" if first.get("resync") else "", first.get("round"),
            m3[back[0] - 1] if back else None, first.get("step")))
        check(m3 == sorted(m3) and len(set(m3)) == len(m3), "its metrics hold each round once")
        check(bool(m3) and m3[-1] == 1500, "and finished its 1500 rounds")
        others = [metrics(run, i)[-1]["round"] for i in range(3)]
        check(others == [1500, 1500, 1500], "the other peers finished too: %s" % others)

    # 3. Ctrl-C: the swarm stops cleanly and the summary is complete.
    run = os.path.join(tmp, "interrupted")
    p = subprocess.Popen([RUMOR, "sim", "--data", DATA, "--peers", "3", "--rounds", "1000000", "--out", run, "--no-plots",
                          *small], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.time() + 60
    while time.time() < end:
        try:
            if len(metrics(run, 0)) > 20:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    try:
        code = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        code = None
    check(code == 130, "SIGINT: the sim stops with exit 130 (got %s)" % code)
    s = summary(run) if os.path.exists(os.path.join(run, "summary.json")) else {}
    check(s.get("interrupted") is True and s.get("peers") == 3 and s.get("rounds_done_min", 0) > 0,
          "and writes a complete summary.json (interrupted, %s rounds)" % s.get("rounds_done_min"))
    alive = []
    for pid in os.listdir("/proc"):  # no pgrep on a minimal Debian
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if run.encode() in f.read():
                    alive.append(pid)
        except (OSError, ValueError):
            pass
    check(not alive, "no peer of the interrupted run is left running")
    # 3b. ... and `rumor sim --resume` continues it: every peer from its checkpoint, with the
    #     settings it was started with (here with fewer rounds, so that it ends), and the whole
    #     run in its files: each peer's metrics hold every round once, in order, to the end.
    if s.get("rounds_done_min"):
        until = s["rounds_done_min"] + 40
        r = subprocess.run([RUMOR, "sim", "--resume", run, "--rounds", str(until)], capture_output=True, text=True,
                           timeout=240)
        s2 = summary(run) if os.path.exists(os.path.join(run, "summary.json")) else {}
        rounds = [[l["round"] for l in metrics(run, i) if "round" in l] for i in range(3)]
        check(r.returncode == 0 and s2.get("interrupted") is False and s2.get("rounds_done_min") == until
              and all(rs == list(range(until + 1)) for rs in rounds) and s2.get("wall_s", 0) > s.get("wall_s", 0)
              and "continue with --resume" not in r.stderr,
              "rumor sim --resume continues the interrupted run to round %d (exit %d, rounds %s, wall_s %s then %s) %s"
              % (until, r.returncode, [(rs[0], rs[-1], len(rs)) if rs else None for rs in rounds], s.get("wall_s"),
                 s2.get("wall_s"), r.stderr.strip()[-300:]))

    # 3c. A peer whose privacy budget runs out ends on a mix in both modes: the first peer to
    #     stop stops at the same round on real nodes and in virtual mode.
    ends = {}
    budget = ["--peers", "4", "--model", "logreg", "--topology", "ring", "--local-steps", "2", "--dp", "clip=1,noise=3",
              "--dp-budget", "1.5", "--rounds", "400", "--eval-every", "0", "--limit", "8000", "--data", DATA,
              "--no-plots", "--quiet"]
    for mode in ("proc", "virtual"):
        out = os.path.join(tmp, "budget-" + mode)
        r = subprocess.run([RUMOR, "sim", "--mode", mode, "--out", out, "--trace-peers", *budget],
                           capture_output=True, text=True, timeout=300)
        ends[mode] = summary(out).get("rounds_done_min") if r.returncode == 0 else None
    check(ends["proc"] is not None and ends["proc"] == ends["virtual"] and ends["proc"] < 400,
          "a spent privacy budget ends a peer at the same round on real nodes and in virtual mode (%s)" % ends)

    # 3d. One peer core, two drivers: real nodes' traces (what each peer received, and when)
    #     replayed through virtual mode give the same decisions, peer by peer and round by round:
    #     the models sent and to whom, the mixes (and an overlapped round's landing), the
    #     evaluations, the checkpoints and the end.
    compare = os.path.join(ROOT, "tools", "compare-traces")
    cases = [("budget", budget),
             ("overlap", ["--peers", "5", "--model", "mlp:32", "--algo", "diloco:4", "--overlap", "--overlap-steps", "2",
                          "--rounds", "24", "--latency", "5", "--bandwidth", "200", "--limit", "4000", "--data", DATA,
                          "--no-plots", "--quiet"])]
    for name, args in cases:
        proc_out = os.path.join(tmp, "budget-proc") if name == "budget" else os.path.join(tmp, name + "-proc")
        if name != "budget":
            subprocess.run([RUMOR, "sim", "--out", proc_out, "--trace-peers", *args], capture_output=True, text=True,
                           timeout=300)
        rep = os.path.join(tmp, name + "-replay")
        r = subprocess.run([RUMOR, "sim", "--mode", "virtual", "--replay", proc_out, "--out", rep, *args],
                           capture_output=True, text=True, timeout=300)
        c = subprocess.run([compare, proc_out, rep], capture_output=True, text=True, timeout=60)
        lines = c.stdout.strip().splitlines()
        check(r.returncode == 0 and c.returncode == 0 and lines[-1:] == ["%s of %s peers the same" % (args[1], args[1])]
              and all("mixes" in l for l in lines[:-1]),
              "%s: real nodes replayed through virtual mode decide the same, round by round (%s) %s"
              % (name, "; ".join(lines), r.stderr.strip()[-300:]))
    c = subprocess.run([compare, os.path.join(tmp, "budget-proc"), os.path.join(tmp, "overlap-replay")],
                       capture_output=True, text=True, timeout=60)
    check(c.returncode == 1 and "differs" in c.stdout,
          "tools/compare-traces tells two different runs apart (exit %d: %s)" % (c.returncode, c.stdout.strip()[:200]))
    for args, want in ((["--mode", "proc", "--replay", tmp], "--replay needs --mode virtual"),
                       (["--mode", "virtual", "--replay", os.path.join(tmp, "nothing")], "no peer traces there")):
        r = subprocess.run([RUMOR, "sim", "--peers", "2", "--out", os.path.join(tmp, "bad-replay"), *args],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and r.stderr.startswith("rumor: error: ") and want in r.stderr
              and len(r.stderr.strip().splitlines()) == 1,
              "rumor sim %s: one line, exit 2 (%d: %s)" % (" ".join(args[:2]), r.returncode, r.stderr.strip()))

    # 4. Virtual mode: the same configuration gives the same files.
    outs = []
    for k in range(2):
        run = os.path.join(tmp, "virtual%d" % k)
        r = sim("--mode", "virtual", "--peers", "16", "--rounds", "20", "--topology", "epidemic:3", "--algo", "sgp",
                "--eval-every", "10", "--loss", "0.05", "--latency", "5", "--bandwidth", "100", "--out", run,
                "--no-plots", *small)
        check(r.returncode == 0, "virtual run %d finishes (exit %d) %s" % (k, r.returncode, r.stderr.strip()[-300:]))
        outs.append(run)
    same = all(os.path.exists(os.path.join(o, "summary.json")) for o in outs)
    if same:
        a, b = (replayed(o) for o in outs)
        same = a == b
        for i in range(16):
            same &= open(os.path.join(outs[0], "peer-%03d" % i, "metrics.jsonl")).read() == \
                open(os.path.join(outs[1], "peer-%03d" % i, "metrics.jsonl")).read()
    check(same, "virtual mode: two runs, identical summary.json and metrics")

    # 4b. Virtual mode runs the membership protocol: a killed peer stays in the others' views
    #     until their probes fail and the suspicion runs out (period 0.5 s, suspicion 2 s, as
    #     proc mode's nodes), and rounds wait for it meanwhile; then the views drop it.
    run = os.path.join(tmp, "virtual-kill")
    t_virtual = time.time()
    r = sim("--mode", "virtual", "--peers", "8", "--rounds", "300", "--step-ms", "10", "--eval-every", "0",
            "--event", "kill peer 7 at round 20", "--out", run, "--no-plots", *small)
    check(r.returncode == 0, "virtual run with a kill finishes (exit %d) %s" % (r.returncode, r.stderr.strip()[-300:]))
    if os.path.exists(os.path.join(run, "summary.json")):
        lines = [l for l in metrics(run, 0) if "peers" in l]
        killed_at = max(l["t"] for l in metrics(run, 7))
        full = [l for l in lines if l["peers"] == 8]
        drop = next((l for l in lines if l["peers"] != 8), None)  # (at the end, finished peers leave)
        detect = drop["t"] - killed_at if drop else None
        check(full and drop and drop["peers"] == 7 and drop["round"] > 20,
              "peer 0's view: 8 members, then 7 (%d rounds with 8, then %s)" % (len(full), drop and drop["peers"]))
        check(detect is not None and 2.0 <= detect <= 6.0,
              "the kill is noticed by failed probes and suspicion: %s s after it" % detect)
        check(any(l.get("missing", 0) > 0 for l in full), "rounds wait for the dead peer until then")
        # Its summary names each clock: the virtual seconds it simulated (the metrics' last t, for
        # rounds of 10 ms steps and more), the real ones it took.
        sm = summary(run)
        last_t = max(l["t"] for i in range(8) for l in metrics(run, i))
        check(abs(sm.get("virtual_s", 0) - last_t) < 1.0 and 0 < sm.get("wall_s", 0) < time.time() - t_virtual
              and "virtual)" in r.stderr,
              "virtual_s is the virtual time (%s, metrics end at %.3f), wall_s the real time (%s), and the status "
              "names both" % (sm.get("virtual_s"), last_t, sm.get("wall_s")))

    # 4b'. A restarted peer goes on from its last checkpoint (every 10 rounds), as a node does:
    #      killed at round 65, it comes back with the optimizer's steps of round 60, its metrics
    #      cut back to that round, and falls into step with the swarm (the mean of two members'
    #      models, at their round): no round twice in the file.
    run = os.path.join(tmp, "virtual-restart")
    r = sim("--mode", "virtual", "--peers", "8", "--rounds", "120", "--eval-every", "0",
            "--event", "kill peer 3 at round 65", "--event", "restart peer 3 at round 90", "--out", run, "--no-plots",
            *small)
    check(r.returncode == 0, "virtual run with a restart finishes (exit %d) %s" % (r.returncode, r.stderr.strip()[-300:]))
    if r.returncode == 0:
        m3 = [l for l in metrics(run, 3)]
        rounds = [l["round"] for l in m3]
        gap = m3[61]["t"] - m3[60]["t"] if len(m3) > 61 else 0
        slow = max(l["t"] for l in metrics(run, 0) if l["round"] <= 90) - max(l["t"] for l in metrics(run, 0) if l["round"] <= 65)
        check(rounds[:61] == list(range(61)) and rounds == sorted(set(rounds)) and rounds[-1] == 120,
              "the restarted peer's metrics hold each round once, up to 120")
        check(len(m3) > 61 and m3[61].get("resync") and m3[61]["step"] == m3[60]["step"] and m3[61]["round"] >= 85
              and gap >= 0.5 * slow,
              "it went on from its round-60 checkpoint (steps %s -> %s, %.2f s later), into the swarm's round %s"
              % (m3[60]["step"] if len(m3) > 60 else None, m3[61]["step"] if len(m3) > 61 else None, gap,
                 m3[61]["round"] if len(m3) > 61 else None))

    # 4b''. Faults at random, many times: a fault-free run, then 24 seeds of kills, restarts,
    #       stragglers, loss and partitions, each checked against it (virtual mode, iid). A
    #       seed replays exactly.
    run = os.path.join(tmp, "soak")
    soak_args = ["--mode", "virtual", "--peers", "8", "--rounds", "80", "--eval-every", "0", "--partition", "iid",
                 "--no-plots", *small, "--schedule", "cosine"]  # (a constant rate ends 2 points noisy)
    t = time.time()
    r = sim(*soak_args, "--soak", "24", "--out", run, timeout=300)
    took = time.time() - t
    lines = [l for l in r.stderr.splitlines() if l.startswith("seed ")]
    bad = {}
    for l in lines:
        if "FAILED [" in l:
            for name in l.split("FAILED [", 1)[1].split("]", 1)[0].split():
                bad[name] = bad.get(name, 0) + 1
    # Every invariant holds on these seeds here: no run fails, every peer finishes, the final
    # models' spread within twice the fault-free run's, accuracy within a point. One seed may
    # miss the spread or the accuracy on another CPU, whose float sums differ.
    check(len(lines) == 24 and not {k: v for k, v in bad.items() if k not in ("consensus", "accuracy")}
          and bad.get("consensus", 0) + bad.get("accuracy", 0) <= 1,
          "soak: on 24 seeds every invariant holds (failures: %s) %s"
          % (bad, r.stderr.strip()[-300:] if len(lines) != 24 else ""))
    check(took < 120, "and take under two minutes (%.0f s)" % took)
    cfgs = []
    for k in range(1, 25):
        try:
            with open(os.path.join(run, "seed-%d" % k, "summary.json")) as f:
                cfgs.append(json.load(f)["config"])
        except (OSError, ValueError, KeyError):
            pass
    kills = sum(sum(e.startswith("kill") for e in cf["events"]) for cf in cfgs)
    check(len(cfgs) == 24 and kills >= 24 and sum(bool(cf["partitions"]) for cf in cfgs) >= 4 and
          sum(cf["straggler"] >= 0 for cf in cfgs) >= 4 and sum(cf["loss"] > 0 for cf in cfgs) >= 4,
          "the seeds drew faults: %d kills, partitions in %d runs, stragglers in %d, loss in %d"
          % (kills, sum(bool(cf["partitions"]) for cf in cfgs), sum(cf["straggler"] >= 0 for cf in cfgs),
             sum(cf["loss"] > 0 for cf in cfgs)))
    outs = [os.path.join(tmp, "replay-%d" % k) for k in range(2)]
    for o in outs:
        sim(*soak_args, "--faults", "7", "--out", o)
    same = all(os.path.exists(os.path.join(o, "summary.json")) for o in outs)
    if same:
        a, b = (replayed(o) for o in outs)
        same = a == b and all(open(os.path.join(outs[0], "peer-%03d" % i, "metrics.jsonl")).read() ==
                              open(os.path.join(outs[1], "peer-%03d" % i, "metrics.jsonl")).read() for i in range(8))
    check(same, "--faults 7 replays exactly: the same summary and metrics twice")

    # 4c. A Byzantine peer (virtual mode, 16 peers), the attacker matrix: one peer sends -10 or
    #     12 times its model, FLT_MAX, or its model said to be of round 10^9, or 30 rounds past
    #     its own, every round; on default settings (robust auto: guard) no honest peer stops
    #     and the swarm ends within a point of the attack-free run, and so with --robust clip.
    #     One member's word moves no peer's round: under ahead:30 every honest peer's learning
    #     rate, which follows the engine's round, is the attack-free run's at every round. Plain D-PSGD (--robust none)
    #     is dragged away by -10 times; -1000 times is out of all proportion to the receivers'
    #     own models: even plain D-PSGD drops it (counted "implausible").
    acc = {}
    attacked = ("scale:-10", "scale:12", "max", "round:1000000000", "ahead:30")
    for name, extra in (("free", ()), ("plain", ("--robust", "none")),
                        ("attack", ("--byzantine", "3", "--attack", "scale:-10", "--robust", "none")),
                        *((a, ("--byzantine", "3", "--attack", a)) for a in attacked),
                        ("clip", ("--byzantine", "3", "--attack", "scale:12", "--robust", "clip")),
                        ("huge", ("--byzantine", "3", "--attack", "scale:-1000", "--robust", "none"))):
        run = os.path.join(tmp, "byz-" + name)
        r = sim("--mode", "virtual", "--peers", "16", "--rounds", "40", "--out", run, "--no-plots", *extra, *small,
                "--schedule", "cosine")  # (a constant rate leaves the final accuracy some points noisy)
        try:
            with open(os.path.join(run, "summary.json")) as f:
                acc[name] = json.load(f)["final_test_acc_mean"]
        except (OSError, ValueError, KeyError):
            acc[name] = None
        check(r.returncode == 0 and acc[name] is not None, "byzantine %s run finishes (exit %d)" % (name, r.returncode))
    if all(v is not None for v in acc.values()):
        # Without an attacker the default's bound clips hardly anyone (honest neighbours lie
        # within twice their median distance): the run ends where plain averaging's does.
        check(abs(acc["free"] - acc["plain"]) <= 0.002, "the default ends an attack-free swarm where plain "
              "averaging does: %.4f, plain %.4f" % (acc["free"], acc["plain"]))
        check(acc["attack"] < acc["free"] - 0.2, "plain D-PSGD under attack: %.3f against %.3f without attack"
              % (acc["attack"], acc["free"]))
        check(all(acc[a] > acc["free"] - 0.01 for a in attacked),
              "on default settings every attack ends within a point of the attack-free run (%.3f): %s"
              % (acc["free"], ", ".join("%s %.3f" % (a, acc[a]) for a in attacked)))
        check(acc["clip"] > acc["free"] - 0.01, "and with --robust clip (scale:12: %.3f)" % acc["clip"])
        lrs = {name: [[(l["round"], l["lr"]) for l in metrics(os.path.join(tmp, "byz-" + name), i) if "lr" in l]
                      for i in range(16) if i != 3] for name in ("free", "ahead:30")}
        check(lrs["free"] == lrs["ahead:30"] and len(lrs["free"][0]) == 40,
              "one member 30 rounds ahead moves no honest peer's round: every learning rate as without it")
        check(acc["huge"] > acc["free"] - 0.05, "plain D-PSGD drops a -1000x model: %.3f against %.3f without attack"
              % (acc["huge"], acc["free"]))
        run = os.path.join(tmp, "byz-huge")
        counted = [max([l.get("implausible", 0) for l in metrics(run, i)] or [0]) for i in range(16)]
        check(counted[4] >= 30 and counted[3] == 0,
              "peer 3's out-neighbour counts its rounds implausible, peer 3 nothing: %s" % counted)

    # 4c'. Two kinds with real nodes (proc mode, 16 peers), on default settings (guard): 12
    #      times its model, and round 10^9; no honest node stops, every one trains its 30
    #      rounds, and the swarm ends within 2 points of the attack-free run (0.785 and 0.794
    #      against 0.792 seen; on 8 peers, one neighbour of three, scale:12 cost 1.8 points).
    #      Plain mixing under 12 times ends at 0.66; before a model of a round beyond the
    #      window counted as its sender having moved on, the attacker was waited for to the
    #      deadline every round, and round 10^9 ended at 0.749 against 0.793.
    real = {}
    for name, attack in (("free", "none"), ("scale", "scale:12"), ("round", "round:1000000000")):
        run = os.path.join(tmp, "byz-proc-" + name)
        r = sim("--peers", "16", "--rounds", "30", "--out", run, "--no-plots", "--byzantine", "3", "--attack", attack,
                *small, "--schedule", "cosine")
        try:
            with open(os.path.join(run, "summary.json")) as f:
                s = json.load(f)
            real[name] = s["final_test_acc_mean"] if s.get("rounds_done_min") == 30 else None
        except (OSError, ValueError, KeyError):
            real[name] = None
        check(r.returncode == 0 and real[name] is not None,
              "real nodes, attack %s: every node trains its 30 rounds (exit %d) %s" % (attack, r.returncode,
                                                                                      r.stderr.strip()[-200:]))
    if all(v is not None for v in real.values()):
        check(real["scale"] > real["free"] - 0.02 and real["round"] > real["free"] - 0.02,
              "real nodes on default settings end near the attack-free run: scale:12 %.3f, round 10^9 %.3f, none %.3f"
              % (real["scale"], real["round"], real["free"]))

    # 4d. DP-SGD with a budget (virtual mode): every peer logs the epsilon it spent, and stops
    #     training before passing the budget.
    run = os.path.join(tmp, "dp")
    r = sim("--mode", "virtual", "--peers", "4", "--rounds", "60", "--eval-every", "0", "--dp", "clip=1,noise=1",
            "--dp-budget", "3", "--out", run, "--no-plots", *small)
    check(r.returncode == 0, "DP run finishes (exit %d) %s" % (r.returncode, r.stderr.strip()[-300:]))
    if os.path.exists(os.path.join(run, "summary.json")):
        last = [[l for l in metrics(run, i) if "epsilon" in l][-1] for i in range(4)]
        eps = [l["epsilon"] for l in last]
        check(all(0 < e <= 3 for e in eps) and any(l["round"] < 60 for l in last),
              "epsilon logged, within the budget, training stopped by it: %s at rounds %s"
              % (["%.3f" % e for e in eps], [l["round"] for l in last]))
        with open(os.path.join(run, "summary.json")) as f:
            summ = json.load(f)
        em = summ.get("epsilon_max")
        check(em is not None and abs(em - max(eps)) < 1e-4, "summary.json: epsilon_max %s" % em)
        # Virtual mode's noise comes from --seed: the summary must not let it pass for privacy.
        check(summ.get("dp_noise", "").startswith("seeded") and "protects nothing" in summ.get("dp_noise", ""),
              "summary.json says the noise is seeded: %s" % summ.get("dp_noise"))

    # 4e. Codecs: int8 models cost a quarter of the bytes and fp16 half (virtual mode, whose
    #     receivers decode what the sender encoded, as a node does) and real nodes decode them
    #     (proc mode); accuracy stays with float32's.
    got = {}
    for mode, codec in (("virtual", "f32"), ("virtual", "int8"), ("virtual", "fp16"), ("proc", "int8")):
        got[(mode, codec)] = short_run(os.path.join(tmp, "codec-%s-%s" % (mode, codec)),
                                       "%s run with --codec %s" % (mode, codec), "--mode", mode, "--codec", codec, *small)
    f32, i8, p8 = got[("virtual", "f32")], got[("virtual", "int8")], got[("proc", "int8")]
    if f32 and i8 and p8:
        ratio = f32["bytes_total"] / max(1, i8["bytes_total"])
        check(3.8 < ratio < 4.1, "int8 sends %.2fx fewer bytes than float32" % ratio)
        h16 = got[("virtual", "fp16")]
        check(h16 is not None and 1.99 < f32["bytes_total"] / max(1, h16["bytes_total"]) < 2.01
              and abs(h16["final_test_acc_mean"] - f32["final_test_acc_mean"]) < 0.01,
              "fp16 sends half the bytes and learns as float32 does: %s" % (h16 and h16["final_test_acc_mean"]))
        check(abs(i8["final_test_acc_mean"] - f32["final_test_acc_mean"]) < 0.03 and p8["final_test_acc_min"] > 0.6,
              "and learns as well: %.3f against %.3f (proc mode, worst peer %.3f)"
              % (i8["final_test_acc_mean"], f32["final_test_acc_mean"], p8["final_test_acc_min"]))

    # 4e'. Top-k: compressed differences of public copies (CHOCO-SGD), a hundredth of the
    #      entries as 8-byte pairs, in virtual mode and between real nodes; the swarm learns.
    got = {}
    for mode in ("virtual", "proc"):
        got[mode] = short_run(os.path.join(tmp, "codec-%s-topk" % mode), "%s run with --codec topk:0.01" % mode,
                              "--mode", mode, "--codec", "topk:0.01", "--consensus-step", "0.05", *small)
    if f32 and got["virtual"] and got["proc"]:
        rv = f32["bytes_total"] / max(1, got["virtual"]["bytes_total"])
        rp = f32["bytes_total"] / max(1, got["proc"]["bytes_total"])
        # 49.7x in steady state; a peer that starts before the others loses deltas and sends
        # a keyframe or two, which weigh in a run this short.
        check(rv > 20 and rp > 20, "top-k sends %.1fx (virtual) and %.1fx (real nodes) fewer bytes than float32" % (rv, rp))
        check(got["virtual"]["final_test_acc_min"] > 0.5 and got["proc"]["final_test_acc_min"] > 0.5,
              "and learns: worst peer %.3f (virtual), %.3f (real nodes)"
              % (got["virtual"]["final_test_acc_min"], got["proc"]["final_test_acc_min"]))

    # 4e''. int4 with diloco: compressed differences of the inner results' public copies, 4.25
    #       bits a parameter (7.5x fewer bytes than float32), in virtual mode and between real
    #       nodes; the swarm learns as float32 diloco does.
    got = {}
    for mode, codec in (("virtual", "f32"), ("virtual", "int4"), ("proc", "int4")):
        got[(mode, codec)] = short_run(os.path.join(tmp, "diloco-%s-%s" % (mode, codec)),
                                       "%s diloco run with --codec %s" % (mode, codec), "--mode", mode, "--algo", "diloco:4",
                                       "--codec", codec, "--model", "logreg", "--limit", "4000", "--batch", "32",
                                       "--lr", "0.05", "--momentum", "0", "--schedule", "constant")
    d32, v4, p4 = got[("virtual", "f32")], got[("virtual", "int4")], got[("proc", "int4")]
    if d32 and v4 and p4:
        rv = d32["bytes_total"] / max(1, v4["bytes_total"])
        rp = d32["bytes_total"] / max(1, p4["bytes_total"])
        check(rv > 7.0 and rp > 6.5, "int4 diloco sends %.2fx (virtual) and %.2fx (real nodes) fewer bytes than float32"
              % (rv, rp))
        check(abs(v4["final_test_acc_mean"] - d32["final_test_acc_mean"]) < 0.03 and p4["final_test_acc_min"] > 0.7,
              "and learns as float32 diloco does: %.3f against %.3f (real nodes, worst peer %.3f)"
              % (v4["final_test_acc_mean"], d32["final_test_acc_mean"], p4["final_test_acc_min"]))

    # 4f. Secure mixing: real nodes send masked models that only their sum unmasks; the swarm
    #     learns and agrees as plain mixing does, for the same bytes (virtual mode alike).
    got = {}
    for mode in ("proc", "virtual"):
        got[mode] = short_run(os.path.join(tmp, "secure-%s" % mode), "%s run with --secure-mix" % mode, "--mode", mode,
                              "--topology", "complete", "--secure-mix", *small)
    sp, sv = got["proc"], got["virtual"]
    if sp and sv and f32:
        lines = [metrics(os.path.join(tmp, "secure-proc"), i)[-1] for i in range(4)]
        check(all("unmixed" in l for l in lines) and sp["config"].get("secure_mix") is True,
              "metrics count the chunks left unmixed: %s" % [l.get("unmixed") for l in lines])
        fin = [tensors(os.path.join(tmp, "secure-proc", "peer-%03d" % i, "model.safetensors")) for i in range(4)]
        pair = max(dist(fin[i], fin[j]) for i in range(4) for j in range(i + 1, 4))
        check(pair < 0.2 * max(norm(f) for f in fin), "securely mixed models agree: max pairwise distance %.3f" % pair)
        check(sp["final_test_acc_min"] > 0.6 and abs(sv["final_test_acc_mean"] - f32["final_test_acc_mean"]) < 0.03,
              "and learn: worst peer %.3f (proc), %.3f against plain %.3f (virtual)"
              % (sp["final_test_acc_min"], sv["final_test_acc_mean"], f32["final_test_acc_mean"]))
    # A securely mixing peer killed and restarted (from its checkpoint) never masks a round it
    # may have masked before: it starts past the bound it kept, and the swarm goes on.
    run = os.path.join(tmp, "secure-churn")
    scen = os.path.join(tmp, "secure-churn.ini")
    with open(scen, "w") as f:
        f.write("secure-mix = yes\ntopology = complete\nrounds = 600\neval-every = 0\nevent = kill peer 3 at round 40\n"
                "event = restart peer 3 at round 100\n")
    r = sim(scen, "--peers", "4", "--out", run, "--no-plots", *small)
    try:
        with open(os.path.join(run, "summary.json")) as f:
            got = json.load(f)
    except (OSError, ValueError):
        got = None
    check(r.returncode == 0 and got, "secure mixing with a restarted peer finishes (exit %d) %s"
          % (r.returncode, r.stderr.strip()[-300:]))
    if got:
        bound = os.path.join(run, "peer-003", "secure-mix.round")
        log = open(os.path.join(run, "peer-003", "node.log")).read() if os.path.exists(os.path.join(run, "peer-003", "node.log")) else ""
        others = [metrics(run, i)[-1]["round"] for i in range(3)]
        # It ends with the swarm: its own rounds done, or, the others finished first, with its
        # own model (under secure mixing none is lent in the clear), saying so.
        ended = metrics(run, 3)[-1]["round"] == 600 or "no model is lent in the clear" in log
        check(os.path.exists(bound) and "starting past them" in log and others == [600] * 3 and ended,
              "the restarted peer started past its masked rounds (bound file %s), the others finished (%s), "
              "and it ended with them" % (os.path.exists(bound), others))
    r = subprocess.run([RUMOR, "sim", "--secure-mix", "--robust", "clip"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and r.stderr.startswith("rumor: error: ") and "robust" in r.stderr,
          "--secure-mix with --robust: %s" % r.stderr.strip())

    # 4g. wait_s, each round's wait on gossip (virtual mode, 2 peers, 10 local steps of 1 ms):
    #     the time between two rounds' lines is the local phase plus that wait, exactly. D-PSGD
    #     waits for each round's models (about the latency); with --overlap a latency shorter
    #     than the local phase is hidden (no wait), a longer one is not.
    waits = {}
    for latency, overlap in ((5, False), (5, True), (50, True)):
        run = os.path.join(tmp, "wait-%d-%d" % (latency, overlap))
        r = sim("--mode", "virtual", "--peers", "2", "--topology", "complete", "--rounds", "12", "--step-ms", "1",
                "--latency", str(latency), "--eval-every", "0", "--out", run, "--no-plots", "--model", "logreg",
                "--limit", "4000", "--local-steps", "10", *(["--overlap"] if overlap else []))
        lines = [l for l in metrics(run, 0) if "wait_s" in l] if r.returncode == 0 else []
        gaps = [abs(b["t"] - a["t"] - (0.010 + b["wait_s"])) for a, b in zip(lines, lines[1:])]
        check(len(lines) == 12 and max(gaps) < 2e-6, "latency %d ms%s: each round takes its phase and its wait_s "
              "(largest difference %.2g s)" % (latency, " overlapped" if overlap else "", max(gaps) if gaps else -1))
        # (the overlapped run's last round is not overlapped: it waits, and ends on a mix)
        waits[(latency, overlap)] = sum(l["wait_s"] for l in lines[1:-1])
        waits[(latency, overlap, "last")] = lines[-1]["wait_s"] if lines else 0
    w5, w5o, w50o = waits.get((5, False), 0), waits.get((5, True), 1), waits.get((50, True), 0)
    check(0.025 < w5 < 0.08 and w5o < 1e-5 and w50o > 0.3 and waits.get((5, True, "last"), 0) > 0.004,
          "waits on gossip over rounds 2..11: %s s at 5 ms latency; overlapped %s s at 5 ms (and %s s in the last "
          "round), %s s at 50 ms" % (w5, w5o, waits.get((5, True, "last")), w50o))
    # 4g'. Overlapped diloco (diloco:10, 2 peers, steps of 1 ms, 5 ms latency): a round's models
    #      travel during the next phase's first 6 steps and its outer step lands there; the
    #      rounds still take 10 steps each, their wait disappears, and the model learns as
    #      the plain diloco's does.
    got = {}
    for overlap in (False, True):
        run = os.path.join(tmp, "dwait-%d" % overlap)
        r = sim("--mode", "virtual", "--peers", "2", "--topology", "complete", "--rounds", "12", "--step-ms", "1",
                "--latency", "5", "--eval-every", "0", "--out", run, "--no-plots", "--model", "logreg",
                "--limit", "4000", "--algo", "diloco:10", "--lr", "0.05", "--momentum", "0", "--schedule", "constant",
                *(["--overlap", "--overlap-steps", "6"] if overlap else []))
        lines = [l for l in metrics(run, 0) if "wait_s" in l] if r.returncode == 0 else []
        gaps = [abs(b["t"] - a["t"] - (0.010 + b["wait_s"])) for a, b in zip(lines, lines[1:])]
        check(len(lines) == 12 and max(gaps) < 2e-6 and lines[-1]["step"] == 120,
              "diloco%s: 12 rounds of 10 steps, each its phase and its wait_s (largest difference %.2g s)"
              % (" overlapped" if overlap else "", max(gaps) if gaps else -1))
        try:
            with open(os.path.join(run, "summary.json")) as f:
                got[overlap] = (sum(l["wait_s"] for l in lines[2:-1]), json.load(f)["final_test_acc_mean"])
        except (OSError, ValueError):
            got[overlap] = (0, 0)
    (wp, ap), (wo, ao) = got[False], got[True]
    check(wp > 0.03 and wo < 1e-5 and abs(ao - ap) < 0.03,
          "diloco waits %.3f s over rounds 3..11, overlapped %.1g s; test accuracy %.3f and %.3f" % (wp, wo, ap, ao))
    run = os.path.join(tmp, "secure-proc")
    lines = [l for l in metrics(run, 0) if "loss" in l] if os.path.isdir(run) else []
    check(lines and all(0 <= l["wait_s"] < 60 for l in lines), "a node's rounds say how long they waited: %s"
          % [l.get("wait_s") for l in lines[:5]])

    # 4h. The optimizers a swarm mixes: dadamw's second moment travels with the model (twice the
    #     bytes of adamw, and other models); qgm's momentum follows the mixed model (other models
    #     than plain SGD without momentum, which it is until a round has mixed); a tracker too.
    got = {}
    for opt in ("adamw", "dadamw", "qgm", "sgd", "sgd-heavy", "sgd-nesterov", "sgd-tracking"):
        run = os.path.join(tmp, "opt-" + opt)
        r = sim("--mode", "virtual", "--peers", "4", "--rounds", "10", "--eval-every", "0", "--out", run, "--no-plots",
                "--model", "logreg", "--limit", "4000", "--local-steps", "2", "--partition", "dirichlet:0.1",
                "--optimizer", opt.split("-")[0], "--lr", "0.001" if "adam" in opt else "0.1",
                *(["--momentum", "0"] if opt in ("sgd", "sgd-tracking") else []),
                *(["--nesterov"] if "nesterov" in opt else []), *(["--tracking"] if "tracking" in opt else []))
        try:
            with open(os.path.join(run, "summary.json")) as f:
                got[opt] = json.load(f)
        except (OSError, ValueError):
            got[opt] = None
    ok = all(got.values())
    check(ok and got["dadamw"]["bytes_total"] == 2 * got["adamw"]["bytes_total"]
          and got["dadamw"]["final_test_acc_mean"] != got["adamw"]["final_test_acc_mean"]
          and got["qgm"]["final_test_acc_mean"] != got["sgd"]["final_test_acc_mean"],
          "dadamw sends its second moment (%s bytes against adamw's %s) and qgm moves otherwise than SGD (%s, %s)"
          % tuple((got[k] or {}).get(f) for k, f in (("dadamw", "bytes_total"), ("adamw", "bytes_total"),
                                                    ("qgm", "final_test_acc_mean"), ("sgd", "final_test_acc_mean"))))
    plain, tracked = got["sgd"] or {}, got["sgd-tracking"] or {}
    check(tracked.get("bytes_total") == 2 * plain.get("bytes_total", -1)
          and tracked.get("final_test_acc_mean") != plain.get("final_test_acc_mean"),
          "--tracking sends a tracker with the model (%s bytes against %s) and moves otherwise (%s, %s)"
          % (tracked.get("bytes_total"), plain.get("bytes_total"), tracked.get("final_test_acc_mean"),
             plain.get("final_test_acc_mean")))
    heavy, nesterov = ((got[k] or {}).get("final_test_acc_mean") for k in ("sgd-heavy", "sgd-nesterov"))
    check(heavy is not None and nesterov is not None and heavy != nesterov,
          "virtual mode takes --nesterov (momentum 0.9: %s heavy-ball, %s Nesterov)" % (heavy, nesterov))

    # 4i. Runs started together, without --out, each get a folder of their own under runs/.
    here = os.path.join(tmp, "together")
    os.makedirs(here)
    procs = [subprocess.Popen([RUMOR, "sim", "--mode", "virtual", "--peers", "2", "--rounds", "2", "--model", "logreg",
                               "--limit", "500", "--eval-every", "0", "--no-plots", "--quiet"], cwd=here,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(3)]
    rcs = [p.wait(timeout=120) for p in procs]
    made = sorted(os.listdir(os.path.join(here, "runs"))) if os.path.isdir(os.path.join(here, "runs")) else []
    check(rcs == [0, 0, 0] and len(made) == 3
          and all(os.path.isfile(os.path.join(here, "runs", d, "summary.json")) for d in made),
          "three runs started together: exit %s, folders %s" % (rcs, made))

    # 5. Errors: one line each, exit 2, saying what is wrong.
    missing = os.path.join(tmp, "missing.ini")
    for args, what, reason in (
            (["--peers", "0"], "--peers 0", "--peers 0: expected an integer in 1..4096"),
            (["--frob", "1"], "an unknown option", "unknown option '--frob' (see rumor sim --help)"),
            ([missing], "a missing scenario", missing + ": No such file or directory"),
            (["--event", "explode peer 1 at 2s"], "a bad event",
             "event 'explode peer 1 at 2s': expected 'kill peer N at 40s', 'restart peer N at 60s' or 'kill 25% at "
             "round 50'"),
            (["--topology", "hypercube", "--peers", "6"], "a topology not defined on 6 peers",
             "hypercube needs a power of 2 peers, not 6"),
            (["--faults", "0"], "--faults 0", "--faults 0: expected an integer, 1 or more"),
            (["--soak", "3", "--faults", "2"], "--soak with --faults",
             "--soak runs seeds 1..N, --faults one seed: give one of them"),
            (["--algo", "diloco:10", "--overlap", "--overlap-steps", "10"], "--overlap-steps of all of H",
             "--overlap-steps 10: diloco:10 overlaps 1 to 9 inner steps"),
            (["--algo", "sgp", "--optimizer", "dadamw"], "dadamw with sgp",
             "--optimizer dadamw (optimizer state gossiped with the model) needs dpsgd"),
            (["--mode", "virtual", "--algo", "diloco:5", "--tracking"], "--tracking with diloco",
             "--tracking (optimizer state gossiped with the model) needs dpsgd"),
            (["--mode", "virtual", "--tracking", "--loss", "0.1"], "--tracking with lost messages",
             "--tracking and --loss exclude each other"),
            (["--mode", "virtual", "--tracking", "--robust", "trim:1"], "--tracking with robust mixing",
             "--tracking and --robust exclude each other"),
            (["--mode", "virtual", "--tracking", "--dp", "clip=1,noise=1", "--dp-budget", "8"],
             "--tracking with a privacy budget", "--tracking and --dp-budget exclude each other"),
            (["--mode", "proc", "--tracking"], "--tracking on real links", "--tracking needs --mode virtual")):
        r = subprocess.run([RUMOR, "sim", *args], capture_output=True, text=True, timeout=30)
        lines = r.stderr.splitlines()
        check(r.returncode == 2 and r.stderr.startswith("rumor: error: ") and r.stderr.count("\n") == 1
              and len(lines) == 1 and reason in lines[0] and not r.stdout,
              "%s: exit %d, %r (expected one line saying %r)" % (what, r.returncode, r.stderr.strip(), reason))
    return 1 if FAILS else 0


if __name__ == "__main__":
    rc = main()
    print("%d failed" % len(FAILS))
    sys.exit(rc)
