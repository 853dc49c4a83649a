// conv_onednn.cpp — f32 convolution in its three passes (forward, backward-data,
// backward-weights) through oneDNN, under the project's one thread budget: oneDNN (OpenMP in
// Debian's build) is held at one thread and the batch is split into chunks that run as oneTBB
// tasks, so no second thread pool ever spins beside TBB's. Primitives are created once per
// geometry (at prepare time when a step program is built) and cached for every later run.
// Measured against im2col + GEMM and the old autograd lowering in benchmarks/conv (README).
#include <omp.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "kernels.h"

namespace lt::host {
namespace {

using dnnl::memory;

// One geometry and pass: the primitive for a chunk of `chunk` images and, when the batch does
// not divide, the one for the last, smaller chunk.
struct ConvPrimitives {
  int64_t chunk = 0, chunks = 0;
  dnnl::primitive full, tail;
  size_t full_scratch = 0, tail_scratch = 0;
};

using Key = std::array<int64_t, 19>;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Pads on the right so that oneDNN derives exactly the output size the IR has.
int64_t right_pad(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (out - 1) * s + (k - 1) * d + 1 - in - p;
}

// The plain layouts of `n` images: NCHW activations, OIHW (GOIHW) weights, the bias.
struct Descs {
  memory::desc x, y, w, b;
};
Descs descs(const ConvGeom& g, int64_t n) {
  const auto f32 = memory::data_type::f32;
  return {memory::desc({n, g.C, g.H, g.W}, f32, memory::format_tag::nchw),
          memory::desc({n, g.O, g.OH, g.OW}, f32, memory::format_tag::nchw),
          g.G == 1
              ? memory::desc({g.O, g.Cg(), g.KH, g.KW}, f32, memory::format_tag::oihw)
              : memory::desc({g.G, g.Og(), g.Cg(), g.KH, g.KW}, f32, memory::format_tag::goihw),
          memory::desc({g.O}, f32, memory::format_tag::x)};
}

std::pair<dnnl::primitive, size_t> create(ConvPass pass, const ConvGeom& g, int64_t n, bool bias) {
  using namespace dnnl;
  auto [x, y, w, b] = descs(g, n);
  memory::dims strides{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pl{g.ph, g.pw};
  memory::dims pr{right_pad(g.H, g.OH, g.KH, g.sh, g.ph, g.dh),
                  right_pad(g.W, g.OW, g.KW, g.sw, g.pw, g.dw)};
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  const auto prop =
      pass == ConvPass::kForward ? prop_kind::forward_inference : prop_kind::forward_training;
  auto fd = bias ? convolution_forward::desc(prop, algorithm::convolution_direct, x, w, b, y,
                                             strides, dil, pl, pr)
                 : convolution_forward::desc(prop, algorithm::convolution_direct, x, w, y, strides,
                                             dil, pl, pr);
  convolution_forward::primitive_desc fpd(fd, attr, engine());
  if (pass == ConvPass::kForward)
    return {convolution_forward(fpd), fpd.scratchpad_desc().get_size()};
  if (pass == ConvPass::kData) {
    convolution_backward_data::primitive_desc pd(
        convolution_backward_data::desc(algorithm::convolution_direct, x, w, y, strides, dil, pl,
                                        pr),
        attr, engine(), fpd);
    return {convolution_backward_data(pd), pd.scratchpad_desc().get_size()};
  }
  convolution_backward_weights::primitive_desc pd(
      convolution_backward_weights::desc(algorithm::convolution_direct, x, w, y, strides, dil, pl,
                                         pr),
      attr, engine(), fpd);
  return {convolution_backward_weights(pd), pd.scratchpad_desc().get_size()};
}

// The cached primitives of (pass, geometry, bias); null when oneDNN has no implementation.
std::shared_ptr<const ConvPrimitives> primitives(ConvPass pass, const ConvGeom& g, bool bias) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const ConvPrimitives>> cache;
  const int64_t threads = tbb::this_task_arena::max_concurrency();
  Key key{static_cast<int64_t>(pass),
          g.N,
          g.C,
          g.H,
          g.W,
          g.O,
          g.KH,
          g.KW,
          g.OH,
          g.OW,
          g.sh,
          g.sw,
          g.ph,
          g.pw,
          g.dh,
          g.dw,
          g.G,
          bias,
          threads};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  auto p = std::make_shared<ConvPrimitives>();
  // One chunk per thread: oneDNN's kernels are more efficient on bigger chunks, and a conv is
  // seldom alone enough in a step for finer balance to pay.
  p->chunk = std::max<int64_t>(1, (g.N + threads - 1) / threads);
  p->chunks = (g.N + p->chunk - 1) / p->chunk;
  try {
    std::tie(p->full, p->full_scratch) = create(pass, g, p->chunk, bias);
    const int64_t last = g.N - (p->chunks - 1) * p->chunk;
    if (last != p->chunk) std::tie(p->tail, p->tail_scratch) = create(pass, g, last, bias);
  } catch (const dnnl::error&) {
    p.reset();  // unimplemented geometry: the caller keeps its own path
  }
  if (cache.size() >= 512) cache.clear();  // bounded; entries in use stay alive (shared_ptr)
  cache.emplace(key, p);
  return p;
}

// Per-thread scratchpad, grown as needed and kept: no page faults in a steady step.
char* scratch(size_t bytes) {
  thread_local std::vector<char> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

}  // namespace

bool onednn_conv_available(ConvPass pass, const ConvGeom& g, bool bias) {
  if (g.N == 0 || g.C == 0 || g.O == 0 || g.OH == 0 || g.OW == 0) return false;
  return primitives(pass, g, bias) != nullptr;
}

bool onednn_conv(ConvPass pass, const ConvGeom& g, const float* a, const float* b,
                 const float* bias, float* out) {
  auto p = g.N > 0 ? primitives(pass, g, bias != nullptr) : nullptr;
  if (!p) return false;
  const int64_t wn = g.O * g.Cg() * g.KH * g.KW;
  // Backward-weights: each chunk but the first writes a partial sum, added up at the end.
  std::vector<float> partial(pass == ConvPass::kWeights ? (p->chunks - 1) * wn : 0);
  auto run_chunk = [&](int64_t c) {
    // This thread's OpenMP setting, restored after: oneDNN runs on this thread alone.
    struct OneOmpThread {
      int prev = omp_get_max_threads();
      OneOmpThread() { omp_set_num_threads(1); }
      ~OneOmpThread() { omp_set_num_threads(prev); }
    } one;
    const int64_t n0 = c * p->chunk, n = std::min(p->chunk, g.N - n0);
    const bool last = n != p->chunk;
    const dnnl::primitive& prim = last ? p->tail : p->full;
    const size_t sbytes = last ? p->tail_scratch : p->full_scratch;
    const Descs d = descs(g, n);
    auto mem = [&](const memory::desc& md, const float* data) {
      return memory(md, engine(), const_cast<float*>(data));
    };
    memory x = mem(d.x, (pass == ConvPass::kData ? out : a) + n0 * g.C * g.H * g.W);
    const float* ysrc = pass == ConvPass::kForward ? out : pass == ConvPass::kData ? a : b;
    memory y = mem(d.y, ysrc + n0 * g.O * g.OH * g.OW);
    const float* wsrc =
        pass == ConvPass::kWeights ? (c == 0 ? out : partial.data() + (c - 1) * wn) : b;
    memory w = mem(d.w, wsrc);
    memory s(
        memory::desc({static_cast<int64_t>(sbytes)}, memory::data_type::u8, memory::format_tag::a),
        engine(), scratch(sbytes));
    std::unordered_map<int, memory> args{{DNNL_ARG_SCRATCHPAD, s}};
    if (pass == ConvPass::kForward) {
      args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
      if (bias) args.insert({DNNL_ARG_BIAS, mem(d.b, bias)});
    } else if (pass == ConvPass::kData) {
      args.insert({{DNNL_ARG_DIFF_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}});
    } else {
      args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}});
    }
    dnnl::stream st(engine());
    prim.execute(st, args);
    st.wait();
  };
  if (p->chunks == 1) {
    run_chunk(0);
  } else {
    tbb::parallel_for(int64_t{0}, p->chunks, run_chunk);
  }
  for (int64_t c = 1; c < p->chunks && pass == ConvPass::kWeights; ++c) {
    const float* src = partial.data() + (c - 1) * wn;
    for (int64_t i = 0; i < wn; ++i) out[i] += src[i];
  }
  return true;
}

}  // namespace lt::host
