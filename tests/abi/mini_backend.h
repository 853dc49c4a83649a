// mini_backend.h — a tiny host-memory backend (f32 add, mul, neg, exp on equal shapes) that
// the ABI and hostile test plugins start from and then bend: each test plugin is one .cpp
// that includes this, edits the table in its entry point, and is built into its own folder.
// Header-only on purpose: test plugins must stay one translation unit against lt_plugin.h.
#pragma once

#include <lazytensor/lt_plugin.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

struct lt_plugin_error {
  lt_status_code code;
  std::string message;
};
struct lt_plugin_context {
  lt_plugin_log_fn log = nullptr;
  void* log_user = nullptr;
  size_t create_args_size = 0;  // what the core passed, for the newer/older-minor tests
};
struct lt_plugin_buffer {
  std::vector<unsigned char> bytes;
};
struct lt_plugin_executable {
  std::vector<std::string> ops;
  std::vector<std::vector<int32_t>> operands;
  std::vector<size_t> numel;
  std::vector<int32_t> inputs, outputs;
};

namespace mini {

inline lt_plugin_error* err(lt_status_code code, const std::string& m) {
  return new lt_plugin_error{code, m};
}
inline const char* error_message(const lt_plugin_error* e) {
  return e->message.c_str();
}
inline lt_status_code error_code(const lt_plugin_error* e) {
  return e->code;
}
inline void error_destroy(lt_plugin_error* e) {
  delete e;
}

inline lt_plugin_error* create(lt_plugin_create_args* a) {
  auto* c = new lt_plugin_context;
  c->log = a->log;
  c->log_user = a->log_user;
  c->create_args_size = a->struct_size;
  a->context = c;
  return nullptr;
}
inline void destroy(lt_plugin_context* c) {
  delete c;
}
inline lt_plugin_error* device_count(lt_plugin_context*, size_t* n) {
  *n = 1;
  return nullptr;
}
inline lt_plugin_error* device_info(lt_plugin_device_info_args* a) {
  a->name = "mini";
  a->kind = "cpu";
  a->description = "test backend";
  a->host_addressable = 1;
  return nullptr;
}
inline lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* a) {
  a->buffer = new lt_plugin_buffer{std::vector<unsigned char>(a->nbytes)};
  return nullptr;
}
inline void buffer_free(lt_plugin_context*, lt_plugin_buffer* b) {
  delete b;
}
inline lt_plugin_error* buffer_upload(lt_plugin_buffer_args* a) {
  if (a->offset + a->nbytes > a->buffer->bytes.size())
    return err(LT_STATUS_INVALID_ARGUMENT, "upload of " + std::to_string(a->nbytes) +
                                               " bytes into a buffer of " +
                                               std::to_string(a->buffer->bytes.size()));
  std::memcpy(a->buffer->bytes.data() + a->offset, a->src, a->nbytes);
  return nullptr;
}
inline lt_plugin_error* buffer_download(lt_plugin_buffer_args* a) {
  if (a->offset + a->nbytes > a->buffer->bytes.size())
    return err(LT_STATUS_INVALID_ARGUMENT, "download of " + std::to_string(a->nbytes) +
                                               " bytes from a buffer of " +
                                               std::to_string(a->buffer->bytes.size()));
  std::memcpy(a->dst, a->buffer->bytes.data() + a->offset, a->nbytes);
  return nullptr;
}
inline lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* a) {
  a->host_ptr = a->buffer->bytes.data();
  return nullptr;
}
inline bool known(const char* op) {
  return !std::strcmp(op, "add") || !std::strcmp(op, "mul") || !std::strcmp(op, "neg") ||
         !std::strcmp(op, "exp");
}
inline lt_plugin_error* supports(lt_plugin_supports_args* a) {
  const lt_graph_node& n = a->graph->nodes[a->node];
  a->supported = known(n.op) && n.dtype == LT_DTYPE_F32;
  for (size_t k = 0; a->supported && k < n.num_operands; ++k) {
    const lt_graph_node& o = a->graph->nodes[n.operands[k]];
    a->supported = o.dtype == LT_DTYPE_F32 && o.rank == n.rank &&
                   std::memcmp(o.shape, n.shape, n.rank * sizeof(int64_t)) == 0;
  }
  return nullptr;
}
inline lt_plugin_error* compile(lt_plugin_compile_args* a) {
  auto* e = new lt_plugin_executable;
  const lt_graph* g = a->graph;
  for (size_t i = 0; i < g->num_nodes; ++i) {
    const lt_graph_node& n = g->nodes[i];
    size_t ne = 1;
    for (size_t d = 0; d < n.rank; ++d) ne *= static_cast<size_t>(n.shape[d]);
    e->ops.emplace_back(n.op);
    e->operands.emplace_back(n.operands, n.operands + n.num_operands);
    e->numel.push_back(ne);
  }
  e->inputs.assign(g->inputs, g->inputs + g->num_inputs);
  e->outputs.assign(g->outputs, g->outputs + g->num_outputs);
  a->executable = e;
  return nullptr;
}
inline lt_plugin_error* execute(lt_plugin_execute_args* a) {
  const lt_plugin_executable& e = *a->executable;
  std::vector<std::vector<float>> v(e.ops.size());
  for (size_t k = 0; k < e.inputs.size(); ++k) {
    const auto& b = a->inputs[k]->bytes;
    v[e.inputs[k]].resize(e.numel[e.inputs[k]]);
    std::memcpy(v[e.inputs[k]].data(), b.data(), e.numel[e.inputs[k]] * sizeof(float));
  }
  for (size_t i = 0; i < e.ops.size(); ++i) {
    const std::string& op = e.ops[i];
    if (op == "input") continue;
    v[i].resize(e.numel[i]);
    const auto& x = v[e.operands[i][0]];
    for (size_t j = 0; j < e.numel[i]; ++j) {
      if (op == "add") v[i][j] = x[j] + v[e.operands[i][1]][j];
      if (op == "mul") v[i][j] = x[j] * v[e.operands[i][1]][j];
      if (op == "neg") v[i][j] = -x[j];
      if (op == "exp") v[i][j] = std::exp(x[j]);
    }
  }
  for (size_t k = 0; k < e.outputs.size(); ++k) {
    auto& b = a->outputs[k]->bytes;
    size_t need = e.numel[e.outputs[k]] * sizeof(float);
    if (b.size() < need)
      return err(LT_STATUS_INVALID_ARGUMENT, "output buffer " + std::to_string(k) + " holds " +
                                                 std::to_string(b.size()) + " bytes, needs " +
                                                 std::to_string(need));
    std::memcpy(b.data(), v[e.outputs[k]].data(), need);
  }
  return nullptr;
}
inline void executable_destroy(lt_plugin_context*, lt_plugin_executable* e) {
  delete e;
}
inline lt_plugin_error* stats(lt_plugin_stats_args* a) {
  a->emit(a->user, "alive", 1.0);
  return nullptr;
}

// A complete, valid table named `name`; test plugins copy it and break what they test.
inline lt_plugin_api table(const char* name) {
  lt_plugin_api t{};
  t.struct_size = LT_PLUGIN_API_STRUCT_SIZE;
  t.abi_major = LT_PLUGIN_ABI_MAJOR;
  t.abi_minor = LT_PLUGIN_ABI_MINOR;
  t.name = name;
  t.version = "test";
  t.error_message = error_message;
  t.error_code = error_code;
  t.error_destroy = error_destroy;
  t.create = create;
  t.destroy = destroy;
  t.device_count = device_count;
  t.device_info = device_info;
  t.buffer_alloc = buffer_alloc;
  t.buffer_free = buffer_free;
  t.buffer_upload = buffer_upload;
  t.buffer_download = buffer_download;
  t.buffer_host_ptr = buffer_host_ptr;
  t.supports = supports;
  t.compile = compile;
  t.execute = execute;
  t.executable_destroy = executable_destroy;
  t.stats = stats;
  return t;
}

}  // namespace mini
