// plugin_kit.hpp — writing a LazyTensor backend plugin in C++. Derive from lt::kit::Backend,
// implement supports() and compile() (and the buffer calls if your memory is not host memory),
// and export it with
//
//     LT_KIT_PLUGIN(MyBackend, "my_backend", "1.0")
//
// The kit fills the C function table of lt_plugin.h: it checks every argument struct
// (struct_size, NULLs, device index, byte ranges, buffer sizes), validates each graph with
// lt::lower::validate before your code sees it (so supports() and compile() may trust shapes,
// dtypes and attributes), keeps host buffers in a size-class cache, and turns every exception
// into an lt_plugin_error whose message starts with the plugin's name. The C ABI itself is
// unchanged: a C plugin can still fill the table by hand. Header-only; link LazyTensor::lower.
#pragma once

#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lazytensor/lower/disk_cache.hpp"
#include "lazytensor/lower/dynamic.hpp"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/graph.hpp"
#include "lazytensor/lt_plugin.h"

// The handles are the kit's: each plugin is its own shared object with hidden symbols, so these
// definitions never meet another plugin's.
struct lt_plugin_error {
  lt_status_code code;
  std::string message;
  bool is_static = false;  // the preallocated out-of-memory error; error_destroy keeps it
};
struct lt_plugin_buffer {
  void* data = nullptr;    // host memory (the default buffers), or null
  size_t nbytes = 0;       // the size the core asked for
  size_t capacity = 0;     // bytes actually reserved (size class)
  void* handle = nullptr;  // the backend's own device handle, if it keeps one
  size_t device = 0;
  bool borrowed = false;  // wraps memory the core lent (buffer_wrap_host): never freed here
};

namespace lt::kit {

using lower::Error;
using lower::fail;
using Buffer = lt_plugin_buffer;

// Plugin options ([plugins.<name>] in the config) as strings. take*() marks a key as known;
// after the backend's constructor, any key it did not take is an error naming it.
class Options {
 public:
  explicit Options(std::vector<std::pair<std::string, std::string>> items)
      : items_(std::move(items)) {}
  std::optional<std::string> take(const std::string& key) {
    known_.push_back(key);
    for (auto& [k, v] : items_)
      if (k == key) return v;
    return std::nullopt;
  }
  // An integer option in [lo, hi], or `dflt` when absent.
  int64_t take_int(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) {
    auto v = take(key);
    if (!v) return dflt;
    char* end = nullptr;
    long long x = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end || x < lo || x > hi)
      fail(LT_STATUS_INVALID_ARGUMENT, "option " + key + " = '" + *v + "' is not an integer in [" +
                                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
  // One of `choices`, or the first of them when absent.
  std::string take_choice(const std::string& key, const std::vector<std::string>& choices) {
    auto v = take(key);
    if (!v) return choices.front();
    for (const auto& c : choices)
      if (c == *v) return c;
    std::string all;
    for (const auto& c : choices) all += (all.empty() ? "" : ", ") + c;
    fail(LT_STATUS_INVALID_ARGUMENT, "option " + key + " = '" + *v + "' (expected " + all + ")");
  }
  // A boolean option (1/0, true/false), or `dflt` when absent.
  bool take_flag(const std::string& key, bool dflt) {
    std::string v = take_choice(key, {dflt ? "1" : "0", dflt ? "0" : "1", "true", "false"});
    return v == "1" || v == "true";
  }
  void check_all_known() const {
    for (const auto& [k, v] : items_) {
      bool ok = false;
      for (const auto& n : known_) ok = ok || n == k;
      if (ok) continue;
      std::string all;
      for (const auto& n : known_) all += (all.empty() ? "" : ", ") + n;
      fail(LT_STATUS_INVALID_ARGUMENT,
           "unknown option '" + k + "' (known: " + (all.empty() ? "none" : all) + ")");
    }
  }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
  std::vector<std::string> known_;
};

// The core's log callback (levels as spdlog's: 0 trace .. 4 error); silent when none.
class Log {
 public:
  Log(lt_plugin_log_fn fn, void* user) : fn_(fn), user_(user) {}
  void operator()(int level, const std::string& message) const {
    if (fn_) fn_(user_, level, message.c_str());
  }

 private:
  lt_plugin_log_fn fn_;
  void* user_;
};

// The persistent compile cache of a compiling backend (lazytensor/lower/disk_cache.hpp), from
// its options: cache_dir (default: $LT_CACHE_DIR/<backend>, else under the XDG cache
// directory), disk_cache (1/0, default 1) and disk_cache_mb (size cap, default 1024).
inline lower::DiskCache take_disk_cache(Options& o, const Log& log, std::string_view backend) {
  std::string dir = lower::DiskCache::default_dir(o.take("cache_dir").value_or(""), backend);
  const bool on = o.take_flag("disk_cache", true);
  const int64_t mb = o.take_int("disk_cache_mb", 1024, 1, int64_t{1} << 20);
  return lower::DiskCache(on ? dir : std::string(), uint64_t(mb) << 20,
                          [log](int level, const std::string& m) { log(level, m); });
}

// Named numbers for the stats call ("kernels", "compile_ms", ...).
class Stats {
 public:
  Stats(lt_plugin_stat_fn emit, void* user) : emit_(emit), user_(user) {}
  void operator()(const char* name, double value) const { emit_(user_, name, value); }

 private:
  lt_plugin_stat_fn emit_;
  void* user_;
};

// The persistent cache's counters, under the names every compiling backend reports them.
inline void disk_cache_stats(const lower::DiskCache& cache, const Stats& emit) {
  const lower::DiskCache::Stats d = cache.stats();
  emit("persistent_cache_hits", double(d.hits));
  emit("persistent_cache_misses", double(d.misses));
}

struct Device {
  std::string name = "cpu";  // short: "cpu", "pocl-cpu"
  std::string kind = "cpu";  // "cpu", "gpu", "tpu", "accelerator"
  std::string description;
  uint64_t memory_bytes = 0;
  bool host_addressable = true;  // buffer data is host memory the core may read and write
};

// Per-kernel profiling (plugin ABI 1.3): while the core profiles, its execute call carries a
// span callback, which the kit makes the current SpanSink of the thread for the length of the
// call. An executable reports each kernel or host step it runs through it; when the core does
// not profile (or is older than 1.3) the sink is empty and reporting costs one branch.
struct SpanSink {
  lt_plugin_span_fn fn = nullptr;
  void* user = nullptr;
  explicit operator bool() const { return fn != nullptr; }
  static int64_t ns(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  void operator()(const char* name, std::chrono::steady_clock::time_point start,
                  std::chrono::steady_clock::time_point end) const {
    if (fn) fn(user, name, ns(start), ns(end));
  }
  // A span from now until the returned guard ends (one kernel launch, say), reported only while
  // the core profiles. `wait` (an asynchronous device's synchronisation) runs first, so that
  // the span covers the work; it must not throw (the plugin's next checked sync reports errors).
  template <class Wait>
  [[nodiscard]] auto time(std::string name, Wait wait) const {
    struct Guard {
      const SpanSink* sink;
      std::string name;
      Wait wait;
      std::chrono::steady_clock::time_point start;
      ~Guard() {
        if (!sink) return;
        wait();
        (*sink)(name.c_str(), start, std::chrono::steady_clock::now());
      }
    };
    return Guard{fn ? this : nullptr, std::move(name), std::move(wait),
                 std::chrono::steady_clock::now()};
  }
};
// The sink of the execute call running on this thread.
inline SpanSink& current_spans() {
  static thread_local SpanSink sink;
  return sink;
}

// A compiled region. run() gets the region's input and output buffers in graph order, already
// checked to be non-NULL and at least as large as their nodes.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual void run(std::span<Buffer* const> inputs, std::span<Buffer* const> outputs) = 0;
  virtual void stats(const Stats&) const {}
  // Dynamic shapes (plugin ABI 1.2): an executable compiled from a dynamic graph that runs it
  // at every value of its symbols says so, and run_at() gets the values of each run (the
  // buffers are checked against the graph's sizes at those values).
  virtual bool dynamic() const { return false; }
  // Buffer donation (plugin ABI 1.3, docs/memory.md): true when run() stays right with
  // outputs[output] being the very buffer of inputs[input] (same byte size), i.e. nothing reads
  // that input after the output is written. The core then may pass one buffer for both. A
  // StepProgram answers with StepProgram::can_donate.
  virtual bool accepts_donation(size_t /*input*/, size_t /*output*/) const { return false; }
  virtual void run_at(std::span<const int64_t> /*values*/, std::span<Buffer* const> inputs,
                      std::span<Buffer* const> outputs) {
    run(inputs, outputs);
  }
};

// 64-byte aligned host memory; freed blocks are kept by size class (multiples of 64 below
// 4 KiB, then quarter steps between powers of two: at most 25% waste) up to a byte limit, so a
// steady-state training step maps no fresh pages.
class HostPool {
 public:
  explicit HostPool(size_t limit_bytes) : limit_(limit_bytes) {}
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;
  ~HostPool() {
    for (auto& [size, p] : cache_) std::free(p);
  }
  static size_t size_class(size_t n) {
    if (n <= 4096) return n == 0 ? 64 : (n + 63) / 64 * 64;
    size_t p = 4096;
    while (p < n / 2 + 1 && p < (size_t{1} << 62)) p <<= 1;
    for (size_t q = 1; q <= 4; ++q)
      if (p + p * q / 4 >= n) return p + p * q / 4;
    return p * 2;
  }
  void* get(size_t bytes, size_t* capacity) {
    size_t cls = size_class(bytes);
    *capacity = cls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++live_;
      auto it = cache_.find(cls);
      if (it != cache_.end()) {
        void* p = it->second;
        cache_.erase(it);
        cached_ -= cls;
        ++hits_;
        return p;
      }
      ++misses_;
    }
    void* p = std::aligned_alloc(64, cls);
    if (!p) {
      std::lock_guard<std::mutex> lock(mu_);
      --live_;
      fail(LT_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
    }
    return p;
  }
  void put(void* p, size_t capacity) noexcept {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --live_;
      if (cached_ + capacity <= limit_) {
        try {
          cache_.emplace(capacity, p);
          cached_ += capacity;
          return;
        } catch (...) {
        }
      }
    }
    std::free(p);
  }
  void stats(const Stats& emit) const {
    std::lock_guard<std::mutex> lock(mu_);
    emit("live_buffers", static_cast<double>(live_));
    emit("buffer_cache_bytes", static_cast<double>(cached_));
    emit("buffer_cache_hits", static_cast<double>(hits_));
    emit("buffer_cache_misses", static_cast<double>(misses_));
  }

 private:
  mutable std::mutex mu_;
  std::multimap<size_t, void*> cache_;
  size_t limit_, cached_ = 0;
  uint64_t live_ = 0, hits_ = 0, misses_ = 0;
};

// What a backend gets when its context is created.
struct Context {
  Options& options;
  Log log;
};

// At most `capacity` values by key, the least recently used dropped first; thread-safe. For a
// backend's in-memory cache of compiled programs (0: keeps nothing).
template <class K, class V>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}
  std::optional<V> get(const K& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }
  void put(const K& key, V value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!capacity_ || index_.count(key)) return;
    index_[key] = order_.emplace(order_.begin(), key, std::move(value));
    if (order_.size() > capacity_) index_.erase(order_.back().first), order_.pop_back();
  }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<K, V>> order_;  // most recent first
  std::map<K, typename std::list<std::pair<K, V>>::iterator> index_;
};

// The one dynamic-size mechanism of the kit's backends: a dynamic executable that prepares the
// graph at each run's values (lower::instantiate), keeping the last `keep`.
// - `PerValue(g, compile)`: `compile` makes each size's executable (cpu_eager: its host steps).
// - `PerValue(g, build, instance, own)`: one build serves every size that does not change its
//   code. `build` is the executable of `g` at its own values (its stats are reported);
//   `instance(at)` is that build at the values of `at` (cpu_jit: its kernels with the outer
//   extents lower::fit_build fitted, host steps prepared again; gpu_opencl: the launches,
//   arguments and arena layout lower::template_source gives), or nullptr where `at` needs code
//   of its own, which `own(at)` then compiles static (a dim reaching 1 or 0; stat
//   `dynamic_static_sizes`). `own` may be empty where `instance` never declines (a declined size
//   is then an error).
// Stats: `dynamic_sizes` (sizes prepared so far) and `dynamic_static_sizes`.
class PerValue : public Executable {
 public:
  using Compile = std::function<std::unique_ptr<Executable>(const lt_graph&)>;
  PerValue(const lt_graph& g, Compile compile, size_t keep = 8)
      : graph_(lower::copy_graph(g)), compile_(std::move(compile)), keep_(keep) {}
  PerValue(const lt_graph& g, std::shared_ptr<const Executable> build, Compile instance,
           Compile own, size_t keep = 8)
      : PerValue(g, nullptr, keep) {
    build_ = std::move(build);
    compile_ = [this, instance = std::move(instance), own = std::move(own)](const lt_graph& at) {
      std::unique_ptr<Executable> exe = instance(at);
      if (exe) return exe;
      if (!own)
        fail(LT_STATUS_INTERNAL, "the dynamic build declined a size and has no static compile");
      ++static_sizes_;
      return own(at);
    };
  }
  bool dynamic() const override { return true; }
  void run(std::span<Buffer* const> in, std::span<Buffer* const> out) override {
    const lt_graph& g = graph_.view();
    run_at({g.symbol_values, g.num_symbols}, in, out);
  }
  void run_at(std::span<const int64_t> values, std::span<Buffer* const> in,
              std::span<Buffer* const> out) override {
    std::vector<int64_t> key(values.begin(), values.end());
    std::shared_ptr<Executable> exe;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = cache_.begin(); it != cache_.end(); ++it)
        if (it->first == key) {
          cache_.splice(cache_.begin(), cache_, it);
          exe = it->second;
          break;
        }
    }
    if (!exe) {
      lower::OwnedGraph at = lower::instantiate(graph_.view(), values);
      exe = compile_(at.view());
      std::lock_guard<std::mutex> lock(mu_);
      cache_.emplace_front(key, exe);
      if (cache_.size() > keep_) cache_.pop_back();
      ++instances_;
    }
    exe->run(in, out);
  }
  void stats(const Stats& emit) const override {
    if (build_) build_->stats(emit);
    emit("dynamic_sizes", static_cast<double>(instances_.load()));
    emit("dynamic_static_sizes", static_cast<double>(static_sizes_.load()));
  }

 private:
  lower::OwnedGraph graph_;
  Compile compile_;
  size_t keep_;
  std::shared_ptr<const Executable> build_;  // the one build, if any
  std::mutex mu_;
  std::list<std::pair<std::vector<int64_t>, std::shared_ptr<Executable>>> cache_;
  std::atomic<size_t> instances_{0}, static_sizes_{0};
};

// The host pointers of `buffers` (for backends whose buffers are host memory).
inline std::vector<void*> data_of(std::span<lt_plugin_buffer* const> buffers) {
  std::vector<void*> out(buffers.size());
  for (size_t k = 0; k < buffers.size(); ++k) out[k] = buffers[k]->data;
  return out;
}

// The executable of a backend whose compiled form is a host step program (`Steps`:
// lazytensor/host/steps.hpp's StepProgram, for cpu_eager and cpu_jit; a template so that the
// installed kit does not depend on the in-tree host kernels): run() passes the buffers' host
// pointers and, while the core profiles, its span callback (each step a child span); donation
// is what the program allows (its steps never read an input after writing the output).
template <class Steps>
class StepsExecutable : public Executable {
 public:
  void run(std::span<Buffer* const> inputs, std::span<Buffer* const> outputs) override {
    const SpanSink& spans = current_spans();
    steps().run(data_of(inputs).data(), data_of(outputs).data(), spans.fn, spans.user);
  }
  bool accepts_donation(size_t input, size_t output) const override {
    return steps().can_donate(input, output);
  }
  virtual const Steps& steps() const = 0;
};

// "<file> <size> <mtime>" of the shared object holding `symbol` (this plugin's build): part
// of a persistent cache key, so that a rebuilt plugin never loads what an older build stored.
inline std::string shared_object_id(const void* symbol) {
  Dl_info info{};
  struct stat st {};
  if (!dladdr(symbol, &info) || !info.dli_fname || stat(info.dli_fname, &st) != 0)
    return "(unknown build)";
  return std::string(info.dli_fname) + " " + std::to_string(st.st_size) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

// The backend. One instance per plugin context; the core may call it from several threads at
// once (never freeing a buffer or destroying an executable another call uses), so state made
// after construction must be immutable or locked.
class Backend {
 public:
  // Takes option buffer_cache_mb (default 1024): the host buffer cache's bound.
  explicit Backend(Context& ctx)
      : pool_(static_cast<size_t>(ctx.options.take_int("buffer_cache_mb", 1024, 0, 1 << 30))
              << 20) {}
  virtual ~Backend() = default;

  virtual std::vector<Device> devices() const { return {Device{}}; }

  // Buffers: host memory from the pool by default. A backend with device memory overrides
  // all five (and reports host_addressable = false unless its data pointers are host memory).
  virtual Buffer* alloc(size_t device, size_t nbytes) {
    auto b = std::make_unique<Buffer>();
    b->data = pool_.get(nbytes, &b->capacity);
    b->nbytes = nbytes;
    b->device = device;
    return b.release();
  }
  virtual void free(Buffer* b) noexcept {
    pool_.put(b->data, b->capacity);
    delete b;
  }
  // n == 0: an empty tensor's buffer and the caller's pointer may both be NULL (memcpy of
  // NULL is undefined even for 0 bytes).
  virtual void upload(Buffer* b, size_t offset, const void* src, size_t n) {
    if (n) std::memcpy(static_cast<char*>(b->data) + offset, src, n);
  }
  virtual void download(const Buffer* b, size_t offset, void* dst, size_t n) {
    if (n) std::memcpy(dst, static_cast<const char*>(b->data) + offset, n);
  }
  virtual void* host_ptr(Buffer* b) { return b->data; }

  // Whether node `node` of `g` runs here; the node and its operands are validated.
  virtual bool supports(const lt_graph& g, size_t node, size_t device) = 0;
  // Compiles a region (validated; borrowed for the call: copy what the executable needs).
  virtual std::unique_ptr<Executable> compile(const lt_graph& g, size_t device) = 0;
  // Context-wide statistics (the default: the host buffer pool's).
  virtual void stats(const Stats& emit) const { pool_.stats(emit); }

 protected:
  HostPool pool_;
};

namespace detail {

// An executable with the byte sizes of its inputs and outputs (from the graph it was built
// from), so execute() can check the buffers it is given.
struct Compiled {
  std::unique_ptr<Executable> exe;
  std::vector<size_t> in_bytes, out_bytes;
  // A dynamic executable: the symbols it was compiled at and its inputs' and outputs' shapes as
  // forms of them, for the buffer checks of a run at other values.
  std::vector<int64_t> symbols;
  std::vector<std::vector<lower::DimForm>> in_forms, out_forms;
  std::vector<lt_dtype> in_dtypes, out_dtypes;
};

inline size_t node_bytes(const lt_graph_node& n) {
  return static_cast<size_t>(lower::DescRef(n).numel()) * lt_dtype_size(n.dtype);
}

}  // namespace detail
}  // namespace lt::kit

// The C function table filled from a Backend, and LT_KIT_PLUGIN.
#include "lazytensor/kit/c_table.hpp"  // IWYU pragma: export
