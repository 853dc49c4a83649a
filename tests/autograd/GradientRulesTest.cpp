// GradientRulesTest.cpp — every gradient rule of core/src/autograd/rules.cpp against central
// finite differences in f64 on cpu_eager, including broadcast operands, reductions over
// axes, batched/1-D matmul, layout ops, gather/scatter, conv2d variants and pools.
#include "gradcheck.hpp"

using gradcheck::check;
using gradcheck::rand_input;
using V = std::vector<lt::Tensor>;

class GradientRules : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      gradcheck::device();
    } catch (const lt::Error& e) {
      FAIL() << "cpu_eager was built but does not load: " << e.what();
    }
  }
};

#define UNARY_CASE(name, expr, lo, hi, gap)                                       \
  TEST_F(GradientRules, Unary_##name) {                                           \
    check([](const V& v) { return expr; }, {rand_input({3, 4}, 1, lo, hi, gap)}); \
  }
UNARY_CASE(Neg, -v[0], -1, 1, 0)
UNARY_CASE(Abs, v[0].abs(), -1, 1, 0.05)
UNARY_CASE(Exp, v[0].exp(), -1, 1, 0)
UNARY_CASE(Log, v[0].log(), 0.5, 2, 0)
UNARY_CASE(Sqrt, v[0].sqrt(), 0.5, 2, 0)
UNARY_CASE(Rsqrt, v[0].rsqrt(), 0.5, 2, 0)
UNARY_CASE(Tanh, v[0].tanh(), -2, 2, 0)
UNARY_CASE(Sigmoid, v[0].sigmoid(), -3, 3, 0)
UNARY_CASE(Relu, v[0].relu(), -1, 1, 0.05)
UNARY_CASE(Gelu, v[0].gelu(), -3, 3, 0)
UNARY_CASE(Sin, v[0].sin(), -3, 3, 0)
UNARY_CASE(Cos, v[0].cos(), -3, 3, 0)
#undef UNARY_CASE

TEST_F(GradientRules, FloorHasZeroGradient) {
  check([](const V& v) { return v[0].floor() + v[0]; }, {rand_input({5}, 2, 0.1, 0.9)});
}

TEST_F(GradientRules, AddBroadcastsBothWays) {
  check([](const V& v) { return v[0] + v[1]; }, {rand_input({3, 1}, 3), rand_input({1, 4}, 4)});
}
TEST_F(GradientRules, SubBroadcastsLeadingDims) {
  check([](const V& v) { return v[0] - v[1]; }, {rand_input({2, 3, 4}, 5), rand_input({4}, 6)});
}
TEST_F(GradientRules, MulWithRank0) {
  check([](const V& v) { return v[0] * v[1]; }, {rand_input({3, 4}, 7), rand_input({}, 8)});
}
TEST_F(GradientRules, Div) {
  check([](const V& v) { return v[0] / v[1]; },
        {rand_input({2, 3}, 9), rand_input({3}, 10, 0.5, 2.0)});
}
TEST_F(GradientRules, Pow) {
  check([](const V& v) { return v[0].pow(v[1]); },
        {rand_input({2, 3}, 11, 0.5, 2.0), rand_input({3}, 12, -1.5, 1.5)});
}
TEST_F(GradientRules, MaximumMinimum) {
  check([](const V& v) { return v[0].maximum(v[1]) + v[0].minimum(v[1]) * 2.0; },
        {rand_input({3, 4}, 13), rand_input({4}, 14)});
}
TEST_F(GradientRules, WhereBroadcast) {
  check(
      [](const V& v) {
        lt::Tensor c = v[0] > v[1];
        return lt::where(c, v[0] * 3.0, v[1]);
      },
      {rand_input({3, 4}, 15), rand_input({4}, 16)});
}
TEST_F(GradientRules, CastRoundTripKeepsGradient) {
  lt::Device dev = gradcheck::device();
  lt::Tensor x = lt::Tensor::from(dev, std::vector<double>{1, 2, 3});
  lt::set_requires_grad(x);
  lt::Tensor y = (x * 2.0).cast(lt::f32).cast(lt::f64).sum();
  lt::backward(y);
  lt::Tensor g = lt::grad(x);
  EXPECT_EQ(g.dtype(), lt::f64);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

TEST_F(GradientRules, SumOverAxes) {
  check([](const V& v) { return v[0].sum({1}); }, {rand_input({2, 3, 4}, 17)});
  check([](const V& v) { return v[0].sum({0, -1}, true); }, {rand_input({2, 3, 4}, 18)});
  check([](const V& v) { return v[0].sum(); }, {rand_input({2, 3}, 19)});
}
TEST_F(GradientRules, MeanOverAxes) {
  check([](const V& v) { return v[0].mean({0, 2}, true); }, {rand_input({2, 3, 4}, 20)});
  check([](const V& v) { return v[0].mean(); }, {rand_input({2, 3}, 21)});
}
TEST_F(GradientRules, MaxMinOverAxes) {
  check([](const V& v) { return v[0].max({1}); }, {rand_input({2, 3, 4}, 22)});
  check([](const V& v) { return v[0].min({-1}, true); }, {rand_input({2, 3, 4}, 23)});
}

TEST_F(GradientRules, Matmul2D) {
  check([](const V& v) { return lt::matmul(v[0], v[1]); },
        {rand_input({3, 4}, 24), rand_input({4, 5}, 25)});
}
TEST_F(GradientRules, MatmulBatched) {
  check([](const V& v) { return lt::matmul(v[0], v[1]); },
        {rand_input({2, 3, 4}, 26), rand_input({2, 4, 5}, 27)});
}
TEST_F(GradientRules, MatmulBroadcastBatch) {
  check([](const V& v) { return lt::matmul(v[0], v[1]); },
        {rand_input({2, 3, 4}, 28), rand_input({4, 5}, 29)});
  // Two batch dims over a shared weight (its gradient is one GEMM over all 6 rows).
  check([](const V& v) { return lt::matmul(v[0], v[1]); },
        {rand_input({2, 3, 2, 4}, 38), rand_input({4, 5}, 39)});
}
TEST_F(GradientRules, MatmulVectorOperands) {
  check([](const V& v) { return lt::matmul(v[0], v[1]); },
        {rand_input({4}, 30), rand_input({4, 5}, 31)});
  check([](const V& v) { return lt::matmul(v[0], v[1]); },
        {rand_input({3, 4}, 32), rand_input({4}, 33)});
  check([](const V& v) { return lt::matmul(v[0], v[1]); },
        {rand_input({4}, 34), rand_input({4}, 35)});
}

TEST_F(GradientRules, ReshapePermuteBroadcast) {
  check(
      [](const V& v) {
        return v[0].reshape({4, 6}).permute({1, 0});
      },
      {rand_input({2, 3, 4}, 36)});
  check([](const V& v) { return v[0].broadcast_to({2, 3, 4}); }, {rand_input({3, 1}, 37)});
}
TEST_F(GradientRules, SliceSteps) {
  check([](const V& v) { return v[0].slice({0, 1}, {2, 4}, {1, 1}); }, {rand_input({3, 5}, 38)});
  check([](const V& v) { return v[0].slice({0, 0}, {3, 5}, {2, 2}); }, {rand_input({3, 5}, 39)});
  check(
      [](const V& v) {
        return v[0].slice({-1, 4}, {-4, 0}, {-1, -2});
      },
      {rand_input({3, 5}, 40)});
}
TEST_F(GradientRules, ConcatAndPad) {
  check(
      [](const V& v) {
        return lt::concat({v[0], v[1], v[0]}, 1);
      },
      {rand_input({2, 3}, 41), rand_input({2, 2}, 42)});
  check([](const V& v) { return v[0].pad({1, 0}, {2, 1}, 0.5); }, {rand_input({2, 3}, 43)});
}
TEST_F(GradientRules, GatherWithRepeatsAndClamping) {
  check(
      [](const V& v) {
        lt::Tensor idx = lt::Tensor::from(v[0].device(), std::vector<int64_t>{2, 0, 2, 7, -1});
        return v[0].gather(idx, 1);
      },
      {rand_input({2, 3}, 44)});
}
TEST_F(GradientRules, ScatterAddBothDataOperands) {
  check(
      [](const V& v) {
        lt::Tensor idx = lt::Tensor::from(v[0].device(), std::vector<int64_t>{1, 1, 9, 0});
        return v[0].scatter_add(idx, v[1], 0);
      },
      {rand_input({3, 2}, 45), rand_input({4, 2}, 46)});
}

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad, dil, groups;
  bool bias;
};
void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << "x[" << c.n << "," << c.c << "," << c.h << "," << c.w << "] o" << c.o << " k" << c.k
      << " s" << c.stride << " p" << c.pad << " d" << c.dil << " g" << c.groups
      << (c.bias ? " bias" : "");
}
class ConvGradient : public GradientRules, public ::testing::WithParamInterface<ConvCase> {};
TEST_P(ConvGradient, InputWeightBias) {
  ConvCase p = GetParam();
  std::vector<gradcheck::Input> in = {rand_input({p.n, p.c, p.h, p.w}, 47),
                                      rand_input({p.o, p.c / p.groups, p.k, p.k}, 48)};
  if (p.bias) in.push_back(rand_input({p.o}, 49));
  check(
      [p](const V& v) {
        return lt::conv2d(v[0], v[1], p.bias ? v[2] : lt::Tensor(), {p.stride, p.stride},
                          {p.pad, p.pad}, {p.dil, p.dil}, p.groups);
      },
      in);
}
INSTANTIATE_TEST_SUITE_P(Variants, ConvGradient,
                         ::testing::Values(ConvCase{2, 2, 5, 5, 3, 3, 1, 0, 1, 1, true},
                                           ConvCase{1, 2, 6, 5, 2, 3, 2, 1, 1, 1, false},
                                           ConvCase{1, 1, 7, 7, 2, 2, 1, 1, 2, 1, true},
                                           ConvCase{2, 4, 5, 5, 6, 3, 2, 1, 1, 2, true},
                                           ConvCase{1, 3, 4, 4, 3, 3, 1, 1, 1, 3, false}));

TEST_F(GradientRules, MaxPool) {
  check(
      [](const V& v) {
        return lt::max_pool2d(v[0], {2, 2}, {2, 2});
      },
      {rand_input({2, 2, 4, 4}, 50)});
  check(
      [](const V& v) {
        return lt::max_pool2d(v[0], {3, 3}, {2, 2}, {1, 1});
      },
      {rand_input({1, 2, 5, 5}, 51)});
  // Tiling windows that leave the last row and column unread (they get zero gradient).
  check(
      [](const V& v) {
        return lt::max_pool2d(v[0], {2, 2}, {2, 2});
      },
      {rand_input({1, 2, 5, 7}, 54)});
}
TEST_F(GradientRules, AvgPool) {
  check(
      [](const V& v) {
        return lt::avg_pool2d(v[0], {2, 2}, {2, 2});
      },
      {rand_input({2, 2, 4, 4}, 52)});
  check(
      [](const V& v) {
        return lt::avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1});
      },
      {rand_input({1, 2, 5, 5}, 53)});
  check(
      [](const V& v) {
        return lt::avg_pool2d(v[0], {2, 3}, {2, 3});
      },
      {rand_input({1, 2, 5, 7}, 55)});
}
TEST_F(GradientRules, SoftmaxLogSoftmax) {
  check([](const V& v) { return v[0].softmax(1); }, {rand_input({3, 4}, 54)});
  check([](const V& v) { return v[0].softmax(0); }, {rand_input({3, 4}, 55)});
  check([](const V& v) { return v[0].log_softmax(1); }, {rand_input({3, 4}, 56)});
  check([](const V& v) { return v[0].log_softmax(-2); }, {rand_input({2, 3, 4}, 57)});
}
TEST_F(GradientRules, ComposedMlpLoss) {
  check(
      [](const V& v) {
        lt::Tensor h = (lt::matmul(v[0], v[1]) + v[2]).tanh();
        return h.log_softmax(1).mean();
      },
      {rand_input({4, 3}, 58), rand_input({3, 5}, 59), rand_input({5}, 60)});
}
