// KernelPlanTest.cpp — the one kernel planner (lazytensor/lower/kernel_plan.hpp): steps,
// buffers and the temporaries' arena for the in-tree targets, on hand-built graphs.
#include <gtest/gtest.h>

#include "lazytensor/lower/kernel_plan.hpp"

namespace lt::lower {
namespace {

const KernelTarget& cpu_jit() {
  return *builtin_kernel_target("cpu_jit");
}
const KernelTarget& gpu_opencl() {
  return *builtin_kernel_target("gpu_opencl");
}

lt_attr value_attr(double v) {
  return lt_attr{"value", LT_ATTR_FLOAT, 0, v, nullptr, 0, nullptr};
}

TEST(KernelPlan, CpuJitRunsMatmulOnTheHostAndItsEpilogueAsOneKernel) {
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {64, 64}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {64, 64}, {});
  int32_t bias = g.add("input", LT_DTYPE_F32, {64}, {});
  int32_t mm = g.add("matmul", LT_DTYPE_F32, {64, 64}, {a, b});
  int32_t bc = g.add("broadcast_to", LT_DTYPE_F32, {64, 64}, {bias});
  int32_t s = g.add("add", LT_DTYPE_F32, {64, 64}, {mm, bc});
  int32_t t = g.add("tanh", LT_DTYPE_F32, {64, 64}, {s});
  g.set_inputs({a, b, bias});
  g.set_outputs({t});
  KernelPlan p = plan_kernels(g.view(), cpu_jit());
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].kind, StepKind::kHost);
  EXPECT_EQ(p.steps[0].nodes, std::vector<int32_t>{mm});
  EXPECT_EQ(p.steps[1].kind, StepKind::kKernel);
  EXPECT_EQ(p.steps[1].outputs, std::vector<int32_t>{t});
  EXPECT_EQ(p.kernel_groups, 1u);
  EXPECT_TRUE(p.stored[mm]);  // the host step's result is read by the kernel
  EXPECT_FALSE(p.stored[s]);  // computed inside the kernel only
}

TEST(KernelPlan, CpuJitRunsGroupsUnder1024ElementsAsHostSteps) {
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {16, 16}, {});
  int32_t e = g.add("exp", LT_DTYPE_F32, {16, 16}, {x});
  int32_t n = g.add("neg", LT_DTYPE_F32, {16, 16}, {e});
  g.set_inputs({x});
  g.set_outputs({n});
  KernelPlan p = plan_kernels(g.view(), cpu_jit());
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].kind, StepKind::kHost);
  EXPECT_EQ(p.steps[1].kind, StepKind::kHost);
  EXPECT_TRUE(p.stored[e]);
  EXPECT_EQ(p.kernel_groups, 0u);
}

TEST(KernelPlan, GpuEvaluatesConstantsWhereReadExceptByMatmul) {
  OwnedGraph g;
  const lt_attr half = value_attr(0.5);
  int32_t x = g.add("input", LT_DTYPE_F32, {8, 8}, {});
  int32_t c = g.add("full", LT_DTYPE_F32, {8, 8}, {}, &half, 1);
  int32_t mm = g.add("matmul", LT_DTYPE_F32, {8, 8}, {x, c});
  int32_t k = g.add("full", LT_DTYPE_F32, {}, {}, &half, 1);
  int32_t m = g.add("matmul", LT_DTYPE_F32, {8, 8}, {mm, x});
  int32_t y = g.add("mul", LT_DTYPE_F32, {8, 8}, {m, k});
  g.set_inputs({x});
  g.set_outputs({y});
  KernelPlan p = plan_kernels(g.view(), gpu_opencl());
  EXPECT_TRUE(p.stored[c]);   // a matmul operand: read from a buffer
  EXPECT_FALSE(p.stored[k]);  // read by the epilogue: evaluated in the kernel
  EXPECT_TRUE(p.stored[mm]);
  for (const Step& s : p.steps) {
    EXPECT_EQ(s.kind, StepKind::kKernel);
    for (int32_t v : s.outputs) EXPECT_NE(v, k) << "a constant read only inline is not stored";
  }
}

TEST(KernelPlan, DropsGroupsNobodyReadsAndSplitsOnRequest) {
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 4}, {});
  int32_t mm = g.add("matmul", LT_DTYPE_F32, {4, 4}, {x, x});  // dead: nobody reads it
  int32_t e = g.add("exp", LT_DTYPE_F32, {4, 4}, {x});
  int32_t n = g.add("neg", LT_DTYPE_F32, {4, 4}, {e});
  g.set_inputs({x});
  g.set_outputs({n});
  KernelPlan p = plan_kernels(g.view(), gpu_opencl());
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_FALSE(p.stored[mm]);
  EXPECT_EQ(p.steps[0].nodes, (std::vector<int32_t>{e, n}));
  p.split(g.view(), 0);
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].kind, StepKind::kSplit);
  EXPECT_EQ(p.steps[0].outputs, std::vector<int32_t>{e});
  EXPECT_TRUE(p.stored[e]);
  EXPECT_EQ(p.split_groups, 1u);
  EXPECT_EQ(p.kernel_groups, 0u);
}

TEST(KernelPlan, TemporariesWhoseLiveRangesDoNotOverlapShareTheArena) {
  // A chain of four matmuls, one step each: t1 is read by the step writing t2 (they overlap),
  // but its last read comes before t3 is written, so t1 and t3 share bytes.
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {32, 32}, {});
  int32_t t1 = g.add("matmul", LT_DTYPE_F32, {32, 32}, {x, x});
  int32_t t2 = g.add("matmul", LT_DTYPE_F32, {32, 32}, {t1, x});
  int32_t t3 = g.add("matmul", LT_DTYPE_F32, {32, 32}, {t2, x});
  int32_t y = g.add("matmul", LT_DTYPE_F32, {32, 32}, {t3, x});
  g.set_inputs({x});
  g.set_outputs({y});
  KernelPlan p = plan_kernels(g.view(), gpu_opencl());
  ASSERT_EQ(p.steps.size(), 4u);
  std::vector<size_t> bytes(g.view().num_nodes, 32 * 32 * 4);
  ArenaLayout a = pack_temporaries(g.view(), p, bytes, 128);
  ASSERT_EQ(a.values, (std::vector<int32_t>{t1, t2, t3}));  // x and y are the caller's
  EXPECT_EQ(a.arena.bytes, 2u * 4096);                      // two live at a time, not three
  EXPECT_EQ(a.offset_of[t1], a.offset_of[t3]);
  EXPECT_NE(a.offset_of[t1], a.offset_of[t2]);
  for (size_t off : a.arena.offsets) EXPECT_EQ(off % 128, 0u);
}

TEST(KernelPlan, InlineAndReduceOpsComeFromTheOpTable) {
  for (const char* op : {"add", "where", "cast", "full", "arange", "random_unit", "reshape",
                         "permute", "slice", "concat", "pad", "gather", "broadcast_to"})
    EXPECT_TRUE(is_inline_primitive(op)) << op;
  for (const char* op : {"matmul", "scatter_add", "sum", "sigmoid", "softmax", "input", "nope"})
    EXPECT_FALSE(is_inline_primitive(op)) << op;
  for (const char* op : {"sum", "max", "min"}) EXPECT_TRUE(is_reduce_primitive(op)) << op;
  for (const char* op : {"mean", "argmax", "add"}) EXPECT_FALSE(is_reduce_primitive(op)) << op;
  EXPECT_EQ(builtin_kernel_target("cpu_eager"), nullptr);
}

}  // namespace
}  // namespace lt::lower
