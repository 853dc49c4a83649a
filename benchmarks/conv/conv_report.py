#!/usr/bin/env python3
# conv_report.py — the Convolution tables of docs/performance.md from one run: bench_conv's
# Google Benchmark JSON and, where PyTorch is installed, torch_conv_steps.py's JSON.
#
#   build/bin/bench_conv --benchmark_out=conv.json --benchmark_out_format=json
#   /usr/bin/python3 benchmarks/conv/torch_conv_steps.py --json torch.json
#   python3 benchmarks/conv/conv_report.py conv.json [torch.json]
import json
import re
import sys


def load_bench(path):
    """{name without /real_time: (ms, counters)} from Google Benchmark JSON."""
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        out[b["name"].replace("/real_time", "")] = (b["real_time"] * scale, b)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lt = load_bench(sys.argv[1])
    torch = json.load(open(sys.argv[2]))["ms"] if len(sys.argv) > 2 else {}

    print("Training steps (ms per step; ratio = PyTorch eager / LazyTensor, above 1 is faster)\n")
    print("| model | image, batch | cpu_jit | cpu_eager | PyTorch eager | PyTorch / cpu_jit |")
    print("|---|---|---|---|---|---|")
    for model in ("cnn", "resnet"):
        for size, batch in ((8, 32), (28, 64)):
            jit = lt.get(f"TrainStep/{model}/cpu_jit/{size}/{batch}", (None,))[0]
            eager = lt.get(f"TrainStep/{model}/cpu_eager/{size}/{batch}", (None,))[0]
            pt = torch.get(f"TrainStep/{model}/{size}x{size}/batch{batch}")
            fmt = lambda v: f"{v:.3f}" if v is not None else "–"
            ratio = f"{pt / jit:.2f}x" if pt and jit else "–"
            print(f"| {model} | {size}x{size}, {batch} | {fmt(jit)} | {fmt(eager)} | {fmt(pt)} | {ratio} |")

    print("\nConv layers (ms; GFLOP/s in brackets): LazyTensor on cpu_jit, the old im2col + GEMM "
          "(forward only), oneDNN as the host kernels call it, PyTorch eager\n")
    print("| pass | layer | cpu_jit | im2col | oneDNN (TBB split) | oneDNN nchw (OpenMP) | PyTorch |")
    print("|---|---|---|---|---|---|---|")
    layers = sorted({re.match(r"Conv/(\w+)/([^/]+)/", n).groups() for n in lt if n.startswith("Conv/")},
                    key=lambda k: (["forward", "data", "weights"].index(k[0]), k[1]))
    for pass_, layer in layers:
        cells = []
        for impl in ("lt_cpu_jit", "im2col", "onednn_tbb", "onednn_nchw"):
            r = lt.get(f"Conv/{pass_}/{layer}/{impl}")
            cells.append(f"{r[0]:.3f} ({r[1]['flops'] / r[0] / 1e6:.0f})" if r else "–")
        pt = torch.get(f"Conv/{pass_}/{layer}")
        cells.append(f"{pt:.3f}" if pt else "–")
        print(f"| {pass_} | {layer} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
