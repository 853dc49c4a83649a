// ops/common.cpp — the helpers shared by the op families (declared in common.hpp).
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

bool is_float(DType d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64 || d == LT_DTYPE_F16 || d == LT_DTYPE_BF16;
}

bool is_int(DType d) {
  return d == LT_DTYPE_I32 || d == LT_DTYPE_I64;
}

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d <= 0) return 0;
    if (n > (int64_t(1) << 62) / d) return int64_t(1) << 62;
    n *= d;
  }
  return n;
}

int64_t norm_axis(Ctx& c, int64_t a, int64_t r) {
  if (a < -r || a >= r) {
    c.error("axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
  }
  return a < 0 ? a + r : a;
}

std::vector<int64_t> shape_of(Ctx& c, Value& v) {
  if (!v.present) c.error("a required input is missing");
  if (v.h && !v.t.defined()) return v.h->shape;
  return v.t.shape();
}

int32_t ot_of_dtype(DType d) {
  switch (d) {
    case LT_DTYPE_F32:
      return kFloat;
    case LT_DTYPE_F64:
      return kDouble;
    case LT_DTYPE_I32:
      return kInt32;
    case LT_DTYPE_I64:
      return kInt64;
    case LT_DTYPE_BOOL:
      return kBool;
    case LT_DTYPE_F16:
      return kFloat16;
    case LT_DTYPE_BF16:
      return kBfloat16;
    default:
      return kUndefined;
  }
}

Vals one(Ctx& c, Tensor t, int32_t ot) {
  return {c.from_tensor(std::move(t), ot)};
}

bool all_host(const Vals& in) {
  bool any = false;
  for (const Value& v : in) {
    if (!v.present) continue;
    if (!v.h || !v.shape_class) return false;
    any = true;
  }
  return any;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

std::vector<int64_t> bcast_shape(Ctx& c, std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.size() < b.size()) std::swap(a, b);
  std::vector<int64_t> out = a;
  size_t off = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i) {
    int64_t x = a[off + i], y = b[i];
    if (x == y || y == 1) continue;
    if (x == 1) {
      out[off + i] = y;
      continue;
    }
    c.error("shapes " + lt::detail::shape_string(a) + " and " + lt::detail::shape_string(b) +
            " do not broadcast");
  }
  return out;
}

double bread(const HostVals& h, const std::vector<int64_t>& os, int64_t i) {
  const auto& s = h.shape;
  int64_t idx = 0, mul = 1;
  for (size_t k = os.size(); k-- > 0;) {
    int64_t coord = i % os[k];
    i /= os[k];
    size_t off = os.size() - s.size();
    if (k >= off) {
      int64_t d = s[k - off];
      idx += (d == 1 ? 0 : coord) * mul;
      mul *= d;
    }
  }
  return h.v[static_cast<size_t>(idx)];
}

void need_rank(Ctx& c, const Tensor& t, size_t lo, size_t hi, const char* what) {
  size_t r = t.rank();
  if (r < lo || r > hi) {
    c.error(std::string(what) + " has rank " + std::to_string(r) + ", expected " +
            (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)));
  }
}

void check_table(Ctx& c, int64_t n) {
  if (n < 0 || n > (int64_t(1) << 26))
    c.error("a size of " + std::to_string(n) + " elements is out of range");
}

Tensor cast_to(const Tensor& t, DType d) {
  return t.dtype() == d ? t : t.cast(d);
}

Tensor full_like(Ctx& c, const std::vector<int64_t>& shape, double v, DType d) {
  return lt::full(c.dev, shape, v, d);
}

Tensor sc(Ctx& c, const Tensor& like, double v) {
  return c.scalar(v, like.dtype());
}

Tensor round_even(Ctx& c, Tensor x) {
  Tensor f = x.floor();
  Tensor d = x - f;
  Tensor half = sc(c, x, 0.5);
  Tensor f2 = f * sc(c, x, 0.5);
  Tensor odd = (f2 - f2.floor()) * sc(c, x, 2);  // 1 when f is odd
  Tensor tie = f + odd;
  return lt::where(d > half, f + sc(c, x, 1), lt::where(d < half, f, tie));
}

Tensor flip(const Tensor& x, int64_t axis) {
  auto s = x.shape();
  std::vector<int64_t> st(s.size(), 0), sp(s.size(), kI64Max), stp(s.size(), 1);
  st[axis] = s[axis] - 1;
  sp[axis] = -s[axis] - 1;
  stp[axis] = -1;
  return x.slice(st, sp, stp);
}

Tensor slice1(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step) {
  return x.slice_axis(axis, start, stop, step);
}

std::vector<int64_t> perm_to_last(int64_t axis, int64_t r) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < r; ++i) {
    if (i != axis) p.push_back(i);
  }
  p.push_back(axis);
  return p;
}

std::vector<int64_t> inverse_perm(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

Tensor wrap_index(Ctx& c, Tensor idx, int64_t dim) {
  if (idx.dtype() != LT_DTYPE_I64) idx = idx.cast(LT_DTYPE_I64);
  return lt::where(idx < sc(c, idx, 0), idx + sc(c, idx, static_cast<double>(dim)), idx);
}

Tensor flat_index(Ctx& c, const std::vector<int64_t>& data_shape, Tensor idx, int64_t axis) {
  auto is = idx.shape();
  int64_t r = static_cast<int64_t>(is.size());
  auto st = strides_of(data_shape);
  Tensor flat = idx * sc(c, idx, static_cast<double>(st[axis]));
  for (int64_t k = 0; k < r; ++k) {
    if (k == axis) continue;
    std::vector<int64_t> vs(r, 1);
    vs[k] = is[k];
    Tensor ar = lt::arange(c.dev, 0, static_cast<double>(is[k]), 1, LT_DTYPE_I64).reshape(vs);
    flat = flat + ar * sc(c, ar, static_cast<double>(st[k]));
  }
  return flat;
}

Tensor reduce_op(Ctx& c, const std::string& op, Tensor x, std::vector<int64_t> axes, bool keep) {
  int64_t r = static_cast<int64_t>(x.rank());
  for (auto& a : axes) a = norm_axis(c, a, r);
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  if (r == 0) return x + sc(c, x, 0);
  auto to_f = [&](const Tensor& t) { return is_float(t.dtype()) ? t : t.cast(LT_DTYPE_F64); };
  auto back = [&](const Tensor& t) { return cast_to(t, x.dtype()); };
  if (op == "sum") return x.sum(axes, keep);
  if (op == "mean") return back(to_f(x).mean(axes, keep));
  if (op == "max") return x.max(axes, keep);
  if (op == "min") return x.min(axes, keep);
  if (op == "sumsq") return (x * x).sum(axes, keep);
  if (op == "l1") return x.abs().sum(axes, keep);
  if (op == "l2") return back(to_f(x * x).sum(axes, keep).sqrt());
  if (op == "logsum") return to_f(x).sum(axes, keep).log();
  if (op == "logsumexp") {
    Tensor f = to_f(x);
    Tensor m = f.max(axes, true);
    Tensor mz = lt::where(m == m, m, sc(c, m, 0));
    Tensor s = (f - mz).exp().sum(axes, keep).log();
    return back(s + (keep ? mz : mz.reshape(s.shape())));
  }
  if (op == "prod") {
    Tensor f = to_f(x);
    Tensor mag = f.abs().log().sum(axes, keep).exp();
    Tensor neg = (f < sc(c, f, 0)).cast(f.dtype()).sum(axes, keep);
    Tensor h = neg * sc(c, f, 0.5);
    Tensor odd = (h - h.floor()) * sc(c, f, 2);
    Tensor sign = sc(c, f, 1) - odd * sc(c, f, 2);
    Tensor res = mag * sign;
    if (is_int(x.dtype())) res = round_even(c, res);
    return back(res);
  }
  c.error("unknown reduction " + op);
}

std::vector<int64_t> unsqueeze_shape(Ctx& c, const std::vector<int64_t>& s,
                                     std::vector<int64_t> axes) {
  int64_t r = static_cast<int64_t>(s.size() + axes.size());
  for (auto& a : axes) a = norm_axis(c, a, r);
  std::sort(axes.begin(), axes.end());
  // A repeated axis would leave the output rank short of the input's dims (read past them).
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    c.error("axes repeat an axis (each output axis may be inserted once)");
  std::vector<int64_t> out;
  size_t j = 0, k = 0;
  for (int64_t i = 0; i < r; ++i) {
    if (k < axes.size() && axes[k] == i) {
      out.push_back(1);
      ++k;
    } else {
      out.push_back(s[j++]);
    }
  }
  return out;
}

Tensor unsqueeze_t(const Tensor& x, std::vector<int64_t> axes, Ctx& c) {
  return x.reshape(unsqueeze_shape(c, x.shape(), std::move(axes)));
}

std::vector<int64_t> reshape_target(Ctx& c, const std::vector<int64_t>& in,
                                    std::vector<int64_t> shape, bool allowzero) {
  int64_t known = 1, neg = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= in.size()) c.error("shape entry 0 at " + std::to_string(i) + " has no input dim");
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (neg >= 0) c.error("more than one -1 in the target shape");
      neg = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      c.error("invalid target dim " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  int64_t total = numel_of(in);
  if (neg >= 0) {
    if (known == 0 || total % known) {
      c.error("cannot reshape " + lt::detail::shape_string(in) + " to " +
              lt::detail::shape_string(shape));
    }
    shape[neg] = total / known;
  }
  if (numel_of(shape) != total) {
    c.error("cannot reshape " + lt::detail::shape_string(in) + " to " +
            lt::detail::shape_string(shape));
  }
  return shape;
}

Value host_gather(Ctx& c, Value& d, Value& idx, int64_t axis) {
  const auto& ds = d.h->shape;
  int64_t r = static_cast<int64_t>(ds.size());
  axis = norm_axis(c, axis, r);
  std::vector<int64_t> os(ds.begin(), ds.begin() + axis);
  for (int64_t v : idx.h->shape) os.push_back(v);
  for (int64_t i = axis + 1; i < r; ++i) os.push_back(ds[i]);
  int64_t outer = 1, inner = 1, ni = static_cast<int64_t>(idx.h->v.size());
  for (int64_t i = 0; i < axis; ++i) outer *= ds[i];
  for (int64_t i = axis + 1; i < r; ++i) inner *= ds[i];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < ni; ++k) {
      int64_t j = static_cast<int64_t>(idx.h->v[k]);
      if (j < 0) j += ds[axis];
      if (j < 0 || j >= ds[axis]) c.error("index " + std::to_string(j) + " out of range");
      for (int64_t q = 0; q < inner; ++q) out.push_back(d.h->v[(o * ds[axis] + j) * inner + q]);
    }
  }
  return c.from_host(os, out, d.ot, true);
}

Tensor onnx_slice(Ctx& c, const Tensor& x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                  std::vector<int64_t> axes, std::vector<int64_t> steps) {
  auto s = x.shape();
  int64_t r = static_cast<int64_t>(s.size());
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    c.error("starts, ends, axes and steps have different lengths");
  }
  std::vector<int64_t> st(r, 0), sp(r, kI64Max), stp(r, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = norm_axis(c, axes[i], r), d = s[a];
    if (steps[i] == 0) c.error("step 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b = b < -d ? -d - 1 : b + d;  // keeps INT64_MIN sane
    if (e < 0) e = e < -d ? -d - 1 : e + d;
    if (steps[i] > 0) {
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      b = std::clamp<int64_t>(b, -1, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    st[a] = b < 0 ? 0 : b;
    sp[a] = e;
    if (steps[i] < 0 && e == -1) sp[a] = -d - 1;
    if (steps[i] < 0 && b < 0) {  // empty
      st[a] = 0;
      sp[a] = 0;
      steps[i] = 1;
    }
    stp[a] = steps[i];
  }
  return x.slice(st, sp, stp);
}

}  // namespace lt::onnx::detail
