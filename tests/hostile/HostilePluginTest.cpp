// HostilePluginTest.cpp — the core against misbehaving plugins (hostile_plugin.cpp): each is
// reported with its path and reason or fails one call with an lt_error naming the plugin and
// the call, and the runtime (and cpu_eager next to it) keeps working.
#include <gtest/gtest.h>

#include <lazytensor/lt.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

std::string take(lt_error* e) {
  std::string m = e ? lt_error_message(e) : "";
  lt_error_destroy(e);
  return m;
}

struct Rt {
  lt_runtime* rt = nullptr;
  explicit Rt(const std::string& kase) {
    std::string path = std::string(LT_HOSTILE_PLUGIN_DIR) + "/" + kase;
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.plugin_path = path.c_str();
    o.fallback = "silent";
    o.log_level = "error";
    lt_error* e = lt_runtime_create(&o, &rt);
    EXPECT_EQ(e, nullptr) << take(e);
  }
  ~Rt() { lt_runtime_destroy(rt); }
  std::string report() {
    char* s = nullptr;
    lt_error* e = lt_runtime_plugin_report(rt, 0, &s);
    EXPECT_EQ(e, nullptr) << take(e);
    std::string r = s ? s : "";
    lt_string_free(s);
    return r;
  }
  lt_device* device(const char* name) {
    lt_device* d = nullptr;
    lt_error* e = lt_runtime_find_device(rt, name, &d);
    EXPECT_EQ(e, nullptr) << take(e);
    return d;
  }
};

// The line of the report naming `file`, or "" (with a test failure).
std::string refused_line(Rt& rt, const std::string& file) {
  std::string rep = rt.report();
  size_t at = rep.find(file);
  EXPECT_NE(at, std::string::npos) << file << " not reported:\n" << rep;
  if (at == std::string::npos) return {};
  size_t begin = rep.rfind('\n', at) + 1;
  return rep.substr(begin, rep.find('\n', at) - begin);
}

// neg(a) + a*a on `dev`; returns the call's error message ("" on success) and checks values.
std::string compute(lt_device* dev) {
  const int64_t shape[1] = {5};
  const float av[5] = {-2, -1, 0, 1, 2.5f};
  float out[5] = {};
  lt_tensor *a = nullptr, *n = nullptr, *m = nullptr, *r = nullptr;
  std::string err = take(lt_tensor_from_host(dev, LT_DTYPE_F32, shape, 1, av, sizeof av, &a));
  if (err.empty()) err = take(lt_neg(a, &n));
  if (err.empty()) err = take(lt_mul(a, a, &m));
  if (err.empty()) err = take(lt_add(n, m, &r));
  if (err.empty()) err = take(lt_tensor_to_host(r, out, sizeof out));
  if (err.empty())
    for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(out[i], av[i] * av[i] - av[i]) << i;
  for (lt_tensor* t : {a, n, m, r}) lt_tensor_free(t);
  return err;
}

void cpu_eager_still_works(Rt& rt) {
  EXPECT_EQ(compute(rt.device("cpu_eager")), "");
}

TEST(HostilePlugin, ExceptionFromCreateIsReportedWithPathAndReason) {
  Rt rt("throws_create");
  std::string line = refused_line(rt, "throws_create/lt_plugin_throws_create.so");
  EXPECT_NE(line.find("create threw a C++ exception"), std::string::npos) << line;
  EXPECT_NE(line.find("hostile plugin threw in create"), std::string::npos) << line;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, ExceptionFromSupportsFailsTheGraphNotTheProcess) {
  Rt rt("throws_supports");
  std::string err = compute(rt.device("throws_supports"));
  EXPECT_NE(err.find("throws_supports: supports threw a C++ exception"), std::string::npos) << err;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, ExceptionFromCompileFallsBackToCpuEager) {
  Rt rt("throws_compile");
  testing::internal::CaptureStderr();
  EXPECT_EQ(compute(rt.device("throws_compile")), "");  // ran on the fallback instead
  testing::internal::GetCapturedStderr();
  double failures = 0;
  EXPECT_EQ(lt_metric_get(rt.rt, "compile_failures", &failures), nullptr);
  EXPECT_GE(failures, 1);
}

TEST(HostilePlugin, ExceptionFromExecuteIsAnErrorNamingPluginAndCall) {
  Rt rt("throws_execute");
  lt_device* dev = rt.device("throws_execute");
  std::string err = compute(dev);
  EXPECT_NE(err.find("throws_execute: execute threw a C++ exception"), std::string::npos) << err;
  EXPECT_NE(err.find("hostile plugin threw in execute"), std::string::npos) << err;
  EXPECT_FALSE(compute(dev).empty()) << "the second try fails the same way, no crash";
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, NullRequiredEntriesAreRefusedByName) {
  Rt rt("null_fields");
  std::string line = refused_line(rt, "null_fields/lt_plugin_null_fields.so");
  EXPECT_NE(line.find("required functions are NULL: buffer_free, compile"), std::string::npos)
      << line;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, StructSizeSmallerThanTheVersionFieldsIsRefused) {
  Rt rt("tiny_struct");
  std::string line = refused_line(rt, "tiny_struct/lt_plugin_tiny_struct.so");
  EXPECT_NE(line.find("struct_size 4 is too small"), std::string::npos) << line;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, ZeroDevicesIsRefused) {
  Rt rt("zero_devices");
  std::string line = refused_line(rt, "zero_devices/lt_plugin_zero_devices.so");
  EXPECT_NE(line.find("0 devices"), std::string::npos) << line;
  lt_device* d = nullptr;
  EXPECT_NE(take(lt_runtime_find_device(rt.rt, "zero_devices", &d)), "");
  cpu_eager_still_works(rt);
}

// A plugin's answers are input like any other: a device count beyond the ABI's bound is
// refused with the number, at once (the test's time limit bounds a regression to a hang).
TEST(HostilePlugin, HugeDeviceCountIsRefused) {
  Rt rt("huge_device_count");
  std::string line = refused_line(rt, "huge_device_count/lt_plugin_huge_device_count.so");
  EXPECT_NE(line.find("reports 1099511627776 devices (at most 1024)"), std::string::npos) << line;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, BuffersSmallerThanRequestedGiveAnErrorNotAnOverflow) {
  Rt rt("short_buffers");
  // 4000 bytes: the plugin allocates half of the core's 4096-byte size class.
  std::vector<float> big(1000, 1.0f);
  const int64_t shape[1] = {1000};
  lt_tensor* t = nullptr;
  std::string err = take(lt_tensor_from_host(rt.device("short_buffers"), LT_DTYPE_F32, shape, 1,
                                             big.data(), big.size() * sizeof(float), &t));
  lt_tensor_free(t);
  EXPECT_NE(err.find("short_buffers"), std::string::npos) << err;
  EXPECT_NE(err.find("buffer_upload failed"), std::string::npos) << err;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, ExceptionsFromFreeAndDestroyAreLoggedAndSwallowed) {
  testing::internal::CaptureStderr();
  {
    Rt rt("throws_free");
    EXPECT_EQ(compute(rt.device("throws_free")), "");
  }  // runtime teardown frees buffers and executables: each throws
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("threw a C++ exception"), std::string::npos) << log;
}

}  // namespace

// ---- the rest of the list: every one reported with path and reason, or a clean
// error / fallback at the call, and cpu_eager next to it keeps working ----------------------

namespace {

std::string metric_line(Rt& rt, const char* name) {
  double v = 0;
  lt_error* e = lt_metric_get(rt.rt, name, &v);
  if (e) return take(e);
  return std::to_string(static_cast<long long>(v));
}

TEST(HostilePlugin, EntryReturningNullIsRefused) {
  Rt rt("null_table");
  std::string line = refused_line(rt, "null_table/lt_plugin_null_table.so");
  EXPECT_NE(line.find("entry symbol returned a NULL function table"), std::string::npos) << line;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, TableOfVersionFieldsOnlyIsRefused) {
  Rt rt("short_table");
  std::string line = refused_line(rt, "short_table/lt_plugin_short_table.so");
  EXPECT_NE(line.find("is smaller than the required"), std::string::npos) << line;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, BadNameIsRefused) {
  Rt rt("bad_name");
  std::string line = refused_line(rt, "bad_name/lt_plugin_bad_name.so");
  EXPECT_NE(line.find("plugin name 'Bad Name/../x' is not [a-z0-9_]+"), std::string::npos) << line;
  cpu_eager_still_works(rt);
}

// Two plugins of one name: the first on the search path wins (a user's directory comes
// before the install directory, so a backend can be replaced); the other is reported with
// both paths.
TEST(HostilePlugin, DuplicateNameIsReportedWithBothPaths) {
  Rt rt("duplicate_name");
  std::string line = refused_line(rt, "liblt_plugin_cpu_eager.so");
  EXPECT_NE(line.find("a plugin named 'cpu_eager' is already loaded from"), std::string::npos)
      << line;
  EXPECT_NE(line.find("duplicate_name/lt_plugin_duplicate_name.so"), std::string::npos) << line;
  EXPECT_EQ(compute(rt.device("cpu_eager")), "");  // the one that loaded works
}

TEST(HostilePlugin, FailingDeviceCountIsRefused) {
  Rt rt("device_count_fails");
  std::string line = refused_line(rt, "device_count_fails/lt_plugin_device_count_fails.so");
  EXPECT_NE(line.find("device_count failed: no device answers"), std::string::npos) << line;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, CreateWithoutContextIsRefused) {
  Rt rt("null_context");
  std::string line = refused_line(rt, "null_context/lt_plugin_null_context.so");
  EXPECT_NE(line.find("create returned no context"), std::string::npos) << line;
  cpu_eager_still_works(rt);
}

// A compile that "succeeds" without an executable is a failed compile: the region runs on the
// fallback (policy silent here; under "error" it is the call's error).
TEST(HostilePlugin, CompileWithoutExecutableFallsBack) {
  Rt rt("null_executable");
  EXPECT_EQ(compute(rt.device("null_executable")), "");
  EXPECT_EQ(metric_line(rt, "compile_failures"), "1");
}

// A device that fails mid-training: the steps before it ran, the failing step is an error
// naming the plugin, the call and its message, the next one fails the same way (no crash, no
// state left half-done), and other devices carry on. Execution failures are errors, never
// silently re-run elsewhere (docs/reliability.md).
TEST(HostilePlugin, ExecuteFailingMidTrainingIsAnErrorAtThatStep) {
  Rt rt("execute_fails_later");
  lt_device* dev = rt.device("execute_fails_later");
  for (int step = 1; step <= 3; ++step) EXPECT_EQ(compute(dev), "") << "step " << step;
  std::string err = compute(dev);
  EXPECT_NE(err.find("execute_fails_later"), std::string::npos) << err;
  EXPECT_NE(err.find("execute failed"), std::string::npos) << err;
  EXPECT_NE(err.find("device lost at execution 4"), std::string::npos) << err;
  EXPECT_FALSE(compute(dev).empty());
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, NullBufferWithoutAnErrorIsAnError) {
  Rt rt("null_buffer");
  std::string err = compute(rt.device("null_buffer"));
  EXPECT_NE(err.find("null_buffer"), std::string::npos) << err;
  EXPECT_NE(err.find("buffer_alloc"), std::string::npos) << err;
  cpu_eager_still_works(rt);
}

TEST(HostilePlugin, ErrorWithNullMessageIsReported) {
  Rt rt("null_error_message");
  testing::internal::CaptureStderr();
  EXPECT_EQ(compute(rt.device("null_error_message")), "");  // the failed compile falls back
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(metric_line(rt, "compile_failures"), "1");
}

// A code that is no lt_status_code (2146483951, then -3) from the plugin's error_code is
// reported as LT_STATUS_PLUGIN_ERROR, never handed on to the application.
TEST(HostilePlugin, GarbageErrorCodeIsReportedAsPluginError) {
  // The code is loaded as an lt_status_code before it is checked: every int32 must be a value.
  static_assert(sizeof(lt_status_code) == 4);
  EXPECT_EQ(static_cast<int64_t>(LT_STATUS_MIN_ENUM_), INT32_MIN);
  EXPECT_EQ(static_cast<int64_t>(LT_STATUS_MAX_ENUM_), INT32_MAX);
  Rt rt("garbage_error_code");
  lt_device* dev = rt.device("garbage_error_code");
  const int64_t shape[1] = {4};
  const float v[4] = {1, 2, 3, 4};
  for (int attempt = 0; attempt < 2; ++attempt) {
    lt_tensor *a = nullptr, *n = nullptr;
    ASSERT_EQ(lt_tensor_from_host(dev, LT_DTYPE_F32, shape, 1, v, sizeof v, &a), nullptr);
    ASSERT_EQ(lt_neg(a, &n), nullptr);
    float out[4] = {};
    lt_error* e = lt_tensor_to_host(n, out, sizeof out);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(lt_error_code(e), LT_STATUS_PLUGIN_ERROR) << attempt;
    EXPECT_NE(std::string(lt_error_message(e)).find("garbage code"), std::string::npos)
        << lt_error_message(e);
    lt_error_destroy(e);
    lt_tensor_free(n);
    lt_tensor_free(a);
  }
  cpu_eager_still_works(rt);
}

}  // namespace
