// OpenCL runtime layer of the gpu_opencl plugin: device selection, CL error text, and the
// program cache (in memory and on disk). The only file besides cl_runtime.cpp that sees
// raw CL handles is executable.cpp, which launches kernels.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "lazytensor/lt_plugin.h"
#include "lt_plugin_support.hpp"

namespace lt::ocl {

// Internal failure: thrown inside the plugin, converted to an lt_plugin_error at the ABI
// boundary (plugin.cpp) and nowhere else. Its message names the plugin itself.
using Failure = plugin_support::StatusError;
[[noreturn]] void fail(lt_status_code code, std::string message);

// "CL_OUT_OF_RESOURCES" etc.; "CL error <n>" for codes this table does not know.
const char* cl_error_name(cl_int err);
// Throws a Failure naming `what` and the CL error; allocation failures map to
// LT_STATUS_OUT_OF_MEMORY, the rest to LT_STATUS_PLUGIN_ERROR.
void check(cl_int err, const char* what);

// Log sink handed over by the core at create(); may be a no-op.
struct Logger {
  lt_plugin_log_fn fn = nullptr;
  void* user = nullptr;
  void operator()(int level, const std::string& msg) const {
    if (fn) fn(user, level, msg.c_str());
  }
};

// Options from [plugins.gpu_opencl], already parsed.
struct Options {
  std::string platform;   // index or name substring; empty = any
  long device = -1;       // index among the matching devices; -1 = first
  std::string type = "";  // "gpu", "cpu", "all"; empty = first GPU, else any
  std::string cache_dir;  // empty = $XDG_CACHE_HOME/lazytensor/opencl or ~/.cache/...
  bool disk_cache = true;
  bool inject_build_error = false;  // test hook: appends a syntax error to every kernel
};
Options parse_options(const lt_plugin_option* options, size_t count);

// One OpenCL device with its context and in-order queue. Immutable after creation except
// for the program cache, which locks.
class Device {
 public:
  static Device* create(const Options& options, const Logger& log);  // throws Failure
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  cl_context context() const { return context_; }
  cl_command_queue queue() const { return queue_; }
  cl_device_id id() const { return device_; }

  const std::string& name() const { return short_name_; }
  const std::string& kind() const { return kind_; }
  const std::string& description() const { return description_; }
  uint64_t memory_bytes() const { return global_mem_; }
  size_t max_work_group() const { return max_wg_; }
  uint64_t local_mem() const { return local_mem_; }
  bool has_fp64() const { return fp64_; }
  bool is_cpu() const { return kind_ == "cpu"; }
  // CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: SIMD lanes of a float (16 on AVX-512 PoCL).
  unsigned native_float_width() const { return native_float_; }

  // Returns a built program for `source` (cached in memory by source hash, then on disk by
  // device + driver + source hash). Failure carries the build log. `built` and `hit` are
  // incremented for statistics; `compile_ms` accumulates time spent building.
  cl_program program(const std::string& source);

  struct Stats {
    uint64_t programs_built = 0;
    uint64_t memory_hits = 0;
    uint64_t disk_hits = 0;
    double compile_ms = 0;
  };
  Stats stats() const;

 private:
  Device() = default;
  cl_program build_from_source(const std::string& source, uint64_t hash);
  cl_program load_from_disk(const std::string& path);
  void store_to_disk(const std::string& path, cl_program program);

  Options options_;
  Logger log_;
  cl_platform_id platform_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::string short_name_, kind_, description_, cache_key_, cache_dir_;
  uint64_t global_mem_ = 0, local_mem_ = 0;
  size_t max_wg_ = 1;
  unsigned native_float_ = 1;
  bool fp64_ = false;

  mutable std::mutex mutex_;  // guards programs_ and stats_
  std::map<uint64_t, cl_program> programs_;
  Stats stats_;
};

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ULL);
inline uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ULL) {
  return fnv1a(s.data(), s.size(), h);
}

}  // namespace lt::ocl
