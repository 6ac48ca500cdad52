#!/usr/bin/python3
"""A PyTorch CNN of one's own, trained by a swarm on Fashion-MNIST: every peer trains on its
share of the data and rumor averages the model (diloco by default) over encrypted links.

    rumor sim --exec "python3 $PWD/examples/fashion_cnn.py" --peers 4 --algo diloco:25 --rounds 40

`rumor sim --exec` starts one process of this script per peer, with its settings in
RUMOR_SETTINGS (keys, addresses, algo, rounds) and its rank in RUMOR_RANK. The script checkpoints
the model, its optimizer and the peer's state every round (checkpoint.pt in its run folder) and
resumes from it when it is started again (a restart after a crash). Each round it reports the
test accuracy, which rumor sim's status line and summary.json show.
"""
import argparse
import gzip
import os

import numpy as np
import torch

import rumor
import rumor.torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3)
        self.conv2 = torch.nn.Conv2d(8, 16, 3)
        self.fc1 = torch.nn.Linear(16 * 5 * 5, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def load(d):
    """Fashion-MNIST's IDX files (Debian's dataset-fashion-mnist), normalised."""
    x = idx(os.path.join(d, "train-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28)
    y = idx(os.path.join(d, "train-labels-idx1-ubyte.gz"), 8)
    tx = idx(os.path.join(d, "t10k-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28)
    ty = idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz"), 8)
    f = lambda a: torch.from_numpy((a.astype(np.float32) / 255.0 - 0.286) / 0.353)  # noqa: E731
    return f(x), torch.from_numpy(y.astype(np.int64)), f(tx), torch.from_numpy(ty.astype(np.int64))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--test", type=int, default=2000, help="test samples evaluated each round")
    a = ap.parse_args()
    rank, peers = int(os.environ.get("RUMOR_RANK", 0)), int(os.environ.get("RUMOR_PEERS", 1))
    torch.set_num_threads(int(os.environ.get("RUMOR_THREADS", 1)))
    x, y, tx, ty = load(a.data)
    x, y = x[rank::peers], y[rank::peers]  # this peer's share, which never leaves it
    tx, ty = tx[:a.test], ty[:a.test]
    torch.manual_seed(1)                   # one initial model on every peer
    model = Net()
    inner = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank + 1000 * int(os.environ.get("RUMOR_RESTARTS", 0)))
    ckpt = "checkpoint.pt"
    with rumor.Peer.from_env() as peer:
        opt = rumor.torch.Optimizer(model, inner, peer, resume=ckpt if os.path.exists(ckpt) else None)
        seen = None
        while True:
            batch = torch.randint(0, len(x), (a.batch,), generator=g)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            opt.step(loss=loss)             # the local step; the gossip round when one is due
            r = opt.last_round
            if r is None or r is seen:
                continue
            seen = r                        # a round was mixed: evaluate, checkpoint
            with torch.no_grad():
                out = model(tx)
                acc = float((out.argmax(1) == ty).float().mean())
                peer.evaluated(test_acc=acc, test_loss=float(torch.nn.functional.cross_entropy(out, ty)))
            opt.save(ckpt)
            if r.finished:
                break
    print("peer %d: test accuracy %.4f after %d rounds" % (rank, acc, r.round))


if __name__ == "__main__":
    main()
