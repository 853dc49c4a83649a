// lt-info — prints what the runtime sees: plugin search path, loaded plugins (version, ABI,
// devices, supported ops, context stats), plugins that failed (path and reason), and the
// OpenBLAS core type the core chose.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "lazytensor/lt.h"

int main(int argc, char** argv) {
  CLI::App app{"lt-info: LazyTensor plugins, devices and capabilities"};
  bool json = false;
  std::string plugin_path, device, config, log_level;
  app.add_flag("--json", json, "print the report as JSON");
  app.add_option("--plugin-path", plugin_path, "extra ':'-separated plugin directories");
  app.add_option("--device", device, "device to make the default (e.g. cpu_jit:0)");
  app.add_option("--config", config, "config file (TOML or JSON)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off");
  CLI11_PARSE(app, argc, argv);

  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  if (!plugin_path.empty()) o.plugin_path = plugin_path.c_str();
  if (!device.empty()) o.device = device.c_str();
  if (!config.empty()) o.config_path = config.c_str();
  o.log_level = log_level.empty() ? "error" : log_level.c_str();  // failures are in the report
  lt_runtime* rt = nullptr;
  if (lt_error* e = lt_runtime_create(&o, &rt)) {
    std::fprintf(stderr, "lt-info: %s\n", lt_error_message(e));
    lt_error_destroy(e);
    return 1;
  }
  char* report = nullptr;
  if (lt_error* e = lt_runtime_plugin_report(rt, json ? 1 : 0, &report)) {
    std::fprintf(stderr, "lt-info: %s\n", lt_error_message(e));
    lt_error_destroy(e);
    lt_runtime_destroy(rt);
    return 1;
  }
  std::fputs(report, stdout);
  if (json) std::fputs("\n", stdout);
  lt_string_free(report);
  lt_runtime_destroy(rt);
  return 0;
}
