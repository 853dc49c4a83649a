// program.cpp — builds a Program (the shared kernel planner's steps: a generated kernel per fused
// group, a host-kernel step for every other node: gemm, conv2d, pools, gather, ...) and runs it.
// Host kernels keep the one thread budget (lazytensor/host/kernels.hpp): no BLAS call inside a TBB
// loop.
#include "program.h"

#include <chrono>
#include <string_view>

#include "lazytensor/lower/decompose.hpp"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/kernel_plan.hpp"

namespace lt::cpujit {

bool program_supports(const lt_graph& g, size_t node) {
  std::string_view op = g.nodes[node].op;
  // max/sub/exp/sum/div (the core's decomposition) fuse into one row kernel with their
  // producers. Taken whole: the softmax of an attention (the fused host step), and an f32
  // softmax whose operand no generated kernel computes (an input, a matmul: nothing to fuse
  // with), which the host row runs faster (4096x1024, one thread: 1.42 against 2.20 ms CPU).
  if (op == "softmax") {
    const int32_t x = g.nodes[node].operands[0];
    return host::in_attention(g, node) ||
           (g.nodes[node].dtype == LT_DTYPE_F32 && !lower::cpu_jit_kernel_node(g, size_t(x)));
  }
  // random_uniform reaches cpu_jit as lower::decompose writes it (as it reaches gpu_opencl): a
  // random_unit and its scaling, one kernel.
  if (op == "log_softmax" || op == "random_uniform") return false;
  if (lower::cpu_jit_kernel_node(g, node)) return true;
  std::vector<int64_t> params;
  return host::prepare(g, node, &params) != nullptr;
}

namespace {

// The shared kernel planner's steps (lazytensor/lower/kernel_plan.hpp) for cpu_jit: `order`
// lists a node the host kernels run, ~k for generated kernel k of `kernels`, or num_nodes + a
// for fused attention a of `attention` (host::find_attention), which replaces the steps of its
// interior nodes where those steps compute nothing else.
void plan_steps(const lt_graph& g, std::vector<int64_t>& order, std::vector<KernelDesc>& kernels,
                std::vector<host::AttentionMatch>& attention) {
  lower::KernelPlan plan = lower::plan_kernels(g, *lower::builtin_kernel_target("cpu_jit"));
  const host::PlannedAttention fused = host::plan_attention(g, plan);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    lower::Step& s = plan.steps[i];
    if (fused.replaced[i]) continue;
    if (fused.at[i] >= 0) {
      order.push_back(static_cast<int64_t>(g.num_nodes + attention.size()));
      attention.push_back(fused.matches[fused.at[i]]);
      continue;
    }
    if (s.kind == lower::StepKind::kHost) {
      order.push_back(s.anchor);
      continue;
    }
    order.push_back(~static_cast<int64_t>(kernels.size()));
    kernels.push_back({&g, std::move(s.nodes), std::move(s.outputs), s.domain, s.reduce_axes});
  }
}

}  // namespace

Program::Program(const lt_graph& graph, Compiler& compiler) {
  auto t0 = std::chrono::steady_clock::now();
  // Own a copy of the region (decomposed only if it still holds a node supports() declines)
  // so the executable outlives the call.
  if (!lower::decompose_declined(graph, program_supports, &owned_))
    owned_ = lower::copy_graph(graph);
  g_ = &owned_.view();
  const lt_graph& g = *g_;
  plan_steps(g, order_, kernels_, attention_);
  if (!kernels_.empty()) fns_ = compiler.compile(kernels_, &code_);
  if (!lower::dynamic_of(g).empty()) {  // one Program for every size if none changes the code
    auto build = [&](const lt_graph& at) {
      std::vector<int64_t> order;
      std::vector<KernelDesc> ks;
      std::vector<host::AttentionMatch> attention;
      plan_steps(at, order, ks, attention);
      lower::Build b{compiler.ir(ks), {}};
      for (int64_t o : order) b.code += " " + std::to_string(o);
      for (const KernelDesc& k : ks) {
        b.code += " " + std::to_string(k.work_per_index);
        b.numbers.push_back(k.parallel_extent);
      }
      return b;
    };
    std::string why;
    dynamic_ = lower::fit_build(g, build(g), build, &extents_, &why);
  }
  for (KernelDesc& k : kernels_) k.graph = nullptr;  // use g_
  add_steps();
  compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Program::Program(const lt_graph& at, std::shared_ptr<const Program> dynamic)
    : owned_(lower::copy_graph(at)),
      order_(dynamic->order_),
      kernels_(dynamic->kernels_),
      attention_(dynamic->attention_),
      base_(dynamic),
      fns_(dynamic->fns_),
      code_(dynamic->code_) {
  g_ = &owned_.view();
  for (size_t k = 0; k < kernels_.size(); ++k)
    kernels_[k].parallel_extent = dynamic->extents_[k].at({g_->symbol_values, g_->num_symbols});
  add_steps();
}

// A generated kernel's name in profiles: its index and the ops it fuses, "k3 mul+add+exp".
static std::string kernel_label(const lt_graph& g, const KernelDesc& k, size_t index) {
  std::vector<std::string_view> ops;
  std::string label = "k" + std::to_string(index);
  for (int32_t v : k.nodes) {
    const std::string_view op = g.nodes[v].op;
    if (op == "input" || std::find(ops.begin(), ops.end(), op) != ops.end()) continue;
    ops.push_back(op);
    label += (ops.size() == 1 ? " " : "+") + std::string(ops.size() > 4 ? "..." : op);
    if (ops.size() > 4) break;
  }
  return label;
}

void Program::add_steps() {
  // A generated kernel writes its outputs and reads its slots (both filled by codegen).
  steps_ = std::make_unique<host::StepProgram>(*g_);
  for (int64_t a : order_) {
    if (a >= static_cast<int64_t>(g_->num_nodes)) {
      steps_->add_attention(attention_[a - g_->num_nodes]);
      continue;
    }
    if (a >= 0) {
      steps_->add_node(static_cast<int32_t>(a));
      continue;
    }
    const KernelDesc& k = kernels_[~a];
    steps_->add_custom(
        k.outputs, k.slots,
        [this, i = size_t(~a)](void* const* ptr) {
          const KernelDesc& k = kernels_[i];
          if (k.parallel_extent == 0) return;
          std::vector<void*> bufs;
          for (int32_t v : k.slots) bufs.push_back(ptr[v]);
          // The same threading rule as the host kernels: one thread below 32K elements of work.
          host::parallel_for(k.parallel_extent, k.work_per_index,
                             [&](int64_t b, int64_t e) { fns_[i](bufs.data(), b, e); });
        },
        kernel_label(*g_, k, size_t(~a)));
  }
  steps_->finish();
}

}  // namespace lt::cpujit
