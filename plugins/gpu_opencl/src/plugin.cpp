// The gpu_opencl plugin's C ABI boundary: the lt_plugin_api table, buffers as cl_mem, and
// executables (one built program + kernel launches). Every entry point converts internal
// failures to lt_plugin_error values through g_errors.guard(); nothing throws past this file.
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "cl_runtime.hpp"
#include "codegen.hpp"
#include "lazytensor/fusion.hpp"
#include "lazytensor/lt_plugin.h"
#include "lt_plugin_support.hpp"

struct lt_plugin_context {
  std::unique_ptr<lt::ocl::Device> device;
  lt::ocl::Logger log;
  lt::ocl::DeviceCaps caps;
  std::atomic<uint64_t> executables{0};
};

struct lt_plugin_buffer {
  cl_mem mem = nullptr;
  size_t nbytes = 0;
};

struct lt_plugin_executable {
  cl_program program = nullptr;
  std::vector<cl_kernel> kernels;
  std::vector<lt::ocl::KernelLaunch> launches;
  std::vector<int32_t> inputs, outputs;  // node of input/output k
  std::vector<int32_t> stored;           // nodes with a device buffer
  std::vector<size_t> node_bytes;        // bytes of each node's value (all nodes)
  size_t fusion_groups = 0, split_groups = 0;
  // Guards kernel arguments and temporaries: clSetKernelArg on a shared kernel is not
  // thread-safe, and the core may execute one executable from several threads.
  std::mutex mutex;
  std::vector<cl_mem> temps;  // per node; allocated on first execute, kept for reuse
  ~lt_plugin_executable() {
    for (cl_kernel k : kernels) clReleaseKernel(k);
    for (cl_mem m : temps)
      if (m) clReleaseMemObject(m);
    if (program) clReleaseProgram(program);
  }
};

namespace lt::ocl {
namespace {

using plugin_support::ErrorFactory;

// Failure messages name the plugin (and the CL error) already; only foreign exceptions get
// the plugin's wording here.
ErrorFactory g_errors({.prefix = "",
                       .out_of_memory = "gpu_opencl: out of host memory",
                       .oom_fallback = "gpu_opencl: out of host memory",
                       .internal = "gpu_opencl: internal error: ",
                       .unknown = "gpu_opencl: internal error (unknown exception)",
                       .invalid_argument = "gpu_opencl: "});

void require(bool ok, const char* what) {
  if (!ok) fail(LT_STATUS_INVALID_ARGUMENT, std::string("gpu_opencl: ") + what);
}

void check_args(const void* args, size_t struct_size, size_t needed, const char* name) {
  require(args != nullptr, (std::string(name) + " is NULL").c_str());
  if (struct_size < needed)
    fail(LT_STATUS_ABI_MISMATCH, std::string("gpu_opencl: ") + name + ".struct_size " +
                                     std::to_string(struct_size) + " < " + std::to_string(needed));
}

void check_context(lt_plugin_context* c, size_t device) {
  require(c != nullptr && c->device != nullptr, "context is NULL");
  if (device != 0)
    fail(LT_STATUS_NOT_FOUND,
         "gpu_opencl: device index " + std::to_string(device) + " out of range (1 device)");
}

lt_plugin_error* create(lt_plugin_create_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE,
               "lt_plugin_create_args");
    if (args->core_abi_major != LT_PLUGIN_ABI_MAJOR)
      fail(LT_STATUS_ABI_MISMATCH, "gpu_opencl: core ABI major " +
                                       std::to_string(args->core_abi_major) + " != plugin " +
                                       std::to_string(LT_PLUGIN_ABI_MAJOR));
    require(args->num_options == 0 || args->options, "options is NULL");
    auto ctx = std::make_unique<lt_plugin_context>();
    ctx->log = Logger{args->log, args->log_user};
    Options opts = parse_options(args->options, args->num_options);
    ctx->device.reset(Device::create(opts, ctx->log));
    ctx->caps.fp64 = ctx->device->has_fp64();
    ctx->caps.cpu = ctx->device->is_cpu();
    ctx->caps.max_wg = ctx->device->max_work_group();
    ctx->caps.vec_width = ctx->device->native_float_width();
    args->context = ctx.release();
  });
}

void destroy(lt_plugin_context* c) {
  try {
    delete c;
  } catch (...) {
  }
}

lt_plugin_error* device_count(lt_plugin_context* c, size_t* out) {
  return g_errors.guard([&] {
    require(c != nullptr && out != nullptr, "device_count: NULL argument");
    *out = 1;
  });
}

lt_plugin_error* device_info(lt_plugin_device_info_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE,
               "lt_plugin_device_info_args");
    check_context(args->context, args->device);
    const Device& d = *args->context->device;
    args->name = d.name().c_str();
    args->kind = d.kind().c_str();
    args->description = d.description().c_str();
    args->memory_bytes = d.memory_bytes();
    args->host_addressable = 0;
  });
}

lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE,
               "lt_plugin_buffer_args");
    check_context(args->context, args->device);
    auto buf = std::make_unique<lt_plugin_buffer>();
    buf->nbytes = args->nbytes;
    cl_int e = CL_SUCCESS;
    // OpenCL refuses zero-sized buffers; empty tensors still get a handle.
    buf->mem = clCreateBuffer(args->context->device->context(), CL_MEM_READ_WRITE,
                              args->nbytes ? args->nbytes : 1, nullptr, &e);
    if (e == CL_INVALID_BUFFER_SIZE)
      fail(LT_STATUS_OUT_OF_MEMORY, "gpu_opencl: buffer of " + std::to_string(args->nbytes) +
                                        " bytes exceeds the device's maximum allocation");
    check(e, "clCreateBuffer");
    args->buffer = buf.release();
  });
}

void buffer_free(lt_plugin_context*, lt_plugin_buffer* b) {
  if (!b) return;
  if (b->mem) clReleaseMemObject(b->mem);
  delete b;
}

void check_range(const lt_plugin_buffer_args* args, const char* what) {
  require(args->buffer != nullptr, (std::string(what) + ": buffer is NULL").c_str());
  if (args->offset > args->buffer->nbytes || args->nbytes > args->buffer->nbytes - args->offset)
    fail(LT_STATUS_INVALID_ARGUMENT, std::string("gpu_opencl: ") + what + " of " +
                                         std::to_string(args->nbytes) + " bytes at offset " +
                                         std::to_string(args->offset) + " exceeds the buffer's " +
                                         std::to_string(args->buffer->nbytes) + " bytes");
}

lt_plugin_error* buffer_upload(lt_plugin_buffer_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE,
               "lt_plugin_buffer_args");
    check_context(args->context, args->device);
    check_range(args, "upload");
    if (args->nbytes == 0) return;
    require(args->src != nullptr, "upload: src is NULL");
    check(clEnqueueWriteBuffer(args->context->device->queue(), args->buffer->mem, CL_TRUE,
                               args->offset, args->nbytes, args->src, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer");
  });
}

lt_plugin_error* buffer_download(lt_plugin_buffer_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE,
               "lt_plugin_buffer_args");
    check_context(args->context, args->device);
    check_range(args, "download");
    if (args->nbytes == 0) return;
    require(args->dst != nullptr, "download: dst is NULL");
    check(clEnqueueReadBuffer(args->context->device->queue(), args->buffer->mem, CL_TRUE,
                              args->offset, args->nbytes, args->dst, 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
  });
}

lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* args) {
  return g_errors.guard([&] {
    require(args != nullptr, "lt_plugin_buffer_args is NULL");
    args->host_ptr = nullptr;  // device memory is not host-addressable
  });
}

void check_graph(const lt_graph* g) {
  require(g != nullptr, "graph is NULL");
  if (g->struct_size < LT_GRAPH_STRUCT_SIZE)
    fail(LT_STATUS_ABI_MISMATCH, "gpu_opencl: lt_graph.struct_size too small");
  require(g->num_nodes == 0 || g->nodes, "graph has nodes == NULL");
  require(g->num_inputs == 0 || g->inputs, "graph has inputs == NULL");
  require(g->num_outputs == 0 || g->outputs, "graph has outputs == NULL");
}

lt_plugin_error* supports(lt_plugin_supports_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE,
               "lt_plugin_supports_args");
    check_context(args->context, args->device);
    check_graph(args->graph);
    require(args->node < args->graph->num_nodes, "supports: node index out of range");
    args->supported = node_supported(*args->graph, args->node, args->context->caps) ? 1 : 0;
  });
}

lt_plugin_error* compile(lt_plugin_compile_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE,
               "lt_plugin_compile_args");
    check_context(args->context, args->device);
    check_graph(args->graph);
    lt_plugin_context& ctx = *args->context;
    fusion::OwnedGraph expanded;
    const lt_graph* g = args->graph;
    if (fusion::expand_composites(*args->graph, &expanded)) g = &expanded.view();
    for (size_t i = 0; i < g->num_nodes; ++i) {
      const lt_graph_node& n = g->nodes[i];
      require(n.op != nullptr, "graph node without op");
      if (!node_supported(*g, i, ctx.caps))
        fail(LT_STATUS_UNSUPPORTED, std::string("gpu_opencl: cannot compile node ") +
                                        std::to_string(i) + " (" + n.op + ", " +
                                        lt_dtype_name(n.dtype) + ")");
    }
    for (size_t k = 0; k < g->num_inputs; ++k)
      require(g->inputs[k] >= 0 && static_cast<size_t>(g->inputs[k]) < g->num_nodes &&
                  std::strcmp(g->nodes[g->inputs[k]].op, "input") == 0,
              "graph input does not name an input node");
    GeneratedProgram gen = generate(*g, ctx.caps);
    ctx.log(0, "gpu_opencl: generated program:\n" + gen.source);
    auto exe = std::make_unique<lt_plugin_executable>();
    exe->program = ctx.device->program(gen.source);
    for (const KernelLaunch& l : gen.kernels) {
      cl_int e = CL_SUCCESS;
      cl_kernel k = clCreateKernel(exe->program, l.name.c_str(), &e);
      check(e, "clCreateKernel");
      exe->kernels.push_back(k);
    }
    exe->launches = std::move(gen.kernels);
    exe->stored = std::move(gen.stored);
    exe->fusion_groups = gen.groups;
    exe->split_groups = gen.split_groups;
    exe->inputs.assign(g->inputs, g->inputs + g->num_inputs);
    exe->outputs.assign(g->outputs, g->outputs + g->num_outputs);
    exe->node_bytes.resize(g->num_nodes);
    for (size_t i = 0; i < g->num_nodes; ++i) {
      const lt_graph_node& n = g->nodes[i];
      size_t bytes = lt_dtype_size(n.dtype);
      for (size_t d = 0; d < n.rank; ++d) bytes *= static_cast<size_t>(n.shape[d]);
      exe->node_bytes[i] = bytes;
    }
    exe->temps.assign(g->num_nodes, nullptr);
    ctx.executables.fetch_add(1);
    args->executable = exe.release();
  });
}

lt_plugin_error* execute(lt_plugin_execute_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE,
               "lt_plugin_execute_args");
    require(args->context != nullptr && args->executable != nullptr, "execute: NULL argument");
    lt_plugin_executable& exe = *args->executable;
    const Device& dev = *args->context->device;
    if (args->num_inputs != exe.inputs.size() || args->num_outputs != exe.outputs.size())
      fail(LT_STATUS_INVALID_ARGUMENT,
           "gpu_opencl: execute got " + std::to_string(args->num_inputs) + " inputs and " +
               std::to_string(args->num_outputs) + " outputs, the executable has " +
               std::to_string(exe.inputs.size()) + " and " + std::to_string(exe.outputs.size()));
    std::lock_guard<std::mutex> lock(exe.mutex);
    std::vector<cl_mem> mem(exe.node_bytes.size(), nullptr);
    for (size_t k = 0; k < exe.inputs.size(); ++k) {
      require(args->inputs[k] != nullptr, "execute: input buffer is NULL");
      if (args->inputs[k]->nbytes < exe.node_bytes[exe.inputs[k]])
        fail(LT_STATUS_INVALID_ARGUMENT, "gpu_opencl: input " + std::to_string(k) + " has " +
                                             std::to_string(args->inputs[k]->nbytes) +
                                             " bytes, expected " +
                                             std::to_string(exe.node_bytes[exe.inputs[k]]));
      mem[exe.inputs[k]] = args->inputs[k]->mem;
    }
    for (size_t k = 0; k < exe.outputs.size(); ++k) {
      require(args->outputs[k] != nullptr, "execute: output buffer is NULL");
      if (args->outputs[k]->nbytes < exe.node_bytes[exe.outputs[k]])
        fail(LT_STATUS_INVALID_ARGUMENT,
             "gpu_opencl: output " + std::to_string(k) + " buffer is too small");
      if (!mem[exe.outputs[k]]) mem[exe.outputs[k]] = args->outputs[k]->mem;
    }
    for (int32_t n : exe.stored) {
      if (mem[n]) continue;
      if (!exe.temps[n]) {
        cl_int e = CL_SUCCESS;
        exe.temps[n] = clCreateBuffer(dev.context(), CL_MEM_READ_WRITE,
                                      exe.node_bytes[n] ? exe.node_bytes[n] : 1, nullptr, &e);
        check(e, "clCreateBuffer (temporary)");
      }
      mem[n] = exe.temps[n];
    }
    cl_command_queue q = dev.queue();
    for (size_t i = 0; i < exe.launches.size(); ++i) {
      const KernelLaunch& l = exe.launches[i];
      for (size_t a = 0; a < l.args.size(); ++a)
        check(clSetKernelArg(exe.kernels[i], static_cast<cl_uint>(a), sizeof(cl_mem),
                             &mem[l.args[a]]),
              "clSetKernelArg");
      check(clEnqueueNDRangeKernel(q, exe.kernels[i], l.dims, nullptr, l.global,
                                   l.local[0] ? l.local : nullptr, 0, nullptr, nullptr),
            ("clEnqueueNDRangeKernel(" + l.name + ")").c_str());
    }
    // Outputs that are graph inputs, or that repeat a node, are copies.
    for (size_t k = 0; k < exe.outputs.size(); ++k) {
      cl_mem dst = args->outputs[k]->mem, src = mem[exe.outputs[k]];
      size_t n = exe.node_bytes[exe.outputs[k]];
      if (dst != src && n > 0)
        check(clEnqueueCopyBuffer(q, src, dst, 0, 0, n, 0, nullptr, nullptr),
              "clEnqueueCopyBuffer");
    }
    check(clFinish(q), "clFinish (kernel execution)");
  });
}

void executable_destroy(lt_plugin_context*, lt_plugin_executable* exe) {
  try {
    delete exe;
  } catch (...) {
  }
}

lt_plugin_error* stats(lt_plugin_stats_args* args) {
  return g_errors.guard([&] {
    check_args(args, args ? args->struct_size : 0, LT_PLUGIN_STATS_ARGS_STRUCT_SIZE,
               "lt_plugin_stats_args");
    require(args->context != nullptr && args->emit != nullptr, "stats: NULL argument");
    if (args->executable) {
      const lt_plugin_executable& exe = *args->executable;
      args->emit(args->user, "kernels", static_cast<double>(exe.launches.size()));
      args->emit(args->user, "fusion_groups", static_cast<double>(exe.fusion_groups));
      args->emit(args->user, "split_groups", static_cast<double>(exe.split_groups));
      return;
    }
    Device::Stats s = args->context->device->stats();
    args->emit(args->user, "programs_built", static_cast<double>(s.programs_built));
    args->emit(args->user, "program_cache_hits", static_cast<double>(s.memory_hits + s.disk_hits));
    args->emit(args->user, "program_disk_cache_hits", static_cast<double>(s.disk_hits));
    args->emit(args->user, "compile_ms", s.compile_ms);
    args->emit(args->user, "executables", static_cast<double>(args->context->executables.load()));
  });
}

const lt_plugin_api kApi = {
    LT_PLUGIN_API_STRUCT_SIZE,
    LT_PLUGIN_ABI_MAJOR,
    LT_PLUGIN_ABI_MINOR,
    "gpu_opencl",
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
}  // namespace lt::ocl

extern "C" LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) {
  return &lt::ocl::kApi;
}
