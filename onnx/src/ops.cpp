// ops.cpp — the ai.onnx op translations of LazyTensor::onnx: each ONNX node becomes lazy ops
// of the op table (lt_ops.def) or a composition of them, so every backend runs it. Host code
// only computes shapes (Shape, Size, and what is derived from shapes and constants, folded
// when every operand is such a value) and index tables that depend on shapes alone.
#include "importer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {
namespace {

using Vals = std::vector<Value>;
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

bool is_float(DType d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64 || d == LT_DTYPE_F16 || d == LT_DTYPE_BF16;
}
bool is_int(DType d) {
  return d == LT_DTYPE_I32 || d == LT_DTYPE_I64;
}
// Saturates at 2^62 (a fuzzed shape must not overflow).
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
// Row-major strides.
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
// Host broadcast read: element `i` of out shape `os` from value with shape `s`.
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
template <class F>
Value host_binary(Ctx& c, Value& a, Value& b, int32_t ot, F f) {
  auto os = bcast_shape(c, a.h->shape, b.h->shape);
  int64_t n = numel_of(os);
  if (n > (int64_t(1) << 20)) c.error("a shape computation of " + std::to_string(n) + " elements");
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = f(bread(*a.h, os, i), bread(*b.h, os, i));
  return c.from_host(os, out, ot, true);
}

// A fuzzed or malformed model must not index past a shape: rank checks before shape reads.
void need_rank(Ctx& c, const Tensor& t, size_t lo, size_t hi, const char* what) {
  size_t r = t.rank();
  if (r < lo || r > hi) {
    c.error(std::string(what) + " has rank " + std::to_string(r) + ", expected " +
            (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)));
  }
}

// Index and weight tables built on the host (from shapes only) stay small.
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

// ---- elementwise --------------------------------------------------------------------------

using TFn = std::function<Tensor(Ctx&, Tensor)>;
OpEntry unary(TFn f, bool float_only = true) {
  return {[f, float_only](Ctx& c, const NodeP&, Vals& in) {
            Tensor x = c.T(in.at(0));
            if (float_only && !is_float(x.dtype())) {
              c.error(std::string("input dtype ") + dtype_name(x.dtype()) + " is not a float type");
            }
            return one(c, f(c, x), in[0].ot);
          },
          1};
}
Tensor sc(Ctx& c, const Tensor& like, double v) {
  return c.scalar(v, like.dtype());
}

// atan by two half-angle reductions (|t| < tan(pi/8)) and a Taylor series to t^19.
Tensor atan_t(Ctx& c, Tensor x) {
  auto half = [&](const Tensor& t) { return t / (sc(c, t, 1) + (t * t + sc(c, t, 1)).sqrt()); };
  Tensor t = half(half(x));
  Tensor t2 = t * t, term = t, sum = t;
  for (int k = 1; k <= 9; ++k) {
    term = term * t2 * sc(c, t, -1);
    sum = sum + term * sc(c, t, 1.0 / (2 * k + 1));
  }
  return sum * sc(c, x, 4);
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

OpEntry binary_arith(const char* name) {
  std::string op = name;
  return {[op](Ctx& c, const NodeP&, Vals& in) -> Vals {
            Value& a = in.at(0);
            Value& b = in.at(1);
            if (all_host({a, b}) && a.ot == b.ot) {
              auto f = [&](double x, double y) -> double {
                bool integer = is_int(carrier_dtype(a.ot));
                if (op == "add") return x + y;
                if (op == "sub") return x - y;
                if (op == "mul") return x * y;
                if (op == "div") {
                  if (integer) return y == 0 ? 0 : std::trunc(x / y);
                  return x / y;
                }
                return 0;
              };
              return {host_binary(c, a, b, a.ot, f)};
            }
            Tensor x = c.T(a), y = c.T(b);
            if (x.dtype() != y.dtype()) c.error("operand dtypes differ");
            Tensor r = op == "add" ? x + y : op == "sub" ? x - y : op == "mul" ? x * y : x / y;
            return one(c, r, a.ot);
          },
          1};
}

OpEntry compare(int kind) {  // 0 eq 1 lt 2 gt 3 le 4 ge
  return {[kind](Ctx& c, const NodeP&, Vals& in) -> Vals {
            Value& a = in.at(0);
            Value& b = in.at(1);
            if (all_host({a, b})) {
              return {host_binary(c, a, b, kBool, [kind](double x, double y) -> double {
                switch (kind) {
                  case 0:
                    return x == y;
                  case 1:
                    return x < y;
                  case 2:
                    return x > y;
                  case 3:
                    return x <= y;
                  default:
                    return x >= y;
                }
              })};
            }
            Tensor x = c.T(a), y = c.T(b);
            Tensor r = kind == 0   ? x == y
                       : kind == 1 ? x < y
                       : kind == 2 ? x > y
                       : kind == 3 ? x <= y
                                   : x >= y;
            return one(c, r, kBool);
          },
          1};
}

OpEntry variadic(int kind) {  // 0 max 1 min 2 sum 3 mean
  return {[kind](Ctx& c, const NodeP&, Vals& in) -> Vals {
            Tensor acc = c.T(in.at(0));
            for (size_t i = 1; i < in.size(); ++i) {
              Tensor y = c.T(in[i]);
              acc = kind == 0 ? lt::maximum(acc, y) : kind == 1 ? lt::minimum(acc, y) : acc + y;
            }
            if (kind == 3) acc = acc / sc(c, acc, static_cast<double>(in.size()));
            if (in.size() == 1) acc = acc + sc(c, acc, 0);  // a new value, not an alias
            return one(c, acc, in[0].ot);
          },
          1};
}

// ---- layout helpers -----------------------------------------------------------------------

Tensor flip(const Tensor& x, int64_t axis) {
  auto s = x.shape();
  std::vector<int64_t> st(s.size(), 0), sp(s.size(), kI64Max), stp(s.size(), 1);
  st[axis] = s[axis] - 1;
  sp[axis] = -s[axis] - 1;
  stp[axis] = -1;
  return x.slice(st, sp, stp);
}
Tensor slice1(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step = 1) {
  return x.slice_axis(axis, start, stop, step);
}
// Moves `axis` to the end.
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
// Indices along an axis with negatives wrapped: where(i < 0, i + dim, i).
Tensor wrap_index(Ctx& c, Tensor idx, int64_t dim) {
  if (idx.dtype() != LT_DTYPE_I64) idx = idx.cast(LT_DTYPE_I64);
  return lt::where(idx < sc(c, idx, 0), idx + sc(c, idx, static_cast<double>(dim)), idx);
}
// Flat row-major element index into `shape` from per-element indices along `axis`.
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

OpEntry reduce(const std::string& op) {
  return {[op](Ctx& c, const NodeP& n, Vals& in) -> Vals {
            Tensor x = c.T(in.at(0));
            std::vector<int64_t> axes = c.attr_ints("axes");
            bool axes_input = in.size() > 1 && in[1].present;
            if (axes_input) axes = c.ints(in[1]);
            bool keep = c.attr_i("keepdims", 1) != 0;
            if (axes.empty() && c.attr_i("noop_with_empty_axes", 0)) {
              return one(c, x + sc(c, x, 0), in[0].ot);
            }
            (void)n;
            return one(c, reduce_op(c, op, x, axes, keep), in[0].ot);
          },
          1};
}

Tensor softmax_like(Ctx& c, Tensor x, int64_t axis, int kind) {  // 0 softmax 1 log 2 hardmax
  int64_t r = static_cast<int64_t>(x.rank());
  axis = norm_axis(c, axis, r);
  auto s = x.shape();
  Tensor y = x;
  int64_t ax = axis;
  if (c.opset < 13) {  // coerced to 2-D at axis
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= s[i];
    y = x.reshape({a, b});
    ax = 1;
  }
  Tensor out;
  if (kind == 0) {
    out = y.softmax(ax);
  } else if (kind == 1) {
    out = y.log_softmax(ax);
  } else {
    Tensor am = y.argmax(ax, true);
    auto ys = y.shape();
    std::vector<int64_t> vs(ys.size(), 1);
    vs[ax] = ys[ax];
    Tensor ar = lt::arange(c.dev, 0, static_cast<double>(ys[ax]), 1, LT_DTYPE_I64).reshape(vs);
    out = (ar == am).cast(x.dtype());
  }
  return out.reshape(s);
}

// ---- pooling and convolution --------------------------------------------------------------

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
};
Window window(Ctx& c, const std::vector<int64_t>& in_spatial, std::vector<int64_t> kernel,
              bool ceil_mode) {
  size_t nd = in_spatial.size();
  Window w;
  w.kernel = kernel;
  w.strides = c.attr_ints("strides");
  if (w.strides.empty()) w.strides.assign(nd, 1);
  w.dilations = c.attr_ints("dilations");
  if (w.dilations.empty()) w.dilations.assign(nd, 1);
  w.pads = c.attr_ints("pads");
  if (w.pads.empty()) w.pads.assign(2 * nd, 0);
  if (w.kernel.size() != nd || w.strides.size() != nd || w.dilations.size() != nd ||
      w.pads.size() != 2 * nd) {
    c.error("kernel_shape, strides, dilations and pads do not match " + std::to_string(nd) +
            " spatial dims");
  }
  std::string ap = c.attr_s("auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (size_t i = 0; i < nd; ++i) {
      int64_t out = (in_spatial[i] + w.strides[i] - 1) / w.strides[i];
      int64_t ek = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + ek - in_spatial[i]);
      int64_t small = total / 2, big = total - small;
      w.pads[i] = ap == "SAME_UPPER" ? small : big;
      w.pads[i + nd] = ap == "SAME_UPPER" ? big : small;
    }
  } else if (ap == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  }
  (void)ceil_mode;
  return w;
}

// Pooling as a max/sum over the kernel's strided slices of the padded input: any rank,
// dilations, asymmetric pads and ceil mode.
Tensor pool_slices(Ctx& c, Tensor x, const Window& w, bool is_max, bool ceil_mode,
                   bool count_include_pad, bool is_lp = false, double p = 2,
                   Tensor* argmax = nullptr, bool column_major = false) {
  auto s = x.shape();
  size_t nd = w.kernel.size();
  std::vector<int64_t> before(s.size(), 0), after(s.size(), 0), out(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t ek = (w.kernel[i] - 1) * w.dilations[i] + 1;
    int64_t span = s[2 + i] + w.pads[i] + w.pads[i + nd] - ek;
    if (span < 0) c.error("the kernel does not fit the padded input");
    out[i] = (ceil_mode ? (span + w.strides[i] - 1) / w.strides[i] : span / w.strides[i]) + 1;
    if (ceil_mode && (out[i] - 1) * w.strides[i] >= s[2 + i] + w.pads[i]) --out[i];
    before[2 + i] = w.pads[i];
    int64_t need = (out[i] - 1) * w.strides[i] + ek;
    after[2 + i] = need - s[2 + i] - w.pads[i];
  }
  double padv = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  std::vector<int64_t> after_pos(after), after_neg(s.size(), 0);
  Tensor xp = x;
  for (size_t i = 0; i < s.size(); ++i) {
    if (after[i] < 0) {
      after_pos[i] = 0;
      after_neg[i] = after[i];
    }
  }
  xp = xp.pad(before, after_pos, padv);
  if (is_lp) xp = xp.abs().pow(p);
  // Ones where the input is (for the count of an average without pads).
  Tensor ones = lt::ones(c.dev, s, x.dtype()).pad(before, after_pos, 0.0);
  // Ones over input and explicit pads, not the ceil-mode tail.
  std::vector<int64_t> after_explicit(s.size(), 0);
  for (size_t i = 0; i < nd; ++i) after_explicit[2 + i] = std::max<int64_t>(0, w.pads[i + nd]);
  Tensor ones_pad = lt::ones(c.dev, s, x.dtype()).pad(before, after_explicit, 1.0);
  {
    std::vector<int64_t> extra(s.size(), 0);
    bool any = false;
    for (size_t i = 0; i < nd; ++i) {
      extra[2 + i] = after_pos[2 + i] - after_explicit[2 + i];
      if (extra[2 + i] < 0) extra[2 + i] = 0;
      any |= extra[2 + i] > 0;
    }
    if (any) ones_pad = ones_pad.pad(std::vector<int64_t>(s.size(), 0), extra, 0.0);
    auto ps = xp.shape();
    auto os_ = ones_pad.shape();
    if (os_ != ps) {
      std::vector<int64_t> st(s.size(), 0), sp(ps.begin(), ps.end()), stp(s.size(), 1);
      ones_pad = ones_pad.slice(st, sp, stp);
    }
  }
  Tensor acc, cnt;
  int64_t total = numel_of(w.kernel);
  for (int64_t k = 0; k < total; ++k) {
    int64_t rem = k;
    std::vector<int64_t> st(s.size(), 0), sp(s.size(), kI64Max), stp(s.size(), 1);
    for (size_t i = nd; i-- > 0;) {
      int64_t ki = rem % w.kernel[i];
      rem /= w.kernel[i];
      st[2 + i] = ki * w.dilations[i];
      sp[2 + i] = st[2 + i] + (out[i] - 1) * w.strides[i] + 1;
      stp[2 + i] = w.strides[i];
    }
    Tensor v = xp.slice(st, sp, stp);
    if (is_max && argmax) {
      // Flat index (over N, C and the spatial dims) of this tap at every output position.
      std::vector<int64_t> rs(s.size(), 1);
      rs[0] = s[0];
      rs[1] = s[1];
      int64_t sp_n = 1;
      for (size_t i = 0; i < nd; ++i) sp_n *= s[2 + i];
      Tensor idx = lt::arange(c.dev, 0, double(s[0] * s[1]), 1, LT_DTYPE_I64).reshape(rs) *
                   c.scalar(double(sp_n), LT_DTYPE_I64);
      std::vector<int64_t> stride_sp(nd, 1);
      for (size_t i = 0; i < nd; ++i) {
        for (size_t j = 0; j < nd; ++j) {
          if (column_major ? j < i : j > i) stride_sp[i] *= s[2 + j];
        }
      }
      for (size_t i = 0; i < nd; ++i) {
        std::vector<int64_t> ps(s.size(), 1);
        ps[2 + i] = out[i];
        Tensor pos = lt::arange(c.dev, double(st[2 + i] - w.pads[i]),
                                double(st[2 + i] - w.pads[i] + out[i] * w.strides[i]),
                                double(w.strides[i]), LT_DTYPE_I64);
        pos = slice1(pos, 0, 0, out[i]).reshape(ps);
        idx = idx + pos * c.scalar(double(stride_sp[i]), LT_DTYPE_I64);
      }
      if (!acc.defined()) {
        acc = v;
        *argmax = idx.broadcast_to(v.shape());
      } else {
        Tensor better = v > acc;
        *argmax = lt::where(better, idx, *argmax);
        acc = lt::maximum(acc, v);
      }
    } else if (is_max) {
      acc = acc.defined() ? lt::maximum(acc, v) : v;
    } else {
      acc = acc.defined() ? acc + v : v;
      Tensor o = (count_include_pad ? ones_pad : ones).slice(st, sp, stp);
      cnt = cnt.defined() ? cnt + o : o;
    }
  }
  if (is_lp) return acc.pow(1.0 / p);
  if (is_max) return acc;
  return acc / cnt;
}

Tensor to_spatial2(Tensor x, size_t nd) {
  if (nd == 1) {
    auto s = x.shape();
    return x.reshape({s[0], s[1], 1, s[2]});
  }
  return x;
}

OpEntry pool(bool is_max) {
  return {[is_max](Ctx& c, const NodeP&, Vals& in) -> Vals {
            Tensor x = c.T(in.at(0));
            auto s = x.shape();
            if (s.size() < 3) c.error("input rank must be at least 3");
            std::vector<int64_t> sp(s.begin() + 2, s.end());
            bool ceil_mode = c.attr_i("ceil_mode", 0) != 0;
            Window w = window(c, sp, c.attr_ints("kernel_shape"), ceil_mode);
            bool cip = c.attr_i("count_include_pad", 0) != 0;
            Tensor xf = is_float(x.dtype()) ? x : x.cast(LT_DTYPE_F32);
            Tensor idx;
            bool want_idx = is_max && c.node->outputs.size() > 1 && !c.node->outputs[1].empty();
            Tensor y = pool_slices(c, xf, w, is_max, ceil_mode, cip, false, 2,
                                   want_idx ? &idx : nullptr, c.attr_i("storage_order", 0) != 0);
            Vals out = one(c, cast_to(y, x.dtype()), in[0].ot);
            if (want_idx) out.push_back(c.from_tensor(idx, kInt64));
            return out;
          },
          1};
}

// Convolution: 2-D through conv2d; 1-D as 2-D with H = 1; 3-D as a sum of 2-D convolutions
// over the depth taps.
Tensor conv_nd(Ctx& c, Tensor x, Tensor w, Tensor b, const Window& win, int64_t group) {
  auto s = x.shape();
  size_t nd = s.size() - 2;
  std::vector<int64_t> before(s.size(), 0), after(s.size(), 0);
  for (size_t i = 0; i < nd; ++i) {
    before[2 + i] = win.pads[i];
    after[2 + i] = win.pads[i + nd];
  }
  bool need_pad = std::any_of(win.pads.begin(), win.pads.end(), [](int64_t p) { return p != 0; });
  // Symmetric 2-D pads go to conv2d itself (no padded copy of the input).
  if (nd == 2 && win.pads[0] == win.pads[2] && win.pads[1] == win.pads[3]) {
    return lt::conv2d(x, w, b, {win.strides[0], win.strides[1]}, {win.pads[0], win.pads[1]},
                      {win.dilations[0], win.dilations[1]}, group);
  }
  if (need_pad) x = x.pad(before, after, 0.0);
  if (nd == 1) {
    Tensor x2 = to_spatial2(x, 1);
    auto ws = w.shape();
    Tensor w2 = w.reshape({ws[0], ws[1], 1, ws[2]});
    Tensor y = lt::conv2d(x2, w2, b, {1, win.strides[0]}, {0, 0}, {1, win.dilations[0]}, group);
    auto ys = y.shape();
    return y.reshape({ys[0], ys[1], ys[3]});
  }
  if (nd == 2) {
    return lt::conv2d(x, w, b, {win.strides[0], win.strides[1]}, {0, 0},
                      {win.dilations[0], win.dilations[1]}, group);
  }
  if (nd == 3) {
    auto xs = x.shape();
    auto ws = w.shape();
    int64_t kd = ws[2], sd = win.strides[0], dd = win.dilations[0];
    int64_t od = (xs[2] - (kd - 1) * dd - 1) / sd + 1;
    std::vector<Tensor> planes;
    for (int64_t o = 0; o < od; ++o) {
      Tensor acc;
      for (int64_t k = 0; k < kd; ++k) {
        Tensor xp = slice1(x, 2, o * sd + k * dd, o * sd + k * dd + 1)
                        .reshape({xs[0], xs[1], xs[3], xs[4]});
        Tensor wp = slice1(w, 2, k, k + 1).reshape({ws[0], ws[1], ws[3], ws[4]});
        Tensor y = lt::conv2d(xp, wp, Tensor(), {win.strides[1], win.strides[2]}, {0, 0},
                              {win.dilations[1], win.dilations[2]}, group);
        acc = acc.defined() ? acc + y : y;
      }
      auto as = acc.shape();
      planes.push_back(acc.reshape({as[0], as[1], 1, as[2], as[3]}));
    }
    Tensor y = lt::concat(planes, 2);
    if (b.defined()) y = y + b.reshape({1, ws[0], 1, 1, 1});
    return y;
  }
  c.error(std::to_string(nd) + "-D convolution is not supported (1-D, 2-D and 3-D are)");
}

Vals op_conv(Ctx& c, const NodeP&, Vals& in) {
  Tensor x = c.T(in.at(0)), w = c.T(in.at(1));
  Tensor b = in.size() > 2 && in[2].present ? c.T(in[2]) : Tensor();
  auto s = x.shape();
  auto ws = w.shape();
  if (s.size() < 3 || ws.size() != s.size()) c.error("input and weight ranks do not fit");
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty()) kernel.assign(ws.begin() + 2, ws.end());
  std::vector<int64_t> sp(s.begin() + 2, s.end());
  Window win = window(c, sp, kernel, false);
  return one(c, conv_nd(c, x, w, b, win, c.attr_i("group", 1)), in[0].ot);
}

// ConvTranspose: zeros inserted between the input's elements (stride), padded by the dilated
// kernel minus the pads, convolved with the flipped, channel-swapped kernel.
Vals op_conv_transpose(Ctx& c, const NodeP&, Vals& in) {
  Tensor x = c.T(in.at(0)), w = c.T(in.at(1));
  Tensor b = in.size() > 2 && in[2].present ? c.T(in[2]) : Tensor();
  auto s = x.shape();
  auto ws = w.shape();  // [C, M/g, k...]
  if (s.size() < 3 || ws.size() != s.size()) c.error("input and weight ranks do not fit");
  size_t nd = s.size() - 2;
  int64_t group = c.attr_i("group", 1);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty()) kernel.assign(ws.begin() + 2, ws.end());
  std::vector<int64_t> strides = c.attr_ints("strides"), dil = c.attr_ints("dilations"),
                       pads = c.attr_ints("pads"), opad = c.attr_ints("output_padding"),
                       oshape = c.attr_ints("output_shape");
  if (strides.empty()) strides.assign(nd, 1);
  if (dil.empty()) dil.assign(nd, 1);
  if (opad.empty()) opad.assign(nd, 0);
  std::string ap = c.attr_s("auto_pad", "NOTSET");
  if (pads.empty()) pads.assign(2 * nd, 0);
  if (!oshape.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (size_t i = 0; i < nd; ++i) {
      int64_t target = !oshape.empty() ? oshape[oshape.size() - nd + i] : s[2 + i] * strides[i];
      int64_t total =
          strides[i] * (s[2 + i] - 1) + opad[i] + ((kernel[i] - 1) * dil[i] + 1) - target;
      bool upper_first = ap != "SAME_UPPER";
      pads[i] = upper_first ? total - total / 2 : total / 2;
      pads[i + nd] = total - pads[i];
      if (total < 0) {
        pads[i] = 0;
        pads[i + nd] = total;
      } else if (!oshape.empty()) {
        pads[i] = total / 2;
        pads[i + nd] = total - pads[i];
        if (ap == "SAME_UPPER") std::swap(pads[i], pads[i + nd]);
      }
    }
  }
  // Zero insertion: [N,C,H] -> [N,C,H,1] -> pad to [N,C,H,s] -> [N,C,H*s] -> drop s-1.
  Tensor y = x;
  for (size_t i = 0; i < nd; ++i) {
    if (strides[i] == 1) continue;
    auto ys = y.shape();
    int64_t ax = static_cast<int64_t>(2 + i);
    std::vector<int64_t> ns;
    for (int64_t k = 0; k <= ax; ++k) ns.push_back(ys[k]);
    ns.push_back(1);
    for (size_t k = ax + 1; k < ys.size(); ++k) ns.push_back(ys[k]);
    Tensor e = y.reshape(ns);
    std::vector<int64_t> bf(ns.size(), 0), af(ns.size(), 0);
    af[ax + 1] = strides[i] - 1;
    e = e.pad(bf, af, 0.0);
    std::vector<int64_t> ms = ys;
    ms[ax] = ys[ax] * strides[i];
    y = slice1(e.reshape(ms), ax, 0, ys[ax] * strides[i] - (strides[i] - 1));
  }
  std::vector<int64_t> before(s.size(), 0), after(s.size(), 0);
  for (size_t i = 0; i < nd; ++i) {
    int64_t ek = (kernel[i] - 1) * dil[i];
    before[2 + i] = ek - pads[i];
    after[2 + i] = ek - pads[i + nd] + opad[i];
  }
  // Negative pads crop.
  std::vector<int64_t> bpos(before), apos(after);
  for (auto& v : bpos) v = std::max<int64_t>(v, 0);
  for (auto& v : apos) v = std::max<int64_t>(v, 0);
  y = y.pad(bpos, apos, 0.0);
  for (size_t i = 0; i < s.size(); ++i) {
    if (before[i] < 0 || after[i] < 0) {
      int64_t len = y.shape()[i];
      y = slice1(y, static_cast<int64_t>(i), before[i] < 0 ? -before[i] : 0,
                 after[i] < 0 ? len + after[i] : len);
    }
  }
  // Kernel: [C, M/g, k] -> per group [M/g, C/g, k] flipped.
  int64_t cg = ws[0] / group, mg = ws[1];
  std::vector<int64_t> gs = {group, cg, mg};
  for (size_t i = 2; i < ws.size(); ++i) gs.push_back(ws[i]);
  Tensor wk = w.reshape(gs);
  std::vector<int64_t> perm = {0, 2, 1};
  for (size_t i = 3; i < gs.size(); ++i) perm.push_back(static_cast<int64_t>(i));
  wk = wk.permute(perm);
  std::vector<int64_t> ks = {group * mg, cg};
  for (size_t i = 2; i < ws.size(); ++i) ks.push_back(ws[i]);
  wk = wk.reshape(ks);
  for (size_t i = 0; i < nd; ++i) wk = flip(wk, static_cast<int64_t>(2 + i));
  Window win;
  win.kernel = kernel;
  win.strides.assign(nd, 1);
  win.dilations = dil;
  win.pads.assign(2 * nd, 0);
  return one(c, conv_nd(c, y, wk, b, win, group), in[0].ot);
}

// ---- registry -----------------------------------------------------------------------------

Tensor unsqueeze_t(const Tensor& x, std::vector<int64_t> axes, Ctx& c) {
  auto s = x.shape();
  int64_t r = static_cast<int64_t>(s.size() + axes.size());
  for (auto& a : axes) a = norm_axis(c, a, r);
  std::sort(axes.begin(), axes.end());
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
  return x.reshape(out);
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

// Host gather (np.take) for shape values.
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

// ONNX Slice bounds to Python-style starts/stops for the core's slice.
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

Tensor pad_mode(Ctx& c, Tensor x, const std::vector<int64_t>& pads, const std::string& mode,
                double value) {
  auto s = x.shape();
  size_t r = s.size();
  if (pads.size() != 2 * r)
    c.error("pads has " + std::to_string(pads.size()) + " entries for rank " + std::to_string(r));
  // Negative pads crop first.
  for (size_t i = 0; i < r; ++i) {
    int64_t b = pads[i], e = pads[i + r];
    if (b < 0 || e < 0) {
      int64_t len = x.shape()[i];
      x = slice1(x, static_cast<int64_t>(i), b < 0 ? -b : 0, e < 0 ? len + e : len);
    }
  }
  std::vector<int64_t> bf(r), af(r);
  for (size_t i = 0; i < r; ++i) {
    bf[i] = std::max<int64_t>(pads[i], 0);
    af[i] = std::max<int64_t>(pads[i + r], 0);
  }
  if (mode == "constant") return x.pad(bf, af, value);
  for (size_t i = 0; i < r; ++i) {
    if (!bf[i] && !af[i]) continue;
    int64_t ax = static_cast<int64_t>(i), d = x.shape()[i];
    std::vector<Tensor> parts;
    if (mode == "edge") {
      auto bs = x.shape();
      if (bf[i]) {
        bs[i] = bf[i];
        parts.push_back(slice1(x, ax, 0, 1).broadcast_to(bs));
      }
      parts.push_back(x);
      if (af[i]) {
        bs[i] = af[i];
        parts.push_back(slice1(x, ax, d - 1, d).broadcast_to(bs));
      }
    } else if (mode == "reflect") {
      if (bf[i] >= d || af[i] >= d) c.error("reflect pad larger than the dim");
      if (bf[i]) parts.push_back(flip(slice1(x, ax, 1, 1 + bf[i]), ax));
      parts.push_back(x);
      if (af[i]) parts.push_back(flip(slice1(x, ax, d - 1 - af[i], d - 1), ax));
    } else if (mode == "wrap") {
      if (bf[i]) parts.push_back(slice1(x, ax, d - bf[i], d));
      parts.push_back(x);
      if (af[i]) parts.push_back(slice1(x, ax, 0, af[i]));
    } else {
      c.error("pad mode '" + mode + "' is not supported");
    }
    x = lt::concat(parts, ax);
  }
  return x;
}

// Resize along each axis by gathers with host index tables (they depend on shapes only).
Tensor resize_axis(Ctx& c, Tensor x, int64_t axis, int64_t out_len, double out_len_f, double scale,
                   const std::string& mode, const std::string& ctm, const std::string& nearest,
                   double cubic_a, bool exclude_outside, double roi_start, double roi_end) {
  int64_t in_len = x.shape()[axis];
  check_table(c, out_len);
  if (out_len == in_len && (ctm != "tf_crop_and_resize") && scale == 1.0) return x;
  auto coord = [&](int64_t o) -> double {
    if (ctm == "half_pixel") return (o + 0.5) / scale - 0.5;
    if (ctm == "pytorch_half_pixel") return out_len > 1 ? (o + 0.5) / scale - 0.5 : 0;
    if (ctm == "align_corners")
      return out_len_f == 1 ? 0 : o * double(in_len - 1) / (out_len_f - 1);
    if (ctm == "asymmetric") return o / scale;
    if (ctm == "tf_half_pixel_for_nn") return (o + 0.5) / scale;
    if (ctm == "tf_crop_and_resize") {
      return out_len > 1 ? roi_start * (in_len - 1) +
                               o * (roi_end - roi_start) * (in_len - 1) / (out_len - 1)
                         : 0.5 * (roi_start + roi_end) * (in_len - 1);
    }
    c.error("coordinate_transformation_mode '" + ctm + "' is not supported");
  };
  std::vector<int64_t> is(x.shape());
  if (mode == "nearest") {
    std::vector<int64_t> idx(out_len);
    for (int64_t o = 0; o < out_len; ++o) {
      double f = coord(o);
      int64_t i;
      if (nearest == "round_prefer_ceil")
        i = static_cast<int64_t>(std::floor(f + 0.5));
      else if (nearest == "floor")
        i = static_cast<int64_t>(std::floor(f));
      else if (nearest == "ceil")
        i = static_cast<int64_t>(std::ceil(f));
      else
        i = (f - std::floor(f) == 0.5) ? static_cast<int64_t>(std::floor(f))
                                       : static_cast<int64_t>(std::floor(f + 0.5));
      idx[o] = std::clamp<int64_t>(i, 0, in_len - 1);
    }
    return x.gather(Tensor::from<int64_t>(c.dev, idx), axis);
  }
  // linear / cubic: out = sum_k w_k[o] * x[i_k[o]]
  int taps = mode == "linear" ? 2 : 4;
  std::vector<std::vector<int64_t>> idx(taps, std::vector<int64_t>(out_len));
  std::vector<std::vector<double>> wt(taps, std::vector<double>(out_len));
  for (int64_t o = 0; o < out_len; ++o) {
    double f = coord(o);
    bool outside = ctm == "tf_crop_and_resize" && (f < 0 || f > in_len - 1);
    if (mode == "linear") {
      double fc = std::clamp(f, 0.0, double(in_len - 1));
      int64_t i0 = static_cast<int64_t>(std::floor(fc));
      int64_t i1 = std::min<int64_t>(i0 + 1, in_len - 1);
      double t = fc - i0;
      idx[0][o] = i0;
      idx[1][o] = i1;
      wt[0][o] = outside ? 0 : 1 - t;
      wt[1][o] = outside ? 0 : t;
    } else {
      int64_t i0 = static_cast<int64_t>(std::floor(f));
      double t = f - i0;
      double A = cubic_a;
      double ws[4];
      double d[4] = {1 + t, t, 1 - t, 2 - t};
      for (int k = 0; k < 4; ++k) {
        double z = std::abs(d[k]);
        ws[k] = z <= 1  ? ((A + 2) * z - (A + 3)) * z * z + 1
                : z < 2 ? ((A * z - 5 * A) * z + 8 * A) * z - 4 * A
                        : 0;
      }
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        int64_t j = i0 - 1 + k;
        if (exclude_outside && (j < 0 || j >= in_len)) ws[k] = 0;
        sum += ws[k];
      }
      for (int k = 0; k < 4; ++k) {
        int64_t j = i0 - 1 + k;
        idx[k][o] = std::clamp<int64_t>(j, 0, in_len - 1);
        wt[k][o] = outside ? 0 : (exclude_outside && sum != 0 ? ws[k] / sum : ws[k]);
      }
    }
  }
  Tensor acc;
  int64_t r = static_cast<int64_t>(is.size());
  std::vector<int64_t> ws_shape(r, 1);
  ws_shape[axis] = out_len;
  for (int k = 0; k < taps; ++k) {
    Tensor g = x.gather(Tensor::from<int64_t>(c.dev, idx[k]), axis);
    Tensor w = Tensor::from<double>(c.dev, wt[k]).reshape(ws_shape).cast(x.dtype());
    Tensor term = g * w;
    acc = acc.defined() ? acc + term : term;
  }
  if (ctm == "tf_crop_and_resize") {
    double ev = c.attr_f("extrapolation_value", 0.0f);
    std::vector<double> m(out_len);
    for (int64_t o = 0; o < out_len; ++o) {
      double f = coord(o);
      m[o] = (f < 0 || f > in_len - 1) ? 1 : 0;
    }
    Tensor mask = Tensor::from<double>(c.dev, m).reshape(ws_shape) > c.scalar(0.5, LT_DTYPE_F64);
    acc = lt::where(mask, c.scalar(ev, x.dtype()), acc);
  }
  return acc;
}

// Recurrent layers (RNN, GRU, LSTM), unrolled over the sequence (its length is static).
Tensor act(Ctx& c, const std::string& name, Tensor x, float alpha, float beta) {
  if (name == "Sigmoid") return x.sigmoid();
  if (name == "Tanh") return x.tanh();
  if (name == "Relu") return x.relu();
  if (name == "Affine") return x * sc(c, x, alpha) + sc(c, x, beta);
  if (name == "LeakyRelu") return lt::where(x < sc(c, x, 0), x * sc(c, x, alpha), x);
  if (name == "ThresholdedRelu") return lt::where(x > sc(c, x, alpha), x, sc(c, x, 0));
  if (name == "ScaledTanh") return (x * sc(c, x, beta)).tanh() * sc(c, x, alpha);
  if (name == "HardSigmoid") {
    return lt::minimum(lt::maximum(x * sc(c, x, alpha) + sc(c, x, beta), sc(c, x, 0)), sc(c, x, 1));
  }
  if (name == "Elu")
    return lt::where(x < sc(c, x, 0), (x.exp() - sc(c, x, 1)) * sc(c, x, alpha), x);
  if (name == "Softsign") return x / (x.abs() + sc(c, x, 1));
  if (name == "Softplus") return x.softplus();
  c.error("activation '" + name + "' is not supported");
}

Vals op_rnn(Ctx& c, const NodeP& n, Vals& in, int kind) {  // 0 RNN 1 GRU 2 LSTM
  Tensor X = c.T(in.at(0)), W = c.T(in.at(1)), R = c.T(in.at(2));
  need_rank(c, X, 3, 3, "X");
  need_rank(c, W, 3, 3, "W");
  need_rank(c, R, 3, 3, "R");
  int64_t layout = c.attr_i("layout", 0);
  if (layout == 1) X = X.permute({1, 0, 2});
  auto xs = X.shape();
  int64_t T = xs[0], B = xs[1];
  int64_t H = c.attr_i("hidden_size", R.shape()[2]);
  int gates = kind == 0 ? 1 : kind == 1 ? 3 : 4;
  std::string dir = c.attr_s("direction", "forward");
  int64_t ndir = dir == "bidirectional" ? 2 : 1;
  if (W.shape() != std::vector<int64_t>{ndir, gates * H, xs[2]} ||
      R.shape() != std::vector<int64_t>{ndir, gates * H, H}) {
    c.error("W " + lt::detail::shape_string(W.shape()) + " and R " +
            lt::detail::shape_string(R.shape()) + " do not fit hidden_size " + std::to_string(H) +
            ", " + std::to_string(ndir) + " directions and input size " + std::to_string(xs[2]));
  }
  Tensor Bias = in.size() > 3 && in[3].present ? c.T(in[3]) : Tensor();
  if (in.size() > 4 && in[4].present) {
    auto sl = c.ints(in[4]);
    for (int64_t v : sl) {
      if (v != T) c.error("sequence_lens shorter than the sequence are not supported");
    }
  }
  Tensor H0 = in.size() > 5 && in[5].present ? c.T(in[5]) : Tensor();
  Tensor C0 = kind == 2 && in.size() > 6 && in[6].present ? c.T(in[6]) : Tensor();
  Tensor P = kind == 2 && in.size() > 7 && in[7].present ? c.T(in[7]) : Tensor();
  if (layout == 1) {
    if (H0.defined()) H0 = H0.permute({1, 0, 2});
    if (C0.defined()) C0 = C0.permute({1, 0, 2});
  }
  const AttributeP* acts_a = c.attr("activations");
  std::vector<std::string> acts = acts_a ? acts_a->strings : std::vector<std::string>{};
  std::vector<float> alphas =
      c.attr("activation_alpha") ? c.attr("activation_alpha")->floats : std::vector<float>{};
  std::vector<float> betas =
      c.attr("activation_beta") ? c.attr("activation_beta")->floats : std::vector<float>{};
  int nact = kind == 0 ? 1 : kind == 1 ? 2 : 3;
  std::vector<std::string> defaults = kind == 0 ? std::vector<std::string>{"Tanh"}
                                      : kind == 1
                                          ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                          : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  float clip = c.attr_f("clip", 0.0f);
  bool linear_before_reset = c.attr_i("linear_before_reset", 0) != 0;
  int64_t input_forget = c.attr_i("input_forget", 0);
  if (input_forget) c.error("input_forget is not supported");
  DType dt = X.dtype();
  std::vector<Tensor> ys_dirs, hs, cs;
  for (int64_t d = 0; d < ndir; ++d) {
    auto A = [&](int k, Tensor x) {
      size_t i = static_cast<size_t>(d * nact + k);
      std::string a = i < acts.size() ? acts[i] : defaults[k];
      float al = i < alphas.size() ? alphas[i]
                                   : (a == "LeakyRelu"     ? 0.01f
                                      : a == "HardSigmoid" ? 0.2f
                                                           : 1.0f);
      float be = i < betas.size() ? betas[i] : (a == "HardSigmoid" ? 0.5f : 0.0f);
      if (clip > 0 && k == 0) x = lt::minimum(lt::maximum(x, sc(c, x, -clip)), sc(c, x, clip));
      return act(c, a, x, al, be);
    };
    auto clipx = [&](Tensor x) {
      return clip > 0 ? lt::minimum(lt::maximum(x, sc(c, x, -clip)), sc(c, x, clip)) : x;
    };
    Tensor Wd = slice1(W, 0, d, d + 1).reshape({gates * H, W.shape()[2]});
    Tensor Rd = slice1(R, 0, d, d + 1).reshape({gates * H, H});
    Tensor Wb, Rb;
    if (Bias.defined()) {
      Tensor bd = slice1(Bias, 0, d, d + 1).reshape({2 * gates * H});
      Wb = slice1(bd, 0, 0, gates * H);
      Rb = slice1(bd, 0, gates * H, 2 * gates * H);
    } else {
      Wb = lt::zeros(c.dev, {gates * H}, dt);
      Rb = lt::zeros(c.dev, {gates * H}, dt);
    }
    Tensor h =
        H0.defined() ? slice1(H0, 0, d, d + 1).reshape({B, H}) : lt::zeros(c.dev, {B, H}, dt);
    Tensor cell =
        C0.defined() ? slice1(C0, 0, d, d + 1).reshape({B, H}) : lt::zeros(c.dev, {B, H}, dt);
    Tensor Wt = Wd.t(), Rt = Rd.t();
    std::vector<Tensor> ys(T);
    bool reverse = dir == "reverse" || d == 1;
    for (int64_t step = 0; step < T; ++step) {
      int64_t tt = reverse ? T - 1 - step : step;
      Tensor xt = slice1(X, 0, tt, tt + 1).reshape({B, xs[2]});
      Tensor xw = xt.matmul(Wt) + Wb;
      if (kind == 0) {
        h = A(0, clipx(xw + h.matmul(Rt) + Rb));
      } else if (kind == 1) {
        Tensor hr = h.matmul(Rt);
        auto g = [&](const Tensor& t, int k) { return slice1(t, 1, k * H, (k + 1) * H); };
        auto gb = [&](const Tensor& t, int k) { return slice1(t, 0, k * H, (k + 1) * H); };
        Tensor z = A(0, clipx(g(xw, 0) + g(hr, 0) + gb(Rb, 0)));
        Tensor r = A(0, clipx(g(xw, 1) + g(hr, 1) + gb(Rb, 1)));
        Tensor hh;
        if (linear_before_reset) {
          hh = A(1, clipx(g(xw, 2) + r * (g(hr, 2) + gb(Rb, 2))));
        } else {
          Tensor Rh = slice1(Rd, 0, 2 * H, 3 * H);
          hh = A(1, clipx(g(xw, 2) + (r * h).matmul(Rh.t()) + gb(Rb, 2)));
        }
        h = (sc(c, z, 1) - z) * hh + z * h;
      } else {
        Tensor gsum = xw + h.matmul(Rt) + Rb;
        auto g = [&](int k) { return slice1(gsum, 1, k * H, (k + 1) * H); };
        Tensor pi, po, pf;
        if (P.defined()) {
          Tensor pd = slice1(P, 0, d, d + 1).reshape({3 * H});
          pi = slice1(pd, 0, 0, H);
          po = slice1(pd, 0, H, 2 * H);
          pf = slice1(pd, 0, 2 * H, 3 * H);
        }
        Tensor ig = g(0), og = g(1), fg = g(2), cg = g(3);
        if (P.defined()) {
          ig = ig + pi * cell;
          fg = fg + pf * cell;
        }
        Tensor i_ = A(0, clipx(ig)), f_ = A(0, clipx(fg)), c_ = A(1, clipx(cg));
        cell = f_ * cell + i_ * c_;
        if (P.defined()) og = og + po * cell;
        Tensor o_ = A(0, clipx(og));
        h = o_ * A(2, cell);
      }
      ys[tt] = h.reshape({1, 1, B, H});
    }
    ys_dirs.push_back(lt::concat(ys, 0));
    hs.push_back(h.reshape({1, B, H}));
    cs.push_back(cell.reshape({1, B, H}));
  }
  Tensor Y = lt::concat(ys_dirs, 1);
  Tensor Yh = lt::concat(hs, 0), Yc = lt::concat(cs, 0);
  if (layout == 1) {
    Y = Y.permute({2, 0, 1, 3});
    Yh = Yh.permute({1, 0, 2});
    Yc = Yc.permute({1, 0, 2});
  }
  int32_t ot = in[0].ot;
  Vals out = {c.from_tensor(Y, ot), c.from_tensor(Yh, ot)};
  if (kind == 2) out.push_back(c.from_tensor(Yc, ot));
  (void)n;
  return out;
}

// Einsum by broadcasting products and sums; a letter repeated in one operand (a diagonal)
// becomes two letters tied by an identity mask.
Vals op_einsum(Ctx& c, const NodeP&, Vals& in) {
  std::string eq = c.attr_s("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  size_t p = 0;
  while (true) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != in.size())
    c.error("equation has " + std::to_string(terms.size()) + " operands");
  for (char ch : eq) {
    if (!std::isalpha(static_cast<unsigned char>(ch)) && ch != ',' && ch != '-' && ch != '>' &&
        ch != '.') {
      c.error(std::string("equation has the character '") + ch + "'");
    }
  }
  if (eq.find("...") != std::string::npos) {
    // Ellipsis: expand to letters A, B, ... for the broadcast dims.
    size_t maxr = 0;
    for (size_t i = 0; i < terms.size(); ++i) {
      size_t e = terms[i].find("...");
      if (e == std::string::npos) continue;
      size_t rank = c.T(in[i]).rank(), named = terms[i].size() - 3;
      if (rank < named || rank - named > 20) {
        c.error("operand " + std::to_string(i) + " of rank " + std::to_string(rank) +
                " does not fit '" + terms[i] + "'");
      }
      maxr = std::max(maxr, rank - named);
    }
    auto expand = [&](std::string t, size_t r) {
      size_t e = t.find("...");
      if (e == std::string::npos) return t;
      std::string letters;
      for (size_t k = maxr - r; k < maxr; ++k) letters += static_cast<char>('A' + k);
      return t.substr(0, e) + letters + t.substr(e + 3);
    };
    for (size_t i = 0; i < terms.size(); ++i) {
      if (terms[i].find("...") == std::string::npos) continue;
      terms[i] = expand(terms[i], c.T(in[i]).rank() - (terms[i].size() - 3));
    }
    if (arrow != std::string::npos) {
      std::string rhs = eq.substr(arrow + 2);
      std::string letters;
      for (size_t k = 0; k < maxr; ++k) letters += static_cast<char>('A' + k);
      size_t e = rhs.find("...");
      if (e != std::string::npos) rhs = rhs.substr(0, e) + letters + rhs.substr(e + 3);
      eq = lhs + "->" + rhs;
    } else {
      eq = lhs;
    }
  }
  std::string out_t;
  if (arrow != std::string::npos) {
    out_t = eq.substr(eq.find("->") + 2);
  } else {
    std::map<char, int> cnt;
    for (auto& t : terms)
      for (char ch : t) cnt[ch]++;
    for (char ch = 'A'; ch <= 'Z'; ++ch)
      if (cnt.count(ch)) out_t += ch;
    for (auto& [ch, k] : cnt)
      if (k == 1 && ch >= 'a') out_t += ch;
  }
  std::map<char, int64_t> size;
  std::string all;
  std::vector<Tensor> ops;
  for (size_t i = 0; i < terms.size(); ++i) {
    Tensor x = c.T(in[i]);
    if (!is_float(x.dtype())) x = x.cast(LT_DTYPE_F64);
    std::string t = terms[i];
    if (t.size() != x.rank())
      c.error("operand " + std::to_string(i) + " rank does not match '" + t + "'");
    auto s = x.shape();
    // Diagonals: a repeated letter is renamed and tied by an eye mask.
    for (size_t a = 0; a < t.size(); ++a) {
      for (size_t b = a + 1; b < t.size(); ++b) {
        if (t[a] != t[b]) continue;
        char fresh = 0;
        for (char ch = 'z'; ch > 'A'; --ch) {
          if (eq.find(ch) == std::string::npos && all.find(ch) == std::string::npos &&
              t.find(ch) == std::string::npos) {
            fresh = ch;
            break;
          }
        }
        t[b] = fresh;
        std::vector<int64_t> es(t.size(), 1);
        es[a] = s[a];
        es[b] = s[b];
        std::vector<int64_t> ra(t.size(), 1), rb(t.size(), 1);
        ra[a] = s[a];
        rb[b] = s[b];
        Tensor ia = lt::arange(c.dev, 0, double(s[a]), 1, LT_DTYPE_I64).reshape(ra);
        Tensor ib = lt::arange(c.dev, 0, double(s[b]), 1, LT_DTYPE_I64).reshape(rb);
        x = (x * (ia == ib).cast(x.dtype())).sum({static_cast<int64_t>(b)}, true);
        s[b] = 1;
        std::string t2 = t;
        t2[b] = '#';
        t = t2;
      }
    }
    // Drop the summed-away diagonal placeholders.
    std::string t3;
    std::vector<int64_t> s3;
    for (size_t k = 0; k < t.size(); ++k) {
      if (t[k] == '#') continue;
      t3 += t[k];
      s3.push_back(s[k]);
    }
    x = x.reshape(s3);
    for (size_t k = 0; k < t3.size(); ++k) {
      if (!size.count(t3[k]) || size[t3[k]] == 1) size[t3[k]] = s3[k];
      if (all.find(t3[k]) == std::string::npos) all += t3[k];
    }
    terms[i] = t3;
    ops.push_back(x);
  }
  // Align every operand to `all` and multiply.
  Tensor prod;
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string t = terms[i];
    std::vector<int64_t> perm;
    std::string present;
    for (char ch : all) {
      size_t k = t.find(ch);
      if (k != std::string::npos) {
        perm.push_back(static_cast<int64_t>(k));
        present += ch;
      }
    }
    Tensor x = ops[i].permute(perm);
    std::vector<int64_t> rs;
    auto xs = x.shape();
    size_t j = 0;
    for (char ch : all) rs.push_back(present.find(ch) != std::string::npos ? xs[j++] : 1);
    x = x.reshape(rs);
    prod = prod.defined() ? prod * x : x;
  }
  std::vector<int64_t> sum_axes;
  std::string kept;
  for (size_t k = 0; k < all.size(); ++k) {
    if (out_t.find(all[k]) == std::string::npos)
      sum_axes.push_back(static_cast<int64_t>(k));
    else
      kept += all[k];
  }
  auto ps = prod.shape();
  std::vector<int64_t> full_s;
  for (char ch : all) full_s.push_back(size[ch]);
  if (ps != full_s) prod = prod.broadcast_to(full_s);
  if (!sum_axes.empty()) prod = prod.sum(sum_axes, false);
  std::vector<int64_t> perm;
  for (char ch : out_t) perm.push_back(static_cast<int64_t>(kept.find(ch)));
  if (!perm.empty()) prod = prod.permute(perm);
  Tensor x0 = c.T(in[0]);
  return one(c, cast_to(prod, x0.dtype()), in[0].ot);
}

// TopK by ranks from pairwise comparisons (no sort op in the table): O(n^2) along the axis.
Vals op_topk(Ctx& c, const NodeP&, Vals& in) {
  Tensor x = c.T(in.at(0));
  int64_t k = c.opset >= 10 ? c.ints(in.at(1)).at(0) : c.attr_i("k", 1);
  int64_t r = static_cast<int64_t>(x.rank());
  int64_t axis = norm_axis(c, c.attr_i("axis", -1), r);
  bool largest = c.attr_i("largest", 1) != 0;
  auto perm = perm_to_last(axis, r);
  Tensor xt = x.permute(perm);
  Tensor xf = is_float(xt.dtype()) ? xt : xt.cast(LT_DTYPE_F64);
  if (!largest) xf = -xf;
  auto s = xf.shape();
  int64_t len = s.back();
  if (k > len || k < 0)
    c.error("k " + std::to_string(k) + " out of range for axis length " + std::to_string(len));
  auto s_i = s, s_j = s;
  s_i.push_back(1);
  s_j.insert(s_j.end() - 1, 1);
  Tensor xi = xf.reshape(s_i), xj = xf.reshape(s_j);  // [..., n, 1] and [..., 1, n]
  std::vector<int64_t> ri(s.size() + 1, 1), rj(s.size() + 1, 1);
  ri[s.size() - 1] = len;
  rj[s.size()] = len;
  Tensor ii = lt::arange(c.dev, 0, double(len), 1, LT_DTYPE_I64).reshape(ri);
  Tensor jj = lt::arange(c.dev, 0, double(len), 1, LT_DTYPE_I64).reshape(rj);
  Tensor before = (xj > xi) || ((xj == xi) && (jj < ii));
  Tensor rank = before.cast(LT_DTYPE_I64).sum({static_cast<int64_t>(s.size())}, false);  // [..., n]
  // onehot[..., n, k] = rank == k
  std::vector<int64_t> rk(s.size() + 1, 1);
  rk[s.size()] = k;
  Tensor kk = lt::arange(c.dev, 0, double(k), 1, LT_DTYPE_I64).reshape(rk);
  auto s_r = s;
  s_r.push_back(1);
  Tensor hot = rank.reshape(s_r) == kk;  // [..., n, k]
  Tensor vals = lt::where(hot, xt.reshape(s_i).broadcast_to([&] {
                  auto z = s;
                  z.push_back(k);
                  return z;
                }()),
                          lt::zeros(c.dev, {}, xt.dtype()))
                    .sum({static_cast<int64_t>(s.size() - 1)}, false);
  Tensor idx = lt::where(hot, ii.broadcast_to([&] {
                 auto z = s;
                 z.push_back(k);
                 return z;
               }()),
                         lt::zeros(c.dev, {}, LT_DTYPE_I64))
                   .sum({static_cast<int64_t>(s.size() - 1)}, false);
  auto inv = inverse_perm(perm);
  return {c.from_tensor(vals.permute(inv), in[0].ot), c.from_tensor(idx.permute(inv), kInt64)};
}

std::map<std::string, OpEntry> build_table() {
  std::map<std::string, OpEntry> t;
  // Elementwise math.
  t["Abs"] = unary([](Ctx&, Tensor x) { return x.abs(); }, false);
  t["Neg"] = unary([](Ctx&, Tensor x) { return x.neg(); }, false);
  t["Exp"] = unary([](Ctx&, Tensor x) { return x.exp(); });
  t["Log"] = unary([](Ctx&, Tensor x) { return x.log(); });
  t["Sqrt"] = unary([](Ctx&, Tensor x) { return x.sqrt(); });
  t["Tanh"] = unary([](Ctx&, Tensor x) { return x.tanh(); });
  t["Sigmoid"] = unary([](Ctx&, Tensor x) { return x.sigmoid(); });
  t["Relu"] = unary([](Ctx&, Tensor x) { return x.relu(); }, false);
  t["Sin"] = unary([](Ctx&, Tensor x) { return x.sin(); });
  t["Cos"] = unary([](Ctx&, Tensor x) { return x.cos(); });
  t["Tan"] = unary([](Ctx&, Tensor x) { return x.sin() / x.cos(); });
  t["Floor"] = unary([](Ctx&, Tensor x) { return x.floor(); });
  t["Ceil"] = unary([](Ctx&, Tensor x) { return -((-x).floor()); });
  t["Round"] = unary([](Ctx& c, Tensor x) { return round_even(c, x); });
  t["Erf"] = unary([](Ctx&, Tensor x) { return x.erf(); });
  t["Softplus"] = unary([](Ctx&, Tensor x) { return x.softplus(); });
  t["Softsign"] = unary([](Ctx& c, Tensor x) { return x / (x.abs() + sc(c, x, 1)); });
  t["Reciprocal"] = unary([](Ctx& c, Tensor x) { return sc(c, x, 1) / x; });
  t["Sinh"] = unary([](Ctx& c, Tensor x) { return (x.exp() - (-x).exp()) * sc(c, x, 0.5); });
  t["Cosh"] = unary([](Ctx& c, Tensor x) { return (x.exp() + (-x).exp()) * sc(c, x, 0.5); });
  t["Asinh"] = unary([](Ctx& c, Tensor x) { return (x + (x * x + sc(c, x, 1)).sqrt()).log(); });
  t["Acosh"] = unary([](Ctx& c, Tensor x) { return (x + (x * x - sc(c, x, 1)).sqrt()).log(); });
  t["Atanh"] = unary([](Ctx& c, Tensor x) {
    return ((sc(c, x, 1) + x) / (sc(c, x, 1) - x)).log() * sc(c, x, 0.5);
  });
  t["Atan"] = unary([](Ctx& c, Tensor x) { return atan_t(c, x); });
  t["Asin"] = unary([](Ctx& c, Tensor x) { return atan_t(c, x / (sc(c, x, 1) - x * x).sqrt()); });
  t["Acos"] = unary([](Ctx& c, Tensor x) {
    return sc(c, x, M_PI / 2) - atan_t(c, x / (sc(c, x, 1) - x * x).sqrt());
  });
  t["Sign"] = unary(
      [](Ctx&, Tensor x) {
        return (x > lt::zeros(x.device(), {}, x.dtype())).cast(x.dtype()) -
               (x < lt::zeros(x.device(), {}, x.dtype())).cast(x.dtype());
      },
      false);
  t["IsNaN"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  Tensor x = c.T(in.at(0));
                  (void)n;
                  return one(c, x != x, kBool);
                },
                9};
  t["IsInf"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  Tensor x = c.T(in.at(0));
                  (void)n;
                  bool pos = c.attr_i("detect_positive", 1), neg = c.attr_i("detect_negative", 1);
                  Tensor inf = sc(c, x, std::numeric_limits<double>::infinity());
                  Tensor r = lt::zeros(c.dev, x.shape(), LT_DTYPE_BOOL);
                  if (pos) r = r || (x == inf);
                  if (neg) r = r || (x == -inf);
                  return one(c, r, kBool);
                },
                10};
  t["Not"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                return one(c, c.T(in.at(0)).logical_not(), kBool);
              },
              1};
  t["Elu"] = unary([](Ctx& c, Tensor x) {
    double a = c.attr_f("alpha", 1.0f);
    return lt::where(x < sc(c, x, 0), (x.exp() - sc(c, x, 1)) * sc(c, x, a), x);
  });
  t["Celu"] = unary([](Ctx& c, Tensor x) {
    double a = c.attr_f("alpha", 1.0f);
    return lt::maximum(x, sc(c, x, 0)) +
           lt::minimum(sc(c, x, 0), ((x / sc(c, x, a)).exp() - sc(c, x, 1)) * sc(c, x, a));
  });
  t["Selu"] = unary([](Ctx& c, Tensor x) {
    double a = c.attr_f("alpha", 1.67326319217681884765625f),
           g = c.attr_f("gamma", 1.05070102214813232421875f);
    return lt::where(x > sc(c, x, 0), x, (x.exp() - sc(c, x, 1)) * sc(c, x, a)) * sc(c, x, g);
  });
  t["LeakyRelu"] = unary([](Ctx& c, Tensor x) {
    return lt::where(x < sc(c, x, 0), x * sc(c, x, c.attr_f("alpha", 0.01f)), x);
  });
  t["ThresholdedRelu"] = unary([](Ctx& c, Tensor x) {
    return lt::where(x > sc(c, x, c.attr_f("alpha", 1.0f)), x, sc(c, x, 0));
  });
  t["HardSigmoid"] = unary([](Ctx& c, Tensor x) {
    return lt::minimum(
        lt::maximum(x * sc(c, x, c.attr_f("alpha", 0.2f)) + sc(c, x, c.attr_f("beta", 0.5f)),
                    sc(c, x, 0)),
        sc(c, x, 1));
  });
  t["HardSwish"] = unary([](Ctx& c, Tensor x) {
    return x * lt::minimum(lt::maximum(x * sc(c, x, 1.0 / 6) + sc(c, x, 0.5), sc(c, x, 0)),
                           sc(c, x, 1));
  });
  t["Shrink"] = unary(
      [](Ctx& c, Tensor x) {
        double l = c.attr_f("lambd", 0.5f), b = c.attr_f("bias", 0.0f);
        Tensor xf = is_float(x.dtype()) ? x : x.cast(LT_DTYPE_F64);
        Tensor r = lt::where(xf < sc(c, xf, -l), xf + sc(c, xf, b),
                             lt::where(xf > sc(c, xf, l), xf - sc(c, xf, b), sc(c, xf, 0)));
        return cast_to(r, x.dtype());
      },
      false);
  t["PRelu"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0)), s = c.T(in.at(1));
        // Before opset 7 a slope of shape [C] applies along the channel axis.
        if (c.opset < 7 && s.rank() == 1 && x.rank() > 2 && s.shape()[0] == x.shape()[1]) {
          std::vector<int64_t> rs(x.rank() - 1, 1);
          rs[0] = s.shape()[0];
          s = s.reshape(rs);
        }
        return one(c, lt::where(x < sc(c, x, 0), x * s, x), in[0].ot);
      },
      1};
  t["Clip"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        if (c.opset < 11) {
          x = lt::maximum(x, sc(c, x, c.attr_f("min", -std::numeric_limits<float>::infinity())));
          x = lt::minimum(x, sc(c, x, c.attr_f("max", std::numeric_limits<float>::infinity())));
        } else {
          if (in.size() > 1 && in[1].present) x = lt::maximum(x, c.T(in[1]));
          if (in.size() > 2 && in[2].present) x = lt::minimum(x, c.T(in[2]));
          x = x + sc(c, x, 0);
        }
        return one(c, x, in[0].ot);
      },
      1};
  t["Add"] = binary_arith("add");
  t["Sub"] = binary_arith("sub");
  t["Mul"] = binary_arith("mul");
  t["Div"] = binary_arith("div");
  t["Pow"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                Tensor x = c.T(in.at(0)), y = c.T(in.at(1));
                DType dt = x.dtype();
                DType w = is_float(dt) ? dt : LT_DTYPE_F64;
                if (w == LT_DTYPE_F32 && !is_float(y.dtype())) w = LT_DTYPE_F64;
                Tensor r = cast_to(x, w).pow(cast_to(y, w));
                if (is_int(dt)) r = round_even(c, r);
                return one(c, cast_to(r, dt), in[0].ot);
              },
              1};
  t["Mod"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                Tensor x = c.T(in.at(0)), y = c.T(in.at(1));
                DType dt = x.dtype();
                Tensor xf = cast_to(x, is_float(dt) ? dt : LT_DTYPE_F64),
                       yf = cast_to(y, xf.dtype());
                Tensor q = xf / yf;
                Tensor r;
                if (c.attr_i("fmod", 0)) {
                  Tensor tq = lt::where(q < sc(c, q, 0), -((-q).floor()), q.floor());
                  r = xf - tq * yf;
                } else {
                  r = xf - q.floor() * yf;
                }
                return one(c, cast_to(r, dt), in[0].ot);
              },
              1};
  t["BitShift"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                     (void)n;
                     Tensor x = c.T(in.at(0)), y = c.T(in.at(1));
                     Tensor p = lt::full(c.dev, {}, 2.0, LT_DTYPE_F64).pow(y.cast(LT_DTYPE_F64));
                     Tensor xf = x.cast(LT_DTYPE_F64);
                     Tensor r = c.attr_s("direction", "") == "LEFT" ? xf * p : (xf / p).floor();
                     return one(c, r.cast(x.dtype()), in[0].ot);
                   },
                   11};
  t["Max"] = variadic(0);
  t["Min"] = variadic(1);
  t["Sum"] = variadic(2);
  t["Mean"] = variadic(3);
  t["Equal"] = compare(0);
  t["Less"] = compare(1);
  t["Greater"] = compare(2);
  t["LessOrEqual"] = compare(3);
  t["GreaterOrEqual"] = compare(4);
  t["And"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                return one(c, c.T(in.at(0)) && c.T(in.at(1)), kBool);
              },
              1};
  t["Or"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
               (void)n;
               return one(c, c.T(in.at(0)) || c.T(in.at(1)), kBool);
             },
             1};
  t["Xor"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                return one(c, c.T(in.at(0)) != c.T(in.at(1)), kBool);
              },
              1};
  t["Where"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        if (all_host({in.at(0), in.at(1), in.at(2)})) {
          auto os = bcast_shape(c, bcast_shape(c, in[0].h->shape, in[1].h->shape), in[2].h->shape);
          int64_t cnt = numel_of(os);
          if (cnt > (int64_t(1) << 20))
            c.error("a shape computation of " + std::to_string(cnt) + " elements");
          std::vector<double> v(cnt);
          for (int64_t i = 0; i < cnt; ++i)
            v[i] = bread(*in[0].h, os, i) != 0 ? bread(*in[1].h, os, i) : bread(*in[2].h, os, i);
          return {c.from_host(os, v, in[1].ot, true)};
        }
        return one(c, lt::where(c.T(in[0]), c.T(in[1]), c.T(in[2])), in[1].ot);
      },
      1};
  auto cast_fn = [](Ctx& c, Value& v, int32_t to) -> Value {
    if (to == kString || carrier_dtype(to) == LT_DTYPE_INVALID) {
      c.error(std::string("cast to ") + onnx_type_name(to) + " is not supported");
    }
    if (v.h && v.shape_class && is_int(carrier_dtype(to))) {
      std::vector<double> vals = v.h->v;
      for (double& d : vals) d = std::trunc(d);
      return c.from_host(v.h->shape, vals, to, true);
    }
    Tensor x = c.T(v);
    DType d = carrier_dtype(to);
    Tensor r = cast_to(x, d);
    // Narrow integer types wrap like the C conversion.
    if (to == kUint8 || to == kInt8 || to == kUint16 || to == kInt16) {
      double m = (to == kUint8 || to == kInt8) ? 256 : 65536;
      Tensor f = r.cast(LT_DTYPE_F64);
      Tensor w = f - (f / c.scalar(m, LT_DTYPE_F64)).floor() * c.scalar(m, LT_DTYPE_F64);
      if (to == kInt8 || to == kInt16)
        w = lt::where(w >= c.scalar(m / 2, LT_DTYPE_F64), w - c.scalar(m, LT_DTYPE_F64), w);
      r = w.cast(d);
    }
    if (r.is_same(x)) r = x + sc(c, x, 0);
    return c.from_tensor(r, to);
  };
  t["Cast"] = {[cast_fn](Ctx& c, const NodeP&, Vals& in) -> Vals {
                 return {cast_fn(c, in.at(0), static_cast<int32_t>(c.attr_i("to", kFloat)))};
               },
               1};
  t["CastLike"] = {[cast_fn](Ctx& c, const NodeP&, Vals& in) -> Vals {
                     return {cast_fn(c, in.at(0), in.at(1).ot)};
                   },
                   15};
  t["Identity"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                     (void)n;
                     (void)c;
                     return {in.at(0)};
                   },
                   1};
  t["Dropout"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        if (in.size() > 2 && in[2].present && c.ints(in[2]).at(0) != 0) {
          double ratio = in.size() > 1 && in[1].present ? c.doubles(in[1]).at(0) : 0.5;
          if (ratio != 0) c.error("training_mode dropout with ratio > 0 (random) is not supported");
        }
        Vals out = {in.at(0)};
        out.push_back(c.from_tensor(lt::ones(c.dev, shape_of(c, in[0]), LT_DTYPE_BOOL), kBool));
        return out;
      },
      1};

  // Constants and shapes (evaluated on the host).
  t["Constant"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        for (const AttributeP& a : c.node->attributes) {
          if (a.name == "value") {
            if (a.t.empty()) c.error("value has no tensor");
            RawTensor r = decode_tensor(a.t[0], c.base_dir, "Constant value");
            Value v;
            v.present = true;
            v.ot = r.ot;
            lt_tensor* o = nullptr;
            check(lt_tensor_from_host(c.dev.get(), carrier_dtype(r.ot), r.shape.data(),
                                      r.shape.size(), r.bytes.data(), r.bytes.size(), &o));
            v.t = Tensor(o);
            if (r.numel() <= 4096 && is_int(carrier_dtype(r.ot))) {
              auto h = std::make_shared<HostVals>();
              h->shape = r.shape;
              h->v = raw_to_doubles(r);
              v.h = h;
              v.shape_class = true;
            }
            return {v};
          }
          if (a.name == "value_float") return {c.from_host({}, {a.f}, kFloat, false)};
          if (a.name == "value_floats")
            return {c.from_host({int64_t(a.floats.size())},
                                std::vector<double>(a.floats.begin(), a.floats.end()), kFloat,
                                false)};
          if (a.name == "value_int") return {c.from_host({}, {double(a.i)}, kInt64, true)};
          if (a.name == "value_ints")
            return {c.from_host({int64_t(a.ints.size())},
                                std::vector<double>(a.ints.begin(), a.ints.end()), kInt64, true)};
          if (a.name == "sparse_value") c.error("sparse constants are not supported");
          if (a.name == "value_string" || a.name == "value_strings") {
            fail(LT_STATUS_UNSUPPORTED, "out of scope: string constant");
          }
        }
        c.error("Constant has no value attribute");
      },
      1};
  t["Shape"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  (void)n;
                  auto s = shape_of(c, in.at(0));
                  int64_t r = static_cast<int64_t>(s.size());
                  int64_t st = c.attr_i("start", 0), en = c.attr_i("end", r);
                  if (st < 0) st += r;
                  if (en < 0) en += r;
                  st = std::clamp<int64_t>(st, 0, r);
                  en = std::clamp<int64_t>(en, 0, r);
                  std::vector<double> v;
                  for (int64_t i = st; i < en; ++i) v.push_back(double(s[i]));
                  return {c.from_host({int64_t(v.size())}, v, kInt64, true)};
                },
                1};
  t["Size"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                 (void)n;
                 return {c.from_host({}, {double(numel_of(shape_of(c, in.at(0))))}, kInt64, true)};
               },
               1};
  t["ConstantOfShape"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        auto shape = c.ints(in.at(0));
        double v = 0;
        int32_t ot = kFloat;
        if (const AttributeP* a = c.attr("value"); a && !a->t.empty()) {
          RawTensor r = decode_tensor(a->t[0], c.base_dir, "ConstantOfShape value");
          ot = r.ot;
          auto d = raw_to_doubles(r);
          if (d.size() != 1) c.error("value must have one element");
          v = d[0];
        }
        for (int64_t d : shape) {
          if (d < 0) c.error("negative dim " + std::to_string(d) + " in the shape");
        }
        if (numel_of(shape) <= 4096 && is_int(carrier_dtype(ot))) {
          return {c.from_host(shape, std::vector<double>(numel_of(shape), v), ot, true)};
        }
        return one(c, lt::full(c.dev, shape, v, carrier_dtype(ot)), ot);
      },
      9};
  t["Range"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  (void)n;
                  double st = c.doubles(in.at(0)).at(0), lim = c.doubles(in.at(1)).at(0),
                         d = c.doubles(in.at(2)).at(0);
                  if (d == 0) c.error("delta is 0");
                  double cnt_f = std::ceil((lim - st) / d);
                  if (!(cnt_f < 9e15)) c.error("Range of more than 9e15 elements");
                  int64_t cnt = std::max<int64_t>(0, static_cast<int64_t>(cnt_f));
                  int32_t ot = in[0].ot;
                  if (all_host({in[0], in[1], in[2]}) && cnt <= 4096) {
                    std::vector<double> v(cnt);
                    for (int64_t i = 0; i < cnt; ++i) v[i] = st + i * d;
                    return {c.from_host({cnt}, v, ot, true)};
                  }
                  DType dt = carrier_dtype(ot);
                  Tensor ar = lt::arange(c.dev, 0, double(cnt), 1, dt);
                  return one(c, ar * c.T(in[2]) + c.T(in[0]), ot);
                },
                11};
  t["EyeLike"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        auto s = shape_of(c, in.at(0));
        if (s.size() != 2) c.error("input must have rank 2");
        int32_t ot = static_cast<int32_t>(c.attr_i("dtype", in[0].ot));
        int64_t k = c.attr_i("k", 0);
        Tensor i = lt::arange(c.dev, 0, double(s[0]), 1, LT_DTYPE_I64).reshape({s[0], 1});
        Tensor j = lt::arange(c.dev, 0, double(s[1]), 1, LT_DTYPE_I64).reshape({1, s[1]});
        return one(c, ((j - i) == c.scalar(double(k), LT_DTYPE_I64)).cast(carrier_dtype(ot)), ot);
      },
      9};

  // Layout.
  t["Reshape"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                    (void)n;
                    std::vector<int64_t> shape =
                        c.opset >= 5 ? c.ints(in.at(1)) : c.attr_ints("shape");
                    auto s = shape_of(c, in.at(0));
                    auto target = reshape_target(c, s, shape, c.attr_i("allowzero", 0) != 0);
                    if (all_host({in[0]})) return {c.from_host(target, in[0].h->v, in[0].ot, true)};
                    return one(c, c.T(in[0]).reshape(target), in[0].ot);
                  },
                  1};
  t["Flatten"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                    (void)n;
                    auto s = shape_of(c, in.at(0));
                    int64_t r = static_cast<int64_t>(s.size());
                    int64_t axis = c.attr_i("axis", 1);
                    if (axis < 0) axis += r;
                    if (axis < 0 || axis > r) c.error("axis out of range");
                    int64_t a = 1, b = 1;
                    for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= s[i];
                    return one(c, c.T(in[0]).reshape({a, b}), in[0].ot);
                  },
                  1};
  t["Transpose"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                      (void)n;
                      Tensor x = c.T(in.at(0));
                      auto perm = c.attr_ints("perm");
                      int64_t r = static_cast<int64_t>(x.rank());
                      if (perm.empty())
                        for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
                      return one(c, x.permute(perm), in[0].ot);
                    },
                    1};
  t["Unsqueeze"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                      (void)n;
                      auto axes = c.opset >= 13 ? c.ints(in.at(1)) : c.attr_ints("axes");
                      if (all_host({in.at(0)})) {
                        auto s = in[0].h->shape;
                        int64_t r = static_cast<int64_t>(s.size() + axes.size());
                        for (auto& a : axes) a = norm_axis(c, a, r);
                        std::sort(axes.begin(), axes.end());
                        std::vector<int64_t> out;
                        size_t j = 0, k = 0;
                        for (int64_t i = 0; i < r; ++i) {
                          if (k < axes.size() && axes[k] == i) {
                            out.push_back(1);
                            ++k;
                          } else
                            out.push_back(s[j++]);
                        }
                        return {c.from_host(out, in[0].h->v, in[0].ot, true)};
                      }
                      return one(c, unsqueeze_t(c.T(in[0]), axes, c), in[0].ot);
                    },
                    1};
  t["Squeeze"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        std::vector<int64_t> axes =
            c.opset >= 13
                ? (in.size() > 1 && in[1].present ? c.ints(in[1]) : std::vector<int64_t>{})
                : c.attr_ints("axes");
        auto s = shape_of(c, in.at(0));
        int64_t r = static_cast<int64_t>(s.size());
        for (auto& a : axes) a = norm_axis(c, a, r);
        std::vector<int64_t> out;
        for (int64_t i = 0; i < r; ++i) {
          bool drop =
              axes.empty() ? s[i] == 1 : std::find(axes.begin(), axes.end(), i) != axes.end();
          if (drop && s[i] != 1)
            c.error("cannot squeeze axis " + std::to_string(i) + " of size " +
                    std::to_string(s[i]));
          if (!drop) out.push_back(s[i]);
        }
        if (all_host({in[0]})) return {c.from_host(out, in[0].h->v, in[0].ot, true)};
        return one(c, c.T(in[0]).reshape(out), in[0].ot);
      },
      1};
  t["Concat"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   int64_t axis = c.attr_i("axis", 0);
                   if (all_host(in)) {
                     // Host concat of shape vectors (any rank).
                     std::vector<Value*> vs;
                     for (Value& v : in)
                       if (v.present) vs.push_back(&v);
                     auto s = vs[0]->h->shape;
                     int64_t r = static_cast<int64_t>(s.size());
                     axis = norm_axis(c, axis, r);
                     int64_t outer = 1, total = 0;
                     for (int64_t i = 0; i < axis; ++i) outer *= s[i];
                     for (Value* v : vs) total += v->h->shape[axis];
                     std::vector<double> out;
                     for (int64_t o = 0; o < outer; ++o) {
                       for (Value* v : vs) {
                         int64_t chunk = numel_of(v->h->shape) / std::max<int64_t>(outer, 1);
                         for (int64_t q = 0; q < chunk; ++q) out.push_back(v->h->v[o * chunk + q]);
                       }
                     }
                     s[axis] = total;
                     return {c.from_host(s, out, vs[0]->ot, true)};
                   }
                   std::vector<Tensor> ts;
                   int32_t ot = 0;
                   for (Value& v : in) {
                     if (!v.present) continue;
                     ts.push_back(c.T(v));
                     ot = v.ot;
                   }
                   int64_t r = static_cast<int64_t>(ts[0].rank());
                   return one(c, lt::concat(ts, norm_axis(c, axis, r)), ot);
                 },
                 1};
  t["Split"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  int64_t axis = c.attr_i("axis", 0);
                  Tensor x = c.T(in.at(0));
                  int64_t r = static_cast<int64_t>(x.rank());
                  axis = norm_axis(c, axis, r);
                  int64_t d = x.shape()[axis];
                  std::vector<int64_t> split =
                      c.opset >= 13 ? (in.size() > 1 && in[1].present ? c.ints(in[1])
                                                                      : std::vector<int64_t>{})
                                    : c.attr_ints("split");
                  int64_t k = static_cast<int64_t>(n.outputs.size());
                  if (split.empty()) {
                    int64_t ns = c.attr_i("num_outputs", k);
                    int64_t each = (d + ns - 1) / ns;
                    for (int64_t i = 0; i < ns; ++i) split.push_back(std::min(each, d - each * i));
                  }
                  Vals out;
                  int64_t pos = 0;
                  for (int64_t len : split) {
                    out.push_back(c.from_tensor(slice1(x, axis, pos, pos + len), in[0].ot));
                    pos += len;
                  }
                  if (pos != d)
                    c.error("split sizes do not add up to the axis length " + std::to_string(d));
                  return out;
                },
                1};
  t["Slice"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  (void)n;
                  std::vector<int64_t> starts, ends, axes, steps;
                  if (c.opset >= 10) {
                    starts = c.ints(in.at(1));
                    ends = c.ints(in.at(2));
                    if (in.size() > 3 && in[3].present) axes = c.ints(in[3]);
                    if (in.size() > 4 && in[4].present) steps = c.ints(in[4]);
                  } else {
                    starts = c.attr_ints("starts");
                    ends = c.attr_ints("ends");
                    axes = c.attr_ints("axes");
                  }
                  if (all_host({in[0]})) {
                    // Host slice of a shape value via a temporary on the device would defeat
                    // folding: do it here (1-D shape vectors only).
                    if (in[0].h->shape.size() == 1 && (steps.empty() || steps[0] == 1) &&
                        starts.size() == 1) {
                      int64_t d = in[0].h->shape[0];
                      int64_t b = starts[0], e = ends[0];
                      if (b < 0) b += d;
                      if (e < 0) e += d;
                      b = std::clamp<int64_t>(b, 0, d);
                      e = std::clamp<int64_t>(e, 0, d);
                      std::vector<double> v;
                      for (int64_t i = b; i < e; ++i) v.push_back(in[0].h->v[i]);
                      return {c.from_host({int64_t(v.size())}, v, in[0].ot, true)};
                    }
                  }
                  return one(c, onnx_slice(c, c.T(in[0]), starts, ends, axes, steps), in[0].ot);
                },
                1};
  t["Gather"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   int64_t axis = c.attr_i("axis", 0);
                   if (all_host({in.at(0), in.at(1)})) return {host_gather(c, in[0], in[1], axis)};
                   Tensor x = c.T(in[0]);
                   int64_t r = static_cast<int64_t>(x.rank());
                   axis = norm_axis(c, axis, r);
                   Tensor idx = wrap_index(c, c.T(in[1]), x.shape()[axis]);
                   return one(c, x.gather(idx, axis), in[0].ot);
                 },
                 1};
  t["GatherElements"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                           (void)n;
                           Tensor x = c.T(in.at(0));
                           auto s = x.shape();
                           int64_t axis =
                               norm_axis(c, c.attr_i("axis", 0), static_cast<int64_t>(s.size()));
                           Tensor idx = wrap_index(c, c.T(in.at(1)), s[axis]);
                           Tensor flat = flat_index(c, s, idx, axis);
                           return one(c, x.reshape({numel_of(s)}).gather(flat, 0), in[0].ot);
                         },
                         11};
  t["GatherND"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        Tensor idx = c.T(in.at(1));
        if (idx.dtype() != LT_DTYPE_I64) idx = idx.cast(LT_DTYPE_I64);
        auto s = x.shape();
        auto is = idx.shape();
        int64_t b = c.attr_i("batch_dims", 0);
        int64_t q = is.back();
        // Flat index over the batch dims and the q indexed dims.
        std::vector<int64_t> lead(s.begin(), s.begin() + b + q);
        std::vector<int64_t> rest(s.begin() + b + q, s.end());
        auto st = strides_of(lead);
        Tensor flat;
        std::vector<int64_t> out_idx_shape(is.begin(), is.end() - 1);
        for (int64_t k = 0; k < q; ++k) {
          Tensor ik =
              slice1(idx, static_cast<int64_t>(is.size() - 1), k, k + 1).reshape(out_idx_shape);
          ik = wrap_index(c, ik, s[b + k]);
          Tensor term = ik * sc(c, ik, double(st[b + k]));
          flat = flat.defined() ? flat + term : term;
        }
        for (int64_t k = 0; k < b; ++k) {
          std::vector<int64_t> vs(out_idx_shape.size(), 1);
          vs[k] = is[k];
          Tensor ar = lt::arange(c.dev, 0, double(is[k]), 1, LT_DTYPE_I64).reshape(vs);
          flat = flat + ar * sc(c, ar, double(st[k]));
        }
        std::vector<int64_t> xs = {numel_of(lead)};
        for (int64_t v : rest) xs.push_back(v);
        return one(c, x.reshape(xs).gather(flat, 0), in[0].ot);
      },
      11};
  auto scatter_elems = [](Ctx& c, Vals& in, int64_t axis, const std::string& red) -> Vals {
    Tensor x = c.T(in.at(0));
    auto s = x.shape();
    axis = norm_axis(c, axis, static_cast<int64_t>(s.size()));
    Tensor idx = wrap_index(c, c.T(in.at(1)), s[axis]);
    Tensor upd = c.T(in.at(2));
    Tensor flat = flat_index(c, s, idx, axis);
    int64_t m = numel_of(flat.shape()), N = numel_of(s);
    flat = flat.reshape({m});
    upd = upd.reshape({m});
    Tensor xf = x.reshape({N});
    Tensor added = lt::zeros(c.dev, {N}, x.dtype()).scatter_add(flat, upd, 0);
    Tensor r;
    if (red == "add") {
      r = xf + added;
    } else if (red == "none" || red.empty()) {
      Tensor hit =
          lt::zeros(c.dev, {N}, LT_DTYPE_I64)
              .scatter_add(flat, lt::ones(c.dev, {m}, LT_DTYPE_I64), 0) > c.scalar(0, LT_DTYPE_I64);
      r = lt::where(hit, added, xf);
    } else {
      c.error("reduction '" + red + "' is not supported");
    }
    return one(c, r.reshape(s), in[0].ot);
  };
  t["ScatterElements"] = {[scatter_elems](Ctx& c, const NodeP&, Vals& in) -> Vals {
                            return scatter_elems(c, in, c.attr_i("axis", 0),
                                                 c.attr_s("reduction", "none"));
                          },
                          11};
  t["Scatter"] = {[scatter_elems](Ctx& c, const NodeP&, Vals& in) -> Vals {
                    return scatter_elems(c, in, c.attr_i("axis", 0), "none");
                  },
                  9};
  t["ScatterND"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        Tensor idx = c.T(in.at(1));
        if (idx.dtype() != LT_DTYPE_I64) idx = idx.cast(LT_DTYPE_I64);
        Tensor upd = c.T(in.at(2));
        auto s = x.shape();
        auto is = idx.shape();
        int64_t q = is.back();
        std::vector<int64_t> lead(s.begin(), s.begin() + q), rest(s.begin() + q, s.end());
        auto st = strides_of(lead);
        std::vector<int64_t> ish(is.begin(), is.end() - 1);
        Tensor flat;
        for (int64_t k = 0; k < q; ++k) {
          Tensor ik = wrap_index(
              c, slice1(idx, static_cast<int64_t>(is.size() - 1), k, k + 1).reshape(ish), s[k]);
          Tensor term = ik * sc(c, ik, double(st[k]));
          flat = flat.defined() ? flat + term : term;
        }
        int64_t m = numel_of(ish), L = numel_of(lead), R = numel_of(rest);
        flat = flat.reshape({m});
        Tensor u = upd.reshape({m, R});
        Tensor xf = x.reshape({L, R});
        Tensor added = lt::zeros(c.dev, {L, R}, x.dtype()).scatter_add(flat, u, 0);
        std::string red = c.attr_s("reduction", "none");
        Tensor r;
        if (red == "add") {
          r = xf + added;
        } else if (red == "none") {
          Tensor hit = lt::zeros(c.dev, {L}, LT_DTYPE_I64)
                           .scatter_add(flat, lt::ones(c.dev, {m}, LT_DTYPE_I64), 0) >
                       c.scalar(0, LT_DTYPE_I64);
          r = lt::where(hit.reshape({L, 1}), added, xf);
        } else if (red == "mul") {
          // The product of the updates per target row as exp(sum log|u|) with the sign from
          // the count of negative factors and zero where any factor is zero.
          Tensor uf = is_float(u.dtype()) ? u : u.cast(LT_DTYPE_F64);
          Tensor zero = lt::zeros(c.dev, {L, R}, uf.dtype());
          Tensor mag = zero.scatter_add(flat, uf.abs().log(), 0).exp();
          Tensor neg = zero.scatter_add(flat, (uf < sc(c, uf, 0)).cast(uf.dtype()), 0);
          Tensor half = neg * sc(c, neg, 0.5);
          Tensor sign = sc(c, neg, 1) - (half - half.floor()) * sc(c, neg, 4);
          Tensor prod = mag * sign;
          if (is_int(x.dtype())) prod = round_even(c, prod);
          r = xf * cast_to(prod, x.dtype());
        } else {
          c.error("reduction '" + red + "' is not supported");
        }
        return one(c, r.reshape(s), in[0].ot);
      },
      11};
  t["Expand"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   auto shape = c.ints(in.at(1));
                   auto s = shape_of(c, in.at(0));
                   auto os = bcast_shape(c, s, shape);
                   return one(c, c.T(in[0]).broadcast_to(os), in[0].ot);
                 },
                 8};
  t["Tile"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                 (void)n;
                 Tensor x = c.T(in.at(0));
                 auto reps = c.ints(in.at(1));
                 auto s = x.shape();
                 if (reps.size() != s.size())
                   c.error("repeats has " + std::to_string(reps.size()) + " entries for rank " +
                           std::to_string(s.size()));
                 std::vector<int64_t> a, b, o;
                 for (size_t i = 0; i < s.size(); ++i) {
                   a.push_back(1);
                   a.push_back(s[i]);
                   b.push_back(reps[i]);
                   b.push_back(s[i]);
                   o.push_back(reps[i] * s[i]);
                 }
                 return one(c, x.reshape(a).broadcast_to(b).reshape(o), in[0].ot);
               },
               6};
  t["Pad"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                Tensor x = c.T(in.at(0));
                std::vector<int64_t> pads;
                double value = 0;
                int64_t r = static_cast<int64_t>(x.rank());
                if (c.opset >= 11) {
                  pads = c.ints(in.at(1));
                  if (in.size() > 2 && in[2].present) value = c.doubles(in[2]).at(0);
                  if (in.size() > 3 && in[3].present) {
                    auto axes = c.ints(in[3]);
                    std::vector<int64_t> full(2 * r, 0);
                    for (size_t i = 0; i < axes.size(); ++i) {
                      int64_t a = norm_axis(c, axes[i], r);
                      full[a] = pads[i];
                      full[a + r] = pads[i + axes.size()];
                    }
                    pads = full;
                  }
                } else {
                  pads = c.attr_ints("pads");
                  value = c.attr_f("value", 0.0f);
                }
                return one(c, pad_mode(c, x, pads, c.attr_s("mode", "constant"), value), in[0].ot);
              },
              1};
  t["DepthToSpace"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                         (void)n;
                         Tensor x = c.T(in.at(0));
                         need_rank(c, x, 4, 4, "input");
                         auto s = x.shape();
                         int64_t b = c.attr_i("blocksize", 1), N = s[0], C = s[1], H = s[2],
                                 W = s[3];
                         if (b <= 0 || C % (b * b))
                           c.error("blocksize does not divide the channels");
                         Tensor y;
                         if (c.attr_s("mode", "DCR") == "DCR") {
                           y = x.reshape({N, b, b, C / (b * b), H, W}).permute({0, 3, 4, 1, 5, 2});
                         } else {
                           y = x.reshape({N, C / (b * b), b, b, H, W}).permute({0, 1, 4, 2, 5, 3});
                         }
                         return one(c, y.reshape({N, C / (b * b), H * b, W * b}), in[0].ot);
                       },
                       1};
  t["SpaceToDepth"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        need_rank(c, x, 4, 4, "input");
        auto s = x.shape();
        int64_t b = c.attr_i("blocksize", 1), N = s[0], C = s[1], H = s[2], W = s[3];
        if (b <= 0 || H % b || W % b) c.error("blocksize does not divide the spatial dims");
        Tensor y = x.reshape({N, C, H / b, b, W / b, b}).permute({0, 3, 5, 1, 2, 4});
        return one(c, y.reshape({N, C * b * b, H / b, W / b}), in[0].ot);
      },
      1};
  t["Trilu"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                  (void)n;
                  Tensor x = c.T(in.at(0));
                  need_rank(c, x, 2, 64, "input");
                  int64_t k = in.size() > 1 && in[1].present ? c.ints(in[1]).at(0) : 0;
                  auto s = x.shape();
                  int64_t r = static_cast<int64_t>(s.size());
                  std::vector<int64_t> ri(r, 1), rj(r, 1);
                  ri[r - 2] = s[r - 2];
                  rj[r - 1] = s[r - 1];
                  Tensor i = lt::arange(c.dev, 0, double(s[r - 2]), 1, LT_DTYPE_I64).reshape(ri);
                  Tensor j = lt::arange(c.dev, 0, double(s[r - 1]), 1, LT_DTYPE_I64).reshape(rj);
                  Tensor d = j - i;
                  Tensor kk = c.scalar(double(k), LT_DTYPE_I64);
                  Tensor keep = c.attr_i("upper", 1) ? d >= kk : d <= kk;
                  return one(c, lt::where(keep, x, lt::zeros(c.dev, {}, x.dtype())), in[0].ot);
                },
                14};
  t["OneHot"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   Tensor idx = c.T(in.at(0));
                   int64_t depth = static_cast<int64_t>(c.doubles(in.at(1)).at(0));
                   Tensor vals = c.T(in.at(2));
                   auto is = idx.shape();
                   int64_t r = static_cast<int64_t>(is.size()) + 1;
                   int64_t axis = norm_axis(c, c.attr_i("axis", -1), r);
                   Tensor id = idx.cast(LT_DTYPE_I64);
                   id = lt::where(id < c.scalar(0, LT_DTYPE_I64),
                                  id + c.scalar(double(depth), LT_DTYPE_I64), id);
                   Tensor u = unsqueeze_t(id, {axis}, c);
                   std::vector<int64_t> rs(r, 1);
                   rs[axis] = depth;
                   Tensor ar = lt::arange(c.dev, 0, double(depth), 1, LT_DTYPE_I64).reshape(rs);
                   Tensor hot = ar == u;
                   Tensor off = slice1(vals, 0, 0, 1).reshape({}),
                          on = slice1(vals, 0, 1, 2).reshape({});
                   return one(c, lt::where(hot, on, off), in[2].ot);
                 },
                 9};
  t["CumSum"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   Tensor x = c.T(in.at(0));
                   int64_t r = static_cast<int64_t>(x.rank());
                   int64_t axis = norm_axis(c, c.ints(in.at(1)).at(0), r);
                   bool excl = c.attr_i("exclusive", 0), rev = c.attr_i("reverse", 0);
                   auto perm = perm_to_last(axis, r);
                   Tensor xt = x.permute(perm);
                   int64_t len = xt.shape().back();
                   DType w = is_float(x.dtype()) ? x.dtype() : LT_DTYPE_F64;
                   Tensor i = lt::arange(c.dev, 0, double(len), 1, LT_DTYPE_I64).reshape({len, 1});
                   Tensor j = lt::arange(c.dev, 0, double(len), 1, LT_DTYPE_I64).reshape({1, len});
                   // out[j] = sum_i x[i] * M[i, j]
                   Tensor m = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
                   Tensor y = cast_to(xt, w).matmul(m.cast(w));
                   return one(c, cast_to(y, x.dtype()).permute(inverse_perm(perm)), in[0].ot);
                 },
                 11};

  // Reductions.
  t["ReduceSum"] = reduce("sum");
  t["ReduceMean"] = reduce("mean");
  t["ReduceMax"] = reduce("max");
  t["ReduceMin"] = reduce("min");
  t["ReduceProd"] = reduce("prod");
  t["ReduceL1"] = reduce("l1");
  t["ReduceL2"] = reduce("l2");
  t["ReduceLogSum"] = reduce("logsum");
  t["ReduceLogSumExp"] = reduce("logsumexp");
  t["ReduceSumSquare"] = reduce("sumsq");
  auto argext = [](bool is_max) {
    return OpEntry{[is_max](Ctx& c, const NodeP&, Vals& in) -> Vals {
                     Tensor x = c.T(in.at(0));
                     int64_t r = static_cast<int64_t>(x.rank());
                     int64_t axis = norm_axis(c, c.attr_i("axis", 0), r);
                     bool keep = c.attr_i("keepdims", 1) != 0;
                     bool last = c.attr_i("select_last_index", 0) != 0;
                     Tensor y = is_max ? x : -x;
                     if (last) y = flip(y, axis);
                     Tensor a = y.argmax(axis, keep);
                     if (last) a = c.scalar(double(x.shape()[axis] - 1), LT_DTYPE_I64) - a;
                     return one(c, a, kInt64);
                   },
                   1};
  };
  t["ArgMax"] = argext(true);
  t["ArgMin"] = argext(false);
  t["TopK"] = {op_topk, 1};

  // Contractions.
  t["MatMul"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   Tensor a = c.T(in.at(0)), b = c.T(in.at(1));
                   DType dt = a.dtype();
                   bool f = is_float(dt);
                   Tensor x = f ? a : a.cast(LT_DTYPE_F64), y = f ? b : b.cast(LT_DTYPE_F64);
                   auto as = x.shape(), bs = y.shape();
                   bool a1 = as.size() == 1, b1 = bs.size() == 1;
                   if (a1) x = x.reshape({1, as[0]});
                   if (b1) y = y.reshape({bs[0], 1});
                   // Broadcast batch dims explicitly.
                   auto xs = x.shape(), ys = y.shape();
                   if (xs.size() > 2 || ys.size() > 2) {
                     std::vector<int64_t> xb(xs.begin(), xs.end() - 2),
                         yb(ys.begin(), ys.end() - 2);
                     auto bb = bcast_shape(c, xb, yb);
                     auto xt = bb, yt = bb;
                     xt.push_back(xs[xs.size() - 2]);
                     xt.push_back(xs.back());
                     yt.push_back(ys[ys.size() - 2]);
                     yt.push_back(ys.back());
                     if (xs != xt) x = x.broadcast_to(xt);
                     if (ys != yt) y = y.broadcast_to(yt);
                   }
                   Tensor z = x.matmul(y);
                   auto zs = z.shape();
                   if (a1 || b1) {
                     std::vector<int64_t> o(zs.begin(), zs.end() - 2);
                     if (!a1) o.push_back(zs[zs.size() - 2]);
                     if (!b1) o.push_back(zs.back());
                     z = z.reshape(o);
                   }
                   return one(c, cast_to(z, dt), in[0].ot);
                 },
                 1};
  t["Gemm"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                 (void)n;
                 Tensor a = c.T(in.at(0)), b = c.T(in.at(1));
                 DType dt = a.dtype();
                 bool f = is_float(dt);
                 if (!f) {
                   a = a.cast(LT_DTYPE_F64);
                   b = b.cast(LT_DTYPE_F64);
                 }
                 if (c.attr_i("transA", 0)) a = a.t();
                 if (c.attr_i("transB", 0)) b = b.t();
                 double alpha = c.attr_f("alpha", 1.0f), beta = c.attr_f("beta", 1.0f);
                 Tensor y = a.matmul(b);
                 if (alpha != 1.0) y = y * sc(c, y, alpha);
                 if (in.size() > 2 && in[2].present) {
                   Tensor cc = cast_to(c.T(in[2]), y.dtype());
                   y = y + (beta != 1.0 ? cc * sc(c, cc, beta) : cc);
                 }
                 return one(c, cast_to(y, dt), in[0].ot);
               },
               1};
  t["Einsum"] = {op_einsum, 12};
  t["MatMulInteger"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                          (void)n;
                          Tensor a = c.T(in.at(0)).cast(LT_DTYPE_F64),
                                 b = c.T(in.at(1)).cast(LT_DTYPE_F64);
                          if (in.size() > 2 && in[2].present) {
                            Tensor za = c.T(in[2]).cast(LT_DTYPE_F64);
                            if (za.rank() == 1 && a.rank() >= 2 && za.shape()[0] > 1)
                              za = za.reshape({za.shape()[0], 1});
                            a = a - za;
                          }
                          if (in.size() > 3 && in[3].present) b = b - c.T(in[3]).cast(LT_DTYPE_F64);
                          return one(c, a.matmul(b).cast(LT_DTYPE_I32), kInt32);
                        },
                        10};

  // Neural-network ops.
  t["Softmax"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        return one(c, softmax_like(c, c.T(in.at(0)), c.attr_i("axis", c.opset >= 13 ? -1 : 1), 0),
                   in[0].ot);
      },
      1};
  t["LogSoftmax"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        return one(c, softmax_like(c, c.T(in.at(0)), c.attr_i("axis", c.opset >= 13 ? -1 : 1), 1),
                   in[0].ot);
      },
      1};
  t["Hardmax"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        return one(c, softmax_like(c, c.T(in.at(0)), c.attr_i("axis", c.opset >= 13 ? -1 : 1), 2),
                   in[0].ot);
      },
      1};
  t["Conv"] = {op_conv, 1};
  t["ConvTranspose"] = {op_conv_transpose, 1};
  t["ConvInteger"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0)).cast(LT_DTYPE_F32), w = c.T(in.at(1)).cast(LT_DTYPE_F32);
        if (in.size() > 2 && in[2].present) x = x - c.T(in[2]).cast(LT_DTYPE_F32);
        if (in.size() > 3 && in[3].present) w = w - c.T(in[3]).cast(LT_DTYPE_F32);
        auto s = x.shape();
        auto ws = w.shape();
        std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
        if (kernel.empty()) kernel.assign(ws.begin() + 2, ws.end());
        Window win = window(c, std::vector<int64_t>(s.begin() + 2, s.end()), kernel, false);
        return one(
            c,
            round_even(c, conv_nd(c, x, w, Tensor(), win, c.attr_i("group", 1))).cast(LT_DTYPE_I32),
            kInt32);
      },
      10};
  t["MaxPool"] = pool(true);
  t["AveragePool"] = pool(false);
  t["LpPool"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   Tensor x = c.T(in.at(0));
                   auto s = x.shape();
                   Window w = window(c, std::vector<int64_t>(s.begin() + 2, s.end()),
                                     c.attr_ints("kernel_shape"), false);
                   double p = static_cast<double>(c.attr_i("p", 2));
                   return one(c, pool_slices(c, x, w, false, false, true, true, p), in[0].ot);
                 },
                 1};
  auto global = [](bool is_max) {
    return OpEntry{[is_max](Ctx& c, const NodeP&, Vals& in) -> Vals {
                     Tensor x = c.T(in.at(0));
                     std::vector<int64_t> axes;
                     for (size_t i = 2; i < x.rank(); ++i) axes.push_back(static_cast<int64_t>(i));
                     return one(c, is_max ? x.max(axes, true) : x.mean(axes, true), in[0].ot);
                   },
                   1};
  };
  t["GlobalMaxPool"] = global(true);
  t["GlobalAveragePool"] = global(false);
  t["BatchNormalization"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        Tensor x = c.T(in.at(0)), scale = c.T(in.at(1)), bias = c.T(in.at(2)), mean = c.T(in.at(3)),
               var = c.T(in.at(4));
        need_rank(c, x, 2, 64, "input");
        double eps = c.attr_f("epsilon", 1e-5f);
        double mom = c.attr_f("momentum", 0.9f);
        auto s = x.shape();
        std::vector<int64_t> cs(s.size(), 1);
        cs[1] = s[1];
        bool training = c.attr_i("training_mode", 0) != 0 ||
                        (c.opset < 9 && n.outputs.size() > 1 && c.attr_i("is_test", 0) == 0 &&
                         c.opset >= 7 && false);
        Tensor m = mean, v = var;
        Vals extra;
        if (training) {
          std::vector<int64_t> axes;
          for (size_t i = 0; i < s.size(); ++i)
            if (i != 1) axes.push_back(static_cast<int64_t>(i));
          Tensor bm = x.mean(axes, false);
          Tensor bv = ((x - bm.reshape(cs)) * (x - bm.reshape(cs))).mean(axes, false);
          m = bm;
          v = bv;
          extra.push_back(
              c.from_tensor(mean * sc(c, mean, mom) + bm * sc(c, bm, 1 - mom), in[3].ot));
          extra.push_back(c.from_tensor(var * sc(c, var, mom) + bv * sc(c, bv, 1 - mom), in[4].ot));
        }
        Tensor y =
            (x - m.reshape(cs)) / (v.reshape(cs) + sc(c, v, eps)).sqrt() * scale.reshape(cs) +
            bias.reshape(cs);
        Vals out = {c.from_tensor(y, in[0].ot)};
        for (auto& e : extra) out.push_back(e);
        return out;
      },
      1};
  t["InstanceNormalization"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0)), scale = c.T(in.at(1)), bias = c.T(in.at(2));
        need_rank(c, x, 3, 64, "input");
        double eps = c.attr_f("epsilon", 1e-5f);
        auto s = x.shape();
        std::vector<int64_t> axes, cs(s.size(), 1);
        cs[1] = s[1];
        for (size_t i = 2; i < s.size(); ++i) axes.push_back(static_cast<int64_t>(i));
        Tensor m = x.mean(axes, true);
        Tensor d = x - m;
        Tensor v = (d * d).mean(axes, true);
        return one(c, d / (v + sc(c, v, eps)).sqrt() * scale.reshape(cs) + bias.reshape(cs),
                   in[0].ot);
      },
      1};
  t["LayerNormalization"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                               Tensor x = c.T(in.at(0)), scale = c.T(in.at(1));
                               auto s = x.shape();
                               int64_t r = static_cast<int64_t>(s.size());
                               int64_t axis = norm_axis(c, c.attr_i("axis", -1), r);
                               double eps = c.attr_f("epsilon", 1e-5f);
                               std::vector<int64_t> axes;
                               for (int64_t i = axis; i < r; ++i) axes.push_back(i);
                               Tensor xf = x;
                               Tensor m = xf.mean(axes, true);
                               Tensor d = xf - m;
                               Tensor v = (d * d).mean(axes, true);
                               Tensor inv = sc(c, v, 1) / (v + sc(c, v, eps)).sqrt();
                               Tensor y = d * inv * scale;
                               if (in.size() > 2 && in[2].present) y = y + c.T(in[2]);
                               Vals out = {c.from_tensor(y, in[0].ot)};
                               int32_t st = static_cast<int32_t>(c.attr_i("stash_type", kFloat));
                               (void)st;
                               if (n.outputs.size() > 1) out.push_back(c.from_tensor(m, in[0].ot));
                               if (n.outputs.size() > 2)
                                 out.push_back(c.from_tensor(inv, in[0].ot));
                               return out;
                             },
                             17};
  t["MeanVarianceNormalization"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                                      (void)n;
                                      Tensor x = c.T(in.at(0));
                                      auto axes = c.attr_ints("axes");
                                      if (axes.empty()) axes = {0, 2, 3};
                                      Tensor m = x.mean(axes, true);
                                      Tensor d = x - m;
                                      Tensor v = (d * d).mean(axes, true);
                                      return one(c, d / (v.sqrt() + sc(c, v, 1e-9)), in[0].ot);
                                    },
                                    9};
  t["LRN"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                Tensor x = c.T(in.at(0));
                need_rank(c, x, 2, 64, "input");
                double alpha = c.attr_f("alpha", 1e-4f), beta = c.attr_f("beta", 0.75f),
                       bias = c.attr_f("bias", 1.0f);
                int64_t size = c.attr_i("size", 1);
                auto s = x.shape();
                std::vector<int64_t> bf(s.size(), 0), af(s.size(), 0);
                bf[1] = (size - 1) / 2;
                af[1] = size - 1 - bf[1];
                Tensor sq = (x * x).pad(bf, af, 0.0);
                Tensor acc;
                for (int64_t k = 0; k < size; ++k) {
                  Tensor sl = slice1(sq, 1, k, k + s[1]);
                  acc = acc.defined() ? acc + sl : sl;
                }
                return one(c, x / (acc * sc(c, x, alpha / size) + sc(c, x, bias)).pow(beta),
                           in[0].ot);
              },
              1};
  t["RNN"] = {[](Ctx& c, const NodeP& n, Vals& in) { return op_rnn(c, n, in, 0); }, 1};
  t["GRU"] = {[](Ctx& c, const NodeP& n, Vals& in) { return op_rnn(c, n, in, 1); }, 1};
  t["LSTM"] = {[](Ctx& c, const NodeP& n, Vals& in) { return op_rnn(c, n, in, 2); }, 1};
  auto resize = [](Ctx& c, const NodeP&, Vals& in, bool upsample) -> Vals {
    Tensor x = c.T(in.at(0));
    auto s = x.shape();
    size_t r = s.size();
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    std::vector<double> roi;
    if (upsample) {
      scales = c.opset >= 9 ? c.doubles(in.at(1)) : std::vector<double>();
      if (c.opset < 9)
        for (float f : c.attr("scales")->floats) scales.push_back(f);
    } else if (c.opset >= 11) {
      if (in.size() > 1 && in[1].present) roi = c.doubles(in[1]);
      if (in.size() > 2 && in[2].present) scales = c.doubles(in[2]);
      if (in.size() > 3 && in[3].present) sizes = c.ints(in[3]);
    } else {
      scales = c.doubles(in.at(1));
    }
    std::string mode = c.attr_s("mode", "nearest");
    std::string ctm = upsample || c.opset < 11
                          ? "asymmetric"
                          : c.attr_s("coordinate_transformation_mode", "half_pixel");
    std::string nearest =
        upsample || c.opset < 11 ? "floor" : c.attr_s("nearest_mode", "round_prefer_floor");
    double cubic_a = c.attr_f("cubic_coeff_a", -0.75f);
    bool excl = c.attr_i("exclude_outside", 0) != 0;
    std::vector<int64_t> axes = c.attr_ints("axes");
    if (axes.empty())
      for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
    std::string keep = c.attr_s("keep_aspect_ratio_policy", "stretch");
    std::vector<int64_t> out(s);
    std::vector<double> sc_(r, 1.0);
    if (!sizes.empty()) {
      if (keep != "stretch") {
        double f = keep == "not_larger" ? 1e300 : 0;
        for (size_t k = 0; k < axes.size(); ++k) {
          double q = double(sizes[k]) / s[axes[k]];
          f = keep == "not_larger" ? std::min(f, q) : std::max(f, q);
        }
        for (size_t k = 0; k < axes.size(); ++k) {
          sc_[axes[k]] = f;
          out[axes[k]] = static_cast<int64_t>(std::floor(s[axes[k]] * f + 0.5));
        }
      } else {
        for (size_t k = 0; k < axes.size(); ++k) {
          out[axes[k]] = sizes[k];
          sc_[axes[k]] = double(sizes[k]) / s[axes[k]];
        }
      }
    } else {
      if (scales.size() != axes.size())
        c.error("scales has " + std::to_string(scales.size()) + " entries for " +
                std::to_string(axes.size()) + " axes");
      for (size_t k = 0; k < axes.size(); ++k) {
        sc_[axes[k]] = scales[k];
        out[axes[k]] = static_cast<int64_t>(std::floor(s[axes[k]] * scales[k]));
      }
    }
    if (mode != "nearest" && mode != "linear" && mode != "cubic")
      c.error("mode '" + mode + "' is not supported");
    Tensor y = is_float(x.dtype()) || mode == "nearest" ? x : x.cast(LT_DTYPE_F32);
    for (size_t i = 0; i < r; ++i) {
      double rs = 0, re = 1;
      if (!roi.empty()) {
        size_t k = std::find(axes.begin(), axes.end(), int64_t(i)) - axes.begin();
        if (k < axes.size()) {
          rs = roi[k];
          re = roi[k + axes.size()];
        }
      }
      if (out[i] == s[i] && sc_[i] == 1.0 && ctm != "tf_crop_and_resize") continue;
      y = resize_axis(c, y, static_cast<int64_t>(i), out[i], s[i] * sc_[i], sc_[i], mode, ctm,
                      nearest, cubic_a, excl, rs, re);
    }
    return one(c, cast_to(y, x.dtype()), in[0].ot);
  };
  t["Resize"] = {[resize](Ctx& c, const NodeP& n, Vals& in) { return resize(c, n, in, false); },
                 10};
  t["Upsample"] = {[resize](Ctx& c, const NodeP& n, Vals& in) { return resize(c, n, in, true); },
                   7};
  t["QuantizeLinear"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0)), s = c.T(in.at(1));
        int32_t ot = in.size() > 2 && in[2].present ? in[2].ot : kUint8;
        auto xs = x.shape();
        int64_t axis = c.attr_i("axis", 1);
        auto per_axis = [&](Tensor v) {
          if (v.rank() == 1 && xs.size() > 1 && v.shape()[0] > 1) {
            axis = norm_axis(c, axis, static_cast<int64_t>(xs.size()));
            std::vector<int64_t> rs(xs.size(), 1);
            rs[axis] = v.shape()[0];
            return v.reshape(rs);
          }
          return v;
        };
        Tensor q = round_even(c, x.cast(LT_DTYPE_F32) / per_axis(s).cast(LT_DTYPE_F32));
        if (in.size() > 2 && in[2].present) q = q + per_axis(c.T(in[2])).cast(LT_DTYPE_F32);
        double lo = ot == kUint8 ? 0 : ot == kInt8 ? -128 : ot == kUint16 ? 0 : -32768;
        double hi = ot == kUint8 ? 255 : ot == kInt8 ? 127 : ot == kUint16 ? 65535 : 32767;
        q = lt::minimum(lt::maximum(q, sc(c, q, lo)), sc(c, q, hi));
        return one(c, q.cast(carrier_dtype(ot)), ot);
      },
      10};
  t["DequantizeLinear"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                             (void)n;
                             Tensor x = c.T(in.at(0)), s = c.T(in.at(1));
                             auto xs = x.shape();
                             int64_t axis = c.attr_i("axis", 1);
                             auto per_axis = [&](Tensor v) {
                               if (v.rank() == 1 && xs.size() > 1 && v.shape()[0] > 1) {
                                 axis = norm_axis(c, axis, static_cast<int64_t>(xs.size()));
                                 std::vector<int64_t> rs(xs.size(), 1);
                                 rs[axis] = v.shape()[0];
                                 return v.reshape(rs);
                               }
                               return v;
                             };
                             Tensor xf = x.cast(LT_DTYPE_F32);
                             if (in.size() > 2 && in[2].present)
                               xf = xf - per_axis(c.T(in[2])).cast(LT_DTYPE_F32);
                             return one(c, xf * per_axis(s), in[1].ot);
                           },
                           10};
  auto loss = [](Ctx& c, const NodeP& n, Vals& in, bool sce) -> Vals {
    Tensor x = c.T(in.at(0));
    need_rank(c, x, 2, 64, "input");
    Tensor tgt = c.T(in.at(1)).cast(LT_DTYPE_I64);
    Tensor w = in.size() > 2 && in[2].present ? c.T(in[2]) : Tensor();
    std::string red = c.attr_s("reduction", "mean");
    bool has_ii = c.has_attr("ignore_index");
    int64_t ii = c.attr_i("ignore_index", 0);
    auto s = x.shape();
    int64_t C = s[1];
    Tensor logp = sce ? x.log_softmax(1) : x;
    std::vector<int64_t> rs(s.size(), 1);
    rs[1] = C;
    Tensor cls = lt::arange(c.dev, 0, double(C), 1, LT_DTYPE_I64).reshape(rs);
    Tensor tu = unsqueeze_t(tgt, {1}, c);
    Tensor hot = (cls == tu).cast(x.dtype());
    Tensor picked = (logp * hot).sum({1}, false);  // [N, d...]
    Tensor wt;
    if (w.defined()) {
      Tensor tc = lt::where(tgt < c.scalar(0, LT_DTYPE_I64), c.scalar(0, LT_DTYPE_I64), tgt);
      wt = w.gather(tc, 0);
    } else {
      wt = lt::ones(c.dev, tgt.shape(), x.dtype());
    }
    if (has_ii)
      wt =
          lt::where(tgt == c.scalar(double(ii), LT_DTYPE_I64), lt::zeros(c.dev, {}, x.dtype()), wt);
    Tensor l = -picked * wt;
    Tensor outl;
    if (red == "none")
      outl = l;
    else if (red == "sum")
      outl = l.sum();
    else
      outl = l.sum() / wt.sum();
    Vals out = {c.from_tensor(outl, in[0].ot)};
    if (sce && n.outputs.size() > 1) out.push_back(c.from_tensor(logp, in[0].ot));
    return out;
  };
  t["NegativeLogLikelihoodLoss"] = {
      [loss](Ctx& c, const NodeP& n, Vals& in) { return loss(c, n, in, false); }, 12};
  t["SoftmaxCrossEntropyLoss"] = {
      [loss](Ctx& c, const NodeP& n, Vals& in) { return loss(c, n, in, true); }, 12};
  auto window_fn = [](int kind) {
    return OpEntry{[kind](Ctx& c, const NodeP&, Vals& in) -> Vals {
                     int64_t N = c.ints(in.at(0)).at(0);
                     int32_t ot = static_cast<int32_t>(c.attr_i("output_datatype", kFloat));
                     bool periodic = c.attr_i("periodic", 1) != 0;
                     double denom = periodic ? double(N) : double(N - 1);
                     Tensor k = lt::arange(c.dev, 0, double(N), 1, LT_DTYPE_F64);
                     Tensor a = k * c.scalar(2 * M_PI / denom, LT_DTYPE_F64);
                     Tensor y;
                     if (kind == 0)
                       y = c.scalar(0.5, LT_DTYPE_F64) - a.cos() * c.scalar(0.5, LT_DTYPE_F64);
                     else if (kind == 1)
                       y = c.scalar(25.0 / 46, LT_DTYPE_F64) -
                           a.cos() * c.scalar(21.0 / 46, LT_DTYPE_F64);
                     else
                       y = c.scalar(0.42, LT_DTYPE_F64) - a.cos() * c.scalar(0.5, LT_DTYPE_F64) +
                           (a * c.scalar(2, LT_DTYPE_F64)).cos() * c.scalar(0.08, LT_DTYPE_F64);
                     return one(c, y.cast(carrier_dtype(ot)), ot);
                   },
                   17};
  };
  t["HannWindow"] = window_fn(0);
  t["HammingWindow"] = window_fn(1);
  t["BlackmanWindow"] = window_fn(2);
  t["DynamicQuantizeLinear"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        Tensor zero = sc(c, x, 0);
        Tensor mx = lt::maximum(x.max(), zero), mn = lt::minimum(x.min(), zero);
        Tensor scale = (mx - mn) / sc(c, x, 255);
        Tensor zp = lt::minimum(lt::maximum(round_even(c, -mn / scale), zero), sc(c, x, 255));
        Tensor y = lt::minimum(lt::maximum(round_even(c, x / scale) + zp, zero), sc(c, x, 255));
        return {c.from_tensor(y.cast(LT_DTYPE_I32), kUint8), c.from_tensor(scale, kFloat),
                c.from_tensor(zp.cast(LT_DTYPE_I32), kUint8)};
      },
      11};
  t["Compress"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                     (void)n;
                     // The output's length is the condition's count of true values: read as a shape
                     // input.
                     Tensor x = c.T(in.at(0));
                     auto cond = c.ints(in.at(1));
                     std::vector<int64_t> idx;
                     int64_t axis = 0;
                     Tensor src = x;
                     if (c.has_attr("axis")) {
                       axis = norm_axis(c, c.attr_i("axis", 0), static_cast<int64_t>(x.rank()));
                     } else {
                       src = x.reshape({x.numel()});
                     }
                     int64_t len = src.shape()[axis];
                     for (size_t i = 0; i < cond.size() && static_cast<int64_t>(i) < len; ++i) {
                       if (cond[i]) idx.push_back(static_cast<int64_t>(i));
                     }
                     if (idx.empty()) {
                       auto s = src.shape();
                       s[axis] = 0;
                       return one(c, lt::zeros(c.dev, s, x.dtype()), in[0].ot);
                     }
                     return one(c, src.gather(Tensor::from<int64_t>(c.dev, idx), axis), in[0].ot);
                   },
                   9};
  t["MaxUnpool"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        need_rank(c, x, 3, 64, "input");
        Tensor idx = c.T(in.at(1)).cast(LT_DTYPE_I64);
        auto s = x.shape();
        // The indices are flat over the pooled input's shape (from the attributes); an explicit
        // output_shape places each element at the same coordinates of the larger output.
        auto k = c.attr_ints("kernel_shape"), st = c.attr_ints("strides"), p = c.attr_ints("pads");
        size_t nd = s.size() - 2;
        if (st.empty()) st.assign(nd, 1);
        if (p.empty()) p.assign(2 * nd, 0);
        if (k.size() != nd || st.size() != nd || p.size() != 2 * nd) {
          c.error("kernel_shape, strides and pads do not match the input's spatial dims");
        }
        std::vector<int64_t> def = {s[0], s[1]};
        for (size_t i = 0; i < nd; ++i)
          def.push_back((s[2 + i] - 1) * st[i] + k[i] - p[i] - p[i + nd]);
        std::vector<int64_t> out = def;
        if (in.size() > 2 && in[2].present) out = c.ints(in[2]);
        if (out.size() != def.size()) c.error("output_shape has the wrong rank");
        if (out != def) {
          auto ds = strides_of(def), os = strides_of(out);
          Tensor rem = idx, acc = lt::zeros(c.dev, {}, LT_DTYPE_I64);
          for (size_t i = 0; i < def.size(); ++i) {
            Tensor q = rem / c.scalar(double(ds[i]), LT_DTYPE_I64);
            rem = rem - q * c.scalar(double(ds[i]), LT_DTYPE_I64);
            acc = acc + q * c.scalar(double(os[i]), LT_DTYPE_I64);
          }
          idx = acc;
        }
        int64_t N = numel_of(out), m = x.numel();
        Tensor r =
            lt::zeros(c.dev, {N}, x.dtype()).scatter_add(idx.reshape({m}), x.reshape({m}), 0);
        return one(c, r.reshape(out), in[0].ot);
      },
      9};
  t["ReverseSequence"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        Tensor lens = c.T(in.at(1)).cast(LT_DTYPE_I64);
        int64_t ta = c.attr_i("time_axis", 0), ba = c.attr_i("batch_axis", 1);
        auto s = x.shape();
        int64_t r = static_cast<int64_t>(s.size());
        std::vector<int64_t> ts(r, 1), bs(r, 1);
        ts[ta] = s[ta];
        bs[ba] = s[ba];
        Tensor i = lt::arange(c.dev, 0, double(s[ta]), 1, LT_DTYPE_I64).reshape(ts);
        Tensor L = lens.reshape(bs);
        Tensor src = lt::where(i < L, L - i - c.scalar(1, LT_DTYPE_I64), i).broadcast_to(s);
        Tensor flat = flat_index(c, s, src, ta);
        return one(c, x.reshape({numel_of(s)}).gather(flat, 0), in[0].ot);
      },
      10};
  auto qlinear = [](bool conv) {
    return OpEntry{
        [conv](Ctx& c, const NodeP&, Vals& in) -> Vals {
          auto deq = [&](size_t xi, size_t si, size_t zi, bool weight) {
            Tensor x = c.T(in.at(xi)).cast(LT_DTYPE_F32);
            Tensor z = c.T(in.at(zi)).cast(LT_DTYPE_F32), s = c.T(in.at(si)).cast(LT_DTYPE_F32);
            if (weight && conv && s.rank() == 1 && s.shape()[0] > 1) {
              std::vector<int64_t> rs(x.rank(), 1);
              rs[0] = s.shape()[0];
              s = s.reshape(rs);
              z = z.reshape(rs);
            }
            if (!conv && weight && s.rank() == 1 && s.shape()[0] > 1) {
              std::vector<int64_t> rs(x.rank(), 1);
              rs.back() = s.shape()[0];
              s = s.reshape(rs);
              z = z.reshape(rs);
            }
            return (x - z) * s;
          };
          Tensor a = deq(0, 1, 2, false), b = deq(3, 4, 5, true);
          Tensor y;
          if (conv) {
            auto s = a.shape();
            auto ws = b.shape();
            std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
            if (kernel.empty()) kernel.assign(ws.begin() + 2, ws.end());
            Window win = window(c, std::vector<int64_t>(s.begin() + 2, s.end()), kernel, false);
            Tensor bias;
            if (in.size() > 8 && in[8].present) {
              bias = c.T(in[8]).cast(LT_DTYPE_F32) * c.T(in.at(1)).cast(LT_DTYPE_F32) *
                     c.T(in.at(4)).cast(LT_DTYPE_F32);
            }
            y = conv_nd(c, a, b, bias, win, c.attr_i("group", 1));
          } else {
            y = a.matmul(b);
          }
          Tensor ys = c.T(in.at(6)).cast(LT_DTYPE_F32), yz = c.T(in.at(7)).cast(LT_DTYPE_F32);
          int32_t ot = in[7].ot;
          Tensor q = round_even(c, y / ys) + yz;
          double lo = ot == kUint8 ? 0 : -128, hi = ot == kUint8 ? 255 : 127;
          q = lt::minimum(lt::maximum(q, sc(c, q, lo)), sc(c, q, hi));
          return one(c, q.cast(LT_DTYPE_I32), ot);
        },
        10};
  };
  t["QLinearConv"] = qlinear(true);
  t["QLinearMatMul"] = qlinear(false);
  t["Det"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        // Leibniz formula over permutations (n <= 6): sums of products of lazy slices.
        Tensor x = c.T(in.at(0));
        need_rank(c, x, 2, 64, "input");
        auto s = x.shape();
        int64_t r = static_cast<int64_t>(s.size()), N = s[r - 1];
        if (N > 6) c.error("Det of matrices larger than 6x6 is not supported");
        std::vector<int64_t> perm(N);
        std::iota(perm.begin(), perm.end(), 0);
        std::vector<int64_t> batch(s.begin(), s.end() - 2);
        Tensor acc;
        do {
          int inv = 0;
          for (int64_t i = 0; i < N; ++i)
            for (int64_t j = i + 1; j < N; ++j) inv += perm[i] > perm[j];
          Tensor term;
          for (int64_t i = 0; i < N; ++i) {
            Tensor e =
                slice1(slice1(x, r - 2, i, i + 1), r - 1, perm[i], perm[i] + 1).reshape(batch);
            term = term.defined() ? term * e : e;
          }
          if (inv % 2) term = -term;
          acc = acc.defined() ? acc + term : term;
        } while (std::next_permutation(perm.begin(), perm.end()));
        return one(c, acc, in[0].ot);
      },
      11};
  t["DFT"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                // A matmul with cos/sin tables that depend on the length only.
                Tensor x = c.T(in.at(0));
                need_rank(c, x, 2, 64, "input");
                auto s = x.shape();
                int64_t r = static_cast<int64_t>(s.size());
                int64_t axis = norm_axis(c, c.attr_i("axis", 1), r - 1);
                bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
                int64_t N = s[axis];
                int64_t L = N;
                if (in.size() > 1 && in[1].present) L = c.ints(in[1]).at(0);
                Tensor re = slice1(x, r - 1, 0, 1), im;
                if (s.back() == 2) im = slice1(x, r - 1, 1, 2);
                // Move axis last: [..., N]
                std::vector<int64_t> sq(s.begin(), s.end() - 1);
                re = re.reshape(sq);
                if (im.defined()) im = im.reshape(sq);
                auto perm = perm_to_last(axis, r - 1);
                re = re.permute(perm);
                if (im.defined()) im = im.permute(perm);
                if (L != N) {
                  auto ps = re.shape();
                  if (L < N) {
                    re = slice1(re, r - 2, 0, L);
                    if (im.defined()) im = slice1(im, r - 2, 0, L);
                  } else {
                    std::vector<int64_t> bf(ps.size(), 0), af(ps.size(), 0);
                    af.back() = L - N;
                    re = re.pad(bf, af, 0.0);
                    if (im.defined()) im = im.pad(bf, af, 0.0);
                  }
                }
                int64_t K = onesided ? L / 2 + 1 : L;
                check_table(c, L);
                check_table(c, L * K);
                std::vector<double> cs(L * K), sn(L * K);
                double sign = inverse ? 1 : -1;
                for (int64_t j = 0; j < L; ++j)
                  for (int64_t k = 0; k < K; ++k) {
                    double a = 2 * M_PI * double((j * k) % L) / double(L);
                    cs[j * K + k] = std::cos(a);
                    sn[j * K + k] = sign * std::sin(a);
                  }
                DType dt = x.dtype();
                Tensor C = Tensor::from<double>(c.dev, cs, {L, K}).cast(dt),
                       S = Tensor::from<double>(c.dev, sn, {L, K}).cast(dt);
                Tensor ore = re.matmul(C), oim = re.matmul(S);
                if (im.defined()) {
                  ore = ore - im.matmul(S);
                  oim = oim + im.matmul(C);
                }
                if (inverse) {
                  ore = ore / sc(c, ore, double(L));
                  oim = oim / sc(c, oim, double(L));
                }
                auto inv = inverse_perm(perm);
                ore = ore.permute(inv);
                oim = oim.permute(inv);
                auto os = ore.shape();
                os.push_back(1);
                return one(c, lt::concat({ore.reshape(os), oim.reshape(os)}, r - 1), in[0].ot);
              },
              17};
  t["TfIdfVectorizer"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        // Each pool n-gram counted by comparing strided slices of the input (no host values).
        Tensor x = c.T(in.at(0)).cast(LT_DTYPE_I64);
        bool batched = x.rank() == 2;
        if (!batched) x = x.reshape({1, x.numel()});
        int64_t B = x.shape()[0], C = x.shape()[1];
        std::string mode = c.attr_s("mode", "TF");
        int64_t mn = c.attr_i("min_gram_length", 1), mx = c.attr_i("max_gram_length", 1);
        int64_t max_skip = c.attr_i("max_skip_count", 0);
        auto counts = c.attr_ints("ngram_counts"), indexes = c.attr_ints("ngram_indexes"),
             pool_ = c.attr_ints("pool_int64s");
        if (c.has_attr("pool_strings"))
          fail(LT_STATUS_UNSUPPORTED, "out of scope: pool_strings (string n-grams)");
        std::vector<float> weights =
            c.attr("weights") ? c.attr("weights")->floats : std::vector<float>{};
        int64_t num_out = 0;
        for (int64_t v : indexes) num_out = std::max(num_out, v + 1);
        std::vector<Tensor> cols(num_out);
        size_t gi = 0;
        for (size_t len_i = 0; len_i < counts.size(); ++len_i) {
          int64_t gl = static_cast<int64_t>(len_i) + 1;
          size_t begin = static_cast<size_t>(counts[len_i]);
          size_t end =
              len_i + 1 < counts.size() ? static_cast<size_t>(counts[len_i + 1]) : pool_.size();
          for (size_t p = begin; p + gl <= end; p += gl, ++gi) {
            if (gi >= indexes.size()) c.error("ngram_indexes is shorter than the pool");
            if (gl < mn || gl > mx) continue;
            Tensor total;
            int64_t skips = gl == 1 ? 0 : max_skip;
            for (int64_t k = 0; k <= skips; ++k) {
              int64_t span = (gl - 1) * (k + 1);
              if (span >= C) continue;
              Tensor match;
              for (int64_t j = 0; j < gl; ++j) {
                Tensor sl = slice1(x, 1, j * (k + 1), j * (k + 1) + C - span);
                Tensor e = sl == c.scalar(double(pool_[p + j]), LT_DTYPE_I64);
                match = match.defined() ? (match && e) : e;
              }
              Tensor cnt = match.cast(LT_DTYPE_F32).sum({1}, true);
              total = total.defined() ? total + cnt : cnt;
            }
            if (!total.defined()) continue;
            int64_t o = indexes[gi];
            double w = o < static_cast<int64_t>(weights.size()) ? weights[o] : 1.0;
            Tensor col = mode == "TF"    ? total
                         : mode == "IDF" ? (total > c.scalar(0, LT_DTYPE_F32)).cast(LT_DTYPE_F32) *
                                               c.scalar(w, LT_DTYPE_F32)
                                         : total * c.scalar(w, LT_DTYPE_F32);
            cols[o] = cols[o].defined() ? cols[o] + col : col;
          }
        }
        for (auto& col : cols) {
          if (!col.defined()) col = lt::zeros(c.dev, {B, 1}, LT_DTYPE_F32);
        }
        Tensor y = num_out ? lt::concat(cols, 1) : lt::zeros(c.dev, {B, 0}, LT_DTYPE_F32);
        if (!batched) y = y.reshape({num_out});
        return one(c, y, kFloat);
      },
      9};

  t["GridSample"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        // Coordinates, padding and taps as lazy elementwise ops; pixels fetched by a gather over
        // the flattened input (every value stays on the device).
        Tensor X = c.T(in.at(0)), G = c.T(in.at(1));
        auto xs = X.shape();
        if (xs.size() != 4) c.error("only 4-D input (2 spatial dims) is supported");
        int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
        auto gs = G.shape();
        if (gs.size() != 4 || gs[0] != N || gs[3] != 2) {
          c.error("grid " + lt::detail::shape_string(gs) + " is not [N, H_out, W_out, 2]");
        }
        int64_t Ho = gs[1], Wo = gs[2];
        std::string mode = c.attr_s("mode", "bilinear");
        std::string pad = c.attr_s("padding_mode", "zeros");
        bool align = c.attr_i("align_corners", 0) != 0;
        DType dt = X.dtype();
        Tensor gx = slice1(G, 3, 0, 1).reshape({N, Ho, Wo}),
               gy = slice1(G, 3, 1, 2).reshape({N, Ho, Wo});
        auto S = [&](double v) { return sc(c, gx, v); };
        auto denorm = [&](Tensor g, int64_t len) {
          return align ? (g + S(1)) * S(0.5 * (len - 1))
                       : ((g + S(1)) * S(double(len)) - S(1)) * S(0.5);
        };
        Tensor fx = denorm(gx, W), fy = denorm(gy, H);
        auto reflect = [&](Tensor x, double lo, double hi) {
          double rng = hi - lo;
          auto fold = [&](Tensor dx, bool below) {
            Tensor nfl = (dx / S(rng)).floor();
            Tensor r = dx - nfl * S(rng);
            Tensor half = nfl * S(0.5);
            Tensor even = (half - half.floor()) == S(0);
            return below ? lt::where(even, S(lo) + r, S(hi) - r)
                         : lt::where(even, S(hi) - r, S(lo) + r);
          };
          return lt::where(x < S(lo), fold(S(lo) - x, true),
                           lt::where(x > S(hi), fold(x - S(hi), false), x));
        };
        double bx0 = align ? 0 : -0.5, bx1 = align ? W - 1 : W - 0.5;
        double by0 = align ? 0 : -0.5, by1 = align ? H - 1 : H - 0.5;
        if (mode == "nearest") {
          fx = round_even(c, fx);
          fy = round_even(c, fy);
        }
        auto adjust = [&](Tensor x, double lo, double hi, int64_t len) {
          if (pad == "border")
            return lt::where((x < S(lo)) || (x > S(hi)),
                             lt::minimum(lt::maximum(x, S(0)), S(double(len - 1))), x);
          if (pad == "reflection") return reflect(x, lo, hi);
          return x;
        };
        fx = adjust(fx, bx0, bx1, W);
        fy = adjust(fy, by0, by1, H);
        Tensor Xf = X.permute({0, 2, 3, 1}).reshape({N * H * W, C});
        Tensor nbase = lt::arange(c.dev, 0, double(N), 1, LT_DTYPE_I64).reshape({N, 1, 1}) *
                       c.scalar(double(H * W), LT_DTYPE_I64);
        // Pixel at integer (float-valued) coordinates under the padding rule; [N,Ho,Wo,C].
        auto pixel = [&](Tensor ix, Tensor iy) {
          Tensor valid;
          if (pad == "zeros") {
            valid = (ix >= S(0)) && (ix <= S(double(W - 1))) && (iy >= S(0)) &&
                    (iy <= S(double(H - 1)));
          } else if (pad == "reflection") {
            ix = reflect(ix, bx0, bx1);
            iy = reflect(iy, by0, by1);
            ix = lt::where(ix < S(0), -((-ix).floor()), ix.floor());
            iy = lt::where(iy < S(0), -((-iy).floor()), iy.floor());
          }
          Tensor cx = lt::minimum(lt::maximum(ix, S(0)), S(double(W - 1))).cast(LT_DTYPE_I64);
          Tensor cy = lt::minimum(lt::maximum(iy, S(0)), S(double(H - 1))).cast(LT_DTYPE_I64);
          Tensor flat = nbase + cy * c.scalar(double(W), LT_DTYPE_I64) + cx;
          Tensor v = Xf.gather(flat, 0);  // [N,Ho,Wo,C]
          if (valid.defined()) v = v * valid.cast(dt).reshape({N, Ho, Wo, 1});
          return v;
        };
        Tensor out;
        if (mode == "nearest") {
          auto trunc = [&](Tensor v) { return lt::where(v < S(0), -((-v).floor()), v.floor()); };
          out = pixel(trunc(fx), trunc(fy));
        } else if (mode == "bilinear" || mode == "linear") {
          Tensor x0 = fx.floor(), y0 = fy.floor();
          Tensor tx = (fx - x0).reshape({N, Ho, Wo, 1}), ty = (fy - y0).reshape({N, Ho, Wo, 1});
          Tensor one_ = sc(c, tx, 1);
          out = pixel(x0, y0) * (one_ - tx) * (one_ - ty) +
                pixel(x0 + S(1), y0) * tx * (one_ - ty) + pixel(x0, y0 + S(1)) * (one_ - tx) * ty +
                pixel(x0 + S(1), y0 + S(1)) * tx * ty;
        } else if (mode == "bicubic" || mode == "cubic") {
          Tensor x0 = fx.floor(), y0 = fy.floor();
          auto coeffs = [&](Tensor t) {
            double A = -0.75;
            Tensor t1 = t + S(1), u = S(1) - t, u1 = S(2) - t;
            std::vector<Tensor> w = {((t1 * S(A) - S(5 * A)) * t1 + S(8 * A)) * t1 - S(4 * A),
                                     ((t * S(A + 2)) - S(A + 3)) * t * t + S(1),
                                     ((u * S(A + 2)) - S(A + 3)) * u * u + S(1),
                                     ((u1 * S(A) - S(5 * A)) * u1 + S(8 * A)) * u1 - S(4 * A)};
            for (auto& v : w) v = v.reshape({N, Ho, Wo, 1});
            return w;
          };
          auto wx = coeffs(fx - x0), wy = coeffs(fy - y0);
          for (int j = 0; j < 4; ++j) {
            Tensor row;
            for (int i = 0; i < 4; ++i) {
              Tensor v = pixel(x0 + S(i - 1), y0 + S(j - 1)) * wx[i];
              row = row.defined() ? row + v : v;
            }
            Tensor term = row * wy[j];
            out = out.defined() ? out + term : term;
          }
        } else {
          c.error("mode '" + mode + "' is not supported");
        }
        return one(c, out.permute({0, 3, 1, 2}), in[0].ot);
      },
      16};

  t["STFT"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        // Frames as strided slices, the window as a product, each frame's DFT as a matmul with
        // cos/sin tables that depend on the frame length only.
        Tensor x = c.T(in.at(0));
        need_rank(c, x, 3, 3, "input");
        auto s = x.shape();  // [B, L, 1 or 2]
        int64_t step = c.ints(in.at(1)).at(0);
        Tensor win = in.size() > 2 && in[2].present ? c.T(in[2]) : Tensor();
        int64_t len = in.size() > 3 && in[3].present ? c.ints(in[3]).at(0)
                                                     : (win.defined() ? win.shape()[0] : s[1]);
        bool onesided = c.attr_i("onesided", 1) != 0;
        if (step <= 0 || len <= 0 || len > s[1])
          c.error("frame_step and frame_length do not fit the signal");
        int64_t B = s[0], F = (s[1] - len) / step + 1, K = onesided ? len / 2 + 1 : len;
        check_table(c, len * K);
        std::vector<Tensor> frames;
        for (int64_t f = 0; f < F; ++f)
          frames.push_back(slice1(x, 1, f * step, f * step + len).reshape({B, 1, len, s[2]}));
        Tensor fr = lt::concat(frames, 1);  // [B, F, len, c]
        Tensor re = slice1(fr, 3, 0, 1).reshape({B, F, len}), im;
        if (s[2] == 2) im = slice1(fr, 3, 1, 2).reshape({B, F, len});
        if (win.defined()) {
          Tensor w = cast_to(win, re.dtype());
          re = re * w;
          if (im.defined()) im = im * w;
        }
        std::vector<double> cs(len * K), sn(len * K);
        for (int64_t j = 0; j < len; ++j)
          for (int64_t k = 0; k < K; ++k) {
            double a = 2 * M_PI * double((j * k) % len) / double(len);
            cs[j * K + k] = std::cos(a);
            sn[j * K + k] = -std::sin(a);
          }
        DType dt = re.dtype();
        Tensor C = Tensor::from<double>(c.dev, cs, {len, K}).cast(dt);
        Tensor S = Tensor::from<double>(c.dev, sn, {len, K}).cast(dt);
        Tensor ore = re.matmul(C), oim = re.matmul(S);
        if (im.defined()) {
          ore = ore - im.matmul(S);
          oim = oim + im.matmul(C);
        }
        return one(c, lt::concat({ore.reshape({B, F, K, 1}), oim.reshape({B, F, K, 1})}, 3),
                   in[0].ot);
      },
      17};
  return t;
}

}  // namespace

const std::map<std::string, OpEntry>& op_table() {
  static const std::map<std::string, OpEntry> t = build_table();
  return t;
}

std::string out_of_scope_reason(const std::string& domain, const std::string& op) {
  if (domain == "ai.onnx.preview.training") return "training-domain op";
  if (domain == "ai.onnx.ml") return "";
  static const char* seq[] = {
      "SequenceConstruct", "SequenceInsert", "SequenceAt",         "SequenceEmpty",
      "SequenceErase",     "SequenceLength", "SplitToSequence",    "ConcatFromSequence",
      "SequenceMap",       "Optional",       "OptionalGetElement", "OptionalHasElement",
      "StringNormalizer",  "RegexFullMatch", "StringConcat",       "StringSplit"};
  if (domain.empty() || domain == "ai.onnx") {
    for (const char* s : seq) {
      if (op == s) return "sequence, optional and string types are not supported";
    }
  }
  return "";
}

}  // namespace lt::onnx::detail
