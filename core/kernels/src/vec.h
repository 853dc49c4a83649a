// vec.h — the vectorised f32 inner loops of the host kernels (SLEEF vector math, AVX2 or
// AVX-512 reductions, row softmax and the batch-1 GEMV), chosen once per process from the CPU's
// features by vec::table(); a null entry (no AVX2, or an op without one) means the scalar loop
// (for the GEMV: OpenBLAS's sgemv) runs. Owned by the kernels' elementwise, reduction and GEMM
// files; vec_simd.inc holds the one source.
#pragma once

#include <cstdint>

namespace lt::host::vec {

using UnaryF32 = void (*)(float* out, const float* in, int64_t n);

struct Table {
  const char* isa = "scalar";  // "avx512", "avx2" or "scalar"
  UnaryF32 exp = nullptr, log = nullptr, tanh = nullptr, sigmoid = nullptr, gelu = nullptr,
           sin = nullptr, cos = nullptr;
  // Sum of p[0..n): blocks of a few hundred floats summed in float vectors, the blocks'
  // partials in double (vec_simd.inc states the bound; the scalar loop sums in double).
  double (*sum)(const float* p, int64_t n) = nullptr;
  // Max / min of p[0..n), n >= 1; false when a NaN is present (the caller's scalar loop then
  // finds which NaN, as before).
  bool (*max)(const float* p, int64_t n, float* result) = nullptr;
  bool (*min)(const float* p, int64_t n, float* result) = nullptr;
  // One contiguous row of softmax (log_form: log_softmax); false when the row holds a NaN or
  // +inf or is all -inf, which the scalar loop handles (its special cases live once, there).
  bool (*softmax_row)(float* out, const float* in, int64_t n, bool log_form) = nullptr;
  // The two forms of a one-row product's GEMV, accumulating into y in float (vec_simd.inc):
  // gemv_axpy: y[0..cols) += sum_i x[i * incx] * m[i * ld + (0..cols)], i < rows;
  // gemv_dot: y[r * incy] += m[r * ld + (0..cols)] . x[0..cols), r < rows.
  void (*gemv_axpy)(const float* m, int64_t ld, int64_t rows, int64_t cols, const float* x,
                    int64_t incx, float* y) = nullptr;
  void (*gemv_dot)(const float* m, int64_t ld, int64_t rows, int64_t cols, const float* x, float* y,
                   int64_t incy) = nullptr;
};

const Table& table();

// The per-ISA tables (vec_avx2.cpp, vec_avx512.cpp), valid only on a CPU that has the ISA.
const Table& avx2_table();
const Table& avx512_table();

}  // namespace lt::host::vec
