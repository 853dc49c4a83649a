// models/resnet.hpp — a small residual network for small images (He et al. 2016, the CIFAR
// layout scaled down): a 3x3 stem (optionally max-pooled 2x2), stages of basic blocks (two 3x3
// convolutions with group normalisation and an identity or 1x1-projection shortcut), the first
// block of each later stage halving the resolution and doubling the width, global average pooling
// and a linear classifier. Group norm instead of batch norm: no running statistics, so training and
// evaluation compute the same function and a checkpoint is just the parameters.
#ifndef LAZYTENSOR_MODELS_RESNET_HPP
#define LAZYTENSOR_MODELS_RESNET_HPP

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"

namespace lt::models {

struct ResNetConfig {
  int64_t in_channels = 1;
  int64_t classes = 10;
  int64_t width = 16;                 // channels of the first stage
  std::vector<int64_t> blocks{1, 2};  // basic blocks per stage
  int64_t groups = 4;                 // group norm groups (each stage's width must divide)
  int64_t stem_stride = 1;            // 2: the stem halves the resolution
  bool stem_pool = false;  // a 2x2 max pool after the stem: full-resolution features, then half
  uint64_t seed = 7;
};

// lt-run's ResNet for single-channel side x side images (the benchmarks train the same). Up to
// 8x8 (the digits): ResNetConfig's defaults, a block at full resolution and two at half with
// twice the width. Larger (Fashion-MNIST's 28x28): a full-resolution stem, a 2x2 max pool, then
// one block per stage at 14x14, 7x7 and 4x4 (a stride-2 stem instead flattened out near 90.5%).
inline ResNetConfig image_resnet_config(int64_t side, int64_t width = 16, uint64_t seed = 7) {
  ResNetConfig c;
  c.width = width;
  c.seed = seed;
  if (side > 8) {
    c.blocks = {1, 1, 1};
    c.stem_pool = true;
  }
  return c;
}

// relu(norm(conv(relu(norm(conv(x))))) + shortcut(x)); the shortcut projects (1x1 conv with
// the block's stride, then norm) when the shape changes.
class BasicBlock : public nn::Module {
 public:
  BasicBlock(const Device& d, int64_t in, int64_t out, int64_t stride, int64_t groups,
             uint64_t seed)
      : conv1_(d, in, out, 3, seed, stride, 1, 1, false),
        norm1_(d, groups, out),
        conv2_(d, out, out, 3, seed + 1, 1, 1, 1, false),
        norm2_(d, groups, out) {
    register_module("conv1", conv1_);
    register_module("norm1", norm1_);
    register_module("conv2", conv2_);
    register_module("norm2", norm2_);
    if (stride != 1 || in != out) {
      proj_ = std::make_unique<nn::Conv2d>(d, in, out, 1, seed + 2, stride, 0, 1, false);
      proj_norm_ = std::make_unique<nn::GroupNorm>(d, groups, out);
      register_module("proj", *proj_);
      register_module("proj_norm", *proj_norm_);
    }
  }
  Tensor forward(const Tensor& x,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    Tensor h = norm1_(conv1_(x)).relu();
    h = norm2_(conv2_(h));
    return (h + (proj_ ? (*proj_norm_)((*proj_)(x)) : x)).relu();
  }
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return forward(x, loc);
  }

 private:
  nn::Conv2d conv1_;
  nn::GroupNorm norm1_;
  nn::Conv2d conv2_;
  nn::GroupNorm norm2_;
  std::unique_ptr<nn::Conv2d> proj_;
  std::unique_ptr<nn::GroupNorm> proj_norm_;
};

// NCHW images [B, in_channels, H, W] -> logits [B, classes].
class ResNet : public nn::Module {
 public:
  ResNet(const Device& d, const ResNetConfig& c)
      : stem_(d, c.in_channels, c.width, 3, c.seed, c.stem_stride, 1, 1, false),
        stem_norm_(d, c.groups, c.width),
        stem_pool_(c.stem_pool),
        pool_(2),
        fc_(d, c.width << (c.blocks.empty() ? 0 : c.blocks.size() - 1), c.classes, c.seed + 1) {
    register_module("stem", stem_);
    register_module("stem_norm", stem_norm_);
    int64_t width = c.width;
    uint64_t seed = c.seed + 100;
    for (size_t s = 0; s < c.blocks.size(); ++s) {
      for (int64_t b = 0; b < c.blocks[s]; ++b) {
        const bool down = s > 0 && b == 0;
        const int64_t out = down ? width * 2 : width;
        blocks_.push_back(
            std::make_unique<BasicBlock>(d, width, out, down ? 2 : 1, c.groups, seed += 10));
        register_module("stage" + std::to_string(s + 1) + "." + std::to_string(b), *blocks_.back());
        width = out;
      }
    }
    register_module("fc", fc_);
  }
  Tensor forward(const Tensor& x,
                 std::source_location loc = std::source_location::current()) const {
    lt::detail::ApiFrame frame(loc);
    Tensor h = stem_norm_(stem_(x)).relu();
    if (stem_pool_) h = pool_(h);
    for (const auto& b : blocks_) h = (*b)(h);
    return fc_(h.mean({2, 3}));  // global average pooling
  }
  Tensor operator()(const Tensor& x,
                    std::source_location loc = std::source_location::current()) const {
    return forward(x, loc);
  }

 private:
  nn::Conv2d stem_;
  nn::GroupNorm stem_norm_;
  bool stem_pool_;
  nn::MaxPool2d pool_;
  std::vector<std::unique_ptr<BasicBlock>> blocks_;
  nn::Linear fc_;
};

}  // namespace lt::models

#endif  // LAZYTENSOR_MODELS_RESNET_HPP
