// conv_onednn.cpp — f32 convolution in its three passes (forward, backward-data,
// backward-weights) through oneDNN in its own blocked layouts (reordered at each call's
// borders), under the project's one thread budget: oneDNN (OpenMP in
// Debian's build) is held at one thread and the batch is split into chunks that run as oneTBB
// tasks, so no second thread pool ever spins beside TBB's. Primitives are created once per
// geometry (at prepare time when a step program is built) and cached for every later run.
// Measured against im2col + GEMM and the old autograd lowering in benchmarks/conv (README).
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "kernels.h"

// The two OpenMP runtime calls this file makes, declared here rather than through <omp.h>, which
// clang ships only with libomp-dev (CMakeLists.txt links GNU libgomp, oneDNN's runtime).
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int);
}

namespace lt::host {
namespace {

using dnnl::memory;

// One geometry and pass: the primitive for a chunk of `chunk` images and, when the batch does
// not divide, the one for the last, smaller chunk.
// A primitive in the layouts oneDNN chose (`any`: blocked, e.g. nChw16c, where it has direct
// kernels for them) and the reorders from and to the graph's plain NCHW / OIHW buffers.
struct Prim {
  dnnl::primitive p;
  size_t scratch = 0;
  memory::desc x, w, y;        // the primitive's layouts
  dnnl::primitive rx, rw, ry;  // plain -> the primitive's layout (inputs), or the reverse
  bool bx = false, bw = false, by = false;  // whether that tensor is reordered
  uint64_t id = 0;  // unique per created Prim: keys each thread's Bound (below), never reused
};
struct ConvPrimitives {
  int64_t chunk = 0, chunks = 0;
  Prim full, tail;
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

// Measured on one core (bench_conv, onednn_blocked against onednn_nchw, reorders counted):
// oneDNN's direct kernels in blocked layouts run 1.4-3x faster than its NCHW im2col + GEMM
// path, so the primitive picks its layouts and each call reorders at its borders.
Prim create(ConvPass pass, const ConvGeom& g, int64_t n, bool bias) {
  using namespace dnnl;
  const Descs plain = descs(g, n);
  const auto f32 = memory::data_type::f32;
  // Except where the same measurement found NCHW faster: one input channel per group (0.2-0.8x
  // blocked) and 1x1 stride-1 convolutions (0.6-0.7x), both outside backward-weights.
  const bool keep_plain = pass != ConvPass::kWeights &&
                          (g.Cg() == 1 || (g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1));
  const auto any = memory::format_tag::any;
  memory::desc x = plain.x, y = plain.y, w = plain.w;
  if (!keep_plain) {
    x = memory::desc({n, g.C, g.H, g.W}, f32, any);
    y = memory::desc({n, g.O, g.OH, g.OW}, f32, any);
    w = g.G == 1 ? memory::desc({g.O, g.Cg(), g.KH, g.KW}, f32, any)
                 : memory::desc({g.G, g.Og(), g.Cg(), g.KH, g.KW}, f32, any);
  }
  const memory::desc b = plain.b;
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
  Prim r;
  if (pass == ConvPass::kForward) {
    r.p = convolution_forward(fpd);
    r.scratch = fpd.scratchpad_desc().get_size();
    r.x = fpd.src_desc();
    r.w = fpd.weights_desc();
    r.y = fpd.dst_desc();
  } else if (pass == ConvPass::kData) {
    convolution_backward_data::primitive_desc pd(
        convolution_backward_data::desc(algorithm::convolution_direct, x, w, y, strides, dil, pl,
                                        pr),
        attr, engine(), fpd);
    r.p = convolution_backward_data(pd);
    r.scratch = pd.scratchpad_desc().get_size();
    r.x = pd.diff_src_desc();
    r.w = pd.weights_desc();
    r.y = pd.diff_dst_desc();
  } else {
    convolution_backward_weights::primitive_desc pd(
        convolution_backward_weights::desc(algorithm::convolution_direct, x, w, y, strides, dil, pl,
                                           pr),
        attr, engine(), fpd);
    r.p = convolution_backward_weights(pd);
    r.scratch = pd.scratchpad_desc().get_size();
    r.x = pd.src_desc();
    r.w = pd.diff_weights_desc();
    r.y = pd.diff_dst_desc();
  }
  // The output is reordered from the primitive's layout, the inputs into it.
  const bool out_x = pass == ConvPass::kData, out_w = pass == ConvPass::kWeights,
             out_y = pass == ConvPass::kForward;
  auto link = [&](const memory::desc& user, const memory::desc& inner, bool is_out, bool& blocked,
                  dnnl::primitive& re) {
    blocked = inner != user;
    if (!blocked) return;
    re = is_out
             ? dnnl::primitive(reorder(reorder::primitive_desc(engine(), inner, engine(), user)))
             : dnnl::primitive(reorder(reorder::primitive_desc(engine(), user, engine(), inner)));
  };
  link(plain.x, r.x, out_x, r.bx, r.rx);
  link(plain.w, r.w, out_w, r.bw, r.rw);
  link(plain.y, r.y, out_y, r.by, r.ry);
  static std::atomic<uint64_t> next_id{1};
  r.id = next_id++;
  return r;
}

// This thread's OpenMP setting, restored after: oneDNN runs on this thread alone, also while it
// creates primitives (which may reorder in parallel regions); an OpenMP team started there
// would stay alive to the end of the process beside oneTBB's pool.
struct OneOmpThread {
  int prev = omp_get_max_threads();
  OneOmpThread() { omp_set_num_threads(1); }
  ~OneOmpThread() { omp_set_num_threads(prev); }
};

// The cached primitives of (pass, geometry, bias); null when oneDNN has no implementation.
std::shared_ptr<const ConvPrimitives> primitives(ConvPass pass, const ConvGeom& g, bool bias) {
  OneOmpThread one;
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
    p->full = create(pass, g, p->chunk, bias);
    const int64_t last = g.N - (p->chunks - 1) * p->chunk;
    if (last != p->chunk) p->tail = create(pass, g, last, bias);
  } catch (const dnnl::error&) {
    p.reset();  // unimplemented geometry: the caller keeps its own path
  }
  if (cache.size() >= 512) cache.clear();  // bounded; entries in use stay alive (shared_ptr)
  cache.emplace(key, p);
  return p;
}

// Per-thread buffers (0: scratchpad, 1-3: x, w, y in the primitive's layout), grown as needed
// and kept: no page faults in a steady step.
char* scratch(int slot, size_t bytes) {
  thread_local std::array<std::vector<char>, 4> bufs;
  std::vector<char>& buf = bufs[static_cast<size_t>(slot)];
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

// One thread's memory objects and argument map for one Prim, created on its first run there:
// each later call only points them at this call's buffers (set_data_handle), instead of creating
// eight oneDNN memory objects, a stream and a hash map per call (measured: 0.1-0.2 ms per step
// of the small resnets, whose convolutions take tens of microseconds each).
struct Bound {
  memory xu, wu, yu;  // the user's plain buffers
  memory x, w, y;     // the primitive's layouts: the same objects as the plain ones if unblocked
  memory s, b;        // scratchpad, bias
  std::unordered_map<int, memory> args;
  std::unordered_map<int, memory> to_x, to_w, to_y;  // the reorders' arguments, either direction
};
Bound& bound(const Prim& pr, ConvPass pass, const Descs& d, bool has_bias) {
  thread_local std::unordered_map<uint64_t, std::unique_ptr<Bound>> cache;
  auto it = cache.find(pr.id);
  if (it != cache.end()) return *it->second;
  if (cache.size() >= 1024) cache.clear();  // bounded like the primitive cache
  auto b = std::make_unique<Bound>();
  b->xu = memory(d.x, engine(), nullptr);
  b->wu = memory(d.w, engine(), nullptr);
  b->yu = memory(d.y, engine(), nullptr);
  b->x = pr.bx ? memory(pr.x, engine(), nullptr) : b->xu;
  b->w = pr.bw ? memory(pr.w, engine(), nullptr) : b->wu;
  b->y = pr.by ? memory(pr.y, engine(), nullptr) : b->yu;
  b->s = memory(memory::desc({static_cast<int64_t>(pr.scratch)}, memory::data_type::u8,
                             memory::format_tag::a),
                engine(), nullptr);
  b->args = {{DNNL_ARG_SCRATCHPAD, b->s}};
  if (pass == ConvPass::kForward) {
    b->args.insert({{DNNL_ARG_SRC, b->x}, {DNNL_ARG_WEIGHTS, b->w}, {DNNL_ARG_DST, b->y}});
    if (has_bias) {
      b->b = memory(d.b, engine(), nullptr);
      b->args.insert({DNNL_ARG_BIAS, b->b});
    }
  } else if (pass == ConvPass::kData) {
    b->args.insert(
        {{DNNL_ARG_DIFF_SRC, b->x}, {DNNL_ARG_WEIGHTS, b->w}, {DNNL_ARG_DIFF_DST, b->y}});
  } else {
    b->args.insert(
        {{DNNL_ARG_SRC, b->x}, {DNNL_ARG_DIFF_WEIGHTS, b->w}, {DNNL_ARG_DIFF_DST, b->y}});
  }
  // The output's reorder runs from the primitive's layout to the user's, the inputs' the reverse.
  auto link = [](memory& user, memory& inner, bool is_out) {
    return is_out ? std::unordered_map<int, memory>{{DNNL_ARG_FROM, inner}, {DNNL_ARG_TO, user}}
                  : std::unordered_map<int, memory>{{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, inner}};
  };
  b->to_x = link(b->xu, b->x, pass == ConvPass::kData);
  b->to_w = link(b->wu, b->w, pass == ConvPass::kWeights);
  b->to_y = link(b->yu, b->y, pass == ConvPass::kForward);
  return *cache.emplace(pr.id, std::move(b)).first->second;
}

// This thread's stream on the one engine (a stream per call cost an allocation and a lock).
dnnl::stream& this_stream() {
  thread_local dnnl::stream st(engine());
  return st;
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
    OneOmpThread one;
    const int64_t n0 = c * p->chunk, n = std::min(p->chunk, g.N - n0);
    const bool last = n != p->chunk;
    const Prim& pr = last ? p->tail : p->full;
    Bound& m = bound(pr, pass, descs(g, n), bias != nullptr);
    dnnl::stream& st = this_stream();
    auto point = [](memory& mem, const float* data) {
      mem.set_data_handle(const_cast<float*>(data));
    };
    point(m.xu, (pass == ConvPass::kData ? out : a) + n0 * g.C * g.H * g.W);
    const float* ysrc = pass == ConvPass::kForward ? out : pass == ConvPass::kData ? a : b;
    point(m.yu, ysrc + n0 * g.O * g.OH * g.OW);
    point(m.wu, pass == ConvPass::kWeights ? (c == 0 ? out : partial.data() + (c - 1) * wn) : b);
    // The primitive's layouts live in per-thread buffers; an input is reordered into it now.
    if (pr.bx) m.x.set_data_handle(scratch(1, pr.x.get_size()));
    if (pr.bw) m.w.set_data_handle(scratch(2, pr.w.get_size()));
    if (pr.by) m.y.set_data_handle(scratch(3, pr.y.get_size()));
    m.s.set_data_handle(scratch(0, pr.scratch));
    if (bias && pass == ConvPass::kForward) point(m.b, bias);
    if (pr.bx && pass != ConvPass::kData) pr.rx.execute(st, m.to_x);
    if (pr.bw && pass != ConvPass::kWeights) pr.rw.execute(st, m.to_w);
    if (pr.by && pass != ConvPass::kForward) pr.ry.execute(st, m.to_y);
    pr.p.execute(st, m.args);
    // The output back to the user's plain layout.
    if (pass == ConvPass::kForward && pr.by) pr.ry.execute(st, m.to_y);
    if (pass == ConvPass::kData && pr.bx) pr.rx.execute(st, m.to_x);
    if (pass == ConvPass::kWeights && pr.bw) pr.rw.execute(st, m.to_w);
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
