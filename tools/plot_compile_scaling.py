#!/usr/bin/env python3
"""Draws bench_compile's JSON as an SVG: compile time (ms) against graph size (nodes), log-log,
one line per backend and graph kind. Standard library only.

  build/bin/bench_compile --benchmark_format=json --benchmark_out=compile.json
  python3 tools/plot_compile_scaling.py compile.json docs/compile-scaling.svg
"""
import json
import math
import sys

W, H, L, R, T, B = 760, 460, 70, 190, 40, 50
COLORS = {"cpu_eager": "#1b9e77", "cpu_jit": "#d95f02", "tpu_sim": "#7570b3", "gpu_opencl": "#e7298a"}
DASH = {"chain": "", "wide": "6,4", "mlp": "2,3"}


def main(src, dst):
    runs = json.load(open(src))["benchmarks"]
    series = {}
    for b in runs:
        kind, _, backend = b["name"].split("/")[:3]
        if b.get("nodes", 0) > 0 and b.get("compile_ms", 0) > 0:
            series.setdefault((backend, kind), []).append((b["nodes"], b["compile_ms"]))
    if not series:
        sys.exit("no runs with nodes and compile_ms in " + src)
    xs = [p[0] for s in series.values() for p in s]
    ys = [p[1] for s in series.values() for p in s]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)
    px = lambda x: L + (math.log10(x) - x0) / (x1 - x0) * (W - L - R)
    py = lambda y: H - B - (math.log10(y) - y0) / (y1 - y0) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="22" font-size="14">Compile time against graph size (bench_compile)</text>']
    for e in range(x0, x1 + 1):
        out.append(f'<line x1="{px(10**e)}" y1="{T}" x2="{px(10**e)}" y2="{H-B}" stroke="#ddd"/>')
        out.append(f'<text x="{px(10**e)}" y="{H-B+16}" text-anchor="middle">{10**e:,}</text>')
    for e in range(y0, y1 + 1):
        out.append(f'<line x1="{L}" y1="{py(10**e)}" x2="{W-R}" y2="{py(10**e)}" stroke="#ddd"/>')
        label = f"{10**e:g}" if e >= 0 else f"{10**e:.{-e}f}"
        out.append(f'<text x="{L-6}" y="{py(10**e)+4}" text-anchor="end">{label}</text>')
    out.append(f'<text x="{(L+W-R)/2}" y="{H-12}" text-anchor="middle">nodes</text>')
    out.append(f'<text x="16" y="{(T+H-B)/2}" transform="rotate(-90 16 {(T+H-B)/2})" '
               f'text-anchor="middle">compile ms</text>')
    ly = T + 6
    for (backend, kind), pts in sorted(series.items()):
        pts.sort()
        color, dash = COLORS.get(backend, "#666"), DASH.get(kind, "")
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2" '
                   f'stroke-dasharray="{dash}"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"/>')
        out.append(f'<line x1="{W-R+12}" y1="{ly}" x2="{W-R+40}" y2="{ly}" stroke="{color}" '
                   f'stroke-width="2" stroke-dasharray="{dash}"/>')
        out.append(f'<text x="{W-R+46}" y="{ly+4}">{backend} {kind}</text>')
        ly += 18
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
