// test_support.hpp — what the GoogleTest suites over the C++ API share (target lt_test_support):
// the process-wide runtimes with the in-tree plugins, the backends this build made and the
// fixture that runs a test once per backend, and the host-side checks (values read back, compared
// element by element with the index and both values in the message).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "lazytensor/lazytensor.hpp"

namespace lt::test {

// ---- runtimes -----------------------------------------------------------------------------

// The options the suites' shared runtimes are made with (the in-tree plugins, found as any
// application finds them: LT_PLUGIN_PATH, the config, the build's plugin folder).
inline lt::RuntimeOptions with_fallback(std::string policy) {
  lt::RuntimeOptions o;
  o.fallback = std::move(policy);
  return o;
}
inline lt::RuntimeOptions on_device(std::string device, std::string fallback = "") {
  lt::RuntimeOptions o;
  o.device = std::move(device);
  o.fallback = std::move(fallback);
  return o;
}

// The process-wide runtime for `options`: created on first use, one per distinct set of options,
// never destroyed (tensors of file-scope objects and tests that outlive main's return stay
// valid; LeakSanitizer sees it reachable). Null when creation failed, with lt_runtime_create's
// error in *why (and its code in *code); a later call reports the same failure without trying
// again.
inline lt::Runtime* try_runtime(const lt::RuntimeOptions& options = {}, std::string* why = nullptr,
                                lt_status_code* code = nullptr) {
  struct Entry {
    lt::Runtime* rt = nullptr;
    std::string error;
    lt_status_code code = LT_STATUS_OK;
  };
  static std::mutex mu;
  static auto* made = new std::map<std::string, Entry>();
  const std::string key = options.config_path + '\n' + options.device + '\n' + options.plugin_path +
                          '\n' + options.fallback + '\n' + options.log_level + '\n' +
                          options.dump_dir + '\n' + options.dynamic_shapes + '\n' +
                          options.optimize;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = made->try_emplace(key);
  if (fresh) {
    try {
      it->second.rt = new lt::Runtime(lt::Runtime::create(options));
    } catch (const lt::Error& e) {
      it->second.error = e.what();
      it->second.code = e.code();
    }
  }
  if (why) *why = it->second.error;
  if (code) *code = it->second.code;
  return it->second.rt;
}

// As try_runtime, but a failure throws lt::Error with the creation error's text (GoogleTest
// reports it as the failing test's message).
inline lt::Runtime& runtime(const lt::RuntimeOptions& options = {}) {
  std::string why;
  lt_status_code code = LT_STATUS_OK;
  if (lt::Runtime* rt = try_runtime(options, &why, &code)) return *rt;
  throw lt::Error(code, "the tests' runtime could not be created: " + why);
}

// The runtime of the no-fallback tests (policy "error": a node leaving its backend fails them).
inline lt::Runtime& no_fallback_runtime() {
  return runtime(with_fallback("error"));
}

// A runtime counter, 0 before its first event (lt_metric_get answers NOT_FOUND until then).
inline double metric_or_zero(lt_runtime* rt, const std::string& name) {
  double v = 0;
  if (lt_error* e = lt_metric_get(rt, name.c_str(), &v)) {
    lt_error_destroy(e);
    return 0;
  }
  return v;
}
inline double metric_or_zero(const lt::Runtime& rt, const std::string& name) {
  return metric_or_zero(rt.get(), name);
}

// ---- one test per backend -----------------------------------------------------------------

#ifdef LT_TEST_BACKENDS
// The backends this build made (LT_TEST_BACKENDS, from CMake's lt_built_backends), so the
// per-backend tests run on each of them and never skip one that was built. (lt-conformance,
// which runs on a plugin it is given, has no such list.)
inline std::vector<std::string> built_backends() {
  std::vector<std::string> out;
  std::stringstream all(LT_TEST_BACKENDS);
  for (std::string b; std::getline(all, b, ',');)
    if (!b.empty()) out.push_back(b);
  return out;
}
#endif

// A test run once per backend (LT_INSTANTIATE_PER_BACKEND): the device of the parameter's
// backend in the shared runtime of the suite's options. A backend that was built (or a device the
// run named, as the conformance suite's LT_CONFORMANCE_DEVICES) but does not load fails the test,
// naming it and why.
class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  explicit BackendTest(lt::RuntimeOptions options = {}) : options_(std::move(options)) {}
  void SetUp() override {
    try {
      dev_ = rt().find_device(GetParam());
    } catch (const lt::Error& e) {
      FAIL() << "device '" << GetParam()
             << "' was built or named for this run but does not load: " << e.what();
    }
  }
  lt::Runtime& rt() const { return runtime(options_); }
  const lt::Device& dev() const { return dev_; }
  // The backend of the device (the parameter may name a device, "cpu_jit:0").
  std::string backend() const { return dev_.backend(); }

  lt::Device dev_;  // set by SetUp

 private:
  lt::RuntimeOptions options_;
};

// A test name for a backend or device parameter: "cpu_jit", "cpu_jit:0" -> "cpu_jit_0".
inline std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// Instances named by their backend: "Backends/Suite.Test/cpu_jit".
#define LT_INSTANTIATE_PER_BACKEND(Suite, backends) \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::ValuesIn(backends), ::lt::test::param_name)

// ---- host-side checks ---------------------------------------------------------------------

// The message of the lt::Error `f` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lt::Error& e) {
    return e.what();
  }
  return "";
}

// A tensor's values read back to the host as T (converted by the core where its dtype differs).
template <class T = float>
std::vector<T> values(const lt::Tensor& t) {
  return t.to_vector<T>();
}

// Element-wise |got - want| <= atol + rtol * |want| with the same size; each failing element
// names its index and both values (at most 10 are reported, then how many more failed). As
// EXPECT_NEAR: a NaN or an infinity on either side fails.
template <class G, class W>
::testing::AssertionResult all_close(const std::vector<G>& got, const std::vector<W>& want,
                                     double atol, double rtol = 0) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << ", expected " << want.size();
  size_t bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::fabs(g - w) <= atol + rtol * std::fabs(w)) continue;
    if (++bad <= 10) msg << "\n  [" << i << "] " << g << ", expected " << w;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  if (bad > 10) msg << "\n  ... and " << bad - 10 << " more";
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ (atol "
                                       << atol << ", rtol " << rtol << "):" << msg.str();
}

}  // namespace lt::test
