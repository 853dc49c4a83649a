// executable.cpp — compiles a validated lt_graph into cpu_eager's flat executable: a copy of
// the region, dead-node elimination, one host kernel per live node, liveness-based slot reuse;
// then runs it node by node. Every walk here is a linear loop (graphs may be 1,000,000 deep).
#include "executable.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

namespace lt::eager {
namespace {

void* aligned_alloc64(size_t bytes) {
  size_t n = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, n);
  if (!p) kit::fail(LT_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes");
  return p;
}

}  // namespace

Executable::Executable(const lt_graph& g) {
  const auto t0 = std::chrono::steady_clock::now();
  Executable* ex = this;
  const size_t n = g.num_nodes;
  ex->nodes_.resize(n);
  ex->dims_.reserve(n);
  // Copy descriptions first so operands can be described from owned memory.
  for (size_t i = 0; i < n; ++i) {
    const lt_graph_node& gn = g.nodes[i];
    Node& nd = ex->nodes_[i];
    nd.numel = lower::DescRef(gn).numel();
    nd.dtype = gn.dtype;
    nd.rank = static_cast<uint8_t>(gn.rank);
    nd.shape_off = static_cast<uint32_t>(ex->dims_.size());
    ex->dims_.insert(ex->dims_.end(), gn.shape, gn.shape + gn.rank);
    nd.operand_off = static_cast<uint32_t>(ex->operands_.size());
    nd.num_operands = static_cast<uint32_t>(gn.num_operands);
    ex->operands_.insert(ex->operands_.end(), gn.operands, gn.operands + gn.num_operands);
    if (ex->dims_.size() >= (size_t{1} << 32) || ex->operands_.size() >= (size_t{1} << 32)) {
      kit::fail(LT_STATUS_INVALID_ARGUMENT, "graph: too large");
    }
  }
  std::vector<uint8_t> is_input(n, 0);
  for (size_t k = 0; k < g.num_inputs; ++k) {
    const int32_t j = g.inputs[k];
    is_input[j] = 1;
    ex->nodes_[j].loc = Loc::kInput;
    ex->nodes_[j].loc_index = static_cast<uint32_t>(k);
    ex->input_nodes_.push_back(static_cast<uint32_t>(j));
  }
  // Liveness: a reverse linear sweep from the outputs.
  std::vector<uint8_t> live(n, 0);
  for (size_t k = 0; k < g.num_outputs; ++k) {
    const int32_t j = g.outputs[k];
    live[j] = 1;
    ex->output_nodes_.push_back(static_cast<uint32_t>(j));
  }
  for (size_t i = n; i-- > 0;) {
    if (!live[i]) continue;
    const Node& nd = ex->nodes_[i];
    for (uint32_t k = 0; k < nd.num_operands; ++k) live[ex->operands_[nd.operand_off + k]] = 1;
  }
  // Prepare live compute nodes; record each value's last reader.
  std::vector<int32_t> last_use(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (!live[i] || is_input[i]) continue;
    Node& nd = ex->nodes_[i];
    for (uint32_t k = 0; k < nd.num_operands; ++k) {
      last_use[ex->operands_[nd.operand_off + k]] = static_cast<int32_t>(i);
    }
    nd.param_off = static_cast<uint32_t>(ex->params_.size());
    if (!lower::find_op(g.nodes[i].op))
      kit::fail(LT_STATUS_UNKNOWN_OP, "node " + std::to_string(i) + ": op '" + g.nodes[i].op +
                                          "' is not known to cpu_eager");
    nd.fn = host::prepare(g, i, &ex->params_);
    if (!nd.fn)
      kit::fail(LT_STATUS_UNSUPPORTED, "node " + std::to_string(i) + " (" + g.nodes[i].op + ", " +
                                           lower::desc_str(lower::DescRef(g.nodes[i])) +
                                           ") has no host kernel");
    nd.param_len = static_cast<uint32_t>(ex->params_.size() - nd.param_off);
    ex->schedule_.push_back(static_cast<uint32_t>(i));
  }
  // Outputs: the first mention of a computed node is written in place; repeats and inputs
  // returned as outputs are copied after the run (outputs never alias).
  for (size_t k = 0; k < ex->output_nodes_.size(); ++k) {
    Node& nd = ex->nodes_[ex->output_nodes_[k]];
    if (nd.loc == Loc::kNone) {
      nd.loc = Loc::kOutput;
      nd.loc_index = static_cast<uint32_t>(k);
    } else {
      ex->output_copies_.push_back(static_cast<uint32_t>(k));
    }
  }
  // Slots: best-fit reuse of dead intermediates; a value's slot is freed after its last
  // reader runs, so no kernel's output aliases its operands.
  std::multimap<size_t, uint32_t> free_slots;
  for (uint32_t i : ex->schedule_) {
    Node& nd = ex->nodes_[i];
    if (nd.loc == Loc::kNone) {
      const size_t bytes = static_cast<size_t>(nd.numel) * lt_dtype_size(nd.dtype);
      auto it = free_slots.lower_bound(bytes);
      if (it != free_slots.end()) {
        nd.loc_index = it->second;
        free_slots.erase(it);
      } else {
        nd.loc_index = static_cast<uint32_t>(ex->slot_bytes_.size());
        ex->slot_bytes_.push_back(bytes);
      }
      nd.loc = Loc::kSlot;
    }
    for (uint32_t k = 0; k < nd.num_operands; ++k) {
      const int32_t j = ex->operands_[nd.operand_off + k];
      Node& on = ex->nodes_[j];
      if (on.loc == Loc::kSlot && last_use[j] == static_cast<int32_t>(i)) {
        free_slots.emplace(ex->slot_bytes_[on.loc_index], on.loc_index);
        last_use[j] = -1;  // freed once even if it appears twice among the operands
      }
    }
  }
  ex->compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Executable::Workspace::~Workspace() {
  for (void* p : slots) std::free(p);
}

std::unique_ptr<Executable::Workspace> Executable::acquire() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      auto ws = std::move(pool_.back());
      pool_.pop_back();
      return ws;
    }
  }
  auto ws = std::make_unique<Workspace>();
  ws->slots.reserve(slot_bytes_.size());
  for (size_t b : slot_bytes_) ws->slots.push_back(aligned_alloc64(b));
  ws->ptrs.resize(nodes_.size());
  return ws;
}

void Executable::release(std::unique_ptr<Workspace> ws) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.push_back(std::move(ws));
}

host::TensorArg Executable::arg_of(uint32_t i, char* data) const {
  const Node& nd = nodes_[i];
  return host::TensorArg{data, nd.dtype, nd.rank, dims_.data() + nd.shape_off, nd.numel};
}

void Executable::stats(const kit::Stats& emit) const {
  emit("kernels", static_cast<double>(schedule_.size()));
  emit("executions", static_cast<double>(executions_.load()));
  emit("compile_ms", compile_ms_);
  emit("nodes", static_cast<double>(nodes_.size()));
  uint64_t ws = 0;
  for (size_t b : slot_bytes_) ws += b;
  emit("workspace_bytes", static_cast<double>(ws));
}

void Executable::run(std::span<kit::Buffer* const> inputs, std::span<kit::Buffer* const> outputs) {
  const size_t num_inputs = inputs.size();
  struct Guard {
    Executable* ex;
    std::unique_ptr<Workspace> ws;
    ~Guard() {
      if (ws) ex->release(std::move(ws));
    }
  } guard{this, acquire()};
  Workspace& ws = *guard.ws;
  for (size_t k = 0; k < num_inputs; ++k)
    ws.ptrs[input_nodes_[k]] = static_cast<char*>(inputs[k]->data);
  for (uint32_t i : schedule_) {
    const Node& nd = nodes_[i];
    ws.ptrs[i] = nd.loc == Loc::kOutput ? static_cast<char*>(outputs[nd.loc_index]->data)
                                        : static_cast<char*>(ws.slots[nd.loc_index]);
  }
  for (uint32_t i : schedule_) {
    const Node& nd = nodes_[i];
    ws.args.resize(nd.num_operands);
    for (uint32_t k = 0; k < nd.num_operands; ++k) {
      const uint32_t j = static_cast<uint32_t>(operands_[nd.operand_off + k]);
      ws.args[k] = arg_of(j, ws.ptrs[j]);
    }
    host::KernelCall call;
    call.out = arg_of(i, ws.ptrs[i]);
    call.in = ws.args.data();
    call.num_in = nd.num_operands;
    call.params = params_.data() + nd.param_off;
    call.num_params = nd.param_len;
    nd.fn(call);
  }
  for (uint32_t k : output_copies_) {
    const uint32_t j = output_nodes_[k];
    const Node& nd = nodes_[j];
    const size_t bytes = static_cast<size_t>(nd.numel) * lt_dtype_size(nd.dtype);
    if (bytes) std::memcpy(outputs[k]->data, ws.ptrs[j], bytes);
  }
  executions_.fetch_add(1);
}

}  // namespace lt::eager
