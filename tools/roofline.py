#!/usr/bin/env python3
"""roofline.py — one roofline table for LazyTensor's benchmarks (issue #26, docs/performance.md).

Runs benchmark programs (--run) or reads their Google Benchmark JSON (positional files), and
prints per benchmark its time, achieved GFLOP/s and GB/s, the roofline time
max(flops / sgemm rate, bytes / bandwidth) from the limits that program measured in the same
run (benchmarks/common/roofline.h; the bandwidth is a triad's at the benchmark's footprint), the fraction of the roofline reached, and, where a PyTorch
eager JSON is given (--torch, from benchmarks/pytorch/torch_eager_bench.py), PyTorch's time for
the same workload and LazyTensor's time over it.

  tools/roofline.py --run build/bin/cpu_jit_bench --torch torch.json --markdown
  tools/roofline.py cpu_jit.json cpu_eager.json
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

DEVICES = ("cpu_eager", "cpu_jit", "tpu_sim", "gpu_opencl")
UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def workload_key(row):
    """The workload a row measures, without its device argument: the key shared with the
    PyTorch script (BM_Softmax/1 labelled cpu_jit -> BM_Softmax; BM_MlpInfer/0/8 -> BM_MlpInfer/8)."""
    parts = [p for p in row["run_name"].split("/")
             if p not in ("real_time", "manual_time") and ":" not in p]
    if row.get("label") in DEVICES and len(parts) > 1 and parts[1] in ("0", "1", "2", "3"):
        del parts[1]
    return "/".join(parts)


def load(path):
    with open(path) as f:
        doc = json.load(f)
    rows = [r for r in doc.get("benchmarks", []) if r.get("run_type", "iteration") == "iteration"
            and "error_occurred" not in r]
    return doc.get("context", {}), rows


def run(binary, extra):
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [binary, "--benchmark_out=" + path, "--benchmark_out_format=json"] + extra
    print("roofline.py: running " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    try:
        return load(path)
    finally:
        os.unlink(path)


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the table quietly
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", nargs="*", help="Google Benchmark JSON files")
    p.add_argument("--run", action="append", default=[], help="benchmark program to run")
    p.add_argument("--args", default="", help="extra arguments for --run programs")
    p.add_argument("--torch", help="JSON of benchmarks/pytorch/torch_eager_bench.py")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--all", action="store_true", help="also rows without a roofline")
    p.add_argument("--clock", choices=("real", "cpu"), default="real",
                   help="cpu: compare CPU time against limits measured in CPU time (runs at "
                        "LT_BENCH_THREADS=1 on a shared machine, where wall time also counts "
                        "waiting for a core)")
    a = p.parse_args()
    if not a.json and not a.run:
        p.error("give benchmark JSON files or --run PROGRAM")
    sources = [load(f) for f in a.json] + [run(b, a.args.split()) for b in a.run]
    torch = {}
    if a.torch:
        _, trows = load(a.torch)
        torch = {r["name"]: r[a.clock + "_time"] * UNIT_MS[r.get("time_unit", "ms")]
                 for r in trows}
    head = ["benchmark", "backend", "time ms", "GFLOP/s", "GB/s", "roofline ms", "of roofline",
            "sgemm GFLOP/s", "triad GB/s at footprint", "PyTorch ms", "/ PyTorch"]
    table, limits = [], set()
    for _, rows in sources:
        for r in rows:
            if "of_roofline" not in r and not a.all:
                continue
            ms = r[a.clock + "_time"] * UNIT_MS[r.get("time_unit", "ns")]
            # Rate counters are per second of the benchmark's own clock (wall with UseRealTime or
            # manual time, else the main thread's CPU); rescale them to the clock compared.
            own = "real" if ("/real_time" in r["name"] or "/manual_time" in r["name"]) else "cpu"
            scale = r[own + "_time"] / r[a.clock + "_time"] if r[a.clock + "_time"] else 1.0
            key = workload_key(r)
            t = torch.get(key) if r.get("label") in DEVICES else None
            if "sgemm_GFLOPs" in r:
                limits.add((round(r["sgemm_GFLOPs"]), round(r.get("dram_GBps", 0), 1)))
            cpu = a.clock == "cpu"
            roof_us = r.get("roofline_cpu_us" if cpu else "roofline_us")
            sgemm = r.get("sgemm_cpu_GFLOPs" if cpu else "sgemm_GFLOPs")
            triad = r.get("triad_cpu_GBps" if cpu else "triad_GBps")
            table.append([key, r.get("label", ""), fmt(ms, ".3f"),
                          fmt(r["GFLOPs"] * scale if "GFLOPs" in r else None, ".1f"),
                          fmt(r["GBps"] * scale if "GBps" in r else None, ".1f"),
                          fmt(roof_us * 1e-3 if roof_us is not None else None, ".3f"),
                          fmt(roof_us * 1e-3 / ms if roof_us is not None and ms else None, ".2f"),
                          fmt(sgemm, ".0f"), fmt(triad, ".1f"),
                          fmt(t, ".3f"), fmt(ms / t if t else None, ".2f")])
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" for _ in head) + "|")
        for row in table:
            print("| " + " | ".join(row) + " |")
    else:
        w = [max(len(h), *(len(r[i]) for r in table)) if table else len(h)
             for i, h in enumerate(head)]
        print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
        for row in table:
            print("  ".join(c.ljust(w[i]) for i, c in enumerate(row)))
    if len(limits) > 1:
        print("roofline.py: the programs measured different limits (load changed between "
              "them): " + ", ".join(f"{s} GFLOP/s, {b} GB/s" for s, b in sorted(limits)),
              file=sys.stderr)


if __name__ == "__main__":
    main()
