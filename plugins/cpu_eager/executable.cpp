// executable.cpp — compiles a borrowed lt_graph into cpu_eager's flat executable: copy,
// validate, dead-node elimination, liveness-based slot reuse; then runs it node by node.
// Every walk here is a linear loop (graphs may be 1,000,000 nodes deep).
#include "executable.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>

namespace lt::eager {

void* aligned_alloc64(size_t bytes) {
  size_t n = (bytes + 63) / 64 * 64;
  if (n == 0) n = 64;
  void* p = std::aligned_alloc(64, n);
  if (!p)
    fail(LT_STATUS_OUT_OF_MEMORY, "cpu_eager: cannot allocate " + std::to_string(bytes) + " bytes");
  return p;
}
void aligned_free(void* p) {
  std::free(p);
}

namespace {

const std::unordered_map<std::string_view, PrepareFn>& registry() {
  static const auto* map = [] {
    std::vector<OpDef> ops;
    append_elementwise_ops(ops);
    append_reduce_ops(ops);
    append_layout_ops(ops);
    append_linalg_ops(ops);
    auto* m = new std::unordered_map<std::string_view, PrepareFn>();
    for (const OpDef& d : ops) m->emplace(d.name, d.prepare);
    return m;
  }();
  return *map;
}

std::string node_name(size_t i, const lt_graph_node& n) {
  return "node " + std::to_string(i) + " (" + (n.op ? n.op : "<null op>") + ")";
}

// Checks the node's own description: op name, dtype, shape; returns its element count.
int64_t check_desc(const lt_graph_node& n, size_t i) {
  if (!n.op) fail(LT_STATUS_INVALID_ARGUMENT, "node " + std::to_string(i) + ": op is NULL");
  // bf16/f16 pass as storage types: cast and pure data movement (reshape, permute,
  // broadcast_to, slice, concat) accept them; every computing op refuses them.
  if (lt_dtype_size(n.dtype) == 0) {
    fail(LT_STATUS_DTYPE_MISMATCH,
         node_name(i, n) + ": invalid dtype value " + std::to_string(static_cast<int>(n.dtype)));
  }
  if (n.rank > static_cast<size_t>(kMaxRank)) {
    fail(LT_STATUS_UNSUPPORTED, node_name(i, n) + ": rank " + std::to_string(n.rank) +
                                    " exceeds cpu_eager's limit of " + std::to_string(kMaxRank));
  }
  if (n.rank && !n.shape) fail(LT_STATUS_INVALID_ARGUMENT, node_name(i, n) + ": shape is NULL");
  int64_t numel = 1;
  for (size_t d = 0; d < n.rank; ++d) {
    if (n.shape[d] < 0) {
      fail(LT_STATUS_SHAPE_MISMATCH,
           node_name(i, n) + ": negative dimension in " + shape_str(n.shape, (int)n.rank));
    }
    if (n.shape[d] != 0 && numel > (int64_t{1} << 56) / n.shape[d]) {
      fail(LT_STATUS_SHAPE_MISMATCH,
           node_name(i, n) + ": shape " + shape_str(n.shape, (int)n.rank) + " is too large");
    }
    numel *= n.shape[d];
  }
  if (n.num_operands && !n.operands) {
    fail(LT_STATUS_INVALID_ARGUMENT, node_name(i, n) + ": operands is NULL");
  }
  if (n.num_attrs && !n.attrs)
    fail(LT_STATUS_INVALID_ARGUMENT, node_name(i, n) + ": attrs is NULL");
  for (size_t k = 0; k < n.num_operands; ++k) {
    if (n.operands[k] < 0 || static_cast<size_t>(n.operands[k]) >= i) {
      fail(LT_STATUS_INVALID_ARGUMENT, node_name(i, n) + ": operand " + std::to_string(k) +
                                           " refers to node " + std::to_string(n.operands[k]) +
                                           ", which does not precede it");
    }
  }
  return numel;
}

void check_graph_header(const lt_graph& g) {
  if (g.struct_size < LT_GRAPH_STRUCT_SIZE) {
    fail(LT_STATUS_ABI_MISMATCH, "graph struct_size " + std::to_string(g.struct_size) +
                                     " is smaller than expected " +
                                     std::to_string(LT_GRAPH_STRUCT_SIZE));
  }
  if (g.num_nodes && !g.nodes) fail(LT_STATUS_INVALID_ARGUMENT, "graph: nodes is NULL");
  if (g.num_nodes >= (size_t{1} << 31)) fail(LT_STATUS_INVALID_ARGUMENT, "graph: too many nodes");
  if (g.num_inputs && !g.inputs) fail(LT_STATUS_INVALID_ARGUMENT, "graph: inputs is NULL");
  if (g.num_outputs && !g.outputs) fail(LT_STATUS_INVALID_ARGUMENT, "graph: outputs is NULL");
}

ValueDesc desc_view(const lt_graph_node& n, int64_t numel) {
  return ValueDesc{n.dtype, static_cast<int>(n.rank), n.shape, numel};
}

// Runs the op's prepare function on node i; descs[k] describes operand k.
KernelFn prepare_node(const lt_graph_node& n, size_t i, const ValueDesc& out,
                      const std::vector<ValueDesc>& descs, std::vector<int64_t>& params) {
  const auto& reg = registry();
  auto it = reg.find(n.op);
  if (it == reg.end()) {
    fail(LT_STATUS_UNKNOWN_OP, node_name(i, n) + ": op '" + n.op + "' is not known to cpu_eager");
  }
  PrepareCall call;
  call.op = n.op;
  call.out = out;
  call.in = descs.data();
  call.num_in = descs.size();
  call.attrs = n.attrs;
  call.num_attrs = n.num_attrs;
  call.params = &params;
  try {
    it->second(call);
  } catch (const Error& e) {
    throw Error(e.code(), "node " + std::to_string(i) + ": " + e.what());
  }
  if (!call.fn) fail(LT_STATUS_INTERNAL, node_name(i, n) + ": no kernel chosen");
  return call.fn;
}

}  // namespace

void check_node(const lt_graph& g, size_t i) {
  check_graph_header(g);
  if (i >= g.num_nodes) {
    fail(LT_STATUS_INVALID_ARGUMENT, "supports: node " + std::to_string(i) + " out of range (" +
                                         std::to_string(g.num_nodes) + " nodes)");
  }
  const lt_graph_node& n = g.nodes[i];
  int64_t numel = check_desc(n, i);
  if (std::string_view(n.op) == "input") return;
  std::vector<ValueDesc> descs;
  for (size_t k = 0; k < n.num_operands; ++k) {
    const size_t j = static_cast<size_t>(n.operands[k]);
    descs.push_back(desc_view(g.nodes[j], check_desc(g.nodes[j], j)));
  }
  std::vector<int64_t> params;
  prepare_node(n, i, desc_view(n, numel), descs, params);
}

std::unique_ptr<Executable> Executable::compile(const lt_graph& g) {
  const auto t0 = std::chrono::steady_clock::now();
  check_graph_header(g);
  std::unique_ptr<Executable> ex(new Executable());
  const size_t n = g.num_nodes;
  ex->nodes_.resize(n);
  ex->dims_.reserve(n);
  // Copy descriptions first so operands can be described from owned memory.
  for (size_t i = 0; i < n; ++i) {
    const lt_graph_node& gn = g.nodes[i];
    Node& nd = ex->nodes_[i];
    nd.numel = check_desc(gn, i);
    nd.dtype = gn.dtype;
    nd.rank = static_cast<uint8_t>(gn.rank);
    nd.shape_off = static_cast<uint32_t>(ex->dims_.size());
    ex->dims_.insert(ex->dims_.end(), gn.shape, gn.shape + gn.rank);
    nd.operand_off = static_cast<uint32_t>(ex->operands_.size());
    nd.num_operands = static_cast<uint32_t>(gn.num_operands);
    ex->operands_.insert(ex->operands_.end(), gn.operands, gn.operands + gn.num_operands);
    if (ex->dims_.size() >= (size_t{1} << 32) || ex->operands_.size() >= (size_t{1} << 32)) {
      fail(LT_STATUS_INVALID_ARGUMENT, "graph: too large");
    }
  }
  // Inputs: every "input" node bound exactly once.
  std::vector<uint8_t> is_input(n, 0);
  for (size_t k = 0; k < g.num_inputs; ++k) {
    int32_t j = g.inputs[k];
    if (j < 0 || static_cast<size_t>(j) >= n || std::string_view(g.nodes[j].op) != "input") {
      fail(LT_STATUS_INVALID_ARGUMENT, "graph: input " + std::to_string(k) + " refers to node " +
                                           std::to_string(j) + ", which is not an \"input\" node");
    }
    if (is_input[j]) {
      fail(LT_STATUS_INVALID_ARGUMENT, "graph: node " + std::to_string(j) + " bound to two inputs");
    }
    is_input[j] = 1;
    ex->nodes_[j].loc = Loc::kInput;
    ex->nodes_[j].loc_index = static_cast<uint32_t>(k);
    ex->input_nodes_.push_back(static_cast<uint32_t>(j));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!is_input[i] && std::string_view(g.nodes[i].op) == "input") {
      fail(LT_STATUS_INVALID_ARGUMENT,
           "graph: input node " + std::to_string(i) + " is not bound to any entry of graph.inputs");
    }
  }
  // Liveness: a reverse linear sweep from the outputs.
  std::vector<uint8_t> live(n, 0);
  for (size_t k = 0; k < g.num_outputs; ++k) {
    int32_t j = g.outputs[k];
    if (j < 0 || static_cast<size_t>(j) >= n) {
      fail(LT_STATUS_INVALID_ARGUMENT, "graph: output " + std::to_string(k) + " refers to node " +
                                           std::to_string(j) + ", out of range");
    }
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
  std::vector<ValueDesc> descs;
  for (size_t i = 0; i < n; ++i) {
    if (!live[i] || is_input[i]) continue;
    Node& nd = ex->nodes_[i];
    descs.clear();
    for (uint32_t k = 0; k < nd.num_operands; ++k) {
      const int32_t j = ex->operands_[nd.operand_off + k];
      const Node& on = ex->nodes_[j];
      descs.push_back(ValueDesc{on.dtype, on.rank, ex->dims_.data() + on.shape_off, on.numel});
      last_use[j] = static_cast<int32_t>(i);
    }
    const ValueDesc out{nd.dtype, nd.rank, ex->dims_.data() + nd.shape_off, nd.numel};
    nd.param_off = static_cast<uint32_t>(ex->params_.size());
    nd.fn = prepare_node(g.nodes[i], i, out, descs, ex->params_);
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
  return ex;
}

Executable::~Executable() = default;

Executable::Workspace::~Workspace() {
  for (void* p : slots) aligned_free(p);
}

uint64_t Executable::workspace_bytes() const {
  uint64_t s = 0;
  for (size_t b : slot_bytes_) s += b;
  return s;
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

TensorArg Executable::arg_of(uint32_t i, char* data) const {
  const Node& nd = nodes_[i];
  return TensorArg{data, nd.dtype, nd.rank, dims_.data() + nd.shape_off, nd.numel};
}

void Executable::execute(lt_plugin_buffer* const* inputs, size_t num_inputs,
                         lt_plugin_buffer* const* outputs, size_t num_outputs) {
  if (num_inputs != input_nodes_.size() || num_outputs != output_nodes_.size()) {
    fail(LT_STATUS_INVALID_ARGUMENT,
         "execute: got " + std::to_string(num_inputs) + " inputs and " +
             std::to_string(num_outputs) + " outputs, the executable has " +
             std::to_string(input_nodes_.size()) + " and " + std::to_string(output_nodes_.size()));
  }
  if ((num_inputs && !inputs) || (num_outputs && !outputs)) {
    fail(LT_STATUS_INVALID_ARGUMENT, "execute: inputs or outputs array is NULL");
  }
  auto check = [&](lt_plugin_buffer* b, uint32_t node, const char* what, size_t k) {
    const Node& nd = nodes_[node];
    const size_t need = static_cast<size_t>(nd.numel) * lt_dtype_size(nd.dtype);
    if (!b)
      fail(LT_STATUS_INVALID_ARGUMENT,
           std::string("execute: ") + what + " " + std::to_string(k) + " is NULL");
    if (b->nbytes < need) {
      fail(LT_STATUS_INVALID_ARGUMENT, std::string("execute: ") + what + " " + std::to_string(k) +
                                           " has " + std::to_string(b->nbytes) + " bytes, needs " +
                                           std::to_string(need));
    }
  };
  for (size_t k = 0; k < num_inputs; ++k) check(inputs[k], input_nodes_[k], "input", k);
  for (size_t k = 0; k < num_outputs; ++k) check(outputs[k], output_nodes_[k], "output", k);

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
    KernelCall call;
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
