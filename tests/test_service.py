"""A node as a service: the systemd unit and what rumor does for the journal.

- rumor-node@.service (as the build configured it) passes `systemd-analyze verify`, with its
  ExecStart pointed at the built rumor, and its exposure under `systemd-analyze security
  --offline=true` is at most 2.5 (docs/guide/service.md records the figure); it runs the node
  with the settings file and the run folder systemd makes, the command line test_crash's solo
  node runs with.
- Where stderr is the journal's stream (JOURNAL_STREAM names its device and inode), every log
  line and a command's error line start with their priority, "<4>" for a warning and "<3>" for
  an error (journald takes it and strips it); elsewhere lines are as they always were.

Skips (77) where systemd-analyze is missing. Usage: test_service.py RUMOR UNIT
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from rumortest import FAILS, check, scratch


def journal_lines(rumor, args, env_journal):
    """stderr lines of `rumor ARGS`, stderr a file, JOURNAL_STREAM naming it or not."""
    with tempfile.TemporaryFile() as f:
        st = os.fstat(f.fileno())
        env = dict(os.environ)
        env.pop("JOURNAL_STREAM", None)
        if env_journal:
            env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
        r = subprocess.run([rumor, *args], stdout=subprocess.DEVNULL, stderr=f, env=env, timeout=120)
        f.seek(0)
        return r.returncode, f.read().decode().splitlines()


def main():
    rumor, unit = os.path.abspath(sys.argv[1]), sys.argv[2]
    # The journal's priorities: a warning (virtual mode's --dp says its noise protects nothing)
    # and an error line.
    tmp = scratch("service")
    for journal in (True, False):
        warn = ["sim", "--mode", "virtual", "--peers", "2", "--rounds", "1", "--model", "logreg", "--limit", "200",
                "--dp", "clip=1,noise=1", "--out", os.path.join(tmp, "run-%d" % journal), "--no-plots"]
        rc, lines = journal_lines(rumor, warn, journal)
        warns = [l for l in lines if "warn: --dp in virtual mode" in l]
        check(rc == 0 and len(warns) == 1 and warns[0].startswith("<4>rumor warn: ") == journal,
              "a warning %s the journal's priority %s (%s)" % ("carries" if journal else "goes without",
                                                               "<4>" if journal else "", warns))
        rc, lines = journal_lines(rumor, ["train", "--lr", "-1"], journal)
        check(rc == 2 and len(lines) == 1 and lines[0].startswith("<3>rumor: error: " if journal else "rumor: error: "),
              "an error line %s <3> (%s)" % ("carries" if journal else "goes without", lines))

    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print("skip: systemd-analyze is not installed (Debian's systemd package has it)")
        return 77 if not FAILS else 1
    with open(unit) as f:
        text = f.read()
    m = re.search(r"^ExecStart=(\S+) node --config /etc/rumor/%i\.conf --run-dir \$\{STATE_DIRECTORY\}$", text, re.M)
    check(m is not None, "the unit runs `rumor node --config /etc/rumor/%i.conf --run-dir $STATE_DIRECTORY`")
    for key in ("User=rumor", "StateDirectory=rumor/%i", "StateDirectoryMode=0700", "UMask=0077",
                "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                "CapabilityBoundingSet=\n", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
                "Restart=on-failure", "SuccessExitStatus=130", "LimitNOFILE=", "ExecReload=/bin/kill -HUP $MAINPID"):
        check(key in text, "the unit sets %s" % key.strip())
    local = os.path.join(tmp, "rumor-node@test.service")
    with open(local, "w") as f:
        f.write(text.replace(m.group(1) if m else "/usr/bin/rumor", rumor))
    r = subprocess.run([analyze, "verify", "--man=no", local], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and not r.stderr.strip(), "systemd-analyze verify: %s" % r.stderr.strip()[:300])
    r = subprocess.run([analyze, "security", "--offline=true", local], capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    check(m is not None and float(m.group(1)) <= 2.5,
          "exposure under systemd-analyze security --offline=true at most 2.5: %s" % (m.group(1) if m else r.stderr))
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
