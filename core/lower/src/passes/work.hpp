// work.hpp — the optimiser's one working graph, mutated in place by every pass of optimize.hpp
// (uses redirected by replace(), dead nodes dropped as they die, compacted once at the end);
// internal to LazyTensor::lower.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <vector>

#include "lazytensor/lower/gemm_layout.hpp"
#include "lazytensor/lower/optimize.hpp"

namespace lt::lower::opt {

// One node. Nothing is copied from the input graph but the operand lists: the op name, the
// shape and the attributes are borrowed from it (the graph outlives the optimisation), or from
// Work's own storage for what a rewrite made. The op name is interned: the input graph's own
// string, or the op table's for a node a rewrite made.
struct WNode {
  // (The flags sit beside dtype, in what would be padding: 88 bytes a node, not 96; a big
  // graph's working graph is the largest array the optimiser fills, on fresh pages the first
  // time a process optimises a graph that size.)
  const char* op = "input";      // "input" for inputs and constants
  const OpInfo* info = nullptr;  // null for inputs and non-built-in ops
  lt_dtype dtype = LT_DTYPE_INVALID;
  bool dead = false;       // no output reads it any more (dropped by to_graph)
  bool own_attrs = false;  // attrs live in Work's storage (made or rewritten), not the input
  bool opaque = false;     // Work::opaque's answer, decided once per op when the node is made
  std::span<const int64_t> shape;
  std::span<int32_t> operands;  // Work::operand_store; may name replaced nodes (resolve them)
  std::span<const lt_attr> attrs;
  uint32_t tag = 0;       // rematerialisation tag (CSE merges equal tags only)
  int32_t input = -1;     // graph input k, or -1
  int32_t constant = -1;  // index into Work::constants for a folded constant, or -1
  int32_t origin = -1;    // the input graph's node this one computes (messages), or -1

  bool is(OpId id) const { return info && info->id == id; }
  // A graph input or a folded constant (a leaf no pass rewrites; only inputs never die).
  bool is_input() const { return input >= 0 || constant >= 0; }
  const lt_attr* attr(std::string_view name) const;
  int64_t numel() const;
};

static_assert(sizeof(void*) != 8 || sizeof(WNode) == 88, "WNode's layout: see the note above");

bool same_shape(std::span<const int64_t> a, std::span<const int64_t> b);
// The same op (by name when not built in), dtype, shape and attributes; operands not compared:
// what CSE's equality and fold's sharing of equal cone nodes both ask of two nodes.
bool same_op_and_attrs(const WNode& a, const WNode& b);

// The working graph. Node indices never change while the passes run: a pass appends nodes
// (operands before users: a made node has no operands) and redirects uses with replace(); a
// node whose last use goes is marked dead at once, and with it what only it read. Nodes are
// in topological order by index, except that a made node may be read by nodes before it.
// to_graph() compacts once, in the traced order (work.cpp says why).
struct Work {
  std::vector<WNode> nodes;
  std::vector<int32_t> inputs;   // original graph inputs, in order (never removed)
  std::vector<int32_t> outputs;  // in the caller's order (resolve them)
  std::vector<std::vector<unsigned char>> constants;
  std::vector<int32_t> repl;   // per node: what uses of it read instead (itself if unreplaced)
  std::vector<int32_t> uses;   // per node: operand slots of live nodes and outputs reading it
  size_t live = 0;             // nodes not dead
  size_t unread_at_start = 0;  // nodes of the caller's graph that no output read
  size_t loaded = 0;           // nodes of the caller's graph (those after it a rewrite made)
  size_t fold_made_from = 0;   // once fold ran: the first node it may have made
  OptLevel level = OptLevel::kExact;
  const OptimizeOptions* opt = nullptr;

  // Appends a made node (no operands) and returns it; it is live once something reads it.
  int32_t add(WNode n);
  // Uses of `from` read `to` from now on (to must not depend on from); from dies.
  void replace(int32_t from, int32_t to);
  int32_t resolve(int32_t v) const {
    while (repl[static_cast<size_t>(v)] != v) v = repl[static_cast<size_t>(v)];
    return v;
  }
  // Operand k of v, resolved (and written back resolved).
  int32_t operand(int32_t v, size_t k) {
    int32_t& o = nodes[static_cast<size_t>(v)].operands[k];
    o = resolve(o);
    return o;
  }
  // Operand k of v reads `to` instead of what it read (which may die).
  void set_operand(int32_t v, size_t k, int32_t to);
  // v's attributes replaced by `attrs` (kept in Work's storage).
  void set_attrs(int32_t v, std::vector<OwnedAttr> attrs);
  // True for nodes a pass must never merge, fold or drop into another: collectives, custom
  // (non-built-in) ops, what the caller's is_opaque names. Decided when the node is made.
  bool opaque(const WNode& n) const { return n.opaque && !n.is_input(); }

  // Makes this the working graph of `g` (`opt` must outlive the passes). Reuses the arrays a
  // previous graph left (optimize() keeps one Work per thread: allocating a dozen arrays per
  // compile was a tenth of the optimiser's cost on small graphs).
  void load(const lt_graph& g, const OptimizeOptions& opt);
  // Frees what the arrays hold when a big graph left them big (a thread keeps its Work).
  void trim();
  // The live graph in the traced order, its folded constants as inputs after the original
  // ones; `origin` (if given) gets each node's origin; `take_constants` (if given) gets the
  // constants' bytes in the order of those inputs, and the graph the attributes rewrites made,
  // both moved out of this Work (the last call). Without it the graph borrows those
  // attributes from this Work (a print-after snapshot).
  OptGraph to_graph(std::vector<int32_t>* origin = nullptr,
                    std::vector<std::vector<unsigned char>>* take_constants = nullptr);

  // Storage for the attributes rewrites make (stable addresses; a list allocates nothing while
  // empty, and moving it keeps every element where it is).
  std::list<std::vector<lt_attr>> attr_views;
  std::list<std::vector<OwnedAttr>> attr_store;

  // The caller's graph has a matmul and a permute: only then may a rewrite change a GEMM's
  // layout (the guard in optimize.cpp).
  bool matmul_and_permute = false;
  // The caller's graph's GEMM layout facts (lower/gemm_layout.hpp), noted by load() as it reads
  // every operand: the guard decides from them instead of walking the caller's graph again.
  std::vector<GemmLayouts::Facts> gemm_facts;

  // Scratch arrays the passes reuse; each sizes and clears what it takes, and none is held
  // across passes.
  std::vector<uint8_t> flags1, flags2, flags3;
  std::vector<int32_t> ints1, ints2, ints3;
  std::vector<uint64_t> hashes;

 private:
  void release(int32_t v);  // one use of v went; v dies with its last one
  // to_graph in one pass in index order, a made node placed before its first reader: false
  // (and `g` empty) if an operand came after its reader, which the rewrites never cause.
  bool in_index_order(OptGraph& g, std::vector<int32_t>* origin,
                      std::vector<std::vector<unsigned char>>* take_constants);
  void move_attrs(OptGraph& g);
  // Whether nodes of op `op` (built-in: `info`) are opaque; the caller's is_opaque is asked
  // once per built-in op (the core looks the name up in its custom-op registry, a string map).
  bool op_opaque(const char* op, const OpInfo* info);
  std::vector<int8_t> opaque_op_;  // per built-in OpId: -1 not asked yet, 0, 1
  std::vector<int32_t> operand_store;
  std::vector<int32_t> release_stack_;
  std::vector<std::pair<int32_t, size_t>> walk_;  // to_graph's walk
};

// The passes (one file each).
size_t simplify(Work& w, PassStats& s);  // returns rewrites
size_t fold(Work& w, PassStats& s);
size_t cse(Work& w, PassStats& s);
size_t dce(Work& w, PassStats& s);

// Helpers shared by the passes.
// The value of a splat constant (`full`), if n is one.
bool full_value(const WNode& n, double* v);
// A `full` of value v at `shape` (borrowed: a live node's shape).
WNode make_full(Work& w, lt_dtype d, std::span<const int64_t> shape, double v);

}  // namespace lt::lower::opt
