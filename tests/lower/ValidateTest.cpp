// ValidateTest.cpp — the one graph validator: every op's example passes; each kind of defect a
// kernel could be hurt by is refused with the right status and a message naming the node.
#include <gtest/gtest.h>

#include <string>

#include "lazytensor/lower/builder.hpp"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/graph.hpp"

namespace {

using lt::lower::Desc;
using lt::lower::OwnedGraph;

// Expects validate(g) to throw with `code` and a message containing `needle`.
void expect_refused(OwnedGraph& g, lt_status_code code, const std::string& needle) {
  try {
    lt::lower::validate(g.view());
    ADD_FAILURE() << "accepted a graph that should fail with: " << needle;
  } catch (const lt::lower::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// in0 f32 [2,3], in1 f32 [3]; node 2 = op(in0, in1) with the given output.
OwnedGraph binary(const char* op, lt_dtype out_dtype, lt::lower::Shape out) {
  OwnedGraph g;
  g.add("input", LT_DTYPE_F32, {2, 3}, {});
  g.add("input", LT_DTYPE_F32, {3}, {});
  g.add(op, out_dtype, std::move(out), {0, 1});
  g.set_inputs({0, 1});
  g.set_outputs({2});
  return g;
}

TEST(Validate, EveryOpsExampleIsValid) {
  for (uint16_t id = 1; id < lt::kNumBuiltinOps; ++id) {
    OwnedGraph g = lt::lower::example_graph(static_cast<lt::OpId>(id));
    EXPECT_NO_THROW(lt::lower::validate(g.view())) << lt::lower::op_info(lt::OpId(id)).name;
  }
}

TEST(Validate, BroadcastingBinaryIsValidAndWrongOutputIsNot) {
  OwnedGraph ok = binary("add", LT_DTYPE_F32, {2, 3});
  EXPECT_NO_THROW(lt::lower::validate(ok.view()));
  OwnedGraph bad_shape = binary("add", LT_DTYPE_F32, {2, 4});
  expect_refused(bad_shape, LT_STATUS_SHAPE_MISMATCH, "node 2 (add): output shape [2,4]");
  OwnedGraph bad_dtype = binary("add", LT_DTYPE_F64, {2, 3});
  expect_refused(bad_dtype, LT_STATUS_DTYPE_MISMATCH, "node 2 (add)");
  OwnedGraph cmp = binary("lt", LT_DTYPE_F32, {2, 3});
  expect_refused(cmp, LT_STATUS_DTYPE_MISMATCH, "output dtype must be bool");
}

TEST(Validate, StructuralDefectsNameTheNode) {
  OwnedGraph fwd;
  fwd.add("input", LT_DTYPE_F32, {2}, {});
  fwd.add("neg", LT_DTYPE_F32, {2}, {1});  // reads itself
  fwd.set_inputs({0});
  fwd.set_outputs({1});
  expect_refused(fwd, LT_STATUS_INVALID_ARGUMENT, "node 1 (neg): operand 0 refers to node 1");

  OwnedGraph unbound;
  unbound.add("input", LT_DTYPE_F32, {2}, {});
  unbound.add("neg", LT_DTYPE_F32, {2}, {0});
  unbound.set_outputs({1});
  expect_refused(unbound, LT_STATUS_INVALID_ARGUMENT, "input node 0 is not bound");

  OwnedGraph neg;
  neg.add("input", LT_DTYPE_F32, {2, -1}, {});
  neg.set_inputs({0});
  expect_refused(neg, LT_STATUS_SHAPE_MISMATCH, "negative dimension");

  OwnedGraph huge;
  huge.add("input", LT_DTYPE_F64, {int64_t{1} << 40, int64_t{1} << 30}, {});
  huge.set_inputs({0});
  expect_refused(huge, LT_STATUS_SHAPE_MISMATCH, "is too large");

  OwnedGraph dtype;
  dtype.add("input", static_cast<lt_dtype>(42), {2}, {});
  dtype.set_inputs({0});
  expect_refused(dtype, LT_STATUS_DTYPE_MISMATCH, "invalid dtype value 42");

  OwnedGraph out;
  out.add("input", LT_DTYPE_F32, {2}, {});
  out.set_inputs({0});
  out.set_outputs({3});
  expect_refused(out, LT_STATUS_INVALID_ARGUMENT, "output 0 refers to node 3");
}

TEST(Validate, OpRulesGuardWhatKernelsIndex) {
  // A slice reading past the end of its operand.
  OwnedGraph sl;
  sl.add("input", LT_DTYPE_F32, {4}, {});
  int64_t st[] = {3}, step[] = {2};
  lt_attr a[2] = {{"starts", LT_ATTR_INTS, 0, 0, st, 1, nullptr},
                  {"steps", LT_ATTR_INTS, 0, 0, step, 1, nullptr}};
  sl.add("slice", LT_DTYPE_F32, {2}, {0}, a, 2);
  sl.set_inputs({0});
  sl.set_outputs({1});
  expect_refused(sl, LT_STATUS_SHAPE_MISMATCH, "node 1 (slice): starts [3] steps [2]");

  // Reduction axes that are not sorted.
  OwnedGraph red;
  red.add("input", LT_DTYPE_F32, {2, 3}, {});
  int64_t axes[] = {1, 0};
  lt_attr ra[2] = {{"axes", LT_ATTR_INTS, 0, 0, axes, 2, nullptr},
                   {"keepdims", LT_ATTR_INT, 0, 0, nullptr, 0, nullptr}};
  red.add("sum", LT_DTYPE_F32, {}, {0}, ra, 2);
  red.set_inputs({0});
  red.set_outputs({1});
  expect_refused(red, LT_STATUS_INVALID_ARGUMENT, "must be sorted, unique");

  // Gather with float indices.
  OwnedGraph ga;
  ga.add("input", LT_DTYPE_F32, {4, 2}, {});
  ga.add("input", LT_DTYPE_F32, {3}, {});
  lt_attr ax{"axis", LT_ATTR_INT, 0, 0, nullptr, 0, nullptr};
  ga.add("gather", LT_DTYPE_F32, {3, 2}, {0, 1}, &ax, 1);
  ga.set_inputs({0, 1});
  ga.set_outputs({2});
  expect_refused(ga, LT_STATUS_DTYPE_MISMATCH, "indices dtype f32 is not i32/i64");

  // A missing required IR attribute.
  OwnedGraph pm;
  pm.add("input", LT_DTYPE_F32, {4, 2}, {});
  pm.add("permute", LT_DTYPE_F32, {2, 4}, {0});
  pm.set_inputs({0});
  pm.set_outputs({1});
  expect_refused(pm, LT_STATUS_INVALID_ARGUMENT, "attribute 'perm' is required");

  // matmul with mismatched inner dimensions.
  OwnedGraph mm;
  mm.add("input", LT_DTYPE_F32, {2, 3}, {});
  mm.add("input", LT_DTYPE_F32, {4, 5}, {});
  mm.add("matmul", LT_DTYPE_F32, {2, 5}, {0, 1});
  mm.set_inputs({0, 1});
  mm.set_outputs({2});
  expect_refused(mm, LT_STATUS_SHAPE_MISMATCH, "node 2 (matmul): shapes [2,3] x [4,5]");
}

TEST(Validate, CustomOpsGetStructuralChecksOnly) {
  OwnedGraph g;
  g.add("input", LT_DTYPE_F32, {2}, {});
  g.add("my.op", LT_DTYPE_I32, {7}, {0});
  g.set_inputs({0});
  g.set_outputs({1});
  EXPECT_NO_THROW(lt::lower::validate(g.view()));
}

TEST(Validate, ValidateNodeLooksAtTheNodeAndItsOperandsOnly) {
  OwnedGraph g = binary("add", LT_DTYPE_F32, {2, 3});
  g.add("neg", LT_DTYPE_F32, {9}, {2});  // wrong, but not the node asked about
  EXPECT_NO_THROW(lt::lower::validate_node(g.view(), 2));
  EXPECT_THROW(lt::lower::validate_node(g.view(), 3), lt::lower::Error);
}

}  // namespace
