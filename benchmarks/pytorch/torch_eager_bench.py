#!/usr/bin/python3
"""torch_eager_bench.py — PyTorch eager on the workloads of cpu_jit_bench (same shapes, same
thread count), written as Google Benchmark JSON so tools/roofline.py puts it beside LazyTensor's
figures (docs/performance.md). Needs python3-torch; never run in CI.

  /usr/bin/python3 benchmarks/pytorch/torch_eager_bench.py --threads 2 --out torch.json
"""
import argparse
import json
import os
import platform
import sys
import time


def bench(fn, min_time):
    """Median (wall, process CPU) seconds per call over repeated batches lasting min_time in
    total. CPU time is what the work itself took on a shared machine, where wall time also
    counts the time the process waited for a core; at one thread the two are comparable with
    Google Benchmark's real_time and cpu_time."""
    fn()
    fn()
    reps, t = 1, 0.0
    while True:  # calibrate a batch of about min_time / 10
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time / 10 or reps >= 1 << 20:
            break
        reps *= 2
    samples, cpu = [], []
    end = time.perf_counter() + min_time
    while time.perf_counter() < end or len(samples) < 3:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t0) / reps)
        cpu.append((time.process_time() - c0) / reps)
    samples.sort()
    cpu.sort()
    return samples[len(samples) // 2], cpu[len(cpu) // 2], reps * len(samples)


def workloads(torch):
    """(name, callable) pairs; names are the workload keys tools/roofline.py matches."""
    F = torch.nn.functional

    def data(*shape, lo=-1.0, hi=1.0):
        return torch.empty(*shape).uniform_(lo, hi)

    out = []
    x = data(4 << 20, lo=-4, hi=4)
    out.append(("BM_Chain", lambda: torch.sigmoid(x) * torch.tanh(0.5 * x + 1.0) + x))
    s = data(4096, 1024, lo=-5, hi=5)
    out.append(("BM_Softmax", lambda: torch.softmax(s, 1)))
    out.append(("BM_RowSum", lambda: s.sum(1)))
    out.append(("BM_ColSum", lambda: s.sum(0)))
    out.append(("BM_RowMean", lambda: s.mean(1)))
    out.append(("BM_RowMax", lambda: s.amax(1)))
    ln = data(1024, 768, lo=-2, hi=3)
    g, b = data(768, lo=0.5, hi=1.5), data(768, lo=-0.1, hi=0.1)

    def layernorm_gelu():  # the op sequence of BM_LayerNormGelu, op by op
        mu = ln.mean(1, keepdim=True)
        d = ln - mu
        var = (d * d).mean(1, keepdim=True)
        y = d * torch.rsqrt(var + 1e-5) * g + b
        return F.gelu(y, approximate="tanh")

    out.append(("BM_LayerNormGelu", layernorm_gelu))
    B, I, H, T = 32, 128, 200, 50
    W, U, bias, xl = data(I, 4 * H, lo=-.1, hi=.1), data(H, 4 * H, lo=-.1, hi=.1), \
        data(4 * H, lo=-.1, hi=.1), data(B, I)

    def lstm():
        h, c = torch.zeros(B, H), torch.zeros(B, H)
        for _ in range(T):
            gates = xl @ W + h @ U + bias
            i, f, gg, o = gates.split(H, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h

    out.append(("BM_Lstm", lstm))
    dims = [784, 512, 512, 10]
    ws = [data(dims[i], dims[i + 1], lo=-.05, hi=.05) for i in range(3)]
    bs = [data(dims[i + 1], lo=-.1, hi=.1) for i in range(3)]
    wts = [data(dims[i + 1], dims[i], lo=-.05, hi=.05) for i in range(3)]
    for batch in (1, 8, 64):
        xm = data(batch, 784)

        def mlp(xm=xm):
            h = xm
            for i in range(3):
                h = h @ ws[i] + bs[i]
                if i < 2:
                    h = torch.relu(h)
            return h

        out.append((f"BM_MlpInfer/{batch}", mlp))

        def linear(xm=xm):  # weights [out, in], as nn.Linear stores them
            h = xm
            for i in range(3):
                h = torch.nn.functional.linear(h, wts[i], bs[i])
                if i < 2:
                    h = torch.relu(h)
            return h

        out.append((f"BM_MlpInferLinear/{batch}", linear))
    q, k, v = data(8, 4, 128, 64), data(8, 4, 64, 128), data(8, 4, 128, 64)
    out.append(("BM_Attention", lambda: torch.softmax((q @ k) * 0.125, 3) @ v))
    a, bm = data(1024, 1024), data(1024, 1024)
    out.append(("BM_Matmul", lambda: a @ bm))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--min-time", type=float, default=1.0)
    p.add_argument("--filter", default="")
    p.add_argument("--out", default="-")
    args = p.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("torch_eager_bench: PyTorch is not installed (Debian: python3-torch)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    with torch.no_grad():
        for name, fn in workloads(torch):
            if args.filter and args.filter not in name:
                continue
            sec, cpu, iters = bench(fn, args.min_time)
            rows.append({"name": name, "run_name": name, "run_type": "iteration",
                         "iterations": iters, "real_time": sec * 1e3, "cpu_time": cpu * 1e3,
                         "time_unit": "ms", "label": "pytorch_eager"})
            print(f"{name:24s} {sec * 1e3:10.3f} ms wall {cpu * 1e3:10.3f} ms CPU", file=sys.stderr)
    doc = {"context": {"executable": "torch_eager_bench.py", "torch": torch.__version__,
                       "threads": args.threads, "host_name": platform.node()},
           "benchmarks": rows}
    text = json.dumps(doc, indent=1)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
