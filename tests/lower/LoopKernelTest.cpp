// LoopKernelTest.cpp — the loop-level schedule of a fused kernel
// (lazytensor/lower/loop_kernel.hpp): kept and reduced dims, roles, reduction phases, per-row nodes
// and output roles, and the loops with each buffer's access (offset and strides per coalesced
// loop; pad and concat windows, gather's clamped index, an anchored epilogue), on the kernel
// steps the planner makes for hand-built graphs.
#include <gtest/gtest.h>

#include "lazytensor/lower/kernel_plan.hpp"
#include "lazytensor/lower/loop_kernel.hpp"
#include "lower_graphs.hpp"

namespace lt::lower {
namespace {

using fusion::Role;
using V = std::vector<int32_t>;

using test::add_strided_row_sum;
using test::axes_attr;
using test::ints_attr;
using test::keepdims_attr;

// The planner's only kernel step of `g` (for gpu_opencl, which fuses any size).
Step only_kernel(OwnedGraph& g) {
  KernelPlan p = plan_kernels(g.view(), *builtin_kernel_target("gpu_opencl"));
  EXPECT_EQ(p.steps.size(), 1u);
  return p.steps.at(0);
}

TEST(LoopKernel, SoftmaxRunsMaxThenSumAsTwoPhasesAndStoresTheQuotientOverTheRow) {
  OwnedGraph g;
  const auto [x, m, s, e, z, d] = test::add_decomposed_softmax(g, 8, 16);
  int32_t r = g.add("div", LT_DTYPE_F32, {8, 1}, {z, z});  // per row, after the sum
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
    const test::DecomposedSoftmax sm = test::add_decomposed_softmax(g, 8, width, true);
    x = sm.x, m = sm.m, e = sm.e, z = sm.z, d = sm.d;
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

TEST(LoopKernel, ElementwiseReadsBroadcastAsStrideZeroAndLoopsCoalesceWhereEveryReadAllows) {
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 8, 16}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {16}, {});
  int32_t y = g.add("add", LT_DTYPE_F32, {4, 8, 16}, {x, b});
  g.set_inputs({x, b});
  g.set_outputs({y});
  const std::vector<int64_t> domain{4, 8, 16};
  LoopKernel k = schedule_loops(g.view(), V{y}, V{y}, domain, {});
  // x and y merge all three dims; the bias only the two it broadcasts over: loops [32, 16].
  EXPECT_EQ(k.loop_dims, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(k.outer_loops, 2u);
  ASSERT_EQ(k.accesses.size(), 3u);  // operands in order, then the output
  EXPECT_EQ(k.access(x, y), 0);
  EXPECT_EQ(k.access(b, y), 1);
  EXPECT_EQ(k.access(y, y), 2);
  EXPECT_EQ(k.access(x, x), -1);
  EXPECT_EQ(k.accesses[0].strides, (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(k.accesses[1].strides, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(k.accesses[2].strides, (std::vector<int64_t>{16, 1}));
  EXPECT_TRUE(k.affine);
  EXPECT_TRUE(k.dense_along(1));
  EXPECT_FALSE(k.dense_along(0));
}

TEST(LoopKernel, ARowSumOfAStridedSliceReadsThroughTheSliceAndStoresOncePerRow) {
  OwnedGraph g;
  const auto [x, sl, s] = add_strided_row_sum(g, 6, 16, 8);
  g.set_inputs({x});
  g.set_outputs({s});
  const std::vector<int64_t> domain{6, 8}, axes{1};
  LoopKernel k = schedule_loops(g.view(), V{sl, s}, V{s}, domain, axes);
  EXPECT_EQ(k.loop_dims, (std::vector<int64_t>{6, 8}));  // one kept loop, one reduced loop
  EXPECT_EQ(k.outer_loops, 1u);
  ASSERT_EQ(k.accesses.size(), 2u);
  const Access& read = k.accesses[k.access(x, sl)];
  EXPECT_EQ(read.offset, 1);  // x[r, 1 + 2c]
  EXPECT_EQ(read.strides, (std::vector<int64_t>{16, 2}));
  const Access& store = k.accesses[k.access(s, s)];  // a dropped reduced dim takes no index
  EXPECT_EQ(store.offset, 0);
  EXPECT_EQ(store.strides, (std::vector<int64_t>{1, 0}));
  EXPECT_FALSE(k.dense_along(1));  // the slice steps by 2 along the row
}

// A bias gradient (the sum over [batch, time] of [batch, time, width]) and a full-size output
// of the same kernel: one kept loop along which every read is contiguous, so the kernel runs as
// a column reduction (the kept loop innermost, accumulating in the output).
TEST(LoopKernel, ASumOverLeadingAxesIntoAContiguousKeptAxisIsAColumnReduction) {
  OwnedGraph g;
  const int64_t lead[2] = {0, 1};
  lt_attr at[2] = {axes_attr(lead, 2), keepdims_attr(0)};
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 6, 8}, {});
  int32_t sq = g.add("mul", LT_DTYPE_F32, {4, 6, 8}, {x, x});
  int32_t s = g.add("sum", LT_DTYPE_F32, {8}, {sq}, at, 2);
  int32_t m = g.add("max", LT_DTYPE_F32, {8}, {x}, at, 2);
  g.set_inputs({x});
  g.set_outputs({sq, s, m});
  const std::vector<int64_t> domain{4, 6, 8}, axes{0, 1};
  LoopKernel k = schedule_loops(g.view(), V{sq, s, m}, V{sq, s, m}, domain, axes);
  EXPECT_EQ(k.loop_dims, (std::vector<int64_t>{8, 24}));  // the kept loop, then [4, 6] merged
  EXPECT_EQ(k.outer_loops, 1u);
  EXPECT_EQ(k.accesses[k.access(x, sq)].strides, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(k.accesses[k.access(s, s)].strides, (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(k.dense_along(0));
  EXPECT_EQ(k.full_outputs, V{sq});
  EXPECT_TRUE(k.column_reduction);
  EXPECT_EQ(k.row_length(), 24);  // a mean's divisor
}

TEST(LoopKernel, RowSumsSecondPhasesPerRowValuesAndStridedKeptReadsAreNotColumnReductions) {
  const int64_t last = 2, lead[2] = {0, 1}, outer[2] = {0, 2};
  lt_attr row_at[2] = {axes_attr(&last, 1), keepdims_attr(0)};
  lt_attr lead_at[2] = {axes_attr(lead, 2), keepdims_attr(1)};
  lt_attr outer_at[2] = {axes_attr(outer, 2), keepdims_attr(0)};
  const std::vector<int64_t> domain{4, 6, 8};
  {  // the row sum: the kept loop steps by a row
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {4, 6, 8}, {});
    int32_t s = g.add("sum", LT_DTYPE_F32, {4, 6}, {x}, row_at, 2);
    g.set_inputs({x});
    g.set_outputs({s});
    EXPECT_FALSE(schedule_loops(g.view(), V{s}, V{s}, domain, {{2}}).column_reduction);
  }
  {  // x - mean over the leading axes: a second pass reads the reduction
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {4, 6, 8}, {});
    int32_t s = g.add("sum", LT_DTYPE_F32, {1, 1, 8}, {x}, lead_at, 2);
    int32_t b = g.add("broadcast_to", LT_DTYPE_F32, {4, 6, 8}, {s});
    int32_t d = g.add("sub", LT_DTYPE_F32, {4, 6, 8}, {x, b});
    g.set_inputs({x});
    g.set_outputs({s, d});
    LoopKernel k = schedule_loops(g.view(), V{s, b, d}, V{s, d}, domain, {{0, 1}});
    EXPECT_TRUE(k.dense_along(0));
    EXPECT_FALSE(k.column_reduction);
  }
  {  // a per-row value of the sum (its square root), stored once per kept index
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {4, 6, 8}, {});
    int32_t s = g.add("sum", LT_DTYPE_F32, {1, 1, 8}, {x}, lead_at, 2);
    int32_t r = g.add("sqrt", LT_DTYPE_F32, {1, 1, 8}, {s});
    g.set_inputs({x});
    g.set_outputs({r});
    EXPECT_FALSE(schedule_loops(g.view(), V{s, r}, V{r}, domain, {{0, 1}}).column_reduction);
  }
  {  // kept dim 1 of [4, 6, 8]: each kept index is 8 elements from the next
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {4, 6, 8}, {});
    int32_t s = g.add("sum", LT_DTYPE_F32, {6}, {x}, outer_at, 2);
    g.set_inputs({x});
    g.set_outputs({s});
    EXPECT_FALSE(schedule_loops(g.view(), V{s}, V{s}, domain, {{0, 2}}).column_reduction);
  }
}

TEST(LoopKernel, AnIndexCreationGetsAnIndexAccessAndAGatherMakesTheKernelNotAffine) {
  OwnedGraph g;
  const int64_t shape = 64;
  lt_attr aa[1] = {ints_attr("shape", &shape, 1)};
  int32_t seed = g.add("input", LT_DTYPE_I64, {}, {});
  int32_t u = g.add("random_uniform", LT_DTYPE_F32, {64}, {seed}, aa, 1);
  g.set_inputs({seed});
  g.set_outputs({u});
  LoopKernel k = schedule_loops(g.view(), V{u}, V{u}, std::vector<int64_t>{64}, {});
  ASSERT_EQ(k.accesses.size(), 3u);  // the seed (every index: stride 0), u's index, u's store
  EXPECT_EQ(k.accesses[k.access(seed, u)].strides, (std::vector<int64_t>{0}));
  ASSERT_GE(k.access(u, u, true), 0);
  EXPECT_TRUE(k.accesses[k.access(u, u, true)].index);
  EXPECT_EQ(k.accesses[k.access(u, u, true)].strides, (std::vector<int64_t>{1}));

  OwnedGraph h;
  int32_t table = h.add("input", LT_DTYPE_F32, {10, 8}, {});
  int32_t idx = h.add("input", LT_DTYPE_I64, {4}, {});
  int32_t row = h.add("gather", LT_DTYPE_F32, {4, 8}, {table, idx});
  int32_t e = h.add("exp", LT_DTYPE_F32, {4, 8}, {row});
  h.set_inputs({table, idx});
  h.set_outputs({e});
  LoopKernel gk = schedule_loops(h.view(), V{row, e}, V{e}, std::vector<int64_t>{4, 8}, {});
  EXPECT_FALSE(gk.affine);
  EXPECT_FALSE(gk.dense_along(1));
}

// pad reads its operand inside a window per padded dim and its fill outside: the window's
// coordinate is a loop's index, so the padded dim is never merged with its neighbour, while
// the unpadded dims still coalesce.
TEST(LoopKernel, APadReadIsValidInsideAWindowOnItsOwnLoopAndReadsTheFillOutside) {
  OwnedGraph g;
  const int64_t before[3] = {0, 0, 1}, after[3] = {0, 0, 2};
  const lt_attr pa[3] = {ints_attr("before", before, 3), ints_attr("after", after, 3),
                         lt_attr{"value", LT_ATTR_FLOAT, 0, -1.5, nullptr, 0, nullptr}};
  int32_t x = g.add("input", LT_DTYPE_F32, {2, 3, 4}, {});
  int32_t p = g.add("pad", LT_DTYPE_F32, {2, 3, 7}, {x}, pa, 3);
  int32_t y = g.add("exp", LT_DTYPE_F32, {2, 3, 7}, {p});
  g.set_inputs({x});
  g.set_outputs({y});
  LoopKernel k = schedule_loops(g.view(), V{p, y}, V{y}, std::vector<int64_t>{2, 3, 7}, {});
  EXPECT_FALSE(k.affine);  // cpu_jit renders only plain accesses
  EXPECT_EQ(k.loop_dims, (std::vector<int64_t>{6, 7}));
  const Access& read = k.accesses.at(k.access(x, p));
  EXPECT_EQ(read.offset, -1);  // x[r, c - 1]
  EXPECT_EQ(read.strides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(read.fill, -1.5);
  ASSERT_EQ(read.windows.size(), 1u);
  EXPECT_EQ(read.windows[0].coord, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(read.windows[0].lo, 1);
  EXPECT_EQ(read.windows[0].hi, 5);
  EXPECT_EQ(read.windows[0].extent, 7);
  EXPECT_FALSE(k.dense_along(1));
}

// concat reads each part through an access of its own, even the same buffer twice.
TEST(LoopKernel, EachConcatPartIsAWindowedAccessOfItsOperand) {
  OwnedGraph g;
  const lt_attr ca[1] = {lt_attr{"axis", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr}};
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 3}, {});
  int32_t c = g.add("concat", LT_DTYPE_F32, {4, 6}, {x, x}, ca, 1);
  g.set_inputs({x});
  g.set_outputs({c});
  LoopKernel k = schedule_loops(g.view(), V{c}, V{c}, std::vector<int64_t>{4, 6}, {});
  ASSERT_EQ(k.accesses.size(), 3u);  // two parts, then the output
  const Access &first = k.accesses[k.operand_access(c, 0)],
               &second = k.accesses[k.operand_access(c, 1)];
  EXPECT_EQ(first.operand, 0);
  EXPECT_EQ(second.operand, 1);
  EXPECT_EQ(first.strides, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(second.offset, -3);  // columns 3..5 read x[r, c - 3]
  ASSERT_EQ(first.windows.size(), 1u);
  ASSERT_EQ(second.windows.size(), 1u);
  EXPECT_EQ(first.windows[0].hi, 3);
  EXPECT_EQ(first.windows[0].lo, 0);
  EXPECT_EQ(second.windows[0].lo, 3);
  EXPECT_EQ(second.windows[0].hi, 6);
  EXPECT_EQ(k.loop_dims, (std::vector<int64_t>{4, 6}));  // never merged across the windows
  EXPECT_FALSE(k.affine);
}

// gather along axis 1 of [4, 5, 6] by a [2, 3] index: the data read walks dims 0 and 3 of the
// output and adds the clamped index, read by an access of its own over dims 1 and 2.
TEST(LoopKernel, AGatherReadAddsTheClampedIndexReadThroughItsOwnAccess) {
  OwnedGraph g;
  const lt_attr ga[1] = {lt_attr{"axis", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr}};
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 5, 6}, {});
  int32_t i = g.add("input", LT_DTYPE_I64, {2, 3}, {});
  int32_t t = g.add("gather", LT_DTYPE_F32, {4, 2, 3, 6}, {x, i}, ga, 1);
  g.set_inputs({x, i});
  g.set_outputs({t});
  LoopKernel k = schedule_loops(g.view(), V{t}, V{t}, std::vector<int64_t>{4, 2, 3, 6}, {});
  EXPECT_FALSE(k.affine);
  EXPECT_EQ(k.loop_dims, (std::vector<int64_t>{4, 6, 6}));  // the index dims merge
  const Access& index = k.accesses.at(k.operand_access(t, 1));
  const Access& data = k.accesses.at(k.operand_access(t, 0));
  EXPECT_EQ(index.buffer, i);
  EXPECT_EQ(index.strides, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(data.buffer, x);
  EXPECT_EQ(data.strides, (std::vector<int64_t>{30, 0, 1}));
  EXPECT_EQ(data.gather, k.operand_access(t, 1));
  EXPECT_EQ(data.gather_extent, 5);
  EXPECT_EQ(data.gather_stride, 6);
  EXPECT_EQ(index.gather, -1);
}

// A matmul's epilogue: the anchor's operands are its own kernel's business (no access), and
// the loops are the anchor's dims as they are, so the matmul kernel's coordinates index them.
TEST(LoopKernel, AnAnchoredEpilogueKeepsTheDomainDimsAsLoopsAndReadsNoAnchorOperand) {
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {8, 4}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {4, 16}, {});
  int32_t bias = g.add("input", LT_DTYPE_F32, {16}, {});
  int32_t m = g.add("matmul", LT_DTYPE_F32, {8, 16}, {a, b});
  int32_t y = g.add("add", LT_DTYPE_F32, {8, 16}, {m, bias});
  g.set_inputs({a, b, bias});
  g.set_outputs({y});
  LoopOptions anchored;
  anchored.anchor = m;
  LoopKernel k = schedule_loops(g.view(), V{m, y}, V{y}, std::vector<int64_t>{8, 16}, {}, anchored);
  EXPECT_EQ(k.loop_dims, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(k.access(a, m), -1);
  EXPECT_EQ(k.access(b, m), -1);
  EXPECT_EQ(k.accesses.at(k.access(bias, y)).strides, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(k.accesses.at(k.access(y, y)).strides, (std::vector<int64_t>{16, 1}));
  EXPECT_TRUE(k.affine);
  // Unanchored, the matmul's operands have no View: the kernel is not affine.
  EXPECT_FALSE(schedule_loops(g.view(), V{m, y}, V{y}, std::vector<int64_t>{8, 16}, {}).affine);
}

}  // namespace
}  // namespace lt::lower
