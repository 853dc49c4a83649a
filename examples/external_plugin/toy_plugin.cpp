// toy_plugin.cpp — the out-of-tree example backend "toy": host memory, f32 add/mul/relu/neg
// on equal shapes; the core sends every other node to the cpu_eager fallback. Shows the whole
// plugin contract in one file (see docs/writing-a-backend.md for the walk-through).
#include <lazytensor/lt_plugin.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

// ---- handles: defined here, opaque to the core -------------------------------------------

struct lt_plugin_error {
  lt_status_code code;
  std::string message;
};

struct lt_plugin_context {
  lt_plugin_log_fn log = nullptr;
  void* log_user = nullptr;
  std::mutex mu;  // guards `executions` (the core may call execute from several threads)
  double executions = 0;
};

struct lt_plugin_buffer {
  std::vector<unsigned char> bytes;
};

namespace {

enum class Op { kInput, kAdd, kMul, kRelu, kNeg };

// A compiled region: a copy of what execution needs (the lt_graph is only borrowed).
struct Step {
  Op op;
  size_t numel;
  int32_t a, b;  // operand node indices (b unused for unary ops)
};

}  // namespace

struct lt_plugin_executable {
  std::vector<Step> steps;      // one per graph node, in topological order
  std::vector<int32_t> inputs;  // node index of input k
  std::vector<int32_t> outputs;
};

namespace {

// Errors are plain values; an exception never leaves a function of the table.
lt_plugin_error* make_error(lt_status_code code, const std::string& msg) noexcept {
  try {
    return new lt_plugin_error{code, "toy: " + msg};
  } catch (...) {
    static lt_plugin_error oom{LT_STATUS_OUT_OF_MEMORY, "toy: out of memory"};
    return &oom;
  }
}

template <class F>
lt_plugin_error* guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return make_error(LT_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return make_error(LT_STATUS_INTERNAL, e.what());
  } catch (...) {
    return make_error(LT_STATUS_INTERNAL, "unknown exception");
  }
}

bool parse_op(const char* name, Op* op) {
  static const struct {
    const char* name;
    Op op;
  } kOps[] = {{"input", Op::kInput},
              {"add", Op::kAdd},
              {"mul", Op::kMul},
              {"relu", Op::kRelu},
              {"neg", Op::kNeg}};
  for (const auto& o : kOps)
    if (std::strcmp(name, o.name) == 0) return *op = o.op, true;
  return false;
}

size_t numel(const lt_graph_node& n) {
  size_t e = 1;
  for (size_t d = 0; d < n.rank; ++d) e *= static_cast<size_t>(n.shape[d]);
  return e;
}

bool same_shape(const lt_graph_node& x, const lt_graph_node& y) {
  return x.rank == y.rank && std::memcmp(x.shape, y.shape, x.rank * sizeof(int64_t)) == 0;
}

// ---- the table's functions ------------------------------------------------------------

const char* error_message(const lt_plugin_error* e) {
  return e->message.c_str();
}
lt_status_code error_code(const lt_plugin_error* e) {
  return e->code;
}
void error_destroy(lt_plugin_error* e) {
  if (e && e->code != LT_STATUS_OUT_OF_MEMORY) delete e;
}

lt_plugin_error* create(lt_plugin_create_args* a) {
  return guarded([&]() -> lt_plugin_error* {
    auto* ctx = new lt_plugin_context;
    // Fields newer than our header would be read only after checking a->struct_size.
    ctx->log = a->log;
    ctx->log_user = a->log_user;
    if (ctx->log) ctx->log(ctx->log_user, 1, "toy: context created");
    a->context = ctx;
    return nullptr;
  });
}
void destroy(lt_plugin_context* ctx) {
  delete ctx;
}

lt_plugin_error* device_count(lt_plugin_context*, size_t* out) {
  *out = 1;
  return nullptr;
}
lt_plugin_error* device_info(lt_plugin_device_info_args* a) {
  if (a->device != 0) return make_error(LT_STATUS_INVALID_ARGUMENT, "no such device");
  a->name = "toy-host";
  a->kind = "cpu";
  a->description = "example backend: f32 add, mul, relu, neg";
  a->memory_bytes = 0;
  a->host_addressable = 1;
  return nullptr;
}

lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* a) {
  return guarded([&]() -> lt_plugin_error* {
    a->buffer = new lt_plugin_buffer{std::vector<unsigned char>(a->nbytes)};
    return nullptr;
  });
}
void buffer_free(lt_plugin_context*, lt_plugin_buffer* b) {
  delete b;
}
lt_plugin_error* buffer_upload(lt_plugin_buffer_args* a) {
  if (a->offset > a->buffer->bytes.size() || a->nbytes > a->buffer->bytes.size() - a->offset)
    return make_error(LT_STATUS_INVALID_ARGUMENT, "upload out of range");
  std::memcpy(a->buffer->bytes.data() + a->offset, a->src, a->nbytes);
  return nullptr;
}
lt_plugin_error* buffer_download(lt_plugin_buffer_args* a) {
  if (a->offset > a->buffer->bytes.size() || a->nbytes > a->buffer->bytes.size() - a->offset)
    return make_error(LT_STATUS_INVALID_ARGUMENT, "download out of range");
  std::memcpy(a->dst, a->buffer->bytes.data() + a->offset, a->nbytes);
  return nullptr;
}
lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* a) {
  a->host_ptr = a->buffer->bytes.data();
  return nullptr;
}

// Claims a node only if it can run it exactly: known op, f32 everywhere, no broadcasting.
lt_plugin_error* supports(lt_plugin_supports_args* a) {
  const lt_graph_node& n = a->graph->nodes[a->node];
  Op op;
  a->supported = parse_op(n.op, &op) && op != Op::kInput && n.dtype == LT_DTYPE_F32;
  for (size_t k = 0; a->supported && k < n.num_operands; ++k) {
    const lt_graph_node& o = a->graph->nodes[n.operands[k]];
    a->supported = o.dtype == LT_DTYPE_F32 && same_shape(o, n);
  }
  return nullptr;
}

lt_plugin_error* compile(lt_plugin_compile_args* a) {
  return guarded([&]() -> lt_plugin_error* {
    const lt_graph* g = a->graph;
    auto exe = std::make_unique<lt_plugin_executable>();
    for (size_t i = 0; i < g->num_nodes; ++i) {
      const lt_graph_node& n = g->nodes[i];
      Step s{Op::kInput, numel(n), -1, -1};
      if (!parse_op(n.op, &s.op))
        return make_error(LT_STATUS_UNSUPPORTED, std::string("op '") + n.op + "' not supported");
      if (n.num_operands > 0) s.a = n.operands[0];
      if (n.num_operands > 1) s.b = n.operands[1];
      exe->steps.push_back(s);
    }
    exe->inputs.assign(g->inputs, g->inputs + g->num_inputs);
    exe->outputs.assign(g->outputs, g->outputs + g->num_outputs);
    a->executable = exe.release();
    return nullptr;
  });
}

lt_plugin_error* execute(lt_plugin_execute_args* a) {
  return guarded([&]() -> lt_plugin_error* {
    const lt_plugin_executable& exe = *a->executable;
    if (a->num_inputs != exe.inputs.size() || a->num_outputs != exe.outputs.size())
      return make_error(LT_STATUS_INVALID_ARGUMENT, "wrong number of buffers");
    // Every node gets a scratch vector; inputs are read straight from their buffers.
    std::vector<std::vector<float>> val(exe.steps.size());
    std::vector<const float*> ptr(exe.steps.size(), nullptr);
    for (size_t k = 0; k < exe.inputs.size(); ++k)
      ptr[exe.inputs[k]] = reinterpret_cast<const float*>(a->inputs[k]->bytes.data());
    for (size_t i = 0; i < exe.steps.size(); ++i) {
      const Step& s = exe.steps[i];
      if (s.op == Op::kInput) continue;
      val[i].resize(s.numel);
      float* y = val[i].data();
      const float* x = ptr[s.a];
      const float* z = s.b >= 0 ? ptr[s.b] : nullptr;
      for (size_t e = 0; e < s.numel; ++e) {
        switch (s.op) {
          case Op::kAdd:
            y[e] = x[e] + z[e];
            break;
          case Op::kMul:
            y[e] = x[e] * z[e];
            break;
          case Op::kRelu:
            y[e] = x[e] < 0.0f ? 0.0f : x[e];  // NaN stays NaN (docs/ops.md)
            break;
          case Op::kNeg:
            y[e] = -x[e];
            break;
          case Op::kInput:
            break;
        }
      }
      ptr[i] = y;
    }
    for (size_t k = 0; k < exe.outputs.size(); ++k) {
      const Step& s = exe.steps[exe.outputs[k]];
      std::memcpy(a->outputs[k]->bytes.data(), ptr[exe.outputs[k]], s.numel * sizeof(float));
    }
    std::lock_guard lk(a->context->mu);
    a->context->executions += 1;
    return nullptr;
  });
}

void executable_destroy(lt_plugin_context*, lt_plugin_executable* e) {
  delete e;
}

lt_plugin_error* stats(lt_plugin_stats_args* a) {
  // Per executable: its node count; context-wide: how many graphs ran (lt-info shows these).
  if (a->executable) {
    a->emit(a->user, "nodes", static_cast<double>(a->executable->steps.size()));
  } else {
    std::lock_guard lk(a->context->mu);
    a->emit(a->user, "executions", a->context->executions);
  }
  return nullptr;
}

const lt_plugin_api kApi = [] {
  lt_plugin_api api{};
  api.struct_size = LT_PLUGIN_API_STRUCT_SIZE;
  api.abi_major = LT_PLUGIN_ABI_MAJOR;
  api.abi_minor = LT_PLUGIN_ABI_MINOR;
  api.name = "toy";
  api.version = "1.0.0";
  api.error_message = error_message;
  api.error_code = error_code;
  api.error_destroy = error_destroy;
  api.create = create;
  api.destroy = destroy;
  api.device_count = device_count;
  api.device_info = device_info;
  api.buffer_alloc = buffer_alloc;
  api.buffer_free = buffer_free;
  api.buffer_upload = buffer_upload;
  api.buffer_download = buffer_download;
  api.buffer_host_ptr = buffer_host_ptr;
  api.supports = supports;
  api.compile = compile;
  api.execute = execute;
  api.executable_destroy = executable_destroy;
  api.stats = stats;
  return api;
}();

}  // namespace

extern "C" LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) {
  return &kApi;
}
