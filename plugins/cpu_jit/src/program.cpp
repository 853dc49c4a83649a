// program.cpp — builds a Program from a region (composite expansion, fusion plan, one
// generated kernel per fused group, BLAS for matmul) and executes it. BLAS calls are made
// from the calling thread only, never inside a TBB loop (one thread budget).
#include "program.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace lt::cpujit {

namespace {

int64_t numel(const lt_graph_node& n) {
  int64_t e = 1;
  for (size_t i = 0; i < n.rank; ++i) e *= n.shape[i];
  return e;
}

bool is_opaque_supported(const lt_graph& g, const lt_graph_node& n) {
  std::string_view op = n.op;
  lt_dtype d = n.dtype;
  if (d == LT_DTYPE_BF16 || d == LT_DTYPE_F16 || d == LT_DTYPE_INVALID) return false;
  if (op == "matmul") {
    if (n.num_operands != 2 || (d != LT_DTYPE_F32 && d != LT_DTYPE_F64)) return false;
    const lt_graph_node& a = g.nodes[n.operands[0]];
    const lt_graph_node& b = g.nodes[n.operands[1]];
    return (a.rank == 2 && b.rank == 2 && n.rank == 2) ||
           (a.rank == 3 && b.rank == 3 && n.rank == 3 && a.shape[0] == b.shape[0]);
  }
  if (op == "softmax" || op == "log_softmax") {
    const lt_attr* ax = fusion::find_attr(n, "axis");
    return (d == LT_DTYPE_F32 || d == LT_DTYPE_F64) && n.num_operands == 1 && ax &&
           ax->kind == LT_ATTR_INT && ax->i >= 0 && static_cast<size_t>(ax->i) < n.rank;
  }
  if (op == "conv2d") {
    if ((d != LT_DTYPE_F32 && d != LT_DTYPE_F64) || n.num_operands < 2 || n.num_operands > 3 ||
        n.rank != 4)
      return false;
    const lt_graph_node& x = g.nodes[n.operands[0]];
    const lt_graph_node& w = g.nodes[n.operands[1]];
    if (x.rank != 4 || w.rank != 4 || x.dtype != d || w.dtype != d) return false;
    if (n.num_operands == 3 &&
        (g.nodes[n.operands[2]].rank != 1 || g.nodes[n.operands[2]].dtype != d))
      return false;
    for (const char* a : {"stride", "padding", "dilation"}) {
      const lt_attr* at = fusion::find_attr(n, a);
      if (!at || at->kind != LT_ATTR_INTS || at->ints_len != 2) return false;
    }
    const lt_attr* gr = fusion::find_attr(n, "groups");
    return gr && gr->kind == LT_ATTR_INT && gr->i >= 1 && x.shape[1] % gr->i == 0 &&
           w.shape[0] % gr->i == 0;
  }
  if (op == "reshape") return n.num_operands == 1;
  if (op == "permute") {
    const lt_attr* p = fusion::find_attr(n, "perm");
    return n.num_operands == 1 && p && p->kind == LT_ATTR_INTS && p->ints_len == n.rank;
  }
  if (op == "slice") {
    const lt_attr* s = fusion::find_attr(n, "starts");
    const lt_attr* t = fusion::find_attr(n, "steps");
    return n.num_operands == 1 && s && t && s->kind == LT_ATTR_INTS && t->kind == LT_ATTR_INTS &&
           s->ints_len == n.rank && t->ints_len == n.rank;
  }
  return false;
}

// dst (dense, `shape`) = src[offset + sum i_d * strides[d]] (strides/offset in elements).
void strided_copy(char* dst, const char* src, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, int64_t offset, size_t elem) {
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (total == 0) return;
  size_t r = shape.size();
  std::vector<int64_t> idx(r, 0);
  int64_t off = offset;
  for (int64_t i = 0; i < total; ++i) {
    std::memcpy(dst + i * elem, src + off * static_cast<int64_t>(elem), elem);
    for (size_t d = r; d-- > 0;) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

std::vector<int64_t> dense_strides(const lt_graph_node& n) {
  std::vector<int64_t> s(n.rank);
  int64_t acc = 1;
  for (size_t i = n.rank; i-- > 0;) {
    s[i] = acc;
    acc *= n.shape[i];
  }
  return s;
}

struct ConvGeom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, G, Cg, Og;
  int64_t col_rows() const { return Cg * KH * KW; }
  int64_t plane() const { return OH * OW; }
  // 1x1, stride 1, no padding: the input plane already is the im2col matrix.
  bool direct() const { return KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

ConvGeom conv_geom(const lt_graph& g, const lt_graph_node& n) {
  const lt_graph_node& x = g.nodes[n.operands[0]];
  const lt_graph_node& w = g.nodes[n.operands[1]];
  const int64_t* st = fusion::find_attr(n, "stride")->ints;
  const int64_t* pd = fusion::find_attr(n, "padding")->ints;
  const int64_t* dl = fusion::find_attr(n, "dilation")->ints;
  int64_t G = fusion::find_attr(n, "groups")->i;
  return ConvGeom{x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0],     w.shape[2],
                  w.shape[3], n.shape[2], n.shape[3], st[0],      st[1],          pd[0],
                  pd[1],      dl[0],      dl[1],      G,          x.shape[1] / G, w.shape[0] / G};
}

// col[(c·KH + kh)·KW + kw][oh·OW + ow] = x[c][oh·sh − ph + kh·dh][ow·sw − pw + kw·dw] or 0.
template <class T>
void im2col(const ConvGeom& g, const T* x, T* col) {
  auto rows = [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t ch = r / (g.KH * g.KW), kh = (r / g.KW) % g.KH, kw = r % g.KW;
      const T* src = x + ch * g.H * g.W;
      T* dst = col + r * g.plane();
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        int64_t ih = oh * g.sh - g.ph + kh * g.dh;
        T* d = dst + oh * g.OW;
        if (ih < 0 || ih >= g.H) {
          std::fill(d, d + g.OW, T(0));
          continue;
        }
        const T* srow = src + ih * g.W;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          int64_t iw = ow * g.sw - g.pw + kw * g.dw;
          d[ow] = (iw >= 0 && iw < g.W) ? srow[iw] : T(0);
        }
      }
    }
  };
  if (g.col_rows() * g.plane() < (1 << 16)) {
    rows(0, g.col_rows());
  } else {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, g.col_rows()),
                      [&](const tbb::blocked_range<int64_t>& r) { rows(r.begin(), r.end()); });
  }
}

// One thread budget for gemm: TBB owns the cores. Products below kSerialGemm multiply-adds
// run OpenBLAS on the calling thread; up to kBlasThreadsGemm they are split into column
// panels over TBB, each panel a single-threaded OpenBLAS call (LSTM-sized 32x800x200 gemms:
// OpenBLAS's own pool spins after each call and fights TBB and the caller for 2 cores,
// measured 7x slower steps under load); larger products use OpenBLAS's threads, called from
// the calling thread only, never from inside a TBB loop.
constexpr int64_t kSerialGemm = int64_t{1} << 18;
constexpr int64_t kBlasThreadsGemm = int64_t{1} << 24;

// Caps OpenBLAS at one thread while alive. The thread count is process-wide: a concurrent
// large BLAS call elsewhere may briefly run single-threaded (slower, never wrong); the
// previous count is restored on exit.
class SerialBlasScope {
 public:
  SerialBlasScope() {
    prev_ = openblas_get_num_threads();
    if (prev_ > 1)
      openblas_set_num_threads(1);
    else
      prev_ = 0;
  }
  ~SerialBlasScope() {
    if (prev_ > 1) openblas_set_num_threads(prev_);
  }
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;

 private:
  int prev_ = 0;
};

// C[m,n] (+)= A[m,k]·B[k,n], row-major with leading dimensions; T is float or double.
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  auto call = [&](int64_t j0, int64_t j1) {
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, j1 - j0, k, 1.0f, a, lda, b + j0,
                  ldb, accumulate ? 1.0f : 0.0f, c + j0, ldc);
    else
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, j1 - j0, k, 1.0, a, lda, b + j0,
                  ldb, accumulate ? 1.0 : 0.0, c + j0, ldc);
  };
  int64_t macs = m * n * k;
  if (macs >= kBlasThreadsGemm) return call(0, n);
  SerialBlasScope serial;
  // Panels of at least 64 columns and ~kSerialGemm multiply-adds each.
  int64_t panel = std::max<int64_t>(64, kSerialGemm / std::max<int64_t>(1, m * k));
  if (macs < kSerialGemm || n < 2 * panel) return call(0, n);
  int64_t panels = (n + panel - 1) / panel;
  tbb::parallel_for(int64_t{0}, panels,
                    [&](int64_t p) { call(p * panel, std::min(n, (p + 1) * panel)); });
}

template <class T>
void conv2d(const ConvGeom& g, const T* x, const T* w, const T* bias, T* out, T* col) {
  const int64_t K = g.col_rows(), P = g.plane();
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t gi = 0; gi < g.G; ++gi) {
      const T* xg = x + (n * g.C + gi * g.Cg) * g.H * g.W;
      T* og = out + (n * g.O + gi * g.Og) * P;
      if (bias)
        for (int64_t o = 0; o < g.Og; ++o)
          std::fill(og + o * P, og + (o + 1) * P, bias[gi * g.Og + o]);
      if (K == 0 || P == 0 || g.Og == 0) {
        if (!bias) std::fill(og, og + g.Og * P, T(0));
        continue;
      }
      const T* B = xg;
      if (!g.direct()) {
        im2col(g, xg, col);
        B = col;
      }
      gemm<T>(g.Og, P, K, w + gi * g.Og * K, K, B, P, og, P, bias != nullptr);
    }
  }
}

}  // namespace

bool program_supports(const lt_graph& g, size_t node) {
  return codegen_supports(g, node) || is_opaque_supported(g, g.nodes[node]);
}

size_t Program::node_bytes(int32_t v) const {
  const lt_graph_node& n = g_->nodes[v];
  return static_cast<size_t>(numel(n)) * lt_dtype_size(n.dtype);
}
size_t Program::input_bytes(size_t k) const {
  return node_bytes(g_->inputs[k]);
}
size_t Program::output_bytes(size_t k) const {
  return node_bytes(g_->outputs[k]);
}

std::shared_ptr<Program> Program::build(const lt_graph& graph, Compiler& compiler,
                                        std::string* error) {
  auto t0 = std::chrono::steady_clock::now();
  auto p = std::shared_ptr<Program>(new Program());
  for (size_t i = 0; i < graph.num_nodes; ++i)
    if (!program_supports(graph, i)) {
      *error = std::string("cpu_jit: node ") + std::to_string(i) + " (" + graph.nodes[i].op + ", " +
               lt_dtype_name(graph.nodes[i].dtype) + ") is not supported by this backend";
      return nullptr;
    }
  // Own a copy of the region (composites expanded) so the executable outlives the call.
  if (!fusion::expand_composites(graph, &p->owned_)) {
    for (size_t i = 0; i < graph.num_nodes; ++i) {
      const lt_graph_node& n = graph.nodes[i];
      p->owned_.add(n.op, n.dtype, std::vector<int64_t>(n.shape, n.shape + n.rank),
                    std::vector<int32_t>(n.operands, n.operands + n.num_operands), n.attrs,
                    n.num_attrs);
    }
    p->owned_.set_inputs(std::vector<int32_t>(graph.inputs, graph.inputs + graph.num_inputs));
    p->owned_.set_outputs(std::vector<int32_t>(graph.outputs, graph.outputs + graph.num_outputs));
    p->owned_.set_hash(graph.hash);
  }
  p->g_ = &p->owned_.view();
  const lt_graph& g = *p->g_;
  p->num_inputs_ = g.num_inputs;
  p->num_outputs_ = g.num_outputs;

  fusion::Options opts;
  opts.index_maps = true;  // slices become strided loads inside the consuming kernel
  fusion::Plan plan = fusion::plan(g, opts);
  for (const fusion::Group& gr : plan.groups) {
    if (gr.kind == fusion::GroupKind::kOpaque) {
      p->steps_.push_back({-1, gr.anchor});
      if (gr.nodes.size() > 1) {
        KernelDesc k;
        k.graph = &g;
        for (int32_t v : gr.nodes)
          if (v != gr.anchor) k.nodes.push_back(v);
        for (int32_t v : gr.outputs)
          if (v != gr.anchor) k.outputs.push_back(v);
        k.domain = gr.domain;
        p->steps_.push_back({static_cast<int>(p->kernels_.size()), -1});
        p->kernels_.push_back(std::move(k));
      }
      continue;
    }
    if (gr.outputs.empty()) continue;
    KernelDesc k;
    k.graph = &g;
    k.nodes = gr.nodes;
    k.outputs = gr.outputs;
    k.domain = gr.domain;
    k.reduce_axes = gr.reduce_axes;
    p->steps_.push_back({static_cast<int>(p->kernels_.size()), -1});
    p->kernels_.push_back(std::move(k));
  }
  if (!p->kernels_.empty() && !compiler.compile(p->kernels_, &p->fns_, error)) return nullptr;
  for (KernelDesc& k : p->kernels_) k.graph = nullptr;  // the view may move; use g_

  // Buffer plan: every materialised node that is neither an input nor bound to an output
  // gets a slice of one arena (reshape aliases its operand instead).
  std::vector<char> needs(g.num_nodes, 0), bound(g.num_nodes, 0);
  for (const KernelDesc& k : p->kernels_)
    for (int32_t v : k.slots) needs[v] = 1;
  for (const Step& s : p->steps_)
    if (s.node >= 0) {
      needs[s.node] = 1;
      const lt_graph_node& n = g.nodes[s.node];
      for (size_t k = 0; k < n.num_operands; ++k) needs[n.operands[k]] = 1;
    }
  for (size_t k = 0; k < g.num_inputs; ++k) bound[g.inputs[k]] = 1;
  for (size_t k = 0; k < g.num_outputs; ++k) bound[g.outputs[k]] = 1;
  p->temp_offset_.assign(g.num_nodes, -1);
  for (size_t v = 0; v < g.num_nodes; ++v) {
    if (!needs[v] || bound[v]) continue;
    if (std::string_view(g.nodes[v].op) == "reshape") continue;
    p->temp_offset_[v] = static_cast<int64_t>(p->arena_bytes_);
    p->arena_bytes_ += (p->node_bytes(static_cast<int32_t>(v)) + 63) / 64 * 64;
  }
  // conv2d's im2col matrix (one group of one image at a time) also lives in the arena.
  p->scratch_offset_.assign(g.num_nodes, -1);
  for (const Step& s : p->steps_) {
    if (s.node < 0 || std::string_view(g.nodes[s.node].op) != "conv2d") continue;
    ConvGeom cg = conv_geom(g, g.nodes[s.node]);
    if (cg.direct()) continue;
    p->scratch_offset_[s.node] = static_cast<int64_t>(p->arena_bytes_);
    size_t bytes =
        static_cast<size_t>(cg.col_rows() * cg.plane()) * lt_dtype_size(g.nodes[s.node].dtype);
    p->arena_bytes_ += (bytes + 63) / 64 * 64;
  }
  p->compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

bool Program::run_opaque(int32_t v, std::vector<void*>& ptr, char* scratch,
                         std::string* error) const {
  const lt_graph_node& n = g_->nodes[v];
  std::string_view op = n.op;
  size_t elem = lt_dtype_size(n.dtype);
  if (op == "reshape") {
    void* src = ptr[n.operands[0]];
    if (ptr[v] && ptr[v] != src)
      std::memcpy(ptr[v], src, node_bytes(v));
    else
      ptr[v] = src;
    return true;
  }
  if (op == "permute" || op == "slice") {
    const lt_graph_node& a = g_->nodes[n.operands[0]];
    std::vector<int64_t> ds = dense_strides(a), st(n.rank);
    int64_t off = 0;
    if (op == "permute") {
      const lt_attr* perm = fusion::find_attr(n, "perm");
      for (size_t d = 0; d < n.rank; ++d) st[d] = ds[perm->ints[d]];
    } else {
      const lt_attr* s = fusion::find_attr(n, "starts");
      const lt_attr* t = fusion::find_attr(n, "steps");
      for (size_t d = 0; d < n.rank; ++d) {
        st[d] = ds[d] * t->ints[d];
        off += ds[d] * s->ints[d];
      }
    }
    strided_copy(static_cast<char*>(ptr[v]), static_cast<const char*>(ptr[n.operands[0]]),
                 std::vector<int64_t>(n.shape, n.shape + n.rank), st, off, elem);
    return true;
  }
  if (op == "conv2d") {
    ConvGeom cg = conv_geom(*g_, n);
    void* col = scratch ? scratch + scratch_offset_[v] : nullptr;
    const void* bias = n.num_operands == 3 ? ptr[n.operands[2]] : nullptr;
    if (n.dtype == LT_DTYPE_F32)
      conv2d(cg, static_cast<const float*>(ptr[n.operands[0]]),
             static_cast<const float*>(ptr[n.operands[1]]), static_cast<const float*>(bias),
             static_cast<float*>(ptr[v]), static_cast<float*>(col));
    else
      conv2d(cg, static_cast<const double*>(ptr[n.operands[0]]),
             static_cast<const double*>(ptr[n.operands[1]]), static_cast<const double*>(bias),
             static_cast<double*>(ptr[v]), static_cast<double*>(col));
    return true;
  }
  if (op == "matmul") {
    const lt_graph_node& a = g_->nodes[n.operands[0]];
    int64_t batch = n.rank == 3 ? n.shape[0] : 1;
    int64_t m = n.shape[n.rank - 2], nn = n.shape[n.rank - 1], k = a.shape[a.rank - 1];
    auto run = [&](auto* out) {
      using T = std::remove_pointer_t<decltype(out)>;
      const T* A = static_cast<const T*>(ptr[n.operands[0]]);
      const T* B = static_cast<const T*>(ptr[n.operands[1]]);
      auto one = [&](int64_t b) {
        gemm<T>(m, nn, k, A + b * m * k, k, B + b * k * nn, nn, out + b * m * nn, nn, false);
      };
      int64_t macs = m * nn * k;
      if (batch > 1 && macs < kBlasThreadsGemm && batch * macs >= kSerialGemm) {
        // Many small products: one TBB task per batch entry, OpenBLAS serial in each.
        SerialBlasScope serial;
        tbb::parallel_for(int64_t{0}, batch, one);
      } else {
        for (int64_t b = 0; b < batch; ++b) one(b);
      }
    };
    if (n.dtype == LT_DTYPE_F32)
      run(static_cast<float*>(ptr[v]));
    else
      run(static_cast<double*>(ptr[v]));
    return true;
  }
  *error = std::string("cpu_jit: no lowering for op ") + n.op;
  return false;
}

bool Program::execute(void* const* inputs, void* const* outputs, std::string* error) const {
  const lt_graph& g = *g_;
  std::vector<void*> ptr(g.num_nodes, nullptr);
  for (size_t k = 0; k < g.num_inputs; ++k) ptr[g.inputs[k]] = inputs[k];
  for (size_t k = 0; k < g.num_outputs; ++k) {
    int32_t v = g.outputs[k];
    if (!ptr[v] && std::string_view(g.nodes[v].op) != "input") ptr[v] = outputs[k];
  }
  // The arena is reused when free (steady state maps no fresh pages); a concurrent execute
  // of the same program gets its own.
  std::unique_lock<std::mutex> lock(arena_mu_, std::try_to_lock);
  std::unique_ptr<char[], void (*)(void*)> own{nullptr, std::free};
  char* arena = nullptr;
  if (arena_bytes_) {
    if (lock.owns_lock()) {
      if (!arena_) arena_ = {static_cast<char*>(std::aligned_alloc(64, arena_bytes_)), std::free};
      arena = arena_.get();
    } else {
      own.reset(static_cast<char*>(std::aligned_alloc(64, arena_bytes_)));
      arena = own.get();
    }
    if (!arena) {
      *error = "cpu_jit: out of memory for " + std::to_string(arena_bytes_) + " temp bytes";
      return false;
    }
  }
  for (size_t v = 0; v < g.num_nodes; ++v)
    if (temp_offset_[v] >= 0) ptr[v] = arena + temp_offset_[v];
  std::vector<void*> bufs;
  for (const Step& s : steps_) {
    if (s.kernel < 0) {
      if (!run_opaque(s.node, ptr, arena, error)) return false;
      continue;
    }
    const KernelDesc& k = kernels_[s.kernel];
    if (k.parallel_extent == 0) continue;
    bufs.resize(k.slots.size());
    for (size_t i = 0; i < k.slots.size(); ++i) bufs[i] = ptr[k.slots[i]];
    KernelFn fn = fns_[s.kernel];
    int64_t work = k.parallel_extent * k.work_per_index;
    if (work < (1 << 15) || k.parallel_extent == 1) {
      fn(bufs.data(), 0, k.parallel_extent);
    } else {
      int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, k.work_per_index));
      void* const* b = bufs.data();
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, k.parallel_extent, grain),
                        [&](const tbb::blocked_range<int64_t>& r) { fn(b, r.begin(), r.end()); });
    }
  }
  for (size_t k = 0; k < g.num_outputs; ++k) {
    int32_t v = g.outputs[k];
    if (ptr[v] != outputs[k]) std::memcpy(outputs[k], ptr[v], node_bytes(v));
  }
  return true;
}

}  // namespace lt::cpujit
