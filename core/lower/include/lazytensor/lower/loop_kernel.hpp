// loop_kernel.hpp — the loop-level schedule of one fused kernel (a kernel step of the kernel
// planner), decided once here and rendered by each code generator (cpu_jit as LLVM IR,
// gpu_opencl as OpenCL C), in the manner of tinygrad's linearizer and its renderers: the domain
// split into kept dims (one row per kept index) and reduced dims, each node's role, the
// reduction phases (a reduction reading another runs in a later pass over the row: max, then the
// sum of exp(x - max), ...), which nodes are evaluated once per row after each phase, and which
// outputs are stored once per row and which over the full domain; and the loops themselves: how
// every buffer is read as an offset plus a stride per loop, over the kept and the reduced dims,
// each coalesced.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "lazytensor/lower/fusion.hpp"
#include "lazytensor/lower/kernel_plan.hpp"

namespace lt::lower {

// How a kernel reads one buffer, or a node's own flat index, at a point of its loops: the
// element offset + Σ i_d·strides[d] over LoopKernel::loop_dims. Renderers evaluate it as that
// sum (cpu_jit: one running offset per access, advanced by each loop), so broadcasting, a slice's
// map and the row a per-row value is read at are decided here once. Two reads are not affine
// and say so here too (LoopKernel::affine is then false): pad's and concat's, valid only inside
// windows, and gather's, whose offset adds a clamped coordinate read from its index buffer.
struct Access {
  int32_t buffer = -1;           // the node whose value is read (an output: its own buffer)
  int32_t user = -1;             // the node reading it (buffer == user: the node's own buffer)
  bool index = false;            // the flat index of node `user` (arange, random_*): no buffer
  int64_t offset = 0;            // elements (a slice's start)
  std::vector<int64_t> strides;  // per loop dim; 0 where the index does not move the read
  int32_t operand = -1;          // which operand of `user` (concat reads each part by its own)
  // pad / concat: the read is valid where, for every window, the coordinate Σ i_d·coord[d] (the
  // user's index along one of its dims, of `extent`) lies in [lo, hi); elsewhere it is `fill`.
  // Loops never merge across such a dim.
  struct Window {
    std::vector<int64_t> coord;  // per loop dim
    int64_t lo = 0, hi = 0, extent = 0;
  };
  std::vector<Window> windows;
  double fill = 0;
  // gather's data: the offset adds clamp(the value read by access `gather`, 0, gather_extent - 1)
  // · gather_stride (the index along the gathered axis; its dims read the index buffer).
  int gather = -1;
  int64_t gather_extent = 0, gather_stride = 0;
};

struct LoopKernel {
  std::vector<int32_t> nodes;       // the kernel's nodes, ascending
  std::vector<int32_t> outputs;     // the nodes it stores, as given
  std::vector<int64_t> domain;      // loop domain
  std::vector<char> is_reduced;     // per domain dim: one of the reduce axes
  std::vector<int64_t> kept;        // extents of the kept dims, in order (the rows)
  std::vector<int64_t> reduced;     // extents of the reduced dims, in order (a row)
  std::vector<fusion::Role> roles;  // per node (by position in `nodes`); no role: kFull
  std::vector<int> levels;          // per node: reductions on its longest in-kernel path
  std::vector<int32_t> reductions;  // the reduction nodes (sum, mean, max, min), ascending
  // phases[p]: the reductions that pass p + 1 over a row accumulates (those of level p + 1).
  std::vector<std::vector<int32_t>> phases;
  // row_nodes[p]: the nodes of a reduced role, reductions aside, of level p: evaluated once
  // per row before the first pass (p = 0) or after pass p, when what they read is known.
  std::vector<std::vector<int32_t>> row_nodes;
  // Outputs of a full role (and any of no role: a generator that cannot store such a shape
  // over the domain splits the group), stored in a last pass over each row; outputs of a
  // reduced role, stored once per row.
  std::vector<int32_t> full_outputs, row_outputs;
  // A value the last phase computes for its reduction that a full output would compute again
  // in the output pass (softmax's exp(x - max), summed by the last phase and divided by the sum
  // in the output pass): the last phase stores it into that output's own buffer and the output
  // pass reads it back, so a transcendental is evaluated once per element.
  struct Stash {
    int32_t output, value;
  };
  std::vector<Stash> stashes;
  // The loops: the kept dims (the rows; the first `outer_loops`), then the reduced dims (none in
  // an elementwise kernel), each part coalesced over every access (lower::coalesce).
  std::vector<int64_t> loop_dims;
  size_t outer_loops = 0;
  // Every read of a value from outside the kernel by a kernel node, each arange / random node's
  // own index, then every output's own buffer, in that order (the kernel's nodes ascending).
  std::vector<Access> accesses;
  // Every read of a buffer is a plain Access (false: a window, a gather, or a read that no
  // Access says: a layout op reading a value of the kernel, a contraction's operands).
  bool affine = true;
  std::map<std::pair<int32_t, int32_t>, int> access_of;  // (buffer, or ~node: index; user)
  // A column reduction (a bias gradient: the sum over [batch, time] of [batch, time, width]):
  // the kept dims coalesce to one loop, loop 0, along which every read moves by 0 or 1 element
  // and some source is contiguous; the kernel is one phase whose reductions (sum, mean, max,
  // min; not bool) are outputs nothing in it reads, and every other node is full-size. Read row
  // by row, each output would walk a strided column; instead a renderer runs the kept loop
  // innermost (vectorised, one work item per kept index on a GPU), inside the reduced loops,
  // accumulating in the outputs' own buffers, and stores the full outputs as it visits them:
  //   out[j] = identity; for r in reduced: for j in kept: out[j] = out[j] op x(r, j)
  // (a mean divided by row_length() after).
  bool column_reduction = false;

  std::vector<int32_t> reductions_by_phase() const;  // phases[0], then phases[1], ...
  bool in_kernel(int32_t node) const;
  int position(int32_t node) const;  // in `nodes`; -1 outside the kernel
  // Of a kernel node (outside the kernel: kFull and 0).
  fusion::Role role(int32_t node) const {
    const int p = position(node);
    return p < 0 ? fusion::Role::kFull : roles[p];
  }
  int level(int32_t node) const {
    const int p = position(node);
    return p < 0 ? 0 : levels[p];
  }
  int access(int32_t buffer, int32_t user, bool index = false) const;  // in accesses; -1: none
  int operand_access(int32_t user, size_t k) const;  // how user reads its operand k; -1: none
  // Whether every read moves by 0 or 1 element per step of loop `d`: contiguous or broadcast, so
  // a vector of consecutive indices of d is one vector load (false when some read is not affine).
  bool dense_along(size_t d) const;
  int64_t rows() const;        // product of `kept`
  int64_t row_length() const;  // product of `reduced`
};

// What a generator tells the schedule.
struct LoopOptions {
  // The most bytes of one row of a stashed value (0: no stashes). A stash pays where the row
  // stays in cache between the last phase and the output pass; beyond, it adds a write and a
  // read of the output to the traffic.
  size_t stash_row_bytes = 0;
  // A node whose value the generator's own kernel computes at every point of the domain (a
  // matmul, conv2d or scatter_add with its elementwise epilogue): its operands get no Access,
  // and the loops are the domain's dims as they are (not coalesced), so that the coordinates
  // of the anchor's kernel index them.
  int32_t anchor = -1;
};

// The schedule of the kernel over `nodes` (ascending, operands before users) storing `outputs`,
// over `domain` with `reduce_axes` (ascending; empty: an elementwise kernel, whose nodes are all
// kFull and level 0).
LoopKernel schedule_loops(const lt_graph& graph, std::span<const int32_t> nodes,
                          std::span<const int32_t> outputs, std::span<const int64_t> domain,
                          std::span<const int64_t> reduce_axes, const LoopOptions& options = {});
inline LoopKernel schedule_loops(const lt_graph& graph, const Step& step,
                                 const LoopOptions& options = {}) {
  return schedule_loops(graph, step.nodes, step.outputs, step.domain, step.reduce_axes, options);
}

}  // namespace lt::lower
