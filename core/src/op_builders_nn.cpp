// op_builders_nn.cpp — matmul (NumPy semantics lowered to 2-D / 3-D), conv2d, pooling,
// softmax, the collectives and "input" (op_builders.h).
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

// The two gradients of conv2d as ops (emitted by autograd's conv2d rule; lt_apply for users):
// conv2d_backward_data (dy, w; input_size [H, W]) -> dx [N, C, H, W] and
// conv2d_backward_weight (x, dy; kernel_size [KH, KW]) -> dw [O, C/groups, KH, KW], for the
// forward convolution of the given stride, padding, dilation and groups: dy must have the
// shape that convolution gives.
NodeRef build_conv2d_grad(const OpCall& c) {
  const char* op = name_of(c);
  const bool data = c.op == kOpConv2dBackwardData;
  Node* a0 = c.inputs[0].get();
  Node* a1 = c.inputs[1].get();
  lt_dtype dt = promote(a0->dtype, a1->dtype);
  expect_class(c, dt);
  if (a0->shape.size() != 4 || a1->shape.size() != 4)
    fail(LT_STATUS_SHAPE_MISMATCH, "{}: operands {} and {} must both be 4-D", op,
         dims_str(a0->shape), dims_str(a1->shape));
  auto stride = pair_attr(c, "stride", 1);
  auto padding = pair_attr(c, "padding", 0);
  auto dilation = pair_attr(c, "dilation", 1);
  auto size = pair_attr(c, data ? "input_size" : "kernel_size", data ? 0 : 1);
  int64_t groups = c.attr_int("groups");
  if (groups < 1) fail(LT_STATUS_INVALID_ARGUMENT, "{}: groups {} < 1", op, groups);
  const Dims& dy = data ? a0->shape : a1->shape;
  if (dy[1] % groups != 0)
    fail(LT_STATUS_SHAPE_MISMATCH, "{}: output channels {} not divisible by groups {}", op, dy[1],
         groups);
  Dims x, w;  // the forward convolution's input and weight shapes
  if (data) {
    w = a1->shape;
    if (w[0] != dy[1])
      fail(LT_STATUS_SHAPE_MISMATCH, "{}: weight {} does not match output gradient {}", op,
           dims_str(w), dims_str(dy));
    int64_t channels = 0;
    if (__builtin_mul_overflow(w[1], groups, &channels))
      fail(LT_STATUS_SHAPE_MISMATCH, "{}: weight channels {} x groups {} overflow", op, w[1],
           groups);
    x = Dims{dy[0], channels, size[0], size[1]};
  } else {
    x = a0->shape;
    if (x[0] != dy[0] || x[1] % groups != 0)
      fail(LT_STATUS_SHAPE_MISMATCH,
           "{}: input {} and output gradient {} disagree on the batch or groups {}", op,
           dims_str(x), dims_str(dy), groups);
    w = Dims{dy[1], x[1] / groups, size[0], size[1]};
  }
  for (int i = 0; i < 2; ++i) {
    __int128 span = static_cast<__int128>(x[2 + i]) + 2 * static_cast<__int128>(padding[i]) -
                    static_cast<__int128>(dilation[i]) * (w[2 + i] - 1) - 1;
    if (span < 0 || span / stride[i] + 1 != dy[2 + i])
      fail(LT_STATUS_SHAPE_MISMATCH,
           "{}: output gradient {} is not the conv2d output of input {} and weight {} with "
           "stride {}, padding {}, dilation {}",
           op, dims_str(dy), dims_str(x), dims_str(w), dims_str(stride.data(), 2),
           dims_str(padding.data(), 2), dims_str(dilation.data(), 2));
  }
  NodeRef n0 = cast_to(c.device, a0, dt), n1 = cast_to(c.device, a1, dt);
  auto attrs = AttrBuilder()
                   .ints(data ? "input_size" : "kernel_size", size)
                   .ints("stride", stride)
                   .ints("padding", padding)
                   .ints("dilation", dilation)
                   .i("groups", groups)
                   .done();
  return make_node(c.device, c.op, {n0.get(), n1.get()}, dt, data ? x : w, std::move(attrs));
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

}  // namespace lt::builders
