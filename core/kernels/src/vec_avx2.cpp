// vec_avx2.cpp — the host kernels' vector loops for AVX2 + FMA (8 floats per vector); compiled
// with -mavx2 -mfma and only called after vec::table() checked the CPU.
#define LT_VEC_WIDTH 8
#include "vec_simd.inc"
