// OptimizerTest.cpp — lower::optimize's passes on hand-built graphs: what each rewrites, what it
// must leave alone (exact vs fast, recompute tags, custom ops, non-commutative ops), the mapping
// of inputs and outputs, constant folding through the host kernels, and the after-pass hook.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "lazytensor/host/steps.hpp"
#include "lazytensor/lower/builder.hpp"
#include "lazytensor/lower/gemm_layout.hpp"
#include "lazytensor/lower/optimize.hpp"

namespace {

using lt::lower::Builder;
using lt::lower::OptimizeOptions;
using lt::lower::OptLevel;
using lt::lower::OwnedGraph;
using lt::lower::Value;

// A graph under construction: inputs first, then what the test builds, outputs set at the end.
struct G {
  OwnedGraph g;
  Builder b{g};
  std::vector<int32_t> inputs;
  Value input(lt_dtype d, lt::lower::Shape s) {
    const Value v = g.add("input", d, std::move(s), {});
    inputs.push_back(v);
    return v;
  }
  const lt_graph& done(std::vector<int32_t> outputs) {
    g.set_inputs(inputs);
    g.set_outputs(std::move(outputs));
    return g.view();
  }
};

lt::lower::Optimized run(const lt_graph& g, OptLevel level = OptLevel::kExact,
                         std::vector<uint32_t> tags = {}) {
  static std::vector<uint32_t> keep;
  keep = std::move(tags);
  OptimizeOptions o;
  o.level = level;
  o.recompute_tags = keep;
  lt::lower::Optimized out = lt::lower::optimize(g, o);
  if (!out.changed) out.graph.borrow(g);  // what the core compiles then
  return out;
}

size_t count_op(lt::lower::Optimized& o, const char* op) {
  const lt_graph& g = o.graph.view();
  size_t n = 0;
  for (size_t i = 0; i < g.num_nodes; ++i) n += std::strcmp(g.nodes[i].op, op) == 0;
  return n;
}

const lt_graph_node& output(lt::lower::Optimized& o, size_t k) {
  const lt_graph& g = o.graph.view();
  return g.nodes[g.outputs[k]];
}

TEST(OptimizerCse, MergesEqualNodesAndCommutedOperands) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {4}), y = t.input(LT_DTYPE_F32, {4});
  const Value a = t.b.add(x, y), b = t.b.add(y, x), c = t.b.exp(x), d = t.b.exp(x);
  auto o = run(t.done({t.b.mul(a, c), t.b.mul(b, d)}));
  EXPECT_EQ(count_op(o, "add"), 1u);
  EXPECT_EQ(count_op(o, "exp"), 1u);
  EXPECT_EQ(count_op(o, "mul"), 1u);
  const lt_graph& g = o.graph.view();
  EXPECT_EQ(g.outputs[0], g.outputs[1]);  // both outputs are now the same node
}

TEST(OptimizerCse, KeepsMaximumOperandOrderAndDifferentTags) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {4}), y = t.input(LT_DTYPE_F32, {4});
  // max(+0, -0) is +0 and max(-0, +0) is -0 in the host kernels: not commutative bitwise.
  const Value m1 = t.b.maximum(x, y), m2 = t.b.maximum(y, x);
  const Value e1 = t.b.exp(x), e2 = t.b.exp(x);  // e2 recomputes e1 in a backward pass
  const lt_graph& g = t.done({m1, m2, e1, e2});
  std::vector<uint32_t> tags(g.num_nodes, 0);
  tags[static_cast<size_t>(e2)] = 7;
  auto o = run(g, OptLevel::kExact, tags);
  EXPECT_EQ(count_op(o, "maximum"), 2u);
  EXPECT_EQ(count_op(o, "exp"), 2u);
  tags[static_cast<size_t>(e2)] = 0;
  auto merged = run(g, OptLevel::kExact, tags);
  EXPECT_EQ(count_op(merged, "exp"), 1u);
}

TEST(OptimizerCse, MergesANodeWhoseOnlyOperandGainsASecondReaderLater) {
  // CSE does not look up a node that alone reads one of its operands (n1 reads e1 alone when
  // it is visited); the later merge of e2 into e1 gives e1 a second reader, and n2, now equal
  // to n1, must still be merged into it.
  G t;
  const Value x = t.input(LT_DTYPE_F32, {4}), y = t.input(LT_DTYPE_F32, {4});
  const Value e1 = t.b.exp(x);
  const Value n1 = t.b.mul(e1, y);
  const Value e2 = t.b.exp(x);
  const Value n2 = t.b.mul(y, e2);
  auto o = run(t.done({t.b.sin(n1), t.b.tanh(n2)}));
  EXPECT_EQ(count_op(o, "exp"), 1u);
  EXPECT_EQ(count_op(o, "mul"), 1u);
  const lt_graph& g = o.graph.view();
  EXPECT_EQ(g.nodes[g.outputs[0]].operands[0], g.nodes[g.outputs[1]].operands[0]);
  // A node whose operand stays read by it alone is kept, once.
  G u;
  const Value a = u.input(LT_DTYPE_F32, {4});
  auto kept = run(u.done({u.b.sin(u.b.exp(a)), u.b.tanh(u.b.exp(u.b.neg(a)))}));
  EXPECT_EQ(count_op(kept, "exp"), 2u);
}

TEST(OptimizerCse, NeverMergesCustomOps) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {4});
  const int32_t c1 = t.g.add("my.effect", LT_DTYPE_F32, {4}, {x});
  const int32_t c2 = t.g.add("my.effect", LT_DTYPE_F32, {4}, {x});
  auto o = run(t.done({c1, c2}));
  EXPECT_EQ(count_op(o, "my.effect"), 2u);
}

TEST(OptimizerSimplify, RemovesBitwiseIdentities) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {2, 3});
  const Value nn = t.b.neg(t.b.neg(x));
  const Value one = t.b.mul(x, t.b.scalar(1.0, LT_DTYPE_F32));
  const Value div1 = t.b.div(x, t.b.scalar(1.0, LT_DTYPE_F32));
  const Value plus_neg0 = t.b.add(x, t.b.scalar(-0.0, LT_DTYPE_F32));
  auto o = run(t.done({nn, one, div1, plus_neg0}));
  const lt_graph& g = o.graph.view();
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(g.outputs[k], g.inputs[0]) << "output " << k;
}

TEST(OptimizerSimplify, PlusZeroIsKeptUnderExactAndDroppedUnderFast) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {3});
  // -0 + +0 is +0: x + 0 is not x for x = -0.
  const lt_graph& g = t.done({t.b.add(x, t.b.scalar(0.0, LT_DTYPE_F32))});
  auto exact = run(g, OptLevel::kExact);
  EXPECT_EQ(count_op(exact, "add"), 1u);
  auto fast = run(g, OptLevel::kFast);
  EXPECT_EQ(count_op(fast, "add"), 0u);
}

TEST(OptimizerSimplify, ComposesAndCancelsLayoutChains) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {2, 3, 4});
  const Value p = t.b.permute(t.b.permute(x, {1, 2, 0}), {2, 0, 1});  // cancels
  const Value q = t.b.permute(t.b.permute(x, {1, 0, 2}), {0, 2, 1});  // composes
  const Value r = t.b.reshape(t.b.reshape(x, {6, 4}), {24});
  auto o = run(t.done({p, q, r}));
  EXPECT_EQ(o.graph.view().outputs[0], o.graph.view().inputs[0]);
  EXPECT_EQ(count_op(o, "permute"), 1u);
  EXPECT_EQ(count_op(o, "reshape"), 1u);
  EXPECT_EQ(output(o, 1).rank, 3u);
  EXPECT_EQ(output(o, 1).shape[0], 3);
  EXPECT_EQ(output(o, 1).shape[1], 4);
  EXPECT_EQ(output(o, 1).shape[2], 2);
}

TEST(OptimizerSimplify, CastChainsOnlyThroughLosslessDtypes) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {3});
  const Value back = t.b.cast(t.b.cast(x, LT_DTYPE_F64), LT_DTYPE_F32);    // exact: x
  const Value lossy = t.b.cast(t.b.cast(x, LT_DTYPE_BF16), LT_DTYPE_F32);  // rounds: kept
  auto o = run(t.done({back, lossy}));
  EXPECT_EQ(o.graph.view().outputs[0], o.graph.view().inputs[0]);
  EXPECT_EQ(count_op(o, "cast"), 2u);
}

TEST(OptimizerSimplify, SliceOfConcatIsThePiece) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {2, 3}), y = t.input(LT_DTYPE_F32, {4, 3});
  const Value c = t.b.concat({x, y}, 0);
  auto o = run(t.done({t.b.slice(c, {2, 0}, {6, 3}, {1, 1})}));
  EXPECT_EQ(o.graph.view().outputs[0], o.graph.view().inputs[1]);
}

TEST(OptimizerSimplify, KeepsTheLayoutAGemmReadsUnderExact) {
  G t;
  const Value a = t.input(LT_DTYPE_F32, {2, 3}), w = t.input(LT_DTYPE_F32, {3, 4});
  const Value wt = t.b.permute(t.b.permute(w, {1, 0}), {1, 0});
  const lt_graph& g = t.done({t.b.matmul(a, wt)});
  auto exact = run(g, OptLevel::kExact);
  EXPECT_EQ(count_op(exact, "permute"), 2u);  // the GEMM would round otherwise
  auto fast = run(g, OptLevel::kFast);
  EXPECT_EQ(count_op(fast, "permute"), 0u);
}

TEST(OptimizerSimplify, KeepsWhetherAGemmReadsATransposeInPlaceUnderExact) {
  // difftest seed 819443: the slice takes y back out of concat(wt, y), the concat dies, and wt
  // (read by a GEMM and by the concat) would be read by the GEMM alone: in place, rounding
  // otherwise. Under exact the graph is compiled as traced.
  G t;
  const Value a = t.input(LT_DTYPE_F32, {2, 1}), w = t.input(LT_DTYPE_F32, {4, 1});
  const Value y = t.input(LT_DTYPE_F32, {1, 2});
  const Value wt = t.b.permute(w, {1, 0});
  const Value c = t.b.concat({wt, y}, 1);
  const lt_graph& g = t.done({t.b.matmul(a, wt), t.b.slice(c, {0, 4}, {1, 6}, {1, 1})});
  OptimizeOptions exact;
  auto o = lt::lower::optimize(g, exact);
  EXPECT_FALSE(o.changed);
  EXPECT_TRUE(o.kept_gemm_layout);
  auto fast = run(g, OptLevel::kFast);
  EXPECT_EQ(count_op(fast, "concat"), 0u);
}

// The host executor writes a 2-D GEMM read once, by a transpose, as the transposed product
// (B^T·A^T, another summation order): under exact, a rewrite that changes how many readers such
// a GEMM has, or how many of them are transposes, compiles the graph as traced.
TEST(OptimizerSimplify, KeepsWhetherAGemmIsWrittenTransposedUnderExact) {
  {  // CSE would merge the two transposes: the GEMM read once, by a transpose, where it had two
    G t;
    const Value a = t.input(LT_DTYPE_F32, {3, 2}), b = t.input(LT_DTYPE_F32, {2, 4});
    const Value m = t.b.matmul(a, b);
    const lt_graph& g = t.done({t.b.neg(t.b.permute(m, {1, 0})), t.b.exp(t.b.permute(m, {1, 0}))});
    auto o = lt::lower::optimize(g, OptimizeOptions{});
    EXPECT_FALSE(o.changed);
    EXPECT_TRUE(o.kept_gemm_layout);
    auto fast = run(g, OptLevel::kFast);
    EXPECT_EQ(count_op(fast, "permute"), 1u);
  }
  {  // a transpose of the GEMM's transpose cancels: the GEMM's reader is no transpose any more
    G t;
    const Value a = t.input(LT_DTYPE_F32, {3, 2}), b = t.input(LT_DTYPE_F32, {2, 4});
    const Value m = t.b.matmul(a, b);
    const lt_graph& g = t.done({t.b.neg(t.b.permute(t.b.permute(m, {1, 0}), {1, 0}))});
    auto o = lt::lower::optimize(g, OptimizeOptions{});
    EXPECT_FALSE(o.changed);
    EXPECT_TRUE(o.kept_gemm_layout);
  }
  {  // rewrites elsewhere leave such a GEMM alone: the graph is optimised
    G t;
    const Value a = t.input(LT_DTYPE_F32, {3, 2}), b = t.input(LT_DTYPE_F32, {2, 4});
    const Value gt = t.b.permute(t.b.matmul(a, b), {1, 0});
    const lt_graph& g = t.done({t.b.neg(t.b.neg(t.b.neg(gt)))});
    auto o = lt::lower::optimize(g, OptimizeOptions{});
    EXPECT_TRUE(o.changed);
    EXPECT_FALSE(o.kept_gemm_layout);
  }
}

// The host executor's two GEMM layout decisions (lower/gemm_layout.hpp), which StepProgram
// takes and the exact guard compares.
TEST(GemmLayouts, ATransposeOnlyGemmsReadIsReadInPlace) {
  G t;
  const Value a = t.input(LT_DTYPE_F32, {2, 3}), w = t.input(LT_DTYPE_F32, {4, 3});
  const Value wt = t.b.permute(w, {1, 0});   // read by two GEMMs only: in place
  const Value wt2 = t.b.permute(w, {1, 0});  // read by a GEMM and by neg: materialised
  const Value wt3 = t.b.permute(w, {1, 0});  // an output too: materialised
  const Value x = t.input(LT_DTYPE_I32, {2, 3}), v = t.input(LT_DTYPE_I32, {4, 3});
  const Value vt = t.b.permute(v, {1, 0});  // read by an i32 matmul (no GEMM): materialised
  const Value m1 = t.b.matmul(a, wt), m2 = t.b.matmul(a, wt), m3 = t.b.matmul(a, wt2);
  const Value m4 = t.b.matmul(a, wt3), m5 = t.b.matmul(x, vt);
  const lt_graph& g = t.done({m1, m2, m3, t.b.neg(wt2), m4, wt3, m5});
  const lt::lower::GemmLayouts l(g);
  EXPECT_TRUE(l.any);
  EXPECT_TRUE(l.in_place[wt]);
  EXPECT_FALSE(l.in_place[wt2]);
  EXPECT_FALSE(l.in_place[wt3]);
  EXPECT_FALSE(l.in_place[vt]);
  EXPECT_FALSE(l.in_place[w]);
  EXPECT_FALSE(l.transposed[m1]);  // outputs
}

TEST(GemmLayouts, AGemmReadOnceByAMaterialisedTransposeWritesItTransposed) {
  G t;
  const Value a = t.input(LT_DTYPE_F32, {3, 2}), b = t.input(LT_DTYPE_F32, {2, 4});
  const Value m = t.b.matmul(a, b), mt = t.b.permute(m, {1, 0});  // mt read by exp: materialised
  const Value n = t.b.matmul(a, b), nt = t.b.permute(n, {1, 0});  // nt read by a GEMM only
  const Value k = t.b.matmul(a, b), kt = t.b.permute(k, {1, 0});  // k also an output
  const Value c = t.input(LT_DTYPE_F32, {4, 5});
  const lt_graph& g = t.done({t.b.exp(mt), t.b.matmul(c, nt), t.b.exp(kt), k});
  const lt::lower::GemmLayouts l(g);
  EXPECT_TRUE(l.transposed[m]);
  EXPECT_FALSE(l.in_place[mt]);
  EXPECT_FALSE(l.transposed[n]);  // its transpose is read in place by the other GEMM
  EXPECT_TRUE(l.in_place[nt]);
  EXPECT_FALSE(l.transposed[k]);
  G plain;
  const Value p =
      plain.b.matmul(plain.input(LT_DTYPE_F32, {3, 2}), plain.input(LT_DTYPE_F32, {2, 4}));
  const lt::lower::GemmLayouts none(plain.done({plain.b.exp(p)}));
  EXPECT_FALSE(none.any);
}

TEST(OptimizerSimplify, KeepsAGemmWrittenPlainWhenARewriteWouldHandItToATranspose) {
  // difftest exact seeds 1-20000 held three such graphs, which the guard's earlier form (reader
  // counts of the matmuls a permute read as traced) let through: here the double negation
  // between the GEMM and the transpose goes, and the GEMM would be written transposed.
  G t;
  const Value a = t.input(LT_DTYPE_F32, {3, 2}), b = t.input(LT_DTYPE_F32, {2, 4});
  const Value r = t.b.neg(t.b.neg(t.b.matmul(a, b)));
  const lt_graph& g = t.done({t.b.exp(t.b.permute(r, {1, 0}))});
  auto o = lt::lower::optimize(g, OptimizeOptions{});
  EXPECT_FALSE(o.changed);
  EXPECT_TRUE(o.kept_gemm_layout);
  auto fast = run(g, OptLevel::kFast);
  EXPECT_EQ(count_op(fast, "neg"), 0u);
}

TEST(OptimizerDce, KeepsEveryInputInOrderAndDropsUnreadNodes) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {3}), unused = t.input(LT_DTYPE_I64, {2});
  t.b.exp(x);  // read by nothing
  auto o = run(t.done({t.b.neg(x)}));
  const lt_graph& g = o.graph.view();
  ASSERT_EQ(g.num_inputs, 2u);
  EXPECT_EQ(g.nodes[g.inputs[1]].dtype, LT_DTYPE_I64);
  EXPECT_EQ(count_op(o, "exp"), 0u);
  (void)unused;
}

// The working graph counts uses: a node dies with its last use in the pass that removes it
// (no compaction between passes), so every pass's counts are the live graph's, and the dce
// step reports what the caller's graph held unread.
TEST(OptimizerDce, CountsTheLiveGraphPerPassWithoutCompacting) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {3});
  t.b.exp(x);                                                // unread from the start
  const Value twice = t.b.neg(t.b.neg(x));                   // simplify: both negs die
  const Value a = t.b.add(x, twice), b = t.b.add(twice, x);  // cse: one add dies
  auto o = run(t.done({t.b.mul(a, b)}));
  ASSERT_EQ(o.stats.size(), 5u);
  EXPECT_EQ(o.stats[0].nodes_before, 6u);  // x, 2 neg, 2 add, mul; exp was never live
  EXPECT_EQ(o.stats[0].nodes_after, 4u);   // x, 2 add, mul
  EXPECT_EQ(o.stats[3].pass, "cse");
  EXPECT_EQ(o.stats[3].nodes_after, 3u);
  EXPECT_EQ(o.stats[4].removed, 1u);  // the exp
  EXPECT_EQ(o.graph.view().num_nodes, 3u);
  EXPECT_EQ(count_op(o, "neg"), 0u);
  EXPECT_EQ(count_op(o, "add"), 1u);
}

// One owned attribute type for the core's IR and the optimiser (OwnedAttr): copies compare
// equal, floats compare bitwise (0.0 and -0.0 are different attributes, so CSE keeps them
// apart), and a view reads back what was copied.
TEST(OptimizerCse, OwnedAttributesCompareBitwise) {
  const int64_t perm[] = {1, 0};
  lt_attr p{};
  p.name = "perm";
  p.kind = LT_ATTR_INTS;
  p.ints = perm;
  p.ints_len = 2;
  const lt::lower::OwnedAttr owned = lt::lower::OwnedAttr::copy(p);
  const lt_attr back = owned.view();
  EXPECT_TRUE(lt::lower::same_attr(p, back));
  EXPECT_NE(back.ints, p.ints);  // its own storage
  lt_attr zero{}, minus_zero{};
  zero.name = minus_zero.name = "value";
  zero.kind = minus_zero.kind = LT_ATTR_FLOAT;
  minus_zero.f = -0.0;
  EXPECT_FALSE(lt::lower::same_attr(zero, minus_zero));
  EXPECT_FALSE(lt::lower::OwnedAttr::copy(zero) == lt::lower::OwnedAttr::copy(minus_zero));
  EXPECT_FALSE(lt::lower::same_attr(zero, p));
  G t;
  const Value x = t.input(LT_DTYPE_F32, {3});
  const Value plus = t.b.add(x, t.b.full({3}, 0.0, LT_DTYPE_F32));
  const Value minus = t.b.add(x, t.b.full({3}, -0.0, LT_DTYPE_F32));
  auto o = run(t.done({t.b.mul(plus, minus)}));
  EXPECT_EQ(count_op(o, "full"), 1u);  // x + (-0) is x; x + (+0) stays under exact
  EXPECT_EQ(count_op(o, "add"), 1u);
}

TEST(OptimizerFold, EvaluatesConstantSubgraphsOnce) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {4});
  const Value splat = t.b.exp(t.b.full({4}, 0.0, LT_DTYPE_F32));  // all 1: a full
  const Value ramp = t.b.mul(t.b.arange(4, 0, 1, LT_DTYPE_F32), t.b.scalar(2, LT_DTYPE_F32));
  OptimizeOptions opt;
  opt.eval = lt::host::evaluate;
  std::vector<std::string> passes;
  opt.after_pass = [&](std::string_view p, const lt_graph&) { passes.emplace_back(p); };
  auto o = lt::lower::optimize(t.done({t.b.add(x, splat), t.b.add(x, ramp)}), opt);
  EXPECT_EQ(count_op(o, "exp"), 0u);
  EXPECT_EQ(count_op(o, "arange"), 0u);
  // x * 1 after folding: the first output's add(x, full 1) stays (x + 1 is no identity).
  EXPECT_EQ(count_op(o, "add"), 2u);
  ASSERT_EQ(o.constants.size(), 1u);  // the ramp 0, 2, 4, 6 is kept as data
  float ramp_data[4];
  ASSERT_EQ(o.constants[0].size(), sizeof ramp_data);
  std::memcpy(ramp_data, o.constants[0].data(), sizeof ramp_data);
  EXPECT_EQ(ramp_data[3], 6.0f);
  EXPECT_EQ(o.graph.view().num_inputs, 2u);  // x, then the constant
  EXPECT_EQ(passes,
            (std::vector<std::string>{"1_simplify", "2_fold", "3_simplify", "4_cse", "5_dce"}));
  size_t folded = 0;
  for (auto& s : o.stats) folded += s.folded;
  EXPECT_EQ(folded, 2u);
}

// Equal constant cones (a GPT step's causal mask, twice) are evaluated once, and each folded
// node still gets its own constant with the bytes (CSE, after fold, keeps the two inputs).
TEST(OptimizerFold, EvaluatesEqualConesOnceAndGivesEachItsBytes) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {4});
  auto ramp = [&] {
    return t.b.mul(t.b.arange(4, 0, 1, LT_DTYPE_F32), t.b.scalar(2, LT_DTYPE_F32));
  };
  const Value a = ramp(), b = ramp();
  OptimizeOptions opt;
  size_t cone_nodes = 0, cone_outputs = 0;
  opt.eval = [&](const lt_graph& cone) {
    cone_nodes = cone.num_nodes;
    cone_outputs = cone.num_outputs;
    return lt::host::evaluate(cone);
  };
  auto o = lt::lower::optimize(t.done({t.b.add(x, a), t.b.mul(x, b)}), opt);
  EXPECT_EQ(cone_outputs, 1u);
  EXPECT_EQ(cone_nodes, 3u);  // arange, the scalar 2, mul: not each twice
  ASSERT_EQ(o.constants.size(), 2u);
  for (const auto& c : o.constants) {
    float v[4];
    ASSERT_EQ(c.size(), sizeof v);
    std::memcpy(v, c.data(), sizeof v);
    EXPECT_EQ(v[0], 0.0f);
    EXPECT_EQ(v[3], 6.0f);
  }
  size_t folded = 0;
  for (auto& s : o.stats) folded += s.folded;
  EXPECT_EQ(folded, 2u);
}

TEST(OptimizerLevels, NoneLeavesTheGraphAsTraced) {
  G t;
  const Value x = t.input(LT_DTYPE_F32, {3});
  const lt_graph& g = t.done({t.b.neg(t.b.neg(x))});
  OptimizeOptions none;
  none.level = OptLevel::kNone;
  auto o = lt::lower::optimize(g, none);
  EXPECT_FALSE(o.changed);
  EXPECT_TRUE(o.stats.empty());
  EXPECT_TRUE(run(g).changed);
  lt::lower::OptLevel l;
  EXPECT_TRUE(lt::lower::parse_opt_level("fast", &l));
  EXPECT_EQ(l, OptLevel::kFast);
  EXPECT_FALSE(lt::lower::parse_opt_level("O3", &l));
}

}  // namespace
