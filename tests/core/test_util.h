// test_util.h — shared helpers for the core tests: runtimes pointed at test plugin folders,
// error assertions and host round trips.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lazytensor/lt.h"

namespace lt_test {

// Owns an lt_error for the duration of an assertion.
struct Err {
  lt_error* e;
  explicit Err(lt_error* err) : e(err) {}
  ~Err() { lt_error_destroy(e); }
  bool ok() const { return e == nullptr; }
  std::string msg() const { return e ? lt_error_message(e) : ""; }
  lt_status_code code() const { return e ? lt_error_code(e) : LT_STATUS_OK; }
};

#define LT_OK(expr)                                   \
  do {                                                \
    ::lt_test::Err lt_ok_err_(expr);                  \
    ASSERT_TRUE(lt_ok_err_.ok()) << lt_ok_err_.msg(); \
  } while (0)

inline std::string plugin_dir(const char* name) {
  return std::string(LT_TEST_PLUGIN_DIR) + "/" + name;
}

struct RuntimeHandle {
  lt_runtime* rt = nullptr;
  ~RuntimeHandle() { lt_runtime_destroy(rt); }
};

// Creates a runtime with the given plugin path/device/fallback; ADD_FAILURE on error.
inline lt_runtime* make_runtime(const std::string& plugin_path, const char* device = nullptr,
                                const char* fallback = "silent", const char* config = nullptr,
                                const char* dump_dir = nullptr) {
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  o.plugin_path = plugin_path.empty() ? nullptr : plugin_path.c_str();
  o.device = device;
  o.fallback = fallback;
  o.config_path = config;
  o.dump_dir = dump_dir;
  lt_runtime* rt = nullptr;
  lt_error* e = lt_runtime_create(&o, &rt);
  if (e) {
    ADD_FAILURE() << "lt_runtime_create: " << lt_error_message(e);
    lt_error_destroy(e);
    return nullptr;
  }
  return rt;
}

inline lt_tensor* from_host(lt_device* d, const std::vector<float>& v, std::vector<int64_t> shape) {
  lt_tensor* t = nullptr;
  lt_error* e = lt_tensor_from_host(d, LT_DTYPE_F32, shape.data(), shape.size(), v.data(),
                                    v.size() * sizeof(float), &t);
  if (e) {
    ADD_FAILURE() << lt_error_message(e);
    lt_error_destroy(e);
  }
  return t;
}

inline std::vector<float> to_host(lt_tensor* t) {
  std::vector<float> v(static_cast<size_t>(lt_tensor_numel(t)));
  lt_error* e = lt_tensor_to_host(t, v.data(), v.size() * sizeof(float));
  if (e) {
    ADD_FAILURE() << lt_error_message(e);
    lt_error_destroy(e);
  }
  return v;
}

// The last recompile reason of the runtime's metrics report ("" when there is none).
inline std::string last_reason(lt_runtime* rt) {
  char* s = nullptr;
  EXPECT_EQ(lt_metrics_report(rt, 1, &s), nullptr);
  std::string js = s ? s : "";
  lt_string_free(s);
  size_t at = js.find("\"recompile_reasons\"");
  if (at == std::string::npos) return "";
  size_t end = js.find(']', at);
  size_t q = js.rfind('"', end - 1);
  size_t p = js.rfind('"', q - 1);
  return js.substr(p + 1, q - p - 1);
}

inline double metric(lt_runtime* rt, const char* name) {
  double v = -1;
  lt_error* e = lt_metric_get(rt, name, &v);
  if (e) {
    lt_error_destroy(e);
    return -1;
  }
  return v;
}

inline std::string report(lt_runtime* rt, bool json = false) {
  char* s = nullptr;
  lt_error* e = lt_runtime_plugin_report(rt, json, &s);
  if (e) {
    std::string m = lt_error_message(e);
    lt_error_destroy(e);
    return "ERROR: " + m;
  }
  std::string r = s;
  lt_string_free(s);
  return r;
}

}  // namespace lt_test
