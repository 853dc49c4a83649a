// bf16.hpp — the one bf16 rounding (round to nearest even; a NaN stays a quiet NaN with its
// sign), used by the core's scalar encoding, the host kernels' casts and tpu_sim's matrix unit.
#pragma once

#include <cstdint>
#include <cstring>

namespace lt::lower {

inline uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu))
    return static_cast<uint16_t>((u | 0x00400000u) >> 16);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t bits) {
  uint32_t u = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// x rounded to bf16 and widened back to f32 (the matrix unit's input rounding).
inline float round_to_bf16(float x) {
  return bf16_to_float(bf16_bits(x));
}

}  // namespace lt::lower
