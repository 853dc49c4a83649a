// validate.cpp — the one graph validator: region structure, node descriptions, and each built-in
// op's IR rule (docs/ops.md "IR form"), so that a backend's kernels may trust what they read.
#include <algorithm>
#include <string>

#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/dynamic.hpp"
#include "lazytensor/lower/graph.hpp"

namespace lt::lower {
namespace {

constexpr size_t kMaxRank = 64;
constexpr int64_t kMaxBytes = int64_t{1} << 60;
constexpr int64_t kMaxWindow = int64_t{1} << 30;  // strides, paddings, kernels, dilations

// Errors of one node: every message starts with the node's name.
// Fails through `chk` with `code` when `cond` is false. The message (the variadic part) is
// only built on failure: validation runs on every node of every compiled graph.
#define LT_REQUIRE(chk, code, cond, ...)       \
  do {                                         \
    if (!(cond)) (chk).bad(code, __VA_ARGS__); \
  } while (0)

struct Check {
  const OpInfo& op;
  std::span<const DescRef> in;
  const Attrs& a;
  DescRef out;

  [[noreturn]] void bad(lt_status_code code, const std::string& what) const {
    fail(code, a.where() + ": " + what);
  }
  std::span<const int64_t> dims(size_t k) const { return in[k].dims(); }
  std::span<const int64_t> odims() const { return out.dims(); }
  bool same_shape(DescRef x, std::span<const int64_t> s) const {
    return std::equal(x.shape, x.shape + x.rank, s.begin(), s.end());
  }
  // Data operand k is of the op's dtype class and (unless any_out) of the output's dtype.
  void data(size_t k, bool same_as_out = true) const {
    LT_REQUIRE((*this), LT_STATUS_DTYPE_MISMATCH, dtype_in(op.dtypes, in[k].dtype),
               "operand " + std::to_string(k) + " dtype " + lt_dtype_name(in[k].dtype) +
                   " is not " + dtypes_name(op.dtypes));
    if (same_as_out)
      LT_REQUIRE((*this), LT_STATUS_DTYPE_MISMATCH, in[k].dtype == out.dtype,
                 "operand " + std::to_string(k) + " dtype " + lt_dtype_name(in[k].dtype) +
                     " != output dtype " + lt_dtype_name(out.dtype));
  }
  void output_is(std::span<const int64_t> want) const {
    LT_REQUIRE((*this), LT_STATUS_SHAPE_MISMATCH, same_shape(out, want),
               "output shape " + shape_str(odims()) + ", expected " + shape_str(want));
  }
  int64_t axis(std::string_view name, size_t rank) const {
    int64_t v = a.i(name);
    LT_REQUIRE((*this), LT_STATUS_INVALID_ARGUMENT, v >= 0 && static_cast<size_t>(v) < rank,
               std::string(name) + " " + std::to_string(v) + " is out of range for rank " +
                   std::to_string(rank));
    return v;
  }
  std::vector<int64_t> pair(std::string_view name, int64_t lo) const {
    std::vector<int64_t> v = a.ints(name, 2);
    for (int64_t x : v)
      LT_REQUIRE((*this), LT_STATUS_INVALID_ARGUMENT, x >= lo && x <= kMaxWindow,
                 "attribute '" + std::string(name) + "' " + shape_str(v) + " must be in [" +
                     std::to_string(lo) + ", 2^30]");
    return v;
  }
  void index_dtype(size_t k) const {
    LT_REQUIRE((*this), LT_STATUS_DTYPE_MISMATCH, is_int(in[k].dtype),
               "indices dtype " + std::string(lt_dtype_name(in[k].dtype)) + " is not i32/i64");
  }
  void seed() const {
    LT_REQUIRE((*this), LT_STATUS_INVALID_ARGUMENT, in[0].dtype == LT_DTYPE_I64 && in[0].rank == 0,
               "seed must be a rank-0 i64 tensor, got " + desc_str(in[0]));
  }
};

void check_rule(const Check& c) {
  const OpInfo& op = c.op;
  const DescRef out = c.out;
  switch (op.rule) {
    case Rule::input:
      return;
    case Rule::unary:
      c.data(0);
      c.output_is(c.dims(0));
      return;
    case Rule::binary:
    case Rule::compare: {
      bool cmp = op.rule == Rule::compare;
      c.data(0, !cmp);
      c.data(1, !cmp);
      LT_REQUIRE(c, LT_STATUS_DTYPE_MISMATCH, c.in[0].dtype == c.in[1].dtype,
                 "operand dtypes " + std::string(lt_dtype_name(c.in[0].dtype)) + " and " +
                     lt_dtype_name(c.in[1].dtype) + " differ");
      if (cmp)
        LT_REQUIRE(c, LT_STATUS_DTYPE_MISMATCH, out.dtype == LT_DTYPE_BOOL,
                   "output dtype must be bool");
      if (c.same_shape(c.in[1], c.dims(0)))  // the common case, without naming the node
        c.output_is(c.dims(0));
      else
        c.output_is(broadcast_shapes(c.a.where(), c.dims(0), c.dims(1)));
      return;
    }
    case Rule::where:
      LT_REQUIRE(c, LT_STATUS_DTYPE_MISMATCH, c.in[0].dtype == LT_DTYPE_BOOL,
                 "condition dtype " + std::string(lt_dtype_name(c.in[0].dtype)) + " is not bool");
      c.data(1);
      c.data(2);
      c.output_is(broadcast_shapes(c.a.where(), broadcast_shapes(c.a.where(), c.dims(0), c.dims(1)),
                                   c.dims(2)));
      return;
    case Rule::cast:
      c.output_is(c.dims(0));
      return;
    case Rule::full:
      c.a.f("value");
      return;
    case Rule::arange:
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, out.rank == 1,
                 "output must be 1-D, got " + shape_str(c.odims()));
      LT_REQUIRE(c, LT_STATUS_DTYPE_MISMATCH, is_numeric(out.dtype),
                 "output dtype must be numeric");
      c.a.f("start");
      c.a.f("step");
      return;
    case Rule::random_unit:
    case Rule::random:
      c.seed();
      LT_REQUIRE(c, LT_STATUS_DTYPE_MISMATCH, is_float(out.dtype),
                 "output dtype " + std::string(lt_dtype_name(out.dtype)) + " is not a float type");
      for (const AttrSpec& s : op.attrs) {  // the IR keeps every attribute but shape/dtype
        if (s.name == "shape" || s.name == "dtype") continue;
        if (s.kind == LT_ATTR_INT)
          c.a.i(s.name);
        else
          c.a.f(s.name);
      }
      return;
    case Rule::reduce: {
      c.data(0);
      std::vector<int64_t> axes = c.a.ints("axes");
      for (size_t k = 0; k < axes.size(); ++k)
        LT_REQUIRE(c, LT_STATUS_INVALID_ARGUMENT,
                   axes[k] >= 0 && static_cast<size_t>(axes[k]) < c.in[0].rank &&
                       (k == 0 || axes[k] > axes[k - 1]),
                   "axes " + shape_str(axes) + " must be sorted, unique and in [0, " +
                       std::to_string(c.in[0].rank) + ")");
      c.output_is(reduce_shape(c.dims(0), axes, c.a.i("keepdims") != 0));
      if (op.id == kOpMax || op.id == kOpMin)
        LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, c.in[0].numel() > 0 || out.numel() == 0,
                   "cannot reduce an empty axis of " + shape_str(c.dims(0)));
      return;
    }
    case Rule::argmax: {
      c.data(0, false);
      LT_REQUIRE(c, LT_STATUS_DTYPE_MISMATCH, out.dtype == LT_DTYPE_I64,
                 "output dtype must be i64");
      int64_t ax = c.axis("axis", c.in[0].rank);
      c.output_is(reduce_shape(c.dims(0), std::span<const int64_t>(&ax, 1), c.a.i("keepdims")));
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, c.dims(0)[ax] > 0 || out.numel() == 0,
                 "cannot reduce an empty axis of " + shape_str(c.dims(0)));
      return;
    }
    case Rule::matmul: {
      c.data(0);
      c.data(1);
      auto a = c.dims(0), b = c.dims(1);
      size_t r = a.size();
      bool ok = (r == 2 || r == 3) && b.size() == r && out.rank == r;
      if (ok) {
        ok = a[r - 1] == b[r - 2] && out.shape[r - 2] == a[r - 2] && out.shape[r - 1] == b[r - 1] &&
             (r == 2 || (a[0] == b[0] && out.shape[0] == a[0]));
      }
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, ok,
                 "shapes " + shape_str(a) + " x " + shape_str(b) + " -> " + shape_str(c.odims()) +
                     " are not [M,K]x[K,N] or [B,M,K]x[B,K,N]");
      return;
    }
    case Rule::reshape:
      c.data(0);
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, c.in[0].numel() == out.numel(),
                 "cannot reshape " + shape_str(c.dims(0)) + " to " + shape_str(c.odims()));
      return;
    case Rule::permute: {
      c.data(0);
      size_t r = c.in[0].rank;
      std::vector<int64_t> perm = c.a.ints("perm", r);
      std::vector<char> seen(r, 0);
      Shape want(r);
      for (size_t i = 0; i < r; ++i) {
        int64_t p = perm[i];
        LT_REQUIRE(
            c, LT_STATUS_INVALID_ARGUMENT, p >= 0 && static_cast<size_t>(p) < r && !seen[p],
            "perm " + shape_str(perm) + " is not a permutation of 0.." + std::to_string(r - 1));
        seen[p] = 1;
        want[i] = c.dims(0)[p];
      }
      c.output_is(want);
      return;
    }
    case Rule::broadcast_to:
      c.data(0);
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, broadcasts_to(c.dims(0), c.odims()),
                 shape_str(c.dims(0)) + " does not broadcast to " + shape_str(c.odims()));
      return;
    case Rule::slice: {
      c.data(0);
      size_t r = c.in[0].rank;
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, out.rank == r,
                 "output rank differs from the operand's");
      std::vector<int64_t> starts = c.a.ints("starts", r), steps = c.a.ints("steps", r);
      for (size_t i = 0; i < r; ++i) {
        int64_t n = out.shape[i], s = steps[i], b = starts[i], len = c.dims(0)[i];
        bool ok = s != 0 && s > -(int64_t{1} << 62) && s < (int64_t{1} << 62);
        if (ok && n > 0) ok = b >= 0 && b < len && (n - 1) <= (s > 0 ? (len - 1 - b) / s : b / -s);
        LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, ok,
                   "starts " + shape_str(starts) + " steps " + shape_str(steps) + " with output " +
                       shape_str(c.odims()) + " read outside " + shape_str(c.dims(0)));
      }
      return;
    }
    case Rule::concat: {
      int64_t ax = c.axis("axis", out.rank);
      int64_t total = 0;
      for (size_t k = 0; k < c.in.size(); ++k) {
        c.data(k);
        bool ok = c.in[k].rank == out.rank;
        for (size_t d = 0; ok && d < out.rank; ++d)
          ok = static_cast<int64_t>(d) == ax || c.dims(k)[d] == out.shape[d];
        LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, ok,
                   "operand " + std::to_string(k) + " shape " + shape_str(c.dims(k)) +
                       " does not fit output " + shape_str(c.odims()) + " on axis " +
                       std::to_string(ax));
        total += c.dims(k)[ax];
      }
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, total == out.shape[ax],
                 "operand sizes on axis " + std::to_string(ax) + " sum to " +
                     std::to_string(total) + ", output has " + std::to_string(out.shape[ax]));
      return;
    }
    case Rule::pad: {
      c.data(0);
      size_t r = c.in[0].rank;
      std::vector<int64_t> before = c.a.ints("before", r), after = c.a.ints("after", r);
      c.a.f("value");
      Shape want(r);
      for (size_t i = 0; i < r; ++i) {
        LT_REQUIRE(c, LT_STATUS_INVALID_ARGUMENT,
                   before[i] >= 0 && after[i] >= 0 && before[i] < (int64_t{1} << 48) &&
                       after[i] < (int64_t{1} << 48),
                   "padding " + shape_str(before) + " / " + shape_str(after) + " must be >= 0");
        want[i] = c.dims(0)[i] + before[i] + after[i];
      }
      c.output_is(want);
      return;
    }
    case Rule::gather:
    case Rule::scatter_add: {
      c.data(0);
      c.index_dtype(1);
      int64_t ax = c.axis("axis", c.in[0].rank);
      Shape taken = gather_shape(c.dims(0), c.dims(1), ax);
      if (op.rule == Rule::gather) {
        c.output_is(taken);
        LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, c.dims(0)[ax] > 0 || out.numel() == 0,
                   "cannot take from an empty axis of " + shape_str(c.dims(0)));
      } else {
        c.data(2);
        c.output_is(c.dims(0));
        LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, c.same_shape(c.in[2], taken),
                   "updates shape " + shape_str(c.dims(2)) + ", expected " + shape_str(taken));
      }
      return;
    }
    case Rule::conv2d: {
      for (size_t k = 0; k < c.in.size(); ++k) c.data(k);
      auto x = c.dims(0), w = c.dims(1);
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, x.size() == 4 && w.size() == 4 && out.rank == 4,
                 "input " + shape_str(x) + " and weight " + shape_str(w) + " must be 4-D");
      auto s = c.pair("stride", 1), p = c.pair("padding", 0), d = c.pair("dilation", 1);
      int64_t g = c.a.i("groups");
      LT_REQUIRE(c, LT_STATUS_INVALID_ARGUMENT, g >= 1 && x[1] % g == 0 && w[0] % g == 0,
                 "groups " + std::to_string(g) + " must divide input channels " +
                     std::to_string(x[1]) + " and output channels " + std::to_string(w[0]));
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, x[1] == w[1] * g,
                 "input channels " + std::to_string(x[1]) + " != weight channels " +
                     std::to_string(w[1]) + " x groups " + std::to_string(g));
      if (c.in.size() == 3)
        LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, c.in[2].rank == 1 && c.dims(2)[0] == w[0],
                   "bias " + shape_str(c.dims(2)) + " must be [" + std::to_string(w[0]) + "]");
      Shape want{x[0], w[0], window_out(x[2], w[2], s[0], p[0], d[0]),
                 window_out(x[3], w[3], s[1], p[1], d[1])};
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, want[2] >= 0 && want[3] >= 0,
                 "kernel " + shape_str(w) + " does not fit input " + shape_str(x) +
                     " with padding " + shape_str(p));
      c.output_is(want);
      return;
    }
    case Rule::conv2d_grad: {
      // conv2d_backward_data (dy [N,O,OH,OW], w [O,C/g,KH,KW]) -> dx [N,C,H,W], input_size
      // [H,W]; conv2d_backward_weight (x [N,C,H,W], dy) -> dw [O,C/g,KH,KW], kernel_size
      // [KH,KW]. dy must be the shape the forward convolution of that geometry gives.
      c.data(0);
      c.data(1);
      const bool data = op.id == kOpConv2dBackwardData;
      auto a0 = c.dims(0), a1 = c.dims(1), o = c.odims();
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, a0.size() == 4 && a1.size() == 4 && o.size() == 4,
                 "operands " + shape_str(a0) + ", " + shape_str(a1) + " must be 4-D");
      auto s = c.pair("stride", 1), p = c.pair("padding", 0), d = c.pair("dilation", 1);
      int64_t g = c.a.i("groups");
      auto x = data ? o : a0, dy = data ? a0 : a1, w = data ? a1 : o;
      auto size = c.pair(data ? "input_size" : "kernel_size", data ? 0 : 1);
      LT_REQUIRE(
          c, LT_STATUS_INVALID_ARGUMENT, g >= 1 && dy[1] % g == 0 && (data ? w[0] == dy[1] : true),
          "groups " + std::to_string(g) + " must divide output channels " + std::to_string(dy[1]));
      if (data) {
        c.output_is(Shape{dy[0], w[1] * g, size[0], size[1]});
      } else {
        LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, x[0] == dy[0] && x[1] % g == 0,
                   "input " + shape_str(x) + " and output gradient " + shape_str(dy) +
                       " disagree on the batch or the groups");
        c.output_is(Shape{dy[1], x[1] / g, size[0], size[1]});
      }
      Shape want{x[0], w[0], window_out(x[2], w[2], s[0], p[0], d[0]),
                 window_out(x[3], w[3], s[1], p[1], d[1])};
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, std::equal(dy.begin(), dy.end(), want.begin()),
                 "output gradient " + shape_str(dy) + ", expected " + shape_str(want) +
                     " for input " + shape_str(x) + " and weight " + shape_str(w));
      return;
    }
    case Rule::pool: {
      c.data(0);
      auto x = c.dims(0);
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, x.size() == 4 && out.rank == 4,
                 "input " + shape_str(x) + " must be 4-D [N,C,H,W]");
      auto k = c.pair("kernel", 1), s = c.pair("stride", 1), p = c.pair("padding", 0);
      LT_REQUIRE(c, LT_STATUS_INVALID_ARGUMENT, p[0] < k[0] && p[1] < k[1],
                 "padding " + shape_str(p) + " must be smaller than kernel " + shape_str(k));
      Shape want{x[0], x[1], window_out(x[2], k[0], s[0], p[0], 1),
                 window_out(x[3], k[1], s[1], p[1], 1)};
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, want[2] >= 0 && want[3] >= 0,
                 "kernel " + shape_str(k) + " does not fit input " + shape_str(x));
      c.output_is(want);
      return;
    }
    case Rule::softmax:
      c.data(0);
      c.axis("axis", c.in[0].rank);
      c.output_is(c.dims(0));
      return;
    case Rule::collective:  // all_reduce (reduce: 0 sum, 1 mean, 2 max), broadcast (root)
      c.data(0);
      if (op.id == kOpAllReduce) {
        int64_t r = c.a.i("reduce");
        LT_REQUIRE(
            c, LT_STATUS_INVALID_ARGUMENT, r >= 0 && r <= 2,
            "attribute 'reduce' " + std::to_string(r) + " is not 0 (sum), 1 (mean), 2 (max)");
      } else {
        LT_REQUIRE(c, LT_STATUS_INVALID_ARGUMENT, c.a.i("root") >= 0,
                   "attribute 'root' must be at least 0");
      }
      c.output_is(c.dims(0));
      return;
    case Rule::all_gather: {  // rows of every process, stacked along dim 0 in rank order
      c.data(0);
      auto x = c.dims(0);
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, !x.empty(), "input must have rank at least 1");
      Shape want(x.begin(), x.end());
      if (out.rank == x.size() && x[0] > 0) want[0] = out.shape[0];
      LT_REQUIRE(c, LT_STATUS_SHAPE_MISMATCH, x[0] == 0 || want[0] % x[0] == 0,
                 "output dim 0 " + std::to_string(want[0]) + " is not a multiple of " +
                     std::to_string(x[0]));
      c.output_is(want);
      return;
    }
  }
}

// Checks one node's own description; returns its element count.
void check_desc(const lt_graph_node& n, size_t i) {
  if (!n.op) fail(LT_STATUS_INVALID_ARGUMENT, "node " + std::to_string(i) + ": op is NULL");
  // Built only on failure: this runs for every node of every graph a plugin compiles.
  auto where = [&] { return "node " + std::to_string(i) + " (" + n.op + ")"; };
  if (lt_dtype_size(n.dtype) == 0)
    fail(LT_STATUS_DTYPE_MISMATCH,
         where() + ": invalid dtype value " + std::to_string(static_cast<int>(n.dtype)));
  if (n.rank > kMaxRank)
    fail(LT_STATUS_INVALID_ARGUMENT,
         where() + ": rank " + std::to_string(n.rank) + " exceeds " + std::to_string(kMaxRank));
  if (n.rank && !n.shape) fail(LT_STATUS_INVALID_ARGUMENT, where() + ": shape is NULL");
  int64_t bytes = static_cast<int64_t>(lt_dtype_size(n.dtype));
  for (size_t d = 0; d < n.rank; ++d) {
    if (n.shape[d] < 0)
      fail(LT_STATUS_SHAPE_MISMATCH,
           where() + ": negative dimension in " + shape_str({n.shape, n.rank}));
    if (n.shape[d] != 0 && bytes > kMaxBytes / n.shape[d])
      fail(LT_STATUS_SHAPE_MISMATCH,
           where() + ": shape " + shape_str({n.shape, n.rank}) + " is too large");
    bytes *= n.shape[d];
  }
  if (n.num_operands && !n.operands)
    fail(LT_STATUS_INVALID_ARGUMENT, where() + ": operands is NULL");
  for (size_t k = 0; k < n.num_operands; ++k)
    if (n.operands[k] < 0 || static_cast<size_t>(n.operands[k]) >= i)
      fail(LT_STATUS_INVALID_ARGUMENT, where() + ": operand " + std::to_string(k) +
                                           " refers to node " + std::to_string(n.operands[k]) +
                                           ", which does not precede it");
  if (n.num_attrs && !n.attrs) fail(LT_STATUS_INVALID_ARGUMENT, where() + ": attrs is NULL");
  for (size_t k = 0; k < n.num_attrs; ++k) {
    if (!n.attrs[k].name)
      fail(LT_STATUS_INVALID_ARGUMENT,
           where() + ": attribute " + std::to_string(k) + " has no name");
    if (n.attrs[k].kind == LT_ATTR_INTS && n.attrs[k].ints_len && !n.attrs[k].ints)
      fail(LT_STATUS_INVALID_ARGUMENT,
           where() + ": attribute '" + n.attrs[k].name + "' has NULL ints");
    if (n.attrs[k].kind == LT_ATTR_STRING && !n.attrs[k].s)
      fail(LT_STATUS_INVALID_ARGUMENT,
           where() + ": attribute '" + n.attrs[k].name + "' has a NULL string");
  }
}

// The op's IR rule on node i, whose operands' descriptions were checked already.
void check_semantics(const lt_graph& g, size_t i) {
  const lt_graph_node& n = g.nodes[i];
  const OpInfo* op = find_op(n.op);
  if (!op) return;  // a custom op: structure only
  Attrs attrs(n.attrs, n.num_attrs, op, i, n.op);
  int count = static_cast<int>(n.num_operands);
  if (count < op->min_inputs || (op->max_inputs >= 0 && count > op->max_inputs))
    fail(LT_STATUS_INVALID_ARGUMENT,
         attrs.where() + ": has " + std::to_string(count) + " operands");
  DescRef small[4];
  std::vector<DescRef> big;
  DescRef* in = small;
  if (n.num_operands > 4) {
    big.resize(n.num_operands);
    in = big.data();
  }
  for (size_t k = 0; k < n.num_operands; ++k) in[k] = DescRef(g.nodes[n.operands[k]]);
  check_node(*op, {in, n.num_operands}, attrs, DescRef(n));
}

void check_header(const lt_graph& g) {
  if (g.struct_size < LT_GRAPH_STRUCT_SIZE_1_0)
    fail(LT_STATUS_ABI_MISMATCH, "graph struct_size " + std::to_string(g.struct_size) +
                                     " is smaller than " +
                                     std::to_string(LT_GRAPH_STRUCT_SIZE_1_0));
  if (g.num_nodes && !g.nodes) fail(LT_STATUS_INVALID_ARGUMENT, "graph: nodes is NULL");
  if (g.num_nodes >= (size_t{1} << 31)) fail(LT_STATUS_INVALID_ARGUMENT, "graph: too many nodes");
  if (g.num_inputs && !g.inputs) fail(LT_STATUS_INVALID_ARGUMENT, "graph: inputs is NULL");
  if (g.num_outputs && !g.outputs) fail(LT_STATUS_INVALID_ARGUMENT, "graph: outputs is NULL");
}

}  // namespace

void check_node(const OpInfo& op, std::span<const DescRef> in, const Attrs& attrs, DescRef out) {
  int count = static_cast<int>(in.size());
  if (count < op.min_inputs || (op.max_inputs >= 0 && count > op.max_inputs))
    fail(LT_STATUS_INVALID_ARGUMENT,
         attrs.where() + ": has " + std::to_string(count) + " operands");
  check_rule(Check{op, in, attrs, out});
}

void validate(const lt_graph& g) {
  check_header(g);
  std::vector<uint8_t> bound(g.num_nodes, 0);
  for (size_t k = 0; k < g.num_inputs; ++k) {
    int32_t j = g.inputs[k];
    if (j < 0 || static_cast<size_t>(j) >= g.num_nodes || !g.nodes[j].op ||
        std::string_view(g.nodes[j].op) != "input")
      fail(LT_STATUS_INVALID_ARGUMENT, "graph: input " + std::to_string(k) + " refers to node " +
                                           std::to_string(j) + ", which is not an \"input\" node");
    if (bound[j])
      fail(LT_STATUS_INVALID_ARGUMENT, "graph: node " + std::to_string(j) + " bound to two inputs");
    bound[j] = 1;
  }
  for (size_t k = 0; k < g.num_outputs; ++k)
    if (g.outputs[k] < 0 || static_cast<size_t>(g.outputs[k]) >= g.num_nodes)
      fail(LT_STATUS_INVALID_ARGUMENT, "graph: output " + std::to_string(k) + " refers to node " +
                                           std::to_string(g.outputs[k]) + ", out of range");
  for (size_t i = 0; i < g.num_nodes; ++i) {
    check_desc(g.nodes[i], i);
    if (std::string_view(g.nodes[i].op) == "input") {
      if (!bound[i])
        fail(LT_STATUS_INVALID_ARGUMENT, "graph: input node " + std::to_string(i) +
                                             " is not bound to any entry of graph.inputs");
      if (g.nodes[i].num_operands)
        fail(LT_STATUS_INVALID_ARGUMENT,
             "node " + std::to_string(i) + " (input): an input node has no operands");
      continue;
    }
    check_semantics(g, i);
  }
  validate_dynamic(g);
}

void validate_node(const lt_graph& g, size_t i) {
  check_header(g);
  if (i >= g.num_nodes)
    fail(LT_STATUS_INVALID_ARGUMENT, "node " + std::to_string(i) + " is out of range (" +
                                         std::to_string(g.num_nodes) + " nodes)");
  check_desc(g.nodes[i], i);
  const lt_graph_node& n = g.nodes[i];
  for (size_t k = 0; k < n.num_operands; ++k) check_desc(g.nodes[n.operands[k]], n.operands[k]);
  if (std::string_view(n.op) == "input") return;
  check_semantics(g, i);
}

}  // namespace lt::lower
