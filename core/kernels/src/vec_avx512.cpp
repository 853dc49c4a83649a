// vec_avx512.cpp — the host kernels' vector loops for AVX-512F/DQ (16 floats per vector);
// compiled with -mavx512f -mavx512dq and only called after vec::table() checked the CPU.
#define LT_VEC_WIDTH 16
#include "vec_simd.inc"
