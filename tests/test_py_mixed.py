#!/usr/bin/python3
"""A mixed swarm: two PyTorch peers (the Python package) and two `rumor node` peers train
mlp:256,128 on Fashion-MNIST together. The PyTorch model is the user's own, its tensors named
as rumor exports them; it starts from the initial model `rumor train --epochs 0 --save` writes
and normalises its inputs with that file's input_mean and input_std, as the nodes do.

Checked: on a complete graph every round mixes all four, so the four final models are one
model (Python's and C's alike); the swarm's accuracy is within one point of an all-C swarm of
four with the same steps; the Python peers' metrics carry the loss opt.step(loss=...) reported.
Then a Python peer of another model (fc2 64 wide) beside a node: its start raises LayoutError
naming fc2.weight, and the node's log names it too.

usage: test_py_mixed.py RUMOR PYTHON_BUILD_DIR DATA_DIR"""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

import pyswarm
from pyswarm import check

ROUNDS, LOCAL = 150, 4

PROGRAM = r'''
import json, os, sys
import numpy as np, torch, rumor, rumor.torch
from rumor.safetensors import load

class MLP(torch.nn.Module):            # the user's own; its names are rumor's: fc1, fc2, fc3
    def __init__(self, h1=256, h2=128):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(784, h1), torch.nn.Linear(h1, h2), torch.nn.Linear(h2, 10)
    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

init, x_path, y_path, out, rank, h2 = sys.argv[1:7]
rank, h2 = int(rank), int(h2)
torch.set_num_threads(1)
state, meta = load(init)
model = MLP(h2=h2)
if h2 == 128:
    model.load_state_dict(state)       # the nodes' initial model
mean, std = float(meta["input_mean"]), float(meta["input_std"])
x = torch.from_numpy((np.load(x_path).reshape(-1, 784).astype(np.float32) / 255.0 - mean) / std)
y = torch.from_numpy(np.load(y_path).astype(np.int64))
g = torch.Generator().manual_seed(1000 + rank)
share = torch.randperm(len(x), generator=g)[rank::4]   # this peer's quarter
inner = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
with rumor.Peer.from_env() as peer:
    try:
        opt = rumor.torch.Optimizer(model, inner, peer)
    except rumor.LayoutError as e:
        print(json.dumps({"layout_error": str(e)}), flush=True)
        sys.exit(0)
    while True:
        order = share[torch.randperm(len(share), generator=g)]
        for i in range(0, len(order) - 63, 64):
            b = order[i:i + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[b]), y[b])
            loss.backward()
            opt.step(loss=loss)
            if opt.last_round is not None and opt.last_round.finished:
                break
        if opt.last_round is not None and opt.last_round.finished:
            break
np.savez(out, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
print(json.dumps({"rounds": opt.last_round.round}), flush=True)
'''


def idx(path, offset):
    import numpy as np
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def main():
    rumor_exe, pydir, data = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print("skip: PyTorch not installed:", e)
        return 77
    if not os.path.isdir(data):
        print("skip: no dataset at", data)
        return 77
    sys.path.insert(0, pydir)
    from rumor.safetensors import load
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="rumor-test-mixed-")
    procs = []
    try:
        pub = pyswarm.make_swarm(rumor_exe, tmp, 4)
        init = os.path.join(tmp, "init.safetensors")
        subprocess.run([rumor_exe, "train", "--model", "mlp:256,128", "--epochs", "0", "--save", init, "--quiet"],
                       check=True)
        x_path, y_path = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        np.save(x_path, idx(os.path.join(data, "train-images-idx3-ubyte.gz"), 16))
        np.save(y_path, idx(os.path.join(data, "train-labels-idx1-ubyte.gz"), 8))
        prog = os.path.join(tmp, "train.py")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        _, meta = load(init)
        mean, std = float(meta["input_mean"]), float(meta["input_std"])
        tx = torch.from_numpy((idx(os.path.join(data, "t10k-images-idx3-ubyte.gz"), 16).reshape(-1, 784)
                               .astype(np.float32) / 255.0 - mean) / std)
        ty = torch.from_numpy(idx(os.path.join(data, "t10k-labels-idx1-ubyte.gz"), 8).astype(np.int64))
        base = pyswarm.port_base(30)
        swarm = ("topology = complete\nrounds = %d\nlocal-steps = %d\nmin-peers = 4\nround-timeout = 20\n"
                 "join-timeout = 60\nlinger = 3\n" % (ROUNDS, LOCAL))

        def node(i, port, run_dir, extra=()):
            args = [rumor_exe, "node", "--key", "%s/p%d.key" % (tmp, i), "--cert", "%s/p%d.cert" % (tmp, i),
                    "--swarm", tmp + "/auth/authority.pub", "--listen", "tcp://127.0.0.1:%d" % (port + i),
                    "--model", "mlp:256,128", "--partition", "iid", "--rank", str(i), "--of", "4", "--threads", "1",
                    "--eval-every", "0", "--run-dir", run_dir, "--config", os.path.join(tmp, "swarm.conf")]
            if i:
                args += ["--bootstrap", "rumor://%s@127.0.0.1:%d" % (pub, port)]
            return subprocess.Popen(args + list(extra), stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(tmp, "p%d.log" % i), "w"))

        def python(i, port, run_dir, out, h2=128, text=swarm):
            settings = pyswarm.ident_text(tmp, i, port + i, pub, port) + text + "run-dir = %s\n" % run_dir
            return subprocess.Popen([sys.executable, prog, init, x_path, y_path, out, str(i), str(h2)],
                                    env=dict(os.environ, RUMOR_SETTINGS=settings, PYTHONPATH=pydir),
                                    stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "p%d.log" % i), "w"),
                                    text=True)

        with open(os.path.join(tmp, "swarm.conf"), "w") as f:
            f.write(swarm)

        def accuracy(state):
            w = [torch.as_tensor(state["fc%d.%s" % (k, n)]) for k in (1, 2, 3) for n in ("weight", "bias")]
            h = torch.relu(tx @ w[0].T + w[1])
            h = torch.relu(h @ w[2].T + w[3])
            return float(((h @ w[4].T + w[5]).argmax(1) == ty).float().mean())

        def swarm_of(kinds, port):
            ps, outs, runs = [], [], []
            for i, kind in enumerate(kinds):
                rd = os.path.join(tmp, "%s-run%d" % ("".join(kinds), i))
                runs.append(rd)
                if kind == "c":
                    ps.append(node(i, port, rd))
                    outs.append(os.path.join(rd, "model.safetensors"))
                else:
                    outs.append(os.path.join(tmp, "%s-py%d.npz" % ("".join(kinds), i)))
                    ps.append(python(i, port, rd, outs[-1]))
                procs.append(ps[-1])
            deadline = time.monotonic() + 240
            codes = []
            for p in ps:
                try:
                    p.wait(timeout=max(1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                codes.append(p.returncode)
            models = []
            for o in outs:
                if not os.path.exists(o):
                    models.append(None)
                elif o.endswith(".npz"):
                    models.append(dict(np.load(o)))
                else:
                    models.append({k: v.numpy() for k, v in load(o)[0].items()})
            return codes, models, runs

        def spread(models):
            flat = [np.concatenate([m[k].ravel() for k in sorted(m)]) for m in models]
            return max(np.abs(a - b).max() for a in flat for b in flat) / max(np.abs(a).max() for a in flat)

        codes, c_models, _ = swarm_of("cccc", base)
        check(codes == [0] * 4 and all(m is not None for m in c_models),
              "an all-C swarm of four trains %d rounds and exits 0 (exits %s)" % (ROUNDS, codes))
        codes, m_models, m_runs = swarm_of("ccpp", base + 10)
        check(codes == [0] * 4 and all(m is not None for m in m_models),
              "two rumor nodes and two PyTorch peers train %d rounds and exit 0 (exits %s)" % (ROUNDS, codes))
        if failed_now():
            return pyswarm.result()
        s = spread(m_models)
        check(s < 1e-4, "every round mixes all four: the final models of the nodes and the PyTorch peers are one "
              "(largest difference %.2e of the largest weight)" % s)
        acc_c = [accuracy(m) for m in c_models]
        acc_m = [accuracy(m) for m in m_models]
        mc, mm = sum(acc_c) / 4, sum(acc_m) / 4
        print("all-C swarm: test accuracy %s, mean %.4f" % (["%.4f" % a for a in acc_c], mc))
        print("mixed swarm: test accuracy %s, mean %.4f" % (["%.4f" % a for a in acc_m], mm))
        check(mc > 0.8 and abs(mm - mc) <= 0.01, "the mixed swarm ends within one point of the all-C swarm "
              "(%.4f and %.4f)" % (mm, mc))
        lines = [json.loads(l) for l in open(os.path.join(m_runs[2], "metrics.jsonl")) if l.strip()]
        losses = [l["loss"] for l in lines if l.get("round", 0) > 0 and "loss" in l]
        check(len(losses) >= ROUNDS - 1 and all(0 < v < 5 for v in losses) and losses[-1] < 0.6 * losses[0],
              "a PyTorch peer's metrics carry the loss opt.step(loss=...) reported, falling (%d rounds, %.3f -> %.3f)"
              % (len(losses), losses[0] if losses else -1, losses[-1] if losses else -1))

        # Another model beside a node: both name the first tensor that differs.
        quick = ("topology = complete\nrounds = 3\nmin-peers = 2\njoin-timeout = 3\nround-timeout = 2\nlinger = 0\n")
        with open(os.path.join(tmp, "swarm.conf"), "w") as f:
            f.write(quick)
        port = base + 20
        pn = node(0, port, os.path.join(tmp, "other-node"))
        pp = python(1, port, os.path.join(tmp, "other-py"), os.path.join(tmp, "other.npz"), h2=64, text=quick)
        procs += [pn, pp]
        try:
            out, _ = pp.communicate(timeout=90)
            pn.wait(timeout=60)
        except subprocess.TimeoutExpired:
            out = ""
        said = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        err = said[0].get("layout_error", "") if said else ""
        check("tensor 2 'fc2.weight' is [128, 256] there and [64, 256] here" in err,
              "the PyTorch peer of another model: LayoutError naming fc2.weight (%s)" % (err or out.strip()[-300:]))
        log = open(os.path.join(tmp, "p0.log")).read()
        named = [l for l in log.splitlines() if "trains another model" in l]
        check(len(named) == 1 and "tensor 2 'fc2.weight' is [64, 256] there and [128, 256] here" in named[0],
              "... and the node names it once in its log (%s)" % named)
    finally:
        pyswarm.cleanup(procs, tmp)
    return pyswarm.result()


def failed_now():
    return pyswarm.failed > 0


if __name__ == "__main__":
    sys.exit(main())
