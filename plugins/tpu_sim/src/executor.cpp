// executor.cpp — runs a compiled Program on the host: MXU instructions in bf16 (inputs rounded
// to bf16, products and sums in f32), vector-unit instructions through their host kernels.
// DMA instructions only cost simulated time: host memory stands in for HBM and VMEM.
#include <cstring>
#include <memory>

#include "lazytensor/lower/bf16.hpp"
#include "program.h"

namespace lt::tpu {
namespace {

// A copy of operand `x` as the floats the systolic array multiplies: f32 rounded to bf16, bf16
// widened. bf16 values and their products are exact in f32, so an f32 GEMM on the copies is the
// MXU's arithmetic (f32 accumulation).
std::vector<float> bf16_copy(const Node& x, const void* data) {
  std::vector<float> r(static_cast<size_t>(x.numel));
  if (x.dtype == LT_DTYPE_BF16) {
    const auto* b = static_cast<const uint16_t*>(data);
    for (int64_t i = 0; i < x.numel; ++i) r[size_t(i)] = lower::bf16_to_float(b[i]);
  } else {
    const auto* f = static_cast<const float*>(data);
    for (int64_t i = 0; i < x.numel; ++i) r[size_t(i)] = lower::round_to_bf16(f[i]);
  }
  return r;
}

void mxu(const Program& p, const Node& n, const std::vector<void*>& ptr, void* out) {
  const Node& a = p.nodes[size_t(n.operands[0])];
  const Node& b = p.nodes[size_t(n.operands[1])];
  std::vector<float> ar = bf16_copy(a, ptr[size_t(n.operands[0])]);
  std::vector<float> br = bf16_copy(b, ptr[size_t(n.operands[1])]);
  const bool to_bf16 = n.dtype == LT_DTYPE_BF16;  // accumulate in f32, round on store
  std::vector<float> acc(to_bf16 ? static_cast<size_t>(n.numel) : 0);
  float* res = to_bf16 ? acc.data() : static_cast<float*>(out);
  if (n.op == kOpMatmul) {
    size_t r = n.shape.size();
    int64_t batch = r == 3 ? n.shape[0] : 1, m = a.shape[r - 2], k = a.shape[r - 1];
    host::gemm_batched<float>(batch, m, n.shape[r - 1], k, ar.data(), br.data(), res);
  } else {
    // conv2d: im2col (the vector unit's job on a TPU), then MXU matmuls; the bias is added in
    // f32.
    std::vector<float> bias;
    if (n.operands.size() == 3) {
      const Node& c = p.nodes[size_t(n.operands[2])];
      const void* cb = ptr[size_t(n.operands[2])];
      bias.resize(size_t(c.numel));
      for (int64_t i = 0; i < c.numel; ++i)
        bias[size_t(i)] = c.dtype == LT_DTYPE_BF16
                              ? lower::bf16_to_float(static_cast<const uint16_t*>(cb)[i])
                              : static_cast<const float*>(cb)[i];
    }
    host::conv2d<float>(n.conv, ar.data(), br.data(), bias.empty() ? nullptr : bias.data(), res,
                        nullptr);
  }
  if (to_bf16)
    for (int64_t i = 0; i < n.numel; ++i)
      static_cast<uint16_t*>(out)[i] = lower::bf16_bits(acc[size_t(i)]);
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
