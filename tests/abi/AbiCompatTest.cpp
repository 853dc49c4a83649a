// AbiCompatTest.cpp — the core against plugins of other ABI versions: an older minor (smaller
// table) and a newer minor (larger table) load and work, another major is refused naming both
// versions, and a claimed op whose compile fails falls back to cpu_eager with the reason logged.
#include <gtest/gtest.h>

#include <lazytensor/lt.h>
#include <lazytensor/lt_plugin.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

std::string msg(lt_error* e) {
  std::string m = e ? lt_error_message(e) : "";
  lt_error_destroy(e);
  return m;
}

// A runtime that sees one test plugin folder (plus the install dir's cpu_eager).
struct Rt {
  lt_runtime* rt = nullptr;
  explicit Rt(const std::string& kase, const char* device = nullptr) {
    std::string path = std::string(LT_ABI_PLUGIN_DIR) + "/" + kase;
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.plugin_path = path.c_str();
    o.device = device;
    o.fallback = "silent";
    o.log_level = "warn";
    lt_error* e = lt_runtime_create(&o, &rt);
    EXPECT_EQ(e, nullptr) << msg(e);
  }
  ~Rt() { lt_runtime_destroy(rt); }
  std::string report() {
    char* s = nullptr;
    lt_error* e = lt_runtime_plugin_report(rt, 0, &s);
    EXPECT_EQ(e, nullptr) << msg(e);
    std::string r = s ? s : "";
    lt_string_free(s);
    return r;
  }
  double metric(const char* name) { return lt::test::metric_or_zero(rt, name); }
};

// exp(a) * b + -a on the default device; checks every element against the host formula.
void run_formula(lt_runtime* rt) {
  lt_device* dev = lt_runtime_default_device(rt);
  const int64_t shape[2] = {3, 4};
  std::vector<float> av(12), bv(12), out(12);
  for (int i = 0; i < 12; ++i) av[i] = 0.25f * i - 1.0f, bv[i] = 2.0f - 0.5f * i;
  lt_tensor *a = nullptr, *b = nullptr, *ea = nullptr, *m = nullptr, *na = nullptr, *r = nullptr;
  ASSERT_EQ(lt_tensor_from_host(dev, LT_DTYPE_F32, shape, 2, av.data(), 48, &a), nullptr);
  ASSERT_EQ(lt_tensor_from_host(dev, LT_DTYPE_F32, shape, 2, bv.data(), 48, &b), nullptr);
  ASSERT_EQ(lt_exp(a, &ea), nullptr);
  ASSERT_EQ(lt_mul(ea, b, &m), nullptr);
  ASSERT_EQ(lt_neg(a, &na), nullptr);
  ASSERT_EQ(lt_add(m, na, &r), nullptr);
  lt_error* e = lt_tensor_to_host(r, out.data(), 48);
  EXPECT_EQ(e, nullptr) << msg(e);
  for (int i = 0; i < 12; ++i)
    EXPECT_NEAR(out[i], std::exp(av[i]) * bv[i] - av[i], 1e-5 * (1 + std::fabs(out[i]))) << i;
  for (lt_tensor* t : {a, b, ea, m, na, r}) lt_tensor_free(t);
}

TEST(AbiCompat, OlderMinorTableWithoutTrailingEntriesLoadsAndWorks) {
  Rt rt("older_minor", "abi_older_minor");
  ASSERT_NE(rt.rt, nullptr);
  EXPECT_STREQ(lt_device_backend(lt_runtime_default_device(rt.rt)), "abi_older_minor");
  run_formula(rt.rt);
  // The stats slot past struct_size holds a poison pointer: the report and metrics must not
  // call it (the process would abort).
  EXPECT_NE(rt.report().find("abi_older_minor"), std::string::npos);
  char* s = nullptr;
  EXPECT_EQ(lt_metrics_report(rt.rt, 1, &s), nullptr);
  lt_string_free(s);
  EXPECT_EQ(rt.metric("fallback.exp"), 0) << "exp ran on the plugin";
}

// ABI 1.3 appended the execute call's span callback (per-kernel profiling). A plugin built
// before it still runs under the profiler, profiled as whole executables (region spans, no
// kernel spans).
TEST(AbiCompat, OlderMinorPluginRunsUnderTheProfilerAsWholeExecutables) {
  const std::string trace = ::testing::TempDir() + "lt_abi_profile.json";
  std::remove(trace.c_str());
  ::setenv("LT_PROFILE", trace.c_str(), 1);
  {
    Rt rt("older_minor", "abi_older_minor");
    ::unsetenv("LT_PROFILE");
    ASSERT_NE(rt.rt, nullptr);
    run_formula(rt.rt);
  }  // the trace is written when the runtime is destroyed
  std::ifstream in(trace);
  ASSERT_TRUE(in) << "no trace " << trace;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"name\": \"region\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"cat\": \"kernel\""), std::string::npos) << text;
  std::remove(trace.c_str());
}

TEST(AbiCompat, NewerMinorTableWithUnknownTrailingFieldsWorks) {
  Rt rt("newer_minor", "abi_newer_minor");
  ASSERT_NE(rt.rt, nullptr);
  run_formula(rt.rt);
  std::string rep = rt.report();
  EXPECT_NE(rep.find("abi_newer_minor"), std::string::npos) << rep;
  EXPECT_EQ(rt.metric("fallback.mul"), 0);
}

TEST(AbiCompat, OtherMajorIsRefusedNamingBothVersions) {
  Rt rt("other_major");
  ASSERT_NE(rt.rt, nullptr);  // cpu_eager still loads
  std::string rep = rt.report();
  std::string want = "lt_plugin_abi_other_major.so";
  size_t at = rep.find(want);
  ASSERT_NE(at, std::string::npos) << rep;
  std::string line = rep.substr(at, rep.find('\n', at) - at);
  EXPECT_NE(line.find("2.7"), std::string::npos) << line;
  EXPECT_NE(
      line.find(std::to_string(LT_PLUGIN_ABI_MAJOR) + "." + std::to_string(LT_PLUGIN_ABI_MINOR)),
      std::string::npos)
      << line;
  lt_device* d = nullptr;
  lt_error* e = lt_runtime_find_device(rt.rt, "abi_other_major", &d);
  EXPECT_NE(e, nullptr);
  lt_error_destroy(e);
}

TEST(AbiCompat, ClaimedOpThatFailsToCompileFallsBackWithTheReasonLogged) {
  Rt rt("compile_fails", "abi_compile_fails");
  ASSERT_NE(rt.rt, nullptr);
  testing::internal::CaptureStderr();
  run_formula(rt.rt);
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_GE(rt.metric("fallback.exp"), 1) << "the region with exp ran on cpu_eager";
  EXPECT_GE(rt.metric("compile_failures"), 1);
  EXPECT_NE(log.find("abi_compile_fails"), std::string::npos) << log;
  EXPECT_NE(log.find("exp is claimed but its kernel is missing"), std::string::npos) << log;
}

// Minor 2 (before buffer donation, ABI 1.3) still loads and runs, and keeps copies: an update
// whose old value nobody holds (donated on a 1.3 plugin) is computed into a new buffer.
TEST(AbiCompat, MinorTwoPluginLoadsRunsAndIsNeverOfferedDonation) {
  Rt rt("minor2", "abi_minor2");
  ASSERT_NE(rt.rt, nullptr);
  EXPECT_STREQ(lt_device_backend(lt_runtime_default_device(rt.rt)), "abi_minor2");
  run_formula(rt.rt);
  lt_device* dev = lt_runtime_default_device(rt.rt);
  const int64_t shape[1] = {4};
  const float init[4] = {1, 2, 3, 4};
  lt_tensor *p = nullptr, *next = nullptr;
  ASSERT_EQ(lt_tensor_from_host(dev, LT_DTYPE_F32, shape, 1, init, sizeof init, &p), nullptr);
  ASSERT_EQ(lt_mul(p, p, &next), nullptr);
  lt_tensor_free(p);  // nobody else holds the old value: donatable on a 1.3 plugin
  float out[4] = {};
  lt_error* e = lt_tensor_to_host(next, out, sizeof out);
  EXPECT_EQ(e, nullptr) << msg(e);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{1, 4, 9, 16}));
  EXPECT_EQ(rt.metric("donation.buffers"), 0);
  EXPECT_EQ(rt.metric("compile_failures"), 0) << "a donation was offered to the minor-2 plugin";
  EXPECT_EQ(rt.metric("fallback.mul"), 0);
  lt_tensor_free(next);
}

}  // namespace
