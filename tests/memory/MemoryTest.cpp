// MemoryTest.cpp — memory accounting, buffer donation and rematerialisation (docs/memory.md) on
// cpu_eager: live and peak device bytes are exact and resettable; an optimizer step writes the
// new parameters and moments into the old ones' buffers, which lowers the step's peak by the
// training state and changes no result bit; nothing another tensor, a pending graph, a DLPack
// export or a queued run still reads is ever donated; a recompute region gives the same
// gradients from recomputed nodes.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>
#include <stdlib.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/optim.hpp"

namespace {

lt::Runtime eager_runtime() {
  lt::RuntimeOptions o;
  o.device = "cpu_eager";
  o.fallback = "error";
  return lt::Runtime::create(o);
}

std::string dev_metric(const lt::Device& d, const char* what) {
  return "memory." + d.name() + "." + what;
}

// A two-layer MLP trained with Adam: parameters, moments, one graph per step.
struct Mlp {
  lt::Device dev;
  lt::Tensor w1, b1, w2, b2;
  std::unique_ptr<lt::optim::Adam> opt;
  lt::Tensor x, y;
  explicit Mlp(const lt::Device& d) : dev(d) {
    w1 = lt::random_normal(dev, {64, 128}, 1, 0.0, 0.1);
    b1 = lt::Tensor::from(dev, std::vector<float>(128, 0.0f), {128});
    w2 = lt::random_normal(dev, {128, 16}, 2, 0.0, 0.1);
    b2 = lt::Tensor::from(dev, std::vector<float>(16, 0.0f), {16});
    for (lt::Tensor* p : {&w1, &b1, &w2, &b2}) {
      p->materialize();
      lt::set_requires_grad(*p);
    }
    opt = std::make_unique<lt::optim::Adam>(std::vector<lt::Tensor*>{&w1, &b1, &w2, &b2}, 1e-2);
    x = lt::random_normal(dev, {32, 64}, 3);
    y = lt::random_normal(dev, {32, 16}, 4);
    x.materialize();
    y.materialize();
  }
  // Bytes of the parameters and both Adam moments.
  double state_bytes() const {
    double n = 0;
    for (const lt::Tensor* p : {&w1, &b1, &w2, &b2}) n += static_cast<double>(p->numel()) * 4;
    return 3 * n;
  }
  lt::Tensor step() {
    lt::Tensor h = (lt::matmul(x, w1) + b1).relu();
    lt::Tensor d = lt::matmul(h, w2) + b2 - y;
    lt::Tensor loss = (d * d).mean();
    lt::backward(loss);
    opt->step();
    opt->zero_grad();
    lt::sync(dev);
    return loss;
  }
  std::vector<std::vector<float>> params() const {
    return {w1.to_vector<float>(), b1.to_vector<float>(), w2.to_vector<float>(),
            b2.to_vector<float>()};
  }
};

TEST(MemoryAccounting, LiveBytesAreExactAndPeakResetsToLive) {
  lt::Runtime rt = eager_runtime();
  lt::Device dev = rt.default_device();
  const double base = rt.metric(dev_metric(dev, "bytes_live"));
  {
    lt::Tensor a = lt::Tensor::from(dev, std::vector<float>(1000, 1.0f), {1000});
    EXPECT_EQ(rt.metric(dev_metric(dev, "bytes_live")), base + 4000);
    {
      lt::Tensor b = lt::Tensor::from(dev, std::vector<float>(250, 1.0f), {250});
      EXPECT_EQ(rt.metric(dev_metric(dev, "bytes_live")), base + 5000);
    }
    EXPECT_EQ(rt.metric(dev_metric(dev, "bytes_live")), base + 4000);
    EXPECT_GE(rt.metric(dev_metric(dev, "bytes_peak")), base + 5000);
    rt.reset_metrics();
    EXPECT_EQ(rt.metric(dev_metric(dev, "bytes_peak")), base + 4000);
    EXPECT_EQ(rt.metric("memory.bytes_live"), rt.metric(dev_metric(dev, "bytes_live")));
  }
  EXPECT_EQ(rt.metric(dev_metric(dev, "bytes_live")), base);
}

// The same training with donation blocked (every old parameter and moment still held by a
// handle, as a program keeping last step's weights would) and free: bitwise the same values,
// the training state donated every step, and the step's peak lower by at least the state.
TEST(Donation, AdamStepReusesStateBuffersLowersPeakAndChangesNoBit) {
  lt::Runtime rt_kept = eager_runtime(), rt_free = eager_runtime();
  Mlp kept(rt_kept.default_device()), free(rt_free.default_device());
  std::vector<lt::Tensor> held;
  double peak_kept = 0, peak_free = 0;
  for (int s = 0; s < 4; ++s) {
    held = {kept.w1, kept.b1, kept.w2, kept.b2};  // last step's values stay readable
    for (auto& [name, t] : kept.opt->named_state()) held.push_back(t);
    rt_kept.reset_metrics();
    rt_free.reset_metrics();
    const float lk = kept.step().item<float>(), lf = free.step().item<float>();
    EXPECT_EQ(lk, lf) << "step " << s;
    peak_kept = rt_kept.metric(dev_metric(kept.dev, "bytes_peak"));
    peak_free = rt_free.metric(dev_metric(free.dev, "bytes_peak"));
    EXPECT_EQ(rt_kept.metric("donation.bytes"), 0) << "held values were donated, step " << s;
    EXPECT_EQ(rt_free.metric("donation.bytes_last_graph"), free.state_bytes()) << "step " << s;
  }
  EXPECT_EQ(rt_free.metric("donation.buffers"), 12);  // 4 parameters, 8 moments, last step
  EXPECT_LE(peak_free + free.state_bytes(), peak_kept)
      << "donation should take the second copy of the state out of the step's peak";
  EXPECT_EQ(kept.params(), free.params());
  // The held values are last step's, intact.
  EXPECT_EQ(held[0].to_vector<float>().size(), 64u * 128u);
}

TEST(Donation, NeverDonatesATensorTheProgramStillHolds) {
  lt::Runtime rt = eager_runtime();
  lt::Device dev = rt.default_device();
  lt::Tensor p = lt::Tensor::from(dev, std::vector<float>{1, 2, 3, 4}, {4});
  lt::Tensor old = p;
  p = p * 2.0;
  lt::sync(dev);
  EXPECT_EQ(rt.metric("donation.buffers"), 0);
  EXPECT_EQ(old.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
  // Once nobody holds it, the same update donates it.
  old = lt::Tensor();
  p = p * 2.0;
  lt::sync(dev);
  EXPECT_EQ(rt.metric("donation.buffers"), 1);
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{4, 8, 12, 16}));
}

// `a` feeds a pending value the read below does not compute: that value still needs `a`.
TEST(Donation, NeverDonatesAnInputAnotherPendingValueReads) {
  lt::Runtime rt = eager_runtime();
  lt::Device dev = rt.default_device();
  lt::Tensor a = lt::Tensor::from(dev, std::vector<float>{1, 2, 3}, {3});
  lt::Tensor later = a + 1.0;  // pending, not part of the next read
  lt::Tensor now = a * 3.0;
  a = lt::Tensor();
  EXPECT_EQ(now.to_vector<float>(), (std::vector<float>{3, 6, 9}));
  EXPECT_EQ(rt.metric("donation.buffers"), 0);
  EXPECT_EQ(later.to_vector<float>(), (std::vector<float>{2, 3, 4}));
}

// An intermediate held from outside the graph keeps the input it was computed from.
TEST(Donation, NeverDonatesAnInputUnderAHeldIntermediate) {
  lt::Runtime rt = eager_runtime();
  lt::Device dev = rt.default_device();
  lt::Tensor a = lt::Tensor::from(dev, std::vector<float>{1, 2, 3}, {3});
  lt::Tensor mid = a.reshape({3, 1});
  lt::Tensor other = mid + 1.0;  // pending: reads mid, hence a
  lt::Tensor out = (a * 2.0).reshape({3});
  a = lt::Tensor();
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(rt.metric("donation.buffers"), 0);
  EXPECT_EQ(other.to_vector<float>(), (std::vector<float>{2, 3, 4}));
}

TEST(Donation, NeverDonatesABufferADlpackExportReads) {
  lt::Runtime rt = eager_runtime();
  lt::Device dev = rt.default_device();
  lt::Tensor p = lt::Tensor::from(dev, std::vector<float>{1, 2, 3, 4}, {4});
  DLManagedTensor* exported = p.to_dlpack();
  ASSERT_NE(exported, nullptr);
  p = p * 10.0;
  lt::sync(dev);
  EXPECT_EQ(rt.metric("donation.buffers"), 0);
  const float* data = static_cast<const float*>(exported->dl_tensor.data);
  EXPECT_EQ(std::vector<float>(data, data + 4), (std::vector<float>{1, 2, 3, 4}));
  exported->deleter(exported);
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{10, 20, 30, 40}));
}

// out0 is written before out1 reads `a`: the plugin declines that donation (its schedule would
// read an overwritten input), and the values are right.
TEST(Donation, PluginDeclinesAnOutputWrittenBeforeTheInputsLastRead) {
  lt::Runtime rt = eager_runtime();
  lt::Device dev = rt.default_device();
  lt::Tensor a = lt::Tensor::from(dev, std::vector<float>{1, 2, 3}, {3});
  lt::Tensor first = a * 2.0;
  lt::Tensor second = (a + 1.0).sum();
  a = lt::Tensor();
  lt::sync(dev);
  EXPECT_EQ(first.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(second.to_vector<float>(), (std::vector<float>{9}));
}

// With async_execution the queued job holds the inputs once more; that hold is not another
// reader, so the steps donate as synchronous ones do, with the same values.
TEST(Donation, AsyncExecutionDonatesTheSameAndGivesTheSameValues) {
  lt::Runtime rt_sync = eager_runtime();
  setenv("LT_ASYNC_EXECUTION", "1", 1);
  lt::Runtime rt_async = eager_runtime();
  unsetenv("LT_ASYNC_EXECUTION");
  Mlp a(rt_sync.default_device()), b(rt_async.default_device());
  for (int s = 0; s < 3; ++s) EXPECT_EQ(a.step().item<float>(), b.step().item<float>());
  EXPECT_EQ(rt_async.metric("donation.bytes_last_graph"), b.state_bytes());
  EXPECT_EQ(a.params(), b.params());
}

// A residual MLP block as a recompute region: the same loss and gradients bit for bit, with
// the block's forward traced again in the backward pass.
TEST(Recompute, RegionGivesTheSameGradientsFromRecomputedNodes) {
  lt::Runtime rt = eager_runtime();
  lt::Device dev = rt.default_device();
  lt::Tensor w = lt::random_normal(dev, {32, 32}, 5, 0.0, 0.2);
  lt::Tensor x = lt::random_normal(dev, {8, 32}, 6);
  w.materialize();
  x.materialize();
  lt::set_requires_grad(w);
  auto block = [&](const lt::Tensor& in) { return in + lt::matmul(in, w).tanh().gelu(); };
  auto run = [&](bool recompute) {
    rt.reset_metrics();
    lt::Tensor h = x;
    for (int l = 0; l < 3; ++l) h = recompute ? lt::recompute(block, h) : block(h);
    lt::Tensor loss = (h * h).mean();
    const double traced_forward = rt.metric("ops_traced");
    lt::backward(loss);
    const double traced_backward = rt.metric("ops_traced") - traced_forward;
    lt::Tensor g = lt::grad(w);
    lt::zero_grad(w);
    lt::sync(dev);
    return std::make_tuple(loss.item<float>(), g.to_vector<float>(), traced_backward);
  };
  auto [loss_kept, grad_kept, ops_kept] = run(false);
  auto [loss_re, grad_re, ops_re] = run(true);
  EXPECT_EQ(loss_kept, loss_re);
  EXPECT_EQ(grad_kept, grad_re);
  // matmul, tanh and gelu of every block are traced again (more where rules need outputs).
  EXPECT_GE(ops_re, ops_kept + 9);
}

TEST(Recompute, CheckpointedModuleMatchesThePlainModule) {
  lt::Runtime rt = eager_runtime();
  lt::Device dev = rt.default_device();
  lt::nn::Linear plain(dev, 16, 16, 7);
  lt::nn::Checkpointed<lt::nn::Linear> ck(dev, 16, 16, 7);
  lt::Tensor x = lt::random_normal(dev, {4, 16}, 8);
  auto grads = [&](auto& m) {
    for (lt::Tensor* p : m.parameters()) lt::set_requires_grad(*p);
    lt::Tensor loss = m(x).tanh().sum();
    lt::backward(loss);
    std::vector<std::vector<float>> g;
    for (lt::Tensor* p : m.parameters()) g.push_back(lt::grad(*p).to_vector<float>());
    return g;
  };
  EXPECT_EQ(grads(plain), grads(ck));
}

}  // namespace
