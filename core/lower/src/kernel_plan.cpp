// kernel_plan.cpp — lt::lower::plan_kernels and pack_temporaries (see kernel_plan.hpp).
#include "lazytensor/lower/kernel_plan.hpp"

#include <algorithm>
#include <limits>

#include "lazytensor/lower/graph.hpp"
#include "lazytensor/lower/ops.hpp"

namespace lt::lower {
namespace {

// The steps of one fusion group before liveness: kernel, or host steps (anchor first).
void candidate_steps(const lt_graph& g, const KernelTarget& t, int32_t gi, const fusion::Group& gr,
                     std::vector<Step>& out) {
  auto takes = [&](int32_t v) { return !t.kernel_node || t.kernel_node(g, size_t(v)); };
  auto host = [&](int32_t v) {
    Step s;
    s.kind = StepKind::kHost;
    s.group = gi;
    s.anchor = v;
    s.nodes = {v};
    s.domain = shape_of(g.nodes[v]);
    s.group_kind = fusion::GroupKind::kOpaque;
    out.push_back(std::move(s));
  };
  std::vector<int32_t> nodes = gr.nodes;
  fusion::GroupKind kind = gr.kind;
  int32_t anchor = gr.anchor;
  if (gr.kind == fusion::GroupKind::kOpaque && !takes(gr.anchor)) {
    host(gr.anchor);  // then its elementwise epilogue, if any, as one kernel
    std::erase(nodes, gr.anchor);
    kind = fusion::GroupKind::kElementwise;
    anchor = -1;
  }
  if (nodes.empty()) return;
  const int64_t numel = Desc{{}, gr.domain}.numel();
  if (numel < t.min_kernel_elements || !std::all_of(nodes.begin(), nodes.end(), takes)) {
    for (int32_t v : nodes) host(v);
    return;
  }
  Step s;
  s.kind = StepKind::kKernel;
  s.group_kind = kind;
  s.group = gi;
  s.anchor = anchor;
  s.nodes = std::move(nodes);
  s.domain = gr.domain;
  s.reduce_axes = gr.reduce_axes;
  out.push_back(std::move(s));
}

}  // namespace

KernelPlan plan_kernels(const lt_graph& g, const KernelTarget& t) {
  KernelPlan p;
  p.fusion = fusion::plan(g, t.fusion);
  std::vector<Step> cand;
  for (size_t gi = 0; gi < p.fusion.groups.size(); ++gi)
    candidate_steps(g, t, static_cast<int32_t>(gi), p.fusion.groups[gi], cand);
  const size_t n = g.num_nodes;
  p.stored.assign(n, 0);
  for (size_t k = 0; k < g.num_inputs; ++k) p.stored[g.inputs[k]] = 1;
  for (size_t k = 0; k < g.num_outputs; ++k) p.stored[g.outputs[k]] = 1;
  // Backwards over the candidates: a step is live when a later live step or the graph's
  // outputs read one of its values; what a live step reads from other steps gets a buffer,
  // unless the reader evaluates it where it reads it.
  std::vector<int32_t> step_of(n, -1);
  for (size_t s = 0; s < cand.size(); ++s)
    for (int32_t v : cand[s].nodes) step_of[v] = static_cast<int32_t>(s);
  std::vector<char> live(cand.size(), 0);
  for (size_t s = cand.size(); s-- > 0;) {
    Step& st = cand[s];
    for (int32_t v : st.nodes)
      if (p.stored[v]) st.outputs.push_back(v);
    if (st.outputs.empty()) continue;  // nothing reads it: dead
    live[s] = 1;
    for (int32_t u : st.nodes) {
      const lt_graph_node& un = g.nodes[u];
      const bool by_buffer =
          st.kind != StepKind::kKernel ||
          (u == st.anchor && t.anchor_reads_buffers && t.anchor_reads_buffers(un));
      for (size_t k = 0; k < un.num_operands; ++k) {
        const int32_t o = un.operands[k];
        if (step_of[o] == static_cast<int32_t>(s)) continue;
        if (by_buffer || !t.evaluated_where_read || !t.evaluated_where_read(g.nodes[o]))
          p.stored[o] = 1;
      }
    }
  }
  for (size_t s = 0; s < cand.size(); ++s)
    if (live[s]) {
      p.kernel_groups += cand[s].kind == StepKind::kKernel;
      p.steps.push_back(std::move(cand[s]));
    }
  return p;
}

void KernelPlan::split(const lt_graph& g, size_t step) {
  Step whole = std::move(steps[step]);
  std::vector<Step> parts;
  for (int32_t v : whole.nodes) {
    const lt_graph_node& node = g.nodes[v];
    Step s;
    s.kind = StepKind::kSplit;
    s.group = whole.group;
    s.anchor = v;
    s.nodes = s.outputs = {v};
    s.domain = shape_of(node);
    s.group_kind =
        is_inline_primitive(node.op) ? fusion::GroupKind::kElementwise : fusion::GroupKind::kOpaque;
    if (is_reduce_primitive(node.op)) {
      s.group_kind = fusion::GroupKind::kReduction;
      s.domain = shape_of(g.nodes[node.operands[0]]);
      s.reduce_axes = Attrs(node).ints("axes");
    }
    stored[v] = 1;
    parts.push_back(std::move(s));
  }
  steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(step));
  steps.insert(steps.begin() + static_cast<std::ptrdiff_t>(step),
               std::make_move_iterator(parts.begin()), std::make_move_iterator(parts.end()));
  --kernel_groups;
  ++split_groups;
}

ArenaLayout pack_temporaries(const lt_graph& g, const KernelPlan& plan,
                             const std::vector<size_t>& bytes, size_t align) {
  ArenaLayout a;
  const size_t n = g.num_nodes;
  std::vector<char> external(n, 0);
  for (size_t k = 0; k < g.num_inputs; ++k) external[g.inputs[k]] = 1;
  for (size_t k = 0; k < g.num_outputs; ++k) external[g.outputs[k]] = 1;
  std::vector<int64_t> first(n, -1), last(n, -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const Step& st = plan.steps[s];
    const auto at = static_cast<int64_t>(s);
    for (int32_t v : st.outputs)
      if (first[v] < 0) first[v] = last[v] = at;
    for (int32_t u : st.nodes)
      for (size_t k = 0; k < g.nodes[u].num_operands; ++k) {
        const int32_t o = g.nodes[u].operands[k];
        if (plan.stored[o] && first[o] >= 0) last[o] = std::max(last[o], at);
      }
  }
  for (size_t v = 0; v < n; ++v) {
    if (!plan.stored[v] || external[v] || first[v] < 0) continue;
    a.values.push_back(static_cast<int32_t>(v));
    // Never empty (an OpenCL sub-buffer has at least one byte); whole multiples of `align`,
    // so every first-fit offset is one too.
    const size_t b = (std::max<size_t>(bytes[v], 1) + align - 1) / align * align;
    a.ranges.push_back({b, first[v], last[v]});
  }
  a.arena = pack_live_ranges(a.ranges);
  a.offset_of.assign(n, std::numeric_limits<size_t>::max());
  for (size_t i = 0; i < a.values.size(); ++i) a.offset_of[a.values[i]] = a.arena.offsets[i];
  return a;
}

bool is_inline_primitive(std::string_view op) {
  const OpInfo* info = find_op(op);
  if (!info || info->composite) return false;
  return info->category == Category::kElementwise || info->category == Category::kCreation ||
         (info->category == Category::kLayout && info->id != kOpScatterAdd);
}

bool is_reduce_primitive(std::string_view op) {
  const OpInfo* info = find_op(op);
  return info && !info->composite && info->category == Category::kReduction;
}

bool cpu_jit_kernel_node(const lt_graph& g, size_t i) {
  const lt_graph_node& n = g.nodes[i];
  // bf16/f16 are storage types (the host kernels convert them); ranks above 16 are rejected.
  auto plain = [](const lt_graph_node& v) {
    return v.rank <= 16 && v.dtype != LT_DTYPE_BF16 && v.dtype != LT_DTYPE_F16;
  };
  for (size_t k = 0; k < n.num_operands; ++k)
    if (!plain(g.nodes[n.operands[k]])) return false;
  std::string_view op = n.op;
  // Elementwise ops are fusion's list (silu, erf and softplus are not in it), random ops but
  // random_uniform: those reach the backend decomposed.
  return plain(n) && (fusion::is_elementwise_op(op) || fusion::is_reduction_op(op) ||
                      op == "slice" || op == "random_unit" || op == "random_normal");
}

const KernelTarget* builtin_kernel_target(std::string_view backend) {
  static const KernelTarget cpu_jit = [] {
    KernelTarget t;
    t.fusion.index_maps = true;  // slices become strided loads inside the consuming kernel
    t.kernel_node = cpu_jit_kernel_node;
    // A kernel costs ~3 ms of LLVM and saves little on so little data (a 20,000-node scalar
    // chain: 2.9 s -> 60 ms as host steps).
    t.min_kernel_elements = 1024;
    return t;
  }();
  static const KernelTarget gpu_opencl = [] {
    KernelTarget t;
    t.fusion.index_maps = true;  // slices are strided loads fused into their consumers
    // Constants (the scalars of decompositions) are evaluated where they are read, except as
    // operands of matmul, conv2d and scatter_add, which read buffers.
    t.evaluated_where_read = [](const lt_graph_node& v) {
      return std::string_view(v.op) == "full";
    };
    t.anchor_reads_buffers = [](const lt_graph_node& a) {
      const std::string_view op = a.op;
      return op == "matmul" || op == "conv2d" || op == "scatter_add";
    };
    return t;
  }();
  if (backend == "cpu_jit") return &cpu_jit;
  if (backend == "gpu_opencl") return &gpu_opencl;
  return nullptr;
}

}  // namespace lt::lower
