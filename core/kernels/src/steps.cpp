// steps.cpp — the host step program: steps, live ranges, one arena, the run loop.
#include "lazytensor/host/steps.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kernels.h"
#include "lazytensor/lower/buffers.hpp"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/gemm_layout.hpp"
#include "lazytensor/lower/ops.hpp"

namespace lt::host {

StepProgram::StepProgram(const lt_graph& graph) : g_(graph) {
  const lt_graph& g = g_;
  // The two GEMM layout decisions (lower/gemm_layout.hpp, which the optimiser's exact guard
  // compares too): a transpose only GEMMs read is read in place (no step of its own); a 2-D
  // GEMM read once, by a transpose that is materialised, writes the transposed product straight
  // into the transpose's buffer.
  lower::GemmLayouts layouts(g);
  gemm_only_ = std::move(layouts.in_place);
  product_t_ = std::move(layouts.transposed);
  transposed_.assign(g.num_nodes, 0);
  reshape_.assign(g.num_nodes, 0);
  numel_.reserve(g.num_nodes);
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    numel_.push_back(lower::DescRef(n).numel());
    reshape_[i] = std::string_view(n.op) == "reshape";
  }
}

bool StepProgram::flush_held(int32_t next) {
  if (held_ < 0) return false;
  const int32_t m = std::exchange(held_, -1);
  const lt_graph_node* n = next >= 0 ? &g_.nodes[next] : nullptr;
  if (n && std::string_view(n->op) == "permute" && n->operands[0] == m) {
    steps_.push_back({Kind::kGemmT, next});
    return true;
  }
  steps_.push_back({Kind::kGemm, m});
  return false;
}

void StepProgram::add_node(int32_t v) {
  const lt_graph_node& n = g_.nodes[v];
  std::string_view op = n.op;
  if (flush_held(v)) return;
  if (gemm_only_[v]) {
    transposed_[v] = 1;
  } else if (op == "reshape") {
    steps_.push_back({Kind::kReshape, v});
  } else if (lower::is_host_gemm(n)) {
    if (product_t_[v])
      held_ = v;
    else
      steps_.push_back({Kind::kGemm, v});
  } else if (op == "conv2d" &&
             (n.dtype == LT_DTYPE_F64 ||
              (n.dtype == LT_DTYPE_F32 &&
               !onednn_conv_available(ConvPass::kForward, conv_geom(g_, v), n.num_operands > 2)))) {
    // im2col + GEMM with its scratch in the arena; an f32 conv that oneDNN runs is a host
    // step (below) and needs no im2col matrix.
    convs_.push_back(conv_geom(g_, v));
    steps_.push_back({Kind::kConv, v, convs_.size() - 1});
  } else {
    size_t at = params_.size();
    KernelFn fn = prepare(g_, v, &params_);
    if (!fn)
      lower::fail(LT_STATUS_UNSUPPORTED, "node " + std::to_string(v) + " (" + n.op + ", " +
                                             lower::desc_str(n) + ") has no host kernel");
    steps_.push_back({Kind::kHost, v, 0, fn, at, params_.size() - at});
  }
}

void StepProgram::add_custom(std::vector<int32_t> writes, std::vector<int32_t> reads, Custom run,
                             std::string name) {
  flush_held(-1);
  steps_.push_back({Kind::kCustom, -1, customs_.size()});
  customs_.push_back({std::move(writes), std::move(reads), std::move(run), std::move(name)});
}

void StepProgram::add_attention(const AttentionMatch& m) {
  std::vector<int32_t> reads = {m.q, m.k, m.v};
  // A constant scale or fill (`full`) is read from its attribute: a backend may have fused it
  // away; any other is read from its buffer.
  auto constant = [&](int32_t v, float* value) {
    if (v < 0 || std::string_view(g_.nodes[v].op) != "full") return false;
    *value = static_cast<float>(lower::Attrs(g_.nodes[v]).f("value"));
    return true;
  };
  float scale = 1.0f, fill = 0.0f;
  const bool scale_known = constant(m.scale, &scale), fill_known = constant(m.fill, &fill);
  for (int32_t v : {scale_known ? -1 : m.scale, fill_known ? -1 : m.fill, m.mask, m.cond})
    if (v >= 0) reads.push_back(v);
  add_custom(
      {m.output}, std::move(reads),
      [m, scale, fill, scale_known, fill_known, dims = attention_dims(g_, m)](void* const* p) {
        const float* s = scale_known    ? &scale
                         : m.scale >= 0 ? static_cast<const float*>(p[m.scale])
                                        : nullptr;
        const float f = fill_known || m.fill < 0 ? fill : *static_cast<const float*>(p[m.fill]);
        attention(dims, static_cast<const float*>(p[m.q]), static_cast<const float*>(p[m.k]),
                  static_cast<const float*>(p[m.v]), s,
                  m.mask >= 0 ? static_cast<const float*>(p[m.mask]) : nullptr,
                  static_cast<float*>(p[m.output]),
                  m.cond >= 0 ? static_cast<const uint8_t*>(p[m.cond]) : nullptr, f);
      },
      "attention");
}

void StepProgram::finish() {
  flush_held(-1);
  const lt_graph& g = g_;
  // Every materialised node that is neither an input nor bound to an output gets a slice of
  // the arena (an unbound reshape aliases its operand); so does each conv2d's im2col matrix.
  std::vector<char> needs(g.num_nodes, 0);
  bound_.assign(g.num_nodes, 0);
  std::vector<char>& bound = bound_;
  for (size_t k = 0; k < g.num_inputs; ++k) bound[g.inputs[k]] = 1;
  for (size_t k = 0; k < g.num_outputs; ++k) bound[g.outputs[k]] = 1;
  auto root = [&](int32_t v) { return holder(v); };
  const int64_t never = static_cast<int64_t>(steps_.size());
  writer_.assign(g.num_nodes, -1);
  last_read_.assign(g.num_nodes, -1);
  std::vector<int64_t> first(g.num_nodes, never), last(g.num_nodes, -1);
  std::vector<lower::LiveRange> ranges;
  std::vector<int64_t> owner;  // node, or ~step for a conv2d's im2col matrix
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    const int64_t at = static_cast<int64_t>(i);
    auto def = [&](int32_t v) {
      if (writer_[v] < 0) writer_[v] = at;
      needs[v] = 1;
      first[v] = std::min(first[v], at);
      last[v] = std::max(last[v], at);
    };
    auto use = [&](int32_t v) {
      last_read_[root(v)] = std::max(last_read_[root(v)], at);
      needs[source(v)] = 1;
      last[root(v)] = std::max(last[root(v)], at);
    };
    if (s.kind == Kind::kCustom) {
      for (int32_t v : customs_[s.index].writes) def(v);
      for (int32_t v : customs_[s.index].reads) use(v);
      continue;
    }
    if (s.kind != Kind::kReshape)
      def(s.node);
    else if (writer_[s.node] < 0)
      writer_[s.node] = at;  // a reshape bound to an output copies into it here
    const lt_graph_node& reads = computed(s);
    for (size_t k = 0; k < reads.num_operands; ++k) use(reads.operands[k]);
    if (size_t elems = s.kind == Kind::kConv ? conv_scratch_elems(convs_[s.index]) : 0) {
      ranges.push_back({elems * lt_dtype_size(g.nodes[s.node].dtype), at, at});
      owner.push_back(~at);
    }
  }
  for (size_t v = 0; v < g.num_nodes; ++v) {
    if (!needs[v] || bound[v] || reshape_[v]) continue;
    ranges.push_back({numel_[v] * lt_dtype_size(g.nodes[v].dtype), std::min(first[v], never),
                      std::max(last[v], std::min(first[v], never))});
    owner.push_back(static_cast<int64_t>(v));
  }
  lower::ArenaPlan plan = lower::pack_live_ranges(ranges);
  arena_bytes_ = plan.bytes;
  temp_offset_.assign(g.num_nodes, -1);
  for (size_t r = 0; r < ranges.size(); ++r) {
    if (owner[r] >= 0)
      temp_offset_[owner[r]] = static_cast<int64_t>(plan.offsets[r]);
    else
      steps_[~owner[r]].scratch = static_cast<int64_t>(plan.offsets[r]);
  }
}

int32_t StepProgram::holder(int32_t v) const {
  for (v = source(v); !bound_[v] && reshape_[v];) v = source(g_.nodes[v].operands[0]);
  return v;
}

bool StepProgram::can_donate(size_t input, size_t output) const {
  const lt_graph& g = g_;
  if (input >= g.num_inputs || output >= g.num_outputs || writer_.empty()) return false;
  const int32_t in = g.inputs[input], out = g.outputs[output];
  if (std::string_view(g.nodes[out].op) == "input" || numel_[out] == 0) return false;
  const int64_t writer = writer_[out], last = last_read_[in];
  if (writer < 0 || last > writer) return false;  // read after the output overwrote it
  if (last < writer) return true;
  // The writer reads the input itself: only an elementwise host kernel reading it at the
  // output's own shape (element i read before element i is written), or the output being a
  // reshape of it (one buffer).
  const Step& s = steps_[static_cast<size_t>(writer)];
  if (s.kind == Kind::kCustom) return false;
  if (s.kind == Kind::kReshape) return true;
  const lt_graph_node& n = computed(s);
  const lower::OpInfo* op = lower::find_op(n.op);
  for (size_t k = 0; k < n.num_operands; ++k) {
    const int32_t v = n.operands[k];
    if (holder(v) != in) continue;
    const lt_graph_node& vn = g.nodes[v];
    const bool same_shape = vn.rank == n.rank && std::equal(vn.shape, vn.shape + vn.rank, n.shape);
    if (s.kind != Kind::kHost || !op || op->category != lower::Category::kElementwise ||
        source(v) != v || !same_shape || lt_dtype_size(vn.dtype) != lt_dtype_size(n.dtype))
      return false;
  }
  return true;
}

void StepProgram::run(void* const* inputs, void* const* outputs, SpanFn span,
                      void* span_user) const {
  const lt_graph& g = g_;
  // The arena and the pointer table are reused when free (steady state allocates nothing and
  // maps no fresh pages); a concurrent run of the same program gets its own.
  std::unique_lock<std::mutex> lock(arena_mu_, std::try_to_lock);
  std::vector<void*> own_ptr;
  std::vector<void*>& ptr = lock.owns_lock() ? ptr_ : own_ptr;
  ptr.assign(g.num_nodes, nullptr);
  for (size_t k = 0; k < g.num_inputs; ++k) ptr[g.inputs[k]] = inputs[k];
  for (size_t k = 0; k < g.num_outputs; ++k) {
    int32_t v = g.outputs[k];
    if (!ptr[v] && std::string_view(g.nodes[v].op) != "input") ptr[v] = outputs[k];
  }
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
  const auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::vector<TensorArg> args;  // reused by every host step
  for (const Step& s : steps_) {
    if (!span) {
      run_step(s, ptr, arena, args);
      continue;
    }
    const int64_t t0 = now_ns();
    run_step(s, ptr, arena, args);
    if (s.kind == Kind::kReshape) continue;  // an alias or a copy: not a kernel
    const char* name = s.kind == Kind::kCustom  ? customs_[s.index].name.c_str()
                       : s.kind == Kind::kGemm  ? "matmul (gemm)"
                       : s.kind == Kind::kGemmT ? "matmul (gemm, transposed product)"
                                                : g.nodes[s.node].op;
    span(span_user, name, t0, now_ns());
  }
  for (size_t k = 0; k < g.num_outputs; ++k) {
    int32_t v = g.outputs[k];
    if (ptr[v] != outputs[k] && numel_[v] > 0)  // memmove: a donated output may be its source
      std::memmove(outputs[k], ptr[v], numel_[v] * lt_dtype_size(g.nodes[v].dtype));
  }
}

// One step of run(): `ptr` holds every node's buffer, `arena` the temporaries.
void StepProgram::run_step(const Step& s, std::vector<void*>& ptr, char* arena,
                           std::vector<TensorArg>& args) const {
  const lt_graph& g = g_;
  auto arg = [&](int32_t v) -> TensorArg {
    const lt_graph_node& n = g.nodes[v];
    return {static_cast<char*>(ptr[v]), n.dtype, static_cast<int>(n.rank), n.shape, numel_[v]};
  };
  // f32 or f64 by the node's dtype.
  auto typed = [&](const lt_graph_node& n, auto&& f) {
    if (n.dtype == LT_DTYPE_F32)
      f(static_cast<float*>(nullptr));
    else
      f(static_cast<double*>(nullptr));
  };
  {
    const lt_graph_node* n = s.node >= 0 ? &g.nodes[s.node] : nullptr;
    // Nothing to compute into an empty output, and its kernels would do pointer arithmetic on
    // the NULL buffers of empty operands (softmax over [2, 0] did).
    if (n && s.kind != Kind::kCustom && s.kind != Kind::kReshape && numel_[s.node] == 0) return;
    if (s.kind == Kind::kCustom) {
      customs_[s.index].run(ptr.data());
    } else if (s.kind == Kind::kReshape) {
      void* src = ptr[source(n->operands[0])];
      if (ptr[s.node] && ptr[s.node] != src) {
        // An empty tensor may have no buffer (src NULL): memcpy of NULL is UB even for 0 bytes.
        if (numel_[s.node] > 0)
          std::memcpy(ptr[s.node], src, numel_[s.node] * lt_dtype_size(n->dtype));
      } else
        ptr[s.node] = src;
    } else if (s.kind == Kind::kGemm || s.kind == Kind::kGemmT) {
      // [B,]M,K x [B,]K,N (the core lowers NumPy matmul to these); kGemmT (2-D) writes the
      // product transposed, (A·B)^T = B^T·A^T: B read with the opposite transpose as the left
      // operand, A as the right.
      const lt_graph_node& mm = computed(s);
      const int32_t a = mm.operands[0], b = mm.operands[1];
      const lt_graph_node &an = g.nodes[a], &bn = g.nodes[b];
      const bool ta = transposed_[a] != 0, tb = transposed_[b] != 0;
      typed(*n, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        const T *pa = static_cast<const T*>(ptr[source(a)]),
                *pb = static_cast<const T*>(ptr[source(b)]);
        const int64_t m = an.shape[an.rank - 2], k = an.shape[an.rank - 1],
                      nn = bn.shape[bn.rank - 1];
        if (s.kind == Kind::kGemmT)
          gemm_batched<T>(1, nn, m, k, pb, pa, static_cast<T*>(ptr[s.node]), !tb, !ta);
        else
          gemm_batched<T>(an.rank == 3 ? an.shape[0] : 1, m, nn, k, pa, pb,
                          static_cast<T*>(ptr[s.node]), ta, tb);
      });
    } else if (s.kind == Kind::kConv) {
      typed(*n, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        auto in = [&](size_t k) {
          return k < n->num_operands ? static_cast<const T*>(ptr[n->operands[k]]) : nullptr;
        };
        conv2d<T>(convs_[s.index], in(0), in(1), in(2), static_cast<T*>(ptr[s.node]),
                  s.scratch >= 0 ? reinterpret_cast<T*>(arena + s.scratch) : nullptr);
      });
    } else {
      args.clear();
      for (size_t k = 0; k < n->num_operands; ++k) args.push_back(arg(n->operands[k]));
      s.fn({arg(s.node), args.data(), args.size(), params_.data() + s.params, s.num_params});
    }
  }
}

std::vector<std::vector<unsigned char>> evaluate(const lt_graph& graph) {
  StepProgram prog(graph);
  for (size_t i = 0; i < graph.num_nodes; ++i)
    if (std::string_view(graph.nodes[i].op) != "input") prog.add_node(static_cast<int32_t>(i));
  prog.finish();
  const std::vector<size_t> bytes = lower::value_bytes(graph);
  std::vector<std::vector<unsigned char>> out(graph.num_outputs);
  std::vector<void*> ptrs(graph.num_outputs);
  for (size_t k = 0; k < graph.num_outputs; ++k) {
    out[k].resize(bytes[static_cast<size_t>(graph.outputs[k])]);
    ptrs[k] = out[k].data();
  }
  prog.run(nullptr, ptrs.data());
  return out;
}

}  // namespace lt::host
