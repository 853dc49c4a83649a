// optim.hpp — header-only optimizers (SGD with momentum, Adam) over nn::Module parameter
// slots. Owned by the train engineer.
//
// An update is traced lazily like everything else: step() replaces each parameter with a
// new tensor (p - lr * update) that is a fresh leaf requiring gradients, so forward +
// backward + update of a training step form ONE graph at the next lt::sync. Values that
// change between steps (learning rate, Adam's bias corrections) are lt_scalar graph
// parameters, and the optimizer state is created materialised, so every step - the first
// included - has the same graph and hits the compile cache.
#ifndef LAZYTENSOR_OPTIM_HPP
#define LAZYTENSOR_OPTIM_HPP

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace lt::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor*> params, double lr) : params_(std::move(params)) {
    if (params_.empty()) throw Error(LT_STATUS_INVALID_ARGUMENT, "optimizer: no parameters");
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!params_[i] || !params_[i]->defined()) {
        throw Error(LT_STATUS_INVALID_ARGUMENT,
                    "optimizer: parameter " + std::to_string(i) + " is null");
      }
    }
    device_ = params_.front()->device();
    set_lr(lr);
  }
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;

  // A new value of the same graph parameter: no recompilation.
  void set_lr(double lr) {
    if (!(lr > 0.0) || !std::isfinite(lr)) {
      throw Error(
          LT_STATUS_INVALID_ARGUMENT,
          "optimizer: learning rate must be positive and finite, got " + std::to_string(lr));
    }
    lr_value_ = lr;
    lr_ = Tensor::scalar(device_, lr, params_.front()->dtype());
  }
  double lr() const { return lr_value_; }

  // Applies one update from the accumulated gradients (parameters without one are kept).
  void step() {
    NoGradGuard no_grad;
    ++steps_;
    begin_step();
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor& p = *params_[i];
      Tensor g = grad(p);
      if (!g.defined()) continue;
      if (g.shape() != p.shape()) {
        throw Error(LT_STATUS_SHAPE_MISMATCH,
                    "optimizer: gradient of parameter " + std::to_string(i) + " has shape " +
                        detail::shape_string(g.shape_span()) + " but the parameter has " +
                        detail::shape_string(p.shape_span()));
      }
      Tensor next = update(i, p, g);
      p = std::move(next);
      set_requires_grad(p);
    }
  }
  void zero_grad() {
    for (Tensor* p : params_) lt::zero_grad(*p);
  }
  int64_t steps() const { return steps_; }

 protected:
  virtual void begin_step() {}
  // The new value of parameter i (traced in a no-grad scope).
  virtual Tensor update(size_t i, const Tensor& p, const Tensor& g) = 0;
  // Zero-initialised, materialised state shaped like each parameter.
  std::vector<Tensor> make_state() {
    std::vector<Tensor> s;
    for (Tensor* p : params_) s.push_back(zeros(device_, p->shape(), p->dtype()).materialize());
    return s;
  }
  std::vector<Tensor*> params_;
  Device device_;
  Tensor lr_;
  double lr_value_ = 0;
  int64_t steps_ = 0;
};

// p -= lr * v, v = momentum * v + g (plain SGD when momentum is 0).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, double lr, double momentum = 0.0)
      : Optimizer(std::move(params), lr), momentum_(momentum) {
    if (momentum < 0.0 || momentum >= 1.0) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "SGD: momentum must be in [0, 1), got " + std::to_string(momentum));
    }
    if (momentum_ > 0.0) velocity_ = make_state();
  }

 protected:
  Tensor update(size_t i, const Tensor& p, const Tensor& g) override {
    if (momentum_ == 0.0) return p - lr_ * g;
    velocity_[i] = velocity_[i] * momentum_ + g;
    return p - lr_ * velocity_[i];
  }

 private:
  double momentum_;
  std::vector<Tensor> velocity_;
};

// Adam (Kingma & Ba) with bias correction folded into two scalar parameters per step.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor*> params, double lr, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8)
      : Optimizer(std::move(params), lr), b1_(beta1), b2_(beta2), eps_(eps) {
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps > 0)) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "Adam: need 0 <= beta1, beta2 < 1 and eps > 0");
    }
    m_ = make_state();
    v_ = make_state();
  }

 protected:
  void begin_step() override {
    DType dt = params_.front()->dtype();
    double t = static_cast<double>(steps_);
    step_size_ = Tensor::scalar(device_, lr_value_ / (1.0 - std::pow(b1_, t)), dt);
    v_scale_ = Tensor::scalar(device_, 1.0 / (1.0 - std::pow(b2_, t)), dt);
  }
  Tensor update(size_t i, const Tensor& p, const Tensor& g) override {
    m_[i] = m_[i] * b1_ + g * (1.0 - b1_);
    v_[i] = v_[i] * b2_ + g * g * (1.0 - b2_);
    return p - step_size_ * m_[i] / ((v_[i] * v_scale_).sqrt() + eps_);
  }

 private:
  double b1_, b2_, eps_;
  std::vector<Tensor> m_, v_;
  Tensor step_size_, v_scale_;
};

}  // namespace lt::optim

#endif  // LAZYTENSOR_OPTIM_HPP
