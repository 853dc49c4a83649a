// OnnxImportBenchmark.cpp — is an imported model as fast as the same model written in the C++
// API? An MLP 784-512-512-10 (batch 128) and a residual conv net (two 3x3 convolutions with a
// skip connection, global average pool, a linear layer; batch 8, 16 channels, 32x32), built
// once as ONNX files (tests/onnx/onnx_writer.hpp) and once with lt:: calls, same weights; one
// step = trace + materialise the output. The ratios imported / C++ API (same run, best step
// time of each over its repetitions) are printed at the end on stderr.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_runtime.h"
#include "lazytensor/onnx.hpp"
#include "onnx_writer.hpp"

namespace {

using namespace lt::onnx_test;

const char* kBackends[] = {"cpu_eager", "cpu_jit"};

lt::Runtime& runtime() {
  return lt::bench::runtime(lt::bench::runtime_options("silent"));
}

std::vector<float> random_vec(size_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

std::string model_dir() {
  static std::string d = [] {
    auto p =
        std::filesystem::temp_directory_path() / ("lt_bench_onnx_" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return d;
}

// ---- MLP 784-512-512-10
struct Mlp {
  std::vector<float> w1 = random_vec(784 * 512, 0.05f, 1), b1 = random_vec(512, 0.1f, 2),
                     w2 = random_vec(512 * 512, 0.05f, 3), b2 = random_vec(512, 0.1f, 4),
                     w3 = random_vec(512 * 10, 0.05f, 5), b3 = random_vec(10, 0.1f, 6);
  std::string path() const {
    Graph g;
    g.nodes = {node("Gemm", {"x", "W1", "B1"}, {"h1"}, "fc1"), node("Relu", {"h1"}, {"a1"}),
               node("Gemm", {"a1", "W2", "B2"}, {"h2"}, "fc2"), node("Relu", {"h2"}, {"a2"}),
               node("Gemm", {"a2", "W3", "B3"}, {"y"}, "fc3")};
    g.initializers = {tensor_f32("W1", {784, 512}, w1), tensor_f32("B1", {512}, b1),
                      tensor_f32("W2", {512, 512}, w2), tensor_f32("B2", {512}, b2),
                      tensor_f32("W3", {512, 10}, w3),  tensor_f32("B3", {10}, b3)};
    g.inputs = {value_info("x", 1, {"N", 784})};
    g.outputs = {value_info("y", 1, {"N", 10})};
    std::string p = model_dir() + "/mlp.onnx";
    write_file(p, g.encode());
    return p;
  }
};

// ---- residual conv net
struct ResNet {
  std::vector<float> w1 = random_vec(16 * 16 * 9, 0.08f, 11), b1 = random_vec(16, 0.1f, 12),
                     w2 = random_vec(16 * 16 * 9, 0.08f, 13), b2 = random_vec(16, 0.1f, 14),
                     wf = random_vec(16 * 10, 0.2f, 15), bf = random_vec(10, 0.1f, 16);
  std::string path() const {
    Graph g;
    auto conv = [](const char* x, const char* w, const char* b, const char* y) {
      return node("Conv", {x, w, b}, {y}, y,
                  {Attr::Ints("kernel_shape", {3, 3}), Attr::Ints("pads", {1, 1, 1, 1})});
    };
    g.nodes = {conv("x", "W1", "B1", "c1"),   node("Relu", {"c1"}, {"r1"}),
               conv("r1", "W2", "B2", "c2"),  node("Add", {"c2", "x"}, {"s"}),
               node("Relu", {"s"}, {"r2"}),   node("GlobalAveragePool", {"r2"}, {"p"}),
               node("Flatten", {"p"}, {"f"}), node("Gemm", {"f", "WF", "BF"}, {"y"}, "fc")};
    g.initializers = {tensor_f32("W1", {16, 16, 3, 3}, w1), tensor_f32("B1", {16}, b1),
                      tensor_f32("W2", {16, 16, 3, 3}, w2), tensor_f32("B2", {16}, b2),
                      tensor_f32("WF", {16, 10}, wf),       tensor_f32("BF", {10}, bf)};
    g.inputs = {value_info("x", 1, {"N", 16, 32, 32})};
    g.outputs = {value_info("y", 1, {"N", 10})};
    std::string p = model_dir() + "/resnet.onnx";
    write_file(p, g.encode());
    return p;
  }
};

std::map<std::string, double> g_best_ms;  // "model/backend/way" -> best ms over repetitions

void record(benchmark::State& state, const std::string& key, double total_ms) {
  double ms = total_ms / static_cast<double>(state.iterations());
  state.counters["ms_per_step"] = ms;
  auto it = g_best_ms.find(key);
  if (it == g_best_ms.end() || ms < it->second) g_best_ms[key] = ms;  // best repetition
}

template <class Model>
void run_bench(benchmark::State& state, const char* name, bool imported, lt::IntList xshape) {
  const char* backend = kBackends[state.range(0)];
  lt::Device dev = runtime().find_device(backend);
  Model m;
  auto up = [&](const std::vector<float>& v, lt::IntList s) {
    lt::Tensor t = lt::Tensor::from<float>(dev, v, s);
    t.materialize();
    return t;
  };
  int64_t n = 1;
  for (int64_t d : xshape) n *= d;
  lt::Tensor x = up(random_vec(static_cast<size_t>(n), 1.0f, 99), xshape);
  std::function<lt::Tensor()> step;
  lt::onnx::Model model;
  std::vector<lt::Tensor> w;
  if (imported) {
    model = lt::onnx::Model::load(dev, m.path());
    step = [&] { return model.run({{"x", x}})[0]; };
  } else if constexpr (std::is_same_v<Model, Mlp>) {
    w = {up(m.w1, {784, 512}), up(m.b1, {512}),     up(m.w2, {512, 512}),
         up(m.b2, {512}),      up(m.w3, {512, 10}), up(m.b3, {10})};
    step = [&] {
      lt::Tensor h = lt::relu(x.matmul(w[0]) + w[1]);
      h = lt::relu(h.matmul(w[2]) + w[3]);
      return h.matmul(w[4]) + w[5];
    };
  } else {
    w = {up(m.w1, {16, 16, 3, 3}), up(m.b1, {16}),     up(m.w2, {16, 16, 3, 3}),
         up(m.b2, {16}),           up(m.wf, {16, 10}), up(m.bf, {10})};
    step = [&] {
      lt::Tensor c1 = lt::relu(lt::conv2d(x, w[0], w[1], {1, 1}, {1, 1}));
      lt::Tensor c2 = lt::conv2d(c1, w[2], w[3], {1, 1}, {1, 1});
      lt::Tensor r = lt::relu(c2 + x);
      return r.mean({2, 3}, false).matmul(w[4]) + w[5];
    };
  }
  step().materialize();  // compile outside the timed loop
  double total = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    lt::Tensor y = step();
    y.materialize();
    total +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  record(state, std::string(name) + "/" + backend + "/" + (imported ? "imported" : "cpp_api"),
         total);
  state.SetLabel(backend);
}

void BM_MlpCppApi(benchmark::State& s) {
  run_bench<Mlp>(s, "mlp", false, {128, 784});
}
void BM_MlpImported(benchmark::State& s) {
  run_bench<Mlp>(s, "mlp", true, {128, 784});
}
void BM_ResNetCppApi(benchmark::State& s) {
  run_bench<ResNet>(s, "resnet", false, {8, 16, 32, 32});
}
void BM_ResNetImported(benchmark::State& s) {
  run_bench<ResNet>(s, "resnet", true, {8, 16, 32, 32});
}

BENCHMARK(BM_MlpCppApi)->DenseRange(0, 1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpImported)->DenseRange(0, 1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ResNetCppApi)->DenseRange(0, 1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ResNetImported)->DenseRange(0, 1)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (const char* model : {"mlp", "resnet"}) {
    for (const char* b : kBackends) {
      std::string k = std::string(model) + "/" + b;
      auto i = g_best_ms.find(k + "/imported"), c = g_best_ms.find(k + "/cpp_api");
      if (i == g_best_ms.end() || c == g_best_ms.end()) continue;
      std::fprintf(stderr, "%s: imported %.3f ms, C++ API %.3f ms, ratio %.3f\n", k.c_str(),
                   i->second, c->second, i->second / c->second);
    }
  }
  std::filesystem::remove_all(model_dir());
  return 0;
}
