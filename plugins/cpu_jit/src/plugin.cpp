// plugin.cpp — the cpu_jit C ABI (lt_plugin.h): context, host buffers, supports, compile
// (with a plugin-side cache keyed by structural hash), execute, stats. Every entry point
// returns errors as values; C++ exceptions become lt_plugin_error in g_errors.guard().
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "lazytensor/lt_plugin.h"
#include "lt_plugin_support.hpp"
#include "program.h"

struct lt_plugin_buffer {
  void* data;
  size_t nbytes;
};

struct lt_plugin_context {
  std::unique_ptr<lt::cpujit::Compiler> compiler;
  std::string description;
  std::mutex cache_mu;  // guards cache
  std::unordered_map<uint64_t, std::shared_ptr<lt::cpujit::Program>> cache;
  std::atomic<uint64_t> kernels{0}, compiles{0}, cache_hits{0};
  std::atomic<double> compile_ms{0};
};

struct lt_plugin_executable {
  std::shared_ptr<lt::cpujit::Program> program;
  bool cache_hit;
};

namespace {

// Messages from this file name the plugin themselves; std::invalid_argument is the caller's
// fault, so it becomes INVALID_ARGUMENT with its text unchanged.
lt::plugin_support::ErrorFactory g_errors({.prefix = "",
                                           .out_of_memory = "cpu_jit: out of memory",
                                           .oom_fallback = "cpu_jit: out of memory",
                                           .internal = "cpu_jit: ",
                                           .unknown = "cpu_jit: unknown error",
                                           .invalid_argument = ""});

lt_plugin_error* create(lt_plugin_create_args* args) {
  return g_errors.guard([&]() -> lt_plugin_error* {
    if (!args || args->struct_size < LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: create: bad args struct");
    if (args->core_abi_major != LT_PLUGIN_ABI_MAJOR)
      return g_errors.make(LT_STATUS_ABI_MISMATCH,
                           "cpu_jit: core ABI major " + std::to_string(args->core_abi_major) +
                               " != plugin ABI major " + std::to_string(LT_PLUGIN_ABI_MAJOR));
    if (args->num_options && !args->options)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: create: options is NULL");
    unsigned vector_bits = 0;
    for (size_t i = 0; i < args->num_options; ++i) {
      const lt_plugin_option& o = args->options[i];
      if (!o.key || !o.value)
        return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                             "cpu_jit: option with a NULL key or value");
      std::string key = o.key, value = o.value;
      if (key != "vector_bits")
        return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                             "cpu_jit: unknown option '" + key + "' (known: vector_bits)");
      if (value == "128" || value == "256" || value == "512")
        vector_bits = static_cast<unsigned>(std::stoul(value));
      else if (value != "0" && value != "auto")
        return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: option vector_bits = '" + value +
                                                             "' (expected 128, 256, 512 or auto)");
    }
    std::string err;
    auto compiler = lt::cpujit::create_compiler(vector_bits, &err);
    if (!compiler) return g_errors.make(LT_STATUS_PLUGIN_ERROR, err);
    auto* ctx = new lt_plugin_context();
    ctx->description = compiler->host_description();
    ctx->compiler = std::move(compiler);
    args->context = ctx;
    return nullptr;
  });
}

void destroy(lt_plugin_context* ctx) {
  delete ctx;
}

lt_plugin_error* device_count(lt_plugin_context* ctx, size_t* out) {
  if (!ctx || !out) return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: device_count: NULL");
  *out = 1;
  return nullptr;
}

lt_plugin_error* device_info(lt_plugin_device_info_args* a) {
  if (!a || a->struct_size < LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE || !a->context)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: device_info: bad args");
  if (a->device != 0)
    return g_errors.make(LT_STATUS_NOT_FOUND,
                         "cpu_jit: device " + std::to_string(a->device) + " does not exist");
  a->name = "cpu";
  a->kind = "cpu";
  a->description = a->context->description.c_str();
  a->memory_bytes = 0;
  a->host_addressable = 1;
  return nullptr;
}

lt_plugin_error* check_buf(lt_plugin_buffer_args* a, const char* what) {
  if (!a || a->struct_size < LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE || !a->context)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                         std::string("cpu_jit: ") + what + ": bad args");
  if (a->device != 0)
    return g_errors.make(LT_STATUS_NOT_FOUND, std::string("cpu_jit: ") + what + ": no device " +
                                                  std::to_string(a->device));
  return nullptr;
}

lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* a) {
  if (auto* e = check_buf(a, "buffer_alloc")) return e;
  size_t bytes = (std::max<size_t>(a->nbytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p)
    return g_errors.make(LT_STATUS_OUT_OF_MEMORY,
                         "cpu_jit: cannot allocate " + std::to_string(a->nbytes) + " bytes");
  auto* b = new (std::nothrow) lt_plugin_buffer{p, a->nbytes};
  if (!b) {
    std::free(p);
    return g_errors.make(LT_STATUS_OUT_OF_MEMORY, "cpu_jit: out of memory");
  }
  a->buffer = b;
  return nullptr;
}

void buffer_free(lt_plugin_context*, lt_plugin_buffer* b) {
  if (!b) return;
  std::free(b->data);
  delete b;
}

lt_plugin_error* check_range(lt_plugin_buffer_args* a, const char* what) {
  if (auto* e = check_buf(a, what)) return e;
  if (!a->buffer)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                         std::string("cpu_jit: ") + what + ": NULL buffer");
  if (a->offset > a->buffer->nbytes || a->nbytes > a->buffer->nbytes - a->offset)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                         std::string("cpu_jit: ") + what + ": range [" + std::to_string(a->offset) +
                             ", +" + std::to_string(a->nbytes) + ") exceeds buffer of " +
                             std::to_string(a->buffer->nbytes) + " bytes");
  return nullptr;
}

lt_plugin_error* buffer_upload(lt_plugin_buffer_args* a) {
  if (auto* e = check_range(a, "buffer_upload")) return e;
  if (a->nbytes && !a->src)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: buffer_upload: NULL src");
  if (a->nbytes) std::memcpy(static_cast<char*>(a->buffer->data) + a->offset, a->src, a->nbytes);
  return nullptr;
}

lt_plugin_error* buffer_download(lt_plugin_buffer_args* a) {
  if (auto* e = check_range(a, "buffer_download")) return e;
  if (a->nbytes && !a->dst)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: buffer_download: NULL dst");
  if (a->nbytes) std::memcpy(a->dst, static_cast<char*>(a->buffer->data) + a->offset, a->nbytes);
  return nullptr;
}

lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* a) {
  if (auto* e = check_buf(a, "buffer_host_ptr")) return e;
  if (!a->buffer)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: buffer_host_ptr: NULL buffer");
  a->host_ptr = a->buffer->data;
  return nullptr;
}

lt_plugin_error* check_graph(const lt_graph* g) {
  if (!g || g->struct_size < LT_GRAPH_STRUCT_SIZE)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: NULL graph or bad struct_size");
  if (g->num_nodes && !g->nodes)
    return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: graph has no nodes");
  for (size_t i = 0; i < g->num_nodes; ++i) {
    const lt_graph_node& n = g->nodes[i];
    if (!n.op || (n.rank && !n.shape) || (n.num_operands && !n.operands) ||
        (n.num_attrs && !n.attrs))
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                           "cpu_jit: graph node " + std::to_string(i) + " has a NULL field");
    for (size_t k = 0; k < n.num_operands; ++k)
      if (n.operands[k] < 0 || static_cast<size_t>(n.operands[k]) >= i)
        return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                             "cpu_jit: graph node " + std::to_string(i) + " (" + n.op +
                                 ") has operand " + std::to_string(n.operands[k]) +
                                 " that does not precede it");
  }
  for (size_t k = 0; k < g->num_inputs; ++k)
    if (g->inputs[k] < 0 || static_cast<size_t>(g->inputs[k]) >= g->num_nodes ||
        std::strcmp(g->nodes[g->inputs[k]].op, "input") != 0)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                           "cpu_jit: graph input " + std::to_string(k) + " is not an input node");
  for (size_t k = 0; k < g->num_outputs; ++k)
    if (g->outputs[k] < 0 || static_cast<size_t>(g->outputs[k]) >= g->num_nodes)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                           "cpu_jit: graph output " + std::to_string(k) + " is out of range");
  return nullptr;
}

lt_plugin_error* supports(lt_plugin_supports_args* a) {
  return g_errors.guard([&]() -> lt_plugin_error* {
    if (!a || a->struct_size < LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE || !a->context)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: supports: bad args");
    if (auto* e = check_graph(a->graph)) return e;
    if (a->node >= a->graph->num_nodes)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: supports: node out of range");
    a->supported = lt::cpujit::program_supports(*a->graph, a->node) ? 1 : 0;
    return nullptr;
  });
}

lt_plugin_error* compile(lt_plugin_compile_args* a) {
  return g_errors.guard([&]() -> lt_plugin_error* {
    if (!a || a->struct_size < LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE || !a->context)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: compile: bad args");
    if (a->device != 0)
      return g_errors.make(LT_STATUS_NOT_FOUND, "cpu_jit: compile: no such device");
    if (auto* e = check_graph(a->graph)) return e;
    lt_plugin_context* ctx = a->context;
    uint64_t key = lt::fusion::structural_hash(*a->graph);
    {
      std::lock_guard<std::mutex> lock(ctx->cache_mu);
      auto it = ctx->cache.find(key);
      if (it != ctx->cache.end()) {
        ++ctx->cache_hits;
        a->executable = new lt_plugin_executable{it->second, true};
        return nullptr;
      }
    }
    std::string err;
    auto prog = lt::cpujit::Program::build(*a->graph, *ctx->compiler, &err);
    if (!prog) return g_errors.make(LT_STATUS_UNSUPPORTED, err);
    ctx->kernels += prog->num_kernels();
    ++ctx->compiles;
    double ms = ctx->compile_ms.load();
    while (!ctx->compile_ms.compare_exchange_weak(ms, ms + prog->compile_ms())) {
    }
    {
      std::lock_guard<std::mutex> lock(ctx->cache_mu);
      ctx->cache.emplace(key, prog);
    }
    a->executable = new lt_plugin_executable{std::move(prog), false};
    return nullptr;
  });
}

lt_plugin_error* execute(lt_plugin_execute_args* a) {
  return g_errors.guard([&]() -> lt_plugin_error* {
    if (!a || a->struct_size < LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE || !a->context || !a->executable)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: execute: bad args");
    const lt::cpujit::Program& p = *a->executable->program;
    if (a->num_inputs != p.num_inputs() || a->num_outputs != p.num_outputs())
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT,
                           "cpu_jit: execute: got " + std::to_string(a->num_inputs) + " inputs / " +
                               std::to_string(a->num_outputs) + " outputs, executable expects " +
                               std::to_string(p.num_inputs()) + " / " +
                               std::to_string(p.num_outputs()));
    std::vector<void*> ins(a->num_inputs), outs(a->num_outputs);
    for (size_t k = 0; k < a->num_inputs; ++k) {
      if (!a->inputs[k] || a->inputs[k]->nbytes < p.input_bytes(k))
        return g_errors.make(
            LT_STATUS_INVALID_ARGUMENT,
            "cpu_jit: execute: input " + std::to_string(k) + " is NULL or too small");
      ins[k] = a->inputs[k]->data;
    }
    for (size_t k = 0; k < a->num_outputs; ++k) {
      if (!a->outputs[k] || a->outputs[k]->nbytes < p.output_bytes(k))
        return g_errors.make(
            LT_STATUS_INVALID_ARGUMENT,
            "cpu_jit: execute: output " + std::to_string(k) + " is NULL or too small");
      outs[k] = a->outputs[k]->data;
    }
    std::string err;
    if (!p.execute(ins.data(), outs.data(), &err)) return g_errors.make(LT_STATUS_INTERNAL, err);
    return nullptr;
  });
}

void executable_destroy(lt_plugin_context*, lt_plugin_executable* e) {
  delete e;
}

lt_plugin_error* stats(lt_plugin_stats_args* a) {
  return g_errors.guard([&]() -> lt_plugin_error* {
    if (!a || a->struct_size < LT_PLUGIN_STATS_ARGS_STRUCT_SIZE || !a->context || !a->emit)
      return g_errors.make(LT_STATUS_INVALID_ARGUMENT, "cpu_jit: stats: bad args");
    if (a->executable) {
      const lt::cpujit::Program& p = *a->executable->program;
      a->emit(a->user, "kernels", static_cast<double>(p.num_kernels()));
      a->emit(a->user, "compile_ms", a->executable->cache_hit ? 0.0 : p.compile_ms());
      a->emit(a->user, "cache_hit", a->executable->cache_hit ? 1.0 : 0.0);
      return nullptr;
    }
    lt_plugin_context* c = a->context;
    a->emit(a->user, "kernels", static_cast<double>(c->kernels.load()));
    a->emit(a->user, "compile_ms", c->compile_ms.load());
    a->emit(a->user, "compiles", static_cast<double>(c->compiles.load()));
    a->emit(a->user, "cache_hits", static_cast<double>(c->cache_hits.load()));
    return nullptr;
  });
}

const lt_plugin_api kApi = {
    LT_PLUGIN_API_STRUCT_SIZE,
    LT_PLUGIN_ABI_MAJOR,
    LT_PLUGIN_ABI_MINOR,
    "cpu_jit",
    "0.1.0",
    lt::plugin_support::error_message,
    lt::plugin_support::error_code,
    lt::plugin_support::error_destroy,
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
};

}  // namespace

extern "C" LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) {
  return &kApi;
}
