// LoopKernelTest.cpp — the loop-level schedule of a fused kernel
// (lazytensor/lower/loop_kernel.hpp): kept and reduced dims, roles, reduction phases, per-row nodes
// and output roles, on the kernel steps the planner makes for hand-built graphs.
#include <gtest/gtest.h>

#include "lazytensor/lower/kernel_plan.hpp"
#include "lazytensor/lower/loop_kernel.hpp"

namespace lt::lower {
namespace {

using fusion::Role;
using V = std::vector<int32_t>;

lt_attr axes_attr(const int64_t* axes, size_t n) {
  return lt_attr{"axes", LT_ATTR_INTS, 0, 0.0, axes, n, nullptr};
}
lt_attr keepdims_attr(int64_t k) {
  return lt_attr{"keepdims", LT_ATTR_INT, k, 0.0, nullptr, 0, nullptr};
}

// The planner's only kernel step of `g` (for gpu_opencl, which fuses any size).
Step only_kernel(OwnedGraph& g) {
  KernelPlan p = plan_kernels(g.view(), *builtin_kernel_target("gpu_opencl"));
  EXPECT_EQ(p.steps.size(), 1u);
  return p.steps.at(0);
}

TEST(LoopKernel, SoftmaxRunsMaxThenSumAsTwoPhasesAndStoresTheQuotientOverTheRow) {
  OwnedGraph g;
  int64_t ax = 1;
  lt_attr at[2] = {axes_attr(&ax, 1), keepdims_attr(1)};
  int32_t x = g.add("input", LT_DTYPE_F32, {8, 16}, {});
  int32_t m = g.add("max", LT_DTYPE_F32, {8, 1}, {x}, at, 2);
  int32_t s = g.add("sub", LT_DTYPE_F32, {8, 16}, {x, m});
  int32_t e = g.add("exp", LT_DTYPE_F32, {8, 16}, {s});
  int32_t z = g.add("sum", LT_DTYPE_F32, {8, 1}, {e}, at, 2);
  int32_t r = g.add("div", LT_DTYPE_F32, {8, 1}, {z, z});  // per row, after the sum
  int32_t d = g.add("div", LT_DTYPE_F32, {8, 16}, {e, z});
  g.set_inputs({x});
  g.set_outputs({d, r});
  LoopKernel k = schedule_loops(g.view(), only_kernel(g));
  EXPECT_EQ(k.kept, (std::vector<int64_t>{8}));
  EXPECT_EQ(k.reduced, (std::vector<int64_t>{16}));
  EXPECT_EQ(k.is_reduced, (std::vector<char>{0, 1}));
  EXPECT_EQ(k.rows(), 8);
  EXPECT_EQ(k.row_length(), 16);
  EXPECT_EQ(k.reductions, (V{m, z}));
  ASSERT_EQ(k.phases.size(), 2u);
  EXPECT_EQ(k.phases[0], V{m});
  EXPECT_EQ(k.phases[1], V{z});
  EXPECT_EQ(k.reductions_by_phase(), (V{m, z}));
  EXPECT_EQ(k.level(s), 1);
  EXPECT_EQ(k.level(d), 2);
  EXPECT_EQ(k.role(m), Role::kReducedKeep);
  EXPECT_EQ(k.role(e), Role::kFull);
  ASSERT_EQ(k.row_nodes.size(), 3u);
  EXPECT_TRUE(k.row_nodes[0].empty());
  EXPECT_TRUE(k.row_nodes[1].empty());
  EXPECT_EQ(k.row_nodes[2], V{r});  // known once the second pass is done
  EXPECT_EQ(k.full_outputs, V{d});
  EXPECT_EQ(k.row_outputs, V{r});
  EXPECT_FALSE(k.in_kernel(x));
  EXPECT_EQ(k.position(x), -1);
}

// softmax's exp(x - max) over rows of `width` floats, as the core decomposes it.
struct Softmax {
  OwnedGraph g;
  int32_t x, m, e, z, d;
  explicit Softmax(int64_t width) {
    int64_t ax = 1;
    lt_attr at[2] = {axes_attr(&ax, 1), keepdims_attr(1)};
    x = g.add("input", LT_DTYPE_F32, {8, width}, {});
    m = g.add("max", LT_DTYPE_F32, {8, 1}, {x}, at, 2);
    int32_t bm = g.add("broadcast_to", LT_DTYPE_F32, {8, width}, {m});
    int32_t s = g.add("sub", LT_DTYPE_F32, {8, width}, {x, bm});
    e = g.add("exp", LT_DTYPE_F32, {8, width}, {s});
    z = g.add("sum", LT_DTYPE_F32, {8, 1}, {e}, at, 2);
    int32_t bz = g.add("broadcast_to", LT_DTYPE_F32, {8, width}, {z});
    d = g.add("div", LT_DTYPE_F32, {8, width}, {e, bz});
    g.set_inputs({x});
    g.set_outputs({d});
  }
};

TEST(LoopKernel, SoftmaxKeepsItsExponentialInTheOutputWhenARowFitsTheBudget) {
  Softmax sm(1024);
  LoopKernel k = schedule_loops(sm.g.view(), only_kernel(sm.g), {.stash_row_bytes = 4096});
  ASSERT_EQ(k.stashes.size(), 1u);
  EXPECT_EQ(k.stashes[0].output, sm.d);
  EXPECT_EQ(k.stashes[0].value, sm.e);
  // A row of 4 KB over a 2 KB budget, or no budget: computed again in the output pass.
  EXPECT_TRUE(
      schedule_loops(sm.g.view(), only_kernel(sm.g), {.stash_row_bytes = 2048}).stashes.empty());
  EXPECT_TRUE(schedule_loops(sm.g.view(), only_kernel(sm.g)).stashes.empty());
}

TEST(LoopKernel, CheapOrUnreadLastPhaseValuesAreNotStashed) {
  OwnedGraph g;
  int64_t ax = 1;
  lt_attr at[2] = {axes_attr(&ax, 1), keepdims_attr(1)};
  int32_t x = g.add("input", LT_DTYPE_F32, {8, 64}, {});
  int32_t sq = g.add("mul", LT_DTYPE_F32, {8, 64}, {x, x});  // no transcendental: cheap
  int32_t q = g.add("sum", LT_DTYPE_F32, {8, 1}, {sq}, at, 2);
  int32_t bq = g.add("broadcast_to", LT_DTYPE_F32, {8, 64}, {q});
  int32_t y = g.add("div", LT_DTYPE_F32, {8, 64}, {sq, bq});
  int32_t e = g.add("exp", LT_DTYPE_F32, {8, 64}, {x});
  int32_t s = g.add("sum", LT_DTYPE_F32, {8, 1}, {e}, at, 2);
  int32_t bs = g.add("broadcast_to", LT_DTYPE_F32, {8, 64}, {s});
  int32_t w = g.add("mul", LT_DTYPE_F32, {8, 64}, {x, bs});  // reads the sum, not exp(x)
  g.set_inputs({x});
  g.set_outputs({y, w});
  const std::vector<int64_t> domain{8, 64}, axes{1};
  LoopKernel k = schedule_loops(g.view(), V{sq, q, bq, y, e, s, bs, w}, V{y, w}, domain, axes,
                                {.stash_row_bytes = 1 << 16});
  ASSERT_EQ(k.phases.size(), 1u);
  EXPECT_TRUE(k.stashes.empty());
}

TEST(LoopKernel, IndependentReductionsShareOnePhaseAndReducedDropOutputsArePerRow) {
  OwnedGraph g;
  int64_t ax[2] = {0, 2};
  lt_attr at[2] = {axes_attr(ax, 2), keepdims_attr(0)};
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 6, 8}, {});
  int32_t sq = g.add("mul", LT_DTYPE_F32, {4, 6, 8}, {x, x});
  int32_t s = g.add("sum", LT_DTYPE_F32, {6}, {x}, at, 2);
  int32_t q = g.add("sum", LT_DTYPE_F32, {6}, {sq}, at, 2);
  g.set_inputs({x});
  g.set_outputs({s, q});
  const std::vector<int64_t> domain{4, 6, 8}, axes{0, 2};
  LoopKernel k = schedule_loops(g.view(), V{sq, s, q}, V{s, q}, domain, axes);
  EXPECT_EQ(k.kept, (std::vector<int64_t>{6}));
  EXPECT_EQ(k.reduced, (std::vector<int64_t>{4, 8}));
  ASSERT_EQ(k.phases.size(), 1u);
  EXPECT_EQ(k.phases[0], (V{s, q}));
  EXPECT_EQ(k.role(s), Role::kReducedDrop);
  EXPECT_EQ(k.row_outputs, (V{s, q}));
  EXPECT_TRUE(k.full_outputs.empty());
}

TEST(LoopKernel, ElementwiseKernelHasNoPhasesAndEveryOutputIsFull) {
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {32, 64}, {});
  int32_t e = g.add("exp", LT_DTYPE_F32, {32, 64}, {a});
  int32_t n = g.add("neg", LT_DTYPE_F32, {32, 64}, {e});
  g.set_inputs({a});
  g.set_outputs({e, n});
  LoopKernel k = schedule_loops(g.view(), only_kernel(g));
  EXPECT_TRUE(k.reduced.empty());
  EXPECT_EQ(k.kept, (std::vector<int64_t>{32, 64}));
  EXPECT_TRUE(k.phases.empty());
  ASSERT_EQ(k.row_nodes.size(), 1u);
  EXPECT_TRUE(k.row_nodes[0].empty());
  EXPECT_EQ(k.full_outputs, (V{e, n}));
  EXPECT_EQ(k.level(n), 0);
}

}  // namespace
}  // namespace lt::lower
