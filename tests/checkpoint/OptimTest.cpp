// OptimTest.cpp — the optimizer features a GPT-style run needs: AdamW against a hand-computed
// reference, clip_grad_norm, lt::set_grad, the WarmupCosine schedule, optimizer state by name,
// and no recompilation when lr, weight decay or the clipping threshold change between steps.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "checkpoint_test_util.hpp"
#include "lazytensor/autograd.hpp"
#include "lazytensor/optim.hpp"

namespace {

using lt::test::catch_error;
using lt::test::contains;
using lt::test::cpu;

using lt::test::values;

// AdamW in double, element by element (torch.optim.AdamW's update).
struct ReferenceAdamW {
  std::vector<double> p, m, v;
  bool decay;
  void step(int t, double lr, double wd, const std::vector<double>& g) {
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      if (decay) p[i] *= 1 - lr * wd;
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

void expect_near(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  EXPECT_TRUE(lt::test::all_close(got, want, 1e-5, 1e-5)) << what;
}

// Loss 0.5 * (|W|^2 + |b|^2): the gradient of each parameter is the parameter itself.
void backward_half_square(const lt::Tensor& w, const lt::Tensor& b) {
  lt::backward((w * w).sum() * 0.5 + (b * b).sum() * 0.5);
}

TEST(AdamW, MatchesAHandComputedReferenceWithDecayOnMatricesOnly) {
  const std::vector<double> w0 = {0.5, -1.0, 2.0, 0.25}, b0 = {1.0, -2.0};
  const double lrs[] = {0.1, 0.05, 0.2}, wds[] = {0.5, 0.0, 1.0};
  for (bool explicit_mask : {false, true}) {
    SCOPED_TRACE(explicit_mask ? "mask {false, true}" : "default mask");
    lt::Tensor w = lt::Tensor::from(cpu(), std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f}, {2, 2});
    lt::Tensor b = lt::Tensor::from(cpu(), std::vector<float>{1.0f, -2.0f});
    lt::set_requires_grad(w);
    lt::set_requires_grad(b);
    std::vector<bool> mask;
    if (explicit_mask) mask = {false, true};
    lt::optim::AdamW opt({&w, &b}, lrs[0], wds[0], 0.9, 0.999, 1e-8, mask);
    EXPECT_EQ(opt.decays(0), !explicit_mask);
    EXPECT_EQ(opt.decays(1), explicit_mask);
    ReferenceAdamW rw{w0, {0, 0, 0, 0}, {0, 0, 0, 0}, !explicit_mask};
    ReferenceAdamW rb{b0, {0, 0}, {0, 0}, explicit_mask};
    for (int t = 1; t <= 3; ++t) {
      opt.set_lr(lrs[t - 1]);
      opt.set_weight_decay(wds[t - 1]);
      backward_half_square(w, b);
      rw.step(t, lrs[t - 1], wds[t - 1], rw.p);
      rb.step(t, lrs[t - 1], wds[t - 1], rb.p);
      opt.step();
      lt::sync(cpu());
      expect_near(values(w), rw.p, "W");
      expect_near(values(b), rb.p, "b");
    }
  }
}

TEST(AdamW, RefusesBadSettings) {
  lt::Tensor w = lt::zeros(cpu(), {2, 2});
  lt::set_requires_grad(w);
  auto err = catch_error([&] {
    lt::optim::AdamW opt({&w}, 0.1, 0.01, 0.9, 0.999, 1e-8, {true, false});
  });
  EXPECT_EQ(err.code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(err.message, "2 entries for 1 parameters")) << err.message;
  lt::optim::AdamW opt({&w}, 0.1);
  err = catch_error([&] { opt.set_weight_decay(-1); });
  EXPECT_TRUE(contains(err.message, "weight decay")) << err.message;
  EXPECT_EQ(opt.weight_decay(), 0.01);
  opt.set_lr(0.0);  // the end of a schedule
  err = catch_error([&] { opt.set_lr(-0.5); });
  EXPECT_TRUE(contains(err.message, "learning rate")) << err.message;
}

// Leaves p1 [2], p2 [1] with gradients {3, 4} and {12}: global norm 13.
struct Grads345 {
  lt::Tensor p1 = lt::zeros(cpu(), {2}), p2 = lt::zeros(cpu(), {1});
  Grads345() {
    lt::set_requires_grad(p1);
    lt::set_requires_grad(p2);
    lt::Tensor c1 = lt::Tensor::from(cpu(), std::vector<float>{3, 4});
    lt::Tensor c2 = lt::Tensor::from(cpu(), std::vector<float>{12});
    lt::backward((p1 * c1).sum() + (p2 * c2).sum());
  }
};

TEST(ClipGradNorm, ScalesTheGlobalNormDownToMaxNorm) {
  Grads345 g;
  lt::Tensor norm = lt::optim::clip_grad_norm({&g.p1, &g.p2}, 6.5);
  EXPECT_FALSE(norm.is_materialized()) << "the norm stays lazy until the step's sync";
  lt::sync(cpu());
  EXPECT_NEAR(norm.item<float>(), 13.0f, 1e-5f);
  std::vector<float> a = values(lt::grad(g.p1)), b = values(lt::grad(g.p2));
  const double scale = 6.5 / (13.0 + 1e-6);
  EXPECT_NEAR(a[0], 3 * scale, 1e-5);
  EXPECT_NEAR(a[1], 4 * scale, 1e-5);
  EXPECT_NEAR(b[0], 12 * scale, 1e-5);
  EXPECT_NEAR(std::sqrt(a[0] * a[0] + a[1] * a[1] + b[0] * b[0]), 6.5, 1e-4);
}

TEST(ClipGradNorm, LeavesSmallGradientsExactlyAlone) {
  Grads345 g;
  const auto a0 = lt::grad(g.p1).to_bytes(), b0 = lt::grad(g.p2).to_bytes();
  lt::Tensor norm = lt::optim::clip_grad_norm({&g.p1, &g.p2}, 100.0);
  lt::sync(cpu());
  EXPECT_NEAR(norm.item<float>(), 13.0f, 1e-5f);
  EXPECT_EQ(lt::grad(g.p1).to_bytes(), a0);
  EXPECT_EQ(lt::grad(g.p2).to_bytes(), b0);
}

TEST(ClipGradNorm, SkipsParametersWithoutGradientsAndRefusesBadArguments) {
  Grads345 g;
  lt::Tensor idle = lt::ones(cpu(), {3});
  lt::set_requires_grad(idle);
  EXPECT_NEAR(lt::optim::clip_grad_norm({&g.p1, &idle, &g.p2}, 1.0).item<float>(), 13.0f, 1e-5f);
  EXPECT_FALSE(lt::grad(idle).defined());
  EXPECT_EQ(lt::optim::clip_grad_norm({&idle}, 1.0).item<float>(), 0.0f);
  EXPECT_EQ(catch_error([&] { lt::optim::clip_grad_norm({&g.p1}, 0.0); }).code,
            LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(catch_error([&] { lt::optim::clip_grad_norm({}, 1.0); }).code,
            LT_STATUS_INVALID_ARGUMENT);
}

TEST(SetGrad, ReplacesOrDropsALeafsGradientAndRefusesMisfits) {
  Grads345 g;
  lt::set_grad(g.p1, lt::Tensor::from(cpu(), std::vector<float>{-1, 5}));
  EXPECT_EQ(values(lt::grad(g.p1)), (std::vector<float>{-1, 5}));
  lt::set_grad(g.p1, lt::Tensor());
  EXPECT_FALSE(lt::grad(g.p1).defined());

  auto err = catch_error([&] { lt::set_grad(g.p2, lt::zeros(cpu(), {2})); });
  EXPECT_EQ(err.code, LT_STATUS_SHAPE_MISMATCH);
  EXPECT_TRUE(contains(err.message, "[2]") && contains(err.message, "[1]")) << err.message;
  err = catch_error([&] { lt::set_grad(g.p2, lt::zeros(cpu(), {1}, lt::f64)); });
  EXPECT_EQ(err.code, LT_STATUS_DTYPE_MISMATCH);
  err = catch_error([&] { lt::set_grad(g.p2, g.p2 * 2.0); });
  EXPECT_EQ(err.code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(err.message, "requires gradients itself")) << err.message;
  lt::Tensor plain = lt::zeros(cpu(), {1});
  err = catch_error([&] { lt::set_grad(plain, lt::zeros(cpu(), {1})); });
  EXPECT_TRUE(contains(err.message, "does not require gradients")) << err.message;
  err = catch_error([&] { lt::set_grad(g.p2 * 2.0, lt::zeros(cpu(), {1})); });
  EXPECT_TRUE(contains(err.message, "not a leaf")) << err.message;
  EXPECT_EQ(values(lt::grad(g.p2)), (std::vector<float>{12}));
}

TEST(WarmupCosine, WarmsUpLinearlyThenFollowsTheCosineToMinLr) {
  const lt::optim::WarmupCosine s{1.0, 10, 110, 0.1};
  EXPECT_DOUBLE_EQ(s(0), 0.1);
  EXPECT_DOUBLE_EQ(s(4), 0.5);
  EXPECT_DOUBLE_EQ(s(9), 1.0);
  EXPECT_DOUBLE_EQ(s(10), 1.0);
  EXPECT_NEAR(s(60), 0.55, 1e-12);
  EXPECT_NEAR(s(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)), 1e-12);
  EXPECT_DOUBLE_EQ(s(110), 0.1);
  EXPECT_DOUBLE_EQ(s(100000), 0.1);
  for (int64_t step = 10; step < 110; ++step) EXPECT_GE(s(step), s(step + 1)) << step;
  EXPECT_DOUBLE_EQ((lt::optim::WarmupCosine{0.3, 0, 10, 0.0}(0)), 0.3);
  EXPECT_EQ(catch_error([&] { s(-1); }).code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(catch_error([] {
              lt::optim::WarmupCosine{0.1, 10, 5, 0.0}(0);
            }).code,
            LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(catch_error([] {
              lt::optim::WarmupCosine{0.1, 0, 5, 0.2}(0);
            }).code,
            LT_STATUS_INVALID_ARGUMENT);
}

TEST(OptimizerState, NamesEverySlotAndLoadsOnlyAMatchingState) {
  lt::Tensor w = lt::zeros(cpu(), {2, 3}), b = lt::zeros(cpu(), {3});
  lt::set_requires_grad(w);
  lt::set_requires_grad(b);
  auto names = [](lt::optim::Optimizer& o) {
    std::vector<std::string> out;
    for (auto& [n, t] : o.named_state()) out.push_back(n);
    return out;
  };
  lt::optim::SGD plain({&w, &b}, 0.1);
  EXPECT_EQ(names(plain), std::vector<std::string>{"step"});
  lt::optim::SGD momentum({&w, &b}, 0.1, 0.9);
  EXPECT_EQ(names(momentum), (std::vector<std::string>{"step", "momentum.0", "momentum.1"}));
  lt::optim::Adam adam({&w, &b}, 0.1);
  EXPECT_EQ(names(adam), (std::vector<std::string>{"step", "m.0", "m.1", "v.0", "v.1"}));

  auto state = adam.named_state();
  std::vector<std::pair<std::string, lt::Tensor>> next;
  for (auto& [n, t] : state) next.emplace_back(n, n == "step" ? t : lt::ones(cpu(), t.shape()));
  next[0].second = lt::Tensor::scalar(cpu(), 41, lt::i64);

  auto wrong_shape = next;
  wrong_shape[2].second = lt::ones(cpu(), {4});
  auto missing = next;
  missing.pop_back();
  auto extra = next;
  extra.emplace_back("u.0", lt::ones(cpu(), {2, 3}));
  auto wrong_step = next;
  wrong_step[0].second = lt::Tensor::scalar(cpu(), 1, lt::f32);
  struct Case {
    const char* label;
    const std::vector<std::pair<std::string, lt::Tensor>>* state;
    std::string says;
  };
  for (const Case& c : {Case{"shape", &wrong_shape, "'m.1' has shape [4], expected [3]"},
                        Case{"missing", &missing, "'v.1' is missing"},
                        Case{"extra", &extra, "unexpected state 'u.0'"},
                        Case{"step", &wrong_step, "'step' must be a rank-0 i64"}}) {
    SCOPED_TRACE(c.label);
    auto err = catch_error([&] { adam.load_state(*c.state); });
    ASSERT_TRUE(err.thrown);
    EXPECT_TRUE(contains(err.message, c.says)) << err.message;
    EXPECT_EQ(adam.steps(), 0);
    for (auto& [n, t] : adam.named_state()) {
      if (n == "step") continue;
      EXPECT_EQ(values(t), std::vector<float>(static_cast<size_t>(t.numel()), 0.0f)) << n;
    }
  }
  adam.load_state(next);
  EXPECT_EQ(adam.steps(), 41);
  for (auto& [n, t] : adam.named_state()) {
    if (n != "step")
      EXPECT_EQ(values(t), std::vector<float>(static_cast<size_t>(t.numel()), 1.0f)) << n;
  }
}

// Learning rate (from the schedule), weight decay and clipping threshold change every step: the
// step graph is compiled once and then always found in the cache.
TEST(NoRecompile, ChangingLrWeightDecayAndMaxNormHitsTheCache) {
  lt::Tensor w = lt::random_normal(cpu(), {6, 5}, 1), b = lt::zeros(cpu(), {5});
  lt::sync(cpu());
  lt::set_requires_grad(w);
  lt::set_requires_grad(b);
  lt::optim::AdamW opt({&w, &b}, 1.0, 0.1);
  const lt::optim::WarmupCosine schedule{0.05, 3, 10, 0.001};
  auto step = [&](int64_t s) {
    opt.set_lr(schedule(opt.steps()));
    opt.set_weight_decay(0.01 * static_cast<double>(s % 3));
    lt::Tensor x = lt::random_normal(cpu(), {4, 6}, 100 + static_cast<uint64_t>(s));
    lt::Tensor loss = (lt::matmul(x, w) + b).tanh().sum();
    lt::backward(loss);
    lt::Tensor norm = lt::optim::clip_grad_norm({&w, &b}, 0.5 + 0.25 * static_cast<double>(s));
    opt.step();
    lt::sync(cpu());
    return norm.item<float>();
  };
  step(0);  // compiles (or finds) the step graph
  lt::test::eager_runtime().reset_metrics();
  for (int64_t s = 1; s <= 6; ++s) EXPECT_GT(step(s), 0.0f);
  EXPECT_EQ(lt::test::eager_runtime().metric("compiles"), 0)
      << lt::test::eager_runtime().metrics_report();
  EXPECT_EQ(lt::test::eager_runtime().metric("cache_hits"), 6);
}

}  // namespace
