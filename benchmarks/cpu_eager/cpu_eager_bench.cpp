// cpu_eager_bench.cpp — matmul 1024^3 f32 through the cpu_eager plugin (compiled once, executed
// repeatedly) vs a direct cblas_sgemm call in the same process; goal: plugin within 10%. Each
// benchmark reports its roofline (roofline.h).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lazytensor/lt_plugin.h"
#include "roofline.h"

namespace {

constexpr int64_t kN = 1024;
constexpr double kGflop = 2.0 * kN * kN * kN * 1e-9;

// Loads the plugin, compiles [N,N]x[N,N] once and owns the buffers; aborts the benchmark
// program (never the plugin) on any error, since nothing can be measured then.
struct PluginMatmul {
  const lt_plugin_api* api = nullptr;
  lt_plugin_context* ctx = nullptr;
  lt_plugin_executable* ex = nullptr;
  lt_plugin_buffer *a = nullptr, *b = nullptr, *c = nullptr;

  static void die(const lt_plugin_api* api, lt_plugin_error* e, const char* what) {
    if (!e) return;
    std::fprintf(stderr, "cpu_eager_bench: %s: %s\n", what, api->error_message(e));
    std::exit(1);
  }
  lt_plugin_buffer* make(const std::vector<float>& v) {
    lt_plugin_buffer_args a{};
    a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
    a.context = ctx;
    a.nbytes = v.size() * sizeof(float);
    die(api, api->buffer_alloc(&a), "buffer_alloc");
    a.src = v.data();
    die(api, api->buffer_upload(&a), "buffer_upload");
    return a.buffer;
  }
  PluginMatmul(const std::vector<float>& av, const std::vector<float>& bv) {
    void* h = dlopen(LT_CPU_EAGER_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "cpu_eager_bench: %s\n", dlerror());
      std::exit(1);
    }
    api = reinterpret_cast<lt_plugin_get_api_fn>(dlsym(h, LT_PLUGIN_ENTRY_SYMBOL))();
    lt_plugin_create_args ca{};
    ca.struct_size = LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    ca.core_abi_major = LT_PLUGIN_ABI_MAJOR;
    ca.core_abi_minor = LT_PLUGIN_ABI_MINOR;
    die(api, api->create(&ca), "create");
    ctx = ca.context;
    static const int64_t shape[2] = {kN, kN};
    static const int32_t ops[2] = {0, 1};
    lt_graph_node nodes[3] = {{"input", LT_DTYPE_F32, 2, shape, 0, nullptr, 0, nullptr},
                              {"input", LT_DTYPE_F32, 2, shape, 0, nullptr, 0, nullptr},
                              {"matmul", LT_DTYPE_F32, 2, shape, 2, ops, 0, nullptr}};
    const int32_t ins[2] = {0, 1}, outs[1] = {2};
    lt_graph g{LT_GRAPH_STRUCT_SIZE, 3, nodes, 2, ins, 1, outs, 0};
    lt_plugin_compile_args co{};
    co.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
    co.context = ctx;
    co.graph = &g;
    die(api, api->compile(&co), "compile");
    ex = co.executable;
    a = make(av);
    b = make(bv);
    c = make(std::vector<float>(kN * kN));
  }
  void run() {
    lt_plugin_buffer* in[2] = {a, b};
    lt_plugin_execute_args e{};
    e.struct_size = LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE;
    e.context = ctx;
    e.executable = ex;
    e.num_inputs = 2;
    e.inputs = in;
    e.num_outputs = 1;
    e.outputs = &c;
    die(api, api->execute(&e), "execute");
  }
};

struct Data {
  std::vector<float> a, b, c;
  Data() : a(kN * kN), b(kN * kN), c(kN * kN) {
    for (int64_t i = 0; i < kN * kN; ++i) {
      a[i] = static_cast<float>((i * 7) % 13) * 0.1f - 0.6f;
      b[i] = static_cast<float>((i * 5) % 11) * 0.1f - 0.5f;
    }
  }
  void blas() {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a.data(), kN, b.data(),
                kN, 0.0f, c.data(), kN);
  }
};

Data& data() {
  static Data d;
  return d;
}
PluginMatmul& plugin() {
  static PluginMatmul p(data().a, data().b);
  return p;
}

void BM_DirectSgemm(benchmark::State& state) {
  data().blas();  // warm-up: thread pool start
  for (auto _ : state) {
    data().blas();
    benchmark::ClobberMemory();
  }
  lt::bench::report(state, kGflop * 1e9, 12.0 * kN * kN);
}

void BM_PluginMatmul(benchmark::State& state) {
  plugin().run();
  for (auto _ : state) {
    plugin().run();
    benchmark::ClobberMemory();
  }
  lt::bench::report(state, kGflop * 1e9, 12.0 * kN * kN);
}

// Alternates both in one loop so machine noise hits them alike; reports the ratio.
void BM_PluginVsSgemm(benchmark::State& state) {
  using clock = std::chrono::steady_clock;
  double t_plugin = 0, t_blas = 0;
  plugin().run();
  data().blas();
  for (auto _ : state) {
    auto t0 = clock::now();
    plugin().run();
    auto t1 = clock::now();
    data().blas();
    auto t2 = clock::now();
    t_plugin += std::chrono::duration<double>(t1 - t0).count();
    t_blas += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["plugin_GFLOPs"] = kGflop * n / t_plugin;
  state.counters["sgemm_GFLOPs"] = kGflop * n / t_blas;
  state.counters["plugin_over_sgemm_time"] = t_plugin / t_blas;
  lt::bench::report(state, 2 * kGflop * 1e9, 24.0 * kN * kN);  // one plugin run + one sgemm
}

// Per-node overhead: a 100,000-node chain of tiny adds, compiled and executed separately.
struct Chain {
  static constexpr int kNodes = 100000;
  std::vector<lt_graph_node> nodes;
  std::vector<int32_t> ops;
  int32_t ins[2] = {0, 1}, outs[1] = {0};
  lt_graph g{};
  Chain() : ops(2 * kNodes) {
    static const int64_t shape[1] = {16};
    nodes.push_back({"input", LT_DTYPE_F32, 1, shape, 0, nullptr, 0, nullptr});
    nodes.push_back({"input", LT_DTYPE_F32, 1, shape, 0, nullptr, 0, nullptr});
    int32_t prev = 0;
    for (int i = 0; i < kNodes; ++i) {
      ops[2 * i] = prev;
      ops[2 * i + 1] = 1;
      nodes.push_back({"add", LT_DTYPE_F32, 1, shape, 2, &ops[2 * i], 0, nullptr});
      prev = static_cast<int32_t>(nodes.size() - 1);
    }
    outs[0] = prev;
    g = lt_graph{LT_GRAPH_STRUCT_SIZE, nodes.size(), nodes.data(), 2, ins, 1, outs, 0};
  }
  lt_plugin_executable* compile() {
    PluginMatmul& p = plugin();
    lt_plugin_compile_args co{};
    co.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
    co.context = p.ctx;
    co.graph = &g;
    PluginMatmul::die(p.api, p.api->compile(&co), "compile chain");
    return co.executable;
  }
};

void BM_ChainCompile(benchmark::State& state) {
  Chain chain;
  PluginMatmul& p = plugin();
  for (auto _ : state) p.api->executable_destroy(p.ctx, chain.compile());
  state.counters["ns_per_node"] =
      benchmark::Counter(Chain::kNodes * 1e-9, benchmark::Counter::kIsIterationInvariantRate |
                                                   benchmark::Counter::kInvert);
}

void BM_ChainExecute(benchmark::State& state) {
  Chain chain;
  PluginMatmul& p = plugin();
  lt_plugin_executable* ex = chain.compile();
  lt_plugin_buffer* x = p.make(std::vector<float>(16, 1.0f));
  lt_plugin_buffer* one = p.make(std::vector<float>(16, 1.0f));
  lt_plugin_buffer* out = p.make(std::vector<float>(16));
  lt_plugin_buffer* in[2] = {x, one};
  lt_plugin_execute_args e{};
  e.struct_size = LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE;
  e.context = p.ctx;
  e.executable = ex;
  e.num_inputs = 2;
  e.inputs = in;
  e.num_outputs = 1;
  e.outputs = &out;
  for (auto _ : state) PluginMatmul::die(p.api, p.api->execute(&e), "execute chain");
  state.counters["ns_per_node"] =
      benchmark::Counter(Chain::kNodes * 1e-9, benchmark::Counter::kIsIterationInvariantRate |
                                                   benchmark::Counter::kInvert);
  // 16 adds per node on cache-resident data: the roofline shows what per-node overhead costs.
  lt::bench::report(state, 16.0 * Chain::kNodes, 3.0 * 16 * 4);
  p.api->executable_destroy(p.ctx, ex);
}

BENCHMARK(BM_DirectSgemm)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_PluginMatmul)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_PluginVsSgemm)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(4.0);
BENCHMARK(BM_ChainCompile)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ChainExecute)->Unit(benchmark::kMillisecond)->UseRealTime();

bool cpu_has(const char* feature) {
  __builtin_cpu_init();
  if (!std::strcmp(feature, "avx512f")) return __builtin_cpu_supports("avx512f");
  if (!std::strcmp(feature, "avx512bw")) return __builtin_cpu_supports("avx512bw");
  if (!std::strcmp(feature, "avx512vl")) return __builtin_cpu_supports("avx512vl");
  if (!std::strcmp(feature, "avx2")) return __builtin_cpu_supports("avx2");
  if (!std::strcmp(feature, "fma")) return __builtin_cpu_supports("fma");
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS picks its kernels when the library loads, before main(): choose the best core
  // type from CPU features and re-exec once so both sides of the comparison use it.
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const char* core = nullptr;
    if (cpu_has("avx512f") && cpu_has("avx512bw") && cpu_has("avx512vl"))
      core = "SkylakeX";
    else if (cpu_has("avx2") && cpu_has("fma"))
      core = "Haswell";
    if (core) {
      setenv("OPENBLAS_CORETYPE", core, 1);
      execv("/proc/self/exe", argv);
      std::perror("cpu_eager_bench: execv /proc/self/exe");  // fall through: measure anyway
    }
  }
  std::fprintf(stderr, "cpu_eager_bench: OPENBLAS_CORETYPE=%s, OpenBLAS core %s, %d threads\n",
               std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)",
               openblas_get_corename(), openblas_get_num_threads());
  auto threads = lt::bench::apply_thread_budget();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
