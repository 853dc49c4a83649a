// gradcheck.hpp — test helper: compares autograd gradients with central finite differences
// in f64 on the cpu_eager backend.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"
#include "test_support.hpp"

namespace gradcheck {

// One runtime for the whole binary; cpu_eager is the reference backend.
inline lt::Runtime& runtime() {
  return lt::test::runtime(lt::test::on_device("cpu_eager"));
}
inline lt::Device device() {
  return runtime().find_device("cpu_eager");
}

struct Input {
  std::vector<int64_t> shape;
  std::vector<double> data;
  bool needs_grad = true;
};

inline int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Uniform values in [lo, hi], optionally kept at least `gap` away from zero (abs, relu,
// division and max ties are not differentiable there).
inline Input rand_input(std::vector<int64_t> shape, uint32_t seed, double lo = -1.0,
                        double hi = 1.0, double gap = 0.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Input in;
  in.shape = std::move(shape);
  for (int64_t i = 0; i < numel(in.shape); ++i) {
    double v = u(gen);
    if (gap > 0 && std::abs(v) < gap) v = v < 0 ? v - gap : v + gap;
    in.data.push_back(v);
  }
  return in;
}

using Fn = std::function<lt::Tensor(const std::vector<lt::Tensor>&)>;

// loss = sum(fn(inputs) * W) with a fixed random W, so the seed of fn's output is not trivial.
inline double eval_loss(const Fn& fn, const std::vector<Input>& inputs,
                        std::vector<lt::Tensor>* leaves_out, lt::Tensor* loss_out) {
  lt::Device dev = device();
  std::vector<lt::Tensor> leaves;
  for (const Input& in : inputs) {
    leaves.push_back(lt::Tensor::from(dev, in.data, in.shape));
    if (leaves_out && in.needs_grad) lt::set_requires_grad(leaves.back());
  }
  lt::Tensor out = fn(leaves);
  Input w = rand_input(out.shape(), 1234, -1.0, 1.0);
  lt::Tensor wt = lt::Tensor::from(dev, w.data, w.shape);
  lt::Tensor loss = (out * wt).sum();
  if (leaves_out) *leaves_out = leaves;
  if (loss_out) *loss_out = loss;
  return loss.item<double>();
}

// Checks d loss / d input for every input with needs_grad.
inline void check(const Fn& fn, std::vector<Input> inputs, double eps = 1e-6, double atol = 1e-6,
                  double rtol = 1e-5) {
  std::vector<lt::Tensor> leaves;
  lt::Tensor loss;
  eval_loss(fn, inputs, &leaves, &loss);
  lt::backward(loss);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].needs_grad) continue;
    lt::Tensor g = lt::grad(leaves[i]);
    ASSERT_TRUE(g.defined()) << "input " << i << " got no gradient";
    ASSERT_EQ(g.shape(), inputs[i].shape) << "input " << i;
    std::vector<double> analytic = g.to_vector<double>();
    for (size_t j = 0; j < inputs[i].data.size(); ++j) {
      std::vector<Input> plus = inputs, minus = inputs;
      plus[i].data[j] += eps;
      minus[i].data[j] -= eps;
      double numeric =
          (eval_loss(fn, plus, nullptr, nullptr) - eval_loss(fn, minus, nullptr, nullptr)) /
          (2 * eps);
      ASSERT_NEAR(analytic[j], numeric, atol + rtol * std::abs(numeric))
          << "input " << i << " element " << j;
    }
  }
}

}  // namespace gradcheck
