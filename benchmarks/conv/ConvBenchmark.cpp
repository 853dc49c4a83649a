// ConvBenchmark.cpp — convolution on the CPU (issue #26, item 2): lt-run's cnn and resnet
// training steps on cpu_jit and cpu_eager, and conv layers of real nets (few and many channels,
// 3x3 and 1x1, strides, batch 1 to 256) in their three passes (forward, backward-data,
// backward-weights), each through LazyTensor on cpu_jit, through the shared host kernels' im2col
// + GEMM, and through oneDNN (plain NCHW, and its blocked layouts with the reorders counted).
// Every layer reports its flops and bytes and GFLOP/s; PyTorch eager runs the same steps and
// layers in torch_conv_steps.py beside this file. Threads: the project's budget (TBB's arena);
// oneDNN (built with OpenMP in Debian) gets the same count.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <tbb/task_arena.h>

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_runtime.h"
#include "lazytensor/autograd.hpp"
#include "lazytensor/host/kernels.hpp"
#include "lazytensor/models/cnn.hpp"
#include "lazytensor/models/resnet.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/optim.hpp"

namespace {

lt::Runtime& runtime() {
  return lt::bench::runtime(lt::bench::runtime_options("silent"));
}

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// ---- training steps ------------------------------------------------------------------------

// One Adam step (lt-run's default optimiser, lr 0.003) of `model` on [batch, 1, size, size].
template <class Model>
void train_step(benchmark::State& state, const std::string& device, int64_t size, int64_t batch,
                Model& model) {
  lt::Device dev = runtime().find_device(device);
  model.materialize();
  lt::optim::Adam opt(model.parameters(), 0.003);
  std::vector<float> ys(static_cast<size_t>(batch * 10), 0.0f);
  for (int64_t i = 0; i < batch; ++i) ys[static_cast<size_t>(i * 10 + i % 10)] = 1.0f;
  lt::Tensor x = lt::Tensor::from(dev, random_vector(static_cast<size_t>(batch * size * size), 1),
                                  {batch, 1, size, size});
  lt::Tensor y = lt::Tensor::from(dev, ys, {batch, 10});
  auto step = [&] {
    lt::Tensor loss = lt::nn::cross_entropy(model(x), y);
    lt::backward(loss);
    opt.step();
    lt::sync(dev);
    return loss;
  };
  for (int i = 0; i < 3; ++i) step();  // compile and warm the caches outside the timed loop
  for (auto _ : state) benchmark::DoNotOptimize(step().get());
  state.SetLabel(device);
}

void BM_TrainStep(benchmark::State& state, std::string device, std::string model) {
  const int64_t size = state.range(0), batch = state.range(1);
  lt::Device dev = runtime().find_device(device);
  // lt-run's networks (tools/lt-run): its cnn at any square image size, its resnet for the
  // digits' 8x8 or Fashion-MNIST's 28x28 (lt-run's default width, 16).
  if (model == "cnn") {
    lt::models::SmallCnnConfig c;
    c.side = size;
    lt::models::SmallCnn m(dev, c);
    train_step(state, device, size, batch, m);
  } else {
    lt::models::ResNet m(dev, lt::models::image_resnet_config(model == "resnet_fashion" ? 28 : 8));
    train_step(state, device, size, batch, m);
  }
}

// ---- conv layers ---------------------------------------------------------------------------

struct Layer {
  int64_t N, C, O, K, S, HW;
  int64_t pad() const { return K / 2; }
  int64_t out() const { return (HW + 2 * pad() - K) / S + 1; }
  double flops() const { return 2.0 * static_cast<double>(N * O * out() * out() * C * K * K); }
  double bytes() const {
    return 4.0 * static_cast<double>(N * C * HW * HW + O * C * K * K + N * O * out() * out());
  }
};

// The shapes of real nets; the same list as torch_conv_steps.py's LAYERS.
const Layer kLayers[] = {
    {64, 1, 8, 3, 1, 28},   {64, 8, 16, 3, 1, 14},  {64, 8, 16, 3, 2, 28},
    {32, 64, 64, 3, 1, 16}, {1, 64, 64, 3, 1, 16},  {32, 64, 64, 1, 1, 16},
    {8, 256, 256, 3, 1, 8}, {8, 256, 256, 1, 2, 8}, {256, 8, 16, 3, 1, 14},
};
enum Pass { kForward, kData, kWeights };
const char* const kPassName[] = {"forward", "data", "weights"};

void report(benchmark::State& state, const Layer& l) {
  state.counters["flops"] = l.flops();
  state.counters["bytes"] = l.bytes();
  state.counters["GFLOP/s"] = benchmark::Counter(
      l.flops() * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// Through LazyTensor: the conv2d op forward, and its gradients as autograd lowers them today.
void BM_ConvLt(benchmark::State& state, std::string device, int pass, Layer l) {
  lt::Device dev = runtime().find_device(device);
  lt::Tensor x = lt::Tensor::from(
      dev, random_vector(static_cast<size_t>(l.N * l.C * l.HW * l.HW), 1), {l.N, l.C, l.HW, l.HW});
  lt::Tensor w = lt::Tensor::from(dev, random_vector(static_cast<size_t>(l.O * l.C * l.K * l.K), 2),
                                  {l.O, l.C, l.K, l.K});
  lt::Tensor g =
      lt::Tensor::from(dev, random_vector(static_cast<size_t>(l.N * l.O * l.out() * l.out()), 3),
                       {l.N, l.O, l.out(), l.out()});
  if (pass == kData) lt::set_requires_grad(x);
  if (pass == kWeights) lt::set_requires_grad(w);
  auto once = [&] {
    lt::Tensor r;
    {
      lt::Tensor y = lt::conv2d(x, w, lt::Tensor(), {l.S, l.S}, {l.pad(), l.pad()});
      if (pass == kForward) {
        r = y;
      } else {
        lt::backward((y * g).sum());
        r = lt::grad(pass == kData ? x : w);
        lt::zero_grad(pass == kData ? x : w);
      }
    }
    lt::sync(dev);
    return r;
  };
  for (int i = 0; i < 2; ++i) once();
  for (auto _ : state) benchmark::DoNotOptimize(once().get());
  report(state, l);
}

// The shared host kernels' forward convolution (im2col + GEMM under the TBB thread policy).
void BM_ConvIm2col(benchmark::State& state, Layer l) {
  const int64_t o = l.out();
  lt::host::ConvGeom g{l.N, l.C, l.HW, l.HW,    l.O,     l.K, l.K, o,
                       o,   l.S, l.S,  l.pad(), l.pad(), 1,   1,   1};
  auto x = random_vector(static_cast<size_t>(l.N * l.C * l.HW * l.HW), 1);
  auto w = random_vector(static_cast<size_t>(l.O * l.C * l.K * l.K), 2);
  std::vector<float> y(static_cast<size_t>(l.N * l.O * o * o));
  std::vector<float> col(static_cast<size_t>(lt::host::conv_scratch_elems(g)));
  for (auto _ : state) {
    lt::host::conv2d_im2col<float>(g, x.data(), w.data(), nullptr, y.data(), col.data());
    benchmark::DoNotOptimize(y.data());
  }
  report(state, l);
}

// oneDNN: the primitive created once (as a host step would at prepare time), run per
// iteration. `blocked`: oneDNN picks its layouts and the NCHW<->blocked reorders are timed too.
void BM_ConvOnednn(benchmark::State& state, int pass, bool blocked, Layer l) {
  using namespace dnnl;
  omp_set_num_threads(tbb::this_task_arena::max_concurrency());
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  const int64_t o = l.out();
  memory::dims xd{l.N, l.C, l.HW, l.HW}, wd{l.O, l.C, l.K, l.K}, yd{l.N, l.O, o, o};
  memory::dims strides{l.S, l.S}, pads{l.pad(), l.pad()};
  auto dt = memory::data_type::f32;
  auto any = memory::format_tag::any;
  memory::desc x_plain(xd, dt, memory::format_tag::nchw), w_plain(wd, dt, memory::format_tag::oihw),
      y_plain(yd, dt, memory::format_tag::nchw);
  memory::desc xm = blocked ? memory::desc(xd, dt, any) : x_plain;
  memory::desc wm = blocked ? memory::desc(wd, dt, any) : w_plain;
  memory::desc ym = blocked ? memory::desc(yd, dt, any) : y_plain;
  auto xv = random_vector(static_cast<size_t>(l.N * l.C * l.HW * l.HW), 1);
  auto wv = random_vector(static_cast<size_t>(l.O * l.C * l.K * l.K), 2);
  auto yv = random_vector(static_cast<size_t>(l.N * l.O * o * o), 3);
  memory xu(x_plain, eng, xv.data()), wu(w_plain, eng, wv.data()), yu(y_plain, eng, yv.data());
  auto fwd_pd = convolution_forward::primitive_desc(
      convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, xm, wm,
                                ym, strides, pads, pads),
      eng);
  primitive prim;
  memory::desc px, pw, py;
  if (pass == kForward) {
    prim = convolution_forward(fwd_pd);
    px = fwd_pd.src_desc(), pw = fwd_pd.weights_desc(), py = fwd_pd.dst_desc();
  } else if (pass == kData) {
    auto pd = convolution_backward_data::primitive_desc(
        convolution_backward_data::desc(algorithm::convolution_direct, xm, wm, ym, strides, pads,
                                        pads),
        eng, fwd_pd);
    prim = convolution_backward_data(pd);
    px = pd.diff_src_desc(), pw = pd.weights_desc(), py = pd.diff_dst_desc();
  } else {
    auto pd = convolution_backward_weights::primitive_desc(
        convolution_backward_weights::desc(algorithm::convolution_direct, xm, wm, ym, strides, pads,
                                           pads),
        eng, fwd_pd);
    prim = convolution_backward_weights(pd);
    px = pd.src_desc(), pw = pd.diff_weights_desc(), py = pd.diff_dst_desc();
  }
  // Internal memories where the primitive wants other layouts than the user's NCHW.
  auto inner = [&](const memory::desc& want, memory& user) {
    return want == user.get_desc() ? user : memory(want, eng);
  };
  memory xi = inner(px, xu), wi = inner(pw, wu), yi = inner(py, yu);
  const bool in_x = pass != kData, in_w = pass != kWeights, in_y = pass != kForward;
  auto run = [&] {
    auto to = [&](bool input, memory& user, memory& in) {
      if (input && in != user) reorder(user, in).execute(st, user, in);
    };
    to(in_x, xu, xi);
    to(in_w, wu, wi);
    to(in_y, yu, yi);
    if (pass == kForward)
      prim.execute(st, {{DNNL_ARG_SRC, xi}, {DNNL_ARG_WEIGHTS, wi}, {DNNL_ARG_DST, yi}});
    else if (pass == kData)
      prim.execute(st, {{DNNL_ARG_DIFF_SRC, xi}, {DNNL_ARG_WEIGHTS, wi}, {DNNL_ARG_DIFF_DST, yi}});
    else
      prim.execute(st, {{DNNL_ARG_SRC, xi}, {DNNL_ARG_DIFF_WEIGHTS, wi}, {DNNL_ARG_DIFF_DST, yi}});
    memory& out_user = pass == kForward ? yu : pass == kData ? xu : wu;
    memory& out_in = pass == kForward ? yi : pass == kData ? xi : wi;
    if (out_in != out_user) reorder(out_in, out_user).execute(st, out_in, out_user);
    st.wait();
  };
  run();
  for (auto _ : state) run();
  state.SetLabel(std::string(blocked ? "blocked " : "nchw ") + fwd_pd.impl_info_str());
  report(state, l);
}

// oneDNN under the project's thread budget: OpenMP held at one thread, the batch split into
// chunks that run as TBB tasks (a primitive per chunk size, user-managed scratchpads), weight
// gradients of the chunks summed. This is how the host kernels can call it without a second
// thread pool.
void BM_ConvOnednnTbb(benchmark::State& state, int pass, Layer l) {
  using namespace dnnl;
  omp_set_num_threads(1);
  engine eng(engine::kind::cpu, 0);
  const int64_t o = l.out(), threads = tbb::this_task_arena::max_concurrency();
  const int64_t nb = std::max<int64_t>(1, (l.N + threads - 1) / threads);
  const int64_t chunks = (l.N + nb - 1) / nb;
  auto dt = memory::data_type::f32;
  memory::dims wd{l.O, l.C, l.K, l.K}, strides{l.S, l.S}, pads{l.pad(), l.pad()};
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  struct Prim {
    primitive p;
    memory::desc scratch;
  };
  auto make = [&](int64_t n) {
    memory::desc x({n, l.C, l.HW, l.HW}, dt, memory::format_tag::nchw),
        w(wd, dt, memory::format_tag::oihw), y({n, l.O, o, o}, dt, memory::format_tag::nchw);
    auto fd = convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                        x, w, y, strides, pads, pads);
    auto fpd = convolution_forward::primitive_desc(fd, attr, eng);
    if (pass == kForward) return Prim{convolution_forward(fpd), fpd.scratchpad_desc()};
    if (pass == kData) {
      auto pd = convolution_backward_data::primitive_desc(
          convolution_backward_data::desc(algorithm::convolution_direct, x, w, y, strides, pads,
                                          pads),
          attr, eng, fpd);
      return Prim{convolution_backward_data(pd), pd.scratchpad_desc()};
    }
    auto pd = convolution_backward_weights::primitive_desc(
        convolution_backward_weights::desc(algorithm::convolution_direct, x, w, y, strides, pads,
                                           pads),
        attr, eng, fpd);
    return Prim{convolution_backward_weights(pd), pd.scratchpad_desc()};
  };
  Prim full = make(nb), tail = make(l.N - (chunks - 1) * nb);
  auto xv = random_vector(static_cast<size_t>(l.N * l.C * l.HW * l.HW), 1);
  auto wv = random_vector(static_cast<size_t>(l.O * l.C * l.K * l.K), 2);
  auto yv = random_vector(static_cast<size_t>(l.N * l.O * o * o), 3);
  const size_t wn = wv.size();
  std::vector<float> partial(static_cast<size_t>(chunks) * wn);
  auto run = [&] {
    tbb::parallel_for(int64_t{0}, chunks, [&](int64_t c) {
      omp_set_num_threads(1);
      const int64_t n0 = c * nb, n = std::min(nb, l.N - n0);
      Prim& pr = c == chunks - 1 ? tail : full;
      stream st(eng);
      memory::desc x({n, l.C, l.HW, l.HW}, dt, memory::format_tag::nchw),
          w(wd, dt, memory::format_tag::oihw), y({n, l.O, o, o}, dt, memory::format_tag::nchw);
      std::vector<char> scratch(pr.scratch.get_size());
      memory xm(x, eng, xv.data() + n0 * l.C * l.HW * l.HW),
          ym(y, eng, yv.data() + n0 * l.O * o * o),
          wm(w, eng, pass == kWeights ? partial.data() + c * wn : wv.data()),
          sm(pr.scratch, eng, scratch.data());
      if (pass == kForward)
        pr.p.execute(st, {{DNNL_ARG_SRC, xm},
                          {DNNL_ARG_WEIGHTS, wm},
                          {DNNL_ARG_DST, ym},
                          {DNNL_ARG_SCRATCHPAD, sm}});
      else if (pass == kData)
        pr.p.execute(st, {{DNNL_ARG_DIFF_SRC, xm},
                          {DNNL_ARG_WEIGHTS, wm},
                          {DNNL_ARG_DIFF_DST, ym},
                          {DNNL_ARG_SCRATCHPAD, sm}});
      else
        pr.p.execute(st, {{DNNL_ARG_SRC, xm},
                          {DNNL_ARG_DIFF_WEIGHTS, wm},
                          {DNNL_ARG_DIFF_DST, ym},
                          {DNNL_ARG_SCRATCHPAD, sm}});
      st.wait();
    });
    if (pass == kWeights)
      for (int64_t c = 1; c < chunks; ++c)
        for (size_t i = 0; i < wn; ++i) partial[i] += partial[c * wn + i];
  };
  run();
  for (auto _ : state) run();
  state.SetLabel(std::to_string(chunks) + " chunks");
  report(state, l);
}

std::string layer_name(const Layer& l) {
  char b[96];
  std::snprintf(b, sizeof b, "N%lld_C%lld_O%lld_K%lld_S%lld_HW%lld", static_cast<long long>(l.N),
                static_cast<long long>(l.C), static_cast<long long>(l.O),
                static_cast<long long>(l.K), static_cast<long long>(l.S),
                static_cast<long long>(l.HW));
  return b;
}

// Registered at run time: the backends are the runtime's, the layers the table's.
int register_all() {
  for (const char* dev : {"cpu_jit", "cpu_eager"}) {
    for (const char* m : {"cnn", "resnet"}) {
      benchmark::RegisterBenchmark((std::string("TrainStep/") + m + "/" + dev).c_str(),
                                   BM_TrainStep, std::string(dev), std::string(m))
          ->Args({8, 32})
          ->Args({28, 64})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark((std::string("TrainStep/resnet_fashion/") + dev).c_str(),
                                 BM_TrainStep, std::string(dev), std::string("resnet_fashion"))
        ->Args({28, 128})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (int pass : {kForward, kData, kWeights}) {
    for (const Layer& l : kLayers) {
      std::string name = std::string("Conv/") + kPassName[pass] + "/" + layer_name(l);
      benchmark::RegisterBenchmark((name + "/lt_cpu_jit").c_str(), BM_ConvLt,
                                   std::string("cpu_jit"), pass, l)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      if (pass == kForward)
        benchmark::RegisterBenchmark((name + "/im2col").c_str(), BM_ConvIm2col, l)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      benchmark::RegisterBenchmark((name + "/onednn_tbb").c_str(), BM_ConvOnednnTbb, pass, l)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      for (bool blocked : {false, true})
        benchmark::RegisterBenchmark(
            (name + (blocked ? "/onednn_blocked" : "/onednn_nchw")).c_str(), BM_ConvOnednn, pass,
            blocked, l)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
  }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
