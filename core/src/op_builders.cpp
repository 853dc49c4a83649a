// op_builders.cpp — the builders' shared helpers, and the elementwise, creation and reduction
// builders (op_builders.h).
#include "op_builders.h"
#include <algorithm>
#include <cmath>
#include <limits>

#include "dist.h"
#include "error.h"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/graph.hpp"
#include "runtime.h"

namespace lt::builders {

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

}  // namespace lt::builders
