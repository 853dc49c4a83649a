// BackgroundCompileTest.cpp — config background_compile: while a backend compiles a graph on a
// background thread (the slow_compile test plugin takes 400 ms), its executions run on cpu_eager
// with the same values; later executions switch to the compiled plan; the metrics count both;
// a compile that fails surfaces under the fallback policy "error" and is absorbed otherwise; a
// runtime destroyed mid-compile waits for it.
#include <gtest/gtest.h>

#include <lazytensor/lt.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "test_support.hpp"

namespace {

std::string take(lt_error* e) {
  std::string m = e ? lt_error_message(e) : "";
  lt_error_destroy(e);
  return m;
}

// A runtime over one hostile plugin folder with background_compile on (from a config file).
struct BgRuntime {
  lt_runtime* rt = nullptr;
  lt_device* dev = nullptr;
  std::string config;
  BgRuntime(const std::string& kase, const char* policy, bool background = true) {
    config = (std::filesystem::temp_directory_path() /
              ("lt_bg_" + kase + "_" + std::to_string(::getpid()) + ".toml"))
                 .string();
    std::ofstream(config) << "background_compile = " << (background ? "true" : "false") << "\n";
    std::string path = std::string(LT_HOSTILE_PLUGIN_DIR) + "/" + kase;
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.plugin_path = path.c_str();
    o.config_path = config.c_str();
    o.fallback = policy;
    o.log_level = "off";
    lt_error* e = lt_runtime_create(&o, &rt);
    EXPECT_EQ(e, nullptr) << take(e);
    e = lt_runtime_find_device(rt, kase.c_str(), &dev);
    EXPECT_EQ(e, nullptr) << take(e);
  }
  ~BgRuntime() {
    lt_runtime_destroy(rt);
    std::filesystem::remove(config);
  }
  double metric(const char* name) { return lt::test::metric_or_zero(rt, name); }
};

// neg(x) + x*x for x = [s, s+1, s+2, s+3] on dev: "" and the values checked, or the error.
std::string step(lt_device* dev, float s) {
  std::vector<float> xv = {s, s + 1, s + 2, s + 3}, out(4);
  int64_t shape[] = {4};
  lt_tensor *x = nullptr, *n = nullptr, *sq = nullptr, *y = nullptr;
  std::string err = take(lt_tensor_from_host(dev, LT_DTYPE_F32, shape, 1, xv.data(), 16, &x));
  if (err.empty()) err = take(lt_neg(x, &n));
  if (err.empty()) err = take(lt_mul(x, x, &sq));
  if (err.empty()) err = take(lt_add(n, sq, &y));
  if (err.empty()) err = take(lt_tensor_to_host(y, out.data(), 16));
  if (err.empty())
    for (int k = 0; k < 4; ++k) EXPECT_FLOAT_EQ(out[k], xv[k] * xv[k] - xv[k]) << k;
  for (lt_tensor* t : {x, n, sq, y}) lt_tensor_free(t);
  return err;
}

TEST(BackgroundCompile, RunsOnCpuEagerUntilTheCompileIsReadyThenSwitches) {
  BgRuntime r("slow_compile", "error");
  ASSERT_NE(r.dev, nullptr);
  ASSERT_EQ(step(r.dev, 1), "");
  // The compile takes 400 ms: the first execution ran on cpu_eager, without waiting for it.
  EXPECT_EQ(r.metric("background_compile.started"), 1);
  EXPECT_EQ(r.metric("background_compile.eager_steps"), 1);
  EXPECT_EQ(r.metric("background_compile.compiled_steps"), 0);
  int steps = 1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (r.metric("background_compile.compiled_steps") < 3 &&
         std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(step(r.dev, static_cast<float>(steps)), "");
    ++steps;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(r.metric("background_compile.compiled_steps"), 3) << "never switched";
  EXPECT_EQ(
      r.metric("background_compile.eager_steps") + r.metric("background_compile.compiled_steps"),
      steps);
  EXPECT_EQ(r.metric("background_compile.started"), 1);  // one compile for every step
  EXPECT_EQ(r.metric("compiles"), 2);                    // the stand-in and the real one
  EXPECT_EQ(r.metric("fallback_nodes"), 0);              // the compiled plan runs it all
}

TEST(BackgroundCompile, OffByDefaultTheFirstExecutionWaits) {
  BgRuntime r("slow_compile", "error", /*background=*/false);
  ASSERT_NE(r.dev, nullptr);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(step(r.dev, 1), "");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(400));
  EXPECT_EQ(r.metric("background_compile.eager_steps"), 0);
  EXPECT_EQ(r.metric("compiles"), 1);
}

// Under the policy "error" a compile that fails is the next execution's error (naming the
// backend and the call), as it would have been without background compiles.
TEST(BackgroundCompile, AFailedCompileSurfacesUnderThePolicyError) {
  BgRuntime r("throws_compile", "error");
  ASSERT_NE(r.dev, nullptr);
  std::string err;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int eager = 0;
  while (err.empty() && std::chrono::steady_clock::now() < deadline) {
    err = step(r.dev, 2);
    if (err.empty()) ++eager;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(err.find("throws_compile"), std::string::npos) << err;
  EXPECT_NE(err.find("compile"), std::string::npos) << err;
  EXPECT_EQ(r.metric("background_compile.eager_steps"), eager);
}

// Under "warn" the failed region runs on cpu_eager for good (as a synchronous compile failure
// does): every step keeps its values.
TEST(BackgroundCompile, AFailedCompileFallsBackUnderThePolicyWarn) {
  BgRuntime r("throws_compile", "warn");
  ASSERT_NE(r.dev, nullptr);
  for (int i = 0; i < 30 && r.metric("background_compile.compiled_steps") < 1; ++i) {
    ASSERT_EQ(step(r.dev, static_cast<float>(i)), "");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(r.metric("background_compile.compiled_steps"), 1);
  EXPECT_GE(r.metric("compile_failures"), 1);
  EXPECT_EQ(step(r.dev, 7), "");
}

TEST(BackgroundCompile, DestroyingTheRuntimeWaitsForARunningCompile) {
  auto t0 = std::chrono::steady_clock::now();
  {
    BgRuntime r("slow_compile", "error");
    ASSERT_NE(r.dev, nullptr);
    ASSERT_EQ(step(r.dev, 3), "");
    EXPECT_EQ(r.metric("background_compile.compiled_steps"), 0);
    // Give the pool's thread time to take the compile (a compile still waiting in the queue
    // is dropped at destruction, never started); it then runs for 400 ms.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }  // the compile thread still uses the plugin: destruction waits for it
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(400));
}

TEST(BackgroundCompile, BadSettingsAreClearErrors) {
  auto config = std::filesystem::temp_directory_path() / "lt_bg_bad.toml";
  std::ofstream(config) << "background_compile = \"yes\"\n";
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  std::string path = config.string();
  o.config_path = path.c_str();
  lt_runtime* rt = nullptr;
  std::string err = take(lt_runtime_create(&o, &rt));
  EXPECT_NE(err.find("background_compile must be true or false"), std::string::npos) << err;
  std::filesystem::remove(config);
  ::setenv("LT_BACKGROUND_COMPILE", "maybe", 1);
  o.config_path = nullptr;
  err = take(lt_runtime_create(&o, &rt));
  ::unsetenv("LT_BACKGROUND_COMPILE");
  EXPECT_NE(err.find("LT_BACKGROUND_COMPILE='maybe'"), std::string::npos) << err;
  EXPECT_EQ(rt, nullptr);
}

}  // namespace

namespace {

// Threads of this process now (/proc/self/status).
int threads_now() {
  std::ifstream st("/proc/self/status");
  std::string line;
  while (std::getline(st, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// neg(x) + x*x for x = [0, 1, ..., n-1]: a graph of its own for every n.
std::string step_n(lt_device* dev, int64_t n) {
  std::vector<float> xv(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xv[static_cast<size_t>(i)] = static_cast<float>(i);
  lt_tensor *x = nullptr, *ng = nullptr, *sq = nullptr, *y = nullptr;
  const size_t bytes = static_cast<size_t>(n) * 4;
  std::string err = take(lt_tensor_from_host(dev, LT_DTYPE_F32, &n, 1, xv.data(), bytes, &x));
  if (err.empty()) err = take(lt_neg(x, &ng));
  if (err.empty()) err = take(lt_mul(x, x, &sq));
  if (err.empty()) err = take(lt_add(ng, sq, &y));
  if (err.empty()) err = take(lt_tensor_to_host(y, out.data(), bytes));
  if (err.empty())
    for (size_t k = 0; k < out.size(); ++k) EXPECT_FLOAT_EQ(out[k], xv[k] * xv[k] - xv[k]) << k;
  for (lt_tensor* t : {x, ng, sq, y}) lt_tensor_free(t);
  return err;
}

}  // namespace

// Issue #29: every one-off graph started a thread of its own and the finished ones were never
// forgotten (12,293 threads at once, then out of memory). Compiles run on a fixed pool with a
// bounded queue: 300 graphs that each run once (400 ms compiles) never have more than the pool's
// threads beyond the runtime's own, graphs that find the queue full run on the stand-in and
// are counted, and every value is right.
TEST(BackgroundCompile, OneOffGraphsUseABoundedPoolAndQueue) {
  ::setenv("LT_BACKGROUND_COMPILE_THREADS", "2", 1);
  {
    BgRuntime r("slow_compile", "warn");
    ASSERT_NE(r.dev, nullptr);
    ASSERT_EQ(step_n(r.dev, 1), "");  // the runtime's own threads (pool, stand-in) exist
    const int base = threads_now();
    int peak = base;
    const int graphs = 300;
    for (int i = 2; i <= graphs; ++i) {
      ASSERT_EQ(step_n(r.dev, i), "") << i;
      peak = std::max(peak, threads_now());
    }
    EXPECT_LE(peak, base + 2 + 2) << "threads beyond the pool of 2 (+2 slack)";
    const double started = r.metric("background_compile.started");
    const double full = r.metric("background_compile.queue_full");
    EXPECT_EQ(started + full, graphs) << "every miss either queued a compile or was counted";
    EXPECT_GT(full, 0) << "400 ms compiles cannot keep up with 300 graphs: the queue fills";
    EXPECT_LE(started, graphs);
  }
  ::unsetenv("LT_BACKGROUND_COMPILE_THREADS");
}
