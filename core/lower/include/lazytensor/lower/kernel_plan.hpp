// kernel_plan.hpp — the one kernel planner of the compiling backends: from the fusion plan to
// the steps that run (a generated kernel, a host step, a group split node by node), which values
// get buffers, and the temporaries packed by live range into one arena. cpu_jit, gpu_opencl and
// the core's graph dump all read the same plan, so a dump shows what the backend runs.
//
// A backend says what is special about it in a KernelTarget (which nodes its code generator
// takes, which groups are too small to be worth a kernel, which values it evaluates where they
// are read); everything else is decided here once. All walks are iterative.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "lazytensor/lower/buffers.hpp"
#include "lazytensor/lower/fusion.hpp"

namespace lt::lower {

enum class StepKind : uint8_t {
  kKernel,  // the nodes of one fusion group as one generated kernel
  kHost,    // one node run by a host kernel (LazyTensor::host_kernels)
  kSplit,   // one node of a group the code generator could not lower as one kernel
};

struct Step {
  StepKind kind = StepKind::kKernel;
  fusion::GroupKind group_kind = fusion::GroupKind::kElementwise;  // of the step's own nodes
  int32_t group = -1;                // index in KernelPlan::fusion.groups
  int32_t anchor = -1;               // kOpaque: the opaque node; reductions: first reduction
  std::vector<int32_t> nodes;        // ascending
  std::vector<int32_t> outputs;      // ascending: the step's nodes that get a buffer
  std::vector<int64_t> domain;       // loop domain (fusion::Group::domain)
  std::vector<int64_t> reduce_axes;  // reductions: reduced axes of domain
};

// What a backend tells the planner. Every predicate may be empty (the default answer).
struct KernelTarget {
  fusion::Options fusion;
  // Whether the code generator takes node `node` (default: every node). A group holding a node
  // it does not take runs as host steps; an opaque anchor it does not take runs as a host step
  // and the rest of its group (the epilogue) as a kernel.
  std::function<bool(const lt_graph&, size_t node)> kernel_node;
  // Groups over fewer elements run as host steps (a kernel costs more to compile than it saves).
  int64_t min_kernel_elements = 0;
  // Values a kernel evaluates wherever it reads them (gpu_opencl: `full` constants): they get
  // no buffer unless a host step, a buffer-reading anchor or the graph's outputs read them.
  std::function<bool(const lt_graph_node&)> evaluated_where_read;
  // Anchors that read their operands from buffers even when those are evaluated where read
  // (gpu_opencl: matmul, conv2d and scatter_add).
  std::function<bool(const lt_graph_node&)> anchor_reads_buffers;
};

struct KernelPlan {
  fusion::Plan fusion;
  std::vector<Step> steps;   // in execution order; groups whose values nobody reads are dropped
  std::vector<char> stored;  // per node: it has a buffer (graph inputs and outputs included)
  size_t kernel_groups = 0;  // steps of kind kKernel
  size_t split_groups = 0;   // groups split node by node (split())
  // Replaces kernel step `step` by one kSplit step per node, each node stored: for a code
  // generator that cannot lower a group as one kernel. Later steps keep their indices shifted.
  void split(const lt_graph& graph, size_t step);
};

KernelPlan plan_kernels(const lt_graph& graph, const KernelTarget& target);

// The temporaries of a plan (stored values that are neither graph inputs nor outputs) and
// their place in one arena: a value written by step i and last read by step j lives [i, j].
struct ArenaLayout {
  std::vector<int32_t> values;  // ascending node indices
  std::vector<LiveRange> ranges;
  ArenaPlan arena;                // offsets per value (aligned to `align`), total bytes
  std::vector<size_t> offset_of;  // per node: its offset (SIZE_MAX if not in the arena)
};
// `bytes[n]`: the size of node n's value; offsets are multiples of `align` (a power of two, at
// least 64).
ArenaLayout pack_temporaries(const lt_graph& graph, const KernelPlan& plan,
                             const std::vector<size_t>& bytes, size_t align = 64);

// The targets of the in-tree compiling backends, by name ("cpu_jit", "gpu_opencl"), for the
// backends themselves and for the core's graph dump; nullptr for any other backend.
const KernelTarget* builtin_kernel_target(std::string_view backend);

// The op table's answer to what a code generator may evaluate at any index of its output
// (elementwise, creation and layout primitives except scatter_add) and which ops are the
// primitive reductions (sum, max, min).
bool is_inline_primitive(std::string_view op);
bool is_reduce_primitive(std::string_view op);

// cpu_jit's code generator: elementwise ops, reductions, slices, random_unit and random_normal
// over non-16-bit dtypes of rank at most 16 (bf16/f16 are host-kernel storage types there);
// random_uniform reaches it decomposed.
bool cpu_jit_kernel_node(const lt_graph& graph, size_t node);

}  // namespace lt::lower
