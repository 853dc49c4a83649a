// models/train_step.hpp — one training step, written once for lt-run, the tests and the
// benchmarks: backward from the loss, the gradients summed over the process group (data-parallel),
// unscaled (f16 loss scaling) and clipped, the optimizer's update, and lt_sync, so the whole step
// is one graph, compiled once and cached after. GptTraining is the GPT of gpt.hpp with its
// optimizer and batches; an MLP's step is train_step over nn::cross_entropy of models::Mlp.
#ifndef LAZYTENSOR_MODELS_TRAIN_STEP_HPP
#define LAZYTENSOR_MODELS_TRAIN_STEP_HPP

#include "lazytensor/amp.hpp"
#include "lazytensor/autograd.hpp"
#include "lazytensor/distributed.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/models/gpt.hpp"
#include "lazytensor/optim.hpp"
#include "lazytensor/text.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <type_traits>
#include <vector>

namespace lt::models {

// What a step does besides backward and the update (each off by default).
struct StepOptions {
  std::optional<double> clip;         // clip the gradients' global norm to this (positive)
  bool keep_grad_norm = false;        // return the norm clipping measured (one more graph output)
  amp::GradScaler* scaler = nullptr;  // f16 loss scaling (amp.hpp); not owned
  // Data-parallel (docs/distributed.md): the loss is multiplied by this process's share of the
  // global batch, so the gradients' sum over lt::dist's group, in buckets of bucket_bytes, is
  // the gradient of the global batch's mean; with reduce_loss the returned loss is that sum too.
  bool all_reduce = false;
  double share = 1;
  size_t bucket_bytes = dist::kDefaultBucketBytes;
  bool reduce_loss = false;
};

struct StepResult {
  Tensor loss;             // as the step computed it (times the share when data-parallel)
  Tensor grad_norm;        // before clipping, with clip and keep_grad_norm; else undefined
  size_t collectives = 0;  // gradient all-reduces traced (one per bucket)
};

// One step from `loss` (recorded on opt's parameters' device): backward, all-reduce, unscale,
// clip, update, then lt_sync of the device. The update's ops record the caller's line.
inline StepResult train_step(Tensor loss, optim::Optimizer& opt, const StepOptions& o = {},
                             std::source_location loc = std::source_location::current()) {
  const std::vector<Tensor*>& params = opt.parameters();
  size_t collectives = 0;
  if (o.all_reduce) {
    loss = loss * o.share;
    backward(o.scaler ? o.scaler->scale(loss) : loss);
    collectives = dist::all_reduce_gradients(params, LT_REDUCE_SUM, o.bucket_bytes);
    if (o.reduce_loss) {
      NoGradGuard no_grad;
      loss = loss.all_reduce(LT_REDUCE_SUM);
    }
  } else {
    backward(o.scaler ? o.scaler->scale(loss) : loss);
  }
  if (o.scaler) o.scaler->unscale(opt);
  Tensor norm = o.clip ? optim::clip_grad_norm(params, *o.clip) : Tensor();
  if (!o.keep_grad_norm) norm = Tensor();  // not an output of the step's graph
  if (o.scaler)
    o.scaler->step(opt, loc);
  else
    opt.step(loc);
  sync(params.front()->device());
  return {loss, norm, collectives};
}

// As above with the loss computed by `forward()` inside the step, so the forward pass's
// temporaries (the logits of cross_entropy(model(x), y)) are released before lt_sync and only
// what the step keeps becomes an output of its graph. (Called with a loss computed in the same
// expression instead, such temporaries live until that expression ends, through the sync.)
template <class F, class = std::enable_if_t<std::is_invocable_r_v<Tensor, F&>>>
StepResult train_step(F&& forward, optim::Optimizer& opt, const StepOptions& o = {},
                      std::source_location loc = std::source_location::current()) {
  return train_step(forward(), opt, o, loc);
}

// Makes a model's optimizer from its parameters.
using OptimizerFactory =
    std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor*> params)>;

// AdamW as GPT-2 and nanoGPT train: betas 0.9 and 0.95, decay on matrices only.
inline OptimizerFactory adamw(double lr, double weight_decay = 0.1) {
  return [=](std::vector<Tensor*> params) {
    return std::make_unique<optim::AdamW>(std::move(params), lr, weight_decay, 0.9, 0.95);
  };
}

// The GPT of gpt.hpp (materialised), its optimizer and its step on next-token batches.
class GptTraining {
 public:
  GptTraining(const Device& device, const GptConfig& config,
              const OptimizerFactory& make_optimizer = adamw(1e-3))
      : model_(device, config) {
    model_.materialize();
    opt_ = make_optimizer(model_.parameters());
  }

  Gpt& model() { return model_; }
  optim::Optimizer& optimizer() { return *opt_; }
  std::vector<Tensor*> parameters() { return model_.parameters(); }

  // One step on tokens x [B, T] and targets y [B * T], with the dropout masks of `step`.
  StepResult step(const Tensor& x, const Tensor& y, uint64_t step, const StepOptions& o = {},
                  std::source_location loc = std::source_location::current()) {
    model_.set_step(step);
    return train_step(model_.loss(x, y), *opt_, o, loc);
  }

  // One step on a batch of `batch` windows drawn from `tokens` by (seed, step) (text.hpp's
  // sample_batch); with a shard, this process's rows of that global batch and, when `o`
  // all-reduces, its share of it.
  StepResult step(const std::vector<int64_t>& tokens, int64_t batch, uint64_t seed, uint64_t step,
                  StepOptions o = {}, const data::Shard& shard = {},
                  std::source_location loc = std::source_location::current()) {
    model_.set_step(step);
    auto [x, y] = text::sample_batch(opt_->parameters().front()->device(), tokens, batch,
                                     model_.config().context, seed, step, shard);
    if (o.all_reduce)
      o.share = static_cast<double>(shard.count(batch)) / static_cast<double>(batch);
    return train_step(model_.loss(x, y), *opt_, o, loc);
  }

 private:
  Gpt model_;
  std::unique_ptr<optim::Optimizer> opt_;
};

}  // namespace lt::models

#endif  // LAZYTENSOR_MODELS_TRAIN_STEP_HPP
