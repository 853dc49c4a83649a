// vec.cpp — picks the vector table of the host kernels once from the CPU's features
// (LT_HOST_VEC=scalar|avx2|avx512 caps it, to measure or to compare against the scalar loops).
#include "vec.h"

#include <cstdlib>
#include <cstring>

namespace lt::host::vec {

const Table& table() {
  static const Table& t = []() -> const Table& {
    static const Table scalar;
    const char* cap = std::getenv("LT_HOST_VEC");
    const bool allow512 = !cap || !std::strcmp(cap, "avx512");
    const bool allow2 = allow512 || !std::strcmp(cap, "avx2");
    __builtin_cpu_init();
    if (allow512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
      return avx512_table();
    if (allow2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return avx2_table();
    return scalar;
  }();
  return t;
}

}  // namespace lt::host::vec
