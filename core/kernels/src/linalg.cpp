// linalg.cpp — the one GEMM entry point and its thread policy, matmul, conv2d (oneDNN for f32,
// conv_onednn.cpp; im2col + gemm for f64; a direct loop for integers), the convolution gradient
// ops (oneDNN, f32) and the pools. BLAS is never called from inside a TBB loop with
// its own threads on: OpenBLAS runs single-threaded under TBB, or threaded from the caller.
#include <cblas.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <limits>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels.h"
#include "vec.h"

namespace lt::host {
namespace {

// Products below kSerialGemm multiply-adds run OpenBLAS on the calling thread; up to
// kBlasThreadsGemm they are split into column panels over TBB, each a single-threaded OpenBLAS
// call (LSTM-sized 32x800x200 gemms: OpenBLAS's own pool spins after each call and fights TBB
// and the caller for 2 cores, measured 7x slower steps under load); larger products use
// OpenBLAS's threads, from the calling thread only.
constexpr int64_t kSerialGemm = int64_t{1} << 18;
constexpr int64_t kBlasThreadsGemm = int64_t{1} << 24;

template <class T>
void blas(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc, bool accumulate, bool ta, bool tb) {
  auto t = [](bool x) { return x ? CblasTrans : CblasNoTrans; };
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, t(ta), t(tb), m, n, k, 1.0f, a, lda, b, ldb,
                accumulate ? 1.0f : 0.0f, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, t(ta), t(tb), m, n, k, 1.0, a, lda, b, ldb, accumulate ? 1.0 : 0.0,
                c, ldc);
}

// y (stride incy) += op(M) x (stride incx), op(M) rows x cols, M row-major with leading dim ld.
template <class T>
void blas_gemv(bool trans, int64_t rows, int64_t cols, const T* mat, int64_t ld, const T* x,
               int64_t incx, T* y, int64_t incy) {
  // cblas's M, N describe the stored matrix: op(M) = Mᵀ stores cols x rows.
  const int64_t sm = trans ? cols : rows, sn = trans ? rows : cols;
  const auto t = trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, t, sm, sn, 1.0f, mat, ld, x, incx, 1.0f, y, incy);
  else
    cblas_dgemv(CblasRowMajor, t, sm, sn, 1.0, mat, ld, x, incx, 1.0, y, incy);
}

// A product with one output row (m == 1: batch-1 inference) or column (n == 1) is a GEMV: it
// reads the matrix once, where sgemm would first pack all of it. Output rows are split over TBB
// (single-threaded BLAS each) when the matrix is large enough to pay for a second thread.
template <class T>
void gemv_product(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
                  T* c, int64_t ldc, bool accumulate, bool trans_a, bool trans_b) {
  // As y = op(M) x with y of length `len`: m == 1 gives yᵀ = xᵀ op(B), so M = op(B)ᵀ;
  // n == 1 gives y = op(A) x, so M = op(A).
  const bool row = m == 1;
  const int64_t len = row ? n : m;
  const T* mat = row ? b : a;
  const int64_t ld = row ? ldb : lda;
  const bool trans = row ? !trans_b : trans_a;  // op(M) is the stored matrix transposed
  const T* x = row ? a : b;
  const int64_t incx = row ? (trans_a ? lda : 1) : (trans_b ? 1 : ldb);
  const int64_t incy = row ? 1 : ldc;
  if (!accumulate)  // beta = 0 would still read y in some BLAS builds (0 * NaN)
    for (int64_t i = 0; i < len; ++i) c[i * incy] = T(0);
  // Row r of op(M) starts at mat + r (op = transpose) or mat + r * ld. In f32 our own loops
  // (vec.h) when the CPU has AVX2: 5-10% faster than OpenBLAS 0.3.21's sgemv on the MLP's
  // 784-512-512-10 layers, one core (docs/performance.md); `LT_HOST_VEC=scalar` runs sgemv.
  auto part = [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<T, float>) {
      const vec::Table& v = vec::table();
      if (trans && incy == 1 && v.gemv_axpy)  // y[r0..r1) += Σ_i x_i M[i, r0..r1)
        return v.gemv_axpy(mat + r0, ld, k, r1 - r0, x, incx, c + r0);
      if (!trans && incx == 1 && v.gemv_dot)  // y_r += M[r, :] · x
        return v.gemv_dot(mat + r0 * ld, ld, r1 - r0, k, x, c + r0 * incy, incy);
    }
    blas_gemv(trans, r1 - r0, k, trans ? mat + r0 : mat + r0 * ld, ld, x, incx, c + r0 * incy,
              incy);
  };
  const int64_t threads = tbb::this_task_arena::max_concurrency();
  if (len * k < kSerialGemm || threads < 2 || len < 128) return part(0, len);
  const int64_t rows = (len + threads - 1) / threads;
  tbb::parallel_for(int64_t{0}, threads, [&](int64_t p) {
    const int64_t r0 = p * rows, r1 = std::min(len, r0 + rows);
    if (r0 < r1) part(r0, r1);
  });
}

}  // namespace

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc, bool accumulate, bool trans_a, bool trans_b) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  // Row i of op(A) and column j of op(B) start here.
  auto a_row = [&](int64_t i) { return trans_a ? a + i : a + i * lda; };
  auto b_col = [&](int64_t j) { return trans_b ? b + j * ldb : b + j; };
  int64_t macs = m * n * k;
  SerialBlasScope serial;
  if (m == 1 || n == 1)
    return gemv_product(m, n, k, a, lda, b, ldb, c, ldc, accumulate, trans_a, trans_b);
  if (macs >= kBlasThreadsGemm && m >= 64) {
    int64_t threads = tbb::this_task_arena::max_concurrency();
    // Every call packs the B it reads: one thread makes one call; few rows (MLP inference at
    // batch 64) get one column panel per thread, so B is packed once in all, not once per
    // row block (measured 1.36x PyTorch eager at batch 64 before, one thread).
    if (threads <= 1) return blas(m, n, k, a, lda, b, ldb, c, ldc, accumulate, trans_a, trans_b);
    if (m < 256 && n >= 128 * threads) {
      const int64_t cols = ((n + threads - 1) / threads + 15) / 16 * 16;
      tbb::parallel_for(int64_t{0}, threads, [&](int64_t p) {
        const int64_t j0 = p * cols, j1 = std::min(n, j0 + cols);
        if (j0 < j1)
          blas(m, j1 - j0, k, a, lda, b_col(j0), ldb, c + j0, ldc, accumulate, trans_a, trans_b);
      });
      return;
    }
    // Row blocks of at least 16 rows, about four per thread for balance.
    int64_t rows = std::max<int64_t>(16, (m + 4 * threads - 1) / (4 * threads));
    rows = (rows + 15) / 16 * 16;
    int64_t blocks = (m + rows - 1) / rows;
    tbb::parallel_for(int64_t{0}, blocks, [&](int64_t p) {
      int64_t i0 = p * rows, i1 = std::min(m, i0 + rows);
      blas(i1 - i0, n, k, a_row(i0), lda, b, ldb, c + i0 * ldc, ldc, accumulate, trans_a, trans_b);
    });
    return;
  }
  // Panels of at least 64 columns and ~kSerialGemm multiply-adds each.
  int64_t panel = std::max<int64_t>(64, kSerialGemm / std::max<int64_t>(1, m * k));
  if (macs < kSerialGemm || n < 2 * panel)
    return blas(m, n, k, a, lda, b, ldb, c, ldc, accumulate, trans_a, trans_b);
  int64_t panels = (n + panel - 1) / panel;
  tbb::parallel_for(int64_t{0}, panels, [&](int64_t p) {
    int64_t j0 = p * panel, j1 = std::min(n, j0 + panel);
    blas(m, j1 - j0, k, a, lda, b_col(j0), ldb, c + j0, ldc, accumulate, trans_a, trans_b);
  });
}

template <class T>
void gemm_batched(int64_t batch, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c,
                  bool trans_a, bool trans_b) {
  auto one = [&](int64_t i) {
    gemm<T>(m, n, k, a + i * m * k, trans_a ? m : k, b + i * k * n, trans_b ? k : n, c + i * m * n,
            n, false, trans_a, trans_b);
  };
  int64_t macs = m * n * k;
  if (batch > 1 && macs < kBlasThreadsGemm && batch * macs >= kSerialGemm) {
    SerialBlasScope serial;  // many small products: one TBB task each
    tbb::parallel_for(int64_t{0}, batch, one);
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
}

template void gemm<float>(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t,
                          float*, int64_t, bool, bool, bool);
template void gemm<double>(int64_t, int64_t, int64_t, const double*, int64_t, const double*,
                           int64_t, double*, int64_t, bool, bool, bool);
template void gemm_batched<float>(int64_t, int64_t, int64_t, int64_t, const float*, const float*,
                                  float*, bool, bool);
template void gemm_batched<double>(int64_t, int64_t, int64_t, int64_t, const double*, const double*,
                                   double*, bool, bool);

// ---- conv2d ----

ConvGeom conv_geom(const lt_graph& g, size_t i) {
  const lt_graph_node& n = g.nodes[i];
  const lt_graph_node& x = g.nodes[n.operands[0]];
  const lt_graph_node& w = g.nodes[n.operands[1]];
  lower::Attrs a(n);
  auto s = a.ints("stride"), p = a.ints("padding"), d = a.ints("dilation");
  return ConvGeom{x.shape[0], x.shape[1], x.shape[2], x.shape[3],   w.shape[0], w.shape[2],
                  w.shape[3], n.shape[2], n.shape[3], s[0],         s[1],       p[0],
                  p[1],       d[0],       d[1],       a.i("groups")};
}

namespace {

// col[(c·KH + kh)·KW + kw][oh·OW + ow] = x[c][oh·sh − ph + kh·dh][ow·sw − pw + kw·dw] or 0.
template <class T>
void im2col(const ConvGeom& g, const T* x, T* col) {
  parallel_for(g.col_rows(), g.plane(), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t ch = r / (g.KH * g.KW), kh = (r / g.KW) % g.KH, kw = r % g.KW;
      const T* src = x + ch * g.H * g.W;
      T* dst = col + r * g.plane();
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
        T* d = dst + oh * g.OW;
        if (ih < 0 || ih >= g.H) {
          std::fill(d, d + g.OW, T(0));
          continue;
        }
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t iw = ow * g.sw - g.pw + kw * g.dw;
          d[ow] = (iw >= 0 && iw < g.W) ? src[ih * g.W + iw] : T(0);
        }
      }
    }
  });
}

// One image and group: bias, im2col (unless direct), gemm accumulating onto the bias.
template <class T>
void conv_one(const ConvGeom& g, int64_t q, const T* x, const T* w, const T* bias, T* out, T* col) {
  const int64_t n = q / g.G, gi = q % g.G, K = g.col_rows(), P = g.plane();
  const T* xg = x + (n * g.C + gi * g.Cg()) * g.H * g.W;
  T* og = out + (n * g.O + gi * g.Og()) * P;
  if (bias)
    for (int64_t o = 0; o < g.Og(); ++o)
      std::fill(og + o * P, og + (o + 1) * P, bias[gi * g.Og() + o]);
  if (K == 0 || P == 0 || g.Og() == 0) {
    if (!bias) std::fill(og, og + g.Og() * P, T(0));
    return;
  }
  const T* B = xg;
  if (!g.direct()) {
    im2col(g, xg, col);
    B = col;
  }
  gemm<T>(g.Og(), P, K, w + gi * g.Og() * K, K, B, P, og, P, bias != nullptr);
}

}  // namespace

template <class T>
void conv2d(const ConvGeom& g, const T* x, const T* w, const T* bias, T* out, T* col) {
  // f32: oneDNN where it has the geometry (measured 1.0-1.6x faster than im2col + GEMM on the
  // layers of benchmarks/conv); im2col + GEMM for f64 and what oneDNN declines.
  if constexpr (std::is_same_v<T, float>)
    if (onednn_conv(ConvPass::kForward, g, x, w, bias, out)) return;
  conv2d_im2col(g, x, w, bias, out, col);
}

template <class T>
void conv2d_im2col(const ConvGeom& g, const T* x, const T* w, const T* bias, T* out, T* col) {
  const int64_t count = g.N * g.G, work = g.Og() * g.plane() * g.col_rows();
  const size_t scratch = static_cast<size_t>(conv_scratch_elems(g));
  if (count > 1 && work < kBlasThreadsGemm && count * work >= kSerialGemm) {
    SerialBlasScope serial;  // many small images: one TBB task each, own im2col scratch
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, count),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        std::vector<T> local(scratch);
                        for (int64_t q = r.begin(); q < r.end(); ++q)
                          conv_one(g, q, x, w, bias, out, local.data());
                      });
    return;
  }
  std::vector<T> own;
  if (!col && scratch) {
    own.resize(scratch);
    col = own.data();
  }
  for (int64_t q = 0; q < count; ++q) conv_one(g, q, x, w, bias, out, col);
}

template void conv2d<float>(const ConvGeom&, const float*, const float*, const float*, float*,
                            float*);
template void conv2d<double>(const ConvGeom&, const double*, const double*, const double*, double*,
                             double*);
template void conv2d_im2col<float>(const ConvGeom&, const float*, const float*, const float*,
                                   float*, float*);
template void conv2d_im2col<double>(const ConvGeom&, const double*, const double*, const double*,
                                    double*, double*);

namespace {

// ---- matmul ----

template <class T>
void matmul_kernel(const KernelCall& c) {
  const TensorArg &a = c.in[0], &b = c.in[1];
  const int64_t B = a.rank == 3 ? a.shape[0] : 1;
  const int64_t M = a.shape[a.rank - 2], K = a.shape[a.rank - 1], N = b.shape[b.rank - 1];
  gemm_batched<T>(B, M, N, K, reinterpret_cast<const T*>(a.data),
                  reinterpret_cast<const T*>(b.data), reinterpret_cast<T*>(c.out.data), false,
                  false);
}

void prepare_matmul(PrepareCall& c) {
  if (is_float(c.out.dtype)) c.fn = LT_HOST_PICK_FLOAT(c.out.dtype, matmul_kernel);
}

// ---- conv2d kernels: params [0..15] the ConvGeom fields ----

ConvGeom geom_of_params(const int64_t* p) {
  return ConvGeom{p[0], p[1], p[2],  p[3],  p[4],  p[5],  p[6],  p[7],
                  p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]};
}
ConvGeom geom_of(const KernelCall& c) {
  return geom_of_params(c.params);
}

template <class T>
void conv2d_float(const KernelCall& c) {
  if (c.out.numel == 0) return;
  conv2d<T>(geom_of(c), reinterpret_cast<const T*>(c.in[0].data),
            reinterpret_cast<const T*>(c.in[1].data),
            c.num_in > 2 ? reinterpret_cast<const T*>(c.in[2].data) : nullptr,
            reinterpret_cast<T*>(c.out.data), nullptr);
}

// Integer convolution: a direct loop with wrap-around arithmetic.
template <class T>
void conv2d_int(const KernelCall& c) {
  using U = std::make_unsigned_t<T>;
  const ConvGeom g = geom_of(c);
  const T* x = reinterpret_cast<const T*>(c.in[0].data);
  const T* w = reinterpret_cast<const T*>(c.in[1].data);
  T* out = reinterpret_cast<T*>(c.out.data);
  const int64_t plane = g.OH * g.OW;
  parallel_for(g.N * g.O, plane * g.Cg() * g.KH * g.KW, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t n = q / g.O, o = q % g.O, gi = o / g.Og();
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          U acc = 0;
          for (int64_t ch = 0; ch < g.Cg(); ++ch) {
            const T* xs = x + (n * g.C + gi * g.Cg() + ch) * g.H * g.W;
            const T* ws = w + (o * g.Cg() + ch) * g.KH * g.KW;
            for (int64_t kh = 0; kh < g.KH; ++kh) {
              const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t iw = ow * g.sw - g.pw + kw * g.dw;
                if (iw < 0 || iw >= g.W) continue;
                acc += static_cast<U>(xs[ih * g.W + iw]) * static_cast<U>(ws[kh * g.KW + kw]);
              }
            }
          }
          if (c.num_in > 2) acc += static_cast<U>(reinterpret_cast<const T*>(c.in[2].data)[o]);
          out[q * plane + oh * g.OW + ow] = static_cast<T>(acc);
        }
      }
    }
  });
}

void prepare_conv2d(PrepareCall& c) {
  if (!is_numeric(c.out.dtype)) return;
  const ValueDesc &x = c.in[0], &w = c.in[1];
  auto s = c.attrs.ints("stride"), p = c.attrs.ints("padding"), d = c.attrs.ints("dilation");
  const int64_t geom[] = {x.shape[0],     x.shape[1], x.shape[2], x.shape[3],
                          w.shape[0],     w.shape[2], w.shape[3], c.out.shape[2],
                          c.out.shape[3], s[0],       s[1],       p[0],
                          p[1],           d[0],       d[1],       c.attrs.i("groups")};
  c.params->insert(c.params->end(), std::begin(geom), std::end(geom));
  switch (c.out.dtype) {
    case LT_DTYPE_F32:
      onednn_conv_available(ConvPass::kForward, geom_of_params(geom), c.num_in > 2);
      c.fn = &conv2d_float<float>;
      break;
    case LT_DTYPE_F64:
      c.fn = &conv2d_float<double>;
      break;
    case LT_DTYPE_I32:
      c.fn = &conv2d_int<int32_t>;
      break;
    default:
      c.fn = &conv2d_int<int64_t>;
      break;
  }
}

// ---- conv2d_backward_data / conv2d_backward_weight: params the ConvGeom of the forward
// convolution, then the pass. f32 through oneDNN only: otherwise no kernel, and the core runs
// the op's decomposition (conv2d of transposed and flipped tensors, decompose.hpp).

// Plain loops over every (output pixel, tap) pair: only if oneDNN declines a geometry at run
// time that it accepted at prepare time (its cache was rebuilt for another thread count), so a
// gradient is slow then, never wrong.
void conv2d_grad_loops(const ConvGeom& g, ConvPass pass, const float* a, const float* b, float* out,
                       int64_t numel) {
  std::fill(out, out + numel, 0.0f);
  const bool data = pass == ConvPass::kData;
  const float* dy = data ? a : b;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const float gv = dy[((n * g.O + o) * g.OH + oh) * g.OW + ow];
          const int64_t gi = o / g.Og();
          for (int64_t ci = 0; ci < g.Cg(); ++ci)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t h = oh * g.sh - g.ph + kh * g.dh, w = ow * g.sw - g.pw + kw * g.dw;
                if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
                const int64_t xi = ((n * g.C + gi * g.Cg() + ci) * g.H + h) * g.W + w;
                const int64_t wi = ((o * g.Cg() + ci) * g.KH + kh) * g.KW + kw;
                if (data)
                  out[xi] += gv * b[wi];
                else
                  out[wi] += gv * a[xi];
              }
        }
}

void conv2d_grad_kernel(const KernelCall& c) {
  if (c.out.numel == 0) return;
  const ConvGeom g = geom_of(c);
  const auto pass = static_cast<ConvPass>(c.params[16]);
  const auto* a = reinterpret_cast<const float*>(c.in[0].data);
  const auto* b = reinterpret_cast<const float*>(c.in[1].data);
  auto* out = reinterpret_cast<float*>(c.out.data);
  // No image or no output pixel: nothing flows back.
  if (g.N == 0 || g.OH == 0 || g.OW == 0) {
    std::fill(out, out + c.out.numel, 0.0f);
    return;
  }
  if (!onednn_conv(pass, g, a, b, nullptr, out)) conv2d_grad_loops(g, pass, a, b, out, c.out.numel);
}

void prepare_conv2d_grad(PrepareCall& c) {
  if (c.out.dtype != LT_DTYPE_F32) return;
  const bool data = c.op == kOpConv2dBackwardData;
  // data: (dy [N,O,OH,OW], w [O,Cg,KH,KW]) -> dx [N,C,H,W];
  // weight: (x [N,C,H,W], dy [N,O,OH,OW]) -> dw [O,Cg,KH,KW].
  const ValueDesc &x = data ? c.out : c.in[0], &dy = data ? c.in[0] : c.in[1];
  const ValueDesc& w = data ? c.in[1] : c.out;
  auto s = c.attrs.ints("stride"), p = c.attrs.ints("padding"), d = c.attrs.ints("dilation");
  const int64_t geom[] = {x.shape[0],  x.shape[1], x.shape[2], x.shape[3],
                          w.shape[0],  w.shape[2], w.shape[3], dy.shape[2],
                          dy.shape[3], s[0],       s[1],       p[0],
                          p[1],        d[0],       d[1],       c.attrs.i("groups")};
  const ConvPass pass = data ? ConvPass::kData : ConvPass::kWeights;
  const ConvGeom g = geom_of_params(geom);
  // Degenerate sizes need no oneDNN (the kernel writes zeros); others need its primitive.
  const bool empty = g.N == 0 || g.OH == 0 || g.OW == 0 || c.out.numel == 0;
  if (!empty && !onednn_conv_available(pass, g, false)) return;
  c.params->insert(c.params->end(), std::begin(geom), std::end(geom));
  c.params->push_back(static_cast<int64_t>(pass));
  c.fn = &conv2d_grad_kernel;
}

// ---- pools ----
// params: [0..1] kernel, [2..3] stride, [4..5] padding, [6] 1 for max

// One running max step with the general loop's exact semantics: a NaN anywhere in the window
// wins, otherwise the first of equal values stays (so the sign of a zero is the general loop's).
template <class T>
inline T max_step(T m, T v) {
  return (v > m || v != v) ? v : m;
}

// 2x2 windows of stride 2 without padding (the resnet stem's pool, lt-run's cnn): two input rows
// per output row, branch-free so the compiler vectorises it. The general loop below took about
// 8% of the 28x28 resnet's training step (perf); this one reads each input once at stream speed.
template <class T>
void max_pool_2x2(const T* src, T* out, int64_t planes, int64_t H, int64_t W, int64_t OH,
                  int64_t OW) {
  parallel_for(planes, H * W, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      for (int64_t oh = 0; oh < OH; ++oh) {
        const T* r0 = src + q * H * W + 2 * oh * W;
        const T* r1 = r0 + W;
        T* o = out + q * OH * OW + oh * OW;
        for (int64_t ow = 0; ow < OW; ++ow) {
          T m = max_step(max_step(r0[2 * ow], r0[2 * ow + 1]), r1[2 * ow]);
          o[ow] = max_step(m, r1[2 * ow + 1]);
        }
      }
    }
  });
}

template <class T>
void pool_kernel(const KernelCall& c) {
  const TensorArg& x = c.in[0];
  const int64_t H = x.shape[2], W = x.shape[3], OH = c.out.shape[2], OW = c.out.shape[3];
  const int64_t* p = c.params;
  const int64_t KH = p[0], KW = p[1], sh = p[2], sw = p[3], ph = p[4], pw = p[5];
  const bool is_max = p[6] != 0;
  const T* src = reinterpret_cast<const T*>(x.data);
  T* out = reinterpret_cast<T*>(c.out.data);
  if (is_max && KH == 2 && KW == 2 && sh == 2 && sw == 2 && ph == 0 && pw == 0 && OH * 2 <= H &&
      OW * 2 <= W) {
    max_pool_2x2(src, out, x.shape[0] * x.shape[1], H, W, OH, OW);
    return;
  }
  const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                        : std::numeric_limits<T>::lowest();
  parallel_for(x.shape[0] * x.shape[1], OH * OW * KH * KW, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const T* s = src + q * H * W;
      T* o = out + q * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = oh * sh - ph;
        const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + KH, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = ow * sw - pw;
          const int64_t wb = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + KW, W);
          if (is_max) {
            T m = lowest;
            bool nan = false;
            for (int64_t ih = hb; ih < he; ++ih) {
              for (int64_t iw = wb; iw < we; ++iw) {
                const T v = s[ih * W + iw];
                if (v != v) nan = true;
                if (v > m) m = v;
              }
            }
            o[oh * OW + ow] = nan ? std::numeric_limits<T>::quiet_NaN() : m;
          } else {
            double acc = 0;
            for (int64_t ih = hb; ih < he; ++ih) {
              for (int64_t iw = wb; iw < we; ++iw) acc += static_cast<double>(s[ih * W + iw]);
            }
            o[oh * OW + ow] = static_cast<T>(acc / static_cast<double>(KH * KW));
          }
        }
      }
    }
  });
}

void prepare_pool(PrepareCall& c) {
  const bool is_max = c.op == kOpMaxPool2d;
  if (!(is_float(c.out.dtype) || (is_max && is_int(c.out.dtype)))) return;
  auto k = c.attrs.ints("kernel");
  auto s = c.attrs.has("stride") ? c.attrs.ints("stride") : k;
  auto p = c.attrs.ints("padding");
  for (auto* v : {&k, &s, &p}) c.params->insert(c.params->end(), v->begin(), v->end());
  c.params->push_back(is_max ? 1 : 0);
  c.fn = LT_HOST_PICK_NUMERIC(c.out.dtype, pool_kernel);
}

}  // namespace

void add_linalg_ops(PrepareFn* t) {
  t[kOpMatmul] = prepare_matmul;
  t[kOpConv2d] = prepare_conv2d;
  t[kOpConv2dBackwardData] = prepare_conv2d_grad;
  t[kOpConv2dBackwardWeight] = prepare_conv2d_grad;
  t[kOpMaxPool2d] = prepare_pool;
  t[kOpAvgPool2d] = prepare_pool;
}

}  // namespace lt::host
