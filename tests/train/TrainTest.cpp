// TrainTest.cpp — the training loop through autograd, nn and optim: a step compiles once
// (also across learning-rate changes), every loaded backend reaches the cpu_eager accuracy
// on a short run, and misuse gives clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "lazytensor/autograd.hpp"
#include "lazytensor/data.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/models/mlp.hpp"
#include "lazytensor/models/train_step.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/optim.hpp"
#include "test_support.hpp"

namespace {

lt::Runtime& runtime() {
  return lt::test::runtime(lt::test::with_fallback("silent"));
}

struct Split {
  lt::data::Dataset train, test;
};
const Split& digits() {
  static Split s = [] {
    auto all = lt::data::load_digits(LT_TEST_DIGITS);
    auto [tr, te] = lt::data::train_test_split(all, 0.2, 7);
    auto st = lt::data::Standardizer::fit(tr);
    st.apply(tr);
    st.apply(te);
    return Split{tr, te};
  }();
  return s;
}

// Trains a small MLP for a few epochs; returns test accuracy.
double train_and_test(const lt::Device& dev, int epochs) {
  lt::models::Mlp model(dev, {64, 32, 10}, 3);
  model.materialize();
  lt::optim::Adam opt(model.parameters(), 0.01);
  lt::data::Batcher batches(digits().train, 64, 3);
  for (int e = 0; e < epochs; ++e) {
    batches.shuffle(e);
    for (int64_t b = 0; b < batches.batches(); ++b) {
      auto [x, y] = batches.batch_one_hot(dev, b);
      lt::Tensor loss = lt::nn::cross_entropy(model(x), y);
      lt::models::train_step(loss, opt);
    }
  }
  lt::NoGradGuard ng;
  auto [tx, ty] = lt::data::to_tensors(dev, digits().test);
  auto correct = lt::nn::correct_count(model(tx), ty).item<int64_t>();
  return static_cast<double>(correct) / static_cast<double>(digits().test.rows());
}

using lt::test::error_of;

TEST(Training, StepCompilesOnceAlsoAfterLearningRateChange) {
  lt::Device dev = runtime().find_device("cpu_eager");
  for (const char* which : {"adam", "sgd"}) {
    lt::models::Mlp model(dev, {64, 16, 10}, 1);
    model.materialize();
    std::unique_ptr<lt::optim::Optimizer> opt;
    if (std::string(which) == "adam")
      opt = std::make_unique<lt::optim::Adam>(model.parameters(), 0.01);
    else
      opt = std::make_unique<lt::optim::SGD>(model.parameters(), 0.05, 0.9);
    lt::data::Batcher batches(digits().train, 32, 1);
    runtime().reset_metrics();
    std::vector<float> losses;
    double alive_after_2 = 0;
    for (int64_t b = 0; b < 8; ++b) {
      if (b == 2) alive_after_2 = runtime().metric("nodes_alive");
      if (b == 5) opt->set_lr(opt->lr() * 0.5);
      auto [x, y] = batches.batch_one_hot(dev, b);
      lt::Tensor loss = lt::nn::cross_entropy(model(x), y);
      lt::models::train_step(loss, *opt);
      losses.push_back(loss.item<float>());
    }
    EXPECT_EQ(runtime().metric("compiles"), 1) << which << "\n" << runtime().metrics_report();
    EXPECT_EQ(runtime().metric("cache_hits"), 7) << which;
    EXPECT_LT(losses.back(), losses.front()) << which;
    // Histories are freed by backward and with their tensors: nothing accumulates per step.
    EXPECT_EQ(runtime().metric("nodes_alive"), alive_after_2) << which;
  }
}

TEST(Training, SameSeedSameLosses) {
  lt::Device dev = runtime().find_device("cpu_eager");
  auto run = [&] {
    lt::models::Mlp model(dev, {64, 16, 10}, 9);
    model.materialize();
    lt::optim::SGD opt(model.parameters(), 0.1);
    lt::data::Batcher batches(digits().train, 32, 9);
    std::vector<float> losses;
    for (int64_t b = 0; b < 4; ++b) {
      auto [x, y] = batches.batch(dev, b);  // integer labels path
      lt::Tensor loss = lt::nn::cross_entropy(model(x), y);
      lt::models::train_step(loss, opt);
      losses.push_back(loss.item<float>());
    }
    return losses;
  };
  EXPECT_EQ(run(), run());
}

class EveryBackend : public lt::test::BackendTest {
 protected:
  EveryBackend() : BackendTest(lt::test::with_fallback("silent")) {}
};

TEST_P(EveryBackend, ReachesReferenceAccuracy) {
  static double reference = train_and_test(runtime().find_device("cpu_eager"), 3);
  ASSERT_GT(reference, 0.9);
  double acc = train_and_test(dev_, 3);
  // tpu_sim computes matmuls in bf16: allow a few test rows to differ.
  EXPECT_NEAR(acc, reference, 0.03) << GetParam();
}
LT_INSTANTIATE_PER_BACKEND(EveryBackend, lt::test::built_backends());

TEST(TrainingErrors, NonScalarLossWithoutSeed) {
  lt::Device dev = runtime().find_device("cpu_eager");
  lt::models::Mlp model(dev, {64, 8, 10}, 1);
  lt::Tensor x = lt::zeros(dev, {4, 64});
  std::string msg = error_of([&] { lt::backward(model(x)); });
  EXPECT_NE(msg.find("[4,10]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("seed"), std::string::npos) << msg;
}

TEST(TrainingErrors, MismatchedShapesAreNamed) {
  lt::Device dev = runtime().find_device("cpu_eager");
  lt::models::Mlp model(dev, {64, 8, 10}, 1);
  std::string msg = error_of([&] { model(lt::zeros(dev, {4, 32})); });
  EXPECT_NE(msg.find("[4,32]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64"), std::string::npos) << msg;
  msg = error_of([&] { lt::nn::cross_entropy(lt::zeros(dev, {4, 10}), lt::zeros(dev, {4, 9})); });
  EXPECT_NE(msg.find("[4,9]"), std::string::npos) << msg;
  msg = error_of([&] { lt::nn::mse_loss(lt::zeros(dev, {3}), lt::zeros(dev, {4})); });
  EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
  msg = error_of([&] { lt::optim::SGD opt({}, 0.1); });
  EXPECT_NE(msg.find("no parameters"), std::string::npos) << msg;
  msg = error_of([&] { lt::optim::SGD opt(model.parameters(), -1.0); });
  EXPECT_NE(msg.find("learning rate"), std::string::npos) << msg;
}

}  // namespace
