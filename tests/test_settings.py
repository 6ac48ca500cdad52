#!/usr/bin/env python3
"""The settings table, walked: every setting refuses a value outside its range or set with one
line `rumor: error: ...` that names it and says why, and exit status 2, through every command
that takes it and through sim's scenario files; every number is accepted at each end of its
range (--check) and refused just past it; the ranges are this test's own table (RANGES), which
must agree with `rumor settings --json`; every default is accepted (--check), every older
spelling still works, every command's --help names all of its settings, and proc mode's
command line for a node turns back into the same settings.

usage: test_settings.py RUMOR
"""
import concurrent.futures
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

RUMOR = os.path.abspath(sys.argv[1])
MAN = sys.argv[2] if len(sys.argv) > 2 else None  # the build's man/: the pages and example.conf
FAILS = []
CHECKS = 0

U64_MAX = 2 ** 64 - 1
NUMBERS = ("int", "long", "u64", "float", "double")

# The range of every number setting, as src/settings/settings.c's table has it today (`rumor CMD --help`
# names a few ends: sim's "proc mode: at most 256" peers, node's "--suspect at least --period";
# the rest only here): name -> (bracket, min, max, bracket), "[" and "]" an end that is
# accepted, "(" and ")" one that is not. Written here, not read from rumor, so that a range
# changed by mistake in the table fails this test; a change meant is made in both.
RANGES = {
    # what is learnt, and how
    "vocab": ("[", 0, 65536, "]"),
    "rank": ("[", 0, 99999, "]"),
    "of": ("[", 1, 100000, "]"),
    "limit": ("[", 0, 10 ** 9, "]"),
    "batch": ("[", 1, 65536, "]"),
    "lr": ("(", 0, 10, "]"),
    "momentum": ("[", 0, 1, ")"),
    "weight-decay": ("[", 0, 1, "]"),
    "warmup": ("[", 0, 10 ** 9, "]"),
    "seed": ("[", 0, U64_MAX, "]"),
    "init-seed": ("[", 0, U64_MAX, "]"),
    "threads": ("[", 0, 1024, "]"),
    # the swarm
    "rounds": ("[", 1, 10 ** 8, "]"),
    "local-steps": ("[", 1, 100000, "]"),
    "eval-every": ("[", 0, 10 ** 8, "]"),
    "outer-lr": ("(", 0, 10, "]"),
    "outer-momentum": ("[", 0, 1, ")"),
    "overlap-steps": ("[", 0, 100000, "]"),
    "dp-budget": ("[", 0, 10 ** 6, "]"),
    "consensus-step": ("[", 0, 1, "]"),
    "slowdown": ("[", 1, 1000, "]"),
    "latency": ("[", 0, 60000, "]"),
    "bandwidth": ("[", 0, 10 ** 6, "]"),
    "loss": ("[", 0, 1, ")"),
    # rumor train
    "epochs": ("[", 0, 100000, "]"),
    "steps": ("[", 0, 10 ** 12, "]"),
    "clip-grad": ("[", 0, 10 ** 6, "]"),
    "log-every": ("[", 0, 10 ** 8, "]"),
    "checkpoint-steps": ("[", 0, 10 ** 15, "]"),
    "max-steps": ("[", 0, 10 ** 15, "]"),
    # rumor node
    "join-timeout": ("[", 0, 86400, "]"),
    "relay-budget": ("[", 0.01, 100000, "]"),
    "view-size": ("[", 1, 200, "]"),
    "period": ("[", 10, 600000, "]"),
    "suspect": ("[", 10, 3600000, "]"),
    "linger": ("[", 0, 86400, "]"),
    "checkpoint-every": ("[", 0, 10 ** 8, "]"),
    "min-peers": ("[", 0, 100000, "]"),
    "round-timeout": ("[", 0.01, 3600, "]"),
    # rumor sim
    "peers": ("[", 1, 4096, "]"),
    "step-ms": ("[", 0, 10 ** 6, "]"),
    "straggler": ("[", -1, 4095, "]"),
    "byzantine": ("[", -1, 4095, "]"),
    "faults": ("[", 1, U64_MAX, "]"),
    "soak": ("[", 0, 100000, "]"),
    "soak-from": ("[", 1, 100000, "]"),
}

# What else an end of a range needs to pass the checks of the settings as a whole (a rank
# within its --of, --suspect at least --period, sim's proc mode at most 256 peers, ...).
CONTEXT = {
    "rank": ["--partition", "iid", "--of", "100000"],
    "of": ["--partition", "iid", "--rank", "0"],
    "dp-budget": ["--dp", "clip=1,noise=1"],
    "checkpoint-steps": ["--checkpoint", None],  # a file in the scratch folder (main); --check writes none
    "period": ["--suspect", "3600000"],
    "suspect": ["--period", "10"],
    "peers": ["--mode", "virtual"],
    "straggler": ["--mode", "virtual", "--peers", "4096"],
    "byzantine": ["--mode", "virtual", "--peers", "4096"],
    "soak-from": ["--soak", "100000"],
}

# Why a string or a list refuses "no-such-value!" (its own parser's words).
STRING_REASONS = {
    "model": "unknown model 'no-such-value!' (expected logreg, mlp:",
    "partition": "unknown partition 'no-such-value!' (expected iid, dirichlet:ALPHA",
    "optimizer": "unknown optimizer 'no-such-value!' (expected sgd, adamw",
    "schedule": "unknown schedule 'no-such-value!' (expected constant, step:EPOCHS,GAMMA or cosine)",
    "device": "unknown device 'no-such-value!' (expected cpu, cuda or auto)",
    "algo": "unknown --algo 'no-such-value!' (expected dpsgd, sgp or diloco:H)",
    "topology": "unknown topology 'no-such-value!' (one of complete, ring",
    "robust": "unknown --robust 'no-such-value!' (expected auto, none, guard",
    "attack": "--attack 'no-such-value!': expected scale:K, noise:S",
    "dp": "--dp no-such-value!: 'no-such-value!' is not key=value",
    "codec": "unknown --codec 'no-such-value!' (expected f32, fp16",
    "mode": "--mode no-such-value!: expected proc or virtual",
    "bootstrap": "--bootstrap no-such-thing: expected rumor://KEY@HOST:PORT",
    "event": "event 'no-such-thing': expected 'kill peer N at 40s', 'restart peer N at 60s' or 'kill 25% at round 50'",
}
JUNK_REASONS = {"int": "is not an integer", "long": "is not an integer", "u64": "is not a non-negative integer",
                "float": "is not a finite number", "double": "is not a finite number"}


def check(cond, what):
    global CHECKS
    CHECKS += 1
    if not cond:
        print("FAIL " + what, flush=True)
        FAILS.append(what)


def run(*args):
    p = subprocess.run([RUMOR, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def refused(what, args, name, reason):
    """args must end with exit 2 and exactly one line naming the setting and the reason."""
    expect_refusal(what, run(*args), name, reason)


def expect_refusal(what, result, name, reason):
    rc, out, err = result
    lines = err.splitlines()
    check(rc == 2 and len(lines) == 1 and lines[0].startswith("rumor: error: ") and name in lines[0]
          and reason in lines[0] and not out,
          "%s: exit %d, stderr %r, stdout %r (expected one line naming %r, saying %r)"
          % (what, rc, err[:300], out[:100], name, reason))


def f32(x):
    """x as a float (single precision) holds it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_inward(x, up):
    """The float (single precision) next to x towards +inf (up) or -inf."""
    bits = struct.unpack("<i", struct.pack("<f", x))[0]
    if x == 0:
        return struct.unpack("<f", struct.pack("<i", 1))[0] * (1 if up else -1)
    bits += 1 if (x > 0) == up else -1
    return struct.unpack("<f", struct.pack("<i", bits))[0]


def range_text(t, rng):
    """A range as rumor's refusals write it: 1..100, (0, 10], 1 or more."""
    lb, lo, hi, hb = rng
    if t == "u64":
        return "%d or more" % lo
    if t in ("int", "long"):
        return "%d..%d" % (lo, hi)
    return "%s%g, %g%s" % (lb, lo, hi, hb)


def number_text(t, x):
    return "%d" % x if t in ("int", "long", "u64") else "%.17g" % x


def ends(t, rng):
    """A number row's ends: [(value refused, value accepted)] at its low end and its high end;
    refused just outside a closed end (the next double past it, the next integer), accepted at
    it; refused at an open end, accepted at the nearest value inside that the setting holds
    (a float's or a double's)."""
    lb, lo, hi, hb = rng
    out = []
    for end, bracket, outward in ((lo, lb, -math.inf), (hi, hb, math.inf)):
        if t in ("int", "long", "u64"):
            out.append((end - 1 if outward < 0 else end + 1, end))
        elif bracket in "[]":
            # (a float setting is checked as the float it will be: past its end by a float)
            out.append((f32_inward(end, outward > 0) if t == "float" else math.nextafter(end, outward), end))
        else:
            inward = -outward
            out.append((end, f32_inward(end, inward > 0) if t == "float" else math.nextafter(end, inward)))
    return out


def refusal_reason(t, name, v, rng):
    """Why rumor refuses number v (text) for name: the range, in its words."""
    if t == "u64" and int(v) < 0:
        return "--%s: '%s' is not a non-negative integer" % (name, v)
    if t == "u64" and int(v) > U64_MAX:
        return "--%s %s: expected an integer below 2^64" % (name, v)
    what = "an integer, " if t == "u64" else "an integer in " if t in ("int", "long") else "a number in "
    return "--%s %s: expected %s%s" % (name, v, what, range_text(t, rng))


PARSED = set()  # the types whose text parser has been fed garbage once (one parser a type)


def bad_values(row):
    """Values row refuses, each with the reason the refusal must give: for a number, just past
    each end of its range (RANGES, not rumor's own table), and, the first time a type is seen,
    text its parser must refuse."""
    t = row["type"]
    name = row["name"]
    junk = {"int": ["abc", "1.5"], "long": ["abc", " 1"], "u64": ["-1", "abc", "0x10"],
            "float": ["nan", "inf", "x", "1e999"], "double": ["nan", "-inf", "1,5"]}.get(t, [])
    if t in PARSED:
        junk = []
    PARSED.add(t)
    junk = [(v, "--%s: '%s' %s" % (name, v, JUNK_REASONS[t])) for v in junk]
    if t in NUMBERS:
        rng = RANGES.get(name)
        if rng is None:
            return junk
        out = []
        for v, _ in ends(t, rng):
            text = number_text(t, v)
            if t == "u64" and v < 0 and "-1" in [j[0] for j in junk]:
                continue  # the junk already asks for -1
            out.append((text, refusal_reason(t, name, text, rng)))
        return out + junk
    if t == "string":
        return [("no-such-value!", STRING_REASONS.get(name, "(no reason known: add --%s to STRING_REASONS)" % name))] \
            if row["checked"] else []
    if t == "switch":
        return [] if row.get("train_value") else [("maybe", "--%s maybe: expected yes or no" % name)]
    if t == "list":
        return [("no-such-thing", STRING_REASONS.get(name, "(no reason known: add --%s to STRING_REASONS)" % name))]
    return []


def good_value(row, cmd):
    d = row["defaults"].get(cmd)
    if d is not None:
        return d
    t = row["type"]
    rng = RANGES.get(row["name"])
    if t in NUMBERS and rng:
        lb, lo, hi, hb = rng
        if hb == "]" and t != "u64":
            return number_text(t, hi)
        return "%d" % max(lo, 1) if t in ("int", "long", "u64") else "%.17g" % ((lo + hi) / 2)
    return None


def table_agrees(table):
    """RANGES and `rumor settings --json` name the same number settings with the same ranges."""
    rows = {r["name"]: r for r in table if r["type"] in NUMBERS}
    for name in sorted(set(rows) - set(RANGES)):
        r = rows[name]
        check(False, "rumor settings --json has the number setting --%s (%s %s, %s) that the test's RANGES lacks"
              % (name, r["type"], r["lo"], r["hi"]))
    for name in sorted(set(RANGES) - set(rows)):
        check(False, "the test's RANGES has --%s, which rumor settings --json has not as a number" % name)
    for name in sorted(set(RANGES) & set(rows)):
        r, (lb, lo, hi, hb) = rows[name], RANGES[name]
        # A u64 has no upper end of its own: settings --json writes 1.8e19 for 2^64 - 1.
        hi_same = 1.8e19 <= r["hi"] <= 2.0 ** 64 if r["type"] == "u64" and hi == U64_MAX else r["hi"] == hi
        theirs = "%s%.17g, %.17g%s" % ("(" if r["open_lo"] else "[", r["lo"], r["hi"], ")" if r["open_hi"] else "]")
        check(r["lo"] == lo and hi_same and r["open_lo"] == (lb == "(") and r["open_hi"] == (hb == ")"),
              "--%s: the test's RANGES says %s%s, %s%s, rumor settings --json says %s" % (name, lb, lo, hi, hb, theirs))


SIM_UNPRINTED = ("threads", "soak", "soak-from")  # sim --check prints its summary's config, without these


def echoed(out, cmd, name):
    """The value --check printed for name (train and node print the settings by name, sim its
    summary's config: weight_decay, latency_ms), or None where it printed none."""
    got = json.loads(out)
    keys = [name] if cmd != "sim" else [name.replace("-", "_"), name.replace("-", "_") + "_ms",
                                        name.replace("-", "_") + "_mbps"]
    for k in keys:
        if k in got:
            return got[k]
    return None


def expect_accepted(what, result, cmd, name, t, v, at_end):
    """--check took v: exit 0 and v printed back, exactly where v is an end of the range (a float
    setting: as a float holds it), and to the 9 digits --check prints where it is the value
    nearest an open end."""
    rc, out, err = result
    try:
        got = echoed(out, cmd, name) if rc == 0 else None
    except ValueError:
        got = None
    if rc == 0 and got is None and cmd == "sim" and name in SIM_UNPRINTED:
        check(not err, "%s: accepted, nothing said (%r)" % (what, err))
        return
    if got is None or isinstance(got, bool) or not isinstance(got, (int, float)):
        same = False
    elif t in ("int", "long", "u64"):
        same = isinstance(got, int) and got == v
    elif t == "float":
        same = f32(float(got)) == f32(v)
    else:
        same = float(got) == v if at_end else abs(float(got) - v) <= 1e-8 * abs(v)
    check(rc == 0 and same and not err, "%s: accepted and printed back (exit %d, printed %r, stderr %r)"
          % (what, rc, got, err[:300]))


def manual_agrees(table_text, ident, tmp):
    """The manual and example.conf are the table's: man/settings.json is what rumor prints, the
    pages render without a warning and show every option --help does, and example.conf's lines,
    every one uncommented, set each node setting to its default."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "man", "settings.json")) as f:
        snapshot = f.read()
    check(snapshot.strip() == table_text.strip(), "man/settings.json is the table rumor prints (after a change to "
          "the table: man/gen.py --update build/src/rumor)")
    if not MAN:
        return
    check(shutil.which("man") is not None, "man is there to render the pages (tools/setup --test installs man-db)")
    if not shutil.which("man"):
        return
    for cmd in ("node", "train", "sim", None):
        page = os.path.join(MAN, "rumor-%s.1" % cmd if cmd else "rumor.1")
        p = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, MANWIDTH="100", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat"))
        text = p.stdout.replace("\u2010\n", "").replace("\u2010", "-")
        check(p.returncode == 0 and not p.stderr.strip() and "NAME" in text,
              "%s renders without a warning (%s)" % (os.path.basename(page), p.stderr.strip()[:200]))
        if cmd:
            flags = [l.split()[0] for l in run(cmd, "--help")[1].splitlines() if l.startswith("  --")]
            missing = [fl for fl in flags if fl not in text]
            check(len(flags) > 20 and not missing, "rumor-%s(1) shows every option --help does (missing %s)"
                  % (cmd, missing))
    conf = os.path.join(MAN, "example.conf")
    base = run("node", *ident, "--check")
    with open(conf) as f:
        lines = [l[2:] for l in f if re.match(r"# [a-z-]+ = \S", l) and "(one a line)" not in l]
    full = os.path.join(tmp, "example-full.conf")
    with open(full, "w") as f:
        f.write("".join(lines))
    r1, r2 = run("node", *ident, "--config", conf, "--check"), run("node", *ident, "--config", full, "--check")
    j0, j1, j2 = (json.loads(r[1]) if r[0] == 0 else {"rc": r[2]} for r in (base, r1, r2))
    for j in (j0, j1, j2):
        j.pop("config", None)
    check(len(lines) > 25 and j0 == j1 == j2, "example.conf, commented or every line uncommented (%d), sets the "
          "defaults: %s" % (len(lines), {k: (j0.get(k), j2.get(k)) for k in set(j0) | set(j2) if j0.get(k) != j2.get(k)}))


def main():
    rc, out, _ = run("settings", "--json")
    check(rc == 0, "rumor settings --json runs")
    table = json.loads(out)
    names = [r["name"] for r in table]
    check(len(names) == len(set(names)), "every setting has a name of its own")
    check(len(table) > 60, "the table holds the settings of three commands (%d)" % len(table))
    table_agrees(table)
    # A library peer takes a node's swarm settings, with a node's defaults, and nothing of
    # rumor's own trainer.
    peer = {r["name"]: r for r in table if "peer" in r["where"]}
    for name in ("algo", "topology", "codec", "bootstrap", "key", "listen", "min-peers", "round-timeout", "linger"):
        check(name in peer and peer[name]["defaults"].get("peer") == peer[name]["defaults"].get("node"),
              "a library peer takes %s, with a node's default" % name)
    for name in ("lr", "model", "data", "dp", "optimizer", "batch", "tracking", "peers", "resume"):
        check(name not in peer, "a library peer does not take %s" % name)
    helps = {cmd: run(cmd, "--help")[1] for cmd in ("train", "node", "sim")}
    tmp = tempfile.mkdtemp(prefix="rumor-test-settings-")
    CONTEXT["checkpoint-steps"][1] = os.path.join(tmp, "ck.safetensors")
    scenario = os.path.join(tmp, "rules.ini")
    # What a node's --check needs besides (--run-dir: a training node's).
    ident = ["--key", "k", "--cert", "c", "--swarm", "s", "--listen", "tcp://127.0.0.1:0", "--run-dir", tmp]
    try:
        manual_agrees(out, ident, tmp)
        jobs = []  # ("refused", what, args, name, reason) or ("accepted", what, args, cmd, name, type, value, at_end)
        for row in table:
            name = row["name"]
            t = row["type"]
            bad = bad_values(row)
            number = t in NUMBERS and name in RANGES
            # A library peer has no command line: its refusals and checks are tests/test_api.c's.
            for k, cmd in enumerate(c for c in row["where"] if c != "peer"):
                # --help names it (a switch on by default as --no-NAME)
                check("--" + name in helps[cmd] or "--no-" + name in helps[cmd], "%s --help names --%s" % (cmd, name))
                # Every bad value through one command, one through the rest; a number's ends
                # through every command.
                for v, reason in bad if k == 0 else bad[:2] if number else bad[:1]:
                    args = [cmd, "--%s=%s" % (name, v)] if t == "switch" else [cmd, "--" + name, v]
                    jobs.append(("refused", "%s --%s %s" % (cmd, name, v), args + ["--check"], name, reason))
                if number:
                    extra = (ident if cmd == "node" else []) + CONTEXT.get(name, [])
                    for (_, v), end in zip(ends(t, RANGES[name]), (RANGES[name][0], RANGES[name][3])):
                        text = number_text(t, v)
                        jobs.append(("accepted", "%s --%s %s (%s end of %s)" % (cmd, name, text, "the" if end in "[]"
                                     else "next to the open", range_text(t, RANGES[name])),
                                     [cmd, *extra, "--" + name, text, "--check"], cmd, name, t, v, end in "[]"))
                if row["defaults"].get(cmd) is not None and t == "string":
                    jobs.append(("refused", "%s --%s= (a setting with a default)" % (cmd, name),
                                 [cmd, "--%s=" % name, "--check"], name, "--%s: empty value" % name))
                if row["old"] and cmd == "train":
                    v = good_value(row, cmd)
                    extra = ["--checkpoint", os.path.join(tmp, "ck.safetensors"), "--check"]
                    rc, out, err = run(cmd, "--" + row["old"], v, *extra)
                    check(rc == 0 and json.loads(out).get(name) == json.loads(run(cmd, "--" + name, v, *extra)[1])
                          .get(name), "%s: the old spelling --%s still sets --%s (%s)" % (cmd, row["old"], name, err))
            if "sim" in row["where"]:  # the scenario file: the same refusal, with file and line
                for i, (v, reason) in enumerate(bad[:1]):
                    path = os.path.join(tmp, "bad-%s-%d.ini" % (name, i))
                    with open(path, "w") as f:
                        f.write("# a scenario\nmode = virtual\n%s = %s\n" % (name, v))
                    jobs.append(("refused", "scenario %s = %s" % (name, v), ["sim", path, "--check"],
                                 "-%d.ini:3: " % i, reason))
        n_refused = sum(1 for j in jobs if j[0] == "refused")
        print("%d refusals and %d ends of ranges to ask for" % (n_refused, len(jobs) - n_refused), flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            for job, result in zip(jobs, pool.map(lambda j: run(*j[2]), jobs)):
                if job[0] == "refused":
                    expect_refusal(job[1], result, job[3], job[4])
                else:
                    expect_accepted(job[1], result, *job[3:])
        # Every command's defaults pass its own checks.
        for cmd, extra in (("train", []), ("sim", []),
                           ("node", ["--key", "k", "--cert", "c", "--swarm", "s", "--listen", "tcp://127.0.0.1:0"])):
            rc, out, err = run(cmd, *extra, "--check")
            check(rc == 0 and json.loads(out), "%s's defaults pass its checks (%s)" % (cmd, err.strip()))
        # Node's old spellings (its --check needs the identity flags too).
        for row in table:
            if row["old"] and "node" in row["where"]:
                v = good_value(row, "node")
                rc, out, err = run("node", *ident, "--" + row["old"], v, "--check")
                check(rc == 0 and float(json.loads(out)[row["name"]]) == float(v),
                      "node: the old spelling --%s sets --%s (%s)" % (row["old"], row["name"], err.strip()))
        # The rules between settings: one line each, whichever way they came in.
        refused("sim --dp-budget without --dp", ["sim", "--dp-budget", "3", "--check"], "--dp-budget",
                "--dp-budget needs --dp")
        refused("node --dp-budget without --dp", ["node", *ident, "--dp-budget", "3", "--check"], "--dp-budget",
                "--dp-budget needs --dp")
        refused("train --rank alone", ["train", "--rank", "1", "--check"], "--rank",
                "--partition, --rank and --of go together")
        refused("node --rank of its --of", ["node", *ident, "--partition", "iid", "--rank", "4", "--of", "4",
                                            "--check"], "--rank 4 --of 4", "expected 0 <= rank < of")
        refused("sim --straggler past the peers", ["sim", "--peers", "4", "--straggler", "4", "--check"],
                "--straggler 4", "only 4 peers")
        with open(scenario, "w") as f:
            f.write("peers = 4\nbyzantine = 5\n")
        refused("scenario byzantine past the peers", ["sim", scenario, "--check"], "--byzantine 5", "only 4 peers")
        refused("train --resume without a file", ["train", "--resume", "--check"], "--resume",
                "--resume needs --checkpoint FILE (or --resume FILE)")
        # --resume FILE, the older spelling, still parses: the settings come from FILE.
        missing = os.path.join(tmp, "x.safetensors")
        refused("train --resume FILE", ["train", "--resume", missing, "--check"], missing,
                missing + ": No such file or directory")
        # The one text form of settings: --config FILE reads `key = value` lines as if the flags
        # were given there (train, node, sim alike); later flags override them.
        conf = os.path.join(tmp, "node.conf")
        with open(conf, "w") as f:
            f.write("# a node's settings\nmodel = mlp:64\nlr = 0.125  # comment\n\n[swarm]\ntopology = ring\n"
                    "bootstrap = rumor://%s@127.0.0.1:7470\n" % ("A" * 19 + "#" + "A" * 20))
        # (a `#` inside a value, as Z85 keys have, is the value's: it is no comment)
        flags = ["--model", "mlp:64", "--lr", "0.125", "--topology", "ring", "--bootstrap",
                 "rumor://%s@127.0.0.1:7470" % ("A" * 19 + "#" + "A" * 20)]
        r1 = run("node", *ident, "--config", conf, "--check")
        r2 = run("node", *ident, *flags, "--check")
        j1 = json.loads(r1[1]) if r1[0] == 0 else {}
        j2 = json.loads(r2[1]) if r2[0] == 0 else {}
        j1.pop("config", None), j2.pop("config", None)
        check(r1[0] == 0 and j1 == j2, "node --config FILE sets what the same flags set (%s) %s" % (r1[2].strip(), r2[2].strip()))
        r3 = run("node", *ident, "--config", conf, "--lr", "0.5", "--check")
        check(r3[0] == 0 and float(json.loads(r3[1])["lr"]) == 0.5, "a flag after --config overrides its line")
        r4 = run("train", "--config", conf, "--check")
        check(r4[0] == 2 and r4[2].startswith("rumor: error: ") and conf + ":6:" in r4[2] and "'topology'" in r4[2],
              "train --config names the file and line of a setting train does not take (%s)" % r4[2].strip())
        with open(conf, "w") as f:
            f.write("lr = 0.1\nmodel = mlp:64\nlr = fast\n")
        refused("a bad line of --config", ["train", "--config", conf, "--check"], conf + ":3: --lr", "is not a finite number")
        with open(conf, "w") as f:
            f.write("config = %s\n" % conf)
        refused("--config inside --config", ["train", "--config", conf, "--check"], conf + ":1",
                "settings files do not include other files")
        refused("--config of no file", ["train", "--config", os.path.join(tmp, "none.conf"), "--check"],
                os.path.join(tmp, "none.conf"), "No such file or directory")
        # resume = auto, a service's: yes where the run folder holds a checkpoint, else no
        # (tests/test_crash.py runs it); --check shows it as given; node's only.
        with open(conf, "w") as f:
            f.write("model = logreg\nresume = auto\n")
        rd = os.path.join(tmp, "run")
        r5 = run("node", *ident, "--config", conf, "--run-dir", rd, "--check")
        check(r5[0] == 0 and json.loads(r5[1])["resume"] == "auto", "node --check shows resume = auto (%s)" % r5[2].strip())
        r6 = run("node", *ident, "--config", conf, "--run-dir", rd, "--resume=no", "--check")
        check(r6[0] == 0 and json.loads(r6[1])["resume"] is False, "--resume=no after the file overrides auto")
        refused("train with resume = auto", ["train", "--config", conf, "--check"], "resume = auto",
                "train resumes with --resume and --checkpoint FILE")
        with open(conf, "w") as f:
            f.write("model = logreg\nresume = maybe\n")
        refused("resume = maybe", ["node", *ident, "--config", conf, "--run-dir", rd, "--check"], conf + ":2: --resume maybe",
                "expected yes, no or auto")
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    print("%d checks, %d failed" % (CHECKS, len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
