// train_backends.hpp — the backends this build made (LT_TEST_BACKENDS, from CMake), so the
// per-backend training tests run on each of them and never skip one that was built; and the
// one runtime the no-fallback tests share (fallback policy "error": a node leaving its
// backend fails the test).
#pragma once

#include <string>
#include <vector>

#include "lazytensor/lazytensor.hpp"

namespace lt::test {

inline lt::Runtime& no_fallback_runtime() {
  static lt::Runtime rt = [] {
    lt::RuntimeOptions o;
    o.fallback = "error";
    return lt::Runtime::create(o);
  }();
  return rt;
}

inline std::vector<std::string> built_backends() {
  std::vector<std::string> out;
  std::string all = LT_TEST_BACKENDS;
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    out.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace lt::test
