// CheckpointTest.cpp — lt::save_checkpoint / lt::load_checkpoint with nn modules and
// optimizers: names in the file, refusal of mismatching files with the module and optimizer
// left bit-identical, and a resumed AdamW run that matches an uninterrupted one bit for bit.
#include <gtest/gtest.h>

#include "checkpoint_test_util.hpp"
#include "lazytensor/checkpoint.hpp"

namespace {

using lt::test::catch_error;
using lt::test::contains;
using lt::test::cpu;
using lt::test::ScratchDir;

struct Mlp : lt::nn::Module {
  Mlp(int64_t in, int64_t hidden, int64_t out, uint64_t seed)
      : fc1(cpu(), in, hidden, seed), fc2(cpu(), hidden, out, seed + 1) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    materialize();
  }
  lt::Tensor operator()(const lt::Tensor& x) const { return fc2(fc1(x).relu()); }
  lt::nn::Linear fc1, fc2;
};

// A module with one f64 parameter where Mlp has f32 ("fc1.weight").
struct Mlp64 : lt::nn::Module {
  Mlp64() {
    w = lt::zeros(cpu(), {4, 8}, lt::f64);
    b = lt::zeros(cpu(), {8});
    register_parameter("fc1.weight", w);
    register_parameter("fc1.bias", b);
  }
  lt::Tensor w, b;
};

// Everything a load could change: each parameter's handle and bytes, each state tensor's
// bytes, the step count.
struct Snapshot {
  std::vector<lt_tensor*> handles;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::string> state_names;
  std::vector<std::vector<uint8_t>> state_bytes;
  int64_t steps = -1;
  bool operator==(const Snapshot&) const = default;
};
Snapshot snapshot(lt::nn::Module& m, lt::optim::Optimizer* opt) {
  Snapshot s;
  for (auto& [name, p] : m.named_parameters()) {
    s.handles.push_back(p->get());
    s.bytes.push_back(p->to_bytes());
  }
  if (opt) {
    for (auto& [name, t] : opt->named_state()) {
      s.state_names.push_back(name);
      s.state_bytes.push_back(t.to_bytes());
    }
    s.steps = opt->steps();
  }
  return s;
}

// One training step on data derived from `step` alone (so two runs see the same batches).
float train_step(Mlp& model, lt::optim::AdamW& opt, const lt::optim::WarmupCosine& schedule,
                 int64_t step, lt::Tensor* norm_out = nullptr) {
  opt.set_lr(schedule(opt.steps()));
  lt::Tensor x = lt::random_normal(cpu(), {16, 8}, 1000 + static_cast<uint64_t>(step));
  lt::Tensor y = lt::random_normal(cpu(), {16, 4}, 5000 + static_cast<uint64_t>(step));
  lt::Tensor loss = lt::nn::mse_loss(model(x), y);
  lt::backward(loss);
  lt::Tensor norm = lt::optim::clip_grad_norm(model.parameters(), 0.5);
  opt.step();
  lt::sync(cpu());
  if (norm_out) *norm_out = norm;
  return loss.item<float>();
}

TEST(ModuleCheckpoint, StoresParametersAndOptimizerStateUnderTheirNames) {
  ScratchDir dir;
  Mlp model(8, 16, 4, 1);
  lt::optim::AdamW opt(model.parameters(), 1e-2);
  lt::optim::WarmupCosine schedule{1e-2, 2, 10, 1e-3};
  train_step(model, opt, schedule, 0);
  lt::save_checkpoint(dir.file("c.safetensors"), model, &opt, {{"run", "unit-test"}});

  lt::Checkpoint ck(dir.file("c.safetensors"));
  EXPECT_EQ(ck.names(), (std::vector<std::string>{
                            "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "optim.step",
                            "optim.m.0", "optim.m.1", "optim.m.2", "optim.m.3", "optim.v.0",
                            "optim.v.1", "optim.v.2", "optim.v.3"}));
  EXPECT_EQ(ck.metadata("lt.optimizer"), "AdamW");
  EXPECT_EQ(ck.metadata("run"), "unit-test");
  EXPECT_EQ(ck.tensor("optim.step", cpu()).item<int64_t>(), 1);
  EXPECT_EQ(ck.info("optim.v.2").shape, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(ck.tensor("fc2.bias", cpu()).to_bytes(), model.fc2.bias.to_bytes());

  auto err = catch_error([&] {
    lt::save_checkpoint(dir.file("d.safetensors"), model, &opt, {{"lt.optimizer", "x"}});
  });
  EXPECT_EQ(err.code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(err.message, "reserved")) << err.message;
}

TEST(ModuleCheckpoint, LoadsIntoAFreshModuleBitForBit) {
  ScratchDir dir;
  Mlp saved(8, 16, 4, 1);
  lt::save_checkpoint(dir.file("m.safetensors"), saved);
  Mlp fresh(8, 16, 4, 99);
  ASSERT_NE(fresh.fc1.weight.to_bytes(), saved.fc1.weight.to_bytes());
  lt::load_checkpoint(dir.file("m.safetensors"), fresh);
  auto a = saved.named_parameters(), b = fresh.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].second->to_bytes(), b[i].second->to_bytes()) << a[i].first;
    EXPECT_TRUE(lt::requires_grad(*b[i].second)) << b[i].first;
  }
  // A module-only load ignores optimizer state in the file.
  lt::optim::Adam opt(saved.parameters(), 1e-3);
  lt::save_checkpoint(dir.file("with_state.safetensors"), saved, &opt);
  lt::load_checkpoint(dir.file("with_state.safetensors"), fresh);
}

TEST(ModuleCheckpoint, MismatchingFilesLeaveModuleAndOptimizerUntouched) {
  ScratchDir dir;
  Mlp source(8, 16, 4, 1);
  lt::optim::AdamW source_opt(source.parameters(), 1e-2);
  train_step(source, source_opt, {1e-2, 0, 10, 0.0}, 0);
  lt::save_checkpoint(dir.file("good.safetensors"), source, &source_opt);
  lt::save_checkpoint(dir.file("no_state.safetensors"), source);
  lt::optim::Adam adam(source.parameters(), 1e-2);
  lt::save_checkpoint(dir.file("adam.safetensors"), source, &adam);
  Mlp wider(8, 32, 4, 1);
  lt::save_checkpoint(dir.file("wider.safetensors"), wider);
  Mlp64 f64_module;
  lt::save_checkpoint(dir.file("f64.safetensors"), f64_module);
  // Missing one parameter, and one extra tensor.
  std::vector<std::pair<std::string, lt::Tensor>> partial, extra;
  for (auto& [name, p] : source.named_parameters()) {
    if (name != "fc2.bias") partial.emplace_back(name, *p);
    extra.emplace_back(name, *p);
  }
  extra.emplace_back("fc3.weight", lt::zeros(cpu(), {2, 2}));
  lt::save(dir.file("partial.safetensors"), partial);
  lt::save(dir.file("extra.safetensors"), extra);
  // A corrupt copy of the good file.
  std::vector<uint8_t> bytes = lt::test::read_bytes(dir.file("good.safetensors"));
  bytes.resize(bytes.size() - 1);
  lt::test::write_bytes(dir.file("truncated.safetensors"), bytes);

  struct Case {
    const char* file;
    bool with_optimizer;
    lt_status_code code;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"wider.safetensors",
       false,
       LT_STATUS_SHAPE_MISMATCH,
       {"'fc1.weight' has shape [8,32] in the file but [8,16] in the module",
        "'fc2.weight' has shape [32,4]"}},
      {"f64.safetensors",
       false,
       LT_STATUS_DTYPE_MISMATCH,
       {"'fc1.weight' is f64 in the file but f32", "'fc2.weight' is missing"}},
      {"partial.safetensors", false, LT_STATUS_NOT_FOUND, {"module 'fc2.bias' is missing"}},
      {"extra.safetensors", false, LT_STATUS_INVALID_ARGUMENT, {"unexpected tensor 'fc3.weight'"}},
      {"no_state.safetensors", true, LT_STATUS_NOT_FOUND, {"no optimizer state"}},
      {"adam.safetensors", true, LT_STATUS_INVALID_ARGUMENT, {"Adam's, not AdamW's"}},
      {"truncated.safetensors", true, LT_STATUS_IO_ERROR, {"truncated"}},
  };
  Mlp target(8, 16, 4, 7);
  lt::optim::AdamW target_opt(target.parameters(), 1e-2);
  train_step(target, target_opt, {1e-2, 0, 10, 0.0}, 3);
  train_step(target, target_opt, {1e-2, 0, 10, 0.0}, 4);
  const Snapshot before = snapshot(target, &target_opt);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = dir.file(c.file);
    auto err = catch_error(
        [&] { lt::load_checkpoint(path, target, c.with_optimizer ? &target_opt : nullptr); });
    ASSERT_TRUE(err.thrown);
    EXPECT_EQ(err.code, c.code) << err.message;
    EXPECT_TRUE(contains(err.message, path)) << err.message;
    for (const auto& s : c.says) EXPECT_TRUE(contains(err.message, s)) << err.message;
    EXPECT_TRUE(snapshot(target, &target_opt) == before) << "the failed load changed something";
  }
  // And the good file does load (so the cases above failed for their stated reason).
  lt::load_checkpoint(dir.file("good.safetensors"), target, &target_opt);
  EXPECT_EQ(target_opt.steps(), 1);
  EXPECT_EQ(target.fc1.weight.to_bytes(), source.fc1.weight.to_bytes());
}

// 2N uninterrupted steps vs N steps, save, load into a fresh module and optimizer, N more: the
// last N losses and the final parameters are identical bit for bit on cpu_eager.
TEST(ModuleCheckpoint, ResumedTrainingMatchesUninterruptedTraining) {
  constexpr int64_t kN = 6;
  const lt::optim::WarmupCosine schedule{3e-2, 3, 2 * kN, 3e-3};
  ScratchDir dir;

  Mlp straight(8, 16, 4, 11);
  lt::optim::AdamW straight_opt(straight.parameters(), 1.0, 0.1);
  std::vector<float> straight_losses;
  bool clipped = false;
  for (int64_t s = 0; s < 2 * kN; ++s) {
    lt::Tensor norm;
    straight_losses.push_back(train_step(straight, straight_opt, schedule, s, &norm));
    clipped = clipped || norm.item<float>() > 0.5f;
  }
  EXPECT_TRUE(clipped) << "clip_grad_norm never engaged; the test would not cover it";

  std::vector<float> resumed_losses;
  {
    Mlp first(8, 16, 4, 11);
    lt::optim::AdamW first_opt(first.parameters(), 1.0, 0.1);
    for (int64_t s = 0; s < kN; ++s) train_step(first, first_opt, schedule, s);
    lt::save_checkpoint(dir.file("half.safetensors"), first, &first_opt);
  }
  Mlp second(8, 16, 4, 12345);  // different initial values: all must come from the file
  lt::optim::AdamW second_opt(second.parameters(), 1.0, 0.1);
  lt::load_checkpoint(dir.file("half.safetensors"), second, &second_opt);
  EXPECT_EQ(second_opt.steps(), kN);
  for (int64_t s = kN; s < 2 * kN; ++s)
    resumed_losses.push_back(train_step(second, second_opt, schedule, s));

  std::vector<float> tail(straight_losses.begin() + kN, straight_losses.end());
  EXPECT_EQ(resumed_losses, tail);
  EXPECT_LT(tail.back(), straight_losses.front());
  auto a = straight.named_parameters(), b = second.named_parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].second->to_bytes(), b[i].second->to_bytes()) << a[i].first;
}

}  // namespace
