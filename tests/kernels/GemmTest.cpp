// GemmTest.cpp — the one GEMM entry point (host::gemm) against a plain triple loop for every
// transpose combination, leading dimensions wider than the matrix, accumulate on and off, and
// the shapes with their own paths: one output row or column (GEMV), small, panelled, threaded.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lazytensor/host/kernels.hpp"

namespace {

struct Shape {
  int64_t m, n, k;
};

TEST(Gemm, MatchesTripleLoopForEveryTransposeAndPath) {
  const Shape shapes[] = {{1, 1, 1},      {1, 512, 784}, {1, 3000, 300}, {512, 1, 784},
                          {3000, 1, 300}, {7, 5, 3},     {64, 512, 784}, {1, 1, 5000}};
  for (const Shape& s : shapes) {
    for (int flags = 0; flags < 8; ++flags) {
      const bool ta = flags & 1, tb = flags & 2, acc = flags & 4;
      // op(A) is m x k: stored k x m when transposed; leading dims padded by 3.
      const int64_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 3, ldc = s.n + 3;
      std::vector<float> a((ta ? s.k : s.m) * lda), b((tb ? s.n : s.k) * ldb), c(s.m * ldc);
      for (size_t i = 0; i < a.size(); ++i) a[i] = float((i * 7) % 13) * 0.1f - 0.6f;
      for (size_t i = 0; i < b.size(); ++i) b[i] = float((i * 5) % 11) * 0.1f - 0.5f;
      // Not accumulating: whatever the buffer held (NaN here) must not leak into the result.
      for (size_t i = 0; i < c.size(); ++i)
        c[i] = acc ? float(i % 3) : std::numeric_limits<float>::quiet_NaN();
      const std::vector<float> c0 = c;
      lt::host::gemm<float>(s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(), ldc, acc, ta,
                            tb);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double want = acc ? c0[i * ldc + j] : 0.0, mag = 0;
          for (int64_t p = 0; p < s.k; ++p) {
            const double x = ta ? a[p * lda + i] : a[i * lda + p];
            const double y = tb ? b[j * ldb + p] : b[p * ldb + j];
            want += x * y;
            mag += std::fabs(x * y);
          }
          ASSERT_NEAR(c[i * ldc + j], want, 1e-5 * (mag + 1))
              << s.m << "x" << s.n << "x" << s.k << " ta=" << ta << " tb=" << tb << " acc=" << acc
              << " at " << i << "," << j;
        }
        // Padding between rows stays untouched.
        for (int64_t j = s.n; j < ldc && i + 1 < s.m; ++j)
          if (!acc) ASSERT_TRUE(std::isnan(c[i * ldc + j])) << "padding written at " << i;
      }
    }
  }
}

}  // namespace
