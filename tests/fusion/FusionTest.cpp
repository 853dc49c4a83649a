// FusionTest.cpp — the fusion planner groups hand-built graphs as the backends expect.
#include <gtest/gtest.h>

#include <string_view>

#include "lazytensor/lower/decompose.hpp"
#include "lazytensor/lower/fusion.hpp"
#include "lower_graphs.hpp"

namespace lt::fusion {
namespace {

using test::axes_attr;
using test::keepdims_attr;

int count_kind(const Plan& p, GroupKind k) {
  int c = 0;
  for (const Group& g : p.groups) c += g.kind == k;
  return c;
}

TEST(Fusion, ElementwiseChainOfEightIsOneGroup) {
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {64, 32}, {});
  int32_t y = g.add("input", LT_DTYPE_F32, {32}, {});
  int32_t v = g.add("exp", LT_DTYPE_F32, {64, 32}, {x});
  v = g.add("add", LT_DTYPE_F32, {64, 32}, {v, y});
  v = g.add("tanh", LT_DTYPE_F32, {64, 32}, {v});
  v = g.add("mul", LT_DTYPE_F32, {64, 32}, {v, x});
  v = g.add("sigmoid", LT_DTYPE_F32, {64, 32}, {v});
  v = g.add("sub", LT_DTYPE_F32, {64, 32}, {v, y});
  v = g.add("relu", LT_DTYPE_F32, {64, 32}, {v});
  v = g.add("neg", LT_DTYPE_F32, {64, 32}, {v});
  g.set_inputs({x, y});
  g.set_outputs({v});
  Plan p = plan(g.view());
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].kind, GroupKind::kElementwise);
  EXPECT_EQ(p.groups[0].nodes.size(), 8u);
  EXPECT_EQ(p.groups[0].inputs, (std::vector<int32_t>{x, y}));
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int32_t>{v}));
  EXPECT_EQ(p.group_of[x], -1);
}

TEST(Fusion, DiamondWithScalarBranchesMergesIntoOneGroup) {
  // sigmoid(x) * tanh(0.5 * x + 1) + x, scalars as rank-0 inputs
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {1024}, {});
  int32_t h = g.add("input", LT_DTYPE_F32, {}, {});
  int32_t one = g.add("input", LT_DTYPE_F32, {}, {});
  int32_t s = g.add("sigmoid", LT_DTYPE_F32, {1024}, {x});
  int32_t m = g.add("mul", LT_DTYPE_F32, {1024}, {h, x});
  int32_t a = g.add("add", LT_DTYPE_F32, {1024}, {m, one});
  int32_t t = g.add("tanh", LT_DTYPE_F32, {1024}, {a});
  int32_t p2 = g.add("mul", LT_DTYPE_F32, {1024}, {s, t});
  int32_t r = g.add("add", LT_DTYPE_F32, {1024}, {p2, x});
  g.set_inputs({x, h, one});
  g.set_outputs({r});
  Plan p = plan(g.view());
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].nodes.size(), 6u);
}

TEST(Fusion, DecomposedSoftmaxIsOneRowReductionGroup) {
  OwnedGraph g;
  const auto [x, m, s, e, z, d] = test::add_decomposed_softmax(g, 8, 16);
  g.set_inputs({x});
  g.set_outputs({d});
  Plan p = plan(g.view());
  ASSERT_LE(p.groups.size(), 2u);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].kind, GroupKind::kRowReduction);
  EXPECT_EQ(p.groups[0].domain, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(p.groups[0].reduce_axes, (std::vector<int64_t>{1}));
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int32_t>{d}));
}

// A backend that declines softmax gets the core's decomposition, which plans as one row
// reduction (max, exp, sum, divide over each row).
TEST(Fusion, DecomposedSoftmaxPlansToOneRowReduction) {
  OwnedGraph g;
  lt_attr axis{"axis", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr};
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 10}, {});
  int32_t s = g.add("softmax", LT_DTYPE_F32, {4, 10}, {x}, &axis, 1);
  g.set_inputs({x});
  g.set_outputs({s});
  OwnedGraph ex;
  auto declines_softmax = [](const lt_graph& gr, size_t i) {
    return std::string_view(gr.nodes[i].op) != "softmax";
  };
  ASSERT_TRUE(lt::lower::decompose(g.view(), declines_softmax, &ex));
  const lt_graph& eg = ex.view();
  for (size_t i = 0; i < eg.num_nodes; ++i) EXPECT_STRNE(eg.nodes[i].op, "softmax");
  Plan p = plan(eg);
  EXPECT_LE(p.groups.size(), 2u);
  EXPECT_EQ(count_kind(p, GroupKind::kRowReduction), 1);
}

TEST(Fusion, LayerNormIsOneRowReductionGroup) {
  OwnedGraph g;
  int64_t ax = 1;
  lt_attr at[2] = {axes_attr(&ax, 1), keepdims_attr(1)};
  int32_t x = g.add("input", LT_DTYPE_F32, {8, 16}, {});
  int32_t gamma = g.add("input", LT_DTYPE_F32, {16}, {});
  int32_t eps = g.add("input", LT_DTYPE_F32, {}, {});
  int32_t mu = g.add("mean", LT_DTYPE_F32, {8, 1}, {x}, at, 2);
  int32_t d = g.add("sub", LT_DTYPE_F32, {8, 16}, {x, mu});
  int32_t d2 = g.add("mul", LT_DTYPE_F32, {8, 16}, {d, d});
  int32_t var = g.add("mean", LT_DTYPE_F32, {8, 1}, {d2}, at, 2);
  int32_t ve = g.add("add", LT_DTYPE_F32, {8, 1}, {var, eps});
  int32_t rs = g.add("rsqrt", LT_DTYPE_F32, {8, 1}, {ve});
  int32_t y = g.add("mul", LT_DTYPE_F32, {8, 16}, {d, rs});
  int32_t o = g.add("mul", LT_DTYPE_F32, {8, 16}, {y, gamma});
  int32_t ge = g.add("gelu", LT_DTYPE_F32, {8, 16}, {o});
  g.set_inputs({x, gamma, eps});
  g.set_outputs({ge});
  Plan p = plan(g.view());
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].kind, GroupKind::kRowReduction);
  EXPECT_EQ(p.groups[0].nodes.size(), 9u);
}

TEST(Fusion, MatmulBiasReluIsOpaqueGroupWithEpilogue) {
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {4, 8}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {8, 5}, {});
  int32_t bias = g.add("input", LT_DTYPE_F32, {5}, {});
  int32_t mm = g.add("matmul", LT_DTYPE_F32, {4, 5}, {a, b});
  int32_t ad = g.add("add", LT_DTYPE_F32, {4, 5}, {mm, bias});
  int32_t r = g.add("relu", LT_DTYPE_F32, {4, 5}, {ad});
  g.set_inputs({a, b, bias});
  g.set_outputs({r});
  Plan p = plan(g.view());
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].kind, GroupKind::kOpaque);
  EXPECT_EQ(p.groups[0].anchor, mm);
  EXPECT_EQ(p.groups[0].nodes, (std::vector<int32_t>{mm, ad, r}));
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int32_t>{r}));
}

TEST(Fusion, EpilogueDisabledKeepsMatmulAlone) {
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {4, 8}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {8, 5}, {});
  int32_t mm = g.add("matmul", LT_DTYPE_F32, {4, 5}, {a, b});
  int32_t r = g.add("relu", LT_DTYPE_F32, {4, 5}, {mm});
  g.set_inputs({a, b});
  g.set_outputs({r});
  Options o;
  o.epilogues = false;
  Plan p = plan(g.view(), o);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int32_t>{mm}));
  EXPECT_EQ(p.groups[1].inputs, (std::vector<int32_t>{mm}));
}

TEST(Fusion, BroadcastProducerIsNotRecomputed) {
  // exp(v) over [16] broadcast into [64,16]: the producer stays in its own group.
  OwnedGraph g;
  int32_t v = g.add("input", LT_DTYPE_F32, {16}, {});
  int32_t x = g.add("input", LT_DTYPE_F32, {64, 16}, {});
  int32_t e = g.add("exp", LT_DTYPE_F32, {16}, {v});
  int32_t a = g.add("add", LT_DTYPE_F32, {64, 16}, {x, e});
  g.set_inputs({v, x});
  g.set_outputs({a});
  Plan p = plan(g.view());
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int32_t>{e}));
}

TEST(Fusion, NodeUsedByTwoGroupsIsMaterialised) {
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 4}, {});
  int32_t w = g.add("input", LT_DTYPE_F32, {4, 4}, {});
  int32_t e = g.add("exp", LT_DTYPE_F32, {4, 4}, {x});
  int32_t mm = g.add("matmul", LT_DTYPE_F32, {4, 4}, {e, w});
  int32_t t = g.add("tanh", LT_DTYPE_F32, {4, 4}, {e});
  g.set_inputs({x, w});
  g.set_outputs({mm, t});
  Plan p = plan(g.view());
  const Group& ge = p.groups[p.group_of[e]];
  EXPECT_NE(std::find(ge.outputs.begin(), ge.outputs.end(), e), ge.outputs.end());
  EXPECT_NE(p.group_of[e], p.group_of[mm]);
}

TEST(Fusion, NoCycleThroughOpaqueGroup) {
  // a = exp(x); b = reshape(a) (opaque); c = add(a, b): c must not join a's group.
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {4, 4}, {});
  int32_t a = g.add("exp", LT_DTYPE_F32, {4, 4}, {x});
  int32_t b = g.add("permute", LT_DTYPE_F32, {4, 4}, {a});
  int32_t c = g.add("add", LT_DTYPE_F32, {4, 4}, {a, b});
  g.set_inputs({x});
  g.set_outputs({c});
  Plan p = plan(g.view());
  EXPECT_NE(p.group_of[a], p.group_of[c]);
  // Groups come in a valid order.
  EXPECT_LT(p.group_of[a], p.group_of[b]);
}

TEST(Fusion, DeepChainIsPlannedIteratively) {
  OwnedGraph g;
  int32_t v = g.add("input", LT_DTYPE_F32, {8}, {});
  g.set_inputs({v});
  for (int i = 0; i < 200000; ++i) v = g.add(i % 2 ? "exp" : "neg", LT_DTYPE_F32, {8}, {v});
  g.set_outputs({v});
  Options o;
  Plan p = plan(g.view(), o);
  EXPECT_EQ(p.groups.size(), (200000 + o.max_group_nodes - 1) / o.max_group_nodes);
}

TEST(Fusion, MalformedGraphThrows) {
  OwnedGraph g;
  g.add("input", LT_DTYPE_F32, {2}, {});
  g.add("neg", LT_DTYPE_F32, {2}, {5});
  EXPECT_THROW(plan(g.view()), std::invalid_argument);
}

TEST(Fusion, StructuralHashSeesShapesNotIdentity) {
  auto make = [](int64_t n) {
    OwnedGraph g;
    int32_t x = g.add("input", LT_DTYPE_F32, {n}, {});
    int32_t y = g.add("exp", LT_DTYPE_F32, {n}, {x});
    g.set_inputs({x});
    g.set_outputs({y});
    return g;
  };
  OwnedGraph a = make(4), b = make(4), c = make(5);
  EXPECT_EQ(structural_hash(a.view()), structural_hash(b.view()));
  EXPECT_NE(structural_hash(a.view()), structural_hash(c.view()));
}

lt_attr ints_attr(const char* name, const int64_t* v, size_t n) {
  return lt_attr{name, LT_ATTR_INTS, 0, 0.0, v, n, nullptr};
}

// LSTM gate split: with index maps the four slices join the gate kernel; without, they stay
// opaque (the default, for backends that do not lower slices).
TEST(Fusion, IndexMapSlicesJoinTheirConsumersKernel) {
  OwnedGraph g;
  int32_t a = g.add("input", LT_DTYPE_F32, {8, 40}, {});
  int32_t c = g.add("input", LT_DTYPE_F32, {8, 10}, {});
  int32_t gates = g.add("tanh", LT_DTYPE_F32, {8, 40}, {a});
  int64_t steps[2] = {1, 1};
  int64_t starts[4][2] = {{0, 0}, {0, 10}, {0, 20}, {0, 30}};
  int32_t s[4];
  for (int k = 0; k < 4; ++k) {
    lt_attr at[2] = {ints_attr("starts", starts[k], 2), ints_attr("steps", steps, 2)};
    s[k] = g.add("slice", LT_DTYPE_F32, {8, 10}, {gates}, at, 2);
  }
  int32_t v = g.add("mul", LT_DTYPE_F32, {8, 10}, {s[0], s[1]});
  v = g.add("add", LT_DTYPE_F32, {8, 10}, {v, s[2]});
  v = g.add("mul", LT_DTYPE_F32, {8, 10}, {v, s[3]});
  v = g.add("add", LT_DTYPE_F32, {8, 10}, {v, c});
  g.set_inputs({a, c});
  g.set_outputs({v});
  Options o;
  o.index_maps = true;
  Plan p = plan(g.view(), o);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.group_of[gates], 0);
  EXPECT_EQ(p.groups[0].outputs, (std::vector<int32_t>{gates}));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(p.group_of[s[k]], 1);
  EXPECT_EQ(p.groups[1].inputs, (std::vector<int32_t>{c, gates}));
  EXPECT_EQ(count_kind(plan(g.view()), GroupKind::kOpaque), 4);
}

// A same-shape slice (a reversal) must never share a group with its operand: it reads the
// operand at other indices.
TEST(Fusion, IndexMapNeverFusesWithItsOperand) {
  OwnedGraph g;
  int32_t x = g.add("input", LT_DTYPE_F32, {16}, {});
  int32_t e = g.add("exp", LT_DTYPE_F32, {16}, {x});
  int64_t start = 15, step = -1;
  lt_attr at[2] = {ints_attr("starts", &start, 1), ints_attr("steps", &step, 1)};
  int32_t r = g.add("slice", LT_DTYPE_F32, {16}, {e}, at, 2);
  int32_t y = g.add("add", LT_DTYPE_F32, {16}, {e, r});
  g.set_inputs({x});
  g.set_outputs({y});
  Options o;
  o.index_maps = true;
  Plan p = plan(g.view(), o);
  EXPECT_NE(p.group_of[e], p.group_of[r]);
  EXPECT_GE(p.group_of[y], 0);
}

}  // namespace
}  // namespace lt::fusion
