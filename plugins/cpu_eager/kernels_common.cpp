// kernels_common.cpp — helpers shared by all cpu_eager kernels: attribute parsing, the
// one broadcasting elementwise driver, strided copy, and the TBB threshold policy.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels.h"

namespace lt::eager {

void fail(lt_status_code code, std::string message) {
  throw Error{code, std::move(message)};
}

std::string shape_str(const int64_t* shape, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool is_float(lt_dtype d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64;
}
bool is_int(lt_dtype d) {
  return d == LT_DTYPE_I32 || d == LT_DTYPE_I64;
}
bool is_numeric(lt_dtype d) {
  return is_float(d) || is_int(d);
}
bool same_shape(const ValueDesc& a, const ValueDesc& b) {
  return a.rank == b.rank && std::equal(a.shape, a.shape + a.rank, b.shape);
}

void expect_operands(const PrepareCall& c, size_t lo, size_t hi) {
  if (c.num_in < lo || c.num_in > hi) {
    std::string want =
        lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
    fail(LT_STATUS_INVALID_ARGUMENT,
         std::string(c.op) + ": expected " + want + " operands, got " + std::to_string(c.num_in));
  }
}

void expect_dtype_in(const PrepareCall& c, lt_dtype d, bool allow_float, bool allow_int,
                     bool allow_bool, const char* what) {
  bool ok = (allow_float && is_float(d)) || (allow_int && is_int(d)) ||
            (allow_bool && d == LT_DTYPE_BOOL);
  if (!ok) {
    fail(LT_STATUS_DTYPE_MISMATCH,
         std::string(c.op) + ": dtype " + lt_dtype_name(d) + " of " + what + " is not supported");
  }
}

const lt_attr* find_attr(const PrepareCall& c, const char* name) {
  for (size_t i = 0; i < c.num_attrs; ++i) {
    if (c.attrs[i].name && std::strcmp(c.attrs[i].name, name) == 0) return &c.attrs[i];
  }
  return nullptr;
}

static const lt_attr* need_attr(const PrepareCall& c, const char* name, bool has_fallback) {
  const lt_attr* a = find_attr(c, name);
  if (!a && !has_fallback) {
    fail(LT_STATUS_INVALID_ARGUMENT, std::string(c.op) + ": missing attribute '" + name + "'");
  }
  return a;
}

int64_t attr_int(const PrepareCall& c, const char* name, const int64_t* fallback) {
  const lt_attr* a = need_attr(c, name, fallback != nullptr);
  if (!a) return *fallback;
  if (a->kind != LT_ATTR_INT) {
    fail(LT_STATUS_INVALID_ARGUMENT, std::string(c.op) + ": attribute '" + name + "' must be INT");
  }
  return a->i;
}

double attr_float(const PrepareCall& c, const char* name, const double* fallback) {
  const lt_attr* a = need_attr(c, name, fallback != nullptr);
  if (!a) return *fallback;
  if (a->kind == LT_ATTR_FLOAT) return a->f;
  if (a->kind == LT_ATTR_INT) return static_cast<double>(a->i);
  fail(LT_STATUS_INVALID_ARGUMENT, std::string(c.op) + ": attribute '" + name + "' must be FLOAT");
}

std::vector<int64_t> attr_ints(const PrepareCall& c, const char* name, size_t expected_len,
                               const std::vector<int64_t>* fallback) {
  const lt_attr* a = need_attr(c, name, fallback != nullptr);
  if (!a) return *fallback;
  if (a->kind != LT_ATTR_INTS || (a->ints_len && !a->ints)) {
    fail(LT_STATUS_INVALID_ARGUMENT, std::string(c.op) + ": attribute '" + name + "' must be INTS");
  }
  if (expected_len != SIZE_MAX && a->ints_len != expected_len) {
    fail(LT_STATUS_INVALID_ARGUMENT, std::string(c.op) + ": attribute '" + name + "' has " +
                                         std::to_string(a->ints_len) + " entries, expected " +
                                         std::to_string(expected_len));
  }
  return std::vector<int64_t>(a->ints, a->ints + a->ints_len);
}

void parallel_for(int64_t n, int64_t work_per_item, void (*body)(void*, int64_t, int64_t),
                  void* ctx) {
  if (n <= 0) return;
  int64_t w = std::max<int64_t>(work_per_item, 1);
  if (n * w < kParallelThreshold || n == 1) {
    body(ctx, 0, n);
    return;
  }
  int64_t grain = std::max<int64_t>(1, kGrain / w);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, static_cast<size_t>(grain)),
                    [&](const tbb::blocked_range<int64_t>& r) { body(ctx, r.begin(), r.end()); });
}

template <class I>
static I saturate_to_int(double v) {
  if (std::isnan(v)) return 0;
  // 2^31 and 2^63 are exact in double; everything strictly inside truncates safely.
  constexpr double hi = -static_cast<double>(std::numeric_limits<I>::min());
  if (v >= hi) return std::numeric_limits<I>::max();
  if (v <= -hi) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

void store_double_as(lt_dtype d, double v, void* dst) {
  switch (d) {
    case LT_DTYPE_F32: {
      float x = static_cast<float>(v);
      std::memcpy(dst, &x, 4);
      break;
    }
    case LT_DTYPE_F64:
      std::memcpy(dst, &v, 8);
      break;
    case LT_DTYPE_I32: {
      int32_t x = saturate_to_int<int32_t>(v);
      std::memcpy(dst, &x, 4);
      break;
    }
    case LT_DTYPE_I64: {
      int64_t x = saturate_to_int<int64_t>(v);
      std::memcpy(dst, &x, 8);
      break;
    }
    case LT_DTYPE_BOOL: {
      uint8_t x = v != 0.0 ? 1 : 0;
      std::memcpy(dst, &x, 1);
      break;
    }
    default:
      fail(LT_STATUS_UNSUPPORTED, std::string("dtype ") + lt_dtype_name(d) + " is not supported");
  }
}

void dense_strides(const int64_t* shape, int rank, int64_t* strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
}

namespace {

// A broadcast/strided iteration space after merging dims that are contiguous for every
// operand; the innermost dim becomes the span length.
struct IterSpace {
  int rank = 0;
  int64_t dims[kMaxRank];
  int64_t strides[4][kMaxRank];  // per operand, in elements
  int nops = 0;
};

void collapse(IterSpace& s) {
  int r = 0;
  for (int i = 0; i < s.rank; ++i) {
    if (s.dims[i] == 1) continue;
    if (r > 0) {
      bool merge = true;
      for (int k = 0; k < s.nops; ++k) {
        if (s.strides[k][r - 1] != s.strides[k][i] * s.dims[i]) merge = false;
      }
      if (merge) {
        s.dims[r - 1] *= s.dims[i];
        for (int k = 0; k < s.nops; ++k) s.strides[k][r - 1] = s.strides[k][i];
        continue;
      }
    }
    s.dims[r] = s.dims[i];
    for (int k = 0; k < s.nops; ++k) s.strides[k][r] = s.strides[k][i];
    ++r;
  }
  if (r == 0) {  // a single element
    s.dims[0] = 1;
    for (int k = 0; k < s.nops; ++k) s.strides[k][0] = 0;
    r = 1;
  }
  s.rank = r;
}

// Walks flat output positions [b, e) of space s in inner spans; visit(offsets, pos, n).
template <class Visit>
void walk(const IterSpace& s, int64_t b, int64_t e, Visit&& visit) {
  int64_t idx[kMaxRank];
  int64_t rem = b;
  for (int i = s.rank - 1; i >= 0; --i) {
    idx[i] = rem % s.dims[i];
    rem /= s.dims[i];
  }
  int64_t off[4] = {0, 0, 0, 0};
  for (int k = 0; k < s.nops; ++k) {
    for (int i = 0; i < s.rank; ++i) off[k] += idx[i] * s.strides[k][i];
  }
  int64_t pos = b;
  const int last = s.rank - 1;
  while (pos < e) {
    int64_t n = std::min(s.dims[last] - idx[last], e - pos);
    visit(off, pos, n);
    pos += n;
    for (int k = 0; k < s.nops; ++k) off[k] += n * s.strides[k][last];
    idx[last] += n;
    for (int i = last; i > 0 && idx[i] == s.dims[i]; --i) {
      for (int k = 0; k < s.nops; ++k) off[k] -= s.dims[i] * s.strides[k][i];
      idx[i] = 0;
      ++idx[i - 1];
      for (int k = 0; k < s.nops; ++k) off[k] += s.strides[k][i - 1];
    }
  }
}

}  // namespace

void elementwise(const KernelCall& c, size_t num_in, SpanFn span) {
  const int64_t n = c.out.numel;
  if (n == 0) return;
  const size_t out_es = lt_dtype_size(c.out.dtype);
  const char* in_ptr[3] = {nullptr, nullptr, nullptr};
  size_t in_es[3] = {0, 0, 0};
  bool dense = true;
  for (size_t k = 0; k < num_in; ++k) {
    in_ptr[k] = c.in[k].data;
    in_es[k] = lt_dtype_size(c.in[k].dtype);
    if (c.in[k].numel != n && c.in[k].numel != 1) dense = false;
  }
  if (dense) {  // every operand is either full-size or a single broadcast element
    int64_t st[3];
    for (size_t k = 0; k < num_in; ++k) st[k] = c.in[k].numel == n ? 1 : 0;
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      const char* p[3];
      for (size_t k = 0; k < num_in; ++k) p[k] = in_ptr[k] + b * st[k] * in_es[k];
      span(c.out.data + b * out_es, p, st, e - b, c.params);
    });
    return;
  }
  IterSpace s;
  s.rank = c.out.rank;
  s.nops = static_cast<int>(num_in);
  for (int i = 0; i < s.rank; ++i) s.dims[i] = c.out.shape[i];
  for (size_t k = 0; k < num_in; ++k) {
    const TensorArg& a = c.in[k];
    int64_t st = 1;
    for (int i = s.rank - 1; i >= 0; --i) {
      int ai = i - (s.rank - a.rank);
      int64_t d = ai >= 0 ? a.shape[ai] : 1;
      s.strides[k][i] = (ai >= 0 && d != 1) ? st : 0;
      if (ai >= 0) st *= d;
    }
  }
  collapse(s);
  parallel_for(n, 1, [&](int64_t b, int64_t e) {
    walk(s, b, e, [&](const int64_t* off, int64_t pos, int64_t len) {
      const char* p[3];
      int64_t st[3];
      for (size_t k = 0; k < num_in; ++k) {
        p[k] = in_ptr[k] + off[k] * static_cast<int64_t>(in_es[k]);
        st[k] = s.strides[k][s.rank - 1];
      }
      span(c.out.data + pos * out_es, p, st, len, c.params);
    });
  });
}

void strided_copy(char* out, const int64_t* out_shape, int rank, const char* src,
                  const int64_t* src_strides, size_t es) {
  IterSpace s;
  s.rank = rank;
  s.nops = 1;
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    s.dims[i] = out_shape[i];
    s.strides[0][i] = src_strides[i];
    n *= out_shape[i];
  }
  if (n == 0) return;
  collapse(s);
  const int64_t ies = static_cast<int64_t>(es);
  parallel_for(n, 1, [&](int64_t b, int64_t e) {
    walk(s, b, e, [&](const int64_t* off, int64_t pos, int64_t len) {
      const char* p = src + off[0] * ies;
      char* o = out + pos * ies;
      int64_t st = s.strides[0][s.rank - 1];
      if (st == 1) {
        std::memcpy(o, p, static_cast<size_t>(len * ies));
        return;
      }
      const int64_t bst = st * ies;
      switch (es) {
        case 1:
          for (int64_t i = 0; i < len; ++i) o[i] = p[i * bst];
          break;
        case 4:
          for (int64_t i = 0; i < len; ++i) std::memcpy(o + 4 * i, p + i * bst, 4);
          break;
        case 8:
          for (int64_t i = 0; i < len; ++i) std::memcpy(o + 8 * i, p + i * bst, 8);
          break;
        default:
          for (int64_t i = 0; i < len; ++i) std::memcpy(o + ies * i, p + i * bst, es);
      }
    });
  });
}

}  // namespace lt::eager
