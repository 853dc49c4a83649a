// mxu.cpp — the matrix unit's numerics on the host: inputs rounded to bf16 (round to
// nearest even), products and sums in f32. Eigen lives in this one translation unit only.
#include <Eigen/Core>
#include <cstring>
#include <memory>

#include "program.h"

namespace lt::tpu {

float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu)) {
    bits = (bits | 0x00400000u) & 0xFFFF0000u;  // NaN stays a (quiet) NaN
  } else {
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    bits &= 0xFFFF0000u;
  }
  float r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

void mxu_matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(c, 0, size_t(m * n) * sizeof(float));
    return;
  }
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  // bf16 values are exact in f32, and a product of two bf16 values (8-bit significands)
  // is exact in f32 too, so f32 GEMM on rounded copies is the MXU's arithmetic.
  Mat ar(m, k), br(k, n);
  for (int64_t i = 0; i < m * k; ++i) ar.data()[i] = round_to_bf16(a[i]);
  for (int64_t i = 0; i < k * n; ++i) br.data()[i] = round_to_bf16(b[i]);
  Eigen::Map<Mat> cm(c, m, n);
  cm.noalias() = ar * br;
}

}  // namespace lt::tpu
