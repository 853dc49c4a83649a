// TensorTest.cpp — the C++ API (lazytensor.hpp): Tensor value semantics and RAII, host data
// round trips with dtype checks, operators with scalars, runtime/device wrappers, errors.
#include <lazytensor/lazytensor.hpp>

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>

namespace {

// One runtime for the whole binary: creating one loads plugins.
lt::Runtime& rt() {
  return lt::test::runtime();
}
lt::Device dev() {
  return rt().default_device();
}

TEST(Tensor, DefaultConstructedIsNullAndOpsOnItThrow) {
  lt::Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.get(), nullptr);
  try {
    (void)t.exp();
    FAIL() << "exp on a null tensor must throw";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("exp: tensor is null"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)t.shape(), lt::Error);
  EXPECT_THROW((void)(t + 1.0), lt::Error);
}

TEST(Tensor, CopySharesTheValueMoveEmptiesTheSource) {
  lt::Tensor a = lt::Tensor::from<float>(dev(), {1, 2, 3});
  lt::Tensor b = a;  // retain
  EXPECT_TRUE(b.is_same(a));
  lt::Tensor c = std::move(b);
  EXPECT_FALSE(b.defined());  // NOLINT(bugprone-use-after-move): moved-from is null by contract
  EXPECT_TRUE(c.is_same(a));
  lt::Tensor d;
  d = c;
  d = d;  // self-assignment keeps the handle
  EXPECT_TRUE(d.is_same(a));
  d = std::move(d);
  EXPECT_TRUE(d.defined());
  a = lt::Tensor();  // dropping one handle leaves the others valid
  c = lt::Tensor();
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  lt_tensor* raw = d.release();
  EXPECT_FALSE(d.defined());
  lt::Tensor e(raw);  // adopt back; freed by e's destructor
  EXPECT_EQ(e.numel(), 3);
}

TEST(Tensor, EveryHandleIsReleasedNoDeviceMemoryLeaks) {
  // The allocator's bytes in use return to the baseline once every Tensor (temporaries,
  // copies in containers, moved-from and reassigned handles) has gone out of scope.
  lt::sync(dev());
  const double before = rt().metric("allocator.bytes_in_use");
  for (int i = 0; i < 50; ++i) {
    lt::Tensor t = lt::full(dev(), {64, 64}, double(i));
    std::vector<lt::Tensor> copies(4, t);
    lt::Tensor u = copies[1] + 1.0;
    lt::Tensor w = std::move(u);
    w = w * copies[2];
    w.materialize();
    lt::Tensor pending = w.exp();  // never materialised: its graph is dropped with it
  }
  EXPECT_EQ(rt().metric("allocator.bytes_in_use"), before);
}

TEST(Tensor, FromAndToVectorRoundTripEveryHostType) {
  EXPECT_EQ(lt::Tensor::from<float>(dev(), {1.5f, -2}).to_vector<float>(),
            (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(lt::Tensor::from<double>(dev(), {0.1, 1e300}).to_vector<double>(),
            (std::vector<double>{0.1, 1e300}));
  EXPECT_EQ(lt::Tensor::from<int32_t>(dev(), {-7, 2147483647}).to_vector<int32_t>(),
            (std::vector<int32_t>{-7, 2147483647}));
  EXPECT_EQ(lt::Tensor::from<int64_t>(dev(), {int64_t(1) << 40}).to_vector<int64_t>(),
            (std::vector<int64_t>{int64_t(1) << 40}));
  EXPECT_EQ(lt::Tensor::from<bool>(dev(), {true, false, true}).to_vector<bool>(),
            (std::vector<bool>{true, false, true}));
  std::vector<float> host = {1, 2, 3, 4, 5, 6};
  lt::Tensor m = lt::Tensor::from(dev(), std::span<const float>(host), {2, 3});
  EXPECT_EQ(m.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.dtype(), lt::f32);
  EXPECT_EQ(m.to_vector<float>(), host);
  lt::Tensor empty = lt::Tensor::from<float>(dev(), std::vector<float>{}, {0, 3});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.to_vector<float>().empty());
}

TEST(Tensor, HostTypeMustMatchDtype) {
  lt::Tensor t = lt::Tensor::from<float>(dev(), {1, 2});
  try {
    (void)t.to_vector<int32_t>();
    FAIL() << "to_vector<int32_t> on f32 must throw";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_DTYPE_MISMATCH);
    EXPECT_STREQ(e.what(), "to_vector: tensor dtype f32 does not match host type i32");
  }
  EXPECT_THROW((void)t.item<double>(), lt::Error);
  EXPECT_THROW((void)t.item<float>(), lt::Error);  // two elements
  // Host data that does not fill the shape is refused by the core.
  EXPECT_THROW((void)lt::Tensor::from<float>(dev(), {1, 2, 3}, {2, 2}), lt::Error);
}

TEST(Tensor, ScalarItemAndMetadata) {
  lt::Tensor s = lt::Tensor::scalar(dev(), 2.5);
  EXPECT_EQ(s.rank(), 0u);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_FLOAT_EQ(s.item<float>(), 2.5f);
  EXPECT_EQ(lt::scalar(dev(), 7, lt::i64).item<int64_t>(), 7);
  lt::Tensor t = lt::zeros(dev(), {2, 3, 4}, lt::i32);
  EXPECT_EQ(t.rank(), 3u);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_THROW((void)t.dim(3), lt::Error);
  EXPECT_EQ(t.device(), dev());
  EXPECT_EQ(t.device().name(), dev().name());
  EXPECT_EQ(t.shape_span().size(), 3u);
}

TEST(Tensor, OpsAreLazyUntilRead) {
  lt::Tensor a = lt::Tensor::from<float>(dev(), {1, 2, 3});
  lt::Tensor b = (a * 2.0).exp();
  EXPECT_FALSE(b.is_materialized());
  b.materialize();
  EXPECT_TRUE(b.is_materialized());
  lt::Tensor c = a + a;
  lt::Tensor d = c * c;
  EXPECT_FALSE(d.is_materialized());
  lt::sync(dev());
  EXPECT_TRUE(c.is_materialized());
  EXPECT_TRUE(d.is_materialized());
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{4, 16, 36}));
}

TEST(Operators, ScalarsOnEitherSideTakeTheTensorDtype) {
  lt::Tensor a = lt::Tensor::from<float>(dev(), {1, 2, 4});
  EXPECT_EQ((a + 1).to_vector<float>(), (std::vector<float>{2, 3, 5}));
  EXPECT_EQ((1 + a).to_vector<float>(), (std::vector<float>{2, 3, 5}));
  EXPECT_EQ((10 - a).to_vector<float>(), (std::vector<float>{9, 8, 6}));
  EXPECT_EQ((a - 10).to_vector<float>(), (std::vector<float>{-9, -8, -6}));
  EXPECT_EQ((a * 0.5).to_vector<float>(), (std::vector<float>{0.5f, 1, 2}));
  EXPECT_EQ((4 / a).to_vector<float>(), (std::vector<float>{4, 2, 1}));
  EXPECT_EQ((-a).to_vector<float>(), (std::vector<float>{-1, -2, -4}));
  lt::Tensor i = lt::Tensor::from<int32_t>(dev(), {3, 5});
  lt::Tensor j = i * 2.7;  // the scalar becomes an i32 parameter: 2
  EXPECT_EQ(j.dtype(), lt::i32);
  EXPECT_EQ(j.to_vector<int32_t>(), (std::vector<int32_t>{6, 10}));
  lt::Tensor k = a;
  k += 1;
  k *= a;
  k -= 2;
  k /= 2;
  EXPECT_EQ(k.to_vector<float>(), (std::vector<float>{0, 2, 9}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 4}))
      << "compound ops rebind, not mutate";
}

TEST(Operators, ComparisonsAndLogicReturnBoolTensors) {
  lt::Tensor a = lt::Tensor::from<float>(dev(), {1, 2, 3});
  lt::Tensor b = lt::Tensor::from<float>(dev(), {3, 2, 1});
  EXPECT_EQ((a == b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((a != b).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ((a < b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((a <= b).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((a > 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((2.0 >= a).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((a == 2.0).dtype(), lt::bool_);
  lt::Tensor p = a > 1.5, q = a < 2.5;
  EXPECT_EQ((p && q).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((p || q).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ((!p).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(lt::and_(p, q).to_vector<bool>(), (p && q).to_vector<bool>());
  EXPECT_EQ(lt::lt(a, b).to_vector<bool>(), (a < b).to_vector<bool>());
  EXPECT_EQ(lt::where(p, a, b).to_vector<float>(), (std::vector<float>{3, 2, 3}));
}

TEST(Operators, MethodsAndFreeFunctionsAgree) {
  lt::Tensor a = lt::arange(dev(), 0, 6).reshape({2, 3});
  EXPECT_EQ(a.sum({1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_EQ(lt::sum(a, {0}, true).shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(a.t().shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(lt::matmul(a, a.t()).to_vector<float>(), (std::vector<float>{5, 14, 14, 50}));
  EXPECT_EQ(a.slice_axis(1, -1, -4, -1).to_vector<float>(), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(a.slice(1, 2, 0, -1).to_vector<float>(), (std::vector<float>{2, 1, 5, 4}));
  // Braced lists always mean the per-axis form, even with one element per list.
  lt::Tensor v = lt::arange(dev(), 0, 10);
  EXPECT_EQ(v.slice({8}, {0}, {-3}).to_vector<float>(), (std::vector<float>{8, 5, 2}));
  EXPECT_EQ(lt::concat({a, a}, 0).shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(a.argmax(1).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(lt::max_pool2d(a.reshape({1, 1, 2, 3}), {2, 2}, {1, 1}).to_vector<float>(),
            (std::vector<float>{4, 5}));
  lt::Tensor x = lt::apply(dev(), "add", {a, a});
  EXPECT_EQ(x.to_vector<float>(), (a * 2).to_vector<float>());
  lt::Tensor r =
      lt::apply(dev(), "sum", {a}, {lt::Attr::Ints("axes", {0, 1}), lt::Attr::Int("keepdims", 0)});
  EXPECT_FLOAT_EQ(r.item<float>(), 15.0f);
}

TEST(IntList, OwnsItsElementsAndAcceptsEveryForm) {
  lt::IntList small = {1, 2, 3};
  lt::IntList large = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<int64_t> v = {4, 5};
  lt::IntList from_vec = v;
  v[0] = 99;  // the list is a copy
  lt::IntList copy = large;
  EXPECT_EQ(small.vec(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(copy.size(), 10u);
  EXPECT_EQ(copy[9], 10);
  EXPECT_EQ(from_vec.vec(), (std::vector<int64_t>{4, 5}));
  EXPECT_TRUE(lt::IntList().empty());
}

TEST(Runtime, DevicesLookupMetricsAndErrors) {
  EXPECT_GE(rt().device_count(), 1u);
  lt::Device d = rt().device(0);
  EXPECT_FALSE(d.name().empty());
  EXPECT_EQ(rt().find_device(d.name()), d);
  EXPECT_EQ(rt().devices().size(), rt().device_count());
  try {
    (void)rt().find_device("no_such_backend");
    FAIL() << "find_device of a missing backend must throw";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_NOT_FOUND);
  }
  EXPECT_THROW((void)rt().device(1000), lt::Error);
  EXPECT_FALSE(rt().metrics_report().empty());
  EXPECT_EQ(rt().metrics_report(true).front(), '{');
  EXPECT_FALSE(rt().plugin_report().empty());
  EXPECT_THROW((void)rt().metric("no.such.metric"), lt::Error);
  lt::Runtime moved;
  EXPECT_FALSE(moved.defined());
  EXPECT_THROW((void)moved.default_device(), lt::Error);
}

TEST(Runtime, OptionsSelectTheDeviceAndRejectBadValues) {
  lt::RuntimeOptions o;
  o.device = dev().name();
  lt::Runtime r = lt::Runtime::create(o);
  EXPECT_EQ(r.default_device().name(), dev().name());
  lt::Runtime r2 = std::move(r);
  EXPECT_FALSE(r.defined());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(r2.defined());
  lt::RuntimeOptions bad;
  bad.device = "no_such_backend";
  EXPECT_THROW((void)lt::Runtime::create(bad), lt::Error);
}

}  // namespace

// Issue #28 (source locations): methods and operators record the user's line, not the header's.
TEST(SourceLocation, MethodsAndOperatorsRecordTheCallersLine) {
  lt::Runtime rt = lt::Runtime::create();
  lt::Device d = rt.default_device();
  lt::Tensor x = lt::Tensor::from<float>(d, {1, 2, 3});
  auto where = [](const lt::Tensor& t) {
    const char* file = nullptr;
    uint32_t line = 0;
    if (!lt_tensor_traced_at(t.get(), &file, &line)) return std::string("none");
    return std::string(file) + ":" + std::to_string(line);
  };
  const std::string here = std::string(__FILE__) + ":";
  const lt::Tensor a = x + x, b = x.relu(), c = x * 2.0, e = -x, f = 3.0 - x, g = x.add(1.0);
  const uint32_t line = __LINE__ - 1;
  for (const lt::Tensor* t : {&a, &b, &c, &e, &f, &g})
    EXPECT_EQ(where(*t), here + std::to_string(line));
}
