#!/usr/bin/env python3
"""The settings table, walked: every setting refuses a value outside its range or set with one
line `rumor: error: ...` and exit status 2, through every command that takes it and through
sim's scenario files; every default is accepted (--check), every older spelling still works,
every command's --help names all of its settings, and proc mode's command line for a node
turns back into the same settings.

usage: test_settings.py RUMOR
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

RUMOR = os.path.abspath(sys.argv[1])
FAILS = []
CHECKS = 0


def check(cond, what):
    global CHECKS
    CHECKS += 1
    if not cond:
        print("FAIL " + what, flush=True)
        FAILS.append(what)


def run(*args):
    p = subprocess.run([RUMOR, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def refused(what, args, name):
    """args must end with exit 2 and exactly one line naming the setting."""
    expect_refusal(what, run(*args), name)


def expect_refusal(what, result, name):
    rc, out, err = result
    lines = err.splitlines()
    check(rc == 2 and len(lines) == 1 and lines[0].startswith("rumor: error: ") and name in lines[0]
          and not out, "%s: exit %d, stderr %r, stdout %r" % (what, rc, err[:300], out[:100]))


PARSED = set()  # the types whose text parser has been fed garbage once (one parser a type)


def bad_values(row):
    """Values outside what row accepts: its range's two ends, and, the first time a type is
    seen, text its parser must refuse."""
    t = row["type"]
    junk = {"int": ["abc", "1.5", "99999999999999999999"], "long": ["abc", " 1"], "u64": ["-1", "abc", "0x10"],
            "float": ["nan", "inf", "x", "1e999"], "double": ["nan", "-inf", "1,5"]}.get(t, [])
    if t in PARSED:
        junk = []
    PARSED.add(t)
    if t in ("int", "long"):
        return ["%d" % (row["lo"] - 1), "%d" % (row["hi"] + 1)] + junk
    if t == "u64":
        return (["0"] if row["lo"] >= 1 else []) + junk
    if t in ("float", "double"):
        lo, hi = row["lo"], row["hi"]
        return ["%.17g" % (lo if row["open_lo"] else lo - 1 - abs(lo)),
                "%.17g" % (hi if row["open_hi"] else hi * 2 + 1)] + junk
    if t == "string":
        return ["no-such-value!"] if row["checked"] else []
    if t == "switch":
        return [] if row.get("train_value") else ["maybe"]
    if t == "list":
        return ["no-such-thing"]
    return []


def good_value(row, cmd):
    d = row["defaults"].get(cmd)
    if d is not None:
        return d
    t = row["type"]
    if t in ("float", "double", "int", "long", "u64"):
        if not row["open_hi"] and t != "u64":
            return ("%d" if t in ("int", "long") else "%.17g") % row["hi"]
        return "%d" % max(row["lo"], 1) if t in ("int", "long", "u64") else "%.17g" % ((row["lo"] + row["hi"]) / 2)
    return None


def main():
    rc, out, _ = run("settings", "--json")
    check(rc == 0, "rumor settings --json runs")
    table = json.loads(out)
    names = [r["name"] for r in table]
    check(len(names) == len(set(names)), "every setting has a name of its own")
    check(len(table) > 60, "the table holds the settings of three commands (%d)" % len(table))
    helps = {cmd: run(cmd, "--help")[1] for cmd in ("train", "node", "sim")}
    tmp = tempfile.mkdtemp(prefix="rumor-test-settings-")
    scenario = os.path.join(tmp, "rules.ini")
    try:
        jobs = []  # (what, args, name expected in the one line)
        for row in table:
            name = row["name"]
            bad = bad_values(row)
            for k, cmd in enumerate(row["where"]):
                # --help names it (a switch on by default as --no-NAME)
                check("--" + name in helps[cmd] or "--no-" + name in helps[cmd], "%s --help names --%s" % (cmd, name))
                for v in bad if k == 0 else bad[:1]:  # every bad value through one command, one through the rest
                    args = [cmd, "--%s=%s" % (name, v)] if row["type"] == "switch" else [cmd, "--" + name, v]
                    jobs.append(("%s --%s %s" % (cmd, name, v), args + ["--check"], name))
                if row["defaults"].get(cmd) is not None and row["type"] == "string":
                    jobs.append(("%s --%s= (a setting with a default)" % (cmd, name), [cmd, "--%s=" % name, "--check"],
                                 name))
                if row["old"] and cmd == "train":
                    v = good_value(row, cmd)
                    extra = ["--checkpoint", os.path.join(tmp, "ck.safetensors"), "--check"]
                    rc, out, err = run(cmd, "--" + row["old"], v, *extra)
                    check(rc == 0 and json.loads(out).get(name) == json.loads(run(cmd, "--" + name, v, *extra)[1])
                          .get(name), "%s: the old spelling --%s still sets --%s (%s)" % (cmd, row["old"], name, err))
            if "sim" in row["where"]:  # the scenario file: the same refusal, with file and line
                for i, v in enumerate(bad[:1]):
                    path = os.path.join(tmp, "bad-%s-%d.ini" % (name, i))
                    with open(path, "w") as f:
                        f.write("# a scenario\nmode = virtual\n%s = %s\n" % (name, v))
                    jobs.append(("scenario %s = %s" % (name, v), ["sim", path, "--check"], "-%d.ini:3: " % i))
        print("%d refusals to ask for" % len(jobs), flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            for job, result in zip(jobs, pool.map(lambda j: run(*j[1]), jobs)):
                expect_refusal(job[0], result, job[2])
        # Every command's defaults pass its own checks.
        for cmd, extra in (("train", []), ("sim", []),
                           ("node", ["--key", "k", "--cert", "c", "--swarm", "s", "--listen", "tcp://127.0.0.1:0"])):
            rc, out, err = run(cmd, *extra, "--check")
            check(rc == 0 and json.loads(out), "%s's defaults pass its checks (%s)" % (cmd, err.strip()))
        # Node's old spellings (its --check needs the identity flags too).
        ident = ["--key", "k", "--cert", "c", "--swarm", "s", "--listen", "tcp://127.0.0.1:0", "--run-dir", tmp]
        for row in table:
            if row["old"] and "node" in row["where"]:
                v = good_value(row, "node")
                rc, out, err = run("node", *ident, "--" + row["old"], v, "--check")
                check(rc == 0 and float(json.loads(out)[row["name"]]) == float(v),
                      "node: the old spelling --%s sets --%s (%s)" % (row["old"], row["name"], err.strip()))
        # The rules between settings: one line each, whichever way they came in.
        refused("sim --dp-budget without --dp", ["sim", "--dp-budget", "3", "--check"], "--dp-budget needs --dp")
        refused("node --dp-budget without --dp", ["node", *ident, "--dp-budget", "3", "--check"], "--dp-budget needs --dp")
        refused("train --rank alone", ["train", "--rank", "1", "--check"], "go together")
        refused("node --rank of its --of", ["node", *ident, "--partition", "iid", "--rank", "4", "--of", "4",
                                            "--check"], "--rank 4 --of 4")
        refused("sim --straggler past the peers", ["sim", "--peers", "4", "--straggler", "4", "--check"], "--straggler 4")
        with open(scenario, "w") as f:
            f.write("peers = 4\nbyzantine = 5\n")
        refused("scenario byzantine past the peers", ["sim", scenario, "--check"], "--byzantine 5")
        refused("train --resume without a file", ["train", "--resume", "--check"], "--resume needs --checkpoint")
        # --resume FILE, the older spelling, still parses: the settings come from FILE.
        refused("train --resume FILE", ["train", "--resume", os.path.join(tmp, "x.safetensors"), "--check"],
                "x.safetensors: ")
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    print("%d checks, %d failed" % (CHECKS, len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
