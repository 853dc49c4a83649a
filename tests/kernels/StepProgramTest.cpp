// StepProgramTest.cpp — the host step program's GEMM layouts (lazytensor/host/steps.hpp) on
// hand-built graphs: a transpose read only by GEMMs is read in place, and the transpose of a 2-D
// GEMM that nothing else reads is written by the GEMM itself, (A·B)^T = B^T·A^T, with neither
// transpose materialised; results against a plain triple loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "lazytensor/host/steps.hpp"
#include "lazytensor/lower/graph.hpp"

namespace {

using lt::lower::OwnedGraph;

const int64_t kSwap[2] = {1, 0};
const lt_attr kTranspose = {"perm", LT_ATTR_INTS, 0, 0, kSwap, 2, nullptr};

std::vector<float> fill(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float((i * 7 + salt) % 13) * 0.25f - 1.5f;
  return v;
}

// The weight gradient of a Linear with an [out, in] weight: (x^T · dy)^T, read by an update.
// x [b, in], dy [b, out]; g = permute(matmul(permute(x), dy)) [out, in]; out = w - g.
struct WeightGrad {
  static constexpr int64_t b = 5, in = 4, out = 3;
  OwnedGraph g;
  int32_t x, dy, w, mm, grad, upd;
  explicit WeightGrad(bool product_is_output) {
    x = g.add("input", LT_DTYPE_F32, {b, in}, {});
    dy = g.add("input", LT_DTYPE_F32, {b, out}, {});
    w = g.add("input", LT_DTYPE_F32, {out, in}, {});
    const int32_t xt = g.add("permute", LT_DTYPE_F32, {in, b}, {x}, &kTranspose, 1);
    mm = g.add("matmul", LT_DTYPE_F32, {in, out}, {xt, dy});
    grad = g.add("permute", LT_DTYPE_F32, {out, in}, {mm}, &kTranspose, 1);
    upd = g.add("sub", LT_DTYPE_F32, {out, in}, {w, grad});
    g.set_inputs({x, dy, w});
    g.set_outputs(product_is_output ? std::vector<int32_t>{upd, mm} : std::vector<int32_t>{upd});
  }
};

void run_and_check(bool product_is_output, size_t want_steps) {
  WeightGrad wg(product_is_output);
  const lt_graph& view = wg.g.view();
  lt::host::StepProgram prog(view);
  for (size_t i = 0; i < view.num_nodes; ++i)
    if (std::string_view(view.nodes[i].op) != "input") prog.add_node(static_cast<int32_t>(i));
  prog.finish();
  EXPECT_EQ(prog.num_steps(), want_steps);
  constexpr int64_t b = WeightGrad::b, in = WeightGrad::in, out = WeightGrad::out;
  std::vector<float> x = fill(b * in, 1), dy = fill(b * out, 2), w = fill(out * in, 3);
  std::vector<float> upd(out * in, NAN), mm(in * out, NAN);
  void* inputs[] = {x.data(), dy.data(), w.data()};
  void* outputs[] = {upd.data(), mm.data()};
  prog.run(inputs, outputs);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double g = 0;
      for (int64_t r = 0; r < b; ++r) g += double(x[r * in + i]) * dy[r * out + o];
      EXPECT_NEAR(upd[o * in + i], w[o * in + i] - g, 1e-5) << "update at " << o << "," << i;
      if (product_is_output)
        EXPECT_NEAR(mm[i * out + o], g, 1e-5) << "product at " << i << "," << o;
    }
}

TEST(StepProgram, AGemmReadOnlyByATransposeWritesItsProductTransposed) {
  // One GEMM writing the transposed product, one subtraction: the transpose of x is read in
  // place, the matmul and its transpose are one step, no strided copy.
  run_and_check(false, 2);
}

TEST(StepProgram, AGemmThatIsAlsoAnOutputIsWrittenAsItIsAndTransposedByACopy) {
  // The product is an output too: the GEMM writes it as it is, the transpose is its own step.
  run_and_check(true, 3);
}

TEST(StepProgram, TheHeldGemmIsWrittenBeforeAStepThatIsNotItsTranspose) {
  // A backend step added between the matmul and its transpose (cpu_jit's generated kernels are
  // custom steps): the GEMM cannot wait for the transpose and runs as a plain GEMM first.
  WeightGrad wg(false);
  const lt_graph& view = wg.g.view();
  lt::host::StepProgram prog(view);
  prog.add_node(wg.mm - 1);  // x^T: read in place by the GEMM, no step
  prog.add_node(wg.mm);
  std::vector<float> seen;
  prog.add_custom({}, {wg.mm}, [&](void* const* p) {
    const float* m = static_cast<const float*>(p[wg.mm]);
    seen.assign(m, m + WeightGrad::in * WeightGrad::out);
  });
  prog.add_node(wg.grad);
  prog.add_node(wg.upd);
  prog.finish();
  EXPECT_EQ(prog.num_steps(), 4u);  // GEMM, the custom step, the transpose, the subtraction
  constexpr int64_t b = WeightGrad::b, in = WeightGrad::in, out = WeightGrad::out;
  std::vector<float> x = fill(b * in, 1), dy = fill(b * out, 2), w = fill(out * in, 3);
  std::vector<float> upd(out * in, NAN);
  void* inputs[] = {x.data(), dy.data(), w.data()};
  void* outputs[] = {upd.data()};
  prog.run(inputs, outputs);
  ASSERT_EQ(seen.size(), size_t(in * out));
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double g = 0;
      for (int64_t r = 0; r < b; ++r) g += double(x[r * in + i]) * dy[r * out + o];
      EXPECT_NEAR(seen[i * out + o], g, 1e-5);
      EXPECT_NEAR(upd[o * in + i], w[o * in + i] - g, 1e-5);
    }
}

}  // namespace
