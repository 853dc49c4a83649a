// plugin.cpp — tpu_sim's C ABI: the one exported function table. Every entry point runs its
// body through g_errors.guard(), the single place where C++ exceptions become lt_plugin_error
// values.
#include <atomic>
#include <cstring>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "lazytensor/lt_plugin.h"
#include "lt_plugin_support.hpp"
#include "program.h"

struct lt_plugin_buffer {
  std::unique_ptr<std::byte[]> data;
  size_t nbytes = 0;
};

struct lt_plugin_executable {
  lt::tpu::Program program;
  std::atomic<uint64_t> executions{0};
};

// Per-context state. `machine` and the strings are immutable after create; counters are
// atomics or under `mutex`, because the core calls one context from several threads.
struct lt_plugin_context {
  lt::tpu::MachineConfig machine;
  std::string description;
  lt_plugin_log_fn log = nullptr;
  void* log_user = nullptr;
  std::atomic<uint64_t> hbm_in_use{0};
  std::atomic<uint64_t> hbm_peak{0};
  std::atomic<uint64_t> compiles{0};
  std::mutex mutex;  // guards the totals below
  uint64_t executions = 0;
  double simulated_ns = 0, flops = 0, hbm_bytes = 0, mxu_ns = 0, vector_ns = 0, dma_ns = 0;
};

namespace lt::tpu {
namespace {

// fail() names the plugin in every Error; only foreign exceptions get the wording here.
plugin_support::ErrorFactory g_errors({
    .prefix = "",
    .out_of_memory = "tpu_sim: out of host memory",
    .oom_fallback = "tpu_sim: out of host memory while reporting an error",
    .internal = "tpu_sim: internal error: ",
    .unknown = "tpu_sim: internal error",
    .invalid_argument = nullptr,
});

template <typename Args>
void check_args(const Args* args, size_t min_size, const char* what) {
  if (!args) fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": args is NULL");
  if (args->struct_size < min_size) {
    fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": struct_size " +
                                         std::to_string(args->struct_size) + " < " +
                                         std::to_string(min_size));
  }
}

void check_context(lt_plugin_context* ctx, const char* what) {
  if (!ctx) fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": context is NULL");
}

void check_device(size_t device, const char* what) {
  if (device != 0) {
    fail(LT_STATUS_INVALID_ARGUMENT,
         std::string(what) + ": device " + std::to_string(device) + " does not exist (1 device)");
  }
}

void log(lt_plugin_context* ctx, int level, const std::string& msg) {
  if (ctx->log) ctx->log(ctx->log_user, level, msg.c_str());
}

// --- entry points ---------------------------------------------------------------------

lt_plugin_error* create(lt_plugin_create_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE, "create");
    if (args->core_abi_major != LT_PLUGIN_ABI_MAJOR) {
      fail(LT_STATUS_ABI_MISMATCH, "core ABI major " + std::to_string(args->core_abi_major) +
                                       " != plugin ABI major " +
                                       std::to_string(LT_PLUGIN_ABI_MAJOR));
    }
    std::vector<std::pair<std::string, std::string>> opts;
    if (args->num_options && !args->options) fail(LT_STATUS_INVALID_ARGUMENT, "options is NULL");
    for (size_t i = 0; i < args->num_options; ++i) {
      const lt_plugin_option& o = args->options[i];
      if (!o.key || !o.value) fail(LT_STATUS_INVALID_ARGUMENT, "option with a NULL key or value");
      opts.emplace_back(o.key, o.value);
    }
    auto ctx = std::make_unique<lt_plugin_context>();
    ctx->machine = parse_machine_options(opts);
    ctx->description = ctx->machine.describe();
    ctx->log = args->log;
    ctx->log_user = args->log_user;
    log(ctx.get(), 1, "tpu_sim: " + ctx->description);
    args->context = ctx.release();
  });
}

void destroy(lt_plugin_context* ctx) {
  delete ctx;
}

lt_plugin_error* device_count(lt_plugin_context* ctx, size_t* out) {
  return g_errors.guard([&] {
    check_context(ctx, "device_count");
    if (!out) fail(LT_STATUS_INVALID_ARGUMENT, "device_count: out is NULL");
    *out = 1;
  });
}

lt_plugin_error* device_info(lt_plugin_device_info_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE, "device_info");
    check_context(args->context, "device_info");
    check_device(args->device, "device_info");
    args->name = "tpu_sim";
    args->kind = "tpu";
    args->description = args->context->description.c_str();
    args->memory_bytes = args->context->machine.hbm_capacity_bytes();
    args->host_addressable = 1;
  });
}

lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE, "buffer_alloc");
    check_context(args->context, "buffer_alloc");
    check_device(args->device, "buffer_alloc");
    lt_plugin_context* ctx = args->context;
    const uint64_t cap = ctx->machine.hbm_capacity_bytes();
    uint64_t used = ctx->hbm_in_use.load();
    do {
      if (args->nbytes > cap || used > cap - args->nbytes) {
        fail(LT_STATUS_OUT_OF_MEMORY, "cannot allocate " + format_bytes(double(args->nbytes)) +
                                          " of HBM: " + format_bytes(double(used)) + " of " +
                                          format_bytes(double(cap)) + " in use");
      }
    } while (!ctx->hbm_in_use.compare_exchange_weak(used, used + args->nbytes));
    auto buf = std::make_unique<lt_plugin_buffer>();
    try {
      buf->data.reset(new std::byte[args->nbytes ? args->nbytes : 1]);
    } catch (...) {
      ctx->hbm_in_use -= args->nbytes;
      throw;
    }
    buf->nbytes = args->nbytes;
    uint64_t now = used + args->nbytes, peak = ctx->hbm_peak.load();
    while (now > peak && !ctx->hbm_peak.compare_exchange_weak(peak, now)) {
    }
    args->buffer = buf.release();
  });
}

void buffer_free(lt_plugin_context* ctx, lt_plugin_buffer* buf) {
  if (!buf) return;
  if (ctx) ctx->hbm_in_use -= buf->nbytes;
  delete buf;
}

void check_range(const lt_plugin_buffer_args* args, const char* what) {
  if (!args->buffer) fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": buffer is NULL");
  if (args->offset > args->buffer->nbytes || args->nbytes > args->buffer->nbytes - args->offset) {
    fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + ": range [" +
                                         std::to_string(args->offset) + ", +" +
                                         std::to_string(args->nbytes) + ") exceeds the buffer's " +
                                         std::to_string(args->buffer->nbytes) + " bytes");
  }
}

lt_plugin_error* buffer_upload(lt_plugin_buffer_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE, "buffer_upload");
    check_range(args, "buffer_upload");
    if (args->nbytes && !args->src) fail(LT_STATUS_INVALID_ARGUMENT, "buffer_upload: src is NULL");
    if (args->nbytes) std::memcpy(args->buffer->data.get() + args->offset, args->src, args->nbytes);
  });
}

lt_plugin_error* buffer_download(lt_plugin_buffer_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE, "buffer_download");
    check_range(args, "buffer_download");
    if (args->nbytes && !args->dst)
      fail(LT_STATUS_INVALID_ARGUMENT, "buffer_download: dst is NULL");
    if (args->nbytes) std::memcpy(args->dst, args->buffer->data.get() + args->offset, args->nbytes);
  });
}

lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE, "buffer_host_ptr");
    if (!args->buffer) fail(LT_STATUS_INVALID_ARGUMENT, "buffer_host_ptr: buffer is NULL");
    args->host_ptr = args->buffer->data.get();
  });
}

lt_plugin_error* supports(lt_plugin_supports_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE, "supports");
    if (!args->graph) fail(LT_STATUS_INVALID_ARGUMENT, "supports: graph is NULL");
    if (args->node >= args->graph->num_nodes) {
      fail(LT_STATUS_INVALID_ARGUMENT, "supports: node " + std::to_string(args->node) +
                                           " out of range (" +
                                           std::to_string(args->graph->num_nodes) + " nodes)");
    }
    args->supported = supports_node(*args->graph, args->node) ? 1 : 0;
  });
}

lt_plugin_error* compile(lt_plugin_compile_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE, "compile");
    check_context(args->context, "compile");
    check_device(args->device, "compile");
    if (!args->graph) fail(LT_STATUS_INVALID_ARGUMENT, "compile: graph is NULL");
    auto exe = std::make_unique<lt_plugin_executable>();
    exe->program = compile_program(*args->graph, args->context->machine);
    args->context->compiles++;
    if (args->context->log) {
      char line[160];
      std::snprintf(line, sizeof line,
                    "tpu_sim: compiled %zu nodes to %zu instructions, simulated %.3f us",
                    exe->program.nodes.size(), exe->program.instrs.size(),
                    exe->program.cost.simulated_ns / 1e3);
      log(args->context, 1, line);
      log(args->context, 0, exe->program.listing());
    }
    args->executable = exe.release();
  });
}

lt_plugin_error* execute(lt_plugin_execute_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE, "execute");
    check_context(args->context, "execute");
    if (!args->executable) fail(LT_STATUS_INVALID_ARGUMENT, "execute: executable is NULL");
    const Program& p = args->executable->program;
    if (args->num_inputs != p.inputs.size() || args->num_outputs != p.outputs.size()) {
      fail(LT_STATUS_INVALID_ARGUMENT,
           "execute: got " + std::to_string(args->num_inputs) + " inputs and " +
               std::to_string(args->num_outputs) + " outputs, the program has " +
               std::to_string(p.inputs.size()) + " and " + std::to_string(p.outputs.size()));
    }
    std::vector<const void*> ins(p.inputs.size());
    std::vector<void*> outs(p.outputs.size());
    auto check_buf = [&](lt_plugin_buffer* b, int32_t node, const char* kind, size_t k) {
      uint64_t need = p.nodes[size_t(node)].nbytes;
      if (!b || b->nbytes < need) {
        fail(LT_STATUS_INVALID_ARGUMENT, std::string("execute: ") + kind + " " + std::to_string(k) +
                                             " is NULL or smaller than " + std::to_string(need) +
                                             " bytes");
      }
      return b->data.get();
    };
    for (size_t k = 0; k < ins.size(); ++k)
      ins[k] = check_buf(args->inputs[k], p.inputs[k], "input", k);
    for (size_t k = 0; k < outs.size(); ++k)
      outs[k] = check_buf(args->outputs[k], p.outputs[k], "output", k);
    execute_program(p, ins.data(), outs.data());
    args->executable->executions++;
    std::lock_guard<std::mutex> lock(args->context->mutex);
    lt_plugin_context& c = *args->context;
    c.executions++;
    c.simulated_ns += p.cost.simulated_ns;
    c.flops += p.cost.flops;
    c.hbm_bytes += p.cost.hbm_bytes;
    c.mxu_ns += p.cost.mxu_ns;
    c.vector_ns += p.cost.vector_ns;
    c.dma_ns += p.cost.dma_ns;
  });
}

void executable_destroy(lt_plugin_context*, lt_plugin_executable* exe) {
  delete exe;
}

lt_plugin_error* stats(lt_plugin_stats_args* args) {
  return g_errors.guard([&] {
    check_args(args, LT_PLUGIN_STATS_ARGS_STRUCT_SIZE, "stats");
    check_context(args->context, "stats");
    if (!args->emit) fail(LT_STATUS_INVALID_ARGUMENT, "stats: emit is NULL");
    auto emit = [&](const char* name, double v) { args->emit(args->user, name, v); };
    lt_plugin_context& c = *args->context;
    const double peak = c.machine.peak_flops();
    if (args->executable) {
      const Program& p = args->executable->program;
      emit("simulated_ns", p.cost.simulated_ns);
      emit("mxu_utilization", p.cost.mxu_utilization);
      emit("hbm_bytes", p.cost.hbm_bytes);
      emit("flops", p.cost.flops);
      emit("padded_flops", p.cost.padded_flops);
      emit("mxu_ns", p.cost.mxu_ns);
      emit("vector_ns", p.cost.vector_ns);
      emit("dma_ns", p.cost.dma_ns);
      emit("instructions", double(p.instrs.size()));
      emit("hbm_needed_bytes", double(p.hbm_needed));
      emit("executions", double(args->executable->executions.load()));
      return;
    }
    double sim, flops, bytes, mxu, vec, dma, execs;
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      sim = c.simulated_ns, flops = c.flops, bytes = c.hbm_bytes, mxu = c.mxu_ns;
      vec = c.vector_ns, dma = c.dma_ns, execs = double(c.executions);
    }
    emit("simulated_ns", sim);
    emit("mxu_utilization", sim > 0 ? flops / (sim * 1e-9 * peak) : 0.0);
    emit("hbm_bytes", bytes);
    emit("flops", flops);
    emit("mxu_ns", mxu);
    emit("vector_ns", vec);
    emit("dma_ns", dma);
    emit("executions", execs);
    emit("compiles", double(c.compiles.load()));
    emit("hbm_in_use_bytes", double(c.hbm_in_use.load()));
    emit("hbm_peak_bytes", double(c.hbm_peak.load()));
    emit("hbm_capacity_bytes", double(c.machine.hbm_capacity_bytes()));
    emit("peak_tflops", peak / 1e12);
  });
}

const lt_plugin_api kApi = {
    LT_PLUGIN_API_STRUCT_SIZE,
    LT_PLUGIN_ABI_MAJOR,
    LT_PLUGIN_ABI_MINOR,
    "tpu_sim",
    "0.1.0",
    plugin_support::error_message,
    plugin_support::error_code,
    plugin_support::error_destroy,
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
}  // namespace lt::tpu

extern "C" LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) {
  return &lt::tpu::kApi;
}
