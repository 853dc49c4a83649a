// KitTest.cpp — checks the conformance kit adds to the shared op suite for a third-party
// plugin: buffer round trips of every dtype and size, compile-cache behaviour, claimed ops
// that really run on the backend (not silently on the fallback), errors that name the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "conformance.h"
#include "kit.h"

namespace ltkit {
namespace {
std::string g_backend;
std::vector<std::string> g_ops;
}  // namespace
void set_claimed_ops(const std::string& backend, std::vector<std::string> ops) {
  g_backend = backend;
  g_ops = std::move(ops);
}
const std::vector<std::string>& claimed_ops() {
  return g_ops;
}
}  // namespace ltkit

namespace ltc {
namespace {

using Kit = ConformanceTest;
LT_CONFORMANCE_SUITE(Kit);

TEST_P(Kit, BufferRoundTripEveryDtypeAndSize) {
  const lt_dtype dtypes[] = {LT_DTYPE_F32, LT_DTYPE_F64, LT_DTYPE_I32, LT_DTYPE_I64, LT_DTYPE_BOOL};
  const std::vector<Shape> shapes = {{}, {0}, {1}, {7}, {3, 5}, {2, 0, 3}, {257, 129}};
  for (lt_dtype dt : dtypes) {
    for (const Shape& s : shapes) {
      size_t n = static_cast<size_t>(numel_of(s)) * lt_dtype_size(dt);
      std::vector<unsigned char> in(n), out(n, 0xAB);
      for (size_t i = 0; i < n; ++i)
        in[i] = dt == LT_DTYPE_BOOL ? static_cast<unsigned char>(i % 2)
                                    : static_cast<unsigned char>(i * 131 + 7);
      lt_tensor* t = nullptr;
      lt_error* e =
          lt_tensor_from_host(dev().get(), dt, s.data(), s.size(), n ? in.data() : nullptr, n, &t);
      ASSERT_EQ(e, nullptr) << lt_error_message(e);
      e = lt_tensor_to_host(t, out.data(), n);
      EXPECT_EQ(e, nullptr) << (e ? lt_error_message(e) : "");
      lt_error_destroy(e);
      EXPECT_TRUE(n == 0 || std::memcmp(in.data(), out.data(), n) == 0)
          << lt_dtype_name(dt) << " " << str(s) << ": bytes changed in a round trip";
      lt_tensor_free(t);
    }
  }
}

TEST_P(Kit, SameGraphTwiceHitsTheCompileCacheNewShapeMisses) {
  auto run = [&](int64_t n) {
    Host a = make(lt::f32, {n}, Fill::kAny, 1), b = make(lt::f32, {n}, Fill::kAny, 2);
    lt::Tensor x = upload(dev(), a), y = upload(dev(), b);
    Host want = ref_binary(a, b, lt::f32, [](double p, double q) { return p + q; });
    expect_close(x + y, want, tol(OpClass::kExact, lt::f32), "add f32 cache check");
  };
  run(33);
  double hits0 = rt().metric("cache_hits"), miss0 = rt().metric("cache_misses");
  run(33);
  EXPECT_EQ(rt().metric("cache_hits"), hits0 + 1) << "same graph, same shapes must hit";
  EXPECT_EQ(rt().metric("cache_misses"), miss0);
  run(34);
  EXPECT_EQ(rt().metric("cache_misses"), miss0 + 1) << "a new input shape must recompile";
}

TEST_P(Kit, ClaimedElementwiseOpsRunOnTheBackendItself) {
  const auto& ops = ltkit::claimed_ops();
  for (const char* op : {"add", "mul", "neg", "relu", "exp", "sub"}) {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) continue;
    bool unary =
        std::strcmp(op, "neg") == 0 || std::strcmp(op, "relu") == 0 || std::strcmp(op, "exp") == 0;
    double before = 0;
    lt_error_destroy(lt_metric_get(rt().get(), (std::string("fallback.") + op).c_str(), &before));
    Host a = make(lt::f32, {4, 5}, Fill::kAny, 3), b = make(lt::f32, {4, 5}, Fill::kAny, 4);
    lt::Tensor x = upload(dev(), a), y = upload(dev(), b);
    lt_tensor* in[2] = {x.get(), y.get()};
    lt_tensor* out = nullptr;
    lt_error* e = lt_apply(dev().get(), op, in, unary ? 1 : 2, nullptr, 0, &out);
    ASSERT_EQ(e, nullptr) << op << ": " << lt_error_message(e);
    e = lt_tensor_materialize(out);
    EXPECT_EQ(e, nullptr) << op << ": " << (e ? lt_error_message(e) : "");
    lt_error_destroy(e);
    lt_tensor_free(out);
    double after = 0;
    lt_error_destroy(lt_metric_get(rt().get(), (std::string("fallback.") + op).c_str(), &after));
    EXPECT_EQ(after, before) << op << ": claimed by the backend but ran on the fallback "
                             << "(its compile failed? see the log)";
  }
}

TEST_P(Kit, ShapeErrorsNameTheOpAndShapes) {
  lt::Tensor x = upload(dev(), make(lt::f32, {2, 3}));
  lt::Tensor y = upload(dev(), make(lt::f32, {4}));
  expect_error([&] { (void)(x + y); }, LT_STATUS_SHAPE_MISMATCH, {"add", "[2,3]", "[4]"});
}

}  // namespace
}  // namespace ltc
