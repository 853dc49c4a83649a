// models/cnn.hpp — the smallest convolutional classifier (lt-run's "cnn"): a 3x3 convolution
// with padding 1, relu, a 2x2 max pool and a linear classifier over the flattened features, for
// [B, C, S, S] images with even S. The conv is seeded `seed`, the classifier `seed + 1`.
#ifndef LAZYTENSOR_MODELS_CNN_HPP
#define LAZYTENSOR_MODELS_CNN_HPP

#include <cstdint>
#include <source_location>
#include <string>

#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"

namespace lt::models {

struct SmallCnnConfig {
  int64_t side = 8;  // images are side x side (even)
  int64_t in_channels = 1;
  int64_t channels = 8;  // of the convolution
  int64_t classes = 10;
  uint64_t seed = 1;
};

class SmallCnn : public nn::Module {
 public:
  SmallCnn(const Device& d, const SmallCnnConfig& c)
      : flat_(c.channels * (c.side / 2) * (c.side / 2)),
        conv_(d, c.in_channels, c.channels, 3, c.seed, 1, 1),
        pool_(2),
        fc_(d, flat_, c.classes, c.seed + 1) {
    if (c.side < 2 || c.side % 2) {
      throw Error(
          LT_STATUS_INVALID_ARGUMENT,
          "SmallCnn: the image side must be even and at least 2, got " + std::to_string(c.side));
    }
    register_module("conv", conv_);
    register_module("fc", fc_);
  }
  Tensor forward(const Tensor& x,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    return fc_(pool_(conv_(x).relu()).reshape({x.dim(0), flat_}));
  }
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return forward(x, loc);
  }

 private:
  int64_t flat_;
  nn::Conv2d conv_;
  nn::MaxPool2d pool_;
  nn::Linear fc_;
};

}  // namespace lt::models

#endif  // LAZYTENSOR_MODELS_CNN_HPP
