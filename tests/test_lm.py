#!/usr/bin/python3
"""rumor train on text, end to end, on a small corpus this test writes: a gpt model learns it (the
validation loss falls far below a uniform guess's log 256), `rumor eval` reports the validation
loss the run ended with, a run stopped and resumed ends with the very bytes of one never stopped,
two real nodes (rumor sim --mode proc) learn it together, a virtual swarm of one peer ends where
`rumor train` ends and one of four replays byte for byte, and the exported model, loaded into
tools/gpt_torch.py's PyTorch GPT with load_state_dict(strict=True), gives the same validation
loss (within 1e-4); token files of a tokenizer of one's own (ids past 255, and a vocabulary of 256
that is not bytes) train, evaluate on their own validation split, export and sample token ids.

usage: test_lm.py RUMOR SOURCE_DIR
Without torch (Debian's python3-torch) only what compares with PyTorch is skipped; the rest
(training, eval, resume, the swarms, sampling, the refusals) runs, and the test exits 77
(skipped) if nothing failed.
"""
import json
import math
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

from rumortest import FAILS, check, rewrite_metadata

SKIP = 77
SKIPPED = []  # what was not checked, for want of torch
torch = gpt_torch = None


def skip(what):
    print("skip " + what + ": no torch (Debian's python3-torch)", flush=True)
    SKIPPED.append(what)


def run(*args):
    return subprocess.run([RUMOR, *args], capture_output=True, text=True, timeout=300)


def corpus(d):
    """Five documents of random words from a small vocabulary: easy to learn, never memorised."""
    rng = random.Random(1)
    words = "the quick brown fox jumps over the lazy dog and runs away from the hunter who sleeps".split()
    os.makedirs(d)
    for i in range(5):
        with open(os.path.join(d, "doc%d.txt" % i), "w") as f:
            f.write(" ".join(rng.choice(words) for _ in range(3000)))


def val_loss_torch(model_path, data, T):
    """The validation loss as text.h defines it, computed by PyTorch on rumor's exported model."""
    model = gpt_torch.load(model_path).double()
    total, n = 0.0, 0
    for name in sorted(os.listdir(data)):
        raw = open(os.path.join(data, name), "rb").read()
        val = raw[len(raw) - len(raw) // 10:]
        starts = list(range(0, len(val) - T, T))
        if not starts:
            continue
        x = torch.tensor([list(val[s:s + T]) for s in starts])
        y = torch.tensor([list(val[s + 1:s + T + 1]) for s in starts])
        with torch.no_grad():
            _, loss = model(x, y)
        total += loss.item() * x.numel()
        n += x.numel()
    return total / n


def write_tokens(d, data, tokenize):
    """nanoGPT's train.bin and val.bin (uint16) of data's documents, each tokenized and split at
    its last tenth like a corpus."""
    os.makedirs(d)
    train, val = [], []
    for name in sorted(os.listdir(data)):
        ids = tokenize(open(os.path.join(data, name), "rb").read())
        cut = len(ids) - len(ids) // 10
        train += ids[:cut]
        val += ids[cut:]
    for name, ids in (("train.bin", train), ("val.bin", val)):
        with open(os.path.join(d, name), "wb") as f:
            f.write(struct.pack("<%dH" % len(ids), *ids))
    return val


def token_files(tmp, data):
    """Token files of a tokenizer of one's own: words as ids past 255 (vocabulary 320), and ids
    that are all below 256 (a vocabulary of 256 that is still not bytes)."""
    words = sorted({w for name in os.listdir(data) for w in open(os.path.join(data, name)).read().split()})
    vocab = {w: 300 + i for i, w in enumerate(words)}
    tok = os.path.join(tmp, "tok")
    val = write_tokens(tok, data, lambda raw: [vocab[w] for w in raw.decode().split()])
    model = os.path.join(tmp, "tok.safetensors")
    r = run("train", "--model", "gpt:2,2,32,16", "--data", tok, "--vocab", "320", "--steps", "100", "--batch", "8",
            "--threads", "1", "--quiet", "--save", model, "--metrics", os.path.join(tmp, "tok.jsonl"))
    last = [json.loads(x) for x in open(os.path.join(tmp, "tok.jsonl"))][-1] if r.returncode == 0 else {}
    check(last.get("val_loss", 9) < math.log(len(words)) + 0.4 < math.log(320),
          "a gpt model learns token files of ids past 255: validation loss %s, near the %d words' entropy (%.2f; "
          "%s)" % (last.get("val_loss"), len(words), math.log(len(words)), r.stderr.strip()[-200:]))
    r = run("eval", model, "--json", "--threads", "1")
    ev = json.loads(r.stdout) if r.returncode == 0 else {}
    check(abs(ev.get("val_loss", 0) - last.get("val_loss", 1)) < 1e-6 and ev.get("tokens") == (len(val) - 1) // 16 * 16,
          "rumor eval of a model of token ids reads the token files it trained on: %s over %s tokens (%s)"
          % (ev.get("val_loss"), ev.get("tokens"), r.stderr.strip()))
    r = run("sample", model, "--tokens", "8", "--temperature", "0")
    check(r.returncode == 0 and len(r.stdout.split()) == 8 and all(x.isdigit() and 0 <= int(x) < 320
                                                                  for x in r.stdout.split())
          and "token ids" in r.stderr,
          "rumor sample prints a model's token ids one a line, and says so (%r, %r)" % (r.stdout.split(),
                                                                                     r.stderr.strip()))
    if torch:
        m = gpt_torch.load(model).double()
        starts = range(0, len(val) - 16, 16)
        with torch.no_grad():
            _, loss = m(torch.tensor([val[s:s + 16] for s in starts]),
                        torch.tensor([val[s + 1:s + 17] for s in starts]))
        check(abs(loss.item() - ev.get("val_loss", 0)) <= 1e-4,
              "PyTorch on the exported model of token ids: validation loss %.6f, rumor's %s" % (loss.item(),
                                                                                             ev.get("val_loss")))
        ids = [0]
        with torch.no_grad():
            for _ in range(8):
                ids.append(int(m(torch.tensor([ids[-16:]]))[0][0, -1].argmax()))
        check(r.returncode == 0 and r.stdout.split() == [str(i) for i in ids[1:]],
              "rumor sample's token ids are PyTorch's greedy ones (%r)" % r.stdout.split())
    else:
        skip("PyTorch on the exported model of token ids: its validation loss and greedy ids")
    ref = os.path.join(tmp, "ref.safetensors")
    for args, why, reason in (
            (("sample", model, "--prompt", "the"), "a text prompt to a model of token ids",
             model + " works on token ids of its own tokenizer: --prompt is text"),
            (("eval", model, "--data", data), "a model of token ids judged on .txt documents",
             model + ": a model of token ids, and " + data + " holds no token files"),
            (("eval", ref, "--data", tok), "a model of bytes judged on token files",
             ref + ": a model of bytes, and " + tok + " holds token files")):
        r = run(*args)
        lines = r.stderr.splitlines()
        check(r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("rumor: error: ")
              and len(lines) == 1 and reason in lines[0] and not r.stdout,
              "%s: one line, exit 2, saying %r (%d, %r)" % (why, reason, r.returncode, r.stderr))

    # The token files moved away: eval says where the run had them, and takes --data.
    os.rename(tok, tok + ".moved")
    r = run("eval", model)
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and tok in r.stderr and "--data DIR" in r.stderr,
          "eval of a model of token ids whose token files moved: one line naming them (%r)" % r.stderr)
    os.rename(tok + ".moved", tok)

    # A vocabulary of 256 that is still a tokenizer's: the model says so, not its size.
    tok256 = os.path.join(tmp, "tok256")
    write_tokens(tok256, data, lambda raw: [vocab[w] - 300 + 200 for w in raw.decode().split()])
    model = os.path.join(tmp, "tok256.safetensors")
    r = run("train", "--model", "gpt:2,2,32,16", "--data", tok256, "--vocab", "256", "--steps", "20", "--batch", "8",
            "--threads", "1", "--quiet", "--save", model)
    ev = run("eval", model, "--json", "--threads", "1")
    sample = run("sample", model, "--tokens", "3")
    check(r.returncode == 0 and ev.returncode == 0 and json.loads(ev.stdout)["tokens"] == (len(val) - 1) // 16 * 16
          and sample.returncode == 0 and len(sample.stdout.split()) == 3 and "token ids" in sample.stderr,
          "token files of a 256-token vocabulary are token ids, not bytes: eval reads them, sample prints ids (%s)"
          % (r.stderr + ev.stderr + sample.stderr).strip()[-300:])

    # Files from before models said whose tokens they read (no "tokens" entry), of a run that
    # recorded the --limit it ignored: such a checkpoint resumes on its token files, and such a
    # model is judged on the token files it is given.
    ck = os.path.join(tmp, "old.safetensors")
    r = run("train", "--model", "gpt:2,2,32,16", "--data", tok256, "--vocab", "256", "--steps", "20", "--batch", "8",
            "--threads", "1", "--quiet", "--checkpoint", ck, "--max-steps", "10")
    rewrite_metadata(ck, lambda m: dict({k: v for k, v in m.items() if k != "tokens"}, **{"train.limit": "1000"}))
    rewrite_metadata(model, lambda m: {k: v for k, v in m.items() if k != "tokens"})
    again = run("train", "--resume", ck, "--quiet", "--threads", "1")
    ev2 = run("eval", model, "--json", "--threads", "1", "--data", tok256)
    check(r.returncode == 0 and again.returncode == 0 and ev2.returncode == 0
          and json.loads(ev2.stdout)["val_loss"] == json.loads(ev.stdout)["val_loss"],
          "an older checkpoint and model of token ids (256 of them) resume and evaluate on their token files (%s)"
          % (again.stderr + ev2.stderr).strip()[-300:])


def main():
    global RUMOR, torch, gpt_torch
    RUMOR = os.path.abspath(sys.argv[1])
    try:
        import torch
    except ImportError:
        torch = None
        print("no torch (Debian's python3-torch): what compares with PyTorch is skipped, the rest runs", flush=True)
    if torch:
        sys.path.insert(0, os.path.join(sys.argv[2], "tools"))
        import gpt_torch
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        corpus(data)
        base = ["train", "--model", "gpt:2,2,32,32", "--data", data, "--steps", "150", "--batch", "8",
                "--threads", "1", "--quiet"]
        ref = os.path.join(tmp, "ref.safetensors")
        r = run(*base, "--save", ref, "--metrics", os.path.join(tmp, "m.jsonl"))
        check(r.returncode == 0, "a gpt model trains on a folder of documents (%s)" % r.stderr.strip()[-300:])
        lines = [json.loads(x) for x in open(os.path.join(tmp, "m.jsonl"))] if r.returncode == 0 else [{}]
        last = lines[-1]
        check(last.get("step") == 150 and last.get("val_loss", 9) < 2.8 < math.log(256) and "tokens_per_s" in last,
              "it learns: validation loss %s after 150 steps (a uniform guess: %.2f)" % (last.get("val_loss"),
                                                                                        math.log(256)))
        r = run("eval", ref, "--data", data, "--json", "--threads", "1")
        ev = json.loads(r.stdout) if r.returncode == 0 else {}
        check(abs(ev.get("val_loss", 0) - last.get("val_loss", 1)) < 1e-6,
              "rumor eval gives the run's last validation loss (%s, %s)" % (ev.get("val_loss"), last.get("val_loss")))

        # Stopped at step 70 and resumed with --resume alone: the same bytes as never stopped.
        ck, out = os.path.join(tmp, "ck.safetensors"), os.path.join(tmp, "out.safetensors")
        r = run(*base, "--checkpoint", ck, "--max-steps", "70")
        check(r.returncode == 0, "stopped at step 70 with a checkpoint, a planned stop (exit %d)" % r.returncode)
        r = run("train", "--resume", ck, "--save", out, "--quiet", "--threads", "1")  # threads change the sums
        same = r.returncode == 0 and open(out, "rb").read() == open(ref, "rb").read()
        check(same, "resumed with nothing else given (but the same --threads), the model is the run's never stopped (%s)"
              % r.stderr.strip()[-300:])

        # A swarm of two real nodes on the same text, whole documents each (proc mode).
        out_dir = os.path.join(tmp, "sim")
        r = run("sim", "--mode", "proc", "--model", "gpt:2,2,32,32", "--data", data, "--peers", "2", "--rounds", "20",
                "--local-steps", "5", "--eval-every", "10", "--no-plots", "--quiet", "--out", out_dir)
        summary = json.load(open(os.path.join(out_dir, "summary.json"))) if r.returncode == 0 else {}
        check(summary.get("rounds_done_min") == 20 and summary.get("config", {}).get("partition") == "docs"
              and summary.get("final_val_loss_max", 9) < 3.5 < math.log(256),
              "two gpt nodes train together over real sockets: worst validation loss %s after 20 rounds (%s)"
              % (summary.get("final_val_loss_max"), r.stderr.strip()[-200:]))

        # A node of that swarm resumes from its checkpoint with nothing else given: its model,
        # its rounds (and the steps that did not set them) come back.
        peer = os.path.join(out_dir, "peer-000")
        r = run("node", "--key", os.path.join(out_dir, "swarm", "peer-000.key"), "--cert",
                os.path.join(out_dir, "swarm", "peer-000.cert"), "--swarm", os.path.join(out_dir, "swarm", "authority.pub"),
                "--listen", "tcp://127.0.0.1:0", "--run-dir", peer, "--resume", "--check")
        got = json.loads(r.stdout) if r.returncode == 0 else {}
        check(got.get("model") == "gpt:2,2,32,32" and got.get("rounds") == 20,
              "a gpt node resumes with nothing else given: %s, %s rounds (%s)" % (got.get("model"), got.get("rounds"),
                                                                                 r.stderr.strip()[-200:]))

        # Virtual mode: one peer owning all the text takes the very steps of `rumor train` (the
        # same batches, schedule and clipping); four peers on whole documents replay exactly.
        r = run("sim", "--mode", "virtual", "--model", "gpt:2,2,32,32", "--data", data, "--peers", "1",
                "--partition", "iid", "--rounds", "15", "--local-steps", "10", "--batch", "8", "--no-plots",
                "--quiet", "--out", os.path.join(tmp, "v1"))
        one = [json.loads(x) for x in open(os.path.join(tmp, "v1", "peer-000", "metrics.jsonl"))] if r.returncode == 0 else [{}]
        check(one[-1].get("step") == 150 and abs(one[-1].get("val_loss", 0) - last.get("val_loss", 1)) < 1e-6,
              "a virtual swarm of one peer ends at rumor train's validation loss (%s, %s; %s)"
              % (one[-1].get("val_loss"), last.get("val_loss"), r.stderr.strip()[-200:]))
        sums = []
        for k in range(2):
            out_dir = os.path.join(tmp, "v4-%d" % k)
            r = run("sim", "--mode", "virtual", "--model", "gpt:2,2,32,32", "--data", data, "--peers", "4",
                    "--algo", "diloco:10", "--steps", "100", "--codec", "int8", "--no-plots", "--quiet", "--out", out_dir)
            raw = open(os.path.join(out_dir, "summary.json"), "rb").read() if r.returncode == 0 else b""
            # byte for byte, less the real seconds the run took (wall_s; no seed replays them)
            sums.append(re.sub(rb',"wall_s":[-+.0-9eE]+', b"", raw, count=1) if b'"wall_s":' in raw else b"")
        summary = json.loads(sums[0]) if sums[0] else {}
        check(sums[0] and sums[0] == sums[1] and summary.get("rounds") == 10
              and summary.get("final_val_loss_max", 9) < 3.5 < math.log(256),
              "four virtual peers on whole documents (diloco:10, int8, --steps 100 as 10 rounds) learn, worst "
              "validation loss %s, and replay byte for byte (%s)" % (summary.get("final_val_loss_max"),
                                                                     r.stderr.strip()[-200:]))

        # rumor sample at temperature 0 continues each prompt, and writes what PyTorch's greedy
        # decoding writes (prompts whose continuations are not only spaces).
        prompts = ("qu", "the laz", "hun", "ju")
        samples = [run("sample", ref, "--prompt", prompt, "--tokens", "12", "--temperature", "0") for prompt in prompts]
        check(all(r.returncode == 0 and r.stdout.startswith(p) and len(r.stdout.rstrip("\n")) > len(p)
                  for p, r in zip(prompts, samples)),
              "rumor sample --temperature 0 continues each prompt (%r)" % [r.stdout[:40] for r in samples])
        if torch:
            model = gpt_torch.load(ref)
            same, made = True, ""
            for prompt, r in zip(prompts, samples):
                ids = list(prompt.encode())
                with torch.no_grad():
                    for _ in range(12):
                        logits, _ = model(torch.tensor([ids[-32:]]))
                        ids.append(int(logits[0, -1].argmax()))
                want = bytes(ids).decode("utf-8", "replace")
                same &= r.returncode == 0 and r.stdout.rstrip("\n") == want
                made += want[len(prompt):]
            check(same and made.strip(), "rumor sample --temperature 0 writes PyTorch's greedy continuations (%r)"
                  % made.replace(" ", "_")[:60])

            torch_loss = val_loss_torch(ref, data, 32)
            check(abs(torch_loss - ev.get("val_loss", 0)) <= 1e-4,
                  "PyTorch on the exported model: validation loss %.6f, rumor's %.6f" % (torch_loss,
                                                                                        ev.get("val_loss", 0)))
        else:
            skip("PyTorch's greedy continuations and validation loss of the exported model")
        token_files(tmp, data)
    print("%d failed, %d skipped" % (len(FAILS), len(SKIPPED)))
    return 1 if FAILS else SKIP if SKIPPED else 0


if __name__ == "__main__":
    sys.exit(main())
