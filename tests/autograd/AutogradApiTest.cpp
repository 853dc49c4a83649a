// AutogradApiTest.cpp — behaviour of the autograd C API and its C++ wrapper: accumulation
// across backward calls, zero_grad, the functional lt_grad, detach, no-grad scopes, deep
// histories, and clear errors for misuse.
#include "gradcheck.hpp"

#include "lazytensor/lt.h"

#include <atomic>
#include <thread>

namespace {

class Autograd : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      dev = gradcheck::device();
    } catch (const lt::Error& e) {
      FAIL() << "cpu_eager was built but does not load: " << e.what();
    }
  }
  lt::Tensor vec(std::vector<double> v) { return lt::Tensor::from(dev, v); }
  lt::Device dev;
};

using lt::test::error_of;

TEST_F(Autograd, GradientsAccumulateUntilZeroGrad) {
  lt::Tensor x = vec({1, 2, 3});
  lt::set_requires_grad(x);
  for (int i = 0; i < 2; ++i) lt::backward((x * x).sum());
  EXPECT_EQ(lt::grad(x).to_vector<double>(), (std::vector<double>{4, 8, 12}));
  lt::zero_grad(x);
  EXPECT_FALSE(lt::grad(x).defined());
  lt::backward(x.sum());
  EXPECT_EQ(lt::grad(x).to_vector<double>(), (std::vector<double>{1, 1, 1}));
}

TEST_F(Autograd, RequiresGradPropagatesOnlyFromMarkedLeaves) {
  lt::Tensor x = vec({1, 2}), c = vec({3, 4});
  lt::set_requires_grad(x);
  EXPECT_TRUE(lt::requires_grad(x * c));
  EXPECT_FALSE(lt::requires_grad(c * c));
  EXPECT_FALSE(lt::requires_grad(x > c));  // bool outputs carry no gradient
}

TEST_F(Autograd, NonScalarNeedsSeed) {
  lt::Tensor x = vec({1, 2, 3});
  lt::set_requires_grad(x);
  lt::Tensor y = x * 2.0;
  std::string msg = error_of([&] { lt::backward(y); });
  EXPECT_NE(msg.find("seed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
  lt::backward(y, vec({1, 10, 100}));
  EXPECT_EQ(lt::grad(x).to_vector<double>(), (std::vector<double>{2, 20, 200}));
}

TEST_F(Autograd, SeedOfWrongShapeIsRejected) {
  lt::Tensor x = vec({1, 2, 3});
  lt::set_requires_grad(x);
  std::string msg = error_of([&] { lt::backward(x * 2.0, vec({1, 2})); });
  EXPECT_NE(msg.find("seed shape [2]"), std::string::npos) << msg;
}

TEST_F(Autograd, BackwardWithoutGradientsIsAnError) {
  std::string msg = error_of([&] { lt::backward(vec({1}).sum()); });
  EXPECT_NE(msg.find("does not require gradients"), std::string::npos) << msg;
}

TEST_F(Autograd, IntegerTensorsCannotRequireGrad) {
  lt::Tensor i = lt::Tensor::from(dev, std::vector<int32_t>{1, 2});
  std::string msg = error_of([&] { lt::set_requires_grad(i); });
  EXPECT_NE(msg.find("i32"), std::string::npos) << msg;
}

TEST_F(Autograd, SecondBackwardThroughFreedHistoryFails) {
  lt::Tensor x = vec({1, 2});
  lt::set_requires_grad(x);
  lt::Tensor loss = (x * x).sum();
  lt::backward(loss);
  std::string msg = error_of([&] { lt::backward(loss); });
  EXPECT_NE(msg.find("forward pass again"), std::string::npos) << msg;
}

TEST_F(Autograd, FunctionalGradDoesNotAccumulateAndKeepsGraph) {
  lt::Tensor x = vec({1, 2, 3}), unused = vec({5});
  lt::set_requires_grad(x);
  lt::set_requires_grad(unused);
  lt::Tensor h = x * x;
  lt::Tensor loss = h.sum();
  auto g = lt::grad({loss}, {x, h, unused});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{1, 1, 1}));  // a non-leaf input
  EXPECT_EQ(g[2].to_vector<double>(), (std::vector<double>{0}));
  EXPECT_FALSE(lt::grad(x).defined());
  auto again = lt::grad({loss}, {x});  // graph kept
  EXPECT_EQ(again[0].to_vector<double>(), (std::vector<double>{2, 4, 6}));
}

TEST_F(Autograd, DetachCutsHistory) {
  lt::Tensor x = vec({1, 2});
  lt::set_requires_grad(x);
  lt::Tensor d = lt::detach(x * 3.0);
  EXPECT_FALSE(lt::requires_grad(d));
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{3, 6}));
  lt::Tensor loss = (x * d).sum();  // d acts as a constant
  lt::backward(loss);
  EXPECT_EQ(lt::grad(x).to_vector<double>(), (std::vector<double>{3, 6}));
}

TEST_F(Autograd, NoGradScopeRecordsNothing) {
  lt::Tensor x = vec({1, 2});
  lt::set_requires_grad(x);
  {
    lt::NoGradGuard g;
    { lt::NoGradGuard nested; }
    EXPECT_FALSE(lt::requires_grad(x * 2.0));
  }
  EXPECT_TRUE(lt::requires_grad(x * 2.0));
}

TEST_F(Autograd, ClearingRequiresGradOnNonLeafIsRejected) {
  lt::Tensor x = vec({1, 2});
  lt::set_requires_grad(x);
  std::string msg = error_of([&] { lt::set_requires_grad(x * 2.0, false); });
  EXPECT_NE(msg.find("not a leaf"), std::string::npos) << msg;
}

TEST_F(Autograd, DeepHistoryIsWalkedIteratively) {
  lt::Tensor x = vec({1.0});
  lt::set_requires_grad(x);
  lt::Tensor y = x;
  const int depth = 20000;
  for (int i = 0; i < depth; ++i) y = y * 1.0001;
  lt::backward(y.sum());
  double expect = std::pow(1.0001, depth);
  EXPECT_NEAR(lt::grad(x).to_vector<double>()[0], expect, 1e-9 * expect);
}

TEST_F(Autograd, ThreadsRecordAndBackpropIndependently) {
  std::atomic<int> failures{0};
  auto worker = [&](double k, bool with_no_grad_scope) {
    try {
      for (int i = 0; i < 50; ++i) {
        lt::Tensor x = vec({1, 2, 3});
        lt::set_requires_grad(x);
        if (with_no_grad_scope) {
          lt::NoGradGuard g;  // per thread: must not affect the other thread
          if (lt::requires_grad(x * 2.0)) ++failures;
        }
        lt::backward((x * x * k).sum());
        auto gv = lt::grad(x).to_vector<double>();
        if (gv != std::vector<double>{2 * k, 4 * k, 6 * k}) ++failures;
      }
    } catch (const std::exception&) {
      ++failures;
    }
  };
  std::thread a(worker, 1.0, true), b(worker, 3.0, false);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(Autograd, CApiNullArgumentsGiveErrors) {
  lt_error* e = lt_backward(nullptr, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(lt_error_code(e), LT_STATUS_INVALID_ARGUMENT);
  lt_error_destroy(e);
  e = lt_tensor_grad(nullptr, nullptr);
  ASSERT_NE(e, nullptr);
  lt_error_destroy(e);
  e = lt_grad(nullptr, nullptr, 0, nullptr, 0, nullptr);
  ASSERT_NE(e, nullptr);
  lt_error_destroy(e);
  EXPECT_EQ(lt_tensor_requires_grad(nullptr), 0);
  lt_no_grad_end();  // unbalanced end is ignored
}

}  // namespace
