// executor.cpp — runs a compiled Program on the host: MXU instructions in bf16 (inputs rounded
// to bf16, products and sums in f32), vector-unit instructions through their host kernels.
// DMA instructions only cost simulated time: host memory stands in for HBM and VMEM.
#include <cstring>
#include <memory>

#include "lazytensor/lower/bf16.hpp"
#include "program.h"

namespace lt::tpu {
namespace {

// A copy of `n` floats rounded to bf16: what the systolic array multiplies. bf16 values and
// their products are exact in f32, so an f32 GEMM on the copies is the MXU's arithmetic.
std::vector<float> bf16_copy(const float* x, int64_t n) {
  std::vector<float> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[size_t(i)] = lower::round_to_bf16(x[i]);
  return r;
}

void mxu(const Program& p, const Node& n, const std::vector<void*>& ptr, void* out) {
  auto in = [&](size_t k) { return static_cast<const float*>(ptr[size_t(n.operands[k])]); };
  const Node& a = p.nodes[size_t(n.operands[0])];
  const Node& b = p.nodes[size_t(n.operands[1])];
  std::vector<float> ar = bf16_copy(in(0), a.numel), br = bf16_copy(in(1), b.numel);
  if (n.op == kOpMatmul) {
    size_t r = n.shape.size();
    int64_t batch = r == 3 ? n.shape[0] : 1, m = a.shape[r - 2], k = a.shape[r - 1];
    host::gemm_batched<float>(batch, m, n.shape[r - 1], k, ar.data(), br.data(),
                              static_cast<float*>(out));
    return;
  }
  // conv2d: im2col (the vector unit's job on a TPU), then MXU matmuls; the bias is added in f32.
  const float* bias = n.operands.size() == 3 ? in(2) : nullptr;
  host::conv2d<float>(n.conv, ar.data(), br.data(), bias, static_cast<float*>(out), nullptr);
}

}  // namespace

void execute_program(const Program& p, const void* const* inputs, void* const* outputs) {
  const size_t count = p.nodes.size();
  std::vector<void*> ptr(count, nullptr);
  std::vector<std::unique_ptr<std::byte[]>> owned(count);
  for (size_t k = 0; k < p.inputs.size(); ++k)
    ptr[size_t(p.inputs[k])] = const_cast<void*>(inputs[k]);
  for (size_t k = p.outputs.size(); k-- > 0;) {
    size_t v = size_t(p.outputs[k]);
    if (p.nodes[v].op != kOpInput) ptr[v] = outputs[k];
  }
  std::vector<host::TensorArg> args;
  auto arg = [&](size_t v) {
    const Node& n = p.nodes[v];
    return host::TensorArg{static_cast<char*>(ptr[v]), n.dtype, static_cast<int>(n.shape.size()),
                           n.shape.data(), n.numel};
  };
  for (size_t i = 0; i < count; ++i) {
    const Node& n = p.nodes[i];
    if (n.op == kOpInput) continue;
    if (!ptr[i]) {
      owned[i].reset(new std::byte[std::max<uint64_t>(n.nbytes, 1)]);
      ptr[i] = owned[i].get();
    }
    if (!n.kernel) {
      mxu(p, n, ptr, ptr[i]);
    } else {
      args.clear();
      for (int32_t o : n.operands) args.push_back(arg(size_t(o)));
      host::KernelCall call{arg(i), args.data(), args.size(), p.params.data() + n.param_off,
                            n.param_len};
      n.kernel(call);
    }
    for (int32_t o : n.operands)
      if (p.last_use[size_t(o)] == int32_t(i)) owned[size_t(o)].reset();
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    size_t v = size_t(p.outputs[k]);
    if (outputs[k] != ptr[v] && p.nodes[v].nbytes)
      std::memcpy(outputs[k], ptr[v], p.nodes[v].nbytes);
  }
}

}  // namespace lt::tpu
