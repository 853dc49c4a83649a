/* lt_random.h — the counter-based random generator every backend uses for the
 * random_uniform and random_normal ops, so that a seed gives the same numbers on every
 * backend. Pure integer hashing (splitmix64 finaliser) of (seed, element index); no state.
 * C11, header-only; also valid OpenCL C when LT_RANDOM_OPENCL is defined before inclusion. */
#ifndef LAZYTENSOR_LT_RANDOM_H
#define LAZYTENSOR_LT_RANDOM_H

#ifndef LT_RANDOM_OPENCL
#include <stdint.h>
#define LT_RANDOM_U64 uint64_t
#define LT_RANDOM_INLINE static inline
#else
#define LT_RANDOM_U64 ulong
#define LT_RANDOM_INLINE inline
#endif

/* 64 random bits for element `index` of a tensor drawn with `seed`. */
LT_RANDOM_INLINE LT_RANDOM_U64 lt_random_bits(LT_RANDOM_U64 seed, LT_RANDOM_U64 index) {
  LT_RANDOM_U64 z = seed + (index + 1) * (LT_RANDOM_U64)0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * (LT_RANDOM_U64)0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * (LT_RANDOM_U64)0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 random bits: exactly representable in f32 and f64. */
LT_RANDOM_INLINE float lt_random_unit_f32(LT_RANDOM_U64 seed, LT_RANDOM_U64 index) {
  return (float)(lt_random_bits(seed, index) >> 40) * (1.0f / 16777216.0f);
}

/* Element i of random_uniform(low, high): low + (high - low) * u, computed in f32 for
 * f32 output (in double for f64 output, using the same u). */

/* Element i of random_normal(mean, std) uses Box-Muller on two uniforms of the
 * streams 2*i and 2*i+1:  u1 = 1 - unit(seed, 2i)  (in (0, 1]),  u2 = unit(seed, 2i+1),
 * z = sqrt(-2 ln u1) * cos(2 pi u2);  value = mean + std * z.
 * Backends compute z in f32 (f64 for f64 output); results agree within transcendental
 * rounding, not bit for bit. */

#endif /* LAZYTENSOR_LT_RANDOM_H */
