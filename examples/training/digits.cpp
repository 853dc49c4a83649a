// digits.cpp — docs/training.md, part 3: a data loader (lt::data), mixed precision
// (lt::amp), an evaluation pass without gradients, the metrics a run should be read by, and a
// last batch of another size running as a dynamic-shape step rather than a recompile.
// Usage: digits PATH/TO/digits.csv.gz [f32|bf16|f16]
#include <lazytensor/amp.hpp>
#include <lazytensor/autograd.hpp>
#include <lazytensor/data.hpp>
#include <lazytensor/nn.hpp>
#include <lazytensor/optim.hpp>

#include <cstdio>
#include <optional>
#include <string>

namespace nn = lt::nn;

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s digits.csv.gz [f32|bf16|f16]\n", argv[0]);
    return 2;
  }
  lt::Runtime rt = lt::Runtime::create();
  lt::Device dev = rt.default_device();

  lt::data::Dataset all = lt::data::load_digits(argv[1]);  // 1,797 8x8 images, 10 classes
  auto [train, test] = lt::data::train_test_split(all, 0.2, /*seed=*/1);
  auto norm = lt::data::Standardizer::fit(train);
  norm.apply(train);
  norm.apply(test);
  lt::data::Batcher batches(train, /*batch=*/32, /*seed=*/1);
  batches.keep_last_partial(true);  // the last, smaller batch: a dynamic dimension

  nn::Sequential net;
  net.emplace<nn::Linear>(dev, 64, 128, 1);
  net.emplace<nn::ReLU>();
  net.emplace<nn::Linear>(dev, 128, 10, 2);
  net.materialize();
  lt::optim::Adam opt(net.parameters(), 3e-3);

  // Mixed precision: matmuls in bf16/f16 with f32 accumulation and f32 master weights; f16
  // also scales the loss so small gradients do not flush to zero.
  const lt::DType precision = lt::amp::parse_precision(argc > 2 ? argv[2] : "f32");
  lt::amp::Autocast autocast(precision);
  std::optional<lt::amp::GradScaler> scaler;
  if (precision == lt::f16) scaler.emplace(dev);

  rt.reset_metrics();
  for (int64_t epoch = 1; epoch <= 10; ++epoch) {
    batches.shuffle(epoch);
    double sum = 0;
    for (int64_t b = 0; b < batches.batches(); ++b) {
      auto [x, y] = batches.batch_one_hot(dev, b);
      lt::Tensor loss = nn::cross_entropy(net(x), y);
      (scaler ? scaler->scale(loss) : loss).backward();
      if (scaler)
        scaler->step(opt);
      else
        opt.step();
      lt::sync(dev);
      sum += loss.item<float>();
    }
    if (epoch % 5 == 0)
      std::printf("epoch %2lld  loss %.4f\n", (long long)epoch, sum / batches.batches());
  }
  int64_t correct = 0;
  {
    lt::NoGradGuard no_grad;  // evaluation records no history
    auto [tx, ty] = lt::data::to_tensors(dev, test);
    correct = nn::correct_count(net(tx), ty).item<int64_t>();
  }
  const double acc = 100.0 * static_cast<double>(correct) / static_cast<double>(test.rows());
  std::printf("test accuracy %.2f%%\n", acc);
  // The numbers to read after a run: few compiles (the step, the dynamic last batch, the
  // evaluation), every other step a cache hit, no fallback to the reference backend.
  std::printf("compiles %.0f, cache hits %.0f, fallback nodes %.0f, compile %.0f ms, run %.0f ms\n",
              rt.metric("compiles"), rt.metric("cache_hits"), rt.metric("fallback_nodes"),
              rt.metric("compile_ms"), rt.metric("execute_ms"));
  return acc > 95.0 && rt.metric("compiles") <= 6 ? 0 : 1;
} catch (const lt::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
