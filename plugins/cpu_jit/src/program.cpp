// program.cpp — builds a Program (fusion plan, a generated kernel per fused group, a host-kernel
// step for every other node: gemm, conv2d, pools, gather, ...) and runs it. Host kernels keep
// the one thread budget (lazytensor/host/kernels.hpp): no BLAS call inside a TBB loop.
#include "program.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "lazytensor/lower/decompose.hpp"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/fusion.hpp"

namespace lt::cpujit {

bool program_supports(const lt_graph& g, size_t node) {
  std::string_view op = g.nodes[node].op;
  // max/sub/exp/sum/div (the core's decomposition) fuse into one row kernel: faster than the
  // host's softmax, which runs libm exp per element.
  if (op == "softmax" || op == "log_softmax") return false;
  if (codegen_supports(g, node)) return true;
  std::vector<int64_t> params;
  return host::prepare(g, node, &params) != nullptr;
}

Program::Program(const lt_graph& graph, Compiler& compiler) {
  auto t0 = std::chrono::steady_clock::now();
  // Own a copy of the region (what supports() declines decomposed, as the core does) so the
  // executable outlives the call.
  if (!lower::decompose(graph, program_supports, &owned_)) owned_ = lower::copy_graph(graph);
  g_ = &owned_.view();
  const lt_graph& g = *g_;
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    numel_.push_back(lower::DescRef(n).numel());
    if (std::string_view(n.op) != "input" && !program_supports(g, i))
      lower::fail(LT_STATUS_UNSUPPORTED, "node " + std::to_string(i) + " (" + n.op + ", " +
                                             lower::desc_str(n) + ") is not supported");
  }
  fusion::Options opts;
  opts.index_maps = true;  // slices become strided loads inside the consuming kernel
  for (const fusion::Group& gr : fusion::plan(g, opts).groups) {
    std::vector<int32_t> nodes = gr.nodes, outs = gr.outputs;
    if (gr.kind == fusion::GroupKind::kOpaque && !codegen_supports(g, gr.anchor)) {
      add_host_step(gr.anchor);  // then its elementwise epilogue, if any, as one kernel
      std::erase(nodes, gr.anchor);
      std::erase(outs, gr.anchor);
    }
    if (outs.empty()) continue;
    // Node by node on the host: bf16/f16 storage, and a lone node over < 1024 elements (no
    // fusion, little data: not worth a ~3 ms compile).
    auto gen = [&](int32_t v) { return codegen_supports(g, v); };
    if ((nodes.size() == 1 && lower::Desc{{}, gr.domain}.numel() < 1024) ||
        !std::all_of(nodes.begin(), nodes.end(), gen)) {
      for (int32_t v : nodes) add_host_step(v);
      continue;
    }
    steps_.push_back({Kind::kKernel, -1, kernels_.size()});
    kernels_.push_back({&g, std::move(nodes), std::move(outs), gr.domain, gr.reduce_axes});
  }
  if (!kernels_.empty()) fns_ = compiler.compile(kernels_);
  for (KernelDesc& k : kernels_) k.graph = nullptr;  // use g_

  // Buffer plan: every materialised node that is neither an input nor bound to an output
  // gets a slice of one arena (reshape aliases its operand instead); so does each conv2d's
  // im2col matrix.
  std::vector<char> needs(g.num_nodes, 0), bound(g.num_nodes, 0);
  for (const KernelDesc& k : kernels_)
    for (int32_t v : k.slots) needs[v] = 1;
  for (const Step& s : steps_) {
    if (s.kind == Kind::kKernel) continue;
    needs[s.node] = 1;
    for (size_t k = 0; k < g.nodes[s.node].num_operands; ++k)
      needs[g.nodes[s.node].operands[k]] = 1;
  }
  for (size_t k = 0; k < g.num_inputs; ++k) bound[g.inputs[k]] = 1;
  for (size_t k = 0; k < g.num_outputs; ++k) bound[g.outputs[k]] = 1;
  auto reserve = [&](size_t bytes) {
    size_t at = arena_bytes_;
    arena_bytes_ += (bytes + 63) / 64 * 64;
    return static_cast<int64_t>(at);
  };
  temp_offset_.assign(g.num_nodes, -1);
  for (size_t v = 0; v < g.num_nodes; ++v)
    if (needs[v] && !bound[v] && std::string_view(g.nodes[v].op) != "reshape")
      temp_offset_[v] = reserve(numel_[v] * lt_dtype_size(g.nodes[v].dtype));
  for (Step& s : steps_)
    if (size_t elems = s.kind == Kind::kConv ? host::conv_scratch_elems(convs_[s.index]) : 0)
      s.scratch = reserve(elems * lt_dtype_size(g.nodes[s.node].dtype));
  compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void Program::add_host_step(int32_t v) {
  const lt_graph_node& n = g_->nodes[v];
  std::string_view op = n.op;
  if (op == "reshape") {
    steps_.push_back({Kind::kReshape, v, 0});
  } else if (op == "conv2d" && (n.dtype == LT_DTYPE_F32 || n.dtype == LT_DTYPE_F64)) {
    convs_.push_back(host::conv_geom(*g_, v));
    steps_.push_back({Kind::kConv, v, convs_.size() - 1});
  } else {
    size_t at = params_.size();
    host::KernelFn fn = host::prepare(*g_, v, &params_);
    steps_.push_back({Kind::kHost, v, 0, fn, at, params_.size() - at});
  }
}

void Program::run(void* const* inputs, void* const* outputs) const {
  const lt_graph& g = *g_;
  std::vector<void*> ptr(g.num_nodes, nullptr);
  for (size_t k = 0; k < g.num_inputs; ++k) ptr[g.inputs[k]] = inputs[k];
  for (size_t k = 0; k < g.num_outputs; ++k) {
    int32_t v = g.outputs[k];
    if (!ptr[v] && std::string_view(g.nodes[v].op) != "input") ptr[v] = outputs[k];
  }
  // The arena is reused when free (steady state maps no fresh pages); a concurrent run of
  // the same program gets its own.
  std::unique_lock<std::mutex> lock(arena_mu_, std::try_to_lock);
  std::unique_ptr<char[], void (*)(void*)> own{nullptr, std::free};
  char* arena = nullptr;
  if (arena_bytes_) {
    auto& a = lock.owns_lock() ? arena_ : own;
    if (!a) a = {static_cast<char*>(std::aligned_alloc(64, arena_bytes_)), std::free};
    if (!(arena = a.get()))
      lower::fail(LT_STATUS_OUT_OF_MEMORY, std::to_string(arena_bytes_) + " temp bytes");
  }
  for (size_t v = 0; v < g.num_nodes; ++v)
    if (temp_offset_[v] >= 0) ptr[v] = arena + temp_offset_[v];
  std::vector<void*> bufs;
  std::vector<host::TensorArg> args;
  auto arg = [&](int32_t v) -> host::TensorArg {
    const lt_graph_node& n = g.nodes[v];
    return {static_cast<char*>(ptr[v]), n.dtype, static_cast<int>(n.rank), n.shape, numel_[v]};
  };
  for (const Step& s : steps_) {
    const lt_graph_node* n = s.node >= 0 ? &g.nodes[s.node] : nullptr;
    if (s.kind == Kind::kKernel) {
      const KernelDesc& k = kernels_[s.index];
      if (k.parallel_extent == 0) continue;
      bufs.resize(k.slots.size());
      for (size_t i = 0; i < k.slots.size(); ++i) bufs[i] = ptr[k.slots[i]];
      // The same threading rule as the host kernels: one thread below 32K elements of work.
      host::parallel_for(k.parallel_extent, k.work_per_index,
                         [&](int64_t b, int64_t e) { fns_[s.index](bufs.data(), b, e); });
    } else if (s.kind == Kind::kReshape) {
      void* src = ptr[n->operands[0]];
      if (ptr[s.node] && ptr[s.node] != src)
        std::memcpy(ptr[s.node], src, numel_[s.node] * lt_dtype_size(n->dtype));
      else
        ptr[s.node] = src;
    } else if (s.kind == Kind::kConv) {
      auto conv = [&](auto* out) {
        using T = std::remove_pointer_t<decltype(out)>;
        auto in = [&](size_t k) {
          return k < n->num_operands ? static_cast<const T*>(ptr[n->operands[k]]) : nullptr;
        };
        host::conv2d<T>(convs_[s.index], in(0), in(1), in(2), out,
                        s.scratch >= 0 ? reinterpret_cast<T*>(arena + s.scratch) : nullptr);
      };
      if (n->dtype == LT_DTYPE_F32)
        conv(static_cast<float*>(ptr[s.node]));
      else
        conv(static_cast<double*>(ptr[s.node]));
    } else {
      args.clear();
      for (size_t k = 0; k < n->num_operands; ++k) args.push_back(arg(n->operands[k]));
      s.fn({arg(s.node), args.data(), args.size(), params_.data() + s.params, s.num_params});
    }
  }
  for (size_t k = 0; k < g.num_outputs; ++k) {
    int32_t v = g.outputs[k];
    if (ptr[v] != outputs[k])
      std::memcpy(outputs[k], ptr[v], numel_[v] * lt_dtype_size(g.nodes[v].dtype));
  }
}

}  // namespace lt::cpujit
