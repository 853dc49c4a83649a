// element.hpp — the host's one conversion of a double to an element of a dtype: the core's
// scalar encoding, the host kernels' constant stores, the C emitter's literals and the ONNX
// importer all write elements this way, so a scalar, a cast and an imported constant agree.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "lazytensor/lower/bf16.hpp"
#include "lazytensor/lt_types.h"

namespace lt::lower {

// f32 to bf16 or f16 bits (to nearest even). Storage dtypes convert through f32, as the host
// kernels' casts do: bf16 by the one bf16 rounding, f16 by the compiler's _Float16.
inline uint16_t half_bits(float f, lt_dtype d) {
  if (d == LT_DTYPE_BF16) return bf16_bits(f);
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

// v as integer type I with cast semantics: NaN gives 0, out-of-range values saturate, the rest
// truncate toward zero (2^31 and 2^63 are exact in double, so the bounds are exact).
template <class I>
inline I saturate_to_int(double v) {
  if (std::isnan(v)) return 0;
  constexpr double hi = -static_cast<double>(std::numeric_limits<I>::min());
  if (v >= hi) return std::numeric_limits<I>::max();
  if (v <= -hi) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

// Writes v as one element of dtype d at dst (the dtype's size in bytes). False, writing nothing,
// for a dtype that is not a value dtype.
inline bool store_element(lt_dtype d, double v, void* dst) {
  switch (d) {
    case LT_DTYPE_F32: {
      const float x = static_cast<float>(v);
      std::memcpy(dst, &x, 4);
      return true;
    }
    case LT_DTYPE_F64:
      std::memcpy(dst, &v, 8);
      return true;
    case LT_DTYPE_I32: {
      const int32_t x = saturate_to_int<int32_t>(v);
      std::memcpy(dst, &x, 4);
      return true;
    }
    case LT_DTYPE_I64: {
      const int64_t x = saturate_to_int<int64_t>(v);
      std::memcpy(dst, &x, 8);
      return true;
    }
    case LT_DTYPE_BOOL: {
      const uint8_t x = v != 0.0 ? 1 : 0;
      std::memcpy(dst, &x, 1);
      return true;
    }
    case LT_DTYPE_BF16:
    case LT_DTYPE_F16: {
      const uint16_t x = half_bits(static_cast<float>(v), d);
      std::memcpy(dst, &x, 2);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace lt::lower
