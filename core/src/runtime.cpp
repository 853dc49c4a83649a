// runtime.cpp — runtime creation and teardown, device selection, the caching allocator,
// tensor handles and the device registry of pending tensors, and the plugin report.
#include "runtime.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "autograd/autograd.h"  // autograd hook (train engineer)
#include "error.h"
#include "device_client.h"
#include "plan_cache.h"
#include "profile.h"
#include "ops.h"

namespace lt {

namespace {
std::once_flag g_openblas_once;
std::string g_openblas_note;

std::shared_ptr<spdlog::logger> core_logger(spdlog::level::level_enum lv) {
  auto lg = spdlog::get("lt.core");
  if (!lg) {
    try {
      lg = spdlog::stderr_color_mt("lt.core");
    } catch (const spdlog::spdlog_ex&) {
      lg = spdlog::get("lt.core");
    }
  }
  lg->set_level(lv);
  return lg;
}

// Size classes: 4 per power of two above 256 bytes, so reuse wastes at most ~19%.
size_t size_class(size_t n) {
  if (n <= 256) return 256;
  size_t p = 1;
  while (p < n) p <<= 1;
  size_t q = p / 8;  // candidates p/2 + k*q for k=1..4
  for (size_t c = p / 2 + q; c < p; c += q)
    if (c >= n) return c;
  return p;
}
}  // namespace

// ---- allocator ----------------------------------------------------------------------------

BufferPtr Allocator::allocate(size_t nbytes) {
  size_t cls = size_class(nbytes);
  Metrics& m = dev_->runtime->metrics;
  lt_plugin_buffer* h = nullptr;
  {
    std::lock_guard lk(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      h = it->second.back();
      it->second.pop_back();
      bytes_cached_ -= cls;
    }
  }
  if (h) {
    m.alloc_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    m.alloc_misses.fetch_add(1, std::memory_order_relaxed);
    try {
      h = client::alloc(dev_, cls);
    } catch (const Error&) {
      // Out of device memory is often just the cache holding everything: trim and retry once.
      trim();
      h = client::alloc(dev_, cls);
    }
  }
  bytes_in_use_ += cls;
  const size_t live = bytes_live_.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  for (size_t peak = bytes_peak_.load(std::memory_order_relaxed);
       live > peak && !bytes_peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed);) {
  }
  auto* b = new Buffer;
  b->device = dev_;
  b->handle = h;
  b->nbytes = nbytes;
  b->capacity = cls;
  return BufferPtr(b);
}

void Allocator::release(Buffer* b) noexcept {
  if (b->lender_release) {  // never cached: the memory goes back to its lender
    client::free(dev_, b->handle);
    b->lender_release(b->lender);
    delete b;
    return;
  }
  bytes_in_use_ -= b->capacity;
  bytes_live_.fetch_sub(b->nbytes, std::memory_order_relaxed);
  try {
    std::lock_guard lk(mu_);
    free_[b->capacity].push_back(b->handle);
    bytes_cached_ += b->capacity;
  } catch (...) {
    client::free(dev_, b->handle);
  }
  delete b;
}

void Allocator::trim() noexcept {
  std::lock_guard lk(mu_);
  for (auto& [cls, v] : free_)
    for (auto* h : v) client::free(dev_, h);
  free_.clear();
  bytes_cached_ = 0;
}

void BufferDeleter::operator()(Buffer* b) const noexcept {
  b->device->allocator->release(b);
}

void Metrics::reset() {
  for (auto* c : {&ops_traced, &graphs_executed, &cache_hits, &cache_misses, &compiles, &compile_ns,
                  &execute_ns, &bytes_to_device, &bytes_from_device, &bytes_between_backends,
                  &fallback_nodes, &decomposed_nodes, &compile_failures, &alloc_hits, &alloc_misses,
                  &donated_buffers, &donated_bytes, &donated_bytes_last})
    c->store(0);
  std::lock_guard lk(mu);
  named.clear();
  recompile_reasons.clear();
}

// ---- runtime ------------------------------------------------------------------------------

void runtime_retain(Runtime* rt) noexcept {
  rt->refs.fetch_add(1, std::memory_order_relaxed);
}
void runtime_release(Runtime* rt) noexcept {
  if (rt->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete rt;
}

Runtime* runtime_create(const lt_runtime_options* options) {
  if (options && options->struct_size < sizeof(size_t))
    fail(LT_STATUS_INVALID_ARGUMENT, "lt_runtime_create: options->struct_size {} is too small",
         options->struct_size);
  Config cfg = load_config(options);
  std::call_once(g_openblas_once, [] { g_openblas_note = choose_openblas_coretype(); });
  std::unique_ptr<Runtime, void (*)(Runtime*)> rt(new Runtime,
                                                  [](Runtime* r) { runtime_release(r); });
  rt->config = std::move(cfg);
  rt->openblas_note = g_openblas_note;
  rt->policy = rt->config.fallback == "silent"  ? FallbackPolicy::kSilent
               : rt->config.fallback == "error" ? FallbackPolicy::kError
                                                : FallbackPolicy::kWarn;
  rt->log = core_logger(spdlog::level::from_str(rt->config.log_level));
  rt->plans = std::make_unique<PlanCache>(rt.get());
  for (auto& w : rt->config.warnings) rt->log->warn("{}", w);
  load_plugins(rt.get());
  if (rt->devices.empty()) {
    std::string why;
    for (auto& f : rt->failed) why += fmt::format("; {}: {}", f.path, f.reason);
    std::string paths;
    for (auto& s : rt->search_paths) paths += (paths.empty() ? "" : ":") + s;
    fail(LT_STATUS_NOT_FOUND, "lt_runtime_create: no usable device (plugin path {}){}", paths, why);
  }
  if (!rt->config.device.empty()) {
    std::string name = rt->config.device;
    lt_device* found = nullptr;
    for (auto& d : rt->devices)
      if (d->name == name || (d->plugin->name == name && d->index == 0)) found = d.get();
    if (!found) {
      std::string have;
      for (auto& d : rt->devices) have += (have.empty() ? "" : ", ") + d->name;
      fail(LT_STATUS_NOT_FOUND, "lt_runtime_create: device '{}' not found (available: {})", name,
           have);
    }
    rt->default_device = found;
  } else {
    for (const char* pref : {"cpu_jit", "gpu_opencl", "tpu_sim", "cpu_eager"}) {
      for (auto& d : rt->devices)
        if (!rt->default_device && d->plugin->name == pref) rt->default_device = d.get();
    }
    if (!rt->default_device) rt->default_device = rt->devices.front().get();
  }
  // Last: the first step's "trace" span starts when the runtime is ready.
  if (!rt->config.profile.empty()) rt->profiler = std::make_unique<Profiler>(rt->config.profile);
  return rt.release();
}

}  // namespace lt

lt_runtime::~lt_runtime() {
  // Order matters: queued executions finish (releasing the nodes they hold), background
  // compiles finish, executables and buffers go back to their plugins, then the contexts go.
  for (auto& d : devices)
    if (d->queue) d->queue->shutdown();
  if (plans) plans->shutdown();
  profiler.reset();  // every span is in: the trace file is written now
  for (auto& d : devices) d->allocator->trim();
  for (auto& p : plugins)
    if (p->ctx) p->call_noexcept("destroy", [&] { p->api->destroy(p->ctx); });
}

namespace lt {

// ---- tensors ------------------------------------------------------------------------------

namespace {
// The handle pool (see struct lt_tensor). Slots are carved from chunks that live until the
// process exits; a freed slot is marked dead and reused only after kQuarantine later frees on
// the same thread, so a stale handle reads a dead slot for at least that long. Each thread
// keeps its own FIFO of freed slots and its own chunk to carve from, so recording an op takes
// no lock (the malloc it replaces took none either: core bench BM_TraceOneOp,
// docs/architecture.md); the mutex is taken once per kChunk new slots and when a thread exits,
// handing its freed slots to the shared list that other threads draw from.
constexpr size_t kChunk = 1024, kQuarantine = 4096;

struct SlotList {  // intrusive FIFO through lt_tensor::next
  Tensor *head = nullptr, *tail = nullptr;
  size_t count = 0;
  void push(Tensor* t) noexcept {
    t->next = nullptr;
    if (tail)
      tail->next = t;
    else
      head = t;
    tail = t;
    ++count;
  }
  Tensor* pop() noexcept {
    Tensor* t = head;
    head = t->next;
    if (!head) tail = nullptr;
    --count;
    t->next = nullptr;
    return t;
  }
  void append(SlotList& o) noexcept {
    if (!o.head) return;
    if (tail)
      tail->next = o.head;
    else
      head = o.head;
    tail = o.tail;
    count += o.count;
    o = SlotList{};
  }
};

struct SharedPool {
  std::mutex mu;
  std::vector<Tensor*> chunks;  // never freed: stale handles must stay readable
  SlotList freed;               // from threads that exited
  pthread_key_t key;            // its destructor hands a thread's freed slots to `freed`
};
SharedPool& shared_pool();

// Trivially destructible on purpose: tensors freed by static destructors at exit (after the
// main thread's thread_local destructors) still find it intact.
struct LocalPool {
  SlotList freed;
  Tensor* carve = nullptr;
  size_t carve_left = 0;
  bool registered = false;
};
// initial-exec: one %fs-relative load instead of a __tls_get_addr call on every op (the
// library is linked by programs, and its few bytes of TLS fit glibc's static reserve when
// dlopened too).
[[gnu::tls_model("initial-exec")]] thread_local LocalPool t_pool;

void local_pool_exit(void* p) {
  auto* lp = static_cast<LocalPool*>(p);
  SharedPool& sp = shared_pool();
  std::lock_guard lk(sp.mu);
  sp.freed.append(lp->freed);
}

SharedPool& shared_pool() {
  static SharedPool* pool = [] {
    auto* p = new SharedPool;  // outlives every static destructor
    pthread_key_create(&p->key, local_pool_exit);
    return p;
  }();
  return *pool;
}

Tensor* pool_take() {
  LocalPool& lp = t_pool;
  if (lp.freed.count > kQuarantine) return lp.freed.pop();
  if (!lp.carve_left) {
    SharedPool& sp = shared_pool();
    if (!lp.registered) {
      pthread_setspecific(sp.key, &lp);
      lp.registered = true;
    }
    std::lock_guard lk(sp.mu);
    if (sp.freed.count > kQuarantine + kChunk) {  // an exited thread's slots, oldest first
      for (size_t i = 0; i < kChunk; ++i) lp.freed.push(sp.freed.pop());
      if (lp.freed.count > kQuarantine) return lp.freed.pop();
    }
    lp.carve = static_cast<Tensor*>(::operator new(sizeof(Tensor) * kChunk));
    sp.chunks.push_back(lp.carve);
    lp.carve_left = kChunk;
  }
  --lp.carve_left;
  return lp.carve++;
}

void pool_give(Tensor* t) noexcept {
  t->magic = Tensor::kDead;
  t_pool.freed.push(t);
}
}  // namespace

void dead_tensor(const Tensor* t, const char* fn, const char* what) {
  if (!t) fail(LT_STATUS_INVALID_ARGUMENT, "{}: {} is NULL", fn, what);
  fail(LT_STATUS_INVALID_ARGUMENT,
       "{}: {} {} is not a live tensor handle: it was used after its last lt_tensor_free", fn, what,
       static_cast<const void*>(t));
}

Tensor* tensor_new(Device* dev, NodeRef node) {
  auto* t = new (pool_take()) Tensor;
  t->node = node.release();
  t->device = dev;
  runtime_retain(dev->runtime);
  if (!t->node->materialized.load(std::memory_order_acquire) && !t->node->has_scalar) {
    std::lock_guard lk(dev->reg_mu);
    t->prev = dev->reg_tail;
    if (dev->reg_tail)
      dev->reg_tail->next = t;
    else
      dev->reg_head = t;
    dev->reg_tail = t;
    t->registered = true;
  }
  return t;
}

void tensor_unlink(Device* dev, Tensor* t) noexcept {
  if (!t->registered) return;
  if (t->prev)
    t->prev->next = t->next;
  else
    dev->reg_head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    dev->reg_tail = t->prev;
  t->prev = t->next = nullptr;
  t->registered.store(false, std::memory_order_release);
}

void tensor_release(Tensor* t) noexcept {
  if (t->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  autograd::on_tensor_freed(t);  // autograd hook (train engineer): drops t's entry
  Device* dev = t->device;
  Runtime* rt = dev->runtime;
  if (t->registered.load(std::memory_order_acquire)) {
    std::lock_guard lk(dev->reg_mu);
    tensor_unlink(dev, t);
  }
  node_release(t->node);
  t->node = nullptr;  // every member is trivially destructible: the slot is just marked
  pool_give(t);
  runtime_release(rt);
}

// ---- plugin report ------------------------------------------------------------------------

namespace {
// Built-in ops the device runs natively ("ops") and composites it runs as their decomposition,
// every node of which it runs natively ("decomposed_ops").
void supported_ops(Runtime* rt, Device* dev, nlohmann::json& out) {
  out["ops"] = nlohmann::json::array();
  out["decomposed_ops"] = nlohmann::json::array();
  for (size_t op = 1; op < op_count(); ++op) {
    try {
      if (client::example_supported(dev, static_cast<uint16_t>(op)))
        out["ops"].push_back(op_name(op));
      else if (client::example_decomposes(dev, static_cast<uint16_t>(op)))
        out["decomposed_ops"].push_back(op_name(op));
    } catch (const std::exception& e) {
      rt->log->debug("supports({}) on {} failed: {}", op_name(op), dev->name, e.what());
    }
  }
}

}  // namespace

void collect_ctx_stats(Plugin* p, nlohmann::json& out) {
  for (const auto& [name, v] : client::stats(p, nullptr)) out[name] = v;
}

std::string plugin_report(Runtime* rt, bool json) {
  nlohmann::json j;
  j["search_paths"] = rt->search_paths;
  j["openblas"] = rt->openblas_note;
  j["default_device"] = rt->default_device->name;
  j["fallback_policy"] = rt->config.fallback;
  j["plugins"] = nlohmann::json::array();
  for (auto& p : rt->plugins) {
    nlohmann::json pj;
    pj["name"] = p->name;
    pj["version"] = p->version;
    pj["abi"] = fmt::format("{}.{}", p->abi_major, p->abi_minor);
    pj["path"] = p->path;
    pj["devices"] = nlohmann::json::array();
    for (auto* d : p->devices) {
      pj["devices"].push_back({{"name", d->name},
                               {"device", d->info_name},
                               {"kind", d->kind},
                               {"description", d->description},
                               {"memory_bytes", d->memory_bytes},
                               {"host_addressable", d->host_addressable}});
    }
    supported_ops(rt, p->devices.front(), pj);
    nlohmann::json st = nlohmann::json::object();
    collect_ctx_stats(p.get(), st);
    if (!st.empty()) pj["stats"] = st;
    j["plugins"].push_back(pj);
  }
  j["failed"] = nlohmann::json::array();
  for (auto& f : rt->failed) j["failed"].push_back({{"path", f.path}, {"reason", f.reason}});
  if (json) return j.dump(2);

  std::ostringstream os;
  os << "LazyTensor " << lt_version_string() << "\n";
  os << "plugin search path:\n";
  for (auto& s : rt->search_paths) os << "  " << s << "\n";
  os << "openblas: " << rt->openblas_note << "\n";
  os << "default device: " << rt->default_device->name << "  fallback: " << rt->config.fallback
     << "\n";
  os << "plugins loaded (" << rt->plugins.size() << "):\n";
  for (auto& pj : j["plugins"]) {
    os << "  " << pj["name"].get<std::string>() << " " << pj["version"].get<std::string>()
       << " (ABI " << pj["abi"].get<std::string>() << ") " << pj["path"].get<std::string>() << "\n";
    for (auto& d : pj["devices"])
      os << "    device " << d["name"].get<std::string>() << ": " << d["kind"].get<std::string>()
         << ", " << d["device"].get<std::string>() << " - " << d["description"].get<std::string>()
         << "\n";
    os << "    ops (" << pj["ops"].size() << "):";
    for (auto& o : pj["ops"]) os << " " << o.get<std::string>();
    os << "\n";
    if (!pj["decomposed_ops"].empty()) {
      os << "    decomposed into its ops (" << pj["decomposed_ops"].size() << "):";
      for (auto& o : pj["decomposed_ops"]) os << " " << o.get<std::string>();
      os << "\n";
    }
    if (pj.contains("stats"))
      for (auto& [k, v] : pj["stats"].items()) os << "    stat " << k << " = " << v.dump() << "\n";
  }
  os << "plugins failed (" << rt->failed.size() << "):\n";
  for (auto& f : rt->failed) os << "  " << f.path << ": " << f.reason << "\n";
  return os.str();
}

}  // namespace lt
