// compiler.cpp — what tpu_sim accepts (supports_node), and the lowering of a validated region
// to MXU / vector / DMA instructions with the cost model and the HBM capacity check. Vector-unit
// nodes get their shared host kernel (LazyTensor::host_kernels) here, once.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "lazytensor/lower/graph.hpp"
#include "lazytensor/plugin_kit.hpp"
#include "program.h"

namespace lt::tpu {
namespace {

using kit::fail;

// Dtype classes an op accepts. F = f32, I = i32, B = bool, L = i64. A TPU has no 64-bit
// integer datapath: XLA emulates s64 with pairs of s32 words, which is cheap for data
// movement, compares, casts, sums and add/sub/mul (with carries), not for division. So i64
// (kL) is accepted by the index-bookkeeping ops (kIdx: layout, compare, where, cast, full,
// arange, sum/max/min, argmax's output, neg/abs/add/sub/mul/maximum/minimum) and priced at two
// vector ops per element (four for mul); i64 div falls back. No f64 at all.
// H = bf16/f16, the storage types: moved, cast and (bf16) multiplied on the MXU; their other
// arithmetic the core widens to f32 between casts (the VPU has no 16-bit ALU before v5).
enum : uint8_t {
  kF = 1,
  kI = 2,
  kB = 4,
  kL = 8,
  kH = 16,
  kFI = kF | kI,
  kAll = kF | kI | kB,
  kIdx = kAll | kL | kH,
};

// What the chip runs, per op; 0: not here (the core decomposes composites such as silu).
uint8_t op_dtypes(OpId op) {
  switch (op) {
    case kOpInput:
    case kOpEq:
    case kOpNe:
    case kOpLt:
    case kOpLe:
    case kOpGt:
    case kOpGe:
    case kOpWhere:
    case kOpCast:
    case kOpFull:
    case kOpArange:
    case kOpReshape:
    case kOpPermute:
    case kOpBroadcastTo:
    case kOpSlice:
    case kOpConcat:
    case kOpPad:
    case kOpGather:
      return kIdx;
    case kOpNeg:
    case kOpAbs:
    case kOpAdd:
    case kOpSub:
    case kOpMul:
    case kOpMaximum:
    case kOpMinimum:
    case kOpSum:
    case kOpMax:
    case kOpMin:
      return kFI | kL;
    case kOpRelu:
    case kOpDiv:
    case kOpScatterAdd:
      return kFI;
    case kOpNot:
    case kOpAnd:
    case kOpOr:
      return kB;
    case kOpArgmax:
      return kL;
    case kOpExp:
    case kOpLog:
    case kOpSqrt:
    case kOpRsqrt:
    case kOpTanh:
    case kOpSigmoid:
    case kOpGelu:
    case kOpSin:
    case kOpCos:
    case kOpFloor:
    case kOpPow:
    case kOpRandomUnit:
    case kOpRandomUniform:
    case kOpRandomNormal:
    case kOpMean:
    case kOpMaxPool2d:
    case kOpAvgPool2d:
    case kOpSoftmax:
    case kOpLogSoftmax:
      return kF;
    case kOpMatmul:
    case kOpConv2d:
      return kF | kH;
    default:
      return 0;
  }
}

uint8_t dtype_class(lt_dtype d) {
  switch (d) {
    case LT_DTYPE_F32:
      return kF;
    case LT_DTYPE_I32:
      return kI;
    case LT_DTYPE_BOOL:
      return kB;
    case LT_DTYPE_I64:
      return kL;
    case LT_DTYPE_BF16:
    case LT_DTYPE_F16:
      return kH;
    default:
      return 0;  // f64: not on this chip (falls back)
  }
}

bool is_mxu(OpId op) {
  return op == kOpMatmul || op == kOpConv2d;
}
bool is_elementwise(OpId op) {
  return lower::op_info(op).category == lower::Category::kElementwise;
}
bool is_transcendental(OpId op) {  // and the counter-based generator's hashing
  return (op >= kOpExp && op <= kOpCos && op != kOpRelu && op != kOpFloor) || op == kOpPow ||
         op == kOpRandomUnit || op == kOpRandomUniform || op == kOpRandomNormal;
}

// Output-stationary tiling: an f32 accumulator block b x b takes half of VMEM, the other
// half double-buffers K-panels. A and B are re-read once per block column / row.
double matmul_hbm_bytes(const MachineConfig& mc, double batch, int64_t m, int64_t k, int64_t n,
                        double esize) {
  double half = double(mc.vmem_bytes()) / 2.0;
  int64_t b = int64_t(std::sqrt(half / 4.0));
  b = std::max<int64_t>(mc.array_rows, b / mc.array_rows * mc.array_rows);
  double mb = std::ceil(double(std::max<int64_t>(m, 1)) / double(b));
  double nb = std::ceil(double(std::max<int64_t>(n, 1)) / double(b));
  return batch * esize *
         (double(m) * double(k) * nb + double(k) * double(n) * mb + double(m) * double(n));
}

int64_t round_up(int64_t x, int64_t t) {
  return (x + t - 1) / t * t;
}

}  // namespace

bool supports_node(const lt_graph& graph, size_t index) {
  const lt_graph_node& g = graph.nodes[index];
  const lower::OpInfo* info = lower::find_op(g.op);
  if (!info) return false;  // custom ops
  const uint8_t allowed = op_dtypes(info->id), out_class = dtype_class(g.dtype);
  if (!allowed || !out_class) return false;
  // Compares, cast, where, gather, scatter_add and argmax take operands of other classes than
  // their output; every other op's operands share its output's class.
  const OpId op = info->id;
  const bool mixed = info->rule == lower::Rule::compare || op == kOpCast || op == kOpWhere ||
                     op == kOpGather || op == kOpScatterAdd || op == kOpArgmax ||
                     info->rule == lower::Rule::random_unit || info->rule == lower::Rule::random;
  for (size_t k = 0; k < g.num_operands; ++k) {
    uint8_t cls = dtype_class(graph.nodes[g.operands[k]].dtype);
    if (!cls || (!mixed && !(allowed & cls))) return false;
  }
  if (op == kOpArgmax && !(dtype_class(graph.nodes[g.operands[0]].dtype) & (kFI | kL)))
    return false;
  if (!(allowed & out_class)) return false;
  if (is_mxu(op) && g.dtype == LT_DTYPE_F16) return false;  // the MXU multiplies bf16, not f16
  // conv2d's gradients are convolutions for the MXU (their decomposition), not host kernels.
  if (op == kOpConv2dBackwardData || op == kOpConv2dBackwardWeight) return false;
  std::vector<int64_t> params;
  return is_mxu(op) || host::prepare(graph, index, &params) != nullptr;
}

Program compile_program(const lt_graph& graph, const MachineConfig& mc) {
  Program p;
  p.machine = mc;
  p.nodes.resize(graph.num_nodes);
  for (size_t i = 0; i < graph.num_nodes; ++i) {
    const lt_graph_node& g = graph.nodes[i];
    Node& n = p.nodes[i];
    if (std::string_view(g.op) != "input" && !supports_node(graph, i))
      fail(LT_STATUS_UNSUPPORTED, "node " + std::to_string(i) + " (" + g.op + ", " +
                                      lt_dtype_name(g.dtype) + ") is not supported by tpu_sim");
    n.op = std::string_view(g.op) == "input" ? kOpInput : lower::find_op(g.op)->id;
    n.dtype = g.dtype;
    n.shape.assign(g.shape, g.shape + g.rank);
    n.operands.assign(g.operands, g.operands + g.num_operands);
    n.numel = lower::DescRef(g).numel();
    n.nbytes = uint64_t(n.numel) * lt_dtype_size(n.dtype);
    if (n.op == kOpConv2d) n.conv = host::conv_geom(graph, i);
    if (n.op == kOpInput || is_mxu(n.op)) continue;
    n.param_off = static_cast<uint32_t>(p.params.size());
    n.kernel = host::prepare(graph, i, &p.params);
    n.param_len = static_cast<uint32_t>(p.params.size() - n.param_off);
  }
  std::vector<uint8_t> is_input(p.nodes.size(), 0);
  for (size_t k = 0; k < graph.num_inputs; ++k) {
    is_input[size_t(graph.inputs[k])] = 1;
    p.inputs.push_back(graph.inputs[k]);
  }
  p.is_output.assign(p.nodes.size(), 0);
  for (size_t k = 0; k < graph.num_outputs; ++k) {
    p.is_output[size_t(graph.outputs[k])] = 1;
    p.outputs.push_back(graph.outputs[k]);
  }

  // Liveness and fusion: an elementwise intermediate read only by elementwise ops stays in
  // VMEM (XLA-style loop fusion): it costs no HBM traffic and no HBM space.
  const size_t count = p.nodes.size();
  p.last_use.assign(count, -1);
  std::vector<uint8_t> only_elementwise_users(count, 1);
  for (size_t i = 0; i < count; ++i) {
    for (int32_t o : p.nodes[i].operands) {
      p.last_use[size_t(o)] = int32_t(i);
      if (!is_elementwise(p.nodes[i].op)) only_elementwise_users[size_t(o)] = 0;
    }
  }
  std::vector<uint8_t> in_vmem(count, 0);
  for (size_t i = 0; i < count; ++i) {
    in_vmem[i] = is_elementwise(p.nodes[i].op) && !p.is_output[i] && p.last_use[i] >= 0 &&
                 only_elementwise_users[i];
  }

  // HBM capacity: inputs and outputs live throughout; intermediates from definition to last use.
  double in_bytes = 0, out_bytes = 0, live = 0, peak = 0;
  for (int32_t v : p.inputs) in_bytes += double(p.nodes[size_t(v)].nbytes);
  for (size_t i = 0; i < count; ++i) {
    if (p.is_output[i]) out_bytes += double(p.nodes[i].nbytes);
  }
  std::vector<std::vector<int32_t>> dies_at(count);
  for (size_t i = 0; i < count; ++i) {
    if (p.last_use[i] >= 0) dies_at[size_t(p.last_use[i])].push_back(int32_t(i));
  }
  auto counted = [&](size_t i) { return !is_input[i] && !p.is_output[i] && !in_vmem[i]; };
  for (size_t i = 0; i < count; ++i) {
    if (counted(i)) live += double(p.nodes[i].nbytes);
    peak = std::max(peak, live);
    if (counted(i) && p.last_use[i] < 0) live -= double(p.nodes[i].nbytes);
    for (int32_t d : dies_at[i]) {
      if (counted(size_t(d))) live -= double(p.nodes[size_t(d)].nbytes);
    }
  }
  double need = in_bytes + out_bytes + peak;
  p.hbm_needed = uint64_t(need);
  if (need > double(mc.hbm_capacity_bytes())) {
    fail(LT_STATUS_OUT_OF_MEMORY,
         "program needs " + format_bytes(need) + " of HBM (inputs " + format_bytes(in_bytes) +
             ", outputs " + format_bytes(out_bytes) + ", peak intermediates " + format_bytes(peak) +
             "), capacity " + format_bytes(double(mc.hbm_capacity_bytes())));
  }

  // Lowering and pricing, one pipelined stage per computing node.
  const double bw = mc.hbm_bytes_per_s(), vec = mc.vector_ops_per_s(), peak_f = mc.peak_flops();
  const double fill_tile = double(mc.array_rows * mc.array_cols) * 4.0 * 2.0;
  Cost& c = p.cost;
  p.instrs.reserve(3 * count);  // at most DMA in, compute, DMA out per node: no doubling slack
  for (size_t i = 0; i < count; ++i) {
    const Node& n = p.nodes[i];
    if (n.op == kOpInput || n.op == kOpReshape) continue;  // reshape: a bitcast in HBM
    Stage st{int32_t(i)};
    double read = 0;
    std::vector<int32_t> seen;
    for (int32_t o : n.operands) {
      if (std::find(seen.begin(), seen.end(), o) != seen.end()) continue;
      seen.push_back(o);
      if (!in_vmem[size_t(o)]) read += double(p.nodes[size_t(o)].nbytes);
    }
    double write = in_vmem[i] ? 0.0 : double(n.nbytes);
    Instr compute{Unit::Vpu, int32_t(i)};
    if (n.op == kOpMatmul || n.op == kOpConv2d) {
      compute.unit = Unit::Mxu;
      if (n.op == kOpMatmul) {
        size_t r = n.shape.size();
        const auto& a = p.nodes[size_t(n.operands[0])].shape;
        compute.b = r == 3 ? n.shape[0] : 1;
        compute.m = a[r - 2];
        compute.k = a[r - 1];
        compute.n = n.shape[r - 1];
        const double esize = double(lt_dtype_size(n.dtype));  // bf16 operands: half the bytes
        read = matmul_hbm_bytes(mc, double(compute.b), compute.m, compute.k, compute.n, esize) -
               double(n.nbytes);
      } else {
        const auto& w = p.nodes[size_t(n.operands[1])].shape;
        compute.b = n.conv.G;  // groups
        compute.m = n.shape[0] * n.shape[2] * n.shape[3];
        compute.k = w[1] * w[2] * w[3];
        compute.n = w[0] / n.conv.G;
      }
      compute.mp = round_up(compute.m, mc.array_rows);
      compute.kp = round_up(compute.k, mc.array_rows);
      compute.np = round_up(compute.n, mc.array_cols);
      compute.ops =
          2.0 * double(compute.b) * double(compute.mp) * double(compute.kp) * double(compute.np);
      compute.ns = compute.ops / peak_f * 1e9;
      c.flops +=
          2.0 * double(compute.b) * double(compute.m) * double(compute.k) * double(compute.n);
      c.padded_flops += compute.ops;
      c.mxu_ns += compute.ns;
    } else {
      double per_elem = 1.0;
      double elems = double(n.numel);
      if (is_transcendental(n.op)) per_elem = 4.0;
      if (n.op == kOpGelu) per_elem = 8.0;
      if (n.op == kOpSoftmax || n.op == kOpLogSoftmax) per_elem = 8.0;
      if (lower::op_info(n.op).category == lower::Category::kReduction) {
        elems = double(p.nodes[size_t(n.operands[0])].numel);
      }
      if (n.op == kOpArgmax) per_elem = 2.0;  // compare + select of the index
      bool wide = n.dtype == LT_DTYPE_I64;
      for (int32_t o : n.operands) wide = wide || p.nodes[size_t(o)].dtype == LT_DTYPE_I64;
      if (wide) per_elem *= n.op == kOpMul ? 4.0 : 2.0;  // s64 emulated as two s32 words
      if (n.op == kOpMaxPool2d || n.op == kOpAvgPool2d)
        per_elem = double(p.params[n.param_off] * p.params[n.param_off + 1]);  // kernel area
      if (lower::op_info(n.op).category == lower::Category::kLayout && n.op != kOpReshape)
        compute.unit = Unit::Xlu;
      if (n.op == kOpScatterAdd) {  // copy a, then one read-modify-write per update
        elems = double(n.numel) + double(p.nodes[size_t(n.operands[2])].numel);
      }
      compute.ops = elems * per_elem;
      compute.ns = compute.ops / vec * 1e9;
      c.vector_ns += compute.ns;
    }
    if (read > 0) {
      Instr in{Unit::DmaIn, int32_t(i)};
      in.bytes = read;
      in.ns = read / bw * 1e9;
      p.instrs.push_back(in);
    }
    p.instrs.push_back(compute);
    if (write > 0) {
      Instr out{Unit::DmaOut, int32_t(i)};
      out.bytes = write;
      out.ns = write / bw * 1e9;
      p.instrs.push_back(out);
    }
    st.compute_ns = compute.ns;
    st.dma_ns = (read + write) / bw * 1e9;
    st.fill_ns = std::min(read + write, fill_tile) / bw * 1e9;
    st.ns = std::max(st.compute_ns, st.dma_ns) + st.fill_ns;
    c.hbm_bytes += read + write;
    c.dma_ns += st.dma_ns;
    c.simulated_ns += st.ns;
    p.stages.push_back(st);
  }
  c.simulated_ns += mc.launch_overhead_us * 1e3;
  c.mxu_utilization = c.simulated_ns > 0 ? c.flops / (c.simulated_ns * 1e-9 * peak_f) : 0.0;
  return p;
}

std::string Program::listing() const {
  static const char* unit_names[] = {"DMA_IN", "DMA_OUT", "MXU", "VPU", "XLU"};
  std::string s;
  char line[256];
  for (const Instr& in : instrs) {
    const Node& n = nodes[size_t(in.node)];
    if (in.unit == Unit::Mxu) {
      std::snprintf(
          line, sizeof line, "%-7s %%%d %s [%lldx%lldx%lldx%lld] padded [%lldx%lldx%lld] %.3f us\n",
          unit_names[int(in.unit)], in.node, std::string(lower::op_info(n.op).name).c_str(),
          (long long)in.b, (long long)in.m, (long long)in.k, (long long)in.n, (long long)in.mp,
          (long long)in.kp, (long long)in.np, in.ns / 1e3);
    } else {
      std::snprintf(line, sizeof line, "%-7s %%%d %s %s bytes=%.0f ops=%.0f %.3f us\n",
                    unit_names[int(in.unit)], in.node,
                    std::string(lower::op_info(n.op).name).c_str(),
                    lower::shape_str(n.shape).c_str(), in.bytes, in.ops, in.ns / 1e3);
    }
    s += line;
  }
  return s;
}

}  // namespace lt::tpu
