// program.h — tpu_sim's compiled form of a graph region: its nodes (the matrix unit's, or a
// shared host kernel for the vector unit), the instruction list for the MXU, vector unit and
// DMA engines, and the cost model's figures. Built once by compile_program() and immutable
// afterwards (executables are shared across threads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lazytensor/host/kernels.hpp"
#include "lazytensor/lower/ops.hpp"
#include "machine.h"

namespace lt::tpu {

// A node as the simulator runs it. MXU nodes (matmul, conv2d) run on the bf16 systolic array;
// every other computing node is a vector-unit instruction executed by its host kernel (f32,
// i32, bool, and i64 emulated as two s32 words).
struct Node {
  OpId op = kOpInput;
  lt_dtype dtype = LT_DTYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<int32_t> operands;
  int64_t numel = 1;
  uint64_t nbytes = 0;
  host::KernelFn kernel = nullptr;  // vector unit
  uint32_t param_off = 0, param_len = 0;
  host::ConvGeom conv{};  // conv2d on the MXU
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
  std::vector<int64_t> params;  // host kernel parameters of every node
  std::vector<int32_t> inputs, outputs;
  std::vector<Instr> instrs;
  std::vector<Stage> stages;
  std::vector<int32_t> last_use;  // per node: index of the last node reading it (-1: none)
  std::vector<uint8_t> is_output;
  uint64_t hbm_needed = 0;  // inputs + outputs + peak live intermediates
  Cost cost;
  std::string listing() const;  // human-readable instruction list (debugging, docs)
};

// Whether node `index` of a validated graph can run here (the chip's dtypes, an MXU op or a
// vector-unit op the host kernels compute).
bool supports_node(const lt_graph& graph, size_t index);

// Lowers a validated region to a Program and prices it. Throws UNSUPPORTED for nodes
// supports_node rejects, OUT_OF_MEMORY when the live buffers exceed HBM capacity.
Program compile_program(const lt_graph& graph, const MachineConfig& machine);

// Runs a program on the host with TPU numerics. inputs/outputs are dense buffers sized as
// the program's input/output nodes.
void execute_program(const Program& program, const void* const* inputs, void* const* outputs);

}  // namespace lt::tpu
