// op_builders_layout.cpp — the layout builders: reshape, permute, broadcast_to, slice, concat,
// pad, gather, scatter_add (op_builders.h).
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

}  // namespace lt::builders
