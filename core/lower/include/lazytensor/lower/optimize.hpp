// optimize.hpp — the target-independent graph optimiser: a pass manager running an ordered list
// of passes (simplify, constant folding, CSE, DCE; docs/optimizer.md lists every rewrite) over
// a whole collected graph before it is partitioned, with per-pass counts and an optional hook
// that sees the graph after each pass (the core writes it to LT_DUMP_DIR).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lazytensor/lower/graph.hpp"

namespace lt::lower {

// `none`: the graph is left as traced. `exact` (the default): only rewrites whose every result
// is bitwise identical to the unoptimised graph's (a NaN stays a NaN; IEEE 754 leaves its sign
// and payload to the operation, so those are not promised). `fast`: also rewrites that
// reassociate or drop signed-zero distinctions (x + 0 -> x), within the ulps docs/optimizer.md
// states.
enum class OptLevel : uint8_t { kNone, kExact, kFast };
// "none" | "exact" | "fast"; false when `s` is none of them.
bool parse_opt_level(std::string_view s, OptLevel* out);
const char* opt_level_name(OptLevel l);

// What one pass did to the graph (node counts of the live graph, inputs included).
struct PassStats {
  std::string pass;  // "simplify", "fold", "cse", "dce"
  size_t nodes_before = 0, nodes_after = 0;
  size_t removed = 0;    // nodes merged into an equal one or no longer used
  size_t rewritten = 0;  // nodes replaced by a simpler form
  size_t folded = 0;     // nodes evaluated at compile time into a constant
};

// Evaluates a graph with no inputs and returns each output's bytes (dense, row-major): how the
// fold pass computes constant subgraphs (the core passes the shared host kernels). Throws
// lower::Error when it cannot; the pass then leaves that subgraph alone.
using ConstEval = std::function<std::vector<std::vector<unsigned char>>(const lt_graph&)>;

struct OptimizeOptions {
  OptLevel level = OptLevel::kExact;
  // Rematerialisation tags per node of the input graph (ir.h Node::recompute_tag); empty: all
  // 0. CSE merges two nodes only when their tags are equal.
  std::span<const uint32_t> recompute_tags;
  // Constant folding's evaluator; empty: no folding.
  ConstEval eval;
  // Constants bigger than this are not folded (they would be kept with the executable).
  size_t max_fold_bytes = size_t{1} << 24;
  // Ops the optimiser never merges or folds beyond the built-in rules (custom ops: may have
  // effects a graph does not show). Null: every non-built-in op is treated so.
  std::function<bool(const char* op)> is_opaque;
  // Called after each pass with its name and the graph as it then is (print-after-all).
  std::function<void(std::string_view pass, const lt_graph& g)> after_pass;
};

// The optimiser's result as an lt_graph, flat: one array of nodes and one of their operands,
// nothing per node allocated (the per-node vectors and strings of an OwnedGraph were two fifths
// of the optimiser's cost in a compile, issue #27's compile-time bound). Op names, shapes and
// attributes are borrowed from the input graph (valid while it is), but for the attributes a
// rewrite made, which this graph keeps (`attr_store`, views in `attr_views`). Move-only: the
// nodes point into its own arrays.
struct OptGraph {
  OptGraph() = default;
  OptGraph(OptGraph&&) noexcept = default;
  OptGraph& operator=(OptGraph&&) noexcept = default;
  OptGraph(const OptGraph&) = delete;
  OptGraph& operator=(const OptGraph&) = delete;

  std::vector<lt_graph_node> nodes;
  std::vector<int32_t> operands;  // every node's operands, node after node
  std::vector<int32_t> inputs, outputs;
  uint64_t hash = 0;
  std::list<std::vector<OwnedAttr>> attr_store;
  std::list<std::vector<lt_attr>> attr_views;

  size_t size() const { return nodes.size(); }
  const lt_graph_node& node(size_t i) const { return nodes[i]; }
  // The borrowed view; valid until this graph changes or goes.
  const lt_graph& view();
  // Makes this graph `g` (static) as it is (its arrays copied; names, shapes, attributes borrowed):
  // what a caller compiles when nothing changed (Optimized::changed is false).
  void borrow(const lt_graph& g);

 private:
  lt_graph graph_{};
};

// The optimised graph: its inputs are the input graph's, in the same order, followed by one
// input per folded constant (constants[k] is the data of input num_inputs + k); its outputs are
// the input graph's, in the same order (an output may now be an input, a constant, or the same
// node as another output). `graph` borrows op names, shapes and attributes from the input
// graph: it is valid while that graph is.
struct Optimized {
  bool changed = true;  // false: no pass changed anything and `graph` is empty (use the input)
  // Under exact: the rewrites would have changed whether a matmul reads a transpose in place
  // (docs/optimizer.md), so the input is to be compiled as it is (changed is false).
  bool kept_gemm_layout = false;
  OptGraph graph;
  std::vector<std::vector<unsigned char>> constants;
  std::vector<int32_t> origin;  // per node: the input graph's node it computes, or -1
  std::vector<PassStats> stats;
};

// Runs the passes of `opt.level` on `g` (a static graph; a dynamic one is returned as is).
// Never throws for a valid graph: a rewrite that cannot be proven safe is not made.
Optimized optimize(const lt_graph& g, const OptimizeOptions& opt);

// The pass names in the order they run (docs and the dump file names).
std::vector<std::string> pass_names(OptLevel level);

}  // namespace lt::lower
