// bench_runtime.h — the runtimes a benchmark program measures on (target lt_bench_runtime): one
// per set of options, created on first use and kept for the whole process, so every benchmark of
// a program shares its plugins, caches and metrics; a runtime that cannot be created is reported
// with lt_runtime_create's message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "lazytensor/lazytensor.hpp"

namespace lt::bench {

inline lt::RuntimeOptions runtime_options(std::string fallback, std::string device = "") {
  lt::RuntimeOptions o;
  o.fallback = std::move(fallback);
  o.device = std::move(device);
  return o;
}

// The process's runtime for `o`, or null with the creation error in *why (asked again, the same
// error: a failed creation is not retried). `variant` tells apart runtimes the options do not
// (made under different environment variables, which a runtime reads when it is created).
inline lt::Runtime* try_runtime(const lt::RuntimeOptions& o, std::string* why = nullptr,
                                const std::string& variant = "") {
  struct Made {
    std::unique_ptr<lt::Runtime> rt;
    std::string error;
  };
  static std::map<std::string, Made> made;  // benchmarks register and run on one thread
  const std::string key = "config=" + o.config_path + " device=" + o.device +
                          " plugin_path=" + o.plugin_path + " fallback=" + o.fallback +
                          " log_level=" + o.log_level + " dump_dir=" + o.dump_dir +
                          " dynamic_shapes=" + o.dynamic_shapes + " optimize=" + o.optimize +
                          (variant.empty() ? "" : " variant=" + variant);
  Made& m = made[key];
  if (!m.rt && m.error.empty()) {
    try {
      m.rt = std::make_unique<lt::Runtime>(lt::Runtime::create(o));
    } catch (const lt::Error& e) {
      m.error = std::string(e.what()) + " (" + key + ")";
    }
  }
  if (why) *why = m.error;
  return m.rt.get();
}

// As try_runtime; a runtime that cannot be created ends the program (exit status 1) with its
// error on stderr: a benchmark has nothing to measure without it.
inline lt::Runtime& runtime(const lt::RuntimeOptions& o = {}, const std::string& variant = "") {
  std::string why;
  if (lt::Runtime* rt = try_runtime(o, &why, variant)) return *rt;
  std::fprintf(stderr, "lt_runtime_create: %s\n", why.c_str());
  std::exit(1);
}

}  // namespace lt::bench
