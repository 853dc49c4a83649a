// Tests of lt::lower::reduce_formula: the one description of how a reduction accumulates, which
// cpu_jit renders as LLVM IR and c_expr as C text: each identity is neutral for its combining
// primitive, and the table covers exactly the reductions a code generator accumulates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "lazytensor/lower/ops.hpp"
#include "lazytensor/lower/reduce_formula.hpp"

namespace {

using lt::lower::reduce_formula;
using lt::lower::ReduceFormula;

// The primitives' values on doubles, NaN aside (docs/ops.md: add, maximum, minimum).
double apply(std::string_view combine, double acc, double x) {
  if (combine == "add") return acc + x;
  if (combine == "maximum") return std::max(acc, x);
  if (combine == "minimum") return std::min(acc, x);
  ADD_FAILURE() << "unexpected combining primitive " << combine;
  return NAN;
}

TEST(ReduceFormula, IdentityIsNeutralForItsCombiningPrimitive) {
  for (const ReduceFormula& f : lt::lower::kReduceFormulas)
    for (double x : {-1e300, -3.5, -0.0, 0.0, 1.0, 7e20, -HUGE_VAL, HUGE_VAL})
      EXPECT_EQ(apply(f.combine, f.identity, x), x) << f.op << " at " << x;
}

TEST(ReduceFormula, AccumulatesSumMeanMaxMinAndOnlyMeanDivides) {
  ASSERT_NE(reduce_formula("sum"), nullptr);
  EXPECT_EQ(reduce_formula("sum")->combine, "add");
  EXPECT_FALSE(reduce_formula("sum")->mean);
  ASSERT_NE(reduce_formula("mean"), nullptr);
  EXPECT_TRUE(reduce_formula("mean")->mean);
  ASSERT_NE(reduce_formula("max"), nullptr);
  EXPECT_EQ(reduce_formula("max")->identity, -INFINITY);
  ASSERT_NE(reduce_formula("min"), nullptr);
  EXPECT_EQ(reduce_formula("min")->combine, "minimum");
  EXPECT_EQ(reduce_formula("argmax"), nullptr);  // an index, not an accumulation: a host step
  EXPECT_EQ(reduce_formula("add"), nullptr);
}

TEST(ReduceFormula, EveryFormulaIsAReductionOfTheOpTableCombinedByAnElementwiseOp) {
  for (const ReduceFormula& f : lt::lower::kReduceFormulas) {
    const lt::lower::OpInfo* op = lt::lower::find_op(f.op);
    ASSERT_NE(op, nullptr) << f.op;
    EXPECT_EQ(op->category, lt::lower::Category::kReduction) << f.op;
    const lt::lower::OpInfo* combine = lt::lower::find_op(f.combine);
    ASSERT_NE(combine, nullptr) << f.combine;
    EXPECT_EQ(combine->category, lt::lower::Category::kElementwise) << f.combine;
  }
}

}  // namespace
