// ErrorsTest.cpp — every C entry point rejects NULL/invalid arguments with an error (never a
// crash), and validation messages name the op and the offending shapes or dtypes.
#include "test_util.h"

using namespace lt_test;

class Errors : public ::testing::Test {
 protected:
  void SetUp() override {
    h.rt = make_runtime(plugin_dir("partial"), "partial");
    ASSERT_NE(h.rt, nullptr);
    d = lt_runtime_default_device(h.rt);
    a = from_host(d, {1, 2, 3, 4, 5, 6}, {2, 3});
    b = from_host(d, {1, 2, 3, 4}, {4});
    int32_t iv[2] = {1, 2};
    int64_t s2[1] = {2};
    ASSERT_EQ(lt_tensor_from_host(d, LT_DTYPE_I32, s2, 1, iv, 8, &i), nullptr);
  }
  void TearDown() override {
    for (auto* t : {a, b, i}) lt_tensor_free(t);
  }
  RuntimeHandle h;
  lt_device* d = nullptr;
  lt_tensor *a = nullptr, *b = nullptr, *i = nullptr;
};

#define EXPECT_ERR(expr, code_, text)                                  \
  do {                                                                 \
    ::lt_test::Err err_(expr);                                         \
    EXPECT_EQ(err_.code(), code_) << err_.msg();                       \
    EXPECT_NE(err_.msg().find(text), std::string::npos) << err_.msg(); \
  } while (0)

TEST_F(Errors, MessagesNameOpAndShapes) {
  lt_tensor* o = nullptr;
  EXPECT_ERR(lt_add(a, b, &o), LT_STATUS_SHAPE_MISMATCH,
             "add: shapes [2,3] and [4] do not broadcast");
  EXPECT_ERR(lt_exp(i, &o), LT_STATUS_DTYPE_MISMATCH, "exp: dtype i32 is not a float type");
  EXPECT_ERR(lt_matmul(a, a, &o), LT_STATUS_SHAPE_MISMATCH, "matmul: shapes [2,3] and [2,3]");
  int64_t bad_shape[2] = {4, 4};
  EXPECT_ERR(lt_reshape(a, bad_shape, 2, &o), LT_STATUS_SHAPE_MISMATCH,
             "reshape: cannot reshape [2,3]");
  int64_t ax = 5;
  EXPECT_ERR(lt_sum(a, &ax, 1, 0, &o), LT_STATUS_INVALID_ARGUMENT,
             "sum: axis 5 is out of range for shape [2,3]");
  int64_t x4[4] = {1, 3, 5, 5}, w4[4] = {2, 4, 3, 3};
  std::vector<float> xv(75), wv(72);
  lt_tensor *x = nullptr, *w = nullptr;
  LT_OK(lt_tensor_from_host(d, LT_DTYPE_F32, x4, 4, xv.data(), 300, &x));
  LT_OK(lt_tensor_from_host(d, LT_DTYPE_F32, w4, 4, wv.data(), 288, &w));
  EXPECT_ERR(lt_conv2d(x, w, nullptr, nullptr, nullptr, nullptr, 1, &o), LT_STATUS_SHAPE_MISMATCH,
             "conv2d: input channels 3 != weight channels 4 x groups 1");
  lt_tensor_free(x);
  lt_tensor_free(w);
  EXPECT_ERR(lt_apply(d, "frobnicate", &a, 1, nullptr, 0, &o), LT_STATUS_UNKNOWN_OP, "frobnicate");
  lt_attr bad{};
  bad.name = "colour";
  bad.kind = LT_ATTR_INT;
  EXPECT_ERR(lt_apply(d, "relu", &a, 1, &bad, 1, &o), LT_STATUS_INVALID_ARGUMENT,
             "relu: unknown attribute 'colour'");
  EXPECT_ERR(lt_apply(d, "add", &a, 1, nullptr, 0, &o), LT_STATUS_INVALID_ARGUMENT,
             "add: expects 2 inputs, got 1");
  int64_t k2[2] = {2, 2}, p2[2] = {2, 0};
  EXPECT_ERR(lt_max_pool2d(a, k2, nullptr, p2, &o), LT_STATUS_SHAPE_MISMATCH,
             "max_pool2d: input [2,3] must be 4-D");
}

TEST_F(Errors, NullArgumentsNeverCrash) {
  lt_tensor* o = nullptr;
  EXPECT_ERR(lt_add(nullptr, a, &o), LT_STATUS_INVALID_ARGUMENT, "add: input 0 is NULL");
  EXPECT_ERR(lt_add(a, a, nullptr), LT_STATUS_INVALID_ARGUMENT, "add: out is NULL");
  EXPECT_ERR(lt_relu(nullptr, &o), LT_STATUS_INVALID_ARGUMENT, "relu");
  EXPECT_ERR(lt_apply(nullptr, nullptr, nullptr, 0, nullptr, 0, &o), LT_STATUS_INVALID_ARGUMENT,
             "op is NULL");
  EXPECT_ERR(lt_full(nullptr, nullptr, 0, 1.0, LT_DTYPE_F32, &o), LT_STATUS_INVALID_ARGUMENT,
             "full: device is NULL");
  EXPECT_ERR(lt_arange(d, 0, 1, 0, LT_DTYPE_F32, &o), LT_STATUS_INVALID_ARGUMENT, "arange: step");
  EXPECT_ERR(lt_sum(a, nullptr, 2, 0, &o), LT_STATUS_INVALID_ARGUMENT, "sum: axes is NULL");
  EXPECT_ERR(lt_reshape(a, nullptr, 2, &o), LT_STATUS_INVALID_ARGUMENT, "reshape");
  EXPECT_ERR(lt_slice(a, nullptr, nullptr, nullptr, 2, &o), LT_STATUS_INVALID_ARGUMENT, "slice");
  EXPECT_ERR(lt_concat(nullptr, 2, 0, &o), LT_STATUS_INVALID_ARGUMENT, "concat");
  EXPECT_ERR(lt_concat(&a, 0, 0, &o), LT_STATUS_INVALID_ARGUMENT, "concat");
  EXPECT_ERR(lt_scalar(nullptr, LT_DTYPE_F32, 1, &o), LT_STATUS_INVALID_ARGUMENT, "lt_scalar");
  EXPECT_ERR(lt_scalar(d, static_cast<lt_dtype>(99), 1, &o), LT_STATUS_INVALID_ARGUMENT,
             "invalid dtype 99");
  int64_t s[1] = {3};
  float v[3] = {1, 2, 3};
  EXPECT_ERR(lt_tensor_from_host(nullptr, LT_DTYPE_F32, s, 1, v, 12, &o),
             LT_STATUS_INVALID_ARGUMENT, "device is NULL");
  EXPECT_ERR(lt_tensor_from_host(d, LT_DTYPE_F32, s, 1, v, 8, &o), LT_STATUS_INVALID_ARGUMENT,
             "nbytes 8 != 12");
  EXPECT_ERR(lt_tensor_from_host(d, LT_DTYPE_F32, s, 1, nullptr, 12, &o),
             LT_STATUS_INVALID_ARGUMENT, "data is NULL");
  EXPECT_ERR(lt_tensor_from_host(d, LT_DTYPE_F32, nullptr, 1, v, 12, &o),
             LT_STATUS_INVALID_ARGUMENT, "shape is NULL");
  int64_t neg[1] = {-3};
  EXPECT_ERR(lt_tensor_from_host(d, LT_DTYPE_F32, neg, 1, v, 12, &o), LT_STATUS_INVALID_ARGUMENT,
             "negative dimension");
  EXPECT_ERR(lt_tensor_to_host(nullptr, v, 12), LT_STATUS_INVALID_ARGUMENT, "tensor is NULL");
  EXPECT_ERR(lt_tensor_to_host(a, v, 12), LT_STATUS_INVALID_ARGUMENT, "nbytes 12 != 24");
  EXPECT_ERR(lt_tensor_materialize(nullptr), LT_STATUS_INVALID_ARGUMENT, "tensor is NULL");
  EXPECT_ERR(lt_tensor_to_device(nullptr, d, &o), LT_STATUS_INVALID_ARGUMENT, "tensor is NULL");
  EXPECT_ERR(lt_sync(nullptr), LT_STATUS_INVALID_ARGUMENT, "device is NULL");
  EXPECT_ERR(lt_runtime_create(nullptr, nullptr), LT_STATUS_INVALID_ARGUMENT, "out is NULL");
  EXPECT_ERR(lt_runtime_find_device(nullptr, "x", nullptr), LT_STATUS_INVALID_ARGUMENT,
             "runtime is NULL");
  EXPECT_ERR(lt_runtime_plugin_report(nullptr, 0, nullptr), LT_STATUS_INVALID_ARGUMENT,
             "runtime is NULL");
  EXPECT_ERR(lt_metrics_report(nullptr, 0, nullptr), LT_STATUS_INVALID_ARGUMENT, "runtime is NULL");
  double m = 0;
  EXPECT_ERR(lt_metric_get(h.rt, nullptr, &m), LT_STATUS_INVALID_ARGUMENT, "name is NULL");
  // Query functions tolerate NULL.
  EXPECT_EQ(lt_tensor_rank(nullptr), 0u);
  EXPECT_EQ(lt_tensor_shape(nullptr), nullptr);
  EXPECT_EQ(lt_tensor_dtype(nullptr), LT_DTYPE_INVALID);
  EXPECT_EQ(lt_runtime_device_count(nullptr), 0u);
  EXPECT_EQ(lt_runtime_device(h.rt, 99), nullptr);
  EXPECT_STREQ(lt_error_message(nullptr), "");
  lt_tensor_free(nullptr);
  lt_runtime_destroy(nullptr);
  lt_error_destroy(nullptr);
  lt_string_free(nullptr);
  lt_metrics_reset(nullptr);
  EXPECT_EQ(o, nullptr);  // no output written on error
}

TEST_F(Errors, MixedDevicesAreRejected) {
  RuntimeHandle other{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(other.rt, nullptr);
  lt_tensor* x = from_host(lt_runtime_default_device(other.rt), {1, 2, 3, 4}, {4});
  lt_tensor* o = nullptr;
  EXPECT_ERR(lt_add(b, x, &o), LT_STATUS_INVALID_ARGUMENT, "add: inputs are on different devices");
  lt_tensor* moved = nullptr;
  LT_OK(lt_tensor_to_device(x, d, &moved));
  LT_OK(lt_add(b, moved, &o));
  EXPECT_EQ(to_host(o), (std::vector<float>{2, 4, 6, 8}));
  for (auto* t : {x, moved, o}) lt_tensor_free(t);
}

// A shape whose byte size overflows, or is beyond any allocation (2^46 bytes), is refused at
// the op that would create it, naming the op and the shape; it used to be accepted, and
// reading it ran until the process was killed.
TEST_F(Errors, ImpossibleSizesAreRefusedAtTheOp) {
  lt_tensor* o = nullptr;
  const int64_t max = INT64_MAX;
  int64_t huge[1] = {max};
  EXPECT_ERR(lt_full(d, huge, 1, 1.0, LT_DTYPE_F32, &o), LT_STATUS_INVALID_ARGUMENT,
             "full: shape [9223372036854775807] of f32 is over 2^64 bytes");
  int64_t wide[3] = {int64_t{1} << 31, int64_t{1} << 31, 4};
  EXPECT_ERR(lt_full(d, wide, 3, 0.0, LT_DTYPE_F64, &o), LT_STATUS_INVALID_ARGUMENT, "full:");
  int64_t big[2] = {int64_t{1} << 23, int64_t{1} << 22};  // 2^45 elements: 2^47 f32 bytes
  EXPECT_ERR(lt_random_uniform(d, big, 2, 1, 0.0, 1.0, LT_DTYPE_F32, &o),
             LT_STATUS_INVALID_ARGUMENT, "more than any tensor can hold");
  EXPECT_ERR(lt_arange(d, 0.0, 1e18, 1.0, LT_DTYPE_F32, &o), LT_STATUS_INVALID_ARGUMENT, "arange");
  int64_t bshape[3] = {int64_t{1} << 44, 2, 3};  // 2^48.6 bytes
  EXPECT_ERR(lt_broadcast_to(a, bshape, 3, &o), LT_STATUS_INVALID_ARGUMENT, "broadcast_to:");
  int64_t before[2] = {0, 0}, after[2] = {int64_t{1} << 62, 0};
  EXPECT_ERR(lt_pad(a, before, after, 2, 0.0, &o), LT_STATUS_INVALID_ARGUMENT, "pad:");
  float one = 1.0f;
  EXPECT_ERR(lt_tensor_from_host(d, LT_DTYPE_F32, huge, 1, &one, 4, &o), LT_STATUS_INVALID_ARGUMENT,
             "lt_tensor_from_host: shape [9223372036854775807]");
  EXPECT_EQ(o, nullptr);
}

// Issue #28: a handle used after its last lt_tensor_free is an INVALID_ARGUMENT error naming the
// handle (it used to be a SIGSEGV), in ops, reads, autograd and the accessors.
TEST_F(Errors, HandleUsedAfterFreeIsInvalidArgumentNamingIt) {
  lt_tensor* c = nullptr;
  LT_OK(lt_add(a, a, &c));
  char handle[32];
  std::snprintf(handle, sizeof handle, "%p", static_cast<void*>(c));
  lt_tensor_free(c);
  lt_tensor* o = nullptr;
  std::vector<float> host(6);
  EXPECT_ERR(lt_tensor_to_host(c, host.data(), 24), LT_STATUS_INVALID_ARGUMENT,
             std::string("lt_tensor_to_host: tensor ") + handle + " is not a live tensor handle");
  EXPECT_ERR(lt_tensor_to_host(c, host.data(), 24), LT_STATUS_INVALID_ARGUMENT,
             "used after its last lt_tensor_free");
  EXPECT_ERR(lt_mul(a, c, &o), LT_STATUS_INVALID_ARGUMENT,
             std::string("mul: input 1 ") + handle + " is not a live tensor handle");
  EXPECT_EQ(o, nullptr);
  EXPECT_ERR(lt_tensor_materialize(c), LT_STATUS_INVALID_ARGUMENT, handle);
  EXPECT_ERR(lt_tensor_set_name(c, "x"), LT_STATUS_INVALID_ARGUMENT, handle);
  EXPECT_ERR(lt_backward(c, nullptr), LT_STATUS_INVALID_ARGUMENT, handle);
  EXPECT_ERR(lt_tensor_set_requires_grad(c, 1), LT_STATUS_INVALID_ARGUMENT, handle);
  EXPECT_EQ(lt_tensor_rank(c), 0u);
  EXPECT_EQ(lt_tensor_shape(c), nullptr);
  EXPECT_EQ(lt_tensor_dtype(c), LT_DTYPE_INVALID);
  EXPECT_EQ(lt_tensor_device(c), nullptr);
  EXPECT_EQ(lt_tensor_retain(c), nullptr);
  lt_tensor_free(c);  // a second free is ignored
  // Other handles are untouched, and new ones work.
  LT_OK(lt_add(a, a, &o));
  EXPECT_EQ(to_host(o), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  lt_tensor_free(o);
}

// Issue #28 (source locations): LT_AT records the caller's file and line on the node the op
// makes; an op without it records none, and a location is consumed by one op only.
TEST_F(Errors, LtAtRecordsTheCallersLine) {
  lt_tensor *c = nullptr, *e = nullptr;
  const uint32_t line = __LINE__ + 1;
  LT_OK(LT_AT(lt_add(a, a, &c)));
  const char* file = nullptr;
  uint32_t got = 0;
  ASSERT_EQ(lt_tensor_traced_at(c, &file, &got), 1);
  EXPECT_STREQ(file, __FILE__);
  EXPECT_EQ(got, line);
  LT_OK(lt_mul(c, a, &e));
  EXPECT_EQ(lt_tensor_traced_at(e, &file, &got), 0);
  EXPECT_EQ(lt_tensor_traced_at(a, &file, &got), 0);  // a leaf from host data
  lt_tensor_free(c);
  lt_tensor_free(e);
}
