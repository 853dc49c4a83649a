#!/usr/bin/python3
# torch_conv_steps.py — PyTorch eager beside bench_conv: the same training steps (lt-run's cnn
# and resnet, Adam, one-hot cross entropy) and conv layer shapes, at the same thread count, so
# docs/performance.md can put the two side by side. Needs python3-torch (never installed in CI).
#
#   /usr/bin/python3 benchmarks/conv/torch_conv_steps.py [--threads 2] [--json out.json]
#
# Prints one line per benchmark (median ms over repetitions) and optionally writes
# {"name": ms, ...} with the names bench_conv uses, for tools/conv_report.py.
import argparse
import json
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_conv_steps.py: PyTorch is not installed (Debian: python3-torch)")


class Cnn(nn.Module):
    """lt-run's cnn: conv3x3(1->8, pad 1) -> relu -> maxpool 2 -> linear 10."""

    def __init__(self, size):
        super().__init__()
        self.size = size
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.fc = nn.Linear(8 * (size // 2) * (size // 2), 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc(h.reshape(x.shape[0], -1))


class Block(nn.Module):
    """lt::models::BasicBlock: two 3x3 convs with group norm, identity or 1x1 shortcut."""

    def __init__(self, cin, cout, stride, groups):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Conv2d(cin, cout, 1, stride, 0, bias=False)
            self.proj_norm = nn.GroupNorm(groups, cout)

    def forward(self, x):
        h = F.relu(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        s = self.proj_norm(self.proj(x)) if self.proj is not None else x
        return F.relu(h + s)


class ResNet(nn.Module):
    """lt::models::ResNet at its defaults: width 16, blocks {1, 2}, 4 groups."""

    def __init__(self, width=16, blocks=(1, 2), groups=4, stem_pool=False):
        super().__init__()
        self.stem = nn.Conv2d(1, width, 3, 1, 1, bias=False)
        self.stem_norm = nn.GroupNorm(groups, width)
        self.stem_pool = stem_pool
        layers = []
        for s, n in enumerate(blocks):
            for b in range(n):
                down = s > 0 and b == 0
                out = width * 2 if down else width
                layers.append(Block(width, out, 2 if down else 1, groups))
                width = out
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(width, 10)

    def forward(self, x):
        h = F.relu(self.stem_norm(self.stem(x)))
        if self.stem_pool:
            h = F.max_pool2d(h, 2)
        return self.fc(self.blocks(h).mean((2, 3)))


CLOCK = time.perf_counter  # --cpu-time: time.process_time (all threads' CPU time)


def timed(fn, min_time):
    """Median ms of repetitions of `fn` after a warm-up, at least min_time seconds in all."""
    for _ in range(3):
        fn()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < 5:
        t = CLOCK()
        fn()
        times.append((CLOCK() - t) * 1e3)
    return statistics.median(times)


def train_step(model_name, size, batch, min_time):
    torch.manual_seed(0)
    if model_name == "cnn":
        model = Cnn(size)
    elif model_name == "resnet_fashion":  # lt-run's Fashion-MNIST network (stem, pool, 3 stages)
        model = ResNet(blocks=(1, 1, 1), stem_pool=True)
    else:
        model = ResNet()
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    x = torch.randn(batch, 1, size, size)
    y = F.one_hot(torch.arange(batch) % 10, 10).float()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return timed(step, min_time)


def conv_layer(pass_, n, c, o, k, s, hw, min_time):
    torch.manual_seed(0)
    x = torch.randn(n, c, hw, hw, requires_grad=pass_ == "data")
    w = torch.randn(o, c, k, k, requires_grad=pass_ == "weights")
    pad = k // 2
    if pass_ == "forward":
        with torch.no_grad():
            return timed(lambda: F.conv2d(x, w, None, s, pad), min_time)
    y = F.conv2d(x, w, None, s, pad)
    g = torch.randn_like(y)
    target = x if pass_ == "data" else w
    return timed(lambda: torch.autograd.grad(F.conv2d(x, w, None, s, pad), target, g), min_time)


# Shared with bench_conv (ConvBenchmark.cpp): (N, C, O, K, stride, H=W).
LAYERS = [
    (64, 1, 8, 3, 1, 28), (64, 8, 16, 3, 1, 14), (64, 8, 16, 3, 2, 28),
    (32, 64, 64, 3, 1, 16), (1, 64, 64, 3, 1, 16), (32, 64, 64, 1, 1, 16),
    (8, 256, 256, 3, 1, 8), (8, 256, 256, 1, 2, 8), (256, 8, 16, 3, 1, 14),
]
STEPS = [("cnn", 8, 32), ("resnet", 8, 32), ("cnn", 28, 64), ("resnet", 28, 64),
         ("resnet_fashion", 28, 128)]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds per benchmark")
    ap.add_argument("--json", help="write {name: ms} here")
    ap.add_argument("--steps-only", action="store_true")
    ap.add_argument("--cpu-time", action="store_true",
                    help="CPU time of the process instead of wall time (a loaded machine)")
    a = ap.parse_args()
    global CLOCK
    if a.cpu_time:
        CLOCK = time.process_time
    torch.set_num_threads(a.threads)
    out = {}
    for m, size, batch in STEPS:
        name = f"TrainStep/{m}/{size}x{size}/batch{batch}"
        out[name] = train_step(m, size, batch, a.min_time)
        print(f"{name:40s} {out[name]:9.3f} ms", flush=True)
    if not a.steps_only:
        for pass_ in ("forward", "data", "weights"):
            for n, c, o, k, s, hw in LAYERS:
                name = f"Conv/{pass_}/N{n}_C{c}_O{o}_K{k}_S{s}_HW{hw}"
                out[name] = conv_layer(pass_, n, c, o, k, s, hw, a.min_time)
                print(f"{name:40s} {out[name]:9.3f} ms", flush=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": a.threads, "ms": out}, f, indent=1)


if __name__ == "__main__":
    main()
