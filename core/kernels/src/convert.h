// convert.h — the cast semantics of docs/ops.md for one element: bool is nonzero, a float to
// an int saturates (NaN gives 0), int to int is modular, everything else rounds to nearest.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace lt::host {

template <class D, class S>
inline D convert(S v) {
  if constexpr (std::is_same_v<D, uint8_t>) {
    return v != S(0) ? 1 : 0;
  } else if constexpr (std::is_same_v<S, uint8_t>) {
    return v != 0 ? D(1) : D(0);
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    if (v != v) return 0;
    constexpr S hi = -static_cast<S>(std::numeric_limits<D>::min());  // 2^31 or 2^63, exact
    if (v >= hi) return std::numeric_limits<D>::max();
    if (v <= -hi) return std::numeric_limits<D>::min();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);  // int->int is modular in C++20; others round to nearest
  }
}

}  // namespace lt::host
