// regression.cpp — docs/training.md, part 2: a module (nn::Sequential), a loss, backward, an
// optimiser, and the step boundary: one lt::sync per step makes forward + backward + update
// one graph, compiled once. Then save a checkpoint, load it into a fresh model, compare.
#include <lazytensor/autograd.hpp>
#include <lazytensor/checkpoint.hpp>
#include <lazytensor/nn.hpp>
#include <lazytensor/optim.hpp>

#include <cstdio>
#include <filesystem>

namespace nn = lt::nn;

// y = 3 x0 - 2 x1 + 1, learned by a small MLP.
void build(nn::Sequential& net, const lt::Device& dev) {
  net.emplace<nn::Linear>(dev, 2, 16, /*seed=*/1);
  net.emplace<nn::ReLU>();
  net.emplace<nn::Linear>(dev, 16, 1, /*seed=*/2);
}

int main() try {
  lt::Runtime rt = lt::Runtime::create();
  lt::Device dev = rt.default_device();
  nn::Sequential net;
  build(net, dev);
  net.materialize();  // initial values now, so step 1 compiles the same graph as step 2
  lt::optim::Adam opt(net.parameters(), 0.01);

  lt::Tensor x = lt::random_uniform(dev, {64, 2}, /*seed=*/7, -1, 1).materialize();
  lt::Tensor w = lt::Tensor::from<float>(dev, {3, -2}, {2, 1});
  lt::Tensor y = (lt::matmul(x, w) + 1.0).materialize();
  float loss_value = 0;
  for (int step = 1; step <= 300; ++step) {
    lt::Tensor loss = nn::mse_loss(net(x), y);
    loss.backward();  // gradients into every parameter
    opt.step();       // new parameter values (and zeroed gradients for the next step)
    lt::sync(dev);    // the step boundary: run forward, backward and update as one graph
    if (step % 100 == 0) {
      loss_value = loss.item<float>();  // already computed by the sync: no extra graph
      std::printf("step %3d  loss %.5f\n", step, loss_value);
    }
  }
  std::printf("compiles %.0f, cache hits %.0f\n", rt.metric("compiles"), rt.metric("cache_hits"));

  const std::string path =
      (std::filesystem::temp_directory_path() / "lt_regression.safetensors").string();
  lt::save_checkpoint(path, net, &opt);
  nn::Sequential restored;
  build(restored, dev);
  lt::optim::Adam restored_opt(restored.parameters(), 0.01);
  lt::load_checkpoint(path, restored, &restored_opt);
  std::filesystem::remove(path);
  const float a = nn::mse_loss(net(x), y).item<float>();
  const float b = nn::mse_loss(restored(x), y).item<float>();
  std::printf("loss of the trained model %.5f, of the loaded copy %.5f\n", a, b);
  return loss_value < 0.05f && a == b ? 0 : 1;
} catch (const lt::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
