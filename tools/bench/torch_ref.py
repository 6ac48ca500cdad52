#!/usr/bin/python3
"""PyTorch reference side of rumor's training benchmark.

Trains the same model as rumor on Fashion-MNIST with SGD and reports training
throughput (samples/s per epoch and the median) and optionally test accuracy.
A gpt:L,H,D,T model (tools/gpt_torch.py) trains instead on the .txt documents of
--data, bytes as tokens, with rumor's language-model recipe (AdamW, gradients
clipped to norm 1, batches of windows drawn at random from each document's first
nine tenths); an "epoch" is then --steps steps and samples/s counts tokens, as
rumor's tokens/s does.

Run it with Debian's interpreter, which carries python3-torch:

    /usr/bin/python3 tools/bench/torch_ref.py --model mlp:256,128 --threads 1 \
        --batch 64 --epochs 1 --lr 0.05 --momentum 0.9 [--eval] [--json]

Thread counts: PyTorch's intra-op pool (OpenMP) and OpenBLAS each start their own
threads, and OpenBLAS defaults to one per core.  OpenBLAS reads
OPENBLAS_NUM_THREADS once, when the library is loaded, and numpy loads it too, so
the environment is fixed below before numpy or torch is imported; every pool is
given the same T so the comparison with rumor at T threads is like for like.

With T > 1 the two pools still compete: GNU OpenMP workers busy-wait after each
parallel region while OpenBLAS's workers need the same cores for the next matrix
product.  On a 2-core machine, PyTorch and OpenBLAS both at 2 threads took 3.5 s
per MLP epoch against 0.77 s with PyTorch at 1 and OpenBLAS at 2; here the same
setting ran 10-20x slower than T = 1, and with OMP_WAIT_POLICY=PASSIVE (idle
OpenMP workers sleep instead of spinning) about as fast as T = 1.  PASSIVE is
therefore the default; pass --omp-wait-policy ACTIVE to reproduce the stock behaviour.
"""

import argparse
import os
import sys

THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def parse_args(argv):
    p = argparse.ArgumentParser(description="PyTorch reference training benchmark")
    p.add_argument("--model", default="mlp:256,128",
                   help="logreg | mlp:W1,W2,... | cnn | cnn:C1,C2 (default mlp:256,128)")
    p.add_argument("--threads", type=int, default=1,
                   help="threads for OpenBLAS, and for PyTorch/OpenMP unless --intra-threads (default 1)")
    p.add_argument("--intra-threads", type=int, default=None,
                   help="torch.set_num_threads and OMP_NUM_THREADS, when it should differ from "
                        "--threads (1 with OpenBLAS at T avoids the oversubscription trap)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=100, help="gpt: steps per measured epoch (default 100)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--data", default=DEFAULT_DATA,
                   help="directory of the Fashion-MNIST IDX files (default %s)" % DEFAULT_DATA)
    p.add_argument("--seed", type=int, default=0,
                   help="seed for initialisation and shuffling (default 0)")
    p.add_argument("--omp-wait-policy", default="PASSIVE", type=str.upper,
                   choices=("PASSIVE", "ACTIVE"),
                   help="OMP_WAIT_POLICY for PyTorch's OpenMP pool (default PASSIVE; "
                        "ACTIVE lets idle OpenMP workers spin against OpenBLAS's)")
    p.add_argument("--eval", action="store_true", help="report test accuracy after the last epoch")
    p.add_argument("--json", action="store_true", help="print one JSON object line on stdout")
    args = p.parse_args(argv)
    if args.threads < 1:
        p.error("--threads must be >= 1")
    if args.batch < 1:
        p.error("--batch must be >= 1")
    if args.epochs < 1:
        p.error("--epochs must be >= 1")
    return args


def _pin_thread_env(threads, intra, wait_policy):
    want = {k: str(threads) for k in THREAD_ENV}
    want["OMP_NUM_THREADS"] = str(intra)
    want["OMP_WAIT_POLICY"] = wait_policy
    if any(m in sys.modules for m in ("numpy", "torch")):
        # Something (e.g. a sitecustomize) already loaded OpenBLAS with the wrong
        # environment; only a fresh process can change its thread count.
        if any(os.environ.get(k) != v for k, v in want.items()):
            env = dict(os.environ)
            env.update(want)
            os.execve(sys.executable, [sys.executable] + sys.argv, env)
    os.environ.update(want)


# Parsed here, not in main(), because the thread count must reach the
# environment before the imports below load OpenBLAS.  Importing this file as a
# module leaves the environment alone.
ARGS = None
if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])
    if ARGS.intra_threads is None:
        ARGS.intra_threads = ARGS.threads
    _pin_thread_env(ARGS.threads, ARGS.intra_threads, ARGS.omp_wait_policy)

import gzip  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

if ARGS is not None:
    torch.set_num_threads(ARGS.intra_threads)
    # Inter-op parallelism is unused by a sequential training loop; one thread
    # keeps the process from holding more threads than the comparison allows.
    torch.set_num_interop_threads(1)


# ---------------------------------------------------------------- data

def _open_idx(data_dir, name):
    """Open NAME, falling back to NAME.gz, as a binary stream."""
    path = os.path.join(data_dir, name)
    if os.path.exists(path):
        return open(path, "rb")
    if os.path.exists(path + ".gz"):
        return gzip.open(path + ".gz", "rb")
    raise FileNotFoundError("neither %s nor %s.gz exists" % (path, path))


def read_idx(data_dir, name):
    """Parse an IDX file: 2 zero bytes, a type code, a dim count, big-endian dims."""
    with _open_idx(data_dir, name) as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError("%s: not an IDX file" % name)
    dtype_code, ndim = raw[2], raw[3]
    if dtype_code != 0x08:
        raise ValueError("%s: expected unsigned byte data (0x08), got 0x%02x" % (name, dtype_code))
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    offset = 4 + 4 * ndim
    count = int(np.prod(dims)) if dims else 0
    if len(raw) - offset < count:
        raise ValueError("%s: truncated (%d bytes of data, %d expected)" % (name, len(raw) - offset, count))
    return np.frombuffer(raw, dtype=np.uint8, count=count, offset=offset).reshape(dims)


def load_fashion_mnist(data_dir):
    """Return float32 (x_train, y_train, x_test, y_test) as torch tensors.

    Pixels are scaled to [0, 1] then standardised with the mean and standard
    deviation of all training pixels, applied to both splits.
    """
    xtr = read_idx(data_dir, "train-images-idx3-ubyte")
    ytr = read_idx(data_dir, "train-labels-idx1-ubyte")
    xte = read_idx(data_dir, "t10k-images-idx3-ubyte")
    yte = read_idx(data_dir, "t10k-labels-idx1-ubyte")
    if xtr.shape[0] != ytr.shape[0] or xte.shape[0] != yte.shape[0]:
        raise ValueError("image and label counts differ")

    xtr = xtr.reshape(xtr.shape[0], -1).astype(np.float32) / np.float32(255.0)
    xte = xte.reshape(xte.shape[0], -1).astype(np.float32) / np.float32(255.0)
    # Statistics in float64: a float32 sum over 47M pixels loses precision.
    mean = float(xtr.mean(dtype=np.float64))
    std = float(xtr.std(dtype=np.float64))
    xtr = (xtr - np.float32(mean)) / np.float32(std)
    xte = (xte - np.float32(mean)) / np.float32(std)

    return (torch.from_numpy(np.ascontiguousarray(xtr, dtype=np.float32)),
            torch.from_numpy(ytr.astype(np.int64)),
            torch.from_numpy(np.ascontiguousarray(xte, dtype=np.float32)),
            torch.from_numpy(yte.astype(np.int64)),
            mean, std)


# ---------------------------------------------------------------- train / eval

def shape_inputs(x, kind):
    """The CNN takes [N,1,28,28]; the linear models take flat [N,784]."""
    if kind == "cnn":
        return x.reshape(x.shape[0], *torch_models.IMAGE_SHAPE)
    return x


def train_epoch(model, opt, loss_fn, x, y, batch, gen):
    """One pass over the shuffled training set; returns (seconds, mean loss).

    The timed region holds everything a training loop does per epoch: the
    shuffle, gathering each minibatch, forward, backward and the SGD step.  The
    final partial batch is trained on, not dropped, so every epoch sees all N
    samples and samples/s = N / seconds.
    """
    n = x.shape[0]
    model.train()
    loss_sum = 0.0
    t0 = time.perf_counter()
    perm = torch.randperm(n, generator=gen)
    for start in range(0, n, batch):
        idx = perm[start:start + batch]
        xb = x.index_select(0, idx)
        yb = y.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        loss_sum += loss.item() * idx.shape[0]
    secs = time.perf_counter() - t0
    return secs, loss_sum / n


@torch.no_grad()
def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    for start in range(0, x.shape[0], batch):
        pred = model(x[start:start + batch]).argmax(dim=1)
        correct += int((pred == y[start:start + batch]).sum())
    return correct / x.shape[0]


def main_gpt(args):
    """Tokens/s of a gpt model on a corpus: --epochs measurements of --steps steps each."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import gpt_torch
    try:
        L, H, D, T = (int(v) for v in args.model[4:].split(","))
        names = sorted(f for f in os.listdir(args.data) if f.endswith(".txt"))
        docs = [open(os.path.join(args.data, f), "rb").read() for f in names]
    except (OSError, ValueError) as e:
        print("torch_ref: %s: %s" % (args.model, e), file=sys.stderr)
        return 1
    train = [torch.tensor(list(d[:len(d) - len(d) // 10]), dtype=torch.long) for d in docs]
    starts = [(i, s) for i, d in enumerate(train) for s in range(0, len(d) - T)]
    if not starts:
        print("torch_ref: %s: no window of %d bytes" % (args.data, T + 1), file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = gpt_torch.GPT(L, H, D, T, 256)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    rates = []
    for ep in range(args.epochs):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            pick = [starts[k] for k in torch.randint(0, len(starts), (args.batch,), generator=gen).tolist()]
            x = torch.stack([train[i][s:s + T] for i, s in pick])
            y = torch.stack([train[i][s + 1:s + T + 1] for i, s in pick])
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        rates.append(args.steps * args.batch * T / (time.perf_counter() - t0))
        if not args.json:
            print("epoch %d: %.0f tokens/s, loss %.4f" % (ep + 1, rates[-1], loss.item()))
    median = statistics.median(rates)
    if args.json:
        print(json.dumps({"impl": "pytorch", "torch_version": torch.__version__, "model": args.model,
                          "threads": args.threads, "intra_threads": args.intra_threads, "batch": args.batch,
                          "epochs": args.epochs, "steps": args.steps, "samples_per_s": median,
                          "unit": "tokens"}, separators=(",", ":")), flush=True)
    else:
        print("median: %.0f tokens/s" % median)
    return 0


def main(args):
    if args.model.startswith("gpt:"):
        return main_gpt(args)
    try:
        kind, _ = torch_models.parse_spec(args.model)
        spec = torch_models.canonical_spec(args.model)
    except ValueError as e:
        print("torch_ref: %s" % e, file=sys.stderr)
        return 2

    try:
        xtr, ytr, xte, yte, mean, std = load_fashion_mnist(args.data)
    except (OSError, ValueError) as e:
        print("torch_ref: loading data from %s: %s" % (args.data, e), file=sys.stderr)
        return 1
    # Reshape once, outside the timed loop (a view, no copy).
    xtr = shape_inputs(xtr, kind)
    xte = shape_inputs(xte, kind)

    torch.manual_seed(args.seed)
    gen = torch.Generator()
    gen.manual_seed(args.seed)
    model = torch_models.build_model(spec)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=0.0)
    loss_fn = nn.CrossEntropyLoss()

    human = not args.json
    if human:
        print("pytorch %s  model %s (%d params)  threads %d (OMP_WAIT_POLICY %s)  batch %d  lr %g  momentum %g"
              % (torch.__version__, spec, n_params, args.threads, args.omp_wait_policy,
                 args.batch, args.lr, args.momentum))
        print("data %s: %d train, %d test; normalised with mean %.4f std %.4f"
              % (args.data, xtr.shape[0], xte.shape[0], mean, std))

    n = xtr.shape[0]
    epoch_s = []
    rates = []
    losses = []
    for ep in range(args.epochs):
        secs, loss = train_epoch(model, opt, loss_fn, xtr, ytr, args.batch, gen)
        epoch_s.append(secs)
        rates.append(n / secs)
        losses.append(loss)
        if human:
            print("epoch %d: %.3f s  %.0f samples/s  train loss %.4f" % (ep + 1, secs, n / secs, loss))

    median = statistics.median(rates)
    test_acc = evaluate(model, xte, yte) if args.eval else None

    if args.json:
        # Per-epoch values are rounded and per-epoch rates left out (they are
        # N / epoch_s) so the line stays short for readers with fixed line buffers.
        print(json.dumps({
            "impl": "pytorch",
            "torch_version": torch.__version__,
            "model": spec,
            "threads": args.threads,
            "intra_threads": args.intra_threads,
            "batch": args.batch,
            "epochs": args.epochs,
            "samples_per_s": median,
            "epoch_s": [round(v, 6) for v in epoch_s],
            "test_acc": test_acc,
            "train_n": n,
            "train_loss": [round(v, 6) for v in losses],
            "lr": args.lr,
            "momentum": args.momentum,
            "omp_wait_policy": args.omp_wait_policy,
            "params": n_params,
        }, separators=(",", ":")), flush=True)
    else:
        print("median: %.0f samples/s (%.3f s per epoch of %d)" % (median, n / median, n))
        if test_acc is not None:
            print("test accuracy: %.4f" % test_acc)
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
