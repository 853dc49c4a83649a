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

struct Device {
  std::string name = "cpu";  // short: "cpu", "pocl-cpu"
  std::string kind = "cpu";  // "cpu", "gpu", "tpu", "accelerator"
  std::string description;
  uint64_t memory_bytes = 0;
  bool host_addressable = true;  // buffer data is host memory the core may read and write
};

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

// A dynamic executable for a backend whose compile is cheap (an interpreter): it compiles the
// graph at each run's values with `compile` (lower::instantiate), keeping the last `keep`.
class PerValue : public Executable {
 public:
  using Compile = std::function<std::unique_ptr<Executable>(const lt_graph&)>;
  PerValue(const lt_graph& g, Compile compile, size_t keep = 8)
      : graph_(lower::copy_graph(g)), compile_(std::move(compile)), keep_(keep) {}
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
    emit("instances", static_cast<double>(instances_));
  }

 private:
  lower::OwnedGraph graph_;
  Compile compile_;
  size_t keep_;
  std::mutex mu_;
  std::list<std::pair<std::vector<int64_t>, std::shared_ptr<Executable>>> cache_;
  size_t instances_ = 0;
};

// The host pointers of `buffers` (for backends whose buffers are host memory).
inline std::vector<void*> data_of(std::span<lt_plugin_buffer* const> buffers) {
  std::vector<void*> out(buffers.size());
  for (size_t k = 0; k < buffers.size(); ++k) out[k] = buffers[k]->data;
  return out;
}

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

struct lt_plugin_context {
  std::unique_ptr<lt::kit::Backend> backend;
  std::vector<lt::kit::Device> devices;
};
struct lt_plugin_executable {
  lt::kit::detail::Compiled compiled;
};

namespace lt::kit::detail {

// The C table of backend B, named `name`. One per plugin (function-local statics).
template <class B>
struct Table {
  static inline const char* name = "";
  static inline const char* version = "";

  // The error returned when not even an error can be allocated; built with the table.
  static lt_plugin_error& oom() {
    static lt_plugin_error e{LT_STATUS_OUT_OF_MEMORY, std::string(name) + ": out of memory", true};
    return e;
  }
  static lt_plugin_error* make(lt_status_code code, const std::string& message) noexcept {
    try {
      return new lt_plugin_error{code, std::string(name) + ": " + message};
    } catch (...) {
      return &oom();
    }
  }
  // The one conversion point from C++ exceptions to ABI errors.
  template <class F>
  static lt_plugin_error* guard(F&& body) noexcept {
    try {
      body();
      return nullptr;
    } catch (const Error& e) {
      return make(e.code(), e.what());
    } catch (const std::bad_alloc&) {
      return make(LT_STATUS_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
      return make(LT_STATUS_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
      return make(LT_STATUS_INTERNAL, "internal error: unknown exception");
    }
  }
  template <class Args>
  static void check(const Args* a, size_t need, const char* what) {
    if (!a) fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": args is NULL");
    if (a->struct_size < need)
      fail(LT_STATUS_ABI_MISMATCH, std::string(what) + ": struct_size " +
                                       std::to_string(a->struct_size) + " is smaller than " +
                                       std::to_string(need));
  }
  static Backend& ctx(lt_plugin_context* c, const char* what) {
    if (!c || !c->backend)
      fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": context is NULL");
    return *c->backend;
  }
  static void device(lt_plugin_context* c, size_t d, const char* what) {
    if (d >= c->devices.size())
      fail(LT_STATUS_NOT_FOUND, std::string(what) + ": device " + std::to_string(d) +
                                    " does not exist (" + std::to_string(c->devices.size()) +
                                    " devices)");
  }

  static const char* error_message(const lt_plugin_error* e) { return e ? e->message.c_str() : ""; }
  static lt_status_code error_code(const lt_plugin_error* e) { return e ? e->code : LT_STATUS_OK; }
  static void error_destroy(lt_plugin_error* e) {
    if (e && !e->is_static) delete e;
  }

  static lt_plugin_error* create(lt_plugin_create_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE, "create");
      if (a->core_abi_major != LT_PLUGIN_ABI_MAJOR)
        fail(LT_STATUS_ABI_MISMATCH, "core ABI major " + std::to_string(a->core_abi_major) +
                                         " != plugin ABI major " +
                                         std::to_string(LT_PLUGIN_ABI_MAJOR));
      if (a->num_options && !a->options)
        fail(LT_STATUS_INVALID_ARGUMENT, "create: options is NULL");
      std::vector<std::pair<std::string, std::string>> kv;
      for (size_t i = 0; i < a->num_options; ++i) {
        const lt_plugin_option& o = a->options[i];
        if (!o.key || !o.value) fail(LT_STATUS_INVALID_ARGUMENT, "option with a NULL key or value");
        kv.emplace_back(o.key, o.value);
      }
      Options options(std::move(kv));
      Context context{options, Log(a->log, a->log_user)};
      auto c = std::make_unique<lt_plugin_context>();
      c->backend = std::make_unique<B>(context);
      options.check_all_known();
      c->devices = c->backend->devices();
      a->context = c.release();
    });
  }
  static void destroy(lt_plugin_context* c) { delete c; }

  static lt_plugin_error* device_count(lt_plugin_context* c, size_t* out) {
    return guard([&] {
      ctx(c, "device_count");
      if (!out) fail(LT_STATUS_INVALID_ARGUMENT, "device_count: out is NULL");
      *out = c->devices.size();
    });
  }
  static lt_plugin_error* device_info(lt_plugin_device_info_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE, "device_info");
      ctx(a->context, "device_info");
      device(a->context, a->device, "device_info");
      const Device& d = a->context->devices[a->device];
      a->name = d.name.c_str();
      a->kind = d.kind.c_str();
      a->description = d.description.c_str();
      a->memory_bytes = d.memory_bytes;
      a->host_addressable = d.host_addressable ? 1 : 0;
    });
  }

  static Backend& buffer_call(lt_plugin_buffer_args* a, const char* what, bool needs_buffer) {
    check(a, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE, what);
    Backend& b = ctx(a->context, what);
    device(a->context, a->device, what);
    if (needs_buffer && !a->buffer)
      fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": buffer is NULL");
    return b;
  }
  static void range(const lt_plugin_buffer_args* a, const char* what) {
    if (a->offset > a->buffer->nbytes || a->nbytes > a->buffer->nbytes - a->offset)
      fail(LT_STATUS_INVALID_ARGUMENT,
           std::string(what) + ": byte range [" + std::to_string(a->offset) + ", " +
               std::to_string(a->offset + a->nbytes) + ") exceeds the buffer's " +
               std::to_string(a->buffer->nbytes) + " bytes");
  }
  static lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* a) {
    return guard([&] {
      Backend& b = buffer_call(a, "buffer_alloc", false);
      a->buffer = b.alloc(a->device, a->nbytes);
      if (!a->buffer) fail(LT_STATUS_OUT_OF_MEMORY, "buffer_alloc returned no buffer");
    });
  }
  static void buffer_free(lt_plugin_context* c, lt_plugin_buffer* buf) {
    if (!buf) return;
    if (buf->borrowed) {  // the memory belongs to whoever lent it; only the handle is ours
      delete buf;
      return;
    }
    if (c && c->backend) {
      c->backend->free(buf);
    } else {
      std::free(buf->data);
      delete buf;
    }
  }
  static lt_plugin_error* buffer_upload(lt_plugin_buffer_args* a) {
    return guard([&] {
      Backend& b = buffer_call(a, "buffer_upload", true);
      range(a, "buffer_upload");
      if (!a->nbytes) return;
      if (!a->src) fail(LT_STATUS_INVALID_ARGUMENT, "buffer_upload: src is NULL");
      b.upload(a->buffer, a->offset, a->src, a->nbytes);
    });
  }
  static lt_plugin_error* buffer_download(lt_plugin_buffer_args* a) {
    return guard([&] {
      Backend& b = buffer_call(a, "buffer_download", true);
      range(a, "buffer_download");
      if (!a->nbytes) return;
      if (!a->dst) fail(LT_STATUS_INVALID_ARGUMENT, "buffer_download: dst is NULL");
      b.download(a->buffer, a->offset, a->dst, a->nbytes);
    });
  }
  static lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* a) {
    return guard([&] {
      Backend& b = buffer_call(a, "buffer_host_ptr", true);
      a->host_ptr =
          a->context->devices[a->device].host_addressable ? b.host_ptr(a->buffer) : nullptr;
    });
  }

  // Host memory is used in place on a host-addressable device when it is 64-byte aligned, the
  // alignment of the kit's own buffers (generated kernels may rely on it); else the core copies.
  static lt_plugin_error* buffer_wrap_host(lt_plugin_buffer_args* a) {
    return guard([&] {
      buffer_call(a, "buffer_wrap_host", false);
      a->buffer = nullptr;
      if (!a->context->devices[a->device].host_addressable || !a->host_ptr ||
          reinterpret_cast<uintptr_t>(a->host_ptr) % 64 != 0)
        return;
      auto b = std::make_unique<Buffer>();
      b->data = a->host_ptr;
      b->nbytes = b->capacity = a->nbytes;
      b->device = a->device;
      b->borrowed = true;
      a->buffer = b.release();
    });
  }

  static const lt_graph& graph(const lt_graph* g, const char* what) {
    if (!g) fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": graph is NULL");
    return *g;
  }
  static lt_plugin_error* supports(lt_plugin_supports_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE, "supports");
      Backend& b = ctx(a->context, "supports");
      device(a->context, a->device, "supports");
      const lt_graph& g = graph(a->graph, "supports");
      if (a->node >= g.num_nodes || !g.nodes)
        fail(LT_STATUS_INVALID_ARGUMENT, "supports: node " + std::to_string(a->node) +
                                             " is out of range (" + std::to_string(g.num_nodes) +
                                             " nodes)");
      a->supported = 0;
      if (g.nodes[a->node].op && std::strcmp(g.nodes[a->node].op, "input") == 0) {
        a->supported = 1;  // leaves are bound to buffers; every backend takes them
        return;
      }
      try {
        lower::validate_node(g, a->node);
      } catch (const Error&) {
        return;  // a node this plugin cannot trust: "no", not an error
      }
      a->supported = b.supports(g, a->node, a->device) ? 1 : 0;
    });
  }
  static lt_plugin_error* compile(lt_plugin_compile_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE, "compile");
      Backend& b = ctx(a->context, "compile");
      device(a->context, a->device, "compile");
      const lt_graph& g = graph(a->graph, "compile");
      lower::validate(g);
      auto exe = std::make_unique<lt_plugin_executable>();
      exe->compiled.exe = b.compile(g, a->device);
      if (!exe->compiled.exe) fail(LT_STATUS_INTERNAL, "compile returned no executable");
      for (size_t k = 0; k < g.num_inputs; ++k)
        exe->compiled.in_bytes.push_back(node_bytes(g.nodes[g.inputs[k]]));
      for (size_t k = 0; k < g.num_outputs; ++k)
        exe->compiled.out_bytes.push_back(node_bytes(g.nodes[g.outputs[k]]));
      lower::DynamicView dv = lower::dynamic_of(g);
      if (!dv.empty() && exe->compiled.exe->dynamic() &&
          a->struct_size >= LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE) {
        Compiled& c = exe->compiled;
        c.symbols.assign(dv.values.begin(), dv.values.end());
        for (size_t k = 0; k < g.num_inputs; ++k) {
          c.in_forms.push_back(lower::shape_forms(g, static_cast<size_t>(g.inputs[k])));
          c.in_dtypes.push_back(g.nodes[g.inputs[k]].dtype);
        }
        for (size_t k = 0; k < g.num_outputs; ++k) {
          c.out_forms.push_back(lower::shape_forms(g, static_cast<size_t>(g.outputs[k])));
          c.out_dtypes.push_back(g.nodes[g.outputs[k]].dtype);
        }
        a->dynamic = 1;
      }
      a->executable = exe.release();
    });
  }
  static void buffers(lt_plugin_buffer* const* bufs, size_t n, const std::vector<size_t>& need,
                      const char* what) {
    if (n != need.size())
      fail(LT_STATUS_INVALID_ARGUMENT, std::string("execute: got ") + std::to_string(n) + " " +
                                           what + "s, the executable has " +
                                           std::to_string(need.size()));
    if (n && !bufs) fail(LT_STATUS_INVALID_ARGUMENT, std::string("execute: ") + what + "s is NULL");
    for (size_t k = 0; k < n; ++k) {
      if (!bufs[k])
        fail(LT_STATUS_INVALID_ARGUMENT,
             std::string("execute: ") + what + " " + std::to_string(k) + " is NULL");
      if (bufs[k]->nbytes < need[k])
        fail(LT_STATUS_INVALID_ARGUMENT, std::string("execute: ") + what + " " + std::to_string(k) +
                                             " has " + std::to_string(bufs[k]->nbytes) +
                                             " bytes, needs " + std::to_string(need[k]));
    }
  }
  static lt_plugin_error* execute(lt_plugin_execute_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE, "execute");
      ctx(a->context, "execute");
      if (!a->executable) fail(LT_STATUS_INVALID_ARGUMENT, "execute: executable is NULL");
      const Compiled& c = a->executable->compiled;
      std::span<const int64_t> values;
      if (a->struct_size >= LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE && a->num_symbols) {
        if (c.symbols.size() != a->num_symbols || !a->symbol_values)
          fail(LT_STATUS_INVALID_ARGUMENT,
               "execute: " + std::to_string(a->num_symbols) + " symbol values for an executable " +
                   (c.symbols.empty() ? std::string("compiled static")
                                      : "of " + std::to_string(c.symbols.size()) + " symbols"));
        values = {a->symbol_values, a->num_symbols};
        for (int64_t v : values)
          if (v < 0) fail(LT_STATUS_INVALID_ARGUMENT, "execute: a negative symbol value");
      }
      if (values.empty()) {
        buffers(a->inputs, a->num_inputs, c.in_bytes, "input");
        buffers(a->outputs, a->num_outputs, c.out_bytes, "output");
        c.exe->run({a->inputs, a->num_inputs}, {a->outputs, a->num_outputs});
        return;
      }
      auto need = [&](const auto& forms, const auto& dtypes) {
        std::vector<size_t> bytes;
        for (size_t k = 0; k < forms.size(); ++k)
          bytes.push_back(lower::bytes_at(forms[k], dtypes[k], values));
        return bytes;
      };
      buffers(a->inputs, a->num_inputs, need(c.in_forms, c.in_dtypes), "input");
      buffers(a->outputs, a->num_outputs, need(c.out_forms, c.out_dtypes), "output");
      c.exe->run_at(values, {a->inputs, a->num_inputs}, {a->outputs, a->num_outputs});
    });
  }
  static void executable_destroy(lt_plugin_context*, lt_plugin_executable* e) { delete e; }
  static lt_plugin_error* stats(lt_plugin_stats_args* a) {
    return guard([&] {
      check(a, LT_PLUGIN_STATS_ARGS_STRUCT_SIZE, "stats");
      Backend& b = ctx(a->context, "stats");
      if (!a->emit) fail(LT_STATUS_INVALID_ARGUMENT, "stats: emit is NULL");
      Stats emit(a->emit, a->user);
      if (a->executable)
        a->executable->compiled.exe->stats(emit);
      else
        b.stats(emit);
    });
  }

  static const lt_plugin_api* api() {
    oom();
    static const lt_plugin_api table = {
        LT_PLUGIN_API_STRUCT_SIZE,
        LT_PLUGIN_ABI_MAJOR,
        LT_PLUGIN_ABI_MINOR,
        name,
        version,
        error_message,
        error_code,
        error_destroy,
        create,
        destroy,
        device_count,
        device_info,
        buffer_alloc,
        buffer_free,
        buffer_upload,
        buffer_download,
        buffer_host_ptr,
        supports,
        compile,
        execute,
        executable_destroy,
        stats,
        buffer_wrap_host,
    };
    return &table;
  }
};

}  // namespace lt::kit::detail

// Exports backend class B as plugin `name` (lowercase [a-z0-9_]) of version `version`.
#define LT_KIT_PLUGIN(B, plugin_name, plugin_version)                        \
  extern "C" LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) { \
    using T = ::lt::kit::detail::Table<B>;                                   \
    T::name = plugin_name;                                                   \
    T::version = plugin_version;                                             \
    return T::api();                                                         \
  }
