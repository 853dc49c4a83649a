# fashion_mnist_torch.py — time to 92% Fashion-MNIST test accuracy: PyTorch eager against
# lt-run (one process, and two MPI processes) on the same ResNet, optimiser, batch and init.
#
# Never run in CI (PyTorch is not a dependency). Usage, from a build tree:
#   /usr/bin/python3 benchmarks/train/fashion_mnist_torch.py --lt-run build/bin/lt-run
# Options: --epochs N (the most to train), --batch, --lr, --lr-decay, --target 0.92, --threads
# (default: every core, as lt-run's thread budget), --train-rows / --test-rows N (the first N
# only: a quick comparison of epoch times), --skip-torch / --skip-lt / --skip-mpi.
#
# The network is lt-run's `--model resnet` at 28x28 (lazytensor/models/resnet.hpp, lt-run's
# ResNetImages): a 3x3 stem at full resolution to 16 channels, group norm (4 groups), relu, a 2x2
# max pool; one basic block per stage at 14x14 (16 channels, --channels), 7x7 (32, stride 2 with
# a 1x1 projection) and 4x4 (64, the same); global average pooling; a linear layer to 10
# classes. Convolutions have no bias and are drawn kaiming-uniform (bound sqrt(6 / fan_in)); the
# linear layer the same, its bias uniform in +-1/sqrt(fan_in); group norm starts at gamma 1,
# beta 0. Adam (0.9, 0.999, 1e-8), no weight decay, the learning rate times --lr-decay after
# every epoch; pixels scaled to [0, 1] and standardised by one mean and deviation of the
# training set; the training set reshuffled every epoch, the last partial batch kept; with
# --augment flip (as lt-run's) each training image mirrored left-right with probability 1/2.
import argparse
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

DATA = "/usr/share/datasets/fashion-mnist"


def load_idx(path, rank):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    if magic != 0x800 | rank:
        sys.exit(f"{path}: not an idx file of rank {rank}")
    dims = struct.unpack(">" + "I" * rank, raw[4:4 + 4 * rank])
    return dims, raw[4 + 4 * rank:]


def load(split):
    import numpy as np
    import torch
    (n, r, c), px = load_idx(f"{DATA}/{split}-images-idx3-ubyte.gz", 3)
    (m,), lb = load_idx(f"{DATA}/{split}-labels-idx1-ubyte.gz", 1)
    x = torch.from_numpy(np.frombuffer(px, np.uint8).reshape(n, 1, r, c).astype(np.float32) / 255)
    y = torch.from_numpy(np.frombuffer(lb, np.uint8).astype(np.int64))
    return x, y


def resnet(width=16):
    import math
    import torch.nn as nn

    def conv(i, o, k, s):
        m = nn.Conv2d(i, o, k, s, k // 2, bias=False)
        nn.init.kaiming_uniform_(m.weight, nonlinearity="relu")
        return m

    class Block(nn.Module):
        def __init__(self, i, o, s):
            super().__init__()
            self.c1, self.n1 = conv(i, o, 3, s), nn.GroupNorm(4, o)
            self.c2, self.n2 = conv(o, o, 3, 1), nn.GroupNorm(4, o)
            self.proj = nn.Sequential(conv(i, o, 1, s), nn.GroupNorm(4, o)) if s != 1 or i != o \
                else nn.Identity()

        def forward(self, x):
            h = self.n1(self.c1(x)).relu()
            return (self.n2(self.c2(h)) + self.proj(x)).relu()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            w = width
            self.stem = nn.Sequential(conv(1, w, 3, 1), nn.GroupNorm(4, w), nn.ReLU(),
                                      nn.MaxPool2d(2))
            self.blocks = nn.Sequential(Block(w, w, 1), Block(w, 2 * w, 2), Block(2 * w, 4 * w, 2))
            self.fc = nn.Linear(4 * w, 10)
            nn.init.kaiming_uniform_(self.fc.weight, nonlinearity="relu")
            nn.init.uniform_(self.fc.bias, -1 / math.sqrt(4 * w), 1 / math.sqrt(4 * w))

        def forward(self, x):
            return self.fc(self.blocks(self.stem(x)).mean((2, 3)))

    return Net()


def train_torch(a):
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    x, y = load("train")
    tx, ty = load("t10k")
    if a.train_rows:
        x, y = x[:a.train_rows], y[:a.train_rows]
    if a.test_rows:
        tx, ty = tx[:a.test_rows], ty[:a.test_rows]
    mean, std = x.mean(), x.std()
    x, tx = (x - mean) / std, (tx - mean) / std
    net = resnet(a.channels)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=a.lr_decay)
    lossf = torch.nn.CrossEntropyLoss()
    trained, trained_cpu, curve, to_target = 0.0, 0.0, [], None
    for epoch in range(1, a.epochs + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        net.train()
        order = torch.randperm(len(y))
        total = 0.0
        for b in range(0, len(y), a.batch):
            idx = order[b:b + a.batch]
            xb = x[idx]
            if a.augment == "flip":
                xb = torch.where(torch.rand(len(idx), 1, 1, 1) < 0.5, xb.flip(3), xb)
            loss = lossf(net(xb), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        trained += time.perf_counter() - t0
        trained_cpu += time.process_time() - c0  # CPU time: what a loaded machine disturbs least
        net.eval()
        with torch.no_grad():
            acc = sum((net(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum().item()
                      for i in range(0, len(ty), 1000)) / len(ty)
        curve.append({"epoch": epoch, "train_loss": total / len(y), "test_accuracy": acc,
                      "train_seconds": trained, "train_cpu_seconds": trained_cpu})
        print(f"torch epoch {epoch}: loss {total / len(y):.4f} test {100 * acc:.2f}% "
              f"({trained:.1f} s trained, {trained_cpu:.1f} s CPU)", flush=True)
        if acc >= a.target:
            to_target = trained
            break
    return {"curve": curve, "seconds_to_target": to_target}


def run_lt(a, mpi):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "m.json")
        cmd = [a.lt_run, "--data", "fashion-mnist", "--model", "resnet", "--device", a.device,
               "--epochs", str(a.epochs), "--batch", str(a.batch), "--lr", str(a.lr),
               "--lr-decay", str(a.lr_decay), "--augment", a.augment,
               "--channels", str(a.channels),
               "--target-accuracy", str(a.target), "--metrics-json", out]
        if a.train_rows:
            cmd += ["--train-rows", str(a.train_rows)]
        if a.test_rows:
            cmd += ["--test-rows", str(a.test_rows)]
        if mpi:
            root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
            cmd = ["mpirun", "--oversubscribe", "-np", "2"] + root + cmd + ["--distributed"]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        with open(out) as f:
            m = json.load(f)
    return {"curve": m.get("curve", []), "seconds_to_target": m.get("seconds_to_target"),
            "steady_ms_per_step": m.get("steady_ms_per_step")}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--lt-run", default="build/bin/lt-run")
    p.add_argument("--device", default="cpu_jit")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--lr-decay", type=float, default=0.85)
    p.add_argument("--target", type=float, default=0.92)
    p.add_argument("--augment", choices=["none", "flip"], default="flip")
    p.add_argument("--channels", type=int, default=16, help="first stage's width (lt-run's)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--train-rows", type=int, default=0)
    p.add_argument("--test-rows", type=int, default=0)
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--skip-lt", action="store_true")
    p.add_argument("--skip-mpi", action="store_true")
    p.add_argument("--json", help="write every result here")
    a = p.parse_args()
    res = {}
    if not a.skip_torch:
        res["pytorch_eager"] = train_torch(a)
    if not a.skip_lt:
        res["lazytensor"] = run_lt(a, False)
    if not a.skip_mpi:
        res["lazytensor_2_mpi"] = run_lt(a, True)
    print(f"\ntime to {100 * a.target:.0f}% test accuracy (training only, evaluation excluded):")
    for k, v in res.items():
        t = v["seconds_to_target"]
        best = max((c["test_accuracy"] for c in v["curve"]), default=0)
        print(f"  {k:18s} " + (f"{t:8.1f} s" if t is not None else "not reached") +
              f"  (best {100 * best:.2f}% in {len(v['curve'])} epochs)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
