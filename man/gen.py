#!/usr/bin/env python3
"""man/gen.py - rumor's manual pages and a node's example settings file, from the settings table.

    gen.py SETTINGS_JSON OUTDIR VERSION
                                     writes rumor.1, rumor-node.1, rumor-train.1, rumor-sim.1 and
                                     example.conf into OUTDIR (the build runs this: a host tool,
                                     so that a cross build never runs the target's binary)
    gen.py --update RUMOR [JSON]     writes the table as RUMOR prints it (`rumor settings --json`)
                                     to JSON (default man/settings.json, beside this script)

man/settings.json is the table's snapshot; tests/test_settings.py fails when it differs from
what the built rumor prints, so the pages never disagree with `--help`.
"""
import json
import os
import subprocess
import sys
import textwrap

COMMANDS = {  # the commands whose options are the table's, and what each does
    "node": ("join a swarm, train with it, and stay in it",
             "A node holds an identity (--key, --cert of the swarm's authority) and listens for members; "
             "it joins through --bootstrap addresses, or waits to be joined. Given any of --data, --model, "
             "--algo, --rounds, --run-dir, --partition or --resume it is a training peer: it trains on its "
             "own data, which never leaves it, and averages its model with its neighbours' over encrypted "
             "CurveZMQ connections; without them it keeps the swarm's membership only. Its settings may "
             "come from a file (--config FILE, one key = value a line, the keys being the options' names "
             "below); options given after --config override the file's lines. As a service, "
             "resume = auto continues from the run folder's checkpoint where there is one."),
    "train": ("train a model on one machine, the centralized baseline",
              "Trains the model on the whole training set (or one shard of it) on this machine, with "
              "the trainer every peer uses, and writes the model and optionally a checkpoint."),
    "sim": ("a whole swarm on this machine",
            "Runs a swarm of --peers peers, either as real nodes on loopback (--mode proc) or in "
            "virtual time in one process (--mode virtual), with faults, attacks and network "
            "emulation, and writes every peer's metrics, a summary and plots. A scenario file (the "
            "settings as key = value lines) may come first."),
}
SEE_ALSO = ["rumor(1)", "rumor-node(1)", "rumor-train(1)", "rumor-sim(1)"]


def esc(text):
    """Text for roff: backslashes doubled, a leading dot or quote kept from being a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "'") else text


def head(name, section, what, version):
    return [".TH %s %d \"\" \"rumor %s\" \"rumor manual\"" % (name.upper(), section, version),
            ".SH NAME", "%s \\- %s" % (esc(name), esc(what))]


def option_line(row, cmd):
    """`--name META` or the switch's spelling, as --help shows it."""
    if row["type"] == "switch":
        on = row.get("defaults", {}).get(cmd) == "yes"
        return "\\-\\-%s%s" % ("no\\-" if on else "", esc(row["name"]))
    return "\\-\\-%s \\fI%s\\fR" % (esc(row["name"]), esc(row.get("meta", "VALUE")))


def notes(row, cmd):
    out = []
    default = row.get("defaults", {}).get(cmd)
    if default and row["type"] != "switch":
        out.append("Default: %s." % default)
    if row.get("old"):
        out.append("Also spelt --%s." % row["old"])
    if row.get("fixed"):
        out.append("A checkpoint records it, and a resumed run must keep it.")
    elif row.get("recorded"):
        out.append("A checkpoint records it, and --resume takes it back unless given.")
    return out


def command_page(table, cmd, version):
    what, description = COMMANDS[cmd]
    lines = head("rumor-" + cmd, 1, what, version)
    lines += [".SH SYNOPSIS", ".B rumor %s" % cmd, "[\\fIOPTION\\fR]...", ".SH DESCRIPTION", esc(description),
              ".SH OPTIONS"]
    for row in table:
        if cmd not in row["where"]:
            continue
        lines += [".TP", option_line(row, cmd), esc(row["help"])]
        more = notes(row, cmd)
        if more:
            lines += [".br", esc(" ".join(more))]
    lines += [".TP", "\\-\\-help", "Print the options and exit."]
    if cmd == "node":
        lines += [".SH FILES", ".TP", "/etc/rumor/\\fINAME\\fR.conf",
                  "A node's settings, as the rumor\\-node@\\fINAME\\fR service reads them "
                  "(/etc/rumor/example.conf lists every one).",
                  ".TP", "\\fIRUN_DIR\\fR/checkpoint.safetensors, model.safetensors, metrics.jsonl",
                  "Its checkpoint, final model and metrics, readable by their owner only."]
    lines += [".SH EXIT STATUS", "0 when the run ends (or a stop asked for it), 2 for a usage error or a failed run, "
              "130 when stopped by SIGINT."]
    lines += [".SH SEE ALSO", ", ".join(esc(p) for p in SEE_ALSO if p != "rumor-%s(1)" % cmd) + ", rumor settings"]
    return "\n".join(lines) + "\n"


def main_page(version):
    lines = head("rumor", 1, "peer-to-peer decentralized learning", version)
    lines += [".SH SYNOPSIS", ".B rumor", "\\fICOMMAND\\fR [\\fIOPTION\\fR]...", ".SH DESCRIPTION",
              esc("Each peer trains a model on data that never leaves it and averages parameters with its "
                  "neighbours by gossip over encrypted ZeroMQ (CurveZMQ) connections. `rumor --help` lists "
                  "every command, and `rumor COMMAND --help` a command's options; `rumor settings` lists "
                  "every setting of train, node and sim with its defaults."),
              ".SH COMMANDS"]
    for cmd, (what, _) in COMMANDS.items():
        lines += [".TP", ".B %s" % cmd, esc(what) + " (rumor\\-%s(1))." % cmd]
    lines += [".SH SEE ALSO", ", ".join(esc(p) for p in SEE_ALSO[1:])]
    return "\n".join(lines) + "\n"


def example_conf(table):
    out = ["# rumor node settings: one `key = value` a line, the keys being rumor node's options",
           "# (rumor-node(1), `rumor node --help`). Copy this file to /etc/rumor/NAME.conf, set at least",
           "# key, cert, swarm and listen (and what it trains), and start rumor-node@NAME;",
           "# `rumor node --check --config FILE` shows the settings the node would run with.",
           "# Every setting below is commented out at its default.", ""]
    for row in table:
        if "node" not in row["where"] or row["name"] in ("config", "check", "help"):
            continue
        default = row.get("defaults", {}).get("node")
        meta = row.get("meta", "yes|no" if row["type"] == "switch" else "VALUE")
        out += textwrap.wrap("%s (%s)" % (row["help"], meta), 96, initial_indent="# ", subsequent_indent="# ",
                             break_on_hyphens=False)
        if row["type"] == "list":
            out.append("# %s = %s   (one a line)" % (row["name"], meta))
        else:
            out.append(("# %s = %s" % (row["name"], default if default is not None else "")).rstrip())
        out.append("")
    return "\n".join(out)


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    if len(argv) >= 2 and argv[0] == "--update":
        text = subprocess.run([argv[1], "settings", "--json"], check=True, capture_output=True, text=True).stdout
        path = argv[2] if len(argv) > 2 else os.path.join(here, "settings.json")
        with open(path, "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        return 0
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    table_path, outdir, version = argv
    with open(table_path) as f:
        table = json.load(f)
    pages = {"rumor.1": main_page(version), "example.conf": example_conf(table)}
    for cmd in COMMANDS:
        pages["rumor-%s.1" % cmd] = command_page(table, cmd, version)
    for name, text in pages.items():
        with open(os.path.join(outdir, name), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
