// fuzz_config.cpp — libFuzzer harness of the runtime configuration file (TOML and JSON,
// core/src/config.cpp) through lt_runtime_create: after a first byte 'j' the rest is a JSON
// file, after any other a TOML file (seeds start with 'j' or 't'). Any answer is fine except a
// crash, a hang, a sanitizer report or an exception.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool env_cleared = [] {
    for (const char* v : {"LT_CONFIG", "LT_DEVICE", "LT_FALLBACK", "LT_LOG_LEVEL", "LT_DUMP_DIR",
                          "LT_PLUGIN_PATH", "LT_CACHE_DIR"})
      ::unsetenv(v);
    return true;
  }();
  (void)env_cleared;
  if (size == 0) return 0;
  const bool json = data[0] == 'j';
  std::string path =
      lt::fuzz::write_scratch(json ? "config.json" : "config.toml", data + 1, size - 1);
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  o.config_path = path.c_str();
  // The options win over the file, whose values are still parsed and checked: nothing is
  // printed, and graph dumps go to the scratch directory, not to a directory the file names.
  o.log_level = "off";
  o.dump_dir = lt::fuzz::scratch_dir().c_str();
  lt_runtime* rt = nullptr;
  if (!lt::fuzz::ok(lt_runtime_create(&o, &rt))) return 0;
  char* report = nullptr;
  if (lt::fuzz::ok(lt_runtime_plugin_report(rt, data[0] & 2, &report))) lt_string_free(report);
  // The plugin options of the file reached the default device's plugin: make it work once.
  lt_device* dev = lt_runtime_default_device(rt);
  const int64_t shape[] = {3};
  lt_tensor* t = nullptr;
  if (lt::fuzz::ok(lt_full(dev, shape, 1, 1.5, LT_DTYPE_F32, &t))) {
    float out[3];
    lt::fuzz::ok(lt_tensor_to_host(t, out, sizeof out));
    lt_tensor_free(t);
  }
  lt_runtime_destroy(rt);
  return 0;
}
