// ConvTest.cpp — the oneDNN convolution entry point (host::onednn_conv) in its three passes
// against plain loops, each geometry called repeatedly with fresh buffers: the per-thread memory
// objects it keeps between calls must follow every call's pointers (blocked and plain layouts,
// with and without bias, a batch split into chunks with a smaller last one).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels.h"

namespace {

using lt::host::ConvGeom;
using lt::host::ConvPass;

ConvGeom geom(int64_t n, int64_t c, int64_t hw, int64_t o, int64_t k, int64_t s) {
  const int64_t p = k / 2, out = (hw + 2 * p - k) / s + 1;
  return {n, c, hw, hw, o, k, k, out, out, s, s, p, p, 1, 1, 1};
}

float at(const std::vector<float>& v, int64_t i) {
  return v[static_cast<size_t>(i)];
}

// y[n,o,i,j] = bias[o] + sum x[n,c,i*s-p+u,j*s-p+v] w[o,c,u,v] and its two adjoints.
void reference(ConvPass pass, const ConvGeom& g, const std::vector<float>& a,
               const std::vector<float>& b, const float* bias, std::vector<float>& out) {
  std::fill(out.begin(), out.end(), 0.0f);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t i = 0; i < g.OH; ++i)
        for (int64_t j = 0; j < g.OW; ++j) {
          const int64_t yi = ((n * g.O + o) * g.OH + i) * g.OW + j;
          if (pass == ConvPass::kForward && bias) out[static_cast<size_t>(yi)] += bias[o];
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t u = 0; u < g.KH; ++u)
              for (int64_t v = 0; v < g.KW; ++v) {
                const int64_t r = i * g.sh - g.ph + u, q = j * g.sw - g.pw + v;
                if (r < 0 || r >= g.H || q < 0 || q >= g.W) continue;
                const int64_t xi = ((n * g.C + c) * g.H + r) * g.W + q;
                const int64_t wi = ((o * g.C + c) * g.KH + u) * g.KW + v;
                if (pass == ConvPass::kForward)
                  out[static_cast<size_t>(yi)] += at(a, xi) * at(b, wi);
                else if (pass == ConvPass::kData)
                  out[static_cast<size_t>(xi)] += at(a, yi) * at(b, wi);
                else
                  out[static_cast<size_t>(wi)] += at(a, xi) * at(b, yi);
              }
        }
}

std::vector<float> filled(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((i * 7 + static_cast<size_t>(seed) * 13) % 17) * 0.125f - 1.0f;
  return v;
}

TEST(OnednnConv, EveryPassMatchesPlainLoopsAcrossRepeatedCalls) {
  // 16 channels: blocked layouts with reorders; one input channel and 1x1 stride 1: plain NCHW;
  // batch 5: chunks with a smaller last one when two threads split it.
  const ConvGeom geoms[] = {geom(5, 16, 8, 16, 3, 1), geom(3, 16, 9, 32, 3, 2),
                            geom(4, 1, 7, 8, 3, 1), geom(5, 16, 6, 16, 1, 1),
                            geom(2, 8, 6, 16, 1, 2)};
  for (const ConvGeom& g : geoms) {
    const int64_t xn = g.N * g.C * g.H * g.W, wn = g.O * g.C * g.KH * g.KW,
                  yn = g.N * g.O * g.OH * g.OW;
    for (ConvPass pass : {ConvPass::kForward, ConvPass::kData, ConvPass::kWeights}) {
      for (int call = 0; call < 3; ++call) {  // fresh buffers each time, same primitives
        const bool with_bias = pass == ConvPass::kForward && call == 1;
        std::vector<float> bias = filled(g.O, 9 + call);
        std::vector<float> a, b, out, want;
        if (pass == ConvPass::kForward) {
          a = filled(xn, call), b = filled(wn, call + 3), out.assign(static_cast<size_t>(yn), NAN);
        } else if (pass == ConvPass::kData) {
          a = filled(yn, call), b = filled(wn, call + 3), out.assign(static_cast<size_t>(xn), NAN);
        } else {
          a = filled(xn, call), b = filled(yn, call + 3), out.assign(static_cast<size_t>(wn), NAN);
        }
        want = out;
        const float* bp = with_bias ? bias.data() : nullptr;
        ASSERT_TRUE(lt::host::onednn_conv(pass, g, a.data(), b.data(), bp, out.data()));
        reference(pass, g, a, b, bp, want);
        const std::string what = "pass " + std::to_string(static_cast<int>(pass)) + " C" +
                                 std::to_string(g.C) + " O" + std::to_string(g.O) + " K" +
                                 std::to_string(g.KH) + " s" + std::to_string(g.sh) + " call " +
                                 std::to_string(call);
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out[i], want[i], 1e-3f * (1.0f + std::fabs(want[i]))) << what << " at " << i;
      }
    }
  }
}

}  // namespace
