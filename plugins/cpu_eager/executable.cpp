// executable.cpp — compiles a validated lt_graph into cpu_eager's executable: a copy of the
// region, dead-node elimination, and a host step per live node (lazytensor/host/steps.hpp).
// Every walk here is a linear loop (graphs may be 1,000,000 deep).
#include "executable.h"

#include <chrono>
#include <string>
#include <vector>

#include "lazytensor/lower/ops.hpp"

namespace lt::eager {

Executable::Executable(const lt_graph& g) : graph_(lower::copy_graph(g)), nodes_(g.num_nodes) {
  const auto t0 = std::chrono::steady_clock::now();
  const lt_graph& own = graph_.view();
  // Liveness: a reverse linear sweep from the outputs.
  std::vector<char> live(own.num_nodes, 0);
  for (size_t k = 0; k < own.num_outputs; ++k) live[own.outputs[k]] = 1;
  for (size_t i = own.num_nodes; i-- > 0;)
    if (live[i])
      for (size_t k = 0; k < own.nodes[i].num_operands; ++k) live[own.nodes[i].operands[k]] = 1;
  steps_ = std::make_unique<host::StepProgram>(own);
  // softmax(Q·K·scale + mask)·V runs as one fused host step (lazytensor/host/attention.hpp):
  // its interior nodes get none, the final matmul's step is the fused one.
  std::vector<int32_t> fused(own.num_nodes, -1);  // per node: match index, -2 if interior
  const std::vector<host::AttentionMatch> attention = host::find_attention(own);
  for (size_t a = 0; a < attention.size(); ++a) {
    if (!live[attention[a].output]) continue;
    fused[attention[a].output] = static_cast<int32_t>(a);
    for (int32_t v : attention[a].interior) fused[v] = -2;
  }
  for (size_t i = 0; i < own.num_nodes; ++i) {
    const lt_graph_node& n = own.nodes[i];
    if (!live[i] || std::string_view(n.op) == "input" || fused[i] == -2) continue;
    if (fused[i] >= 0) {
      steps_->add_attention(attention[fused[i]]);
      continue;
    }
    if (!lower::find_op(n.op))
      kit::fail(LT_STATUS_UNKNOWN_OP,
                "node " + std::to_string(i) + ": op '" + n.op + "' is not known to cpu_eager");
    steps_->add_node(static_cast<int32_t>(i));
  }
  steps_->finish();
  compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void Executable::stats(const kit::Stats& emit) const {
  emit("kernels", static_cast<double>(steps_->num_steps()));
  emit("executions", static_cast<double>(executions_.load()));
  emit("compile_ms", compile_ms_);
  emit("nodes", static_cast<double>(nodes_));
  emit("workspace_bytes", static_cast<double>(steps_->arena_bytes()));
}

}  // namespace lt::eager
