// ops/norm.cpp — ONNX normalizations (Batch, Instance, Layer, MVN, LRN) and NLL / SCE losses.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

void add_norm_ops(std::map<std::string, OpEntry>& t) {
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
}

}  // namespace lt::onnx::detail
