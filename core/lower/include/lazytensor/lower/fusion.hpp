// fusion.hpp — fusion grouping over a canonical lt_graph region, shared by every compiling
// backend: which nodes run together in one generated kernel and what each kernel reads and
// writes. Owned by the cpu_jit engineer; used by cpu_jit and gpu_opencl.
//
// The planner is backend-neutral: it never decides *how* a group is lowered, only which
// nodes form it. All walks are iterative (graphs may be 1,000,000 nodes deep).
// Errors: a malformed graph (operand index not before its user, bad output index) makes
// plan() throw std::invalid_argument; plugins catch at their C ABI boundary.
#ifndef LAZYTENSOR_FUSION_HPP
#define LAZYTENSOR_FUSION_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lazytensor/lower/graph.hpp"
#include "lazytensor/lt_plugin.h"

namespace lt::fusion {

// What an op is to the planner.
enum class OpClass : uint8_t {
  kInput,        // "input" leaf: never in a group, always a group input
  kElementwise,  // out[i] depends on operands at the (broadcast) same index only;
                 // includes cast, where, full, arange and broadcast_to
  kReduction,    // sum, mean, max, min over `axes`
  kOpaque,       // everything else: matmul, conv2d, pools, layout ops, gather, ...
};

enum class GroupKind : uint8_t {
  // One loop over `domain` (== every node's output shape).
  kElementwise,
  // Reductions over the trailing axes of `domain` (== reduce_axes = {k..rank-1}) with their
  // elementwise producers (shape == domain) and consumers (reduced shape): lower as one
  // row-wise kernel (softmax, layernorm, mean/var).
  kRowReduction,
  // Same, but reduce_axes are not the trailing axes (a backend may split or transpose).
  kReduction,
  // One opaque node (`anchor`), optionally followed by an elementwise epilogue over the
  // anchor's output shape (bias + activation after matmul/conv2d).
  kOpaque,
};

// The role of a node inside a reduction group (see Group::role).
enum class Role : uint8_t {
  kFull,         // shape == domain
  kReducedKeep,  // shape == domain with reduce_axes set to 1 (keepdims=1 form)
  kReducedDrop,  // shape == domain with reduce_axes removed (keepdims=0 form)
};

struct Group {
  GroupKind kind = GroupKind::kElementwise;
  std::vector<int32_t> nodes;        // ascending node index (a valid evaluation order)
  std::vector<int32_t> inputs;       // ascending: nodes read by the group but not in it
                                     // (graph inputs, other groups' outputs)
  std::vector<int32_t> outputs;      // ascending: group nodes that are graph outputs or are
                                     // used by another group (these are materialised)
  int32_t anchor = -1;               // kOpaque: the opaque node; reductions: first reduction
  std::vector<int64_t> domain;       // loop domain: output shape (elementwise, opaque
                                     // epilogue = anchor's shape) or reduction input shape
  std::vector<int64_t> reduce_axes;  // reductions: sorted reduced axes of domain
};

struct Options {
  bool epilogues = true;          // let opaque nodes absorb an elementwise epilogue
  size_t max_group_nodes = 1024;  // bounds kernel size (and so compile time)
  // Treat `slice` as an affine index map: an elementwise node over its output shape that
  // reads its operand at offset + i·step. Its operand is never in the slice's group (the
  // backend lowers the slice as a strided load from a materialised buffer). Off by default
  // so backends that do not lower it keep slice opaque.
  bool index_maps = false;
};

// Whole plan: groups in a valid execution order (every group after the groups whose
// outputs it reads).
struct Plan {
  std::vector<Group> groups;
  std::vector<int32_t> group_of;  // node -> index in groups, -1 for "input" leaves
};

OpClass classify(const lt_graph_node& node);
bool is_elementwise_op(std::string_view op);
bool is_reduction_op(std::string_view op);
// A slice the planner may treat as an index map (Options::index_maps): one operand of the
// same rank, `starts`/`steps` INTS of that rank.
bool is_index_map(const lt_graph& graph, const lt_graph_node& node);

// Role of a node of `shape` inside a reduction group over (domain, axes); false if none.
bool role_of(const int64_t* shape, size_t rank, const std::vector<int64_t>& domain,
             const std::vector<int64_t>& axes, Role* out);

Plan plan(const lt_graph& graph, const Options& options = {});

using lower::find_attr;
using lower::OwnedGraph;
using lower::structural_hash;

}  // namespace lt::fusion

#endif  // LAZYTENSOR_FUSION_HPP
