// plugin_harness.hpp — shared plumbing for tests and benchmarks that drive one plugin directly
// through its C table: loading, contexts, buffers, hand-built graphs, compile/execute, stats.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lazytensor/lower/fusion.hpp"
#include "lazytensor/lt_plugin.h"

// No gtest here: each suite keeps its own EXPECTs on the Status values these calls return, and
// the benchmarks use the same calls.
namespace lt::plugin_test {

using Options = std::vector<std::pair<std::string, std::string>>;
using Stats = std::map<std::string, double>;

// The plugin's table. The library is never closed: plugins keep threads (PoCL) and tables that
// must outlive every context, and dlopen of the same path only bumps a reference count.
inline const lt_plugin_api* load_api(const char* path, std::string* why = nullptr) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    if (why) *why = dlerror();
    return nullptr;
  }
  auto get = reinterpret_cast<lt_plugin_get_api_fn>(dlsym(handle, LT_PLUGIN_ENTRY_SYMBOL));
  if (!get) {
    if (why) *why = "no symbol " LT_PLUGIN_ENTRY_SYMBOL;
    return nullptr;
  }
  return get();
}

// Result of a call: code and message, the plugin's error already destroyed.
struct Status {
  lt_status_code code = LT_STATUS_OK;
  std::string message;
  bool ok() const { return code == LT_STATUS_OK; }
};

inline Status take(const lt_plugin_api* api, lt_plugin_error* e) {
  Status s;
  if (e) {
    s.code = api->error_code(e);
    s.message = api->error_message(e);
    api->error_destroy(e);
  }
  return s;
}

// Creates a context; *out stays nullptr on failure. `log` may be null.
inline Status create_context(const lt_plugin_api* api, const Options& options,
                             lt_plugin_context** out, lt_plugin_log_fn log = nullptr,
                             void* log_user = nullptr) {
  std::vector<lt_plugin_option> opts;
  for (const auto& [k, v] : options) opts.push_back({k.c_str(), v.c_str()});
  lt_plugin_create_args a{};
  a.struct_size = LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
  a.core_abi_major = LT_PLUGIN_ABI_MAJOR;
  a.core_abi_minor = LT_PLUGIN_ABI_MINOR;
  a.num_options = opts.size();
  a.options = opts.data();
  a.log = log;
  a.log_user = log_user;
  Status s = take(api, api->create(&a));
  *out = a.context;
  return s;
}

// Bytes of one node's value: dtype size times element count.
inline size_t node_bytes(const lt_graph_node& n) {
  size_t b = lt_dtype_size(n.dtype);
  for (size_t d = 0; d < n.rank; ++d) b *= static_cast<size_t>(n.shape[d]);
  return b;
}

template <typename T>
std::vector<char> raw(const std::vector<T>& v) {
  std::vector<char> r(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(r.data(), v.data(), r.size());
  return r;
}
template <typename T>
std::vector<T> as(const std::vector<char>& r) {
  std::vector<T> v(r.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), r.data(), v.size() * sizeof(T));
  return v;
}

// Calls on one context, which it does not own (see Session for one that does).
class Context {
 public:
  Context(const lt_plugin_api* api, lt_plugin_context* ctx) : api_(api), ctx_(ctx) {}

  const lt_plugin_api* api() const { return api_; }
  lt_plugin_context* ctx() const { return ctx_; }

  Status alloc(size_t nbytes, lt_plugin_buffer** out) {
    lt_plugin_buffer_args a = buffer_args(nullptr, nbytes);
    Status s = take(api_, api_->buffer_alloc(&a));
    *out = a.buffer;
    return s;
  }
  void free(lt_plugin_buffer* b) { api_->buffer_free(ctx_, b); }
  Status upload(lt_plugin_buffer* b, const void* src, size_t nbytes) {
    lt_plugin_buffer_args a = buffer_args(b, nbytes);
    a.src = src;
    return take(api_, api_->buffer_upload(&a));
  }
  Status download(lt_plugin_buffer* b, void* dst, size_t nbytes) {
    lt_plugin_buffer_args a = buffer_args(b, nbytes);
    a.dst = dst;
    return take(api_, api_->buffer_download(&a));
  }
  // A new buffer holding `data`, or nullptr when allocation fails; *st gets the first failure.
  template <typename T>
  lt_plugin_buffer* upload(const std::vector<T>& data, Status* st = nullptr) {
    lt_plugin_buffer* b = nullptr;
    Status s = alloc(data.size() * sizeof(T), &b);
    if (s.ok()) s = upload(b, data.data(), data.size() * sizeof(T));
    if (st) *st = std::move(s);
    return b;
  }
  template <typename T>
  std::vector<T> download(lt_plugin_buffer* b, size_t count, Status* st = nullptr) {
    std::vector<T> out(count);
    Status s = download(b, out.data(), count * sizeof(T));
    if (st) *st = std::move(s);
    return out;
  }

  // The result is written to *supported, which keeps the caller's value if the plugin does not
  // write it (tests preset a sentinel to catch exactly that).
  Status supports(const lt_graph& g, size_t node, int* supported) {
    lt_plugin_supports_args a{};
    a.struct_size = LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.graph = &g;
    a.node = node;
    a.supported = *supported;
    Status s = take(api_, api_->supports(&a));
    *supported = a.supported;
    return s;
  }
  Status compile(const lt_graph& g, lt_plugin_executable** out) {
    lt_plugin_compile_args a{};
    a.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.graph = &g;
    Status s = take(api_, api_->compile(&a));
    *out = a.executable;
    return s;
  }
  Status execute(lt_plugin_executable* exe, const std::vector<lt_plugin_buffer*>& in,
                 const std::vector<lt_plugin_buffer*>& out) {
    lt_plugin_execute_args a{};
    a.struct_size = LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.executable = exe;
    a.num_inputs = in.size();
    a.inputs = in.data();
    a.num_outputs = out.size();
    a.outputs = out.data();
    return take(api_, api_->execute(&a));
  }
  void destroy(lt_plugin_executable* exe) { api_->executable_destroy(ctx_, exe); }

  // exe == nullptr: context-wide stats.
  Stats stats(lt_plugin_executable* exe, Status* st = nullptr) {
    Stats m;
    lt_plugin_stats_args a{};
    a.struct_size = LT_PLUGIN_STATS_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.executable = exe;
    a.user = &m;
    a.emit = [](void* user, const char* name, double v) { (*static_cast<Stats*>(user))[name] = v; };
    Status s = take(api_, api_->stats(&a));
    if (st) *st = std::move(s);
    return m;
  }

  // Compiles g and runs it once on host inputs (raw bytes, one per graph input). Outputs are
  // sized from the graph's output nodes and returned as bytes; `exe_stats`, when given, is read
  // after compile and before execute. Stops at the first failing step and frees everything.
  Status run(const lt_graph& g, const std::vector<std::vector<char>>& inputs,
             std::vector<std::vector<char>>* outputs, Stats* exe_stats = nullptr) {
    outputs->clear();
    lt_plugin_executable* exe = nullptr;
    Status s = compile(g, &exe);
    if (!s.ok()) return s;
    if (exe_stats) *exe_stats = stats(exe, &s);
    std::vector<lt_plugin_buffer*> in, out;
    for (size_t k = 0; s.ok() && k < inputs.size(); ++k) {
      in.push_back(upload(inputs[k], &s));
    }
    for (size_t k = 0; s.ok() && k < g.num_outputs; ++k) {
      outputs->emplace_back(node_bytes(g.nodes[g.outputs[k]]));
      out.emplace_back();
      s = alloc(outputs->back().size(), &out.back());
    }
    if (s.ok()) s = execute(exe, in, out);
    for (size_t k = 0; s.ok() && k < out.size(); ++k) {
      s = download(out[k], (*outputs)[k].data(), (*outputs)[k].size());
    }
    for (lt_plugin_buffer* b : in) {
      if (b) free(b);
    }
    for (lt_plugin_buffer* b : out) {
      if (b) free(b);
    }
    destroy(exe);
    if (!s.ok()) outputs->clear();
    return s;
  }

 protected:
  lt_plugin_buffer_args buffer_args(lt_plugin_buffer* b, size_t nbytes) const {
    lt_plugin_buffer_args a{};
    a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.buffer = b;
    a.nbytes = nbytes;
    return a;
  }

  const lt_plugin_api* api_;
  lt_plugin_context* ctx_;
};

// A Context that it creates and destroys.
class Session : public Context {
 public:
  explicit Session(const lt_plugin_api* api) : Context(api, nullptr) {}
  ~Session() {
    if (ctx_) api_->destroy(ctx_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Status create(const Options& options = {}, lt_plugin_log_fn log = nullptr,
                void* log_user = nullptr) {
    return create_context(api_, options, &ctx_, log, log_user);
  }
};

// One attribute, owning its name and ints, so attribute lists can be written inline.
struct Attr {
  std::string name;
  lt_attr_kind kind;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  static Attr Int(std::string n, int64_t v) { return {std::move(n), LT_ATTR_INT, v, 0, {}}; }
  static Attr Float(std::string n, double v) { return {std::move(n), LT_ATTR_FLOAT, 0, v, {}}; }
  static Attr Ints(std::string n, std::vector<int64_t> v) {
    return {std::move(n), LT_ATTR_INTS, 0, 0, std::move(v)};
  }
};

// A hand-built graph: inputs and outputs are declared as nodes are added. graph() is valid until
// the next change (it is an OwnedGraph view).
class GraphBuilder {
 public:
  int32_t input(lt_dtype dtype, std::vector<int64_t> shape) {
    int32_t id = g_.add("input", dtype, std::move(shape), {});
    inputs_.push_back(id);
    return id;
  }
  int32_t op(const std::string& op, lt_dtype dtype, std::vector<int64_t> shape,
             std::vector<int32_t> operands, const std::vector<Attr>& attrs = {}) {
    std::vector<lt_attr> c;
    for (const Attr& a : attrs) {
      lt_attr x{};
      x.name = a.name.c_str();
      x.kind = a.kind;
      x.i = a.i;
      x.f = a.f;
      x.ints = a.ints.data();
      x.ints_len = a.ints.size();
      c.push_back(x);
    }
    return g_.add(op, dtype, std::move(shape), std::move(operands), c.data(), c.size());
  }
  void output(int32_t id) { outputs_.push_back(id); }

  const lt_graph& graph() {
    g_.set_inputs(inputs_);
    g_.set_outputs(outputs_);
    return g_.view();
  }

 private:
  lt::fusion::OwnedGraph g_;
  std::vector<int32_t> inputs_, outputs_;
};

}  // namespace lt::plugin_test
