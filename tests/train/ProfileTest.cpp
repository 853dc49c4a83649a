// ProfileTest.cpp — the profiler (config `profile` / LT_PROFILE, core/src/profile.h) over the
// GPT training step that lt-run trains: the file is Chrome trace event JSON (as Perfetto and
// chrome://tracing read it), holds a span for every stage, and each step's spans ("trace", the
// host tracing between syncs, plus "lt_sync") add up to the measured step time within 10%;
// with a backend of plugin ABI 1.3 (cpu_jit, cpu_eager) each kernel and host step is a child
// span inside its region's execution.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/models/gpt.hpp"
#include "lazytensor/optim.hpp"
#include "lazytensor/text.hpp"

namespace {

namespace fs = std::filesystem;

TEST(Profile, GptTrainingTraceIsChromeTraceJsonWhoseStepSpansAddUpToTheStepTime) {
  const fs::path dir = fs::temp_directory_path() / ("lt_profile_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string trace = (dir / "trace.json").string(), config = (dir / "lt.json").string();
  std::ofstream(config) << "{\"profile\": \"" << trace << "\"}";
  double measured_ms = 0;
  constexpr int kSteps = 8;
  {
    lt::RuntimeOptions o;
    o.config_path = config;
    o.device = std::string(LT_TEST_BACKENDS).find("cpu_jit") != std::string::npos ? "cpu_jit"
                                                                                  : "cpu_eager";
    lt::Runtime rt = lt::Runtime::create(o);
    lt::Device dev = rt.default_device();
    const auto t0 = std::chrono::steady_clock::now();
    std::string text;
    for (int i = 0; i < 40; ++i) text += "the cat sat on the mat. ";
    lt::text::Corpus corpus = lt::text::Corpus::from_text(text, 0.2);
    lt::models::GptConfig c;
    c.vocab = corpus.vocab.size(), c.context = 16, c.layers = 2, c.dim = 32, c.heads = 4;
    lt::models::Gpt m(dev, c);
    lt::optim::AdamW opt(m.parameters(), 1e-3, 0.1, 0.9, 0.95);
    for (int step = 0; step < kSteps; ++step) {
      m.set_step(static_cast<uint64_t>(step));
      auto [x, y] = lt::text::sample_batch(dev, corpus.train, 8, c.context, 1, step);
      lt::Tensor loss = m.loss(x, y);
      loss.backward();
      lt::optim::clip_grad_norm(m.parameters(), 1.0);
      opt.step();
      lt::sync(dev);
    }
    measured_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }  // the runtime writes the trace when it is destroyed

  std::ifstream in(trace);
  ASSERT_TRUE(in) << "no trace file " << trace;
  nlohmann::json j = nlohmann::json::parse(in);  // throws on anything but JSON
  ASSERT_TRUE(j.contains("traceEvents") && j["traceEvents"].is_array());
  std::set<std::string> names;
  std::map<std::string, double> total_us;
  int syncs = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"));
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e["dur"].get<double>() >= 0);
    const std::string name = e["name"];
    names.insert(name);
    total_us[name] += e["dur"].get<double>();
    syncs += name == "lt_sync";
  }
  for (const char* want :
       {"trace", "lt_sync", "collect", "plan lookup", "compile", "compile region", "run", "region"})
    EXPECT_TRUE(names.count(want)) << "no span '" << want << "'";
  EXPECT_EQ(syncs, kSteps);
  // The steps' spans tile the time from the runtime's start to the last lt_sync's end.
  const double spans_ms = (total_us["trace"] + total_us["lt_sync"]) / 1e3;
  EXPECT_NEAR(spans_ms, measured_ms, 0.1 * measured_ms)
      << "trace " << total_us["trace"] / 1e3 << " ms + lt_sync " << total_us["lt_sync"] / 1e3
      << " ms against " << measured_ms << " ms measured";
  fs::remove_all(dir);
}

// Per-kernel spans (plugin ABI 1.3): every backend this build made reports its kernels and host
// steps, each inside a "region" span of the same thread, and together at most that region.
TEST(Profile, KernelsAreChildSpansOfTheirRegionOnEveryBuiltBackend) {
  std::string backends = LT_TEST_BACKENDS;
  for (size_t at = 0; at < backends.size();) {
    size_t end = backends.find(',', at);
    if (end == std::string::npos) end = backends.size();
    const std::string backend = backends.substr(at, end - at);
    at = end + 1;
    if (backend == "tpu_sim") continue;  // its executables are simulated as a whole
    SCOPED_TRACE(backend);
    const fs::path dir = fs::temp_directory_path() / ("lt_kprofile_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string trace = (dir / "trace.json").string(), config = (dir / "lt.json").string();
    std::ofstream(config) << "{\"profile\": \"" << trace << "\"}";
    {
      lt::RuntimeOptions o;
      o.config_path = config;
      o.device = backend;
      lt::Runtime rt = lt::Runtime::create(o);
      lt::Device dev = rt.default_device();
      // A matmul and a fused elementwise tail with a reduction: several kernels or steps.
      lt::Tensor a = lt::Tensor::from(dev, std::vector<float>(64 * 64, 0.5f), {64, 64});
      lt::Tensor b = (a.matmul(a) * 2.0 + 1.0).exp().sum();
      EXPECT_GT(b.item<float>(), 0.0f);
    }
    nlohmann::json j = nlohmann::json::parse(std::ifstream(trace));
    struct Span {
      double ts, dur;
      int tid;
    };
    std::vector<Span> regions, kernels;
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] != "X") continue;
      Span s{e["ts"].get<double>(), e["dur"].get<double>(), e["tid"].get<int>()};
      if (e["name"] == "region") regions.push_back(s);
      if (e["cat"] == "kernel") kernels.push_back(s);
    }
    ASSERT_FALSE(regions.empty());
    ASSERT_GE(kernels.size(), 2u) << "no per-kernel spans from " << backend;
    std::map<size_t, double> inside;  // region -> its kernels' time
    for (const Span& k : kernels) {
      size_t r = 0;
      while (r < regions.size() && !(regions[r].tid == k.tid && k.ts >= regions[r].ts - 1 &&
                                     k.ts + k.dur <= regions[r].ts + regions[r].dur + 1))
        ++r;
      ASSERT_LT(r, regions.size()) << "a kernel span at " << k.ts << " us outside every region";
      inside[r] += k.dur;
    }
    for (auto [r, us] : inside) EXPECT_LE(us, regions[r].dur + 2) << "region " << r;
    fs::remove_all(dir);
  }
}

}  // namespace
