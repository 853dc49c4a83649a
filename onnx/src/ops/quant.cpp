// ops/quant.cpp — ONNX quantization: (Dynamic)QuantizeLinear, DequantizeLinear, QLinearConv/MatMul.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

namespace {

// A 1-D scale or zero point of a per-axis (de)quantization viewed along `axis` of the input of
// shape `xs` (normalized in place on first use); anything else is returned as it is.
Tensor per_axis_view(Ctx& c, Tensor v, const std::vector<int64_t>& xs, int64_t& axis) {
  if (v.rank() == 1 && xs.size() > 1 && v.shape()[0] > 1) {
    axis = norm_axis(c, axis, static_cast<int64_t>(xs.size()));
    std::vector<int64_t> rs(xs.size(), 1);
    rs[axis] = v.shape()[0];
    return v.reshape(rs);
  }
  return v;
}

}  // namespace

void add_quant_ops(std::map<std::string, OpEntry>& t) {
  t["QuantizeLinear"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0)), s = c.T(in.at(1));
        int32_t ot = in.size() > 2 && in[2].present ? in[2].ot : kUint8;
        auto xs = x.shape();
        int64_t axis = c.attr_i("axis", 1);
        auto per_axis = [&](Tensor v) { return per_axis_view(c, v, xs, axis); };
        Tensor q = round_even(c, x.cast(LT_DTYPE_F32) / per_axis(s).cast(LT_DTYPE_F32));
        if (in.size() > 2 && in[2].present) q = q + per_axis(c.T(in[2])).cast(LT_DTYPE_F32);
        double lo = ot == kUint8 ? 0 : ot == kInt8 ? -128 : ot == kUint16 ? 0 : -32768;
        double hi = ot == kUint8 ? 255 : ot == kInt8 ? 127 : ot == kUint16 ? 65535 : 32767;
        q = lt::minimum(lt::maximum(q, sc(c, q, lo)), sc(c, q, hi));
        return one(c, q.cast(carrier_dtype(ot)), ot);
      },
      10};
  t["DequantizeLinear"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                             (void)n;
                             Tensor x = c.T(in.at(0)), s = c.T(in.at(1));
                             auto xs = x.shape();
                             int64_t axis = c.attr_i("axis", 1);
                             auto per_axis = [&](Tensor v) {
                               return per_axis_view(c, v, xs, axis);
                             };
                             Tensor xf = x.cast(LT_DTYPE_F32);
                             if (in.size() > 2 && in[2].present)
                               xf = xf - per_axis(c.T(in[2])).cast(LT_DTYPE_F32);
                             return one(c, xf * per_axis(s), in[1].ot);
                           },
                           10};
  t["DynamicQuantizeLinear"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        Tensor x = c.T(in.at(0));
        Tensor zero = sc(c, x, 0);
        Tensor mx = lt::maximum(x.max(), zero), mn = lt::minimum(x.min(), zero);
        Tensor scale = (mx - mn) / sc(c, x, 255);
        Tensor zp = lt::minimum(lt::maximum(round_even(c, -mn / scale), zero), sc(c, x, 255));
        Tensor y = lt::minimum(lt::maximum(round_even(c, x / scale) + zp, zero), sc(c, x, 255));
        return {c.from_tensor(y.cast(LT_DTYPE_I32), kUint8), c.from_tensor(scale, kFloat),
                c.from_tensor(zp.cast(LT_DTYPE_I32), kUint8)};
      },
      11};
  auto qlinear = [](bool conv) {
    return OpEntry{
        [conv](Ctx& c, const NodeP&, Vals& in) -> Vals {
          auto deq = [&](size_t xi, size_t si, size_t zi, bool weight) {
            Tensor x = c.T(in.at(xi)).cast(LT_DTYPE_F32);
            Tensor z = c.T(in.at(zi)).cast(LT_DTYPE_F32), s = c.T(in.at(si)).cast(LT_DTYPE_F32);
            if (weight && conv && s.rank() == 1 && s.shape()[0] > 1) {
              std::vector<int64_t> rs(x.rank(), 1);
              rs[0] = s.shape()[0];
              s = s.reshape(rs);
              z = z.reshape(rs);
            }
            if (!conv && weight && s.rank() == 1 && s.shape()[0] > 1) {
              std::vector<int64_t> rs(x.rank(), 1);
              rs.back() = s.shape()[0];
              s = s.reshape(rs);
              z = z.reshape(rs);
            }
            return (x - z) * s;
          };
          Tensor a = deq(0, 1, 2, false), b = deq(3, 4, 5, true);
          Tensor y;
          if (conv) {
            auto s = a.shape();
            auto ws = b.shape();
            std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
            if (kernel.empty()) kernel.assign(ws.begin() + 2, ws.end());
            Window win = window(c, std::vector<int64_t>(s.begin() + 2, s.end()), kernel, false);
            Tensor bias;
            if (in.size() > 8 && in[8].present) {
              bias = c.T(in[8]).cast(LT_DTYPE_F32) * c.T(in.at(1)).cast(LT_DTYPE_F32) *
                     c.T(in.at(4)).cast(LT_DTYPE_F32);
            }
            y = conv_nd(c, a, b, bias, win, c.attr_i("group", 1));
          } else {
            y = a.matmul(b);
          }
          Tensor ys = c.T(in.at(6)).cast(LT_DTYPE_F32), yz = c.T(in.at(7)).cast(LT_DTYPE_F32);
          int32_t ot = in[7].ot;
          Tensor q = round_even(c, y / ys) + yz;
          double lo = ot == kUint8 ? 0 : -128, hi = ot == kUint8 ? 255 : 127;
          q = lt::minimum(lt::maximum(q, sc(c, q, lo)), sc(c, q, hi));
          return one(c, q.cast(LT_DTYPE_I32), ot);
        },
        10};
  };
  t["QLinearConv"] = qlinear(true);
  t["QLinearMatMul"] = qlinear(false);
}

}  // namespace lt::onnx::detail
