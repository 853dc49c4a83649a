// runtime.h — the objects behind the C handles: runtime, plugins, devices, tensors, plus the
// per-runtime services they share (config, metrics, compile cache, caching allocator).
// Ownership: lt_runtime is reference counted (the application's handle + one per live tensor);
// it owns plugins, devices and the compile cache. Tensors own a reference to their node.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <future>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "async.h"
#include "fallback_policy.h"
#include "ir.h"
#include "lazytensor/lt.h"
#include "lazytensor/lt_plugin.h"

namespace lt {
namespace lower {
class OwnedGraph;
}

class PlanCache;
class Profiler;

// Effective configuration after file < environment < lt_runtime_options merging.
struct Config {
  std::string device;
  std::string fallback = "warn";
  std::string log_level = "warn";
  std::vector<std::string>
      plugin_path;  // explicit/env/config directories (install dir added later)
  size_t cache_capacity = 256;
  // Nodes of one compiled region at most; a larger graph is cut into several (cut.h).
  size_t max_region_nodes = 65536;
  bool background_compile = false;       // compile on a thread, run on the fallback meanwhile
  std::string dynamic_shapes = "auto";   // auto: a size seen with a second value is dynamic; off
  std::vector<int64_t> dynamic_buckets;  // static backends' bucket sizes; beyond: powers of two
  bool async_execution = false;          // lt_sync queues the execution on a per-device worker
  std::string dump_dir;
  std::string optimize = "exact";  // graph optimiser: none | exact | fast (docs/optimizer.md)
  std::string profile;      // Chrome trace file of every step's stages (profile.h); "" when off
  std::string config_file;  // the file read, if any
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> plugin_options;
  std::vector<std::string> warnings;  // unknown keys etc., logged once the logger is set up
};
// Reads file + environment + options; throws lt::Error (IO_ERROR names file and parser message).
Config load_config(const lt_runtime_options* options);

// Counters; atomics so tracing threads never take a lock.
struct Metrics {
  std::atomic<uint64_t> ops_traced{0}, graphs_executed{0}, cache_hits{0}, cache_misses{0},
      compiles{0}, compile_ns{0}, execute_ns{0}, bytes_to_device{0}, bytes_from_device{0},
      bytes_between_backends{0}, fallback_nodes{0}, decomposed_nodes{0}, compile_failures{0},
      alloc_hits{0}, alloc_misses{0};
  // Buffer donation (run.cpp): outputs written into a donated input's buffer, their bytes, and
  // the bytes the last executed graph donated (a training step's "donated bytes per step").
  std::atomic<uint64_t> donated_buffers{0}, donated_bytes{0}, donated_bytes_last{0};
  std::mutex mu;                              // guards the named maps and reasons
  std::map<std::string, double> named;        // "fallback.<op>", "plugin.<backend>.<stat>"
  std::deque<std::string> recompile_reasons;  // last 16
  void add_named(const std::string& k, double v) {
    std::lock_guard lk(mu);
    named[k] += v;
  }
  void set_named(const std::string& k, double v) {
    std::lock_guard lk(mu);
    named[k] = v;
  }
  void reset();
};

struct Plugin;

// Per-device caching allocator: reuses plugin buffers by size class.
class Allocator {
 public:
  explicit Allocator(Device* dev) : dev_(dev) {}
  BufferPtr allocate(size_t nbytes);
  void release(Buffer* b) noexcept;
  void trim() noexcept;  // frees every cached buffer
  size_t bytes_cached() const { return bytes_cached_.load(std::memory_order_relaxed); }
  size_t bytes_in_use() const { return bytes_in_use_.load(std::memory_order_relaxed); }
  // Memory accounting (docs/memory.md): bytes of live device values (the sizes asked for, not
  // the size classes) now and their highest value since the last reset_peak (lt_metrics_reset).
  size_t bytes_live() const { return bytes_live_.load(std::memory_order_relaxed); }
  size_t bytes_peak() const { return bytes_peak_.load(std::memory_order_relaxed); }
  void reset_peak() noexcept { bytes_peak_.store(bytes_live_.load(std::memory_order_relaxed)); }

 private:
  Device* dev_;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<lt_plugin_buffer*>> free_;
  std::atomic<size_t> bytes_cached_{0}, bytes_in_use_{0}, bytes_live_{0}, bytes_peak_{0};
};

struct Plugin {
  std::string name, version, path;
  const lt_plugin_api* api = nullptr;
  lt_plugin_context* ctx = nullptr;
  uint32_t abi_major = 0, abi_minor = 0;
  std::shared_ptr<spdlog::logger> logger;
  std::vector<Device*> devices;
  std::vector<std::pair<std::string, std::string>> options;
  uint64_t options_hash = 0;

  // True if the table's struct_size covers the field at `offset` and the pointer is set.
  bool has(size_t offset_end) const { return api->struct_size >= offset_end; }
  // Throws lt::Error(PLUGIN_ERROR or the plugin's code) for a non-NULL plugin error, destroying it.
  void check(lt_plugin_error* err, const char* what) const;
  // Calls one fallible table function (`f` returns its lt_plugin_error*) and checks the result.
  // A C++ exception that escapes the plugin (an ABI violation, but a common bug) is caught here
  // and reported as PLUGIN_ERROR naming the plugin and the call, instead of unwinding the core.
  template <class F>
  void call(const char* what, F&& f) const {
    lt_plugin_error* err = nullptr;
    try {
      err = f();
    } catch (...) {
      escaped(what);
    }
    check(err, what);
  }
  // Same for a call that cannot fail (free/destroy): an escaping exception is logged and
  // swallowed, since these run in destructors and cleanup paths.
  template <class F>
  void call_noexcept(const char* what, F&& f) const noexcept {
    try {
      f();
    } catch (...) {
      log_escaped(what);
    }
  }
  [[noreturn]] void escaped(const char* what) const;  // throws lt::Error (plugin_loader.cpp)
  void log_escaped(const char* what) const noexcept;
};
#define LT_PLUGIN_HAS(plugin, field) \
  ((plugin)->has(offsetof(lt_plugin_api, field) + sizeof(void*)) && (plugin)->api->field)

}  // namespace lt

struct lt_device {
  lt::Runtime* runtime = nullptr;
  lt::Plugin* plugin = nullptr;
  size_t index = 0;
  std::string name;  // "cpu_eager:0"
  std::string info_name, kind, description;
  uint64_t memory_bytes = 0;
  bool host_addressable = false;
  std::unique_ptr<lt::Allocator> allocator;

  std::mutex exec_mu;  // graph collection, materialisation and execution on this device
  // Config async_execution: the FIFO of compiled graphs its worker runs (async.h); null when
  // execution is synchronous.
  std::unique_ptr<lt::ExecQueue> queue;

  // The step-boundary guard (executor.cpp, exec_mu): reads since the last lt_sync whose graph
  // grew and compiled anew, the last read graph's size, and whether the warning was given.
  struct StepGuard {
    size_t last_nodes = 0;
    int growing_reads = 0;
    bool warned = false;
  } step_guard;
  // The profiler's "trace" span of this device runs from the end of its last lt_sync to the
  // start of the next (executor.cpp; steady-clock ns, 0 before the first; atomic: several
  // threads may sync one device).
  std::atomic<int64_t> profile_step_end_ns{0};

  // Registry of live tensors that may hold pending nodes (intrusive list, insertion order).
  std::mutex reg_mu;
  lt_tensor* reg_head = nullptr;
  lt_tensor* reg_tail = nullptr;
};

// Handles come from a pool (runtime.cpp) that never returns memory to the heap, and a freed
// handle waits in a FIFO quarantine before its slot is reused: a handle used after its last
// lt_tensor_free still points at a slot marked dead, which the C API reports as
// INVALID_ARGUMENT naming the handle (lt::live_tensor) instead of reading freed memory.
struct lt_tensor {
  static constexpr uint32_t kLive = 0x4c54544eu;  // "LTTN"
  static constexpr uint32_t kDead = 0xdeadbeefu;
  uint32_t magic = kLive;  // kDead while the slot is free
  std::atomic<uint32_t> refs{1};
  lt::Node* node = nullptr;  // owned reference
  lt_device* device = nullptr;
  lt_tensor* prev = nullptr;  // device registry links (reg_mu)
  lt_tensor* next = nullptr;
  std::atomic<bool> registered{false};  // cleared (under reg_mu) once unlinked; never set again
};

struct lt_runtime {
  std::atomic<int64_t> refs{1};
  lt::Config config;
  lt::FallbackPolicy policy = lt::FallbackPolicy::kWarn;
  std::shared_ptr<spdlog::logger> log;
  std::vector<std::unique_ptr<lt::Plugin>> plugins;
  struct Failed {
    std::string path, reason;
  };
  std::vector<Failed> failed;
  std::vector<std::string> search_paths;
  std::vector<std::unique_ptr<lt_device>> devices;
  lt_device* default_device = nullptr;
  lt::Plugin* fallback = nullptr;  // "cpu_eager", if loaded
  std::string openblas_note;
  lt::Metrics metrics;

  // Every compiled plan, dynamic plan, background compile and per-device compile history
  // (plan_cache.h).
  std::unique_ptr<lt::PlanCache> plans;
  // Config profile / LT_PROFILE: the spans of every step (profile.h), written at destruction.
  std::unique_ptr<lt::Profiler> profiler;

  std::mutex warn_mu;
  std::vector<std::string> warned_ops;  // fallback policy "warn": once per op

  ~lt_runtime();
};

namespace lt {

void runtime_retain(Runtime* rt) noexcept;
void runtime_release(Runtime* rt) noexcept;
Runtime* runtime_create(const lt_runtime_options* options);  // throws lt::Error
std::string plugin_report(Runtime* rt, bool json);
// Context-wide stats a plugin reports (its optional `stats` call with no executable).
void collect_ctx_stats(Plugin* p, nlohmann::json& out);
void load_plugins(Runtime* rt);  // plugin_loader.cpp
std::string choose_openblas_coretype();

// Tensor helpers (tensor.cpp)
Tensor* tensor_new(Device* dev, NodeRef node);  // registers pending tensors
void tensor_release(Tensor* t) noexcept;
// Takes `t` out of its device's registry of pending tensors (no-op when not in it); the caller
// holds dev->reg_mu.
void tensor_unlink(Device* dev, Tensor* t) noexcept;
// Throws INVALID_ARGUMENT "<fn>: <what> <handle> was used after lt_tensor_free ..." (runtime.cpp).
[[noreturn]] void dead_tensor(const Tensor* t, const char* fn, const char* what);
// `t` itself when it is a live handle; NULL and freed handles are INVALID_ARGUMENT errors.
inline Tensor* live_tensor(Tensor* t, const char* fn, const char* what) {
  if (!t || t->magic != Tensor::kLive) dead_tensor(t, fn, what);
  return t;
}
// The same check for the accessors that report a bad handle by their return value.
inline bool is_live(const Tensor* t) noexcept {
  return t && t->magic == Tensor::kLive;
}

std::string metrics_report(Runtime* rt, bool json);
void reset_graph_timings(Runtime* rt) noexcept;  // the per-graph timings of cached plans
bool metric_get(Runtime* rt, const std::string& name, double* out);

}  // namespace lt
