// ops/layout.cpp — ONNX layout ops: Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu, CumSum.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

namespace {

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

}  // namespace

void add_layout_ops(std::map<std::string, OpEntry>& t) {
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
}

}  // namespace lt::onnx::detail
