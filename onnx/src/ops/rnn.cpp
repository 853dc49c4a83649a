// ops/rnn.cpp — ONNX recurrent layers RNN, GRU, LSTM, unrolled over the (static) sequence.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

namespace {

// Recurrent layers (RNN, GRU, LSTM), unrolled over the sequence (its length is static).
Tensor act(Ctx& c, const std::string& name, Tensor x, float alpha, float beta) {
  if (name == "Sigmoid") return x.sigmoid();
  if (name == "Tanh") return x.tanh();
  if (name == "Relu") return x.relu();
  if (name == "Affine") return x * sc(c, x, alpha) + sc(c, x, beta);
  if (name == "LeakyRelu") return lt::where(x < sc(c, x, 0), x * sc(c, x, alpha), x);
  if (name == "ThresholdedRelu") return lt::where(x > sc(c, x, alpha), x, sc(c, x, 0));
  if (name == "ScaledTanh") return (x * sc(c, x, beta)).tanh() * sc(c, x, alpha);
  if (name == "HardSigmoid") {
    return lt::minimum(lt::maximum(x * sc(c, x, alpha) + sc(c, x, beta), sc(c, x, 0)), sc(c, x, 1));
  }
  if (name == "Elu")
    return lt::where(x < sc(c, x, 0), (x.exp() - sc(c, x, 1)) * sc(c, x, alpha), x);
  if (name == "Softsign") return x / (x.abs() + sc(c, x, 1));
  if (name == "Softplus") return x.softplus();
  c.error("activation '" + name + "' is not supported");
}

Vals op_rnn(Ctx& c, const NodeP& n, Vals& in, int kind) {  // 0 RNN 1 GRU 2 LSTM
  Tensor X = c.T(in.at(0)), W = c.T(in.at(1)), R = c.T(in.at(2));
  need_rank(c, X, 3, 3, "X");
  need_rank(c, W, 3, 3, "W");
  need_rank(c, R, 3, 3, "R");
  int64_t layout = c.attr_i("layout", 0);
  if (layout == 1) X = X.permute({1, 0, 2});
  auto xs = X.shape();
  int64_t T = xs[0], B = xs[1];
  int64_t H = c.attr_i("hidden_size", R.shape()[2]);
  int gates = kind == 0 ? 1 : kind == 1 ? 3 : 4;
  std::string dir = c.attr_s("direction", "forward");
  int64_t ndir = dir == "bidirectional" ? 2 : 1;
  if (W.shape() != std::vector<int64_t>{ndir, gates * H, xs[2]} ||
      R.shape() != std::vector<int64_t>{ndir, gates * H, H}) {
    c.error("W " + lt::detail::shape_string(W.shape()) + " and R " +
            lt::detail::shape_string(R.shape()) + " do not fit hidden_size " + std::to_string(H) +
            ", " + std::to_string(ndir) + " directions and input size " + std::to_string(xs[2]));
  }
  Tensor Bias = in.size() > 3 && in[3].present ? c.T(in[3]) : Tensor();
  if (in.size() > 4 && in[4].present) {
    auto sl = c.ints(in[4]);
    for (int64_t v : sl) {
      if (v != T) c.error("sequence_lens shorter than the sequence are not supported");
    }
  }
  Tensor H0 = in.size() > 5 && in[5].present ? c.T(in[5]) : Tensor();
  Tensor C0 = kind == 2 && in.size() > 6 && in[6].present ? c.T(in[6]) : Tensor();
  Tensor P = kind == 2 && in.size() > 7 && in[7].present ? c.T(in[7]) : Tensor();
  if (layout == 1) {
    if (H0.defined()) H0 = H0.permute({1, 0, 2});
    if (C0.defined()) C0 = C0.permute({1, 0, 2});
  }
  const AttributeP* acts_a = c.attr("activations");
  std::vector<std::string> acts = acts_a ? acts_a->strings : std::vector<std::string>{};
  std::vector<float> alphas =
      c.attr("activation_alpha") ? c.attr("activation_alpha")->floats : std::vector<float>{};
  std::vector<float> betas =
      c.attr("activation_beta") ? c.attr("activation_beta")->floats : std::vector<float>{};
  int nact = kind == 0 ? 1 : kind == 1 ? 2 : 3;
  std::vector<std::string> defaults = kind == 0 ? std::vector<std::string>{"Tanh"}
                                      : kind == 1
                                          ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                          : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  float clip = c.attr_f("clip", 0.0f);
  bool linear_before_reset = c.attr_i("linear_before_reset", 0) != 0;
  int64_t input_forget = c.attr_i("input_forget", 0);
  if (input_forget) c.error("input_forget is not supported");
  DType dt = X.dtype();
  std::vector<Tensor> ys_dirs, hs, cs;
  for (int64_t d = 0; d < ndir; ++d) {
    auto A = [&](int k, Tensor x) {
      size_t i = static_cast<size_t>(d * nact + k);
      std::string a = i < acts.size() ? acts[i] : defaults[k];
      float al = i < alphas.size() ? alphas[i]
                                   : (a == "LeakyRelu"     ? 0.01f
                                      : a == "HardSigmoid" ? 0.2f
                                                           : 1.0f);
      float be = i < betas.size() ? betas[i] : (a == "HardSigmoid" ? 0.5f : 0.0f);
      if (clip > 0 && k == 0) x = lt::minimum(lt::maximum(x, sc(c, x, -clip)), sc(c, x, clip));
      return act(c, a, x, al, be);
    };
    auto clipx = [&](Tensor x) {
      return clip > 0 ? lt::minimum(lt::maximum(x, sc(c, x, -clip)), sc(c, x, clip)) : x;
    };
    Tensor Wd = slice1(W, 0, d, d + 1).reshape({gates * H, W.shape()[2]});
    Tensor Rd = slice1(R, 0, d, d + 1).reshape({gates * H, H});
    Tensor Wb, Rb;
    if (Bias.defined()) {
      Tensor bd = slice1(Bias, 0, d, d + 1).reshape({2 * gates * H});
      Wb = slice1(bd, 0, 0, gates * H);
      Rb = slice1(bd, 0, gates * H, 2 * gates * H);
    } else {
      Wb = lt::zeros(c.dev, {gates * H}, dt);
      Rb = lt::zeros(c.dev, {gates * H}, dt);
    }
    Tensor h =
        H0.defined() ? slice1(H0, 0, d, d + 1).reshape({B, H}) : lt::zeros(c.dev, {B, H}, dt);
    Tensor cell =
        C0.defined() ? slice1(C0, 0, d, d + 1).reshape({B, H}) : lt::zeros(c.dev, {B, H}, dt);
    Tensor Wt = Wd.t(), Rt = Rd.t();
    std::vector<Tensor> ys(T);
    bool reverse = dir == "reverse" || d == 1;
    for (int64_t step = 0; step < T; ++step) {
      int64_t tt = reverse ? T - 1 - step : step;
      Tensor xt = slice1(X, 0, tt, tt + 1).reshape({B, xs[2]});
      Tensor xw = xt.matmul(Wt) + Wb;
      if (kind == 0) {
        h = A(0, clipx(xw + h.matmul(Rt) + Rb));
      } else if (kind == 1) {
        Tensor hr = h.matmul(Rt);
        auto g = [&](const Tensor& t, int k) { return slice1(t, 1, k * H, (k + 1) * H); };
        auto gb = [&](const Tensor& t, int k) { return slice1(t, 0, k * H, (k + 1) * H); };
        Tensor z = A(0, clipx(g(xw, 0) + g(hr, 0) + gb(Rb, 0)));
        Tensor r = A(0, clipx(g(xw, 1) + g(hr, 1) + gb(Rb, 1)));
        Tensor hh;
        if (linear_before_reset) {
          hh = A(1, clipx(g(xw, 2) + r * (g(hr, 2) + gb(Rb, 2))));
        } else {
          Tensor Rh = slice1(Rd, 0, 2 * H, 3 * H);
          hh = A(1, clipx(g(xw, 2) + (r * h).matmul(Rh.t()) + gb(Rb, 2)));
        }
        h = (sc(c, z, 1) - z) * hh + z * h;
      } else {
        Tensor gsum = xw + h.matmul(Rt) + Rb;
        auto g = [&](int k) { return slice1(gsum, 1, k * H, (k + 1) * H); };
        Tensor pi, po, pf;
        if (P.defined()) {
          Tensor pd = slice1(P, 0, d, d + 1).reshape({3 * H});
          pi = slice1(pd, 0, 0, H);
          po = slice1(pd, 0, H, 2 * H);
          pf = slice1(pd, 0, 2 * H, 3 * H);
        }
        Tensor ig = g(0), og = g(1), fg = g(2), cg = g(3);
        if (P.defined()) {
          ig = ig + pi * cell;
          fg = fg + pf * cell;
        }
        Tensor i_ = A(0, clipx(ig)), f_ = A(0, clipx(fg)), c_ = A(1, clipx(cg));
        cell = f_ * cell + i_ * c_;
        if (P.defined()) og = og + po * cell;
        Tensor o_ = A(0, clipx(og));
        h = o_ * A(2, cell);
      }
      ys[tt] = h.reshape({1, 1, B, H});
    }
    ys_dirs.push_back(lt::concat(ys, 0));
    hs.push_back(h.reshape({1, B, H}));
    cs.push_back(cell.reshape({1, B, H}));
  }
  Tensor Y = lt::concat(ys_dirs, 1);
  Tensor Yh = lt::concat(hs, 0), Yc = lt::concat(cs, 0);
  if (layout == 1) {
    Y = Y.permute({2, 0, 1, 3});
    Yh = Yh.permute({1, 0, 2});
    Yc = Yc.permute({1, 0, 2});
  }
  int32_t ot = in[0].ot;
  Vals out = {c.from_tensor(Y, ot), c.from_tensor(Yh, ot)};
  if (kind == 2) out.push_back(c.from_tensor(Yc, ot));
  (void)n;
  return out;
}

}  // namespace

void add_rnn_ops(std::map<std::string, OpEntry>& t) {
  t["RNN"] = {[](Ctx& c, const NodeP& n, Vals& in) { return op_rnn(c, n, in, 0); }, 1};
  t["GRU"] = {[](Ctx& c, const NodeP& n, Vals& in) { return op_rnn(c, n, in, 1); }, 1};
  t["LSTM"] = {[](Ctx& c, const NodeP& n, Vals& in) { return op_rnn(c, n, in, 2); }, 1};
}

}  // namespace lt::onnx::detail
