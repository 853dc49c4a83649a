// OpsTest.cpp — shape/dtype inference and canonicalisation of the op registry, checked on the
// recorded (not executed) tensors.
#include "test_util.h"

#include <climits>

using namespace lt_test;

class Ops : public ::testing::Test {
 protected:
  void SetUp() override {
    h.rt = make_runtime(plugin_dir("partial"), "partial");
    ASSERT_NE(h.rt, nullptr);
    d = lt_runtime_default_device(h.rt);
  }
  lt_tensor* zeros(std::vector<int64_t> s, lt_dtype dt = LT_DTYPE_F32) {
    lt_tensor* t = nullptr;
    EXPECT_EQ(lt_full(d, s.data(), s.size(), 0.0, dt, &t), nullptr);
    keep.push_back(t);
    return t;
  }
  std::vector<int64_t> shape(lt_tensor* t) {
    keep.push_back(t);
    return std::vector<int64_t>(lt_tensor_shape(t), lt_tensor_shape(t) + lt_tensor_rank(t));
  }
  void TearDown() override {
    for (auto* t : keep) lt_tensor_free(t);
  }
  RuntimeHandle h;
  lt_device* d = nullptr;
  std::vector<lt_tensor*> keep;
};

using V = std::vector<int64_t>;

TEST_F(Ops, BroadcastingAndPromotion) {
  lt_tensor* o = nullptr;
  LT_OK(lt_add(zeros({2, 1, 3}), zeros({4, 1}, LT_DTYPE_I32), &o));
  EXPECT_EQ(shape(o), (V{2, 4, 3}));
  EXPECT_EQ(lt_tensor_dtype(o), LT_DTYPE_F32);
  LT_OK(lt_lt(zeros({3}, LT_DTYPE_I64), zeros({3}, LT_DTYPE_I32), &o));
  EXPECT_EQ(lt_tensor_dtype(o), LT_DTYPE_BOOL);
  keep.push_back(o);
  lt_tensor* w = nullptr;
  LT_OK(lt_where(o, zeros({2, 3}), zeros({1}, LT_DTYPE_F64), &w));
  EXPECT_EQ(shape(w), (V{2, 3}));
  EXPECT_EQ(lt_tensor_dtype(w), LT_DTYPE_F64);
}

TEST_F(Ops, ReductionsNormaliseAxes) {
  lt_tensor* o = nullptr;
  int64_t ax[2] = {-1, 0};
  LT_OK(lt_sum(zeros({2, 3, 4}), ax, 2, 0, &o));
  EXPECT_EQ(shape(o), (V{3}));
  LT_OK(lt_mean(zeros({2, 3, 4}), ax, 2, 1, &o));
  EXPECT_EQ(shape(o), (V{1, 3, 1}));
  LT_OK(lt_max(zeros({2, 3}), nullptr, 0, 0, &o));
  EXPECT_EQ(shape(o), (V{}));
  LT_OK(lt_argmax(zeros({2, 3}), -1, 0, &o));
  EXPECT_EQ(shape(o), (V{2}));
  EXPECT_EQ(lt_tensor_dtype(o), LT_DTYPE_I64);
  int64_t dup[2] = {1, -1};
  lt_tensor* bad = nullptr;
  Err e(lt_sum(zeros({2, 3}), dup, 2, 0, &bad));
  EXPECT_NE(e.msg().find("repeated axis"), std::string::npos);
  Err e2(lt_max(zeros({0, 3}), nullptr, 0, 0, &bad));
  EXPECT_NE(e2.msg().find("empty axis"), std::string::npos);
}

TEST_F(Ops, LayoutShapes) {
  lt_tensor* o = nullptr;
  int64_t rs[2] = {-1, 4};
  LT_OK(lt_reshape(zeros({2, 3, 4}), rs, 2, &o));
  EXPECT_EQ(shape(o), (V{6, 4}));
  int64_t perm[3] = {2, 0, 1};
  LT_OK(lt_permute(zeros({2, 3, 4}), perm, 3, &o));
  EXPECT_EQ(shape(o), (V{4, 2, 3}));
  int64_t bt[3] = {5, 2, 3};
  LT_OK(lt_broadcast_to(zeros({2, 1}), bt, 3, &o));
  EXPECT_EQ(shape(o), (V{5, 2, 3}));
  int64_t st[2] = {-3, 100}, sp[2] = {INT64_MAX, -100}, step[2] = {1, -2};
  LT_OK(lt_slice(zeros({10, 7}), st, sp, step, 2, &o));
  EXPECT_EQ(shape(o), (V{3, 4}));  // rows 7..9; cols 6,4,2,0
  lt_tensor* cat_in[3] = {zeros({2, 3}), zeros({2, 5}), zeros({2, 1}, LT_DTYPE_I32)};
  LT_OK(lt_concat(cat_in, 3, -1, &o));
  EXPECT_EQ(shape(o), (V{2, 9}));
  int64_t pb[2] = {1, 0}, pa[2] = {2, 3};
  LT_OK(lt_pad(zeros({2, 3}), pb, pa, 2, 0.0, &o));
  EXPECT_EQ(shape(o), (V{5, 6}));
  LT_OK(lt_gather(zeros({5, 6, 7}), zeros({2, 3}, LT_DTYPE_I64), 1, &o));
  EXPECT_EQ(shape(o), (V{5, 2, 3, 7}));
  LT_OK(lt_scatter_add(zeros({5, 6}), zeros({4}, LT_DTYPE_I32), zeros({5, 4}), 1, &o));
  EXPECT_EQ(shape(o), (V{5, 6}));
}

TEST_F(Ops, NnShapes) {
  lt_tensor* o = nullptr;
  int64_t s[2] = {2, 2}, p[2] = {1, 1}, dl[2] = {1, 1};
  LT_OK(lt_conv2d(zeros({2, 4, 9, 9}), zeros({6, 2, 3, 3}), zeros({6}), s, p, dl, 2, &o));
  EXPECT_EQ(shape(o), (V{2, 6, 5, 5}));
  int64_t k[2] = {3, 3};
  LT_OK(lt_max_pool2d(zeros({1, 2, 7, 7}), k, s, p, &o));
  EXPECT_EQ(shape(o), (V{1, 2, 4, 4}));
  LT_OK(lt_avg_pool2d(zeros({1, 2, 7, 7}), k, nullptr, nullptr, &o));
  EXPECT_EQ(shape(o), (V{1, 2, 2, 2}));
  LT_OK(lt_softmax(zeros({2, 3}), -1, &o));
  EXPECT_EQ(shape(o), (V{2, 3}));
  int64_t big[2] = {3, 3};
  lt_tensor* bad = nullptr;
  Err e(lt_max_pool2d(zeros({1, 1, 4, 4}), k, nullptr, big, &bad));
  EXPECT_NE(e.msg().find("padding"), std::string::npos);
}

TEST_F(Ops, CreationShapes) {
  lt_tensor* o = nullptr;
  LT_OK(lt_arange(d, 0, 10, 3, LT_DTYPE_I32, &o));
  EXPECT_EQ(shape(o), (V{4}));
  LT_OK(lt_arange(d, 5, 0, -2, LT_DTYPE_F32, &o));
  EXPECT_EQ(shape(o), (V{3}));
  int64_t s[2] = {3, 4};
  LT_OK(lt_random_uniform(d, s, 2, 42, 0, 1, LT_DTYPE_F32, &o));
  EXPECT_EQ(shape(o), (V{3, 4}));
  LT_OK(lt_random_normal(d, s, 2, 7, 0, 1, LT_DTYPE_F64, &o));
  EXPECT_EQ(lt_tensor_dtype(o), LT_DTYPE_F64);
  keep.push_back(o);
  lt_tensor* bad = nullptr;
  Err e(lt_random_uniform(d, s, 2, 1, 0, 1, LT_DTYPE_I32, &bad));
  EXPECT_NE(e.msg().find("random_uniform: dtype i32 is not a float type"), std::string::npos);
}

TEST_F(Ops, ApplyByNameWithAttributes) {
  lt_tensor* x = zeros({2, 3});
  lt_attr at[2] = {};
  int64_t axes[1] = {1};
  at[0].name = "axes", at[0].kind = LT_ATTR_INTS, at[0].ints = axes, at[0].ints_len = 1;
  at[1].name = "keepdims", at[1].kind = LT_ATTR_INT, at[1].i = 1;
  lt_tensor* o = nullptr;
  LT_OK(lt_apply(nullptr, "sum", &x, 1, at, 2, &o));
  EXPECT_EQ(shape(o), (V{2, 1}));
  lt_attr wrong = at[1];
  wrong.kind = LT_ATTR_FLOAT;
  lt_tensor* bad = nullptr;
  Err e(lt_apply(nullptr, "sum", &x, 1, &wrong, 1, &bad));
  EXPECT_NE(e.msg().find("sum: attribute 'keepdims' must be INT"), std::string::npos);
}
