// DecomposeTest.cpp — the decompose pass on each composite op's example graph: what a backend
// lacks becomes valid IR of what it has; a rewrite it can run none of is undone.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "lazytensor/lower/decompose.hpp"
#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/graph.hpp"

namespace {

using lt::lower::OwnedGraph;

bool is_composite(const lt_graph_node& n) {
  const auto* op = lt::lower::find_op(n.op);
  return op && op->composite;
}

// A backend that runs every primitive and no composite.
bool primitives_only(const lt_graph& g, size_t i) {
  return !is_composite(g.nodes[i]);
}

TEST(Decompose, EveryCompositeBecomesValidPrimitiveIr) {
  size_t composites = 0;
  for (uint16_t id = 1; id < lt::kNumBuiltinOps; ++id) {
    const auto& info = lt::lower::op_info(static_cast<lt::OpId>(id));
    if (!info.composite) continue;
    ++composites;
    OwnedGraph g = lt::lower::example_graph(info.id);
    OwnedGraph out;
    lt::lower::DecomposeReport report;
    ASSERT_TRUE(lt::lower::decompose(g.view(), primitives_only, &out, &report)) << info.name;
    const lt_graph& v = out.view();
    EXPECT_NO_THROW(lt::lower::validate(v)) << info.name;
    for (size_t i = 0; i < v.num_nodes; ++i)
      EXPECT_FALSE(is_composite(v.nodes[i])) << info.name << " left " << v.nodes[i].op;
    ASSERT_FALSE(report.decomposed.empty());
    EXPECT_EQ(report.decomposed.back(), info.name);  // the outermost finishes last
    ASSERT_EQ(report.supported.size(), v.num_nodes);
    // Inputs and outputs keep their meaning: same count, same descriptions.
    const lt_graph& orig = g.view();
    ASSERT_EQ(v.num_inputs, orig.num_inputs);
    ASSERT_EQ(v.num_outputs, 1u);
    const lt_graph_node& o = v.nodes[v.outputs[0]];
    const lt_graph_node& want = orig.nodes[orig.outputs[0]];
    EXPECT_EQ(o.dtype, want.dtype) << info.name;
    EXPECT_EQ(std::vector<int64_t>(o.shape, o.shape + o.rank),
              std::vector<int64_t>(want.shape, want.shape + want.rank))
        << info.name;
  }
  EXPECT_GE(composites, 13u);
}

TEST(Decompose, NestedCompositesAreDecomposedToo) {
  // softmax needs max/sum/exp/sub/div; with "div" lacking too nothing changes for div (a
  // primitive), but softmax itself is still decomposed because the rest runs natively.
  OwnedGraph g = lt::lower::example_graph(lt::kOpSoftmax);
  OwnedGraph out;
  auto no_div = [](const lt_graph& gr, size_t i) {
    return primitives_only(gr, i) && std::string_view(gr.nodes[i].op) != "div";
  };
  lt::lower::DecomposeReport report;
  ASSERT_TRUE(lt::lower::decompose(g.view(), no_div, &out, &report));
  const lt_graph& v = out.view();
  size_t unsupported = 0;
  for (size_t i = 0; i < v.num_nodes; ++i)
    if (report.supported[i] == 0) {
      ++unsupported;
      EXPECT_STREQ(v.nodes[i].op, "div");
    }
  EXPECT_EQ(unsupported, 1u);
}

TEST(Decompose, RewriteTheBackendRunsNoneOfIsUndone) {
  OwnedGraph g = lt::lower::example_graph(lt::kOpGelu);
  OwnedGraph out;
  auto nothing = [](const lt_graph&, size_t) { return false; };
  EXPECT_FALSE(lt::lower::decompose(g.view(), nothing, &out));
}

TEST(Decompose, EverythingSupportedLeavesTheGraphAlone) {
  OwnedGraph g = lt::lower::example_graph(lt::kOpConv2d);
  OwnedGraph out;
  auto all = [](const lt_graph&, size_t) { return true; };
  EXPECT_FALSE(lt::lower::decompose(g.view(), all, &out));
}

TEST(Decompose, ImplicitBroadcastsBecomeExplicitForABackendThatNeedsEqualShapes) {
  OwnedGraph g;
  g.add("input", LT_DTYPE_F32, {2, 3}, {});
  g.add("input", LT_DTYPE_F32, {3}, {});
  g.add("mul", LT_DTYPE_F32, {2, 3}, {0, 1});
  g.set_inputs({0, 1});
  g.set_outputs({2});
  // Elementwise only on operands of the output's shape; broadcast_to is fine.
  auto equal_shapes = [](const lt_graph& gr, size_t i) {
    const lt_graph_node& n = gr.nodes[i];
    for (size_t k = 0; k < n.num_operands; ++k) {
      const lt_graph_node& o = gr.nodes[n.operands[k]];
      if (o.rank != n.rank || !std::equal(o.shape, o.shape + o.rank, n.shape)) {
        return std::string_view(n.op) == "broadcast_to";
      }
    }
    return true;
  };
  OwnedGraph out;
  lt::lower::DecomposeReport report;
  ASSERT_TRUE(lt::lower::decompose(g.view(), equal_shapes, &out, &report));
  EXPECT_EQ(report.broadcasts, 1u);
  const lt_graph& v = out.view();
  EXPECT_NO_THROW(lt::lower::validate(v));
  std::multiset<std::string> ops;
  for (size_t i = 0; i < v.num_nodes; ++i) ops.insert(v.nodes[i].op);
  EXPECT_EQ(ops.count("broadcast_to"), 1u);
  for (size_t i = 0; i < v.num_nodes; ++i) EXPECT_EQ(report.supported[i] != 0, true) << i;
}

}  // namespace
