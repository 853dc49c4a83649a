// NnTest.cpp — nn layers and losses on cpu_eager: parameter naming, layer outputs against
// hand-computed values, dropout determinism, gradients reaching every parameter.
#include <gtest/gtest.h>

#include <cmath>

#include "lazytensor/autograd.hpp"
#include "lazytensor/nn.hpp"
#include "test_support.hpp"

namespace {

lt::Device dev() {
  return lt::test::runtime(lt::test::on_device("cpu_eager")).find_device("cpu_eager");
}

struct Net : lt::nn::Module {
  Net() : a(dev(), 4, 3, 1), b(dev(), 3, 2, 2, false) {
    register_module("a", a);
    register_module("b", b);
  }
  lt::nn::Linear a, b;
};

TEST(Module, NamesParametersRecursively) {
  Net n;
  std::vector<std::string> names;
  for (auto& [name, t] : n.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"a.weight", "a.bias", "b.weight"}));
  EXPECT_EQ(n.num_parameters(), 4 * 3 + 3 + 3 * 2);
  for (lt::Tensor* p : n.parameters()) EXPECT_TRUE(lt::requires_grad(*p));
}

TEST(Init, KaimingAndXavierBounds) {
  auto k = lt::nn::kaiming_uniform(dev(), {100, 50}, 100, 1).to_vector<float>();
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / 100.0);
  for (float v : k) ASSERT_LE(std::abs(v), bound + 1e-6);
  auto x = lt::nn::xavier_uniform(dev(), {10, 20}, 10, 20, 2).to_vector<float>();
  for (float v : x) ASSERT_LE(std::abs(v), std::sqrt(6.0 / 30.0) + 1e-6);
  EXPECT_EQ(k, lt::nn::kaiming_uniform(dev(), {100, 50}, 100, 1).to_vector<float>());
}

TEST(Layers, LinearMatchesHandComputation) {
  lt::nn::Linear l(dev(), 2, 1, 1);
  EXPECT_EQ(l.weight.shape(), (std::vector<int64_t>{1, 2}));  // [out, in], as PyTorch
  l.weight = lt::Tensor::from(dev(), std::vector<float>{2, 3}, {1, 2});
  l.bias = lt::Tensor::from(dev(), std::vector<float>{1});
  auto y = l(lt::Tensor::from(dev(), std::vector<float>{1, 1, 2, 0}, {2, 2})).to_vector<float>();
  EXPECT_EQ(y, (std::vector<float>{6, 5}));
}

TEST(Layers, LayerNormNormalisesLastDim) {
  lt::nn::LayerNorm ln(dev(), 4);
  auto y = ln(lt::Tensor::from(dev(), std::vector<float>{1, 2, 3, 4, 10, 10, 10, 14}, {2, 4}))
               .to_vector<float>();
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < 4; ++c) m += y[r * 4 + c] / 4.0;
    for (int c = 0; c < 4; ++c) v += (y[r * 4 + c] - m) * (y[r * 4 + c] - m) / 4.0;
    EXPECT_NEAR(m, 0.0, 1e-5);
    EXPECT_NEAR(v, 1.0, 1e-3);
  }
}

TEST(Layers, DropoutIsSeededScaledAndOffInEval) {
  lt::Tensor x = lt::ones(dev(), {1000});
  lt::nn::Dropout d1(0.25, 7), d2(0.25, 7);
  auto a = d1(x).to_vector<float>(), b = d2(x).to_vector<float>();
  EXPECT_EQ(a, b);
  int kept = 0;
  for (float v : a) {
    ASSERT_TRUE(v == 0.0f || std::abs(v - 1.0f / 0.75f) < 1e-6);
    kept += v != 0.0f;
  }
  EXPECT_NEAR(kept / 1000.0, 0.75, 0.05);
  EXPECT_NE(d1(x).to_vector<float>(), a);  // the next call draws a new mask
  d1.eval();
  EXPECT_EQ(d1(x).to_vector<float>(), std::vector<float>(1000, 1.0f));
}

TEST(Layers, EmbeddingPicksRows) {
  lt::nn::Embedding e(dev(), 5, 3, 1);
  auto w = e.weight.to_vector<float>();
  auto y = e(lt::Tensor::from(dev(), std::vector<int64_t>{4, 0}));
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  auto v = y.to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(v[c], w[4 * 3 + c]);
    EXPECT_EQ(v[3 + c], w[c]);
  }
}

TEST(Layers, ConvPoolShapesAndLstmGradients) {
  lt::nn::Conv2d conv(dev(), 1, 4, 3, 1, 1, 1);
  lt::nn::MaxPool2d pool(2);
  auto y = pool(conv(lt::zeros(dev(), {2, 1, 8, 8})));
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 4, 4, 4}));

  lt::nn::LSTMCell cell(dev(), 3, 5, 1);
  lt::Tensor x = lt::ones(dev(), {2, 3}), h = lt::zeros(dev(), {2, 5}),
             c = lt::zeros(dev(), {2, 5});
  auto [h1, c1] = cell.forward(x, h, c);
  auto [h2, c2] = cell.forward(x, h1, c1);
  EXPECT_EQ(h2.shape(), (std::vector<int64_t>{2, 5}));
  lt::backward(h2.sum() + c2.sum());
  for (auto& [name, p] : cell.named_parameters()) {
    lt::Tensor g = lt::grad(*p);
    ASSERT_TRUE(g.defined()) << name;
    double norm = 0;
    for (float v : g.to_vector<float>()) norm += std::abs(v);
    EXPECT_GT(norm, 0) << name;
  }
}

TEST(Losses, CrossEntropyLabelsAndOneHotAgree) {
  lt::Tensor logits = lt::Tensor::from(dev(), std::vector<float>{1, 2, 3, 1, 1, 1}, {2, 3});
  lt::Tensor labels = lt::Tensor::from(dev(), std::vector<int64_t>{2, 0});
  lt::Tensor onehot = lt::Tensor::from(dev(), std::vector<float>{0, 0, 1, 1, 0, 0}, {2, 3});
  float a = lt::nn::cross_entropy(logits, labels).item<float>();
  float b = lt::nn::cross_entropy(logits, onehot).item<float>();
  double l0 = -(3 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  double l1 = std::log(3.0);
  EXPECT_NEAR(a, (l0 + l1) / 2, 1e-5);
  EXPECT_NEAR(b, a, 1e-6);
  EXPECT_NEAR(lt::nn::mse_loss(logits, logits * 0.0).item<float>(), (1 + 4 + 9 + 3) / 6.0, 1e-5);
}

}  // namespace

// ---- libtorch habits (issue #28): loss.backward(), x.grad(), nn::Sequential, lt::linspace ----

namespace {

TEST(LibtorchHabits, TensorBackwardMemberAccumulatesLikeTheFreeFunction) {
  lt::Tensor w = lt::Tensor::from(dev(), std::vector<float>{1, 2, 3});
  lt::set_requires_grad(w);
  lt::Tensor loss = (w * w).sum();  // d/dw = 2w
  loss.backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));
  (w * 3.0).sum().backward();  // accumulates, as in PyTorch
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(lt::grad(w).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  lt::Tensor nograd = lt::Tensor::from(dev(), std::vector<float>{1});
  EXPECT_FALSE(nograd.grad().defined());
}

TEST(LibtorchHabits, LinspaceIncludesBothEndsLikeTorch) {
  EXPECT_EQ(lt::linspace(dev(), 0, 1, 5).to_vector<float>(),
            (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  EXPECT_EQ(lt::linspace(dev(), -1, 2, 4).to_vector<float>(), (std::vector<float>{-1, 0, 1, 2}));
  EXPECT_EQ(lt::linspace(dev(), 3, -3, 3).to_vector<float>(), (std::vector<float>{3, 0, -3}));
  EXPECT_EQ(lt::linspace(dev(), 7, 9, 1).to_vector<float>(), (std::vector<float>{7}));
  EXPECT_EQ(lt::linspace(dev(), 7, 9, 0).numel(), 0);
  // The last value is `end` exactly, even where start + (n-1) * step rounds off.
  auto v = lt::linspace(dev(), 0.1, 0.7, 7).to_vector<float>();
  EXPECT_EQ(v.back(), 0.7f);
  EXPECT_EQ(v.front(), 0.1f);
  auto d = lt::linspace(dev(), 0, 1, 11, lt::f64).to_vector<double>();
  for (int i = 0; i < 11; ++i) EXPECT_NEAR(d[i], i / 10.0, 1e-15);
  EXPECT_EQ(lt::linspace(dev(), 0, 10, 4, lt::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3, 6, 10}));
  EXPECT_THROW(lt::linspace(dev(), 0, 1, -1), lt::Error);
}

TEST(LibtorchHabits, SequentialNamesLayersLikePyTorchAndChainsThem) {
  lt::nn::Sequential net;
  auto& l0 = net.emplace<lt::nn::Linear>(dev(), 3, 4, 1);
  net.emplace<lt::nn::ReLU>();
  auto& l2 = net.emplace<lt::nn::Linear>(dev(), 4, 2, 2);
  EXPECT_EQ(net.size(), 3u);
  std::vector<std::string> names;
  for (auto& [name, t] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  lt::Tensor x = lt::Tensor::from(dev(), std::vector<float>{1, -2, 3, 0.5f, 0, -1}, {2, 3});
  EXPECT_EQ(net(x).to_vector<float>(), l2(l0(x).relu()).to_vector<float>());
  EXPECT_EQ(&net[0], static_cast<lt::nn::Module*>(&l0));
  EXPECT_THROW(net[3], lt::Error);
  // It trains: one SGD-like step along -grad lowers a regression loss.
  lt::Tensor y = lt::Tensor::from(dev(), std::vector<float>{1, 0, 0, 1}, {2, 2});
  lt::Tensor loss = lt::nn::mse_loss(net(x), y);
  const float before = loss.item<float>();
  loss.backward();
  for (lt::Tensor* p : net.parameters()) {
    lt::Tensor g = p->grad();
    ASSERT_TRUE(g.defined());
    lt::Tensor updated = lt::detach(*p - g * 0.05);
    lt::set_requires_grad(updated);
    *p = updated;
  }
  EXPECT_LT(lt::nn::mse_loss(net(x), y).item<float>(), before);
}

}  // namespace
