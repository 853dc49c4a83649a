// AmpTest.cpp — automatic mixed precision in the C++ API (lazytensor/amp.hpp): what an Autocast
// scope casts and what it keeps in f32, scopes nesting, and the GradScaler's unscaled update,
// skipped overflow steps and scale schedule, all inside the step's graph.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lazytensor/amp.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/optim.hpp"
#include "test_support.hpp"

namespace {

lt::Device eager() {
  return lt::test::runtime().find_device("cpu_eager");
}

lt::Tensor mat(std::vector<float> v, std::vector<int64_t> shape) {
  return lt::Tensor::from<float>(eager(), v, shape);
}

TEST(Autocast, MatmulAndConvRunInTheScopesDtypeReductionsAndLossesInF32) {
  lt::Tensor a = mat({1.001f, 2, 3, 4}, {2, 2});
  {
    lt::amp::Autocast ac(lt::bf16);
    EXPECT_EQ(lt::amp::autocast_dtype(), lt::bf16);
    lt::Tensor m = lt::matmul(a, a);
    EXPECT_EQ(m.dtype(), lt::bf16);
    EXPECT_EQ(a.matmul(a).dtype(), lt::bf16);
    // Rounded inputs: 1.001 is 1.0 in bf16, so the product is exactly that of the rounded a.
    EXPECT_EQ(m.cast(lt::f32).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
    EXPECT_EQ(m.sum().dtype(), lt::f32);
    EXPECT_EQ(m.mean({1}).dtype(), lt::f32);
    EXPECT_EQ(m.softmax(1).dtype(), lt::f32);
    EXPECT_EQ(m.log_softmax(1).dtype(), lt::f32);
    lt::Tensor labels = lt::Tensor::from<int64_t>(eager(), std::vector<int64_t>{0, 1}, {2});
    EXPECT_EQ(lt::nn::cross_entropy(m, labels).dtype(), lt::f32);
    EXPECT_EQ(lt::nn::mse_loss(m, a).dtype(), lt::f32);
    EXPECT_EQ((m + a).dtype(), lt::f32);  // a bias in f32 promotes the sum back
    lt::Tensor x = lt::ones(eager(), {1, 1, 3, 3}), w = lt::ones(eager(), {2, 1, 2, 2});
    EXPECT_EQ(lt::conv2d(x, w).dtype(), lt::bf16);
    {
      lt::amp::Autocast inner(lt::f32);  // off inside, restored after
      EXPECT_EQ(lt::matmul(a, a).dtype(), lt::f32);
      lt::amp::Autocast half(lt::f16);
      EXPECT_EQ(lt::matmul(a, a).dtype(), lt::f16);
    }
    EXPECT_EQ(lt::amp::autocast_dtype(), lt::bf16);
  }
  EXPECT_EQ(lt::amp::autocast_dtype(), lt::f32);
  EXPECT_EQ(lt::matmul(a, a).dtype(), lt::f32);
  EXPECT_FLOAT_EQ(lt::matmul(a, a).to_vector<float>()[0], 1.001f * 1.001f + 6);
}

TEST(Autocast, RefusesOtherDtypesNamingThem) {
  try {
    lt::amp::Autocast ac(lt::i32);
    FAIL() << "i32 is not a precision";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("i32"), std::string::npos) << e.what();
  }
  try {
    lt::amp::parse_precision("fp8");
    FAIL();
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fp8'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lt::amp::autocast_dtype(), lt::f32);
}

// Gradients reach f32 parameters through the scope's casts, and match the f32 gradients to
// bf16 accuracy.
TEST(Autocast, GradientsArriveInF32) {
  std::vector<float> wv = {0.5f, -0.25f, 0.75f, 1.0f, -1.5f, 0.125f};
  lt::Tensor x = mat({1, 2, 3, -1, 0.5f, 2}, {2, 3});
  auto grad_of = [&](lt::DType precision) {
    lt::amp::Autocast ac(precision);
    lt::Tensor w = mat(wv, {3, 2});
    lt::set_requires_grad(w);
    lt::backward(lt::matmul(x, w).tanh().sum());
    return lt::grad(w);
  };
  lt::Tensor g32 = grad_of(lt::f32), g16 = grad_of(lt::bf16);
  ASSERT_EQ(g16.dtype(), lt::f32);
  std::vector<float> a = g32.to_vector<float>(), b = g16.to_vector<float>();
  EXPECT_TRUE(lt::test::all_close(b, a, 0.02, 0.02));
}

// One SGD step through the scaler equals the plain step on the unscaled gradient.
TEST(GradScaler, StepsOnTheUnscaledGradient) {
  lt::Tensor p = mat({1, 2, 3}, {3}), q = mat({1, 2, 3}, {3});
  lt::set_requires_grad(p);
  lt::set_requires_grad(q);
  lt::optim::SGD plain({&p}, 0.1), scaled({&q}, 0.1);
  lt::amp::GradScaler scaler(eager(), 1024.0);
  lt::backward((p * p).sum());
  plain.step();
  lt::backward(scaler.scale((q * q).sum()));
  scaler.step(scaled);
  EXPECT_EQ(p.to_vector<float>(), q.to_vector<float>());  // 1024 is a power of two: exact
  EXPECT_EQ(scaler.scale_value(), 1024.0);
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

// An overflowing gradient leaves parameters and Adam's moments as they were and halves the
// scale; after growth_interval finite steps the scale doubles.
TEST(GradScaler, SkipsOverflowingStepsAndSchedulesTheScale) {
  lt::Tensor p = mat({1, 2}, {2});
  lt::set_requires_grad(p);
  lt::optim::Adam opt({&p}, 0.1);
  lt::amp::GradScaler scaler(eager(), 65536.0, 2.0, 0.5, 2);
  auto step = [&](double factor) {
    lt::Tensor loss = (p * p).sum().cast(lt::f16) * factor;  // f16 loss: 65536 * it overflows
    lt::backward(scaler.scale(loss).cast(lt::f32));
    scaler.step(opt);
    opt.zero_grad();
    lt::sync(eager());
  };
  step(1.0);  // 5 * 65536 overflows f16: skipped
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1, 2}));
  for (auto& [name, t] : opt.named_state())
    if (name != "step") EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 0})) << name;
  EXPECT_EQ(scaler.scale_value(), 32768.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  step(1e-4);  // 5e-4 * 32768 = 16.4: finite
  std::vector<float> after = p.to_vector<float>();
  // Adam's moments start from zero again, but its step counter went on through the skipped
  // step (documented): bias corrections of step 2, m^ = 0.1 g / 0.19, v^ = 0.001 g^2 / 0.001999.
  const double moved = 0.1 * (0.1 / 0.19) / std::sqrt(0.001 / (1 - 0.999 * 0.999));
  EXPECT_NEAR(after[0], 1.0 - moved, 1e-4);
  EXPECT_NEAR(after[1], 2.0 - moved, 1e-4);
  EXPECT_EQ(scaler.scale_value(), 32768.0);
  step(1e-4);  // the second finite step in a row: the scale grows
  EXPECT_EQ(scaler.scale_value(), 65536.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

TEST(GradScaler, RefusesBadSettings) {
  EXPECT_THROW(lt::amp::GradScaler(eager(), 0.0), lt::Error);
  EXPECT_THROW(lt::amp::GradScaler(eager(), 1024.0, 1.0), lt::Error);
  EXPECT_THROW(lt::amp::GradScaler(eager(), 1024.0, 2.0, 1.5), lt::Error);
  EXPECT_THROW(lt::amp::GradScaler(eager(), 1024.0, 2.0, 0.5, 0), lt::Error);
}

}  // namespace
