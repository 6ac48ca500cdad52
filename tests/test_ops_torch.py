#!/usr/bin/python3
"""The transformer ops of the CPU backend, and of the staged backend (the CPU's behind a device's
contract), against PyTorch: ops_dump writes the ops' inputs, outputs and gradients under a random
upstream gradient; PyTorch recomputes each in float64 with autograd from the same inputs:
nn.functional.embedding plus the position table, layer_norm (eps 1e-5), causal attention as
nanoGPT writes it, and gelu(approximate='tanh'). Then a whole gpt model (ops_dump --gpt): its
parameters loaded into tools/gpt_torch.py's GPT with load_state_dict(strict=True), the same batch
gives the same loss and every parameter the same gradient (relative error at most 1e-4).

usage: test_ops_torch.py OPS_DUMP SOURCE_DIR
Exits 77 (skipped) without torch.
"""
import math
import os
import subprocess
import sys
import tempfile

from rumortest import FAILS, check

SKIP = 77


def load(path):
    """A dump's tensors in float64, and its metadata."""
    tensors, meta = gpt_torch.read_safetensors(path)
    return {k: v.double() for k, v in tensors.items()}, meta


def close(name, ours, ref, tol):
    """Largest difference over the largest value (float32's rounding is about 6e-8 of that)."""
    err = ((ours - ref).abs().max() / ref.abs().max()).item()
    check(err <= tol, "%s: largest difference from PyTorch %.2e of its largest value (at most %g)"
          % (name, err, tol))


def compare(t, nh):
    F = torch.nn.functional
    B, T = t["tok"].shape
    C = t["wte"].shape[1]
    # embeddings
    wte, wpe = t["wte"].clone().requires_grad_(), t["wpe"].clone().requires_grad_()
    emb = F.embedding(t["tok"].long(), wte) + wpe[:T]
    emb.backward(t["embed.dout"])
    close("embed", t["embed"], emb.detach(), 2e-6)
    close("embed_bwd dwte", t["embed.dwte"], wte.grad, 1e-5)
    close("embed_bwd dwpe", t["embed.dwpe"], wpe.grad, 1e-5)
    # LayerNorm of the embedding's rows
    x = t["embed"].clone().requires_grad_()
    w, b = t["ln.w"].clone().requires_grad_(), t["ln.b"].clone().requires_grad_()
    y = F.layer_norm(x, (C,), w, b, eps=1e-5)
    y.backward(t["ln.dout"])
    close("layernorm", t["ln"], y.detach(), 2e-6)
    close("layernorm_bwd dx", t["ln.dx"], x.grad, 1e-5)
    close("layernorm_bwd dw", t["ln.dw"], w.grad, 1e-5)
    close("layernorm_bwd db", t["ln.db"], b.grad, 1e-5)
    # causal attention, as nanoGPT's CausalSelfAttention computes it (without its projections)
    qkv = t["qkv"].clone().requires_grad_()
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (z.view(B, T, nh, C // nh).transpose(1, 2) for z in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // nh))
    att = att.masked_fill(torch.tril(torch.ones(T, T)).view(1, 1, T, T) == 0, float("-inf"))
    o = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
    o.backward(t["attn.dout"])
    close("attention", t["attn"], o.detach(), 2e-6)
    close("attention_bwd", t["attn.dqkv"], qkv.grad, 1e-5)
    # GELU, tanh approximation
    gx = t["gelu.x"].clone().requires_grad_()
    gy = F.gelu(gx, approximate="tanh")
    gy.backward(t["gelu.dout"])
    close("gelu", t["gelu"], gy.detach(), 2e-6)
    close("gelu_bwd", t["gelu.dx"], gx.grad, 1e-5)


def compare_gpt(path):
    t, meta = load(path)
    V = t["transformer.wte.weight"].shape[0]
    state = {k: v.float() for k, v in t.items() if k.startswith("transformer.")}
    model = gpt_torch.from_state(state, meta["model"], V).double()
    _, loss = model(t["tok"].long(), t["targets"].long())
    loss.backward()
    err = abs(loss.item() - t["loss"].item()) / loss.item()
    check(err <= 1e-5, "gpt %s: loss %.7f, PyTorch's %.7f" % (meta["model"], t["loss"].item(), loss.item()))
    params = dict(model.named_parameters())
    worst, where = 0.0, ""
    for name in state:
        ref = params[name].grad
        e = ((t["grad." + name] - ref).abs().max() / ref.abs().max()).item()
        if e > worst:
            worst, where = e, name
    check(worst <= 1e-4, "gpt %s: every parameter's gradient within %.1e of PyTorch's (worst %s)"
          % (meta["model"], worst, where))


def main():
    global torch, gpt_torch
    try:
        import torch
    except ImportError:
        print("skip: no torch (Debian's python3-torch)")
        return SKIP
    dump = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.join(sys.argv[2], "tools"))
    import gpt_torch
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("cpu", "staged"):
            path = os.path.join(tmp, backend + ".safetensors")
            r = subprocess.run([dump, path] + (["--backend", "staged"] if backend == "staged" else []),
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, "%s: ops_dump ran (%s)" % (backend, r.stderr.strip()))
            if r.returncode != 0:
                continue
            print("-- %s backend" % backend)
            t, meta = load(path)
            compare(t, int(meta["NH"]))
            path = os.path.join(tmp, backend + "-gpt.safetensors")
            r = subprocess.run([dump, path, "--gpt"] + (["--backend", "staged"] if backend == "staged" else []),
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, "%s: ops_dump --gpt ran (%s)" % (backend, r.stderr.strip()))
            if r.returncode == 0:
                compare_gpt(path)
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
