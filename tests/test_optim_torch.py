#!/usr/bin/python3
"""rumor's optimizers and learning-rate schedules against torch.optim and
torch.optim.lr_scheduler: optim_dump runs 300 steps of rumor_optim_step, each at the rate
rumor_schedule_lr gives, on parameters and gradients written here (seeded, the gradients fixed in
advance, the same ones fed to both sides); PyTorch takes the same steps on the same tensors,
split into parameter groups as rumor splits the flat buffer, and every step's parameters and
learning rate must agree.

Compared: SGD (no momentum, momentum, Nesterov; each with and without weight decay), AdamW and
dadamw (AdamW without gossip), weight decay on every parameter (as the trainer does for the image
models) or on the matrices only (as it does for a language model: rumor_model_matrices); and the
schedules constant, step:EPOCHS,GAMMA and cosine, each with and without --warmup, under SGD with
weight decay (so the scheduled rate multiplies the coupled decay too), and cosine with warm-up
under AdamW on a gpt layout (the decoupled decay, lr * wd, at the scheduled rate). Layouts: mlp:6
(two matrices, two biases, padding between them) and gpt:1,2,16,8.

usage: test_optim_torch.py OPTIM_DUMP SOURCE_DIR
Exits 77 (skipped) without torch, 1 on any mismatch.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from rumortest import FAILS, check

SKIP = 77
STEPS = 300
EPOCH = 25  # steps per epoch: step:2,GAMMA decays every 50 steps, 5 times in the run
# Parameters: the largest difference from PyTorch (float32, the same arithmetic in another order)
# over the largest value, per tensor and step. float32 rounds each operation to 6e-8 of its
# value; a step is a handful of them, and an error made at one step carries on (through the
# momentum buffer it is summed over about 1/(1 - momentum) = 10 later steps) but is not
# amplified: the updates do not depend on the parameters except through the contracting weight
# decay. Over 300 steps of random signs that is a few 1e-7 of the largest value (measured: at
# most 8e-7, and PyTorch's own float32 run is as far from its float64 one: up to 4e-6 for AdamW);
# 1e-5 leaves room for that, and every difference of algorithm tried moves the parameters by
# 3e-4 or more: AdamW's bias correction a step ahead (3e-4), Adam's coupled decay instead of
# AdamW's (5e-3), a warm-up a step longer (1e-3), Nesterov's term left out (0.3), biases decayed (5).
TOL = 1e-5
# Rates: rumor computes the rate in double and rounds it to float32 once (6e-8 of it at most);
# torch's schedulers keep it in double, their chainable forms as a product of ratios, each
# rounded to 1e-16. 2e-7 is float32's rounding with a margin, and far below an off-by-one step
# of warm-up (1/30 or more) or of cosine (1e-4 of the rate or more).
LR_TOL = 2e-7

MLP = ("mlp:6", "1,2,3,4")
GPT = ("gpt:1,2,16,8", "1,1,8,20")


def f32(x):
    """x as rumor holds it: its settings are float32 (rumor_optim_config_t, a step schedule's
    gamma), so PyTorch gets the same values and the comparison is of the algorithms alone (with
    the decimal ones, 0.3 for instance, the rates of step:2,0.3 differ by 1.7e-7 after five
    decays, close to LR_TOL)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def layout(dump, model):
    """The flat buffer's size and its tensors: [(name, offset, count, shape)]."""
    r = subprocess.run([dump, *model], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError("optim_dump %s: %s" % (" ".join(model), r.stderr.strip()))
    n, tensors = 0, []
    for line in r.stdout.splitlines():
        w = line.split()
        if w[0] == "params":
            n = int(w[1])
        else:
            tensors.append((w[1], int(w[2]), int(w[3]), tuple(int(d) for d in w[5:5 + int(w[4])])))
    return n, tensors


def write_safetensors(path, tensors):
    """float32 tensors (name -> torch tensor) in a safetensors file, with struct and json."""
    header, data, at = {}, b"", 0
    for name, t in tensors.items():
        raw = t.contiguous().float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        data += raw
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def dump_args(run):
    a = ["--optimizer", run["opt"], "--lr", repr(run["lr"]), "--weight-decay", repr(run.get("wd", 0.0)),
         "--decay", run.get("decay", "all"), "--schedule", run.get("schedule", "constant"),
         "--warmup", str(run.get("warmup", 0)), "--epoch-steps", str(EPOCH)]
    if run["opt"] in ("sgd", "qgm"):
        a += ["--momentum", repr(run.get("momentum", 0.0))] + (["--nesterov"] if run.get("nesterov") else [])
    else:
        b1, b2 = run.get("betas", (0.9, 0.999))
        a += ["--beta1", repr(b1), "--beta2", repr(b2), "--eps", repr(run.get("eps", 1e-8))]
    return a


def schedule(opt, run):
    """PyTorch's scheduler for the run's schedule, as a function to call after step s (0-based).
    Warm-up is LinearLR from 1/W to 1 over W - 1 steps: its factor at step s, 1/W + (1 - 1/W)
    s / (W - 1) = (s + 1) / W, is rumor's; it multiplies the schedule from step 0 on
    (ChainedScheduler), except that cosine starts at the end of the warm-up and anneals over the
    steps left (SequentialLR, milestone W)."""
    L = torch.optim.lr_scheduler
    kind, W = run.get("schedule", "constant"), run.get("warmup", 0)
    warm = (lambda: L.LinearLR(opt, start_factor=1.0 / W, end_factor=1.0, total_iters=W - 1)) if W else None
    if kind == "constant":
        s = warm() if W else None
    elif kind.startswith("step:"):
        every, gamma = kind[5:].split(",")
        if not W:
            # the documented use: StepLR stepped once an epoch, every EPOCHS epochs
            s = L.StepLR(opt, step_size=int(every), gamma=f32(float(gamma)))
            return lambda i: s.step() if (i + 1) % EPOCH == 0 else None
        # with the warm-up's per-step factor: StepLR stepped every step, every EPOCHS epochs of steps
        s = L.ChainedScheduler([warm(), L.StepLR(opt, step_size=int(every) * EPOCH, gamma=f32(float(gamma)))])
    elif kind == "cosine":
        if W:
            s = L.SequentialLR(opt, [warm(), L.CosineAnnealingLR(opt, T_max=STEPS - W)], milestones=[W])
        else:
            s = L.CosineAnnealingLR(opt, T_max=STEPS)
    else:
        raise ValueError(kind)
    return (lambda i: s.step()) if s else (lambda i: None)


def torch_run(tensors, n, p0, grads, run, dtype, decay=None):
    """PyTorch's trajectory (STEPS x n, padding left 0) and rates; decay overrides the run's
    choice of decayed tensors (for the control)."""
    # the tensors are views of one flat buffer laid out as rumor's (leaves: no autograd here), so
    # a step's parameters are the buffer; the gradients likewise views of each step's row
    flat, G = p0.to(dtype).clone(), grads.to(dtype)
    params = [flat[o:o + c].view(shape) for _, o, c, shape in tensors]
    wd = f32(run.get("wd", 0.0))
    if (decay or run.get("decay", "all")) == "matrices":
        # rumor_model_matrices: the tensors of two or more dimensions decay, the rest do not
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    else:
        groups = [{"params": params, "weight_decay": wd}]
    lr = f32(run["lr"])
    if run["opt"] == "sgd":
        opt = torch.optim.SGD(groups, lr=lr, momentum=f32(run.get("momentum", 0.0)),
                              nesterov=bool(run.get("nesterov")))
    else:  # adamw, dadamw: dadamw without gossip is AdamW
        b1, b2 = run.get("betas", (0.9, 0.999))
        opt = torch.optim.AdamW(groups, lr=lr, betas=(f32(b1), f32(b2)), eps=f32(run.get("eps", 1e-8)))
    after = schedule(opt, run)
    traj, lrs = torch.zeros(STEPS, n, dtype=dtype), []
    for s in range(STEPS):
        for p, (_, o, c, _) in zip(params, tensors):
            p.grad = G[s, o:o + c].view(p.shape)  # SGD and AdamW read it, never write it
        rates = {g["lr"] for g in opt.param_groups}
        assert len(rates) == 1, rates
        lrs.append(rates.pop())
        opt.step()
        traj[s] = flat
        after(s)
    return traj, torch.tensor(lrs, dtype=torch.float64)


def worst(tensors, ours, ref):
    """The largest difference over the largest value, per tensor and step; the worst one and
    where (tensor, step)."""
    w, where = 0.0, ""
    for name, o, c, _ in tensors:
        a, b = ours[:, o:o + c].double(), ref[:, o:o + c].double()
        e = (a - b).abs().max(dim=1).values / b.abs().max(dim=1).values
        e = torch.nan_to_num(e, nan=float("inf"))  # a NaN of either side fails, not compares false
        s = int(e.argmax())
        if e[s].item() > w:
            w, where = e[s].item(), "%s step %d" % (name, s + 1)
    return w, where


def compare(dump, tmp, model, run, ctx):
    n, tensors = ctx[model]["layout"]
    p0, grads = ctx[model]["p0"], ctx[model]["grads"]
    out = os.path.join(tmp, "out.safetensors")
    r = subprocess.run([dump, *model, ctx[model]["in"], out] + dump_args(run),
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "%s: optim_dump ran (%s)" % (run["name"], r.stderr.strip()))
    if r.returncode != 0:
        return None
    got, _ = safetensors_torch.load(out)
    ours, our_lr = got["params"], got["lr"].double()
    ref, ref_lr = torch_run(tensors, n, p0, grads, run, torch.float32)
    exact, _ = torch_run(tensors, n, p0, grads, run, torch.float64)
    lr_err = ((our_lr - ref_lr).abs() / ref_lr.abs()).max().item()
    s = int(((our_lr - ref_lr).abs() / ref_lr.abs()).argmax())
    check(lr_err <= LR_TOL, "%s: rate within %.0e of PyTorch's at every step (worst %.1e, step %d: %.9g, "
          "PyTorch %.9g)" % (run["name"], LR_TOL, lr_err, s + 1, our_lr[s].item(), ref_lr[s].item()))
    err, where = worst(tensors, ours, ref)
    e64, _ = worst(tensors, ours, exact)
    t64, _ = worst(tensors, ref, exact)
    check(err <= TOL, "%s: parameters within %.0e of PyTorch's over %d steps (worst %.1e at %s; "
          "from float64: rumor %.1e, PyTorch float32 %.1e)" % (run["name"], TOL, STEPS, err, where, e64, t64))
    pad = torch.ones(n, dtype=torch.bool)
    for _, o, c, _ in tensors:
        pad[o:o + c] = False
    check(not ours[:, pad].any().item(), "%s: the padding between tensors stays 0" % run["name"])
    return ours


RUNS = [
    (MLP, dict(name="sgd", opt="sgd", lr=0.05)),
    (MLP, dict(name="sgd wd", opt="sgd", lr=0.05, wd=0.05)),
    (MLP, dict(name="sgd momentum", opt="sgd", lr=0.05, momentum=0.9)),
    (MLP, dict(name="sgd momentum wd", opt="sgd", lr=0.05, momentum=0.9, wd=0.05)),
    (MLP, dict(name="sgd momentum wd matrices", opt="sgd", lr=0.05, momentum=0.9, wd=0.05, decay="matrices")),
    (MLP, dict(name="sgd nesterov", opt="sgd", lr=0.05, momentum=0.9, nesterov=True)),
    (MLP, dict(name="sgd nesterov wd", opt="sgd", lr=0.05, momentum=0.9, nesterov=True, wd=0.05)),
    (MLP, dict(name="sgd nesterov wd matrices", opt="sgd", lr=0.05, momentum=0.9, nesterov=True, wd=0.05,
               decay="matrices")),
    (MLP, dict(name="adamw wd", opt="adamw", lr=0.01, wd=0.1)),
    (MLP, dict(name="adamw wd matrices", opt="adamw", lr=0.01, wd=0.1, decay="matrices")),
    (MLP, dict(name="dadamw wd matrices", opt="dadamw", lr=0.01, wd=0.1, decay="matrices")),
    # nanoGPT's settings on a gpt layout: betas 0.9, 0.95, matrices and embeddings decayed
    (GPT, dict(name="adamw gpt cosine warmup 30", opt="adamw", lr=0.003, wd=0.1, betas=(0.9, 0.95),
               decay="matrices", schedule="cosine", warmup=30)),
]
# every schedule, with and without warm-up, under SGD with momentum and decayed matrices; the
# warm-up of step:2,0.3 reaches past its first decay (step 50)
for spec, warmup in (("constant", 20), ("step:2,0.3", 0), ("step:2,0.3", 60), ("cosine", 0), ("cosine", 30)):
    name = "schedule %s%s" % (spec, " warmup %d" % warmup if warmup else "")
    RUNS.append((MLP, dict(name=name, opt="sgd", lr=0.05, momentum=0.9, wd=0.05, decay="matrices",
                           schedule=spec, warmup=warmup)))


def main():
    global torch, safetensors_torch
    try:
        import torch
    except ImportError:
        print("skip: no torch (Debian's python3-torch)")
        return SKIP
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)  # SequentialLR's step(0) is "deprecated"
    torch.set_num_threads(1)
    dump = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.join(sys.argv[2], "tools"))
    import safetensors_torch
    gen = torch.Generator().manual_seed(46)
    with tempfile.TemporaryDirectory() as tmp:
        ctx = {}
        for model in (MLP, GPT):
            n, tensors = layout(dump, model)
            p0, grads = torch.zeros(n), torch.zeros(STEPS, n)
            for _, o, c, _ in tensors:  # padding stays 0, as a model's is
                p0[o:o + c] = 0.5 * torch.randn(c, generator=gen)
                grads[:, o:o + c] = torch.randn(STEPS, c, generator=gen)
            path = os.path.join(tmp, "%s.safetensors" % model[0].replace(":", "-"))
            write_safetensors(path, {"params": p0, "grads": grads})
            ctx[model] = {"layout": (n, tensors), "p0": p0, "grads": grads, "in": path}
        for model, run in RUNS:
            ours = compare(dump, tmp, model, run, ctx)
            if ours is not None and run["name"] == "sgd momentum wd matrices":
                # the control: the same comparison with PyTorch decaying the biases too fails
                n, tensors = ctx[model]["layout"]
                wrong, _ = torch_run(tensors, n, ctx[model]["p0"], ctx[model]["grads"], run, torch.float32,
                                     "all")
                err, where = worst(tensors, ours, wrong)
                check(err > 100 * TOL, "control: PyTorch decaying every tensor instead is %.1e away (%s)"
                      % (err, where))
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
