// ops/conv_pool.cpp — ONNX convolutions and pools: Conv, ConvTranspose, *Pool, MaxUnpool, ...
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

void add_conv_pool_ops(std::map<std::string, OpEntry>& t) {
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
}

}  // namespace lt::onnx::detail
