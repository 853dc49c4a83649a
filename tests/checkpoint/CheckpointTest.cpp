// CheckpointTest.cpp — lt::save_checkpoint / lt::load_checkpoint with nn modules and
// optimizers: names in the file, refusal of mismatching files with the module and optimizer
// left bit-identical, and a resumed AdamW run that matches an uninterrupted one bit for bit.
#include <gtest/gtest.h>

#include "checkpoint_test_util.hpp"
#include "lazytensor/checkpoint.hpp"

#include <nlohmann/json.hpp>

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
  EXPECT_EQ(ck.info("optim.v.2").shape, (std::vector<int64_t>{4, 16}));  // fc2.weight's: [out, in]
  EXPECT_EQ(ck.metadata("lt.format"), "2");
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
  // (with the format save_checkpoint writes: without it they would read as format 1)
  lt::save(dir.file("partial.safetensors"), partial, {{"lt.format", "2"}});
  lt::save(dir.file("extra.safetensors"), extra, {{"lt.format", "2"}});
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
       {"'fc1.weight' has shape [32,8] in the file but [16,8] in the module",
        "'fc2.weight' has shape [4,32]"}},
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

// Issue #28: nn::Linear stores its weight [out, in] like PyTorch since checkpoint format 2
// (metadata "lt.format" = "2"). A format-1 file (no "lt.format", Linear weights and their Adam
// moments stored [in, out], as lt::save_checkpoint wrote them before) still loads, converted
// once, and training continues exactly as from a format-2 file of the same state.
TEST(ModuleCheckpoint, Format1FilesWithInOutLinearWeightsLoadConverted) {
  ScratchDir dir;
  Mlp source(8, 16, 4, 1);
  lt::optim::AdamW source_opt(source.parameters(), 1e-2);
  const lt::optim::WarmupCosine schedule{1e-2, 0, 10, 0.0};
  for (int64_t s = 0; s < 2; ++s) train_step(source, source_opt, schedule, s);
  EXPECT_EQ(source.fc1.weight.shape(), (std::vector<int64_t>{16, 8}));  // [out, in]
  lt::save_checkpoint(dir.file("v2.safetensors"), source, &source_opt);
  EXPECT_EQ(lt::Checkpoint(dir.file("v2.safetensors")).metadata("lt.format").value_or(""), "2");

  // The same state as the old writer laid it out: weights (parameters 0 and 2) and their
  // moments transposed, no "lt.format".
  std::vector<std::pair<std::string, lt::Tensor>> v1;
  for (auto& [name, p] : source.named_parameters())
    v1.emplace_back(name, name.ends_with(".weight") ? p->t().materialize() : *p);
  for (auto& [name, t] : source_opt.named_state()) {
    const bool weight_state = name.ends_with(".0") || name.ends_with(".2");
    v1.emplace_back("optim." + name, weight_state ? t.t().materialize() : t);
  }
  lt::save(dir.file("v1.safetensors"), v1, {{"lt.optimizer", source_opt.name()}});
  EXPECT_EQ(lt::Checkpoint(dir.file("v1.safetensors")).info("fc1.weight").shape,
            (std::vector<int64_t>{8, 16}));

  Mlp from_v1(8, 16, 4, 9), from_v2(8, 16, 4, 9);
  lt::optim::AdamW opt_v1(from_v1.parameters(), 1e-2), opt_v2(from_v2.parameters(), 1e-2);
  lt::load_checkpoint(dir.file("v1.safetensors"), from_v1, &opt_v1);
  lt::load_checkpoint(dir.file("v2.safetensors"), from_v2, &opt_v2);
  auto pa = from_v1.named_parameters(), pb = source.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].second->shape(), pb[i].second->shape()) << pa[i].first;
    EXPECT_EQ(pa[i].second->to_bytes(), pb[i].second->to_bytes()) << pa[i].first;
    EXPECT_TRUE(lt::requires_grad(*pa[i].second)) << pa[i].first;
  }
  auto sa = opt_v1.named_state(), sb = source_opt.named_state();
  for (size_t i = 0; i < sa.size(); ++i)
    EXPECT_EQ(sa[i].second.to_bytes(), sb[i].second.to_bytes()) << sa[i].first;
  for (int64_t s = 2; s < 4; ++s) {
    const float a = train_step(from_v1, opt_v1, schedule, s);
    const float b = train_step(from_v2, opt_v2, schedule, s);
    EXPECT_EQ(a, b) << "step " << s;
  }

  // A format from the future is refused, naming it.
  lt::save(dir.file("v3.safetensors"), v1, {{"lt.optimizer", "AdamW"}, {"lt.format", "3"}});
  auto err = catch_error([&] { lt::load_checkpoint(dir.file("v3.safetensors"), from_v1); });
  ASSERT_TRUE(err.thrown);
  EXPECT_EQ(err.code, LT_STATUS_UNSUPPORTED);
  EXPECT_TRUE(contains(err.message, "checkpoint format '3'")) << err.message;
}

}  // namespace

namespace {

// Issue #28: a state dict PyTorch saved (here: the file torch_state_dict_gen.cpp writes in
// PyTorch's names and layout) loads by name into the same module tree, and the module then
// computes what PyTorch computes.
TEST(TorchStateDict, LoadsByNameIntoTheSameModuleTree) {
  lt::nn::Sequential net;
  net.emplace<lt::nn::Linear>(cpu(), 3, 4, 1);
  net.emplace<lt::nn::LayerNorm>(cpu(), 4);
  net.emplace<lt::nn::ReLU>();
  net.emplace<lt::nn::Linear>(cpu(), 4, 2, 2);
  std::vector<std::string> names;
  for (auto& [name, t] : net.torch_named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "3.weight",
                                             "3.bias"}));
  lt::load_state_dict(LT_TORCH_STATE_DICT, net);
  for (lt::Tensor* p : net.parameters()) EXPECT_TRUE(lt::requires_grad(*p));

  lt::Checkpoint ck(LT_TORCH_STATE_DICT);
  auto floats = [](const std::string& json) {
    return nlohmann::json::parse(json).get<std::vector<double>>();
  };
  std::vector<double> x = floats(ck.metadata("input").value()),
                      want = floats(ck.metadata("output").value());
  std::vector<float> xf(x.begin(), x.end());
  std::vector<float> got = net(lt::Tensor::from(cpu(), xf, {2, 3})).to_vector<float>();
  EXPECT_TRUE(lt::test::all_close(got, want, 1e-5));

  // A module tree that does not match is refused with every problem named, nothing assigned.
  lt::nn::Sequential other;
  auto& first = other.emplace<lt::nn::Linear>(cpu(), 3, 5, 1);
  other.emplace<lt::nn::ReLU>();
  const auto before = first.weight.to_bytes();
  auto err = catch_error([&] { lt::load_state_dict(LT_TORCH_STATE_DICT, other); });
  ASSERT_TRUE(err.thrown);
  EXPECT_EQ(err.code, LT_STATUS_SHAPE_MISMATCH) << err.message;
  EXPECT_TRUE(contains(err.message, "'0.weight' has shape [4,3] in the file but [5,3]"))
      << err.message;
  EXPECT_TRUE(contains(err.message, "unexpected tensor '3.weight'")) << err.message;
  EXPECT_EQ(first.weight.to_bytes(), before);
}

}  // namespace
