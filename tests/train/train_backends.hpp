// train_backends.hpp — the backends this build made (LT_TEST_BACKENDS, from CMake), so the
// per-backend training tests run on each of them and never skip one that was built.
#pragma once

#include <string>
#include <vector>

namespace lt::test {

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
