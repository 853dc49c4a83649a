// ops.cpp — the op registry table and every op's builder: validation, dtype promotion (cast
// insertion), shape inference and canonicalisation into the IR form of docs/ops.md.
#include "ops.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "dist.h"
#include "error.h"
#include "lazytensor/lower/bf16.hpp"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/graph.hpp"
#include "runtime.h"

namespace lt {
namespace {

using lower::is_float;
using lower::is_int;
using lower::is_numeric;
bool valid_dtype(int64_t d) {
  return d >= LT_DTYPE_F32 && d <= LT_DTYPE_F16;
}

int promo_rank(lt_dtype d) {
  switch (d) {
    case LT_DTYPE_BOOL:
      return 0;
    case LT_DTYPE_I32:
      return 1;
    case LT_DTYPE_I64:
      return 2;
    case LT_DTYPE_F16:
    case LT_DTYPE_BF16:
      return 3;
    case LT_DTYPE_F32:
      return 4;
    case LT_DTYPE_F64:
      return 5;
    default:
      return -1;
  }
}
lt_dtype promote(lt_dtype a, lt_dtype b) {
  if (a == b) return a;
  int ra = promo_rank(a), rb = promo_rank(b);
  if (ra == rb) return LT_DTYPE_F32;  // f16 vs bf16
  return ra > rb ? a : b;
}

const char* name_of(const OpCall& c) {
  return op_name(c.op);
}

NodeRef cast_to(Device* dev, Node* a, lt_dtype dt) {
  if (a->dtype == dt) return NodeRef::share(a);
  return make_node(dev, kOpCast, {a}, dt, a->shape);
}

// NumPy broadcasting: the lowering library's rule, with its error in the core's type.
Dims broadcast_shapes(const char* op, const Dims& a, const Dims& b) {
  try {
    lt::lower::Shape s =
        lt::lower::broadcast_shapes(op, {a.data(), a.size()}, {b.data(), b.size()});
    return Dims(s.data(), s.size());
  } catch (const lt::lower::Error& e) {
    fail(e.code(), "{}", e.what());
  }
}

// Normalises an axis in [-rank, rank) to [0, rank).
int64_t norm_axis(const char* op, int64_t axis, size_t rank, const Dims& shape) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: axis {} is out of range for shape {}", op, axis,
         dims_str(shape));
  return axis < 0 ? axis + r : axis;
}

void check_dims_nonneg(const char* op, const std::vector<int64_t>& s) {
  for (int64_t d : s)
    if (d < 0)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: negative dimension in shape {}", op,
           dims_str(s.data(), s.size()));
}

class AttrBuilder {
 public:
  AttrBuilder() : set_(std::make_unique<AttrSet>()) {}
  AttrBuilder& i(const char* n, int64_t v) {
    auto& a = set_->items.emplace_back();
    a.name = n, a.kind = LT_ATTR_INT, a.i = v;
    return *this;
  }
  AttrBuilder& f(const char* n, double v) {
    auto& a = set_->items.emplace_back();
    a.name = n, a.kind = LT_ATTR_FLOAT, a.f = v;
    return *this;
  }
  AttrBuilder& ints(const char* n, std::vector<int64_t> v) {
    auto& a = set_->items.emplace_back();
    a.name = n, a.kind = LT_ATTR_INTS, a.ints = std::move(v);
    return *this;
  }
  std::unique_ptr<AttrSet> done() {
    set_->finish();
    return std::move(set_);
  }

 private:
  std::unique_ptr<AttrSet> set_;
};

// "dtype X is not a float type" / "... a numeric type" / "... is not bool": the dtype class of
// the op's table row, checked on a data operand.
void expect_class(const OpCall& c, lt_dtype d) {
  lower::DTypes cls = op_def(c.op).info->dtypes;
  if (lower::dtype_in(cls, d)) return;
  if (cls == lower::DTypes::kBool)
    fail(LT_STATUS_DTYPE_MISMATCH, "{}: dtype {} is not bool", name_of(c), lt_dtype_name(d));
  fail(LT_STATUS_DTYPE_MISMATCH, "{}: dtype {} is not a {} type", name_of(c), lt_dtype_name(d),
       lower::dtypes_name(cls));
}

Device* need_device(const OpCall& c) {
  if (!c.device) fail(LT_STATUS_INVALID_ARGUMENT, "{}: a device is required", name_of(c));
  return c.device;
}

// ---- elementwise --------------------------------------------------------------------------

NodeRef build_unary(const OpCall& c) {
  Node* a = c.inputs[0].get();
  expect_class(c, a->dtype);
  return make_node(c.device, c.op, {a}, a->dtype, a->shape);
}

// Elementwise binary ops (rule `binary`) and comparisons (rule `compare`, bool output).
NodeRef build_binary(const OpCall& c) {
  Node* a = c.inputs[0].get();
  Node* b = c.inputs[1].get();
  const char* op = name_of(c);
  lt_dtype dt = promote(a->dtype, b->dtype);
  const lower::OpInfo& info = *op_def(c.op).info;
  bool cmp = info.rule == lower::Rule::compare;
  if (info.dtypes == lower::DTypes::kBool) {
    if (a->dtype != LT_DTYPE_BOOL || b->dtype != LT_DTYPE_BOOL)
      fail(LT_STATUS_DTYPE_MISMATCH, "{}: dtypes {} and {} must both be bool", op,
           lt_dtype_name(a->dtype), lt_dtype_name(b->dtype));
  } else if (info.dtypes == lower::DTypes::kFloat) {
    expect_class(c, dt);
  } else if (!cmp && !is_numeric(dt)) {
    fail(LT_STATUS_DTYPE_MISMATCH, "{}: dtypes {} and {} are not numeric", op,
         lt_dtype_name(a->dtype), lt_dtype_name(b->dtype));
  }
  Dims shape = a->shape == b->shape ? a->shape : broadcast_shapes(op, a->shape, b->shape);
  lt_dtype out_dt = cmp ? LT_DTYPE_BOOL : dt;
  if (a->dtype == dt && b->dtype == dt)  // the common case: no casts, no extra ref traffic
    return make_node(c.device, c.op, {a, b}, out_dt, shape);
  NodeRef ca = cast_to(c.device, a, dt), cb = cast_to(c.device, b, dt);
  return make_node(c.device, c.op, {ca.get(), cb.get()}, out_dt, shape);
}

NodeRef build_compare(const OpCall& c) {
  return build_binary(c);
}

NodeRef build_where(const OpCall& c) {
  Node* cond = c.inputs[0].get();
  Node* a = c.inputs[1].get();
  Node* b = c.inputs[2].get();
  if (cond->dtype != LT_DTYPE_BOOL)
    fail(LT_STATUS_DTYPE_MISMATCH, "where: condition dtype {} is not bool",
         lt_dtype_name(cond->dtype));
  lt_dtype dt = promote(a->dtype, b->dtype);
  Dims s = broadcast_shapes("where", broadcast_shapes("where", cond->shape, a->shape), b->shape);
  NodeRef ca = cast_to(c.device, a, dt), cb = cast_to(c.device, b, dt);
  return make_node(c.device, kOpWhere, {cond, ca.get(), cb.get()}, dt, s);
}

NodeRef build_cast(const OpCall& c) {
  return cast_to(c.device, c.inputs[0].get(), c.attr_dtype("dtype"));
}

// ---- creation -----------------------------------------------------------------------------

NodeRef build_full(const OpCall& c) {
  Device* dev = need_device(c);
  auto shape = c.attr_ints("shape");
  check_dims_nonneg("full", shape);
  lt_dtype dt = c.attr_dtype("dtype");
  return make_node(dev, kOpFull, {}, dt, Dims(shape.data(), shape.size()),
                   AttrBuilder().f("value", c.attr_float("value")).done());
}

NodeRef build_arange(const OpCall& c) {
  Device* dev = need_device(c);
  double start = c.attr_float("start"), stop = c.attr_float("stop"), step = c.attr_float("step");
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(stop))
    fail(LT_STATUS_INVALID_ARGUMENT,
         "arange: step must be non-zero and bounds finite (start {}, "
         "stop {}, step {})",
         start, stop, step);
  double len = std::ceil((stop - start) / step);
  // Refused before the conversion: a double beyond int64's range does not convert (UB).
  if (!(len <= static_cast<double>(int64_t{1} << 62)))
    fail(LT_STATUS_INVALID_ARGUMENT,
         "arange: {} elements (start {}, stop {}, step {}) are more than any tensor can hold", len,
         start, stop, step);
  int64_t n = len > 0 ? static_cast<int64_t>(len) : 0;
  lt_dtype dt = c.attr_dtype("dtype");
  expect_class(c, dt);
  return make_node(dev, kOpArange, {}, dt, Dims{n},
                   AttrBuilder().f("start", start).f("step", step).done());
}

// The seed operand and output shape/dtype shared by random_unit, random_uniform, random_normal.
Dims random_shape(const OpCall& c, lt_dtype* dt) {
  const char* op = name_of(c);
  Node* seed = c.inputs[0].get();
  if (seed->dtype != LT_DTYPE_I64 || !seed->shape.empty())
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: seed must be a rank-0 i64 tensor, got {} {}", op,
         lt_dtype_name(seed->dtype), dims_str(seed->shape));
  auto shape = c.attr_ints("shape");
  check_dims_nonneg(op, shape);
  *dt = c.attr_dtype("dtype");
  expect_class(c, *dt);
  return Dims(shape.data(), shape.size());
}

NodeRef build_random_unit(const OpCall& c) {
  lt_dtype dt;
  Dims shape = random_shape(c, &dt);
  return make_node(
      c.device, c.op, {c.inputs[0].get()}, dt, shape,
      AttrBuilder().i("stride", c.attr_int("stride")).i("offset", c.attr_int("offset")).done());
}

NodeRef build_random(const OpCall& c) {
  lt_dtype dt;
  Dims shape = random_shape(c, &dt);
  AttrBuilder ab;
  if (c.op == kOpRandomUniform) {
    ab.f("low", c.attr_float("low")).f("high", c.attr_float("high"));
  } else {
    double sd = c.attr_float("std");
    if (sd < 0) fail(LT_STATUS_INVALID_ARGUMENT, "{}: std {} is negative", name_of(c), sd);
    ab.f("mean", c.attr_float("mean")).f("std", sd);
  }
  return make_node(c.device, c.op, {c.inputs[0].get()}, dt, shape, ab.done());
}

// ---- reductions ---------------------------------------------------------------------------

NodeRef build_reduce(const OpCall& c) {
  const char* op = name_of(c);
  Node* a = c.inputs[0].get();
  expect_class(c, a->dtype);
  size_t rank = a->shape.size();
  auto axes = c.attr_ints("axes");
  if (axes.empty())
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  for (auto& x : axes) x = norm_axis(op, x, rank, a->shape);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: repeated axis in axes for shape {}", op,
         dims_str(a->shape));
  bool keep = c.attr_int("keepdims") != 0;
  if (axes.empty()) return NodeRef::share(a);
  Dims out;
  size_t k = 0;
  for (size_t i = 0; i < rank; ++i) {
    bool red = k < axes.size() && axes[k] == static_cast<int64_t>(i);
    if (red) {
      ++k;
      if (a->shape[i] == 0 && (c.op == kOpMax || c.op == kOpMin))
        fail(LT_STATUS_SHAPE_MISMATCH, "{}: cannot reduce empty axis {} of shape {}", op, i,
             dims_str(a->shape));
      if (keep) out.push_back(1);
    } else {
      out.push_back(a->shape[i]);
    }
  }
  return make_node(c.device, c.op, {a}, a->dtype, out,
                   AttrBuilder().ints("axes", std::move(axes)).i("keepdims", keep).done());
}

NodeRef build_argmax(const OpCall& c) {
  Node* a = c.inputs[0].get();
  expect_class(c, a->dtype);
  if (a->shape.empty()) fail(LT_STATUS_SHAPE_MISMATCH, "argmax: input is rank 0");
  int64_t axis = norm_axis("argmax", c.attr_int("axis"), a->shape.size(), a->shape);
  if (a->shape[axis] == 0)
    fail(LT_STATUS_SHAPE_MISMATCH, "argmax: cannot reduce empty axis {} of shape {}", axis,
         dims_str(a->shape));
  bool keep = c.attr_int("keepdims") != 0;
  Dims out;
  for (size_t i = 0; i < a->shape.size(); ++i) {
    if (static_cast<int64_t>(i) != axis)
      out.push_back(a->shape[i]);
    else if (keep)
      out.push_back(1);
  }
  return make_node(c.device, kOpArgmax, {a}, LT_DTYPE_I64, out,
                   AttrBuilder().i("axis", axis).i("keepdims", keep).done());
}

// ---- layout -------------------------------------------------------------------------------

NodeRef reshape_to(Device* dev, Node* a, const Dims& s) {
  if (a->shape == s) return NodeRef::share(a);
  return make_node(dev, kOpReshape, {a}, a->dtype, s);
}
NodeRef broadcast_node(Device* dev, Node* a, const Dims& s) {
  if (a->shape == s) return NodeRef::share(a);
  return make_node(dev, kOpBroadcastTo, {a}, a->dtype, s);
}

NodeRef build_reshape(const OpCall& c) {
  Node* a = c.inputs[0].get();
  auto s = c.attr_ints("shape");
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0)
        fail(LT_STATUS_INVALID_ARGUMENT, "reshape: more than one -1 in shape {}",
             dims_str(s.data(), s.size()));
      infer = static_cast<int>(i);
    } else if (s[i] < 0) {
      fail(LT_STATUS_INVALID_ARGUMENT, "reshape: invalid dimension {} in shape {}", s[i],
           dims_str(s.data(), s.size()));
    } else if (__builtin_mul_overflow(known, s[i], &known)) {
      fail(LT_STATUS_INVALID_ARGUMENT, "reshape: shape {} has more elements than any tensor",
           dims_str(s.data(), s.size()));
    }
  }
  int64_t n = a->shape.numel();
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      fail(LT_STATUS_SHAPE_MISMATCH, "reshape: cannot reshape {} into {}", dims_str(a->shape),
           dims_str(s.data(), s.size()));
    s[infer] = n / known;
  } else if (known != n) {
    fail(LT_STATUS_SHAPE_MISMATCH, "reshape: cannot reshape {} ({} elements) into {}",
         dims_str(a->shape), n, dims_str(s.data(), s.size()));
  }
  return reshape_to(c.device, a, Dims(s.data(), s.size()));
}

NodeRef build_permute(const OpCall& c) {
  Node* a = c.inputs[0].get();
  auto perm = c.attr_ints("perm");
  size_t r = a->shape.size();
  if (perm.size() != r)
    fail(LT_STATUS_INVALID_ARGUMENT, "permute: perm {} has {} entries for shape {}",
         dims_str(perm.data(), perm.size()), perm.size(), dims_str(a->shape));
  std::vector<bool> seen(r, false);
  bool identity = true;
  Dims out;
  out.resize(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t p = perm[i] < 0 ? perm[i] + static_cast<int64_t>(r) : perm[i];
    if (p < 0 || p >= static_cast<int64_t>(r) || seen[p])
      fail(LT_STATUS_INVALID_ARGUMENT, "permute: {} is not a permutation of 0..{}",
           dims_str(perm.data(), perm.size()), r == 0 ? 0 : r - 1);
    seen[p] = true;
    perm[i] = p;
    identity = identity && p == static_cast<int64_t>(i);
    out[i] = a->shape[p];
  }
  if (identity) return NodeRef::share(a);
  return make_node(c.device, kOpPermute, {a}, a->dtype, out,
                   AttrBuilder().ints("perm", std::move(perm)).done());
}

NodeRef build_broadcast_to(const OpCall& c) {
  Node* a = c.inputs[0].get();
  auto s = c.attr_ints("shape");
  check_dims_nonneg("broadcast_to", s);
  Dims target(s.data(), s.size());
  bool ok = target.size() >= a->shape.size();
  for (size_t i = 0; ok && i < a->shape.size(); ++i) {
    int64_t d = a->shape[a->shape.size() - 1 - i], t = target[target.size() - 1 - i];
    ok = d == t || d == 1;
  }
  if (!ok)
    fail(LT_STATUS_SHAPE_MISMATCH, "broadcast_to: shape {} does not broadcast to {}",
         dims_str(a->shape), dims_str(target));
  return broadcast_node(c.device, a, target);
}

NodeRef build_slice(const OpCall& c) {
  Node* a = c.inputs[0].get();
  size_t r = a->shape.size();
  bool hs = false, he = false, hp = false;
  auto starts = c.attr_ints("starts", &hs), stops = c.attr_ints("stops", &he),
       steps = c.attr_ints("steps", &hp);
  if (!hs) starts.assign(r, 0);
  if (!he) stops.assign(r, std::numeric_limits<int64_t>::max());
  if (!hp) steps.assign(r, 1);
  if (starts.size() != r || stops.size() != r || steps.size() != r)
    fail(LT_STATUS_INVALID_ARGUMENT,
         "slice: starts/stops/steps need {} entries each for shape {} (got {}, {}, {})", r,
         dims_str(a->shape), starts.size(), stops.size(), steps.size());
  Dims out;
  out.resize(r);
  bool identity = true;
  for (size_t i = 0; i < r; ++i) {
    int64_t len = a->shape[i], st = steps[i], b = starts[i], e = stops[i], n;
    if (st == 0) fail(LT_STATUS_INVALID_ARGUMENT, "slice: step 0 on axis {}", i);
    if (st > 0) {
      if (b < 0) b = std::max<int64_t>(b + len, 0);
      if (b > len) b = len;
      if (e < 0) e = std::max<int64_t>(e + len, 0);
      if (e > len) e = len;
      n = e > b ? (e - b - 1) / st + 1 : 0;
    } else {
      if (b < 0) b = std::max<int64_t>(b + len, -1);
      if (b >= len) b = len - 1;
      if (e < 0) e = std::max<int64_t>(e + len, -1);
      if (e >= len) e = len - 1;
      n = e < b ? (b - e - 1) / (-st) + 1 : 0;
    }
    if (n == 0) b = 0;
    starts[i] = b;
    out[i] = n;
    identity = identity && b == 0 && st == 1 && n == len;
  }
  if (identity) return NodeRef::share(a);
  return make_node(c.device, kOpSlice, {a}, a->dtype, out,
                   AttrBuilder().ints("starts", std::move(starts)).ints("steps", steps).done());
}

NodeRef build_concat(const OpCall& c) {
  Node* first = c.inputs[0].get();
  lt_dtype dt = first->dtype;
  for (size_t i = 1; i < c.num_inputs; ++i) dt = promote(dt, c.inputs[i]->dtype);
  size_t r = first->shape.size();
  if (r == 0) fail(LT_STATUS_SHAPE_MISMATCH, "concat: inputs are rank 0");
  int64_t axis = norm_axis("concat", c.attr_int("axis"), r, first->shape);
  Dims out = first->shape;
  for (size_t i = 1; i < c.num_inputs; ++i) {
    const Dims& s = c.inputs[i]->shape;
    bool ok = s.size() == r;
    for (size_t d = 0; ok && d < r; ++d) ok = static_cast<int64_t>(d) == axis || s[d] == out[d];
    if (!ok)
      fail(LT_STATUS_SHAPE_MISMATCH, "concat: shapes {} and {} differ outside axis {}",
           dims_str(first->shape), dims_str(s), axis);
    if (__builtin_add_overflow(out[axis], s[axis], &out[axis]))
      fail(LT_STATUS_INVALID_ARGUMENT, "concat: the inputs' sizes along axis {} overflow", axis);
  }
  if (c.num_inputs == 1) return cast_to(c.device, first, dt);
  std::vector<NodeRef> cast;
  std::vector<Node*> ops;
  for (size_t i = 0; i < c.num_inputs; ++i) {
    cast.push_back(cast_to(c.device, c.inputs[i].get(), dt));
    ops.push_back(cast.back().get());
  }
  return make_node_n(c.device, kOpConcat, ops.data(), ops.size(), dt, out,
                     AttrBuilder().i("axis", axis).done());
}

NodeRef build_pad(const OpCall& c) {
  Node* a = c.inputs[0].get();
  size_t r = a->shape.size();
  auto before = c.attr_ints("before"), after = c.attr_ints("after");
  if (before.size() != r || after.size() != r)
    fail(LT_STATUS_INVALID_ARGUMENT, "pad: before/after need {} entries each for shape {}", r,
         dims_str(a->shape));
  Dims out = a->shape;
  bool identity = true;
  for (size_t i = 0; i < r; ++i) {
    if (before[i] < 0 || after[i] < 0)
      fail(LT_STATUS_INVALID_ARGUMENT, "pad: negative padding on axis {}", i);
    if (__builtin_add_overflow(out[i], before[i], &out[i]) ||
        __builtin_add_overflow(out[i], after[i], &out[i]))
      fail(LT_STATUS_INVALID_ARGUMENT, "pad: padding {} + {} of axis {} overflows", before[i],
           after[i], i);
    identity = identity && before[i] == 0 && after[i] == 0;
  }
  if (identity) return NodeRef::share(a);
  return make_node(c.device, kOpPad, {a}, a->dtype, out,
                   AttrBuilder()
                       .ints("before", std::move(before))
                       .ints("after", std::move(after))
                       .f("value", c.attr_float("value"))
                       .done());
}

Dims gather_shape(const char* op, Node* a, Node* idx, int64_t axis) {
  Dims out;
  for (int64_t i = 0; i < axis; ++i) out.push_back(a->shape[i]);
  for (int64_t d : idx->shape) out.push_back(d);
  for (size_t i = axis + 1; i < a->shape.size(); ++i) out.push_back(a->shape[i]);
  if (a->shape[axis] == 0 && idx->shape.numel() > 0)
    fail(LT_STATUS_SHAPE_MISMATCH, "{}: cannot index empty axis {} of shape {}", op, axis,
         dims_str(a->shape));
  return out;
}

NodeRef build_gather(const OpCall& c) {
  Node* a = c.inputs[0].get();
  Node* idx = c.inputs[1].get();
  if (!is_int(idx->dtype))
    fail(LT_STATUS_DTYPE_MISMATCH, "gather: indices dtype {} is not i32/i64",
         lt_dtype_name(idx->dtype));
  if (a->shape.empty()) fail(LT_STATUS_SHAPE_MISMATCH, "gather: input is rank 0");
  int64_t axis = norm_axis("gather", c.attr_int("axis"), a->shape.size(), a->shape);
  return make_node(c.device, kOpGather, {a, idx}, a->dtype, gather_shape("gather", a, idx, axis),
                   AttrBuilder().i("axis", axis).done());
}

NodeRef build_scatter_add(const OpCall& c) {
  Node* a = c.inputs[0].get();
  Node* idx = c.inputs[1].get();
  Node* upd = c.inputs[2].get();
  if (!is_int(idx->dtype))
    fail(LT_STATUS_DTYPE_MISMATCH, "scatter_add: indices dtype {} is not i32/i64",
         lt_dtype_name(idx->dtype));
  if (!is_numeric(a->dtype))
    fail(LT_STATUS_DTYPE_MISMATCH, "scatter_add: dtype {} is not numeric", lt_dtype_name(a->dtype));
  if (a->shape.empty()) fail(LT_STATUS_SHAPE_MISMATCH, "scatter_add: input is rank 0");
  int64_t axis = norm_axis("scatter_add", c.attr_int("axis"), a->shape.size(), a->shape);
  Dims want = gather_shape("scatter_add", a, idx, axis);
  if (upd->shape != want)
    fail(LT_STATUS_SHAPE_MISMATCH,
         "scatter_add: updates shape {} != expected {} (input {}, indices {})",
         dims_str(upd->shape), dims_str(want), dims_str(a->shape), dims_str(idx->shape));
  NodeRef cu = cast_to(c.device, upd, a->dtype);
  return make_node(c.device, kOpScatterAdd, {a, idx, cu.get()}, a->dtype, a->shape,
                   AttrBuilder().i("axis", axis).done());
}

// ---- matmul (NumPy semantics lowered to 2-D / 3-D) ---------------------------------------

NodeRef build_matmul(const OpCall& c) {
  Device* dev = c.device;
  Node* a0 = c.inputs[0].get();
  Node* b0 = c.inputs[1].get();
  lt_dtype dt = promote(a0->dtype, b0->dtype);
  if (!lower::dtype_in(op_def(c.op).info->dtypes, dt))
    fail(LT_STATUS_DTYPE_MISMATCH, "matmul: dtypes {} and {} are not float types",
         lt_dtype_name(a0->dtype), lt_dtype_name(b0->dtype));
  if (a0->shape.empty() || b0->shape.empty())
    fail(LT_STATUS_SHAPE_MISMATCH, "matmul: shapes {} and {}: operands must be at least 1-D",
         dims_str(a0->shape), dims_str(b0->shape));
  NodeRef a = cast_to(dev, a0, dt), b = cast_to(dev, b0, dt);
  bool a_vec = a->shape.size() == 1, b_vec = b->shape.size() == 1;
  Dims as = a->shape, bs = b->shape;
  if (a_vec) as = Dims{1, as[0]};
  if (b_vec) bs = Dims{bs[0], 1};
  int64_t M = as[as.size() - 2], K = as[as.size() - 1], K2 = bs[bs.size() - 2],
          N = bs[bs.size() - 1];
  if (K != K2)
    fail(LT_STATUS_SHAPE_MISMATCH, "matmul: shapes {} and {} do not match (inner dims {} vs {})",
         dims_str(a0->shape), dims_str(b0->shape), K, K2);
  Dims abatch(as.data(), as.size() - 2), bbatch(bs.data(), bs.size() - 2);
  NodeRef out;
  Dims batch;
  if (abatch.empty() && bbatch.empty()) {
    NodeRef a2 = reshape_to(dev, a.get(), as), b2 = reshape_to(dev, b.get(), bs);
    out = make_node(dev, kOpMatmul, {a2.get(), b2.get()}, dt, Dims{M, N});
  } else if (bbatch.empty()) {
    // [..., M, K] x [K, N]: fold the batch into M (one 2-D matmul).
    batch = abatch;
    int64_t B = batch.numel();
    NodeRef a2 = reshape_to(dev, a.get(), Dims{B * M, K}), b2 = reshape_to(dev, b.get(), bs);
    out = make_node(dev, kOpMatmul, {a2.get(), b2.get()}, dt, Dims{B * M, N});
  } else {
    std::string opn = "matmul";
    batch = broadcast_shapes(opn.c_str(), abatch, bbatch);
    int64_t B = batch.numel();
    Dims fa = batch, fb = batch;
    fa.push_back(M), fa.push_back(K), fb.push_back(K), fb.push_back(N);
    NodeRef a1 = reshape_to(dev, a.get(), as), b1 = reshape_to(dev, b.get(), bs);
    NodeRef a2 = broadcast_node(dev, a1.get(), fa), b2 = broadcast_node(dev, b1.get(), fb);
    NodeRef a3 = reshape_to(dev, a2.get(), Dims{B, M, K}),
            b3 = reshape_to(dev, b2.get(), Dims{B, K, N});
    out = make_node(dev, kOpMatmul, {a3.get(), b3.get()}, dt, Dims{B, M, N});
  }
  Dims final_shape = batch;
  if (!a_vec) final_shape.push_back(M);
  if (!b_vec) final_shape.push_back(N);
  return reshape_to(dev, out.get(), final_shape);
}

// ---- nn -----------------------------------------------------------------------------------

// A 2-entry INTS attribute (H, W) of conv2d and the pools; absent: its table default.
std::vector<int64_t> pair_attr(const OpCall& c, const char* name, int64_t min_value) {
  auto v = c.attr_ints(name);
  if (v.size() != 2)
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' needs 2 entries, got {}", name_of(c), name,
         v.size());
  // The same bound as lt::lower::validate's (2^30): output shapes computed from these values
  // (2 * padding, dilation * (kernel - 1)) then cannot overflow int64.
  constexpr int64_t kMaxWindow = int64_t{1} << 30;
  for (int64_t x : v) {
    if (x < min_value)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' value {} is below {}", name_of(c), name,
           x, min_value);
    if (x > kMaxWindow)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' value {} is above {}", name_of(c), name,
           x, kMaxWindow);
  }
  return v;
}

NodeRef build_conv2d(const OpCall& c) {
  Node* x0 = c.inputs[0].get();
  Node* w0 = c.inputs[1].get();
  Node* bias0 = c.num_inputs > 2 ? c.inputs[2].get() : nullptr;
  lt_dtype dt = promote(x0->dtype, w0->dtype);
  if (bias0) dt = promote(dt, bias0->dtype);
  expect_class(c, dt);
  if (x0->shape.size() != 4 || w0->shape.size() != 4)
    fail(LT_STATUS_SHAPE_MISMATCH, "conv2d: input {} and weight {} must both be 4-D",
         dims_str(x0->shape), dims_str(w0->shape));
  auto stride = pair_attr(c, "stride", 1);
  auto padding = pair_attr(c, "padding", 0);
  auto dilation = pair_attr(c, "dilation", 1);
  int64_t groups = c.attr_int("groups");
  if (groups < 1) fail(LT_STATUS_INVALID_ARGUMENT, "conv2d: groups {} < 1", groups);
  const Dims& xs = x0->shape;
  const Dims& ws = w0->shape;
  int64_t in_channels = 0;
  if (__builtin_mul_overflow(ws[1], groups, &in_channels) || xs[1] != in_channels)
    fail(LT_STATUS_SHAPE_MISMATCH, "conv2d: input channels {} != weight channels {} x groups {}",
         xs[1], ws[1], groups);
  if (ws[0] % groups != 0)
    fail(LT_STATUS_SHAPE_MISMATCH, "conv2d: output channels {} not divisible by groups {}", ws[0],
         groups);
  if (bias0 && (bias0->shape.size() != 1 || bias0->shape[0] != ws[0]))
    fail(LT_STATUS_SHAPE_MISMATCH, "conv2d: bias shape {} != [{}]", dims_str(bias0->shape), ws[0]);
  // In 128 bits: a dilated kernel dim (up to 2^30 x 2^46, an empty weight's dims are not
  // bounded by its bytes) overflows int64. A span that is not negative fits int64.
  auto span = [&](int i) {
    __int128 v = static_cast<__int128>(xs[2 + i]) + 2 * static_cast<__int128>(padding[i]) -
                 static_cast<__int128>(dilation[i]) * (ws[2 + i] - 1) - 1;
    return v < 0 ? int64_t{-1} : static_cast<int64_t>(v);
  };
  int64_t oh = span(0), ow = span(1);
  if (oh < 0 || ow < 0)
    fail(LT_STATUS_SHAPE_MISMATCH, "conv2d: kernel {} does not fit input {} with padding {}",
         dims_str(ws), dims_str(xs), dims_str(padding.data(), 2));
  oh = oh / stride[0] + 1, ow = ow / stride[1] + 1;
  NodeRef x = cast_to(c.device, x0, dt), w = cast_to(c.device, w0, dt);
  NodeRef b = bias0 ? cast_to(c.device, bias0, dt) : NodeRef();
  auto attrs = AttrBuilder()
                   .ints("stride", stride)
                   .ints("padding", padding)
                   .ints("dilation", dilation)
                   .i("groups", groups)
                   .done();
  Dims out{xs[0], ws[0], oh, ow};
  if (b)
    return make_node(c.device, kOpConv2d, {x.get(), w.get(), b.get()}, dt, out, std::move(attrs));
  return make_node(c.device, kOpConv2d, {x.get(), w.get()}, dt, out, std::move(attrs));
}

NodeRef build_pool(const OpCall& c) {
  const char* op = name_of(c);
  Node* x = c.inputs[0].get();
  expect_class(c, x->dtype);
  if (x->shape.size() != 4)
    fail(LT_STATUS_SHAPE_MISMATCH, "{}: input {} must be 4-D [N,C,H,W]", op, dims_str(x->shape));
  auto kernel = pair_attr(c, "kernel", 1);
  auto stride = c.attr("stride") ? pair_attr(c, "stride", 1) : kernel;
  auto padding = pair_attr(c, "padding", 0);
  int64_t o[2];
  for (int i = 0; i < 2; ++i) {
    if (padding[i] >= kernel[i])
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: padding {} >= kernel {}", op,
           dims_str(padding.data(), 2), dims_str(kernel.data(), 2));
    int64_t span = x->shape[2 + i] + 2 * padding[i] - kernel[i];
    if (span < 0)
      fail(LT_STATUS_SHAPE_MISMATCH, "{}: kernel {} does not fit input {} with padding {}", op,
           dims_str(kernel.data(), 2), dims_str(x->shape), dims_str(padding.data(), 2));
    o[i] = span / stride[i] + 1;
  }
  return make_node(
      c.device, c.op, {x}, x->dtype, Dims{x->shape[0], x->shape[1], o[0], o[1]},
      AttrBuilder().ints("kernel", kernel).ints("stride", stride).ints("padding", padding).done());
}

NodeRef build_softmax(const OpCall& c) {
  const char* op = name_of(c);
  Node* a = c.inputs[0].get();
  expect_class(c, a->dtype);
  if (a->shape.empty()) fail(LT_STATUS_SHAPE_MISMATCH, "{}: input is rank 0", op);
  int64_t axis = norm_axis(op, c.attr_int("axis"), a->shape.size(), a->shape);
  return make_node(c.device, c.op, {a}, a->dtype, a->shape, AttrBuilder().i("axis", axis).done());
}

// ---- collectives (run across the lt_dist_init group; dist.cpp) -------------------------------

// all_reduce (reduce: 0 sum, 1 mean, 2 max) and broadcast (root): the output is the input's
// description. The group must exist at trace time: broadcast's root is checked against it.
NodeRef build_collective(const OpCall& c) {
  const char* op = name_of(c);
  Node* a = c.inputs[0].get();
  expect_class(c, a->dtype);
  const int size = dist_world_size(op);
  if (c.op == kOpAllReduce) {
    int64_t r = c.attr_int("reduce");
    if (r < 0 || r > 2)
      fail(LT_STATUS_INVALID_ARGUMENT, "all_reduce: reduce {} is not 0 (sum), 1 (mean), 2 (max)",
           r);
    if (a->dtype != LT_DTYPE_F32 && a->dtype != LT_DTYPE_F64 && a->dtype != LT_DTYPE_I32 &&
        a->dtype != LT_DTYPE_I64)
      fail(LT_STATUS_DTYPE_MISMATCH, "all_reduce: dtype {} cannot be reduced (f32 f64 i32 i64)",
           lt_dtype_name(a->dtype));
    return make_node(c.device, c.op, {a}, a->dtype, a->shape, AttrBuilder().i("reduce", r).done());
  }
  int64_t root = c.attr_int("root");
  if (root < 0 || root >= size)
    fail(LT_STATUS_INVALID_ARGUMENT, "broadcast: root {} is not a rank of the group of {}", root,
         size);
  return make_node(c.device, c.op, {a}, a->dtype, a->shape, AttrBuilder().i("root", root).done());
}

NodeRef build_all_gather(const OpCall& c) {
  Node* a = c.inputs[0].get();
  expect_class(c, a->dtype);
  const int size = dist_world_size("all_gather");
  if (a->shape.empty())
    fail(LT_STATUS_SHAPE_MISMATCH, "all_gather: input is rank 0 (it is stacked along dim 0)");
  Dims out = a->shape;
  out[0] *= size;
  return make_node(c.device, c.op, {a}, a->dtype, out);
}

NodeRef build_input(const OpCall&) {
  fail(LT_STATUS_INVALID_ARGUMENT, "input: leaves are created with lt_tensor_from_host");
}

// ---- the table ----------------------------------------------------------------------------

struct Registry {
  std::deque<OpDef> defs;  // deque: ids stay valid while custom ops are appended
  std::unordered_map<std::string, uint16_t> by_name;
  std::shared_mutex mu;  // guards appends and by_name; defs[id] reads need no lock

  Registry() {
    auto add = [&](OpId id, BuildFn fn) {
      const lower::OpInfo& info = lower::op_info(id);
      OpDef d;
      d.name = std::string(info.name);
      d.min_inputs = info.min_inputs;
      d.max_inputs = info.max_inputs;
      d.info = &info;
      d.build = fn;
      by_name.emplace(d.name, static_cast<uint16_t>(defs.size()));
      defs.push_back(std::move(d));
    };
#define LT_OP(Camel, name, capi, cfn, cppfn, category, lo, hi, attrs, dtypes, rule, grad, kind) \
  add(kOp##Camel, &build_##rule);
#include "lazytensor/lt_ops.def"
#undef LT_OP
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

// ---- OpCall accessors ---------------------------------------------------------------------

const lt_attr* OpCall::attr(const char* name) const {
  for (size_t i = 0; i < num_attrs; ++i)
    if (attrs[i].name && std::strcmp(attrs[i].name, name) == 0) return &attrs[i];
  return nullptr;
}

namespace {
// The table's spec of attribute `name` of the call's op; only asked for attributes the op's
// row declares (a builder reading an undeclared one is a bug).
const lower::AttrSpec& spec_of(const OpCall& c, const char* name) {
  const lower::OpInfo* info = op_def(c.op).info;
  const lower::AttrSpec* s = info ? info->attr(name) : nullptr;
  if (!s)
    fail(LT_STATUS_INTERNAL, "{}: attribute '{}' is not in the op table", op_name(c.op), name);
  return *s;
}
}  // namespace

int64_t OpCall::attr_int(const char* name) const {
  const lt_attr* a = attr(name);
  return a ? a->i : spec_of(*this, name).i;
}
double OpCall::attr_float(const char* name) const {
  const lt_attr* a = attr(name);
  if (!a) return spec_of(*this, name).f;
  return a->kind == LT_ATTR_INT ? static_cast<double>(a->i) : a->f;
}
lt_dtype OpCall::attr_dtype(const char* name) const {
  return static_cast<lt_dtype>(attr_int(name));
}
std::vector<int64_t> OpCall::attr_ints(const char* name, bool* present) const {
  const lt_attr* a = attr(name);
  if (present) *present = a != nullptr;
  if (!a) return spec_of(*this, name).ints;
  return std::vector<int64_t>(a->ints, a->ints + a->ints_len);
}

// ---- registry -----------------------------------------------------------------------------

const OpDef& op_def(uint16_t id) {
  return registry().defs[id];
}
const char* op_name(uint16_t id) {
  return registry().defs[id].name.c_str();
}
size_t op_count() {
  auto& r = registry();
  std::shared_lock lk(r.mu);
  return r.defs.size();
}
bool find_op(std::string_view name, uint16_t* id) {
  auto& r = registry();
  std::shared_lock lk(r.mu);
  auto it = r.by_name.find(std::string(name));
  if (it == r.by_name.end()) return false;
  *id = it->second;
  return true;
}
uint16_t register_op(OpDef def) {
  auto& r = registry();
  std::unique_lock lk(r.mu);
  if (r.by_name.count(def.name))
    fail(LT_STATUS_INVALID_ARGUMENT, "register_op: op '{}' already exists", def.name);
  if (r.defs.size() >= 0xFFFF) fail(LT_STATUS_INVALID_ARGUMENT, "register_op: too many ops");
  uint16_t id = static_cast<uint16_t>(r.defs.size());
  r.by_name.emplace(def.name, id);
  r.defs.push_back(std::move(def));
  return id;
}

namespace {

const char* kind_name(lt_attr_kind k) {
  switch (k) {
    case LT_ATTR_INT:
      return "INT";
    case LT_ATTR_FLOAT:
      return "FLOAT";
    case LT_ATTR_INTS:
      return "INTS";
    default:
      return "STRING";
  }
}

// Checks the call's attributes against the op's table row: known names, kinds (a FLOAT also
// takes an INT), valid dtype values, INTS arrays present, required attributes given.
void check_attrs(const OpCall& call, const OpDef& def) {
  for (size_t i = 0; i < call.num_attrs; ++i) {
    const lt_attr& a = call.attrs[i];
    if (!a.name) fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute {} has no name", def.name, i);
    if (!def.info) {  // custom op: names only; its inference callback reads the values
      bool known = false;
      for (const auto& s : def.attr_names) known = known || s == a.name;
      if (!known) fail(LT_STATUS_INVALID_ARGUMENT, "{}: unknown attribute '{}'", def.name, a.name);
      continue;
    }
    const lower::AttrSpec* s = def.info->attr(a.name);
    if (!s) fail(LT_STATUS_INVALID_ARGUMENT, "{}: unknown attribute '{}'", def.name, a.name);
    bool ok = a.kind == s->kind || (s->kind == LT_ATTR_FLOAT && a.kind == LT_ATTR_INT);
    if (!ok)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' must be {}", def.name, a.name,
           kind_name(s->kind));
    if (s->is_dtype && !valid_dtype(a.i))
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: invalid dtype value {}", def.name, a.i);
    if (a.kind == LT_ATTR_INTS && a.ints_len && !a.ints)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' has NULL ints with length {}", def.name,
           a.name, a.ints_len);
  }
  if (!def.info) return;
  for (const lower::AttrSpec& s : def.info->attrs)
    if (s.presence == lower::AttrSpec::Presence::kRequired && !call.attr(s.name.c_str()))
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' is required", def.name, s.name);
}

}  // namespace

NodeRef apply_op(const OpCall& call) {
  const OpDef& def = op_def(call.op);
  int n = static_cast<int>(call.num_inputs);
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    if (def.min_inputs == def.max_inputs)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: expects {} inputs, got {}", def.name, def.min_inputs,
           n);
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: expects at least {} inputs, got {}", def.name,
         def.min_inputs, n);
  }
  check_attrs(call, def);
  return def.build(call);
}

// ---- node construction --------------------------------------------------------------------

size_t checked_bytes(const char* what, lt_dtype dtype, const Dims& shape) {
  // The zero dims aside, the dims must multiply within the limit too: an empty [0, 2^62, 4]
  // holds nothing, but its row-major strides and every numel computed in order overflow.
  uint64_t numel = 1, bytes = 0;
  bool overflow = false, empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: negative dimension in shape {}", what, dims_str(shape));
    if (shape[i] == 0)
      empty = true;
    else
      overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(shape[i]), &numel);
  }
  overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(lt_dtype_size(dtype)), &bytes);
  if (overflow || bytes > kMaxTensorBytes)
    fail(LT_STATUS_INVALID_ARGUMENT,
         "{}: shape {} of {} is {} bytes{}: more than any tensor can hold (at most 2^46)", what,
         dims_str(shape), lt_dtype_name(dtype),
         overflow ? std::string("over 2^64") : std::to_string(bytes),
         empty ? " without its zero dims" : "");
  return empty ? 0 : static_cast<size_t>(bytes);
}

NodeRef make_node_n(Device* device, uint16_t op, Node* const* operands, size_t n, lt_dtype dtype,
                    const Dims& shape, std::unique_ptr<AttrSet> attrs) {
  checked_bytes(op_name(op), dtype, shape);
  Node* node = new Node;
  g_nodes_alive.fetch_add(1, std::memory_order_relaxed);
  NodeRef ref = NodeRef::adopt(node);
  node->op = op;
  node->dtype = dtype;
  node->shape = shape;
  node->device = device;
  uint64_t h = hash_combine(hash_mix(op + 1), static_cast<uint64_t>(dtype));
  h = hash_combine(h, hash_bytes(shape.data(), shape.size() * sizeof(int64_t), shape.size()));
  if (attrs) h = hash_combine(h, attrs->hash);
  node->hash = h;
  node->attrs = std::move(attrs);
  if (n > 3) node->heap_ops = new Node*[n];
  Node** ops = node->operands();
  for (size_t i = 0; i < n; ++i) ops[i] = node_retain(operands[i]);
  node->num_operands = static_cast<uint32_t>(n);
  return ref;
}

NodeRef make_node(Device* device, uint16_t op, std::initializer_list<Node*> operands,
                  lt_dtype dtype, const Dims& shape, std::unique_ptr<AttrSet> attrs) {
  return make_node_n(device, op, operands.begin(), operands.size(), dtype, shape, std::move(attrs));
}

NodeRef make_leaf(Device* device, lt_dtype dtype, const Dims& shape) {
  return make_node_n(device, kOpInput, nullptr, 0, dtype, shape);
}

NodeRef make_scalar_leaf(Device* device, lt_dtype dtype, uint64_t raw_bits) {
  NodeRef r = make_node_n(device, kOpInput, nullptr, 0, dtype, Dims());
  r->has_scalar = true;
  r->scalar_bits = raw_bits;
  return r;
}

uint64_t encode_scalar(lt_dtype dtype, double v) {
  uint64_t bits = 0;
  auto sat = [&](double lo, double hi) -> double {
    if (std::isnan(v)) return 0;
    return std::trunc(std::min(std::max(v, lo), hi));
  };
  switch (dtype) {
    case LT_DTYPE_F32: {
      float f = static_cast<float>(v);
      std::memcpy(&bits, &f, 4);
      break;
    }
    case LT_DTYPE_F64:
      std::memcpy(&bits, &v, 8);
      break;
    case LT_DTYPE_I32: {
      int32_t i = static_cast<int32_t>(sat(-2147483648.0, 2147483647.0));
      std::memcpy(&bits, &i, 4);
      break;
    }
    case LT_DTYPE_I64: {
      double s = sat(-9223372036854775808.0, 9223372036854774784.0);
      int64_t i = static_cast<int64_t>(s);
      std::memcpy(&bits, &i, 8);
      break;
    }
    case LT_DTYPE_BOOL:
      bits = v != 0 ? 1 : 0;
      break;
    case LT_DTYPE_BF16:  // the one bf16 rounding: a NaN keeps its sign
      bits = lower::bf16_bits(static_cast<float>(v));
      break;
    case LT_DTYPE_F16: {
      _Float16 h = static_cast<_Float16>(v);
      uint16_t u;
      std::memcpy(&u, &h, 2);
      bits = u;
      break;
    }
    default:
      fail(LT_STATUS_INVALID_ARGUMENT, "scalar: invalid dtype {}", static_cast<int>(dtype));
  }
  return bits;
}

}  // namespace lt
