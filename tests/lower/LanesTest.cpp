// LanesTest.cpp — lower::vector_rows (lazytensor/lower/lanes.hpp): which fused row kernels may
// compute a row in vectors along its last dim, from their dtypes, ops and reads, with
// c_expr::lane_wise (C-family vector types) as the generator's answer per op.
#include <gtest/gtest.h>

#include "lazytensor/lower/c_expr.hpp"
#include "lazytensor/lower/kernel_plan.hpp"
#include "lazytensor/lower/lanes.hpp"
#include "lower_graphs.hpp"

namespace lt::lower {
namespace {

using V = std::vector<int32_t>;
using test::add_strided_row_sum;
using test::axes_attr;
using test::ints_attr;
using test::keepdims_attr;
using test::StridedRowSum;

LoopKernel only_kernel(OwnedGraph& g) {
  KernelPlan p = plan_kernels(g.view(), *builtin_kernel_target("gpu_opencl"));
  EXPECT_EQ(p.steps.size(), 1u);
  return schedule_loops(g.view(), p.steps.at(0));
}

TEST(Lanes, SoftmaxRowsAreVectorsOfItsFloats) {
  OwnedGraph g;
  const auto n = test::add_decomposed_softmax(g, 32, 16);
  g.set_inputs({n.x});
  g.set_outputs({n.d});
  EXPECT_TRUE(vector_rows(g.view(), only_kernel(g), c_expr::lane_wise));
}

TEST(Lanes, AnOpTheVectorTypesLackDecidesOnlyWhereItIsEvaluatedOverTheRow) {
  const int64_t ax = 1;
  const lt_attr at[2] = {axes_attr(&ax, 1), keepdims_attr(1)};
  // sum(cast(i32 x)): the cast is evaluated per element of the row.
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_I32, {32, 16}, {});
  int32_t c = g.add("cast", LT_DTYPE_F32, {32, 16}, {x});
  int32_t s = g.add("sum", LT_DTYPE_F32, {32, 1}, {c}, at, 2);
  g.set_inputs({x});
  g.set_outputs({s});
  const LoopKernel k = only_kernel(g);
  EXPECT_FALSE(vector_rows(g.view(), k, c_expr::lane_wise));
  // The same kernel for a generator whose vectors convert and load i32: the predicate decides.
  auto with_casts = [](std::string_view op, lt_dtype d) {
    return op == "cast" || d == LT_DTYPE_I32 || c_expr::lane_wise(op, d);
  };
  EXPECT_TRUE(vector_rows(g.view(), k, with_casts));
  // cast(sum(f32 y)) to i32: the cast is per row (after the pass), so the row is still vectors.
  OwnedGraph h;
  int32_t y = h.add("input", LT_DTYPE_F32, {32, 16}, {});
  int32_t t = h.add("sum", LT_DTYPE_F32, {32, 1}, {y}, at, 2);
  int32_t i = h.add("cast", LT_DTYPE_I32, {32, 1}, {t});
  h.set_inputs({y});
  h.set_outputs({i});
  EXPECT_TRUE(vector_rows(h.view(), only_kernel(h), c_expr::lane_wise));
}

TEST(Lanes, ARowReadAcrossLanesOrNotLastIsNoVector) {
  // A slice stepping by 2 along the row: its lanes are not consecutive elements.
  OwnedGraph g;
  const StridedRowSum n = add_strided_row_sum(g, 32, 34, 16);
  g.set_inputs({n.x});
  g.set_outputs({n.s});
  const std::vector<int64_t> domain{32, 16}, axes{1};
  EXPECT_FALSE(vector_rows(g.view(), schedule_loops(g.view(), V{n.sl, n.s}, V{n.s}, domain, axes),
                           c_expr::lane_wise));
  // A sum over the first dim: the row is not the last dim.
  OwnedGraph h;
  const int64_t first = 0;
  lt_attr fa[2] = {axes_attr(&first, 1), keepdims_attr(0)};
  int32_t y = h.add("input", LT_DTYPE_F32, {16, 32}, {});
  int32_t c = h.add("sum", LT_DTYPE_F32, {32}, {y}, fa, 2);
  h.set_inputs({y});
  h.set_outputs({c});
  EXPECT_FALSE(vector_rows(h.view(), only_kernel(h), c_expr::lane_wise));
}

TEST(Lanes, CExprVectorsComputeFloatArithmeticAndMathLaneByLane) {
  for (const char* op : {"", "add", "div", "pow", "maximum", "exp", "tanh", "neg"}) {
    EXPECT_TRUE(c_expr::lane_wise(op, LT_DTYPE_F32)) << op;
    EXPECT_TRUE(c_expr::lane_wise(op, LT_DTYPE_F64)) << op;
  }
  for (const char* op : {"not", "lt", "eq", "and", "cast", "where", "gather", "permute"})
    EXPECT_FALSE(c_expr::lane_wise(op, LT_DTYPE_F32)) << op;
  for (lt_dtype d : {LT_DTYPE_I32, LT_DTYPE_I64, LT_DTYPE_BOOL, LT_DTYPE_BF16, LT_DTYPE_F16})
    EXPECT_FALSE(c_expr::lane_wise("add", d)) << d;
}

}  // namespace
}  // namespace lt::lower
