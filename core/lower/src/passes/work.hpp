// work.hpp — the optimiser's mutable graph (owned nodes, replaceable uses) that every pass of
// optimize.hpp rewrites; internal to LazyTensor::lower.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lazytensor/lower/optimize.hpp"

namespace lt::lower::opt {

// One owned attribute (lt_attr's fields, storage included).
struct OwnedAttr {
  std::string name;
  lt_attr_kind kind = LT_ATTR_INT;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::string s;
  bool operator==(const OwnedAttr& o) const;
};

struct WNode {
  std::string op;                // "input" for inputs and constants
  const OpInfo* info = nullptr;  // null for inputs and non-built-in ops
  lt_dtype dtype = LT_DTYPE_INVALID;
  Shape shape;
  std::vector<int32_t> operands;
  std::vector<OwnedAttr> attrs;
  uint32_t tag = 0;       // rematerialisation tag (CSE merges equal tags only)
  int32_t input = -1;     // graph input k, or -1
  int32_t constant = -1;  // index into Work::constants for a folded constant, or -1
  int32_t origin = -1;    // the input graph's node this one computes (messages), or -1

  bool is(OpId id) const { return info && info->id == id; }
  const OwnedAttr* attr(std::string_view name) const;
  int64_t numel() const;
};

// Nodes in topological order after compact(); a pass may append nodes (operands before users)
// and redirect uses with replace(), then compact() restores the order and drops the dead.
struct Work {
  std::vector<WNode> nodes;
  std::vector<int32_t> inputs;   // original graph inputs, in order (never removed)
  std::vector<int32_t> outputs;  // in the caller's order
  std::vector<std::vector<unsigned char>> constants;
  std::vector<int32_t> repl;  // per node: what uses of it read instead (itself if unreplaced)
  OptLevel level = OptLevel::kExact;
  const OptimizeOptions* opt = nullptr;

  int32_t add(WNode n);
  // Uses of `from` read `to` from now on (to must not depend on from).
  void replace(int32_t from, int32_t to);
  int32_t resolve(int32_t v) const;
  // Applies replacements, drops nodes no output reads (inputs stay), restores topological
  // order. Returns the number of nodes dropped.
  size_t compact();
  // Users of each node (after compact()).
  std::vector<std::vector<int32_t>> users() const;
  // True for nodes a pass must never merge, fold or drop into another: collectives, custom
  // (non-built-in) ops.
  bool opaque(const WNode& n) const;

  static Work from_graph(const lt_graph& g, const OptimizeOptions& opt);
  OwnedGraph to_graph() const;
};

// The passes (one file each).
size_t simplify(Work& w, PassStats& s);  // returns rewrites
size_t fold(Work& w, PassStats& s);
size_t cse(Work& w, PassStats& s);
size_t dce(Work& w, PassStats& s);

// Helpers shared by the passes.
bool same_shape(const WNode& a, const WNode& b);
// The value of a splat constant (`full`), if n is one.
bool full_value(const WNode& n, double* v);
WNode make_full(lt_dtype d, const Shape& shape, double v);

}  // namespace lt::lower::opt
