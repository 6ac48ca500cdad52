#!/usr/bin/env python3
"""tools/plot on synthetic run folders: the aggregated numbers against closed forms, the
five PNGs (one run, several runs overlaid, many peers), nothing left behind, and the error
contract. Skips (77) without gnuplot.

usage: test_plot.py SOURCE_ROOT
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # importing tools/plot must not leave tools/__pycache__

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FAILS = []
PLOT = None


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def close(a, b):
    return a is not None and abs(a - b) < 1e-9


# ---- a synthetic run ----
# peer i, round r in 1..20: t = r + 0.1 i, loss = 2/r + 0.1 i, consensus = 0.5/r (0 at
# round 20), bytes_out = 1000 (i+1) r, test_acc = 0.5 + 0.02 r + 0.01 i every 5 rounds.
# Round 0: t = 0.1 i, test_acc 0.1. Peer 2 dies after round 12 in the middle of a line;
# peer 0 reports consensus nan at round 1 (as C's printf writes it); peer 1 was restarted
# and wrote round 3 twice (the second, loss 9, counts).

def peer_lines(i, rounds, last, lm=False):
    lines = ['{"t":%.3f,"round":0,"step":0,"test_loss":2.302585,"test_acc":0.1000}' % (0.1 * i)]
    for r in range(1, min(rounds, last) + 1):
        cons = "nan" if (i == 0 and r == 1) else ("0" if r == 20 else "%.6g" % (0.5 / r))
        line = ('{"t":%.3f,"round":%d,"step":%d,"loss":%.6f,"lr":0.05,"consensus":%s,"w":1,'
                '"peers":3,"neighbours":2,"missing":0,"bytes_out":%d,"bytes_in":%d'
                % (r + 0.1 * i, r, 10 * r, 2.0 / r + 0.1 * i, cons, 1000 * (i + 1) * r, 1000 * r))
        if r % 5 == 0 and lm:  # a language model: val_loss = 3 - 0.02 r - 0.01 i
            line += ',"val_loss":%.6f,"val_acc":%.4f' % (3.0 - 0.02 * r - 0.01 * i, 0.2)
        elif r % 5 == 0:
            line += ',"test_loss":%.6f,"test_acc":%.4f' % (1.0 / r, 0.5 + 0.02 * r + 0.01 * i)
        lines.append(line + "}")
        if i == 1 and r == 3:  # restarted from an earlier checkpoint: round 3 again
            lines.append(line.replace('"loss":%.6f' % (2.0 / r + 0.1 * i), '"loss":9.000000') + "}")
    return lines


def make_run(path, peers=3, rounds=20, algo="dpsgd", topology="ring", die=None, lm=False):
    os.makedirs(path)
    for i in range(peers):
        d = os.path.join(path, "peer-%03d" % i)
        os.makedirs(d)
        last = die[1] if die and die[0] == i else rounds
        text = "\n".join(peer_lines(i, rounds, last, lm)) + "\n"
        if die and die[0] == i:
            text += '{"t":13.2,"round":13,"step":1'  # killed while writing
        with open(os.path.join(d, "metrics.jsonl"), "w") as f:
            f.write(text)
    summary = {"mode": "virtual", "peers": peers, "rounds": rounds, "interrupted": False,
               "config": {"mode": "virtual", "peers": peers, "topology": topology, "algo": algo,
                          "model": "mlp:32", "partition": "dirichlet:0.5", "rounds": rounds}}
    with open(os.path.join(path, "summary.json"), "w") as f:
        json.dump(summary, f)


def load_plot(root):
    path = os.path.join(root, "tools", "plot")
    loader = importlib.machinery.SourceFileLoader("rumor_plot", path)
    spec = importlib.util.spec_from_loader("rumor_plot", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def run_plot(args, env=None, python=None):
    cmd = ([python, PLOT] if python else [PLOT]) + args
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=60, env=env)


def check_pngs(folder, what, first="accuracy"):
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    want = sorted(n + ".png" for n in (first + "_round", first + "_time", first + "_mb", "consensus", "loss"))
    check(names == want, "%s: exactly the five plots in %s (found %s)" % (what, folder, names))
    for n in want:
        p = os.path.join(folder, n)
        head = b""
        if os.path.isfile(p):
            with open(p, "rb") as f:
                head = f.read(8)
        check(head == PNG_SIGNATURE and os.path.getsize(p) > 1000, "%s: %s is a PNG" % (what, n))


def expect_error(args, what, contains=None, env=None, python=None):
    p = run_plot(args, env=env, python=python)
    lines = p.stderr.splitlines()
    ok = p.returncode == 2 and len(lines) == 1 and lines[0].startswith("rumor: error: ")
    if contains:
        ok = ok and contains in p.stderr
    check(ok, "%s: exit %d, stderr %r" % (what, p.returncode, p.stderr))


def main():
    global PLOT
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    PLOT = os.path.join(root, "tools", "plot")
    if shutil.which("gnuplot") is None:
        print("skip: gnuplot is not installed (apt-get install gnuplot-nox)")
        return 77
    check(os.access(PLOT, os.X_OK), "tools/plot is executable")
    mod = load_plot(root)
    tmp = tempfile.mkdtemp(prefix="rumor-test-plot-")
    try:
        a, b, c = (os.path.join(tmp, n) for n in ("run-a", "run-b", "run-many"))
        make_run(a, die=(2, 12))
        make_run(b, algo="pushsum", topology="exponential")
        make_run(c, peers=12, rounds=10)

        # ---- the numbers, against the closed forms above ----
        run = mod.Run(a)
        check(sorted(run.peers) == [0, 1, 2], "three peers read")
        check([rec["round"] for rec in run.peers[2]][-1] == 12, "a half-written last line is skipped")
        acc = {r: rest for r, *rest in mod.accuracy_series(run)}
        check(sorted(acc) == [0, 5, 10, 15, 20], "accuracy on the evaluated rounds (%s)" % sorted(acc))
        t, mb, mean, worst = acc[10]
        check(close(mean, 0.71) and close(worst, 0.70), "round 10: mean 0.71, worst 0.70 (%r, %r)" % (mean, worst))
        check(close(t, 10.1), "round 10: mean t 10.1 (%r)" % t)
        check(close(mb, 0.06), "round 10: swarm MB 0.06 (%r)" % mb)
        t, mb, mean, worst = acc[15]
        check(close(mean, 0.805) and close(worst, 0.80), "round 15 (peer 2 dead): mean over two (%r)" % mean)
        check(close(t, 15.05), "round 15: mean t over the peers that evaluated (%r)" % t)
        check(close(mb, 0.081), "round 15: the dead peer counts its last bytes_out (%r)" % mb)
        check(close(acc[0][1], 0.0) and close(acc[0][2], 0.1), "round 0: no bytes, accuracy 0.1")
        lm = os.path.join(tmp, "run-lm")
        make_run(lm, lm=True)
        q = mod.quality(mod.Run(lm))
        val = {r: rest for r, *rest in mod.accuracy_series(mod.Run(lm), q[0], q[4])}
        check(q[0] == "val_loss" and mod.quality(run)[0] == "test_acc", "a language model's run is judged by val_loss")
        check(close(val[10][2], 2.79) and close(val[10][3], 2.8),
              "round 10: mean validation loss 2.79, worst (highest) 2.80 (%r)" % (val.get(10),))
        cons = dict(mod.consensus_series(run))
        check(close(cons.get(1), 0.5), "consensus: nan left out of the mean (%r)" % cons.get(1))
        check(20 not in cons and close(cons.get(4), 0.125), "consensus: zero means left out")
        loss = mod.loss_series(run)
        check(close(dict(loss[1])[3], 9.0), "a repeated round counts with its last line")
        check(close(dict(mod.mean_loss_series(run))[2], 1.1), "mean loss at round 2")
        rb = mod.Run(b)
        check(mod.default_labels([run, rb]) == ["dpsgd ring", "pushsum exponential"], "labels from summary.json")
        check(mod.default_labels([run, run]) == ["run-a", "run-a"], "clashing labels fall back to folder names")

        # ---- the plots ----
        scratch = os.path.join(tmp, "scratch")  # TMPDIR of tools/plot: must be left empty
        os.makedirs(scratch)
        env = dict(os.environ, TMPDIR=scratch)
        p = run_plot([a], env=env)
        check(p.returncode == 0, "one run: exit %d, stderr %r" % (p.returncode, p.stderr))
        check_pngs(os.path.join(a, "plots"), "one run")
        check(os.listdir(scratch) == [], "gnuplot's data files are cleaned up")

        out = os.path.join(tmp, "compare")
        p = run_plot([a, b, "-o", out, "--label", "D-PSGD", "--label", "push_sum"], env=env)
        check(p.returncode == 0, "two runs: exit %d, stderr %r" % (p.returncode, p.stderr))
        check_pngs(out, "two runs")

        p = run_plot([c], env=env)
        check(p.returncode == 0, "12 peers: exit %d, stderr %r" % (p.returncode, p.stderr))
        check_pngs(os.path.join(c, "plots"), "12 peers")
        p = run_plot([lm])
        check(p.returncode == 0, "a language model's run plots: exit %d, %s" % (p.returncode, p.stderr.strip()))
        check_pngs(os.path.join(lm, "plots"), "a language model's run", first="val_loss")
        check(os.listdir(scratch) == [], "nothing left in TMPDIR")

        for py in sorted({"/usr/bin/python3", shutil.which("python3") or ""} - {""}):
            if os.path.exists(py):
                shutil.rmtree(os.path.join(a, "plots"))
                p = run_plot([a], python=py)
                check(p.returncode == 0, "with %s: exit %d, stderr %r" % (py, p.returncode, p.stderr))
                check_pngs(os.path.join(a, "plots"), "with " + py)

        # ---- the error contract ----
        expect_error([os.path.join(tmp, "nothing")], "missing run folder")
        empty = os.path.join(tmp, "empty")
        os.makedirs(os.path.join(empty, "peer-000"))
        expect_error([empty], "a run folder without metrics")
        expect_error([a, b], "several runs without -o")
        expect_error([], "no run folder")
        expect_error([a, "--frobnicate"], "unknown option")
        expect_error([a, "-o"], "-o without a value")
        expect_error([a, "--label", "x", "--label", "y"], "more labels than runs")
        bare = os.path.join(tmp, "bare-path")
        os.makedirs(bare)
        expect_error([a, "-o", os.path.join(tmp, "nogp")], "gnuplot missing", contains="install gnuplot-nox",
                     env=dict(os.environ, PATH=bare), python=sys.executable)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
