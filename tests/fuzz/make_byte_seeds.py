#!/usr/bin/env python3
"""make_byte_seeds.py — writes the seeds of lt_fuzz_ops (corpus/ops/) and lt_fuzz_graph
(corpus/graph/) in the byte encodings of fuzz_ops.cpp and fuzz_graph.cpp:
python3 tests/fuzz/make_byte_seeds.py tests/fuzz/corpus"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
DEF = os.path.join(ROOT, "..", "..", "core", "include", "lazytensor", "lt_ops.def")
ROWS = [m.group(1) for m in re.finditer(r'^LT_OP\(\s*\w+,\s*"(\w+)"', open(DEF).read(), re.M)]
DT = {"f32": 0, "f64": 1, "i32": 2, "i64": 3, "bool": 4, "bf16": 5, "f16": 6}
FL = {0.0: 0, 1.0: 1, -1.0: 2, 0.5: 3, 2.0: 4}  # indices into Reader::float_value's table
FULL, ARANGE, RANDOM, HOST, APPLY, READ, SYNC, BACKWARD, FREE = 0, 2, 3, 4, 5, 8, 9, 10, 11


def shape(dims):
    return [len(dims)] + list(dims)  # dims 0..4


def full(dims, value=1.0, dtype="f32"):
    return [FULL] + shape(dims) + [FL[value], DT[dtype]]


def apply(op, inputs, attrs=()):
    """attrs: one entry per attribute spec of the row: None (default) or a list of bytes."""
    out = [APPLY, ROWS.index(op), 0, 0] + list(inputs)
    for a in attrs:
        out += [0] if a is None else [1] + a
    return out + [0]


SEEDS = {
    "add": full([2, 3]) + full([2, 3], 2.0) + apply("add", [0, 1]) + [READ, 2],
    "matmul_backward": full([2, 3]) + full([3, 2], 0.5) + apply("matmul", [0, 1])
    + [BACKWARD, 2, READ, 2],
    "reshape": [ARANGE, 0, 4, 1, DT["f32"]] + apply("reshape", [0], [shape([2, 2])]) + [READ, 1],
    "conv2d": full([1, 1, 4, 4]) + full([1, 1, 2, 2], 0.5) + apply("conv2d", [0, 1]) + [SYNC],
    "sum_axes": full([2, 3, 4]) + apply("sum", [0], [[1, 1], [1]]) + [READ, 1],
    "softmax": [RANDOM] + shape([3, 4]) + [7, FL[0.0], FL[1.0], DT["f32"], 0]
    + apply("softmax", [0]) + [FREE, 0, SYNC],
    "host_gather": [HOST] + shape([4]) + [DT["i32"]] + [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0]
    + full([5, 2]) + apply("gather", [1, 0], [None]) + [READ, 2],
    "cast_bf16": full([3], 0.5, "f64") + apply("cast", [0], [[DT["bf16"]]]) + [READ, 1],
}



def node(op, dtype, dims, operands=(), attrs=(), role=0):
    """role: 1 graph input, 2 graph output. attrs: (name index, kind 0..3, int byte, ints)."""
    out = [ROWS.index(op), DT[dtype]] + shape(dims) + [0, len(operands)] + list(operands)
    out += [len(attrs)]
    for name, kind, i, ints in attrs:
        out += [name, kind, i, 0, len(ints)] + list(ints) + [0]
    return out + [role]


def graph(*nodes, data=()):
    return [len(nodes)] + [b for n in nodes for b in n] + [0] * 8 + list(data)


GRAPHS = {
    "add": graph(node("input", "f32", [2, 3], role=1), node("input", "f32", [2, 3], role=1),
                 node("add", "f32", [2, 3], [0, 1], role=2), data=range(48)),
    "sum": graph(node("input", "f32", [2, 3], role=1),
                 node("sum", "f32", [2], [0], [(1, 2, 1, [1])], role=2), data=[0] * 24),
    "matmul": graph(node("input", "f32", [2, 3], role=1), node("input", "f32", [3, 4], role=1),
                    node("matmul", "f32", [2, 4], [0, 1], role=2), data=[0x3f] * 80),
    "bad_operand": graph(node("input", "f32", [2], role=1), node("neg", "f32", [2], [1], role=2)),
}

root = sys.argv[1]
for sub, seeds in (("ops", SEEDS), ("graph", GRAPHS)):
    os.makedirs(os.path.join(root, sub), exist_ok=True)
    for name, prog in seeds.items():
        with open(os.path.join(root, sub, name + ".bin"), "wb") as f:
            f.write(bytes(prog))
