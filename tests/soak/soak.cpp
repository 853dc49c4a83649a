// soak.cpp — lt_soak DEVICE STEPS DIGITS: trains the digits MLP for STEPS steps (one graph per
// step, an evaluation graph every 500) and checks that resident memory stays flat: the growth
// between step STEPS/10 (everything compiled and cached) and the end must stay under 16 MiB,
// nothing compiles after that step, and the caches stay within their configured bounds
// (compile cache entries <= capacity, allocator bytes cached bounded). Prints the figures; exit
// status 1 names what grew.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "lazytensor/autograd.hpp"
#include "lazytensor/data.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/optim.hpp"

namespace {

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

struct Mlp : lt::nn::Module {
  Mlp(const lt::Device& d) : fc1(d, 64, 128, 1), fc2(d, 128, 10, 2) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  lt::Tensor operator()(const lt::Tensor& x) { return fc2(fc1(x).relu()); }
  lt::nn::Linear fc1, fc2;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: lt_soak DEVICE STEPS DIGITS_CSV_GZ\n");
    return 2;
  }
  const std::string device = argv[1];
  const long steps = std::atol(argv[2]);
  try {
    lt::RuntimeOptions o;
    o.fallback = "error";
    lt::Runtime rt = lt::Runtime::create(o);
    lt::Device dev = rt.find_device(device);
    lt::data::Dataset all = lt::data::load_digits(argv[3]);
    auto [train, test] = lt::data::train_test_split(all, 0.2, 42);
    auto norm = lt::data::Standardizer::fit(train);
    norm.apply(train);
    norm.apply(test);
    Mlp model(dev);
    model.materialize();
    lt::optim::Adam opt(model.parameters(), 1e-3);
    lt::data::Batcher batches(train, 32, 42);
    auto [tx, ty] = lt::data::to_tensors(dev, test);
    double rss_warm = 0, compiles_warm = 0, loss = 0;
    long correct = 0;
    for (long s = 0; s < steps; ++s) {
      const int64_t b = s % batches.batches();
      if (b == 0) batches.shuffle(s / batches.batches());
      auto [x, y] = batches.batch_one_hot(dev, b);
      lt::Tensor l = lt::nn::cross_entropy(model(x), y);
      lt::backward(l);
      opt.step();
      lt::sync(dev);
      if (s % 500 == 499) {
        loss = l.item<float>();
        lt::NoGradGuard no_grad;
        correct = static_cast<long>(lt::nn::correct_count(model(tx), ty).item<int64_t>());
      }
      if (s == steps / 10) rss_warm = rss_mib(), compiles_warm = rt.metric("compiles");
    }
    const double rss_end = rss_mib(), growth = rss_end - rss_warm;
    const double entries = rt.metric("cache_entries"), capacity = rt.metric("cache_capacity");
    const double cached = rt.metric("allocator.bytes_cached") / (1024.0 * 1024.0);
    std::printf(
        "lt_soak %s: %ld steps, last loss %.4f, test %ld/%lld correct | RSS %.1f MiB at step "
        "%ld, %.1f MiB at the end (growth %+.2f MiB) | compile cache %.0f/%.0f entries, "
        "compiles %.0f | allocator %.2f MiB cached\n",
        device.c_str(), steps, loss, correct, static_cast<long long>(test.rows()), rss_warm,
        steps / 10, rss_end, growth, entries, capacity, rt.metric("compiles"), cached);
    int bad = 0;
    if (growth > 16.0) std::printf("FAIL: resident memory grew %.2f MiB\n", growth), bad = 1;
    if (entries > capacity) std::printf("FAIL: compile cache over capacity\n"), bad = 1;
    if (rt.metric("compiles") != compiles_warm)
      std::printf("FAIL: %.0f compiles after step %ld\n", rt.metric("compiles") - compiles_warm,
                  steps / 10),
          bad = 1;
    if (cached > 64) std::printf("FAIL: allocator holds %.1f MiB\n", cached), bad = 1;
    if (correct < test.rows() * 9 / 10) std::printf("FAIL: did not learn\n"), bad = 1;
    return bad;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lt_soak: %s\n", e.what());
    return 1;
  }
}
