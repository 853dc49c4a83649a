// builder.cpp — Builder: canonical IR nodes with computed output descriptions and IR-form
// attributes (docs/ops.md), appended through emit().
#include "lazytensor/lower/builder.hpp"

#include <algorithm>

#include "lazytensor/lower/error.hpp"

namespace lt::lower {

Desc Builder::desc(Value v) const {
  const lt_graph_node& n = g_.node(static_cast<size_t>(v));
  return Desc{n.dtype, Shape(n.shape, n.shape + n.rank)};
}

Value Builder::emit(OpId op, const Desc& out, const std::vector<Value>& operands,
                    const std::vector<Attr>& attrs) {
  std::vector<lt_attr> view(attrs.size());
  for (size_t i = 0; i < attrs.size(); ++i) {
    const Attr& a = attrs[i];
    view[i] = lt_attr{a.name, a.kind, a.i, a.f, a.ints.data(), a.ints.size(), nullptr};
  }
  return g_.add(op_info(op).name, out.dtype, out.shape, operands, view.data(), view.size());
}

Value Builder::unary(OpId op, Value x) {
  return emit(op, desc(x), {x}, {});
}

Value Builder::binary(OpId op, Value a, Value b) {
  Desc da = desc(a), db = desc(b);
  if (da.dtype != db.dtype)
    fail(LT_STATUS_INTERNAL, std::string(op_info(op).name) + ": builder operands differ in dtype");
  Desc out{
      op_info(op).rule == Rule::compare ? LT_DTYPE_BOOL : da.dtype,
      da.shape == db.shape ? da.shape : broadcast_shapes(op_info(op).name, da.shape, db.shape)};
  return emit(op, out, {a, b}, {});
}

Value Builder::where(Value c, Value a, Value b) {
  Desc dc = desc(c), da = desc(a), db = desc(b);
  Shape s = broadcast_shapes("where", broadcast_shapes("where", dc.shape, da.shape), db.shape);
  return emit(kOpWhere, Desc{da.dtype, s}, {c, a, b}, {});
}

Value Builder::cast(Value x, lt_dtype d) {
  Desc dx = desc(x);
  if (dx.dtype == d) return x;
  return emit(kOpCast, Desc{d, dx.shape}, {x}, {});
}

Value Builder::full(const Shape& shape, double v, lt_dtype d) {
  return emit(kOpFull, Desc{d, shape}, {}, {{"value", LT_ATTR_FLOAT, 0, v}});
}

Value Builder::arange(int64_t n, double start, double step, lt_dtype d) {
  return emit(kOpArange, Desc{d, {n}}, {},
              {{"start", LT_ATTR_FLOAT, 0, start}, {"step", LT_ATTR_FLOAT, 0, step}});
}

Value Builder::random_unit(Value seed, const Shape& shape, int64_t stride, int64_t offset,
                           lt_dtype d) {
  return emit(kOpRandomUnit, Desc{d, shape}, {seed},
              {{"stride", LT_ATTR_INT, stride}, {"offset", LT_ATTR_INT, offset}});
}

Value Builder::reduce(OpId op, Value x, std::vector<int64_t> axes, bool keepdims) {
  Desc dx = desc(x);
  if (axes.empty()) return x;
  Shape out = reduce_shape(dx.shape, axes, keepdims);
  return emit(
      op, Desc{dx.dtype, out}, {x},
      {{"axes", LT_ATTR_INTS, 0, 0, std::move(axes)}, {"keepdims", LT_ATTR_INT, keepdims ? 1 : 0}});
}

Value Builder::matmul(Value a, Value b) {
  Desc da = desc(a), db = desc(b);
  Shape out = da.shape;
  out.back() = db.shape.back();
  return emit(kOpMatmul, Desc{da.dtype, out}, {a, b}, {});
}

Value Builder::reshape(Value x, const Shape& shape) {
  Desc dx = desc(x);
  if (dx.shape == shape) return x;
  return emit(kOpReshape, Desc{dx.dtype, shape}, {x}, {});
}

Value Builder::permute(Value x, const std::vector<int64_t>& perm) {
  Desc dx = desc(x);
  Shape out(perm.size());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    out[i] = dx.shape[perm[i]];
    identity = identity && perm[i] == static_cast<int64_t>(i);
  }
  if (identity) return x;
  return emit(kOpPermute, Desc{dx.dtype, out}, {x}, {{"perm", LT_ATTR_INTS, 0, 0, perm}});
}

Value Builder::broadcast_to(Value x, const Shape& shape) {
  Desc dx = desc(x);
  if (dx.shape == shape) return x;
  return emit(kOpBroadcastTo, Desc{dx.dtype, shape}, {x}, {});
}

Value Builder::slice(Value x, const std::vector<int64_t>& starts, const std::vector<int64_t>& stops,
                     const std::vector<int64_t>& steps) {
  Desc dx = desc(x);
  Shape out(starts.size());
  std::vector<int64_t> st = starts;
  bool identity = true;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t len = stops[i] - starts[i];
    out[i] = len > 0 ? (len + steps[i] - 1) / steps[i] : 0;
    if (out[i] == 0) st[i] = 0;
    identity = identity && st[i] == 0 && steps[i] == 1 && out[i] == dx.shape[i];
  }
  if (identity) return x;
  return emit(kOpSlice, Desc{dx.dtype, out}, {x},
              {{"starts", LT_ATTR_INTS, 0, 0, st}, {"steps", LT_ATTR_INTS, 0, 0, steps}});
}

Value Builder::pad(Value x, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
                   double v) {
  Desc dx = desc(x);
  bool identity = true;
  for (size_t i = 0; i < before.size(); ++i) {
    dx.shape[i] += before[i] + after[i];
    identity = identity && before[i] == 0 && after[i] == 0;
  }
  if (identity) return x;
  return emit(kOpPad, dx, {x},
              {{"before", LT_ATTR_INTS, 0, 0, before},
               {"after", LT_ATTR_INTS, 0, 0, after},
               {"value", LT_ATTR_FLOAT, 0, v}});
}

Value Builder::concat(const std::vector<Value>& xs, int64_t axis) {
  if (xs.size() == 1) return xs[0];
  Desc out = desc(xs[0]);
  for (size_t k = 1; k < xs.size(); ++k) out.shape[axis] += desc(xs[k]).shape[axis];
  return emit(kOpConcat, out, xs, {{"axis", LT_ATTR_INT, axis}});
}

Value Builder::gather(Value a, Value indices, int64_t axis) {
  Desc da = desc(a);
  return emit(kOpGather, Desc{da.dtype, gather_shape(da.shape, desc(indices).shape, axis)},
              {a, indices}, {{"axis", LT_ATTR_INT, axis}});
}

Value Builder::scatter_add(Value a, Value indices, Value updates, int64_t axis) {
  return emit(kOpScatterAdd, desc(a), {a, indices, updates}, {{"axis", LT_ATTR_INT, axis}});
}

Value Builder::conv2d(Value x, Value w, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                      int64_t groups) {
  Desc dx = desc(x), dw = desc(w);
  Shape out{dx.shape[0], dw.shape[0], 0, 0};
  for (int i = 0; i < 2; ++i)
    out[2 + i] =
        (dx.shape[2 + i] + 2 * padding[i] - dilation[i] * (dw.shape[2 + i] - 1) - 1) / stride[i] +
        1;
  return emit(kOpConv2d, Desc{dx.dtype, out}, {x, w},
              {{"stride", LT_ATTR_INTS, 0, 0, stride},
               {"padding", LT_ATTR_INTS, 0, 0, padding},
               {"dilation", LT_ATTR_INTS, 0, 0, dilation},
               {"groups", LT_ATTR_INT, groups}});
}

}  // namespace lt::lower
