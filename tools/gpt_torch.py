"""tools/gpt_torch.py - rumor's gpt:L,H,D,T models in PyTorch: GPT-2 as nanoGPT's model.py defines
it (biases, no dropout, the head tied to the token embedding) with GPT-2's own GELU, the tanh
approximation (nanoGPT's model.py now takes the exact GELU: apart by under 1e-6 nats on a small
model), and a loader for the safetensors files rumor writes.

    import sys; sys.path.insert(0, "tools")
    from gpt_torch import load
    model = load("run/lm.safetensors")          # a GPT, its weights rumor's, in eval mode
    logits, loss = model(idx, targets)          # idx, targets: LongTensor [B, T]

rumor stores the tied head once, as transformer.wte.weight, and no causal-mask buffers; load()
re-ties lm_head.weight and rebuilds the masks, so load_state_dict(strict=True) holds.
"""
import json
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        # nanoGPT's name for the causal mask, where PyTorch has no fused attention to use
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as in GPT-2
        # GPT-2's initialisation, as nanoGPT's and rumor's: N(0, 0.02), the residual projections
        # N(0, 0.02 / sqrt(2 n_layer)), biases 0 (LayerNorm starts at 1 and 0 by itself)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            elif name.endswith(".weight") and p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith(".bias") and "ln_" not in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets=None):
        B, T = idx.size()
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


def read_safetensors(path):
    """A safetensors file's float32 tensors (as torch tensors) and its metadata."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    meta = head.pop("__metadata__", {})
    tensors = {}
    for name, t in head.items():
        if t["dtype"] != "F32":
            raise ValueError("%s: %s is %s, not F32" % (path, name, t["dtype"]))
        b, e = t["data_offsets"]
        tensors[name] = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + e]), dtype=torch.float32).reshape(t["shape"])
    return tensors, meta


def from_state(tensors, spec, vocab):
    """A GPT of spec "gpt:L,H,D,T" over vocab tokens with rumor's tensors (extra ones, such as a
    checkpoint's optimizer state, are left out)."""
    if not spec.startswith("gpt:"):
        raise ValueError("not a gpt model: %s" % spec)
    L, H, D, T = (int(v) for v in spec[4:].split(","))
    model = GPT(L, H, D, T, vocab)
    state = {k: v for k, v in tensors.items() if k.startswith("transformer.")}
    state["lm_head.weight"] = state["transformer.wte.weight"]
    for name, buf in model.state_dict().items():
        if name.endswith(".attn.bias"):  # not c_attn.bias
            state[name] = buf  # the causal masks, rebuilt
    model.load_state_dict(state, strict=True)
    return model.eval()


def load(path):
    """The gpt model in a safetensors file rumor wrote (an export or a checkpoint)."""
    tensors, meta = read_safetensors(path)
    return from_state(tensors, meta["model"], int(meta["classes"]))
