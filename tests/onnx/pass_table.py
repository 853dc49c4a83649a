#!/usr/bin/env python3
"""pass_table.py — the pass table of docs/onnx.md: runs `lt-onnx test` over the ONNX backend
test suite on each backend and prints per suite and per op category the cases passed, failed
and skipped (out of scope). A case's op is the longest ai.onnx op name its folder name starts
with (test_reduce_log_sum_exp_* -> ReduceLogSumExp).

usage: tests/onnx/pass_table.py [build/bin/lt-onnx] [/usr/share/libonnx-testdata/data]"""
import re
import subprocess
import sys

LT_ONNX = sys.argv[1] if len(sys.argv) > 1 else "build/bin/lt-onnx"
DATA = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
BACKENDS = [("cpu_eager", []), ("cpu_jit", []), ("tpu_sim", ["--rtol", "1e-2", "--atol", "5e-3"])]

CATEGORIES = {
    "elementwise math and activations": "Abs Neg Exp Log Sqrt Tanh Sigmoid Relu Sin Cos Tan Floor Ceil Round Erf Softplus Softsign Reciprocal Sinh Cosh Asinh Acosh Atanh Atan Asin Acos Sign Elu Celu Selu LeakyRelu ThresholdedRelu HardSigmoid HardSwish Shrink PRelu Clip Add Sub Mul Div Pow Mod BitShift Max Min Sum Mean",
    "comparison and logic": "Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Not Where IsNaN IsInf",
    "casts": "Cast CastLike",
    "reductions, arg/top-k, cumsum": "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin TopK CumSum",
    "matmul, gemm, einsum, det": "MatMul Gemm Einsum MatMulInteger Det",
    "convolution and pooling": "Conv ConvTranspose ConvInteger MaxPool AveragePool GlobalMaxPool GlobalAveragePool LpPool MaxUnpool BasicConv",
    "normalization": "BatchNorm InstanceNorm LayerNormalization LRN MVN",
    "softmax family and losses": "Softmax LogSoftmax Hardmax NLLLoss SCE",
    "layout": "Reshape Flatten Transpose Squeeze Unsqueeze Concat Split Slice Pad ConstantPad EdgePad ReflectPad Tile Expand DepthToSpace SpaceToDepth Compress ReverseSequence Tril Triu OneHot EyeLike",
    "gather and scatter": "Gather GatherElements GatherND Scatter ScatterElements ScatterND GridSample",
    "resize": "Resize Upsample",
    "recurrent": "RNN SimpleRNN GRU LSTM",
    "shapes and constants": "Shape Size Constant ConstantOfShape Range Identity Dropout",
    "quantization": "QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearConv QLinearMatMul",
    "signal": "DFT STFT HannWindow HammingWindow BlackmanWindow MelWeightMatrix",
    "text (int n-grams)": "TfIdfVectorizer",
    "control flow": "If Loop Scan",
    "random": "Bernoulli TrainingDropout",
    "data-dependent output shape": "NonMaxSuppression NonZero Unique RoiAlign",
}
OPS = {}
for cat, ops in CATEGORIES.items():
    for op in ops.split():
        OPS[op.lower()] = cat


def category(suite, case):
    if suite != "node":
        return suite + " models"
    key = case[len("test_"):].replace("_", "").lower()
    best = ""
    for op in OPS:
        if key.startswith(op) and len(op) > len(best):
            best = op
    return OPS.get(best, "other")


def run(backend, extra):
    out = subprocess.run([LT_ONNX, "test"] + [f"{DATA}/{s}" for s in SUITES] +
                         ["--device", backend] + extra, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"(PASS|FAIL|SKIP) (\S+):", line)
        if m:
            res[m.group(2)] = m.group(1)
    return res


def main():
    suite_of = {}
    import os
    for s in SUITES:
        for case in os.listdir(f"{DATA}/{s}"):
            suite_of[case] = s
    results = {b: run(b, extra) for b, extra in BACKENDS}
    rows = {}
    for case, suite in suite_of.items():
        key = (suite if suite != "node" else "node", category(suite, case))
        row = rows.setdefault(key, {b: [0, 0, 0] for b, _ in BACKENDS})
        for b, _ in BACKENDS:
            r = results[b].get(case, "FAIL")
            row[b]["PASS FAIL SKIP".split().index(r)] += 1
    print("| suite | category | cases | " + " | ".join(f"{b} pass / in scope" for b, _ in BACKENDS) + " |")
    print("|---|---|---|" + "---|" * len(BACKENDS))
    totals = {}
    for (suite, cat), row in sorted(rows.items()):
        n = sum(row[BACKENDS[0][0]])
        cells = []
        for b, _ in BACKENDS:
            p, f, s = row[b]
            cells.append(f"{p} / {p + f}" + (f" ({s} out of scope)" if s else ""))
            t = totals.setdefault((suite, b), [0, 0, 0])
            for i in range(3):
                t[i] += row[b][i]
        print(f"| {suite} | {cat} | {n} | " + " | ".join(cells) + " |")
    for suite in SUITES:
        cells = []
        for b, _ in BACKENDS:
            p, f, s = totals[(suite, b)]
            cells.append(f"**{p} / {p + f}** ({100.0 * p / max(p + f, 1):.1f}%)")
        n = sum(totals[(suite, BACKENDS[0][0])])
        print(f"| **{suite}** | all | {n} | " + " | ".join(cells) + " |")


main()
