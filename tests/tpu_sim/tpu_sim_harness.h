// tpu_sim_harness.h — test/benchmark helpers for driving the tpu_sim plugin directly through
// its C table: dlopen of the plugin, a context holder, and a builder for hand-made lt_graphs.
#pragma once

#include <dlfcn.h>

#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lazytensor/lt_plugin.h"

namespace lt::tpu_test {

// One attribute, owning its name and ints.
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

// Builds an lt_graph whose storage it owns; build() pointers live as long as the builder.
class GraphBuilder {
 public:
  int32_t input(lt_dtype dtype, std::vector<int64_t> shape) {
    int32_t id = node("input", dtype, std::move(shape), {});
    inputs_.push_back(id);
    return id;
  }
  int32_t node(std::string op, lt_dtype dtype, std::vector<int64_t> shape,
               std::vector<int32_t> operands, std::vector<Attr> attrs = {}) {
    nodes_.push_back(
        {std::move(op), dtype, std::move(shape), std::move(operands), std::move(attrs)});
    return int32_t(nodes_.size() - 1);
  }
  void output(int32_t id) { outputs_.push_back(id); }

  const lt_graph* build() {
    c_attrs_.clear();
    c_nodes_.clear();
    for (auto& n : nodes_) {
      std::vector<lt_attr>& attrs = c_attrs_.emplace_back();
      for (auto& a : n.attrs) {
        attrs.push_back({a.name.c_str(), a.kind, a.i, a.f, a.ints.data(), a.ints.size(), nullptr});
      }
      c_nodes_.push_back({n.op.c_str(), n.dtype, n.shape.size(), n.shape.data(), n.operands.size(),
                          n.operands.data(), attrs.size(), attrs.data()});
    }
    graph_ = {LT_GRAPH_STRUCT_SIZE, c_nodes_.size(), c_nodes_.data(), inputs_.size(),
              inputs_.data(),       outputs_.size(), outputs_.data(), 0};
    return &graph_;
  }

 private:
  struct NodeData {
    std::string op;
    lt_dtype dtype;
    std::vector<int64_t> shape;
    std::vector<int32_t> operands;
    std::vector<Attr> attrs;
  };
  std::deque<NodeData> nodes_;
  std::deque<std::vector<lt_attr>> c_attrs_;
  std::vector<lt_graph_node> c_nodes_;
  std::vector<int32_t> inputs_, outputs_;
  lt_graph graph_{};
};

// The plugin's table, loaded once per process.
inline const lt_plugin_api* load_api(std::string* why = nullptr) {
  static void* handle = dlopen(LT_TPU_SIM_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    if (why) *why = dlerror();
    return nullptr;
  }
  auto get = reinterpret_cast<lt_plugin_get_api_fn>(dlsym(handle, LT_PLUGIN_ENTRY_SYMBOL));
  return get ? get() : nullptr;
}

// Result of a call: code and message, the error already destroyed.
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

// A context plus helpers for buffers, compile, execute and stats.
class Session {
 public:
  explicit Session(const lt_plugin_api* api) : api_(api) {}
  ~Session() {
    if (ctx_) api_->destroy(ctx_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Status create(const std::vector<std::pair<std::string, std::string>>& options = {}) {
    std::vector<lt_plugin_option> opts;
    for (auto& [k, v] : options) opts.push_back({k.c_str(), v.c_str()});
    lt_plugin_create_args args{};
    args.struct_size = LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.core_abi_major = LT_PLUGIN_ABI_MAJOR;
    args.core_abi_minor = LT_PLUGIN_ABI_MINOR;
    args.num_options = opts.size();
    args.options = opts.data();
    Status s = take(api_, api_->create(&args));
    if (s.ok()) ctx_ = args.context;
    return s;
  }

  lt_plugin_context* ctx() const { return ctx_; }

  Status alloc(size_t nbytes, lt_plugin_buffer** out) {
    lt_plugin_buffer_args a{};
    a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.nbytes = nbytes;
    Status s = take(api_, api_->buffer_alloc(&a));
    if (s.ok()) *out = a.buffer;
    return s;
  }
  void free(lt_plugin_buffer* b) { api_->buffer_free(ctx_, b); }

  template <typename T>
  lt_plugin_buffer* upload(const std::vector<T>& data) {
    lt_plugin_buffer* b = nullptr;
    if (!alloc(data.size() * sizeof(T), &b).ok()) return nullptr;
    lt_plugin_buffer_args a{};
    a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.nbytes = data.size() * sizeof(T);
    a.src = data.data();
    a.buffer = b;
    take(api_, api_->buffer_upload(&a));
    return b;
  }
  template <typename T>
  std::vector<T> download(lt_plugin_buffer* b, size_t count) {
    std::vector<T> out(count);
    lt_plugin_buffer_args a{};
    a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.nbytes = count * sizeof(T);
    a.dst = out.data();
    a.buffer = b;
    take(api_, api_->buffer_download(&a));
    return out;
  }

  Status compile(const lt_graph* g, lt_plugin_executable** out) {
    lt_plugin_compile_args a{};
    a.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.graph = g;
    Status s = take(api_, api_->compile(&a));
    if (s.ok()) *out = a.executable;
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
  std::map<std::string, double> stats(lt_plugin_executable* exe) {
    std::map<std::string, double> m;
    lt_plugin_stats_args a{};
    a.struct_size = LT_PLUGIN_STATS_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.executable = exe;
    a.user = &m;
    a.emit = [](void* user, const char* name, double v) {
      (*static_cast<std::map<std::string, double>*>(user))[name] = v;
    };
    take(api_, api_->stats(&a));
    return m;
  }

 private:
  const lt_plugin_api* api_;
  lt_plugin_context* ctx_ = nullptr;
};

}  // namespace lt::tpu_test
