#!/usr/bin/python3
"""A nanoGPT-style transformer of one's own (PyTorch), trained by a swarm on the Shakespeare
corpus: every byte a token, as rumor's own gpt models read it; diloco, with the models sent as
int8 over encrypted links.

    rumor sim --exec "python3 $PWD/examples/shakespeare_gpt.py" --peers 4 --algo diloco:50 \\
        --codec int8 --rounds 10

Each peer trains on whole plays of its own (every 4th document) with rumor train's gpt recipe:
AdamW at 1e-3, 100 warm-up steps then a cosine to 0 over the run (rounds x H steps), batches of
12 windows of 64 bytes, gradients clipped at norm 1. After every round it reports its
validation loss (nats per byte over the last tenth of every play, read as rumor reads it: windows
of 65 bytes starting 64 apart; a sample of them between rounds, all of them after the last),
which the status line and summary.json show as val_loss. It checkpoints every round
(checkpoint.pt in its run folder) and resumes from there when started again.
"""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import rumor
import rumor.torch


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, layers=4, heads=4, width=128, context=64, vocab=256):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied: mixed once
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def windows(pieces, t):
    """Inputs and next-byte targets of the windows (data, start) of t bytes."""
    return (torch.stack([d[s:s + t] for d, s in pieces]), torch.stack([d[s + 1:s + t + 1] for d, s in pieces]))


def lr_at(step, total, lr=1e-3, warmup=100):
    """rumor's gpt schedule: a linear warm-up, then a cosine to 0 at the run's last step."""
    t = min(1.0, max(0.0, (step - warmup) / max(1, total - warmup)))
    return lr * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * t))


def evaluate(model, val, t, every):
    """Mean next-byte loss and accuracy over windows starting t apart in each play's last
    tenth (every `every`-th window)."""
    loss, right, n = 0.0, 0, 0
    model.eval()
    with torch.inference_mode():
        for d in val:
            starts = list(range(0, len(d) - t, t))[::every]
            for a in range(0, len(starts), 256):
                x, y = windows([(d, s) for s in starts[a:a + 256]], t)
                logits = model(x)
                loss += float(F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum"))
                right += int((logits.argmax(-1) == y).sum())
                n += y.numel()
    model.train()
    return loss / n, right / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/shakespeare")
    ap.add_argument("--sample", type=int, default=16, help="between rounds, every N-th validation window")
    ap.add_argument("--final-sample", type=int, default=1, help="after the last round, every N-th (1: all)")
    a = ap.parse_args()
    rank, peers = int(os.environ.get("RUMOR_RANK", 0)), int(os.environ.get("RUMOR_PEERS", 1))
    torch.set_num_threads(int(os.environ.get("RUMOR_THREADS", 1)))
    names = sorted(f for f in os.listdir(a.data) if f.endswith(".txt"))
    docs = [torch.frombuffer(bytearray(open(os.path.join(a.data, f), "rb").read()), dtype=torch.uint8).long()
            for f in names]
    val = [d[len(d) - len(d) // 10:] for d in docs]                  # every play's last tenth
    train = [d[:len(d) - len(d) // 10] for d in docs[rank::peers]]   # this peer's plays
    T, B = 64, 12
    torch.manual_seed(1)                                             # one initial model everywhere
    model = GPT(context=T)
    inner = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(100 + rank + 1000 * int(os.environ.get("RUMOR_RESTARTS", 0)))
    sizes = torch.tensor([len(d) - T - 1 for d in train], dtype=torch.float64)
    ckpt = "checkpoint.pt"
    with rumor.Peer.from_env() as peer:
        opt = rumor.torch.Optimizer(model, inner, peer, resume=ckpt if os.path.exists(ckpt) else None)
        rounds = int(peer.setting("rounds") or 10)
        while True:
            steps, first = peer.phase()                              # H steps; the first's place in the run
            for i in range(steps):
                for group in inner.param_groups:
                    group["lr"] = lr_at(first + i, rounds * steps)
                doc = torch.multinomial(sizes, B, replacement=True, generator=g)   # plays by their length
                start = (torch.rand(B, generator=g, dtype=torch.float64) * sizes[doc]).long()
                x, y = windows([(train[d], s) for d, s in zip(doc.tolist(), start.tolist())], T)
                opt.zero_grad()
                loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step(loss=loss)                                  # the H-th also takes the round
            r = opt.last_round
            vl, va = evaluate(model, val, T, a.final_sample if r.finished else a.sample)
            peer.evaluated(val_loss=vl, val_acc=va)
            opt.save(ckpt)
            if r.finished:
                break
    print("peer %d: val_loss %.4f (next-byte accuracy %.3f) after %d rounds" % (rank, vl, va, r.round))


if __name__ == "__main__":
    main()
