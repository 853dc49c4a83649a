// reduce.cpp — reductions (sum mean max min over any axis subset, argmax) and
// softmax / log_softmax. One instantiation per (reduction family, dtype); contiguous f32 runs
// and rows go through the vector loops of vec.h.
#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels.h"
#include "vec.h"

namespace lt::host {
namespace {

enum RedOp : int64_t { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };

// Float sums accumulate in double (contiguous f32 runs: float vector sums over blocks of a few
// hundred values, the blocks added in double; vec.h); int sums wrap in the unsigned type of T.
template <class T>
struct SumTraits {
  using Acc = std::make_unsigned_t<T>;
};
template <>
struct SumTraits<float> {
  using Acc = double;
};
template <>
struct SumTraits<double> {
  using Acc = double;
};

template <class T, bool kIsMax>
inline T pick(T acc, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if (acc != acc) return acc;
    if (x != x) return x;
  }
  if constexpr (kIsMax)
    return x > acc ? x : acc;
  else
    return x < acc ? x : acc;
}

// Reduction layout after merging adjacent dims of equal kind and dropping size-1 dims.
struct Groups {
  int n = 0;
  int64_t size[kMaxRank];
  int64_t stride[kMaxRank];  // dense input stride of the group, in elements
  bool reduced[kMaxRank];
};

Groups make_groups(const TensorArg& in, uint64_t mask) {
  Groups g;
  int64_t st[kMaxRank];
  dense_strides(in.shape, in.rank, st);
  for (int i = 0; i < in.rank; ++i) {
    if (in.shape[i] == 1) continue;
    bool r = (mask >> i) & 1;
    if (g.n > 0 && g.reduced[g.n - 1] == r) {
      g.size[g.n - 1] *= in.shape[i];
      g.stride[g.n - 1] = st[i];
    } else {
      g.size[g.n] = in.shape[i];
      g.stride[g.n] = st[i];
      g.reduced[g.n] = r;
      ++g.n;
    }
  }
  return g;
}

// Odometer over a subset of groups; offset() is the input offset of the current index.
struct Odometer {
  int n = 0;
  int64_t size[kMaxRank], stride[kMaxRank], idx[kMaxRank];
  int64_t off = 0;
  int64_t count() const {
    int64_t c = 1;
    for (int i = 0; i < n; ++i) c *= size[i];
    return c;
  }
  void seek(int64_t flat) {
    off = 0;
    for (int i = n - 1; i >= 0; --i) {
      idx[i] = flat % size[i];
      flat /= size[i];
      off += idx[i] * stride[i];
    }
  }
  void next() {
    for (int i = n - 1; i >= 0; --i) {
      off += stride[i];
      if (++idx[i] < size[i]) return;
      off -= size[i] * stride[i];
      idx[i] = 0;
    }
  }
};

template <class T>
void reduce_kernel(const KernelCall& c) {
  const RedOp op = static_cast<RedOp>(c.params[0]);
  const uint64_t mask = static_cast<uint64_t>(c.params[1]);
  const TensorArg& in = c.in[0];
  T* out = reinterpret_cast<T*>(c.out.data);
  const T* src = reinterpret_cast<const T*>(in.data);
  const int64_t nout = c.out.numel;
  if (nout == 0) return;
  const int64_t count = nout ? in.numel / nout : 0;
  using Acc = typename SumTraits<T>::Acc;
  const bool is_sum = op == kSum || op == kMean;
  auto finish_sum = [&](Acc a) -> T {
    if (op == kMean) return static_cast<T>(static_cast<double>(a) / static_cast<double>(count));
    return static_cast<T>(a);
  };
  if (count == 0) {  // sum of nothing is 0, mean NaN; max/min were refused at compile time
    for (int64_t i = 0; i < nout; ++i) out[i] = finish_sum(Acc(0));
    return;
  }
  Groups g = make_groups(in, mask);
  // Split groups: kept ones index outputs, reduced ones are walked per output.
  Odometer kept, red;
  for (int i = 0; i < g.n; ++i) {
    Odometer& o = g.reduced[i] ? red : kept;
    o.size[o.n] = g.size[i];
    o.stride[o.n] = g.stride[i];
    ++o.n;
  }
  const bool inner_reduced = g.n > 0 && g.reduced[g.n - 1];
  const vec::Table& vt = vec::table();
  auto run_reduce = [&](const T* p, int64_t len, Acc& sacc, T& macc) {
    if constexpr (std::is_same_v<T, float>) {
      if (len > 0 && vt.sum) {
        float r;
        if (is_sum) {
          sacc += vt.sum(p, len);
          return;
        }
        if (op == kMax && vt.max(p, len, &r)) {
          macc = pick<T, true>(macc, r);
          return;
        }
        if (op == kMin && vt.min(p, len, &r)) {
          macc = pick<T, false>(macc, r);
          return;
        }
      }
    }
    if (is_sum) {
      Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t i = 0;
      for (; i + 4 <= len; i += 4) {
        a0 += static_cast<Acc>(p[i]);
        a1 += static_cast<Acc>(p[i + 1]);
        a2 += static_cast<Acc>(p[i + 2]);
        a3 += static_cast<Acc>(p[i + 3]);
      }
      for (; i < len; ++i) a0 += static_cast<Acc>(p[i]);
      sacc += (a0 + a1) + (a2 + a3);
    } else if (op == kMax) {
      for (int64_t i = 0; i < len; ++i) macc = pick<T, true>(macc, p[i]);
    } else {
      for (int64_t i = 0; i < len; ++i) macc = pick<T, false>(macc, p[i]);
    }
  };
  if (kept.n == 0 && inner_reduced && red.n == 1) {
    // Full reduction of a dense tensor: split the data itself across threads.
    const int64_t n = in.numel;
    struct Part {
      Acc s;
      T m;
    };
    auto body = [&](int64_t b, int64_t e, Part p) {
      run_reduce(src + b, e - b, p.s, p.m);
      return p;
    };
    Part init{Acc(0), src[0]};
    Part r;
    if (n < kParallelThreshold) {
      r = body(0, n, init);
    } else {
      r = tbb::parallel_reduce(
          tbb::blocked_range<int64_t>(0, n, kGrain), init,
          [&](const tbb::blocked_range<int64_t>& rg, Part p) {
            return body(rg.begin(), rg.end(), p);
          },
          [&](Part a, Part b) {
            a.s += b.s;
            a.m = op == kMax ? pick<T, true>(a.m, b.m) : pick<T, false>(a.m, b.m);
            return a;
          });
    }
    out[0] = is_sum ? finish_sum(r.s) : r.m;
    return;
  }
  if (inner_reduced) {
    // Each output reduces contiguous runs of the innermost group.
    const int64_t len = red.size[red.n - 1];
    Odometer outer_red = red;
    outer_red.n = red.n - 1;
    const int64_t runs = outer_red.count();
    parallel_for(nout, runs * len, [&](int64_t b, int64_t e) {
      Odometer k = kept, r = outer_red;
      k.seek(b);
      for (int64_t o = b; o < e; ++o, k.next()) {
        Acc s = 0;
        T m = src[k.off];
        r.seek(0);
        for (int64_t j = 0; j < runs; ++j, r.next()) run_reduce(src + k.off + r.off, len, s, m);
        out[o] = is_sum ? finish_sum(s) : m;
      }
    });
    return;
  }
  // Innermost group kept: accumulate contiguous blocks of `len` outputs.
  const int64_t len = kept.n ? kept.size[kept.n - 1] : 1;
  Odometer outer_kept = kept;
  outer_kept.n = kept.n ? kept.n - 1 : 0;
  const int64_t blocks = outer_kept.count();
  const int64_t reds = red.count();
  parallel_for(blocks, reds * len, [&](int64_t b, int64_t e) {
    std::vector<Acc> acc(static_cast<size_t>(len));
    Odometer k = outer_kept, r = red;
    k.seek(b);
    for (int64_t blk = b; blk < e; ++blk, k.next()) {
      T* o = out + blk * len;
      r.seek(0);
      if (is_sum) {
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t j = 0; j < reds; ++j, r.next()) {
          const T* p = src + k.off + r.off;
          for (int64_t i = 0; i < len; ++i) acc[i] += static_cast<Acc>(p[i]);
        }
        for (int64_t i = 0; i < len; ++i) o[i] = finish_sum(acc[i]);
      } else {
        const T* p0 = src + k.off;
        for (int64_t i = 0; i < len; ++i) o[i] = p0[i];
        for (int64_t j = 0; j < reds; ++j, r.next()) {
          const T* p = src + k.off + r.off;
          if (op == kMax) {
            for (int64_t i = 0; i < len; ++i) o[i] = pick<T, true>(o[i], p[i]);
          } else {
            for (int64_t i = 0; i < len; ++i) o[i] = pick<T, false>(o[i], p[i]);
          }
        }
      }
    }
  });
}

// Splits `in` around `axis` into outer x dim x inner.
void split_axis(const TensorArg& a, int64_t axis, int64_t& outer, int64_t& dim, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= a.shape[i];
  dim = a.shape[axis];
  for (int64_t i = axis + 1; i < a.rank; ++i) inner *= a.shape[i];
}

void prepare_reduce(PrepareCall& c) {
  const ValueDesc& a = c.in[0];
  if (!is_numeric(a.dtype)) return;
  RedOp op = c.op == kOpSum ? kSum : c.op == kOpMean ? kMean : c.op == kOpMax ? kMax : kMin;
  uint64_t mask = 0;
  for (int64_t ax : c.attrs.ints("axes")) mask |= uint64_t{1} << ax;
  c.params->push_back(op);
  c.params->push_back(static_cast<int64_t>(mask));
  c.fn = LT_HOST_PICK_NUMERIC(a.dtype, reduce_kernel);
}

// params: [0] axis
template <class T>
void argmax_kernel(const KernelCall& c) {
  int64_t outer, dim, inner;
  split_axis(c.in[0], c.params[0], outer, dim, inner);
  const T* src = reinterpret_cast<const T*>(c.in[0].data);
  int64_t* out = reinterpret_cast<int64_t*>(c.out.data);
  parallel_for(outer * inner, dim, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t o = q / inner, i = q % inner;
      const T* p = src + o * dim * inner + i;
      T best = p[0];
      int64_t arg = 0;
      for (int64_t d = 1; d < dim; ++d) {
        if (best != best) break;  // the first NaN is the maximum
        const T v = p[d * inner];
        if (v != v || v > best) {
          best = v;
          arg = d;
        }
      }
      out[q] = arg;
    }
  });
}

void prepare_argmax(PrepareCall& c) {
  if (!is_numeric(c.in[0].dtype)) return;
  c.params->push_back(c.attrs.i("axis"));
  c.fn = LT_HOST_PICK_NUMERIC(c.in[0].dtype, argmax_kernel);
}

// One softmax row at stride `inner` (w may be p): the scalar loop, which also owns the special
// cases (a NaN or +inf in the row, a row all -inf) that the vector row leaves to it.
template <class T>
void scalar_softmax_row(T* w, const T* p, int64_t dim, int64_t inner, bool log_form) {
  T m = -std::numeric_limits<T>::infinity();
  bool nan = false;
  for (int64_t d = 0; d < dim; ++d) {
    const T v = p[d * inner];
    if (v != v) nan = true;
    if (v > m) m = v;
  }
  if (nan) m = std::numeric_limits<T>::quiet_NaN();
  if (std::isinf(m) && m < 0) m = 0;  // all -inf: keep the arithmetic NaN-free
  double s = 0;
  if (log_form) {
    for (int64_t d = 0; d < dim; ++d) s += std::exp(static_cast<double>(p[d * inner] - m));
    const T ls = static_cast<T>(std::log(s));
    for (int64_t d = 0; d < dim; ++d) w[d * inner] = p[d * inner] - m - ls;
  } else {
    for (int64_t d = 0; d < dim; ++d) {
      const T ev = std::exp(p[d * inner] - m);
      w[d * inner] = ev;
      s += static_cast<double>(ev);
    }
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t d = 0; d < dim; ++d) w[d * inner] *= inv;
  }
}

// params: [0] axis, [1] 1 for log_softmax
template <class T>
void softmax_kernel(const KernelCall& c) {
  int64_t outer, dim, inner;
  split_axis(c.in[0], c.params[0], outer, dim, inner);
  const bool log_form = c.params[1] != 0;
  const T* src = reinterpret_cast<const T*>(c.in[0].data);
  T* out = reinterpret_cast<T*>(c.out.data);
  const vec::Table& vt = vec::table();
  parallel_for(outer * inner, dim * 4, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t o = q / inner, i = q % inner;
      const T* p = src + o * dim * inner + i;
      T* w = out + o * dim * inner + i;
      if constexpr (std::is_same_v<T, float>) {
        if (inner == 1 && vt.softmax_row && vt.softmax_row(w, p, dim, log_form)) continue;
      }
      scalar_softmax_row(w, p, dim, inner, log_form);
    }
  });
}

void prepare_softmax(PrepareCall& c) {
  if (!is_float(c.in[0].dtype)) return;
  c.params->push_back(c.attrs.i("axis"));
  c.params->push_back(c.op == kOpLogSoftmax ? 1 : 0);
  c.fn = LT_HOST_PICK_FLOAT(c.in[0].dtype, softmax_kernel);
}

}  // namespace

void softmax_contiguous_row(float* out, const float* in, int64_t n) {
  static const vec::Table& vt = vec::table();
  if (n > 0 && vt.softmax_row && vt.softmax_row(out, in, n, false)) return;
  scalar_softmax_row(out, in, n, 1, false);
}

void add_reduce_ops(PrepareFn* t) {
  for (OpId op : {kOpSum, kOpMean, kOpMax, kOpMin}) t[op] = prepare_reduce;
  t[kOpArgmax] = prepare_argmax;
  t[kOpSoftmax] = prepare_softmax;
  t[kOpLogSoftmax] = prepare_softmax;
}

}  // namespace lt::host
