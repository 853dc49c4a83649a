// kernels.hpp — the shared host kernels (LazyTensor::host_kernels): the reference
// implementation of the ops of lt_ops.def over dense host buffers, used by cpu_eager for every
// node, by tpu_sim for what is not its matrix unit and by cpu_jit for what it does not
// generate; and the pieces those backends call directly: the one GEMM entry point with its one
// thread policy, convolution (oneDNN, im2col), bf16 rounding, the TBB threshold policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "lazytensor/lt_plugin.h"

namespace lt::host {

// Highest rank a kernel accepts (fixed-size index arrays).
constexpr int kMaxRank = 16;

// A value at run time: dense row-major data and its description.
struct TensorArg {
  char* data = nullptr;
  lt_dtype dtype = LT_DTYPE_INVALID;
  int rank = 0;
  const int64_t* shape = nullptr;
  int64_t numel = 1;
};

// Everything a kernel sees; `params` are the words prepare() chose for the node.
struct KernelCall {
  TensorArg out;
  const TensorArg* in = nullptr;
  size_t num_in = 0;
  const int64_t* params = nullptr;
  size_t num_params = 0;
};
using KernelFn = void (*)(const KernelCall&);

// The kernel for node `i` of a graph that passed lower::validate (or validate_node for i),
// with its parameters appended to *params; nullptr when the host kernels do not run the node
// (an op they lack, arithmetic on bf16/f16 storage types, a rank above kMaxRank). Kernels
// write exactly the output's bytes, read only their operands', and never fail.
KernelFn prepare(const lt_graph& g, size_t i, std::vector<int64_t>* params);

// ---- pieces other backends call directly ---------------------------------------------------

// C[m,n] = op(A)[m,k]·op(B)[k,n] (+ C when accumulate), row-major with leading dimensions, T
// float or double; op(X) is X, or X stored transposed (A as [k,m], B as [n,k]) when trans_*.
// The one thread policy: OpenBLAS's own thread pool is never used (after each call it spins,
// fighting TBB and the caller for the cores: measured 18% of a GPT step). Below 2^18
// multiply-adds one single-threaded OpenBLAS call on the calling thread; up to 2^24 column
// panels over TBB; above, row blocks over TBB, each a single-threaded OpenBLAS call.
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc, bool accumulate = false, bool trans_a = false, bool trans_b = false);
// `batch` products of the same sizes, dense, operands and result `m·k`, `k·n`, `m·n` apart
// (operands stored transposed when trans_*): small products become one TBB task each
// (single-threaded OpenBLAS), large ones run in turn.
template <class T>
void gemm_batched(int64_t batch, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c,
                  bool trans_a = false, bool trans_b = false);

// conv2d NCHW / OIHW (optional bias [O]): f32 through oneDNN (the batch split over TBB tasks,
// primitives cached per geometry) where it has the geometry, else (and f64) im2col + gemm per
// image and group. `col` is im2col scratch of conv_scratch_elems(...) elements, or null to
// allocate it per call when needed.
struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, G;
  int64_t Cg() const { return C / G; }
  int64_t Og() const { return O / G; }
  int64_t col_rows() const { return Cg() * KH * KW; }
  int64_t plane() const { return OH * OW; }
  // 1x1, stride 1, no padding: the input plane already is the im2col matrix.
  bool direct() const { return KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};
// The geometry of conv2d node `i` of a validated graph.
ConvGeom conv_geom(const lt_graph& g, size_t i);
inline int64_t conv_scratch_elems(const ConvGeom& g) {
  return g.direct() ? 0 : g.col_rows() * g.plane();
}
template <class T>
void conv2d(const ConvGeom& g, const T* x, const T* w, const T* bias, T* out, T* col);
// The im2col + gemm path alone (what conv2d falls back to; benchmarks/conv compares it).
template <class T>
void conv2d_im2col(const ConvGeom& g, const T* x, const T* w, const T* bias, T* out, T* col);

// Runs body(begin, end) over [0, n): on the calling thread below 32K items of work
// (`work_per_item` scales it for items that are whole rows), else TBB chunks.
void parallel_for(int64_t n, int64_t work_per_item, void (*body)(void*, int64_t, int64_t),
                  void* ctx);
template <class F>
void parallel_for(int64_t n, int64_t work_per_item, F&& f) {
  using Fn = std::remove_reference_t<F>;
  parallel_for(
      n, work_per_item, [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace lt::host
