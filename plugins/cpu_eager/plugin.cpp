// plugin.cpp — cpu_eager's C ABI: the exported function table, the context and host buffers
// (with a size-class cache); every entry point runs through g_errors.guard(), so no exception
// leaves this file.
#include <cblas.h>
#include <tbb/info.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "executable.h"
#include "lt_plugin_support.hpp"

struct lt_plugin_context {
  lt_plugin_log_fn log = nullptr;
  void* log_user = nullptr;
  std::string description;
  uint64_t memory_bytes = 0;
  // Freed buffers kept for reuse, keyed by size class; bounded by cache_limit bytes.
  std::mutex cache_mutex;
  std::multimap<size_t, void*> cache;
  size_t cached_bytes = 0;
  size_t cache_limit = size_t{1} << 30;
  uint64_t cache_hits = 0, cache_misses = 0, live_buffers = 0, executions = 0;
};

struct lt_plugin_executable {
  std::unique_ptr<lt::eager::Executable> impl;
};

namespace {

using lt::eager::Error;
using lt::eager::fail;

// cpu_eager's own messages are bare; the prefix names the plugin on every error.
lt::plugin_support::ErrorFactory g_errors({.prefix = "cpu_eager: ",
                                           .out_of_memory = "out of memory",
                                           .oom_fallback = "out of memory",
                                           .internal = "",
                                           .unknown = "unknown exception",
                                           .invalid_argument = nullptr});

void need(const void* p, const char* what) {
  if (!p) fail(LT_STATUS_INVALID_ARGUMENT, std::string(what) + " is NULL");
}
void need_size(size_t have, size_t want, const char* what) {
  if (have < want) {
    fail(LT_STATUS_ABI_MISMATCH, std::string(what) + ".struct_size " + std::to_string(have) +
                                     " is smaller than " + std::to_string(want));
  }
}
void need_device(size_t device) {
  if (device != 0) {
    fail(LT_STATUS_NOT_FOUND, "device " + std::to_string(device) + " does not exist (1 device)");
  }
}

// Size classes: multiples of 64 below 4 KiB, then quarter steps between powers of two, so
// a reused buffer wastes at most 25%.
size_t size_class(size_t n) {
  if (n <= 4096) return n == 0 ? 64 : (n + 63) / 64 * 64;
  size_t p = 4096;
  while (p < n / 2 + 1 && p < (size_t{1} << 62)) p <<= 1;
  for (size_t q = 1; q <= 4; ++q) {
    size_t c = p + p * q / 4;
    if (c >= n) return c;
  }
  return p * 2;
}

lt_plugin_error* create(lt_plugin_create_args* args) {
  return g_errors.guard([&] {
    need(args, "create args");
    need_size(args->struct_size, LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE, "lt_plugin_create_args");
    if (args->core_abi_major != LT_PLUGIN_ABI_MAJOR) {
      fail(LT_STATUS_ABI_MISMATCH, "core ABI major " + std::to_string(args->core_abi_major) +
                                       " != plugin ABI major " +
                                       std::to_string(LT_PLUGIN_ABI_MAJOR));
    }
    if (args->num_options && !args->options) fail(LT_STATUS_INVALID_ARGUMENT, "options is NULL");
    auto ctx = std::make_unique<lt_plugin_context>();
    ctx->log = args->log;
    ctx->log_user = args->log_user;
    for (size_t i = 0; i < args->num_options; ++i) {
      const lt_plugin_option& o = args->options[i];
      if (!o.key || !o.value) fail(LT_STATUS_INVALID_ARGUMENT, "option with NULL key or value");
      if (std::strcmp(o.key, "buffer_cache_mb") == 0) {
        char* end = nullptr;
        unsigned long long mb = std::strtoull(o.value, &end, 10);
        if (!*o.value || *end) {
          fail(LT_STATUS_INVALID_ARGUMENT,
               std::string("option buffer_cache_mb: '") + o.value + "' is not a number");
        }
        ctx->cache_limit = static_cast<size_t>(mb) << 20;
      } else if (ctx->log) {
        ctx->log(ctx->log_user, 3,
                 (std::string("cpu_eager: ignoring unknown option '") + o.key + "'").c_str());
      }
    }
    const char* core = openblas_get_corename();
    ctx->description = "host CPU, " + std::to_string(tbb::info::default_concurrency()) +
                       " TBB threads; OpenBLAS core " + (core ? core : "?") + ", " +
                       std::to_string(openblas_get_num_threads()) + " threads";
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    ctx->memory_bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
    args->context = ctx.release();
  });
}

void destroy(lt_plugin_context* ctx) {
  if (!ctx) return;
  for (auto& [size, p] : ctx->cache) lt::eager::aligned_free(p);
  delete ctx;
}

lt_plugin_error* device_count(lt_plugin_context* ctx, size_t* out) {
  return g_errors.guard([&] {
    need(ctx, "context");
    need(out, "out");
    *out = 1;
  });
}

lt_plugin_error* device_info(lt_plugin_device_info_args* a) {
  return g_errors.guard([&] {
    need(a, "device_info args");
    need_size(a->struct_size, LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE, "lt_plugin_device_info_args");
    need(a->context, "context");
    need_device(a->device);
    a->name = "cpu";
    a->kind = "cpu";
    a->description = a->context->description.c_str();
    a->memory_bytes = a->context->memory_bytes;
    a->host_addressable = 1;
  });
}

void check_buffer_args(lt_plugin_buffer_args* a, bool needs_buffer) {
  need(a, "buffer args");
  need_size(a->struct_size, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE, "lt_plugin_buffer_args");
  need(a->context, "context");
  need_device(a->device);
  if (needs_buffer) need(a->buffer, "buffer");
}

void check_range(const lt_plugin_buffer_args* a) {
  if (a->offset > a->buffer->nbytes || a->nbytes > a->buffer->nbytes - a->offset) {
    fail(LT_STATUS_INVALID_ARGUMENT,
         "byte range [" + std::to_string(a->offset) + ", " + std::to_string(a->offset + a->nbytes) +
             ") exceeds the buffer's " + std::to_string(a->buffer->nbytes) + " bytes");
  }
}

lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* a) {
  return g_errors.guard([&] {
    check_buffer_args(a, false);
    lt_plugin_context* ctx = a->context;
    const size_t cls = size_class(a->nbytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(ctx->cache_mutex);
      auto it = ctx->cache.find(cls);
      if (it != ctx->cache.end()) {
        p = it->second;
        ctx->cache.erase(it);
        ctx->cached_bytes -= cls;
        ++ctx->cache_hits;
      } else {
        ++ctx->cache_misses;
      }
    }
    if (!p) p = lt::eager::aligned_alloc64(cls);
    a->buffer = new lt_plugin_buffer{p, a->nbytes, cls};
    std::lock_guard<std::mutex> lock(ctx->cache_mutex);
    ++ctx->live_buffers;
  });
}

void buffer_free(lt_plugin_context* ctx, lt_plugin_buffer* b) {
  if (!b) return;
  if (!ctx) {
    lt::eager::aligned_free(b->data);
    delete b;
    return;
  }
  try {
    std::lock_guard<std::mutex> lock(ctx->cache_mutex);
    --ctx->live_buffers;
    if (ctx->cached_bytes + b->capacity <= ctx->cache_limit) {
      ctx->cache.emplace(b->capacity, b->data);
      ctx->cached_bytes += b->capacity;
      b->data = nullptr;
    }
  } catch (...) {
  }
  lt::eager::aligned_free(b->data);
  delete b;
}

lt_plugin_error* buffer_upload(lt_plugin_buffer_args* a) {
  return g_errors.guard([&] {
    check_buffer_args(a, true);
    check_range(a);
    if (a->nbytes) {
      need(a->src, "src");
      std::memcpy(static_cast<char*>(a->buffer->data) + a->offset, a->src, a->nbytes);
    }
  });
}

lt_plugin_error* buffer_download(lt_plugin_buffer_args* a) {
  return g_errors.guard([&] {
    check_buffer_args(a, true);
    check_range(a);
    if (a->nbytes) {
      need(a->dst, "dst");
      std::memcpy(a->dst, static_cast<const char*>(a->buffer->data) + a->offset, a->nbytes);
    }
  });
}

lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* a) {
  return g_errors.guard([&] {
    check_buffer_args(a, true);
    a->host_ptr = a->buffer->data;
  });
}

lt_plugin_error* supports(lt_plugin_supports_args* a) {
  return g_errors.guard([&] {
    need(a, "supports args");
    need_size(a->struct_size, LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE, "lt_plugin_supports_args");
    need(a->context, "context");
    need_device(a->device);
    need(a->graph, "graph");
    if (a->node >= a->graph->num_nodes || !a->graph->nodes) {
      fail(LT_STATUS_INVALID_ARGUMENT, "supports: node " + std::to_string(a->node) +
                                           " out of range (" + std::to_string(a->graph->num_nodes) +
                                           " nodes)");
    }
    a->supported = 0;
    try {
      lt::eager::check_node(*a->graph, a->node);
      a->supported = 1;
    } catch (const Error&) {
      // unknown op, unsupported dtype or invalid node: "no", not an error
    }
  });
}

lt_plugin_error* compile(lt_plugin_compile_args* a) {
  return g_errors.guard([&] {
    need(a, "compile args");
    need_size(a->struct_size, LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE, "lt_plugin_compile_args");
    need(a->context, "context");
    need_device(a->device);
    need(a->graph, "graph");
    auto ex = std::make_unique<lt_plugin_executable>();
    ex->impl = lt::eager::Executable::compile(*a->graph);
    a->executable = ex.release();
  });
}

lt_plugin_error* execute(lt_plugin_execute_args* a) {
  return g_errors.guard([&] {
    need(a, "execute args");
    need_size(a->struct_size, LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE, "lt_plugin_execute_args");
    need(a->context, "context");
    need(a->executable, "executable");
    a->executable->impl->execute(a->inputs, a->num_inputs, a->outputs, a->num_outputs);
    std::lock_guard<std::mutex> lock(a->context->cache_mutex);
    ++a->context->executions;
  });
}

void executable_destroy(lt_plugin_context*, lt_plugin_executable* ex) {
  delete ex;
}

lt_plugin_error* stats(lt_plugin_stats_args* a) {
  return g_errors.guard([&] {
    need(a, "stats args");
    need_size(a->struct_size, LT_PLUGIN_STATS_ARGS_STRUCT_SIZE, "lt_plugin_stats_args");
    need(a->context, "context");
    need(reinterpret_cast<const void*>(a->emit), "emit");
    if (a->executable) {
      const auto& ex = *a->executable->impl;
      a->emit(a->user, "kernels", static_cast<double>(ex.kernels_per_run()));
      a->emit(a->user, "executions", static_cast<double>(ex.executions()));
      a->emit(a->user, "compile_ms", ex.compile_ms());
      a->emit(a->user, "nodes", static_cast<double>(ex.num_nodes()));
      a->emit(a->user, "workspace_bytes", static_cast<double>(ex.workspace_bytes()));
      return;
    }
    lt_plugin_context* c = a->context;
    uint64_t v[5];
    {
      std::lock_guard<std::mutex> lock(c->cache_mutex);
      v[0] = c->executions;
      v[1] = c->live_buffers;
      v[2] = c->cached_bytes;
      v[3] = c->cache_hits;
      v[4] = c->cache_misses;
    }
    a->emit(a->user, "executions", static_cast<double>(v[0]));
    a->emit(a->user, "live_buffers", static_cast<double>(v[1]));
    a->emit(a->user, "buffer_cache_bytes", static_cast<double>(v[2]));
    a->emit(a->user, "buffer_cache_hits", static_cast<double>(v[3]));
    a->emit(a->user, "buffer_cache_misses", static_cast<double>(v[4]));
  });
}

const lt_plugin_api kApi = {
    LT_PLUGIN_API_STRUCT_SIZE,
    LT_PLUGIN_ABI_MAJOR,
    LT_PLUGIN_ABI_MINOR,
    "cpu_eager",
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
