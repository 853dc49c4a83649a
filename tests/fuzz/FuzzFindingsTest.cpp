// FuzzFindingsTest.cpp — each bug the fuzzers found, stated as the behaviour it now has, so a
// build without sanitizers (where undefined behaviour may pass unnoticed) still checks it. The
// inputs that found them are in tests/fuzz/corpus/ (crash_*), replayed by fuzz.<name>.corpus.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "fuzz_util.hpp"
#include "plugin_harness.hpp"

namespace {

namespace pt = lt::plugin_test;

// The code and message of an error, which it frees; {OK, ""} for success.
std::pair<lt_status_code, std::string> take(lt_error* e) {
  if (!e) return {LT_STATUS_OK, ""};
  std::pair<lt_status_code, std::string> r{lt_error_code(e), lt_error_message(e)};
  lt_error_destroy(e);
  return r;
}

TEST(FuzzFindings, ArangeLongerThanInt64IsRefused) {
  lt_tensor* t = nullptr;
  auto [code, msg] = take(lt_arange(lt::fuzz::eager_device(), 0, 1e300, 1, LT_DTYPE_F32, &t));
  EXPECT_EQ(code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("arange"), std::string::npos) << msg;
  EXPECT_EQ(t, nullptr);
  // Still fine: a long but representable arange is refused by the byte limit, a short one runs.
  EXPECT_EQ(take(lt_arange(lt::fuzz::eager_device(), 0, 1e18, 1, LT_DTYPE_F32, &t)).first,
            LT_STATUS_INVALID_ARGUMENT);
  ASSERT_EQ(take(lt_arange(lt::fuzz::eager_device(), 0, 3, 1, LT_DTYPE_F32, &t)).first,
            LT_STATUS_OK);
  EXPECT_EQ(lt_tensor_numel(t), 3);
  lt_tensor_free(t);
}

TEST(FuzzFindings, EmptyShapeWhoseOtherDimsOverflowIsRefused) {
  const int64_t huge[] = {0, int64_t{1} << 62, 4};
  lt_tensor* t = nullptr;
  auto [code, msg] = take(lt_full(lt::fuzz::eager_device(), huge, 3, 1, LT_DTYPE_F32, &t));
  EXPECT_EQ(code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("without its zero dims"), std::string::npos) << msg;
  // An empty tensor whose other dims are modest is still an empty tensor.
  const int64_t empty[] = {0, 1000, 4};
  ASSERT_EQ(take(lt_full(lt::fuzz::eager_device(), empty, 3, 1, LT_DTYPE_F32, &t)).first,
            LT_STATUS_OK);
  EXPECT_EQ(lt_tensor_numel(t), 0);
  EXPECT_EQ(take(lt_tensor_to_host(t, nullptr, 0)).first, LT_STATUS_OK);
  lt_tensor_free(t);
}

TEST(FuzzFindings, EmptyTensorsReshapeAndCopyOutWithNullPointers) {
  // An empty tensor may have no buffer at all: the host executor's reshape and output copies
  // and the kit's upload/download passed NULL to memcpy (UB even for 0 bytes).
  const int64_t shape[] = {0, 3}, flat[] = {3, 0};
  lt_tensor *a = nullptr, *r = nullptr, *h = nullptr;
  ASSERT_EQ(take(lt_full(lt::fuzz::eager_device(), shape, 2, 1, LT_DTYPE_F32, &a)).first,
            LT_STATUS_OK);
  ASSERT_EQ(take(lt_reshape(a, flat, 2, &r)).first, LT_STATUS_OK);
  EXPECT_EQ(take(lt_tensor_to_host(r, nullptr, 0)).first, LT_STATUS_OK);
  ASSERT_EQ(
      take(lt_tensor_from_host(lt::fuzz::eager_device(), LT_DTYPE_F32, flat, 2, nullptr, 0, &h))
          .first,
      LT_STATUS_OK);
  EXPECT_EQ(take(lt_tensor_to_host(h, nullptr, 0)).first, LT_STATUS_OK);
  for (lt_tensor* t : {a, r, h}) lt_tensor_free(t);
  // Softmax over an axis of length 0: the kernel offset NULL pointers (outer x inner > 0).
  const int64_t rows[] = {2, 0};
  lt_tensor *e = nullptr, *sm = nullptr;
  ASSERT_EQ(take(lt_full(lt::fuzz::eager_device(), rows, 2, 1, LT_DTYPE_F32, &e)).first,
            LT_STATUS_OK);
  ASSERT_EQ(take(lt_softmax(e, 1, &sm)).first, LT_STATUS_OK);
  EXPECT_EQ(take(lt_tensor_to_host(sm, nullptr, 0)).first, LT_STATUS_OK);
  lt_tensor_free(sm);
  lt_tensor_free(e);
}

TEST(FuzzFindings, ShapeArithmeticOfReshapePadConcatAndWindowsDoesNotOverflow) {
  lt_device* dev = lt::fuzz::eager_device();
  const int64_t shape[] = {2, 3};
  lt_tensor* a = nullptr;
  ASSERT_EQ(take(lt_full(dev, shape, 2, 1, LT_DTYPE_F32, &a)).first, LT_STATUS_OK);
  lt_tensor* out = nullptr;
  // reshape: the target's element count overflowed int64 before it was compared.
  const int64_t big[] = {12, int64_t{1} << 62, 4};
  auto [code, msg] = take(lt_reshape(a, big, 3, &out));
  EXPECT_EQ(code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("reshape"), std::string::npos) << msg;
  // pad: dim + before + after overflowed.
  const int64_t before[] = {0, INT64_MAX}, after[] = {0, INT64_MAX};
  EXPECT_EQ(take(lt_pad(a, before, after, 2, 0, &out)).first, LT_STATUS_INVALID_ARGUMENT);
  // pooling and convolution windows: 2 * padding and dilation * (kernel - 1) overflowed.
  const int64_t x_shape[] = {1, 1, 4, 4};
  lt_tensor* x = nullptr;
  ASSERT_EQ(take(lt_full(dev, x_shape, 4, 1, LT_DTYPE_F32, &x)).first, LT_STATUS_OK);
  const int64_t kernel[] = {int64_t{1} << 62, 2}, stride[] = {1, 1}, pad[] = {0, 0};
  std::tie(code, msg) = take(lt_max_pool2d(x, kernel, stride, pad, &out));
  EXPECT_EQ(code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("above"), std::string::npos) << msg;
  // conv2d: weight channels x groups overflowed before it was compared with the input's.
  const int64_t w_shape[] = {1, 1, 2, 2}, one[] = {1, 1}, zero[] = {0, 0};
  lt_tensor* w = nullptr;
  ASSERT_EQ(take(lt_full(dev, w_shape, 4, 1, LT_DTYPE_F32, &w)).first, LT_STATUS_OK);
  EXPECT_EQ(take(lt_conv2d(x, w, nullptr, one, zero, one, INT64_MAX, &out)).first,
            LT_STATUS_SHAPE_MISMATCH);
  lt_tensor_free(w);
  // Ordinary windows still work.
  const int64_t k2[] = {2, 2};
  ASSERT_EQ(take(lt_max_pool2d(x, k2, k2, pad, &out)).first, LT_STATUS_OK);
  EXPECT_EQ(lt_tensor_numel(out), 4);
  for (lt_tensor* t : {a, x, out}) lt_tensor_free(t);
}

TEST(FuzzFindings, EveryInt32IsAValueOfTheCEnums) {
  // Values from a C caller or plugin are loaded as these types before they are checked.
  static_assert(sizeof(lt_dtype) == 4 && sizeof(lt_attr_kind) == 4);
  EXPECT_EQ(static_cast<int64_t>(LT_DTYPE_MIN_ENUM_), INT32_MIN);
  EXPECT_EQ(static_cast<int64_t>(LT_ATTR_KIND_MIN_ENUM_), INT32_MIN);
  EXPECT_EQ(static_cast<int64_t>(LT_ATTR_KIND_MAX_ENUM_), INT32_MAX);
}

TEST(FuzzFindings, GraphWithNegativeDtypeOrUnknownAttrKindIsRefusedByThePlugin) {
  const lt_plugin_api* api = pt::load_api(LT_FUZZ_CPU_EAGER_PATH);
  ASSERT_NE(api, nullptr);
  pt::Session s(api);
  ASSERT_TRUE(s.create().ok());
  const int64_t shape[] = {2};
  const int32_t operand[] = {0};
  lt_attr attr{};
  attr.name = "axis";
  attr.kind = static_cast<lt_attr_kind>(77);
  lt_graph_node nodes[2] = {
      {"input", static_cast<lt_dtype>(-1), 1, shape, 0, nullptr, 0, nullptr},
      {"softmax", LT_DTYPE_F32, 1, shape, 1, operand, 1, &attr},
  };
  const int32_t in[] = {0}, out[] = {1};
  lt_graph g{LT_GRAPH_STRUCT_SIZE, 2, nodes, 1, in, 1, out, 0};
  lt_plugin_executable* exe = nullptr;
  pt::Status st = s.compile(g, &exe);
  EXPECT_EQ(st.code, LT_STATUS_DTYPE_MISMATCH) << st.message;
  EXPECT_NE(st.message.find("dtype"), std::string::npos) << st.message;
  nodes[0].dtype = LT_DTYPE_F32;  // now only the attribute is wrong
  st = s.compile(g, &exe);
  EXPECT_NE(st.code, LT_STATUS_OK);
  EXPECT_NE(st.message.find("axis"), std::string::npos) << st.message;
  EXPECT_EQ(exe, nullptr);
}

}  // namespace
