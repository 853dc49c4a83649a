// SourceLocationTest.cpp — ops recorded inside the C++ API's own headers (a module's forward,
// a loss, an optimiser's step, a model) name the line of the user's program that called into
// the API, not the header's (issue #28); the user's own ops keep their lines, also when a
// header calls back into user code (nn::Sequential), and nothing leaks past the call.
#include <lazytensor/lazytensor.hpp>

#include "test_support.hpp"
#include <lazytensor/models/resnet.hpp>
#include <lazytensor/nn.hpp>
#include <lazytensor/optim.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

lt::Device dev() {
  return lt::test::runtime().default_device();
}

// "file:line" of the node that holds t's value ("" when none was recorded).
std::string traced_at(const lt::Tensor& t) {
  const char* file = nullptr;
  uint32_t line = 0;
  if (!lt_tensor_traced_at(t.get(), &file, &line)) return "";
  const char* base = std::strrchr(file, '/');
  return std::string(base ? base + 1 : file) + ":" + std::to_string(line);
}
std::string here(int line) {
  return "SourceLocationTest.cpp:" + std::to_string(line);
}

lt::Tensor ones(int64_t rows, int64_t cols) {
  return lt::Tensor::from(dev(), std::vector<float>(size_t(rows * cols), 1.0f), {rows, cols});
}

TEST(ApiSourceLine, OpsInsideAModuleNameTheLineThatCalledIt) {
  lt::nn::Linear fc(dev(), 4, 3, 1);
  lt::Tensor x = ones(2, 4);
  const int line = __LINE__ + 1;
  lt::Tensor y = fc(x);  // matmul and bias add inside nn.hpp
  EXPECT_EQ(traced_at(y), here(line));
  const int line2 = __LINE__ + 1;
  lt::Tensor z = fc.forward(x);
  EXPECT_EQ(traced_at(z), here(line2));
}

TEST(ApiSourceLine, ALossAndAnOptimiserStepNameTheirCallers) {
  lt::nn::Linear fc(dev(), 4, 2, 1);
  lt::Tensor target = ones(2, 2);
  const int line = __LINE__ + 1;
  lt::Tensor loss = lt::nn::mse_loss(fc(ones(2, 4)), target);
  EXPECT_EQ(traced_at(loss), here(line));
  loss.backward();
  lt::optim::SGD opt(fc.parameters(), 0.1);
  const int line2 = __LINE__ + 1;
  opt.step();
  EXPECT_EQ(traced_at(fc.weight), here(line2));
}

TEST(ApiSourceLine, ANestedModelNamesTheOutermostUserCall) {
  lt::models::ResNetConfig c;
  lt::models::ResNet net(dev(), c);
  lt::Tensor img = lt::Tensor::from(dev(), std::vector<float>(2 * 64, 0.5f), {2, 1, 8, 8});
  const int line = __LINE__ + 1;
  lt::Tensor logits = net(img);  // blocks, convolutions, norms and the head, all in headers
  EXPECT_EQ(traced_at(logits), here(line));
}

class Doubler : public lt::nn::Module {
 public:
  static inline int line = 0;
  lt::Tensor operator()(const lt::Tensor& x) {
    line = __LINE__ + 1;
    return x * 2.0;
  }
};

TEST(ApiSourceLine, UserCodeCalledFromAHeaderKeepsItsOwnLines) {
  lt::nn::Sequential seq;
  seq.emplace<lt::nn::Linear>(dev(), 4, 4, 1);
  seq.emplace<Doubler>();
  lt::Tensor y = seq(ones(1, 4));
  EXPECT_EQ(traced_at(y), here(Doubler::line));
}

TEST(ApiSourceLine, NothingLeaksPastTheCall) {
  lt::nn::Linear fc(dev(), 4, 4, 1);
  lt::Tensor h = fc(ones(1, 4));
  // A reduction has no location parameter: outside a module it records none, not fc's line.
  lt::Tensor s = h.sum();
  EXPECT_EQ(traced_at(s), "");
}

}  // namespace
