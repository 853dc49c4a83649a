// attention.hpp — fused attention on the host: softmax(Q·K · scale + mask) · V computed a block
// of query rows at a time (single-threaded OpenBLAS sgemm on the block, the softmax on rows that
// stay in L1/L2), so the [batch, queries, keys] score and probability tensors are never
// written. The matcher finds the pattern in a graph (matmul, reshapes, an optional scale and
// additive mask, softmax over the keys, matmul) for the executors that run host steps: cpu_eager
// and cpu_jit (lazytensor/host/steps.hpp StepProgram::add_attention).
#pragma once

#include <cstdint>
#include <vector>

#include "lazytensor/lower/kernel_plan.hpp"
#include "lazytensor/lt_plugin.h"

namespace lt::host {

// One occurrence of the pattern in a validated graph, by node index (the same indices serve
// every size of a dynamic graph; the sizes are read from the graph when the step is added).
struct AttentionMatch {
  int32_t output = -1;                    // the P·V matmul, [batch, queries, dv] (or rank 2)
  int32_t q = -1, k = -1, v = -1;         // the values read: Q [b, m, d], K [b, d, n], V [b, n, dv]
  bool trans_k = false, trans_v = false;  // K stored [b, n, d] / V stored [b, dv, n]
  int32_t scale = -1;                     // a one-element f32 value, or -1
  bool scale_divides = false;             // scores / scale instead of scores * scale
  // where(cond, scores, fill) after the scale: a bool value broadcast to the scores and a
  // one-element f32 value (a causal mask as lt::models::Gpt writes it), or -1.
  int32_t cond = -1, fill = -1;
  int32_t mask = -1;              // an f32 value added last, or -1
  std::vector<int32_t> interior;  // nodes the fused step replaces (ascending)
};

// Every occurrence, each node in at most one. A node is interior only when nothing else reads
// it and it is no graph output (an attention whose probabilities a backward pass reads is left
// alone); every value is f32; softmax is over the keys axis. The scale may be either operand of
// a mul (or the divisor of a div), the mask either operand of an add whose other operand is the
// (scaled, selected) scores, broadcast to the scores' shape.
std::vector<AttentionMatch> find_attention(const lt_graph& graph);

// Whether softmax node `softmax` is interior to a match of find_attention (for a backend that
// takes such a softmax whole and declines the others). O(1) for a softmax not fed by a matmul
// through reshapes, a scale and a mask; otherwise one find_attention over the graph.
bool in_attention(const lt_graph& graph, size_t softmax);

// The attentions a kernel planner's steps (lazytensor/lower/kernel_plan.hpp) can run fused: a
// match whose interior nodes' steps compute nothing else (but a constant `full` scale that no
// other step reads) and whose other operands have buffers. For a backend that runs the plan's
// host steps through StepProgram (cpu_jit): skip step s where `replaced[s]`; where at[s] >= 0,
// add_attention(matches[at[s]]) instead of step s (the final matmul's host step).
struct PlannedAttention {
  std::vector<AttentionMatch> matches;
  std::vector<char> replaced;  // per step
  std::vector<int32_t> at;     // per step
};
PlannedAttention plan_attention(const lt_graph& graph, const lower::KernelPlan& plan);

// The sizes of a match in one graph: `batch` products of [m, d]·[d, n], softmax over n, then
// [m, n]·[n, dv]; the mask's element strides (0 where broadcast) for each leading score dim,
// for the query axis and for the keys axis.
struct AttentionDims {
  int64_t batch = 1, m = 0, n = 0, d = 0, dv = 0;
  bool trans_k = false, trans_v = false;
  bool scale_divides = false;
  std::vector<int64_t> lead;         // the scores' leading dims (their product is batch)
  std::vector<int64_t> mask_stride;  // per leading dim
  int64_t mask_si = 0, mask_sj = 0;
  std::vector<int64_t> cond_stride;  // the same for `cond`
  int64_t cond_si = 0, cond_sj = 0;
};
AttentionDims attention_dims(const lt_graph& graph, const AttentionMatch& match);

// out[b] = softmax(where(cond[b], q[b]·k[b] ∘ scale, fill) + mask[b]) · v[b] with the
// decomposition's element semantics: the product rounded to f32, then multiplied (divided) by
// *scale, then `fill` where cond is 0, then the mask added, each in f32; a softmax row holding
// NaN, +inf or only -inf gives the softmax kernel's NaN row. `scale`, `mask` and `cond` (bytes,
// 0 or 1) may be null. Threads over (batch, query block) on TBB, each a single-threaded
// OpenBLAS call (the one thread budget).
void attention(const AttentionDims& dims, const float* q, const float* k, const float* v,
               const float* scale, const float* mask, float* out, const uint8_t* cond = nullptr,
               float fill = 0);

}  // namespace lt::host
