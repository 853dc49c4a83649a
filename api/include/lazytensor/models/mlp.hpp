// models/mlp.hpp — a multi-layer perceptron classifier: Linear layers of the given widths with
// ReLU between them and logits out (layer i seeded seed + i, registered as "l<i>"); trained with
// train_step.hpp over nn::cross_entropy.
#ifndef LAZYTENSOR_MODELS_MLP_HPP
#define LAZYTENSOR_MODELS_MLP_HPP

#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace lt::models {

class Mlp : public nn::Module {
 public:
  // widths: input features, each hidden width, output classes (at least two entries).
  Mlp(const Device& device, const std::vector<int64_t>& widths, uint64_t seed) {
    if (widths.size() < 2) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "Mlp: needs an input and an output width, got " + std::to_string(widths.size()));
    }
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      layers_.emplace_back(device, widths[i], widths[i + 1], seed + i);
      register_module("l" + std::to_string(i), layers_.back());
    }
  }
  Tensor operator()(Tensor x) {
    for (size_t i = 0; i + 1 < layers_.size(); ++i) x = layers_[i](x).relu();
    return layers_.back()(x);
  }

 private:
  std::deque<nn::Linear> layers_;  // stable addresses: the module registry holds them
};

}  // namespace lt::models

#endif  // LAZYTENSOR_MODELS_MLP_HPP
