"""The Debian packages (tools/package): built from the tracked files, lintian-clean of errors and
warnings, and holding what an installed node needs; the extracted rumor runs.

- rumor: /usr/bin/rumor, the manual pages, /etc/rumor/example.conf (a conffile), the unit
  rumor-node@.service (not enabled: a template), the sysusers file and the postinst that makes
  the user rumor; librumor0 with its symbols file; librumor-dev (header, pkg-config);
  python3-rumor under /usr/lib/python3/dist-packages.
- Extracted into a scratch root: `rumor --version` runs, `man -l` renders rumor-node(1), and
  `rumor node --check --config example.conf` (with an identity given) takes every line.

Builds take a minute or two; skips (77) unless dpkg-buildpackage, debhelper and lintian are
installed (tools/package installs them). Usage: test_package.py SOURCE_ROOT
"""
import glob
import os
import shutil
import subprocess
import sys

from rumortest import FAILS, check, scratch


def contents(deb):
    out = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    return [l.split()[-1].lstrip(".") for l in out.splitlines()]


def control(deb, name):
    r = subprocess.run(["dpkg-deb", "-I", deb, name], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def main():
    root = os.path.abspath(sys.argv[1])
    if not all(shutil.which(p) for p in ("dpkg-buildpackage", "dh", "lintian")) or \
            subprocess.run(["dpkg-query", "-W", "dh-python"], capture_output=True).returncode != 0:
        print("skip: dpkg-buildpackage, debhelper, dh-python or lintian is not installed (tools/package installs them)")
        return 77
    tmp = scratch("package")
    out = os.path.join(tmp, "debs")
    r = subprocess.run([os.path.join(root, "tools", "package"), out], capture_output=True, text=True, timeout=1500)
    check(r.returncode == 0, "tools/package builds and lintian finds no error or warning: %s" % r.stderr[-600:])
    debs = {os.path.basename(d).split("_")[0]: d for d in glob.glob(os.path.join(out, "*.deb"))}
    for name in ("rumor", "librumor0", "librumor-dev", "python3-rumor"):
        check(name in debs, "%s is built (%s)" % (name, sorted(debs)))
    if FAILS:
        return 1
    files = contents(debs["rumor"])
    for path in ("/usr/bin/rumor", "/etc/rumor/example.conf", "/lib/systemd/system/rumor-node@.service",
                 "/usr/lib/sysusers.d/rumor.conf", "/usr/share/man/man1/rumor.1.gz",
                 "/usr/share/man/man1/rumor-node.1.gz"):
        check(path in files, "rumor holds %s" % path)
    check("/etc/rumor/example.conf" in control(debs["rumor"], "conffiles"), "example.conf is a conffile")
    check("systemd-sysusers" in control(debs["rumor"], "postinst"), "rumor's postinst makes the user rumor")
    check("systemctl" not in control(debs["rumor"], "postinst"), "the template unit is neither enabled nor started")
    check(" rumor_peer_add_tensor@RUMOR_0 " in control(debs["librumor0"], "symbols"), "librumor0 has its symbols file")
    check(any(f.startswith("/usr/lib/x86_64-linux-gnu/librumor.so.0") or "/librumor.so.0" in f
              for f in contents(debs["librumor0"])), "librumor0 holds librumor.so.0")
    dev = contents(debs["librumor-dev"])
    check("/usr/include/rumor.h" in dev and any(f.endswith("/pkgconfig/rumor.pc") for f in dev),
          "librumor-dev holds rumor.h and rumor.pc")
    check(any(f.startswith("/usr/lib/python3/dist-packages/rumor/") for f in contents(debs["python3-rumor"])),
          "python3-rumor is under /usr/lib/python3/dist-packages")
    # The extracted programs run (the libraries they link come from the system, as installed).
    x = os.path.join(tmp, "root")
    for name in ("rumor", "librumor0"):
        subprocess.run(["dpkg-deb", "-x", debs[name], x], check=True)
    rumor = os.path.join(x, "usr", "bin", "rumor")
    r = subprocess.run([rumor, "--version"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and r.stdout.startswith("rumor "), "the packaged rumor --version: %s" % r.stdout[:80])
    page = os.path.join(x, "usr", "share", "man", "man1", "rumor-node.1.gz")
    if shutil.which("man"):
        r = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, MANPAGER="cat", PAGER="cat"))
        check(r.returncode == 0 and "--config" in r.stdout.replace("\u2010", "-") and not r.stderr.strip(),
              "man -l renders the packaged rumor-node(1): %s" % r.stderr[:200])
    conf = os.path.join(x, "etc", "rumor", "example.conf")
    r = subprocess.run([rumor, "node", "--key", "k", "--cert", "c", "--swarm", "s", "--listen",
                        "tcp://127.0.0.1:0", "--config", conf, "--check"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and r.stdout.startswith("{"), "rumor node --check --config example.conf: %s"
          % r.stderr.strip()[:200])
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
