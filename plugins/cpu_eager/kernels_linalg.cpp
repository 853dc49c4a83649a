// kernels_linalg.cpp — matmul (OpenBLAS for large products, single-threaded Eigen for small
// ones in parallel), conv2d (im2col + gemm), max_pool2d and avg_pool2d. BLAS is never
// called from inside a TBB loop: OpenBLAS owns its own threads (one thread budget).
#include <cblas.h>

#include <Eigen/Core>
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels.h"

namespace lt::eager {
namespace {

// Products at least this many multiply-adds go to (multi-threaded) OpenBLAS.
constexpr int64_t kBlasThreshold = int64_t{1} << 18;

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// C[m,n] = A[m,k] . B[k,n], all dense row-major with the given leading dimensions.
template <class T>
void gemm(bool blas, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  if (blas) {
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                  (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
    } else {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a,
                  (int)lda, b, (int)ldb, 0.0, c, (int)ldc);
    }
    return;
  }
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<const RowMat<T>, 0, Stride> A(a, m, k, Stride(lda));
  Eigen::Map<const RowMat<T>, 0, Stride> B(b, k, n, Stride(ldb));
  Eigen::Map<RowMat<T>, 0, Stride> C(c, m, n, Stride(ldc));
  C.noalias() = A * B;
}

bool fits_int(int64_t v) {
  return v <= std::numeric_limits<int>::max();
}

template <class T>
void matmul_kernel(const KernelCall& c) {
  const TensorArg &a = c.in[0], &b = c.in[1];
  const bool batched = a.rank == 3;
  const int64_t B = batched ? a.shape[0] : 1;
  const int64_t M = a.shape[a.rank - 2], K = a.shape[a.rank - 1], N = b.shape[b.rank - 1];
  const T* pa = reinterpret_cast<const T*>(a.data);
  const T* pb = reinterpret_cast<const T*>(b.data);
  T* po = reinterpret_cast<T*>(c.out.data);
  const int64_t work = M * N * K;
  const bool blas = work >= kBlasThreshold && fits_int(M) && fits_int(N) && fits_int(K);
  if (blas || B == 1) {
    for (int64_t i = 0; i < B; ++i) {
      gemm<T>(blas, M, N, K, pa + i * M * K, K, pb + i * K * N, N, po + i * M * N, N);
    }
    return;
  }
  parallel_for(B, work, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      gemm<T>(false, M, N, K, pa + i * M * K, K, pb + i * K * N, N, po + i * M * N, N);
    }
  });
}

void prepare_matmul(PrepareCall& c) {
  expect_operands(c, 2, 2);
  const ValueDesc &a = c.in[0], &b = c.in[1];
  expect_dtype_in(c, a.dtype, true, false, false, "operand");
  if (b.dtype != a.dtype || c.out.dtype != a.dtype) {
    fail(LT_STATUS_DTYPE_MISMATCH, std::string("matmul: dtypes ") + lt_dtype_name(a.dtype) + ", " +
                                       lt_dtype_name(b.dtype) + " -> " +
                                       lt_dtype_name(c.out.dtype) + " must all be equal");
  }
  bool ok = (a.rank == 2 || a.rank == 3) && b.rank == a.rank && c.out.rank == a.rank;
  if (ok) {
    const int r = a.rank;
    ok = a.shape[r - 1] == b.shape[r - 2] && c.out.shape[r - 2] == a.shape[r - 2] &&
         c.out.shape[r - 1] == b.shape[r - 1] &&
         (r == 2 || (a.shape[0] == b.shape[0] && c.out.shape[0] == a.shape[0]));
  }
  if (!ok) {
    fail(LT_STATUS_SHAPE_MISMATCH, "matmul: shapes " + shape_str(a) + " x " + shape_str(b) +
                                       " -> " + shape_str(c.out) +
                                       " are not [M,K]x[K,N] or [B,M,K]x[B,K,N]");
  }
  c.fn = LT_EAGER_PICK_FLOAT(a.dtype, matmul_kernel);
}

// ---- conv2d ----
// params: [0..1] stride, [2..3] padding, [4..5] dilation, [6] groups, [7] has bias

struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups, Cg, Og;
};

ConvGeom conv_geom(const KernelCall& c) {
  const TensorArg &x = c.in[0], &w = c.in[1];
  const int64_t* p = c.params;
  return ConvGeom{x.shape[0],
                  x.shape[1],
                  x.shape[2],
                  x.shape[3],
                  w.shape[0],
                  w.shape[2],
                  w.shape[3],
                  c.out.shape[2],
                  c.out.shape[3],
                  p[0],
                  p[1],
                  p[2],
                  p[3],
                  p[4],
                  p[5],
                  p[6],
                  x.shape[1] / p[6],
                  w.shape[0] / p[6]};
}

// col[(c*KH + kh)*KW + kw][oh*OW + ow] = x[c][oh*sh - ph + kh*dh][ow*sw - pw + kw*dw] or 0.
template <class T>
void im2col(const ConvGeom& g, const T* x, T* col) {
  const int64_t rows = g.Cg * g.KH * g.KW, plane = g.OH * g.OW;
  parallel_for(rows, plane, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t ch = r / (g.KH * g.KW), kh = (r / g.KW) % g.KH, kw = r % g.KW;
      const T* src = x + ch * g.H * g.W;
      T* dst = col + r * plane;
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

template <class T>
void add_bias(const ConvGeom& g, const KernelCall& c, T* out) {
  if (!c.params[7]) return;
  const T* bias = reinterpret_cast<const T*>(c.in[2].data);
  const int64_t plane = g.OH * g.OW;
  parallel_for(g.N * g.O, plane, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const T v = bias[q % g.O];
      T* p = out + q * plane;
      for (int64_t i = 0; i < plane; ++i) p[i] += v;
    }
  });
}

template <class T>
void conv2d_float(const KernelCall& c) {
  const ConvGeom g = conv_geom(c);
  const T* x = reinterpret_cast<const T*>(c.in[0].data);
  const T* w = reinterpret_cast<const T*>(c.in[1].data);
  T* out = reinterpret_cast<T*>(c.out.data);
  if (c.out.numel == 0) return;
  const int64_t kdim = g.Cg * g.KH * g.KW, plane = g.OH * g.OW;
  const bool pointwise = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  const int64_t work = g.Og * plane * kdim;
  const bool blas = work >= kBlasThreshold && fits_int(g.Og) && fits_int(plane) && fits_int(kdim);
  auto one = [&](int64_t q, std::vector<T>& col, bool use_blas) {
    const int64_t n = q / g.groups, gi = q % g.groups;
    const T* xs = x + (n * g.C + gi * g.Cg) * g.H * g.W;
    const T* cols = xs;  // a 1x1 stride-1 unpadded conv reads the input as its own im2col
    if (!pointwise) {
      col.resize(static_cast<size_t>(kdim * plane));
      im2col(g, xs, col.data());
      cols = col.data();
    }
    gemm<T>(use_blas, g.Og, plane, kdim, w + gi * g.Og * kdim, kdim, cols, plane,
            out + (n * g.O + gi * g.Og) * plane, plane);
  };
  if (blas) {
    std::vector<T> col;
    for (int64_t q = 0; q < g.N * g.groups; ++q) one(q, col, true);
  } else {
    parallel_for(g.N * g.groups, work, [&](int64_t b, int64_t e) {
      std::vector<T> col;
      for (int64_t q = b; q < e; ++q) one(q, col, false);
    });
  }
  add_bias(g, c, out);
}

// Integer convolution: a direct loop with wrap-around arithmetic.
template <class T>
void conv2d_int(const KernelCall& c) {
  using U = std::make_unsigned_t<T>;
  const ConvGeom g = conv_geom(c);
  const T* x = reinterpret_cast<const T*>(c.in[0].data);
  const T* w = reinterpret_cast<const T*>(c.in[1].data);
  T* out = reinterpret_cast<T*>(c.out.data);
  const int64_t plane = g.OH * g.OW;
  parallel_for(g.N * g.O, plane * g.Cg * g.KH * g.KW, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t n = q / g.O, o = q % g.O, gi = o / g.Og;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          U acc = 0;
          for (int64_t ch = 0; ch < g.Cg; ++ch) {
            const T* xs = x + (n * g.C + gi * g.Cg + ch) * g.H * g.W;
            const T* ws = w + (o * g.Cg + ch) * g.KH * g.KW;
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
          if (c.params[7]) acc += static_cast<U>(reinterpret_cast<const T*>(c.in[2].data)[o]);
          out[q * plane + oh * g.OW + ow] = static_cast<T>(acc);
        }
      }
    }
  });
}

std::vector<int64_t> pair_attr(PrepareCall& c, const char* name, int64_t dflt, int64_t min) {
  std::vector<int64_t> d{dflt, dflt};
  std::vector<int64_t> v = attr_ints(c, name, 2, &d);
  if (v[0] < min || v[1] < min || v[0] > (int64_t{1} << 30) || v[1] > (int64_t{1} << 30)) {
    fail(LT_STATUS_INVALID_ARGUMENT, std::string(c.op) + ": attribute '" + name + "' " +
                                         shape_str(v.data(), 2) +
                                         " must be >= " + std::to_string(min));
  }
  return v;
}

void prepare_conv2d(PrepareCall& c) {
  expect_operands(c, 2, 3);
  const ValueDesc &x = c.in[0], &w = c.in[1];
  expect_dtype_in(c, x.dtype, true, true, false, "input");
  const bool has_bias = c.num_in == 3;
  if (w.dtype != x.dtype || c.out.dtype != x.dtype || (has_bias && c.in[2].dtype != x.dtype)) {
    fail(LT_STATUS_DTYPE_MISMATCH, "conv2d: input, weight, bias and output dtypes must match");
  }
  if (x.rank != 4 || w.rank != 4 || c.out.rank != 4) {
    fail(LT_STATUS_SHAPE_MISMATCH, "conv2d: input " + shape_str(x) + " and weight " + shape_str(w) +
                                       " must be 4-D (NCHW, OIHW)");
  }
  auto s = pair_attr(c, "stride", 1, 1);
  auto p = pair_attr(c, "padding", 0, 0);
  auto d = pair_attr(c, "dilation", 1, 1);
  const int64_t one = 1;
  const int64_t groups = attr_int(c, "groups", &one);
  if (groups < 1 || x.shape[1] % groups || w.shape[0] % groups) {
    fail(LT_STATUS_INVALID_ARGUMENT,
         "conv2d: groups " + std::to_string(groups) + " must divide input channels " +
             std::to_string(x.shape[1]) + " and output channels " + std::to_string(w.shape[0]));
  }
  if (x.shape[1] != w.shape[1] * groups) {
    fail(LT_STATUS_SHAPE_MISMATCH, "conv2d: input channels " + std::to_string(x.shape[1]) +
                                       " != weight channels " + std::to_string(w.shape[1]) +
                                       " x groups " + std::to_string(groups));
  }
  if (has_bias && (c.in[2].rank != 1 || c.in[2].shape[0] != w.shape[0])) {
    fail(LT_STATUS_SHAPE_MISMATCH,
         "conv2d: bias " + shape_str(c.in[2]) + " must be [" + std::to_string(w.shape[0]) + "]");
  }
  int64_t o_hw[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t span = x.shape[2 + i] + 2 * p[i] - d[i] * (w.shape[2 + i] - 1) - 1;
    o_hw[i] = span < 0 ? -1 : span / s[i] + 1;
  }
  if (o_hw[0] < 0 || o_hw[1] < 0 || c.out.shape[0] != x.shape[0] || c.out.shape[1] != w.shape[0] ||
      c.out.shape[2] != o_hw[0] || c.out.shape[3] != o_hw[1]) {
    fail(LT_STATUS_SHAPE_MISMATCH,
         "conv2d: input " + shape_str(x) + " with weight " + shape_str(w) + " gives output [" +
             std::to_string(x.shape[0]) + "," + std::to_string(w.shape[0]) + "," +
             std::to_string(o_hw[0]) + "," + std::to_string(o_hw[1]) + "], node says " +
             shape_str(c.out));
  }
  for (auto* v : {&s, &p, &d}) c.params->insert(c.params->end(), v->begin(), v->end());
  c.params->push_back(groups);
  c.params->push_back(has_bias ? 1 : 0);
  switch (x.dtype) {
    case LT_DTYPE_F32:
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

// ---- pools ----
// params: [0..1] kernel, [2..3] stride, [4..5] padding, [6] 1 for max

template <class T>
void pool_kernel(const KernelCall& c) {
  const TensorArg& x = c.in[0];
  const int64_t H = x.shape[2], W = x.shape[3], OH = c.out.shape[2], OW = c.out.shape[3];
  const int64_t* p = c.params;
  const int64_t KH = p[0], KW = p[1], sh = p[2], sw = p[3], ph = p[4], pw = p[5];
  const bool is_max = p[6] != 0;
  const T* src = reinterpret_cast<const T*>(x.data);
  T* out = reinterpret_cast<T*>(c.out.data);
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
  expect_operands(c, 1, 1);
  const ValueDesc& x = c.in[0];
  const bool is_max = c.op == "max_pool2d";
  expect_dtype_in(c, x.dtype, true, is_max, false, "input");
  if (c.out.dtype != x.dtype || x.rank != 4 || c.out.rank != 4) {
    fail(LT_STATUS_SHAPE_MISMATCH, std::string(c.op) + ": input " + shape_str(x) + " and output " +
                                       shape_str(c.out) + " must be 4-D NCHW of the same dtype");
  }
  std::vector<int64_t> k = attr_ints(c, "kernel", 2);
  std::vector<int64_t> s = pair_attr(c, "stride", 1, 1);
  if (!find_attr(c, "stride")) s = k;
  std::vector<int64_t> p = pair_attr(c, "padding", 0, 0);
  int64_t o_hw[2];
  for (int i = 0; i < 2; ++i) {
    if (k[i] < 1 || k[i] > (int64_t{1} << 30) || p[i] >= k[i]) {
      fail(LT_STATUS_INVALID_ARGUMENT, std::string(c.op) + ": kernel " + shape_str(k.data(), 2) +
                                           " with padding " + shape_str(p.data(), 2) +
                                           " is invalid");
    }
    const int64_t span = x.shape[2 + i] + 2 * p[i] - k[i];
    o_hw[i] = span < 0 ? -1 : span / s[i] + 1;
  }
  if (o_hw[0] < 0 || o_hw[1] < 0 || c.out.shape[0] != x.shape[0] || c.out.shape[1] != x.shape[1] ||
      c.out.shape[2] != o_hw[0] || c.out.shape[3] != o_hw[1]) {
    fail(LT_STATUS_SHAPE_MISMATCH, std::string(c.op) + ": input " + shape_str(x) +
                                       " does not give output " + shape_str(c.out));
  }
  for (auto* v : {&k, &s, &p}) c.params->insert(c.params->end(), v->begin(), v->end());
  c.params->push_back(is_max ? 1 : 0);
  c.fn = LT_EAGER_PICK_NUMERIC(x.dtype, pool_kernel);
}

}  // namespace

void append_linalg_ops(std::vector<OpDef>& ops) {
  ops.push_back({"matmul", prepare_matmul});
  ops.push_back({"conv2d", prepare_conv2d});
  ops.push_back({"max_pool2d", prepare_pool});
  ops.push_back({"avg_pool2d", prepare_pool});
}

}  // namespace lt::eager
