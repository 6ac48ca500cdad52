#!/usr/bin/python3
"""nanoGPT's CPU recipe in PyTorch on rumor's default corpus, as `rumor train --model
gpt:4,4,128,64` runs it: bytes, each document's last tenth for validation, windows inside a
document, batch 12 x 64, AdamW 1e-3 (betas 0.9/0.999, no decay), 100 warm-up steps then cosine
to 0 over 2000, gradients clipped at 1, the model of tools/gpt_torch.py at two threads. Prints
the validation loss as rumor defines it, the training time and tokens/s.

    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 tools/bench/torch_gpt_recipe.py
"""
import math
import os
import sys
import time

os.environ.update(OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2", OMP_WAIT_POLICY="PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gpt_torch  # noqa: E402
import torch  # noqa: E402

CORPUS = "/usr/share/datasets/shakespeare"
T, B, STEPS, WARMUP, LR = 64, 12, 2000, 100, 1e-3


def lr_at(step):
    """rumor's cosine schedule after a linear warm-up (src/ml/optim.c)."""
    t = min(1.0, max(0.0, (step - WARMUP) / (STEPS - WARMUP)))
    lr = LR * 0.5 * (1 + math.cos(math.pi * t))
    return lr * (step + 1) / WARMUP if step < WARMUP else lr


def main():
    torch.set_num_threads(2)
    torch.manual_seed(1)
    docs = [open(os.path.join(CORPUS, f), "rb").read() for f in sorted(os.listdir(CORPUS)) if f.endswith(".txt")]
    train = [d[:len(d) - len(d) // 10] for d in docs]
    val = [d[len(d) - len(d) // 10:] for d in docs]
    starts = [(i, s) for i, d in enumerate(train) for s in range(len(d) - T)]
    windows = [(i, s) for i, d in enumerate(val) for s in range(0, len(d) - T, T)]
    model = gpt_torch.GPT(4, 4, 128, T, 256)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    gen = torch.Generator().manual_seed(1)
    t0 = time.time()
    for step in range(STEPS):
        pick = [starts[k] for k in torch.randint(0, len(starts), (B,), generator=gen).tolist()]
        x = torch.tensor([list(train[i][s:s + T]) for i, s in pick])
        y = torch.tensor([list(train[i][s + 1:s + T + 1]) for i, s in pick])
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    seconds = time.time() - t0
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for a in range(0, len(windows), 256):
            chunk = windows[a:a + 256]
            x = torch.tensor([list(val[i][s:s + T]) for i, s in chunk])
            y = torch.tensor([list(val[i][s + 1:s + T + 1]) for i, s in chunk])
            _, loss = model(x, y)
            total += loss.item() * x.numel()
            n += x.numel()
    print("torch recipe: val_loss %.4f, %.0f s training, %.0f tokens/s" % (total / n, seconds, STEPS * B * T / seconds))


if __name__ == "__main__":
    main()
