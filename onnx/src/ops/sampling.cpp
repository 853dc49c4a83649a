// ops/sampling.cpp — ONNX resampling ops: Resize, Upsample, GridSample.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

namespace {

// Resize along each axis by gathers with host index tables (they depend on shapes only).
Tensor resize_axis(Ctx& c, Tensor x, int64_t axis, int64_t out_len, double out_len_f, double scale,
                   const std::string& mode, const std::string& ctm, const std::string& nearest,
                   double cubic_a, bool exclude_outside, double roi_start, double roi_end) {
  int64_t in_len = x.shape()[axis];
  check_table(c, out_len);
  if (out_len == in_len && (ctm != "tf_crop_and_resize") && scale == 1.0) return x;
  auto coord = [&](int64_t o) -> double {
    if (ctm == "half_pixel") return (o + 0.5) / scale - 0.5;
    if (ctm == "pytorch_half_pixel") return out_len > 1 ? (o + 0.5) / scale - 0.5 : 0;
    if (ctm == "align_corners")
      return out_len_f == 1 ? 0 : o * double(in_len - 1) / (out_len_f - 1);
    if (ctm == "asymmetric") return o / scale;
    if (ctm == "tf_half_pixel_for_nn") return (o + 0.5) / scale;
    if (ctm == "tf_crop_and_resize") {
      return out_len > 1 ? roi_start * (in_len - 1) +
                               o * (roi_end - roi_start) * (in_len - 1) / (out_len - 1)
                         : 0.5 * (roi_start + roi_end) * (in_len - 1);
    }
    c.error("coordinate_transformation_mode '" + ctm + "' is not supported");
  };
  std::vector<int64_t> is(x.shape());
  if (mode == "nearest") {
    std::vector<int64_t> idx(out_len);
    for (int64_t o = 0; o < out_len; ++o) {
      double f = coord(o);
      int64_t i;
      if (nearest == "round_prefer_ceil")
        i = static_cast<int64_t>(std::floor(f + 0.5));
      else if (nearest == "floor")
        i = static_cast<int64_t>(std::floor(f));
      else if (nearest == "ceil")
        i = static_cast<int64_t>(std::ceil(f));
      else
        i = (f - std::floor(f) == 0.5) ? static_cast<int64_t>(std::floor(f))
                                       : static_cast<int64_t>(std::floor(f + 0.5));
      idx[o] = std::clamp<int64_t>(i, 0, in_len - 1);
    }
    return x.gather(Tensor::from<int64_t>(c.dev, idx), axis);
  }
  // linear / cubic: out = sum_k w_k[o] * x[i_k[o]]
  int taps = mode == "linear" ? 2 : 4;
  std::vector<std::vector<int64_t>> idx(taps, std::vector<int64_t>(out_len));
  std::vector<std::vector<double>> wt(taps, std::vector<double>(out_len));
  for (int64_t o = 0; o < out_len; ++o) {
    double f = coord(o);
    bool outside = ctm == "tf_crop_and_resize" && (f < 0 || f > in_len - 1);
    if (mode == "linear") {
      double fc = std::clamp(f, 0.0, double(in_len - 1));
      int64_t i0 = static_cast<int64_t>(std::floor(fc));
      int64_t i1 = std::min<int64_t>(i0 + 1, in_len - 1);
      double t = fc - i0;
      idx[0][o] = i0;
      idx[1][o] = i1;
      wt[0][o] = outside ? 0 : 1 - t;
      wt[1][o] = outside ? 0 : t;
    } else {
      int64_t i0 = static_cast<int64_t>(std::floor(f));
      double t = f - i0;
      double A = cubic_a;
      double ws[4];
      double d[4] = {1 + t, t, 1 - t, 2 - t};
      for (int k = 0; k < 4; ++k) {
        double z = std::abs(d[k]);
        ws[k] = z <= 1  ? ((A + 2) * z - (A + 3)) * z * z + 1
                : z < 2 ? ((A * z - 5 * A) * z + 8 * A) * z - 4 * A
                        : 0;
      }
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        int64_t j = i0 - 1 + k;
        if (exclude_outside && (j < 0 || j >= in_len)) ws[k] = 0;
        sum += ws[k];
      }
      for (int k = 0; k < 4; ++k) {
        int64_t j = i0 - 1 + k;
        idx[k][o] = std::clamp<int64_t>(j, 0, in_len - 1);
        wt[k][o] = outside ? 0 : (exclude_outside && sum != 0 ? ws[k] / sum : ws[k]);
      }
    }
  }
  Tensor acc;
  int64_t r = static_cast<int64_t>(is.size());
  std::vector<int64_t> ws_shape(r, 1);
  ws_shape[axis] = out_len;
  for (int k = 0; k < taps; ++k) {
    Tensor g = x.gather(Tensor::from<int64_t>(c.dev, idx[k]), axis);
    Tensor w = Tensor::from<double>(c.dev, wt[k]).reshape(ws_shape).cast(x.dtype());
    Tensor term = g * w;
    acc = acc.defined() ? acc + term : term;
  }
  if (ctm == "tf_crop_and_resize") {
    double ev = c.attr_f("extrapolation_value", 0.0f);
    std::vector<double> m(out_len);
    for (int64_t o = 0; o < out_len; ++o) {
      double f = coord(o);
      m[o] = (f < 0 || f > in_len - 1) ? 1 : 0;
    }
    Tensor mask = Tensor::from<double>(c.dev, m).reshape(ws_shape) > c.scalar(0.5, LT_DTYPE_F64);
    acc = lt::where(mask, c.scalar(ev, x.dtype()), acc);
  }
  return acc;
}

}  // namespace

void add_sampling_ops(std::map<std::string, OpEntry>& t) {
  auto resize = [](Ctx& c, const NodeP&, Vals& in, bool upsample) -> Vals {
    Tensor x = c.T(in.at(0));
    auto s = x.shape();
    size_t r = s.size();
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    std::vector<double> roi;
    if (upsample) {
      scales = c.opset >= 9 ? c.doubles(in.at(1)) : std::vector<double>();
      if (c.opset < 9)
        for (float f : c.attr("scales")->floats) scales.push_back(f);
    } else if (c.opset >= 11) {
      if (in.size() > 1 && in[1].present) roi = c.doubles(in[1]);
      if (in.size() > 2 && in[2].present) scales = c.doubles(in[2]);
      if (in.size() > 3 && in[3].present) sizes = c.ints(in[3]);
    } else {
      scales = c.doubles(in.at(1));
    }
    std::string mode = c.attr_s("mode", "nearest");
    std::string ctm = upsample || c.opset < 11
                          ? "asymmetric"
                          : c.attr_s("coordinate_transformation_mode", "half_pixel");
    std::string nearest =
        upsample || c.opset < 11 ? "floor" : c.attr_s("nearest_mode", "round_prefer_floor");
    double cubic_a = c.attr_f("cubic_coeff_a", -0.75f);
    bool excl = c.attr_i("exclude_outside", 0) != 0;
    std::vector<int64_t> axes = c.attr_ints("axes");
    if (axes.empty())
      for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
    std::string keep = c.attr_s("keep_aspect_ratio_policy", "stretch");
    std::vector<int64_t> out(s);
    std::vector<double> sc_(r, 1.0);
    if (!sizes.empty()) {
      if (keep != "stretch") {
        double f = keep == "not_larger" ? 1e300 : 0;
        for (size_t k = 0; k < axes.size(); ++k) {
          double q = double(sizes[k]) / s[axes[k]];
          f = keep == "not_larger" ? std::min(f, q) : std::max(f, q);
        }
        for (size_t k = 0; k < axes.size(); ++k) {
          sc_[axes[k]] = f;
          out[axes[k]] = static_cast<int64_t>(std::floor(s[axes[k]] * f + 0.5));
        }
      } else {
        for (size_t k = 0; k < axes.size(); ++k) {
          out[axes[k]] = sizes[k];
          sc_[axes[k]] = double(sizes[k]) / s[axes[k]];
        }
      }
    } else {
      if (scales.size() != axes.size())
        c.error("scales has " + std::to_string(scales.size()) + " entries for " +
                std::to_string(axes.size()) + " axes");
      for (size_t k = 0; k < axes.size(); ++k) {
        sc_[axes[k]] = scales[k];
        out[axes[k]] = static_cast<int64_t>(std::floor(s[axes[k]] * scales[k]));
      }
    }
    if (mode != "nearest" && mode != "linear" && mode != "cubic")
      c.error("mode '" + mode + "' is not supported");
    Tensor y = is_float(x.dtype()) || mode == "nearest" ? x : x.cast(LT_DTYPE_F32);
    for (size_t i = 0; i < r; ++i) {
      double rs = 0, re = 1;
      if (!roi.empty()) {
        size_t k = std::find(axes.begin(), axes.end(), int64_t(i)) - axes.begin();
        if (k < axes.size()) {
          rs = roi[k];
          re = roi[k + axes.size()];
        }
      }
      if (out[i] == s[i] && sc_[i] == 1.0 && ctm != "tf_crop_and_resize") continue;
      y = resize_axis(c, y, static_cast<int64_t>(i), out[i], s[i] * sc_[i], sc_[i], mode, ctm,
                      nearest, cubic_a, excl, rs, re);
    }
    return one(c, cast_to(y, x.dtype()), in[0].ot);
  };
  t["Resize"] = {[resize](Ctx& c, const NodeP& n, Vals& in) { return resize(c, n, in, false); },
                 10};
  t["Upsample"] = {[resize](Ctx& c, const NodeP& n, Vals& in) { return resize(c, n, in, true); },
                   7};
  t["GridSample"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        // Coordinates, padding and taps as lazy elementwise ops; pixels fetched by a gather over
        // the flattened input (every value stays on the device).
        Tensor X = c.T(in.at(0)), G = c.T(in.at(1));
        auto xs = X.shape();
        if (xs.size() != 4) c.error("only 4-D input (2 spatial dims) is supported");
        int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
        auto gs = G.shape();
        if (gs.size() != 4 || gs[0] != N || gs[3] != 2) {
          c.error("grid " + lt::detail::shape_string(gs) + " is not [N, H_out, W_out, 2]");
        }
        int64_t Ho = gs[1], Wo = gs[2];
        std::string mode = c.attr_s("mode", "bilinear");
        std::string pad = c.attr_s("padding_mode", "zeros");
        bool align = c.attr_i("align_corners", 0) != 0;
        DType dt = X.dtype();
        Tensor gx = slice1(G, 3, 0, 1).reshape({N, Ho, Wo}),
               gy = slice1(G, 3, 1, 2).reshape({N, Ho, Wo});
        auto S = [&](double v) { return sc(c, gx, v); };
        auto denorm = [&](Tensor g, int64_t len) {
          return align ? (g + S(1)) * S(0.5 * (len - 1))
                       : ((g + S(1)) * S(double(len)) - S(1)) * S(0.5);
        };
        Tensor fx = denorm(gx, W), fy = denorm(gy, H);
        auto reflect = [&](Tensor x, double lo, double hi) {
          double rng = hi - lo;
          auto fold = [&](Tensor dx, bool below) {
            Tensor nfl = (dx / S(rng)).floor();
            Tensor r = dx - nfl * S(rng);
            Tensor half = nfl * S(0.5);
            Tensor even = (half - half.floor()) == S(0);
            return below ? lt::where(even, S(lo) + r, S(hi) - r)
                         : lt::where(even, S(hi) - r, S(lo) + r);
          };
          return lt::where(x < S(lo), fold(S(lo) - x, true),
                           lt::where(x > S(hi), fold(x - S(hi), false), x));
        };
        double bx0 = align ? 0 : -0.5, bx1 = align ? W - 1 : W - 0.5;
        double by0 = align ? 0 : -0.5, by1 = align ? H - 1 : H - 0.5;
        if (mode == "nearest") {
          fx = round_even(c, fx);
          fy = round_even(c, fy);
        }
        auto adjust = [&](Tensor x, double lo, double hi, int64_t len) {
          if (pad == "border")
            return lt::where((x < S(lo)) || (x > S(hi)),
                             lt::minimum(lt::maximum(x, S(0)), S(double(len - 1))), x);
          if (pad == "reflection") return reflect(x, lo, hi);
          return x;
        };
        fx = adjust(fx, bx0, bx1, W);
        fy = adjust(fy, by0, by1, H);
        Tensor Xf = X.permute({0, 2, 3, 1}).reshape({N * H * W, C});
        Tensor nbase = lt::arange(c.dev, 0, double(N), 1, LT_DTYPE_I64).reshape({N, 1, 1}) *
                       c.scalar(double(H * W), LT_DTYPE_I64);
        // Pixel at integer (float-valued) coordinates under the padding rule; [N,Ho,Wo,C].
        auto pixel = [&](Tensor ix, Tensor iy) {
          Tensor valid;
          if (pad == "zeros") {
            valid = (ix >= S(0)) && (ix <= S(double(W - 1))) && (iy >= S(0)) &&
                    (iy <= S(double(H - 1)));
          } else if (pad == "reflection") {
            ix = reflect(ix, bx0, bx1);
            iy = reflect(iy, by0, by1);
            ix = lt::where(ix < S(0), -((-ix).floor()), ix.floor());
            iy = lt::where(iy < S(0), -((-iy).floor()), iy.floor());
          }
          Tensor cx = lt::minimum(lt::maximum(ix, S(0)), S(double(W - 1))).cast(LT_DTYPE_I64);
          Tensor cy = lt::minimum(lt::maximum(iy, S(0)), S(double(H - 1))).cast(LT_DTYPE_I64);
          Tensor flat = nbase + cy * c.scalar(double(W), LT_DTYPE_I64) + cx;
          Tensor v = Xf.gather(flat, 0);  // [N,Ho,Wo,C]
          if (valid.defined()) v = v * valid.cast(dt).reshape({N, Ho, Wo, 1});
          return v;
        };
        Tensor out;
        if (mode == "nearest") {
          auto trunc = [&](Tensor v) { return lt::where(v < S(0), -((-v).floor()), v.floor()); };
          out = pixel(trunc(fx), trunc(fy));
        } else if (mode == "bilinear" || mode == "linear") {
          Tensor x0 = fx.floor(), y0 = fy.floor();
          Tensor tx = (fx - x0).reshape({N, Ho, Wo, 1}), ty = (fy - y0).reshape({N, Ho, Wo, 1});
          Tensor one_ = sc(c, tx, 1);
          out = pixel(x0, y0) * (one_ - tx) * (one_ - ty) +
                pixel(x0 + S(1), y0) * tx * (one_ - ty) + pixel(x0, y0 + S(1)) * (one_ - tx) * ty +
                pixel(x0 + S(1), y0 + S(1)) * tx * ty;
        } else if (mode == "bicubic" || mode == "cubic") {
          Tensor x0 = fx.floor(), y0 = fy.floor();
          auto coeffs = [&](Tensor t) {
            double A = -0.75;
            Tensor t1 = t + S(1), u = S(1) - t, u1 = S(2) - t;
            std::vector<Tensor> w = {((t1 * S(A) - S(5 * A)) * t1 + S(8 * A)) * t1 - S(4 * A),
                                     ((t * S(A + 2)) - S(A + 3)) * t * t + S(1),
                                     ((u * S(A + 2)) - S(A + 3)) * u * u + S(1),
                                     ((u1 * S(A) - S(5 * A)) * u1 + S(8 * A)) * u1 - S(4 * A)};
            for (auto& v : w) v = v.reshape({N, Ho, Wo, 1});
            return w;
          };
          auto wx = coeffs(fx - x0), wy = coeffs(fy - y0);
          for (int j = 0; j < 4; ++j) {
            Tensor row;
            for (int i = 0; i < 4; ++i) {
              Tensor v = pixel(x0 + S(i - 1), y0 + S(j - 1)) * wx[i];
              row = row.defined() ? row + v : v;
            }
            Tensor term = row * wy[j];
            out = out.defined() ? out + term : term;
          }
        } else {
          c.error("mode '" + mode + "' is not supported");
        }
        return one(c, out.permute({0, 3, 1, 2}), in[0].ot);
      },
      16};
}

}  // namespace lt::onnx::detail
