// ops/reduce.cpp — ONNX reductions (Reduce*, ArgMax/Min, TopK) and Softmax, LogSoftmax, Hardmax.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

namespace {

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

}  // namespace

void add_reduce_ops(std::map<std::string, OpEntry>& t) {
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
}

}  // namespace lt::onnx::detail
