// program.h — tpu_sim's compiled form of a graph region: its own copy of the nodes, the
// instruction list for the MXU, vector unit and DMA engines, and the cost model's figures.
// Built once by compile() and immutable afterwards (executables are shared across threads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lazytensor/lt_plugin.h"
#include "machine.h"

namespace lt::tpu {

enum class Op : uint8_t {
  Input,
  // unary
  Neg,
  Abs,
  Relu,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Sigmoid,
  Gelu,
  Sin,
  Cos,
  Floor,
  Not,
  // binary
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  And,
  Or,
  // other elementwise, creation
  Where,
  Cast,
  Full,
  Arange,
  // reductions
  Sum,
  Mean,
  Max,
  Min,
  Argmax,  // i64 output: index bookkeeping, emulated as two s32 words (see compiler.cpp)
  // matrix unit
  Matmul,
  Conv2d,
  // layout
  Reshape,
  Permute,
  BroadcastTo,
  Slice,
  Concat,
  Pad,
  Gather,
  ScatterAdd,
  // nn on the vector unit
  MaxPool2d,
  AvgPool2d,
  Softmax,
  LogSoftmax,
};

// A node with its attributes decoded. Which fields an op uses:
//   reductions: ints0 = axes, i = keepdims     permute: ints0 = perm
//   argmax: ints0 = {axis}, i = keepdims
//   slice: ints0 = starts, ints1 = steps        concat, gather, scatter_add, softmax: i = axis
//   pad: ints0 = before, ints1 = after, f0 = value   full: f0 = value
//   arange: f0 = start, f1 = step
//   conv2d: ints0 = stride, ints1 = padding, ints2 = dilation, i = groups
//   pools: ints0 = kernel, ints1 = stride, ints2 = padding
struct Node {
  Op op = Op::Input;
  lt_dtype dtype = LT_DTYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<int32_t> operands;
  std::vector<int64_t> ints0, ints1, ints2;
  int64_t i = 0;
  double f0 = 0, f1 = 0;
  int64_t numel = 1;
  uint64_t nbytes = 0;
};

// Engines of one TensorCore-like chip. DMA instructions move HBM<->VMEM and cost time only
// (host memory stands in for both); MXU/VPU/XLU instructions compute node `node`.
enum class Unit : uint8_t { DmaIn, DmaOut, Mxu, Vpu, Xlu };

struct Instr {
  Unit unit;
  int32_t node;
  double bytes = 0;  // DMA: bytes moved
  double ops = 0;    // MXU: padded FLOPs; VPU/XLU: vector element-ops
  double ns = 0;     // this instruction's time on its engine
  // MXU only: the tiled problem [batch, M, K, N] and its padded sizes.
  int64_t b = 0, m = 0, k = 0, n = 0, mp = 0, kp = 0, np = 0;
};

// A pipelined stage (one node): DMA overlaps compute, so it costs the longer of the two
// plus the pipeline fill (the first tile's DMA, which nothing hides).
struct Stage {
  int32_t node;
  double compute_ns = 0, dma_ns = 0, fill_ns = 0, ns = 0;
};

struct Cost {
  double simulated_ns = 0;
  double flops = 0;         // useful FLOPs of MXU ops (2*M*K*N per matmul)
  double padded_flops = 0;  // what the MXU actually spends after tile padding
  double hbm_bytes = 0;
  double mxu_ns = 0, vector_ns = 0, dma_ns = 0;
  double mxu_utilization = 0;  // flops / (simulated time * peak)
};

struct Program {
  MachineConfig machine;
  std::vector<Node> nodes;
  std::vector<int32_t> inputs, outputs;
  std::vector<Instr> instrs;
  std::vector<Stage> stages;
  std::vector<int32_t> last_use;  // per node: index of the last node reading it (-1: none)
  std::vector<uint8_t> is_output;
  uint64_t hbm_needed = 0;  // inputs + outputs + peak live intermediates
  Cost cost;
  std::string listing() const;  // human-readable instruction list (debugging, docs)
};

// Whether node `index` of `graph` can run here (dtype, op and attribute checks only).
bool supports_node(const lt_graph& graph, size_t index);

// Lowers a region to a Program and prices it. Throws Error: INVALID_ARGUMENT for malformed
// graphs, UNSUPPORTED for nodes supports_node rejects, OUT_OF_MEMORY when the live buffers
// exceed HBM capacity.
Program compile_program(const lt_graph& graph, const MachineConfig& machine);

// Runs a program on the host with TPU numerics. inputs/outputs are dense buffers sized as
// the program's input/output nodes.
void execute_program(const Program& program, const void* const* inputs, void* const* outputs);

// bf16 round-to-nearest-even of an f32 (result widened back to f32); NaN stays NaN.
float round_to_bf16(float x);
// C[M,N] = bf16(A[M,K]) * bf16(B[K,N]) with f32 accumulation (row-major).
void mxu_matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);

}  // namespace lt::tpu
