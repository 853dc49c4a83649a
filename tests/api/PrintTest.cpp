// PrintTest.cpp — NumPy-style printing of lt::Tensor: layout of every rank, dtypes, empty and
// null tensors, and truncation with "..." for large tensors.
#include <lazytensor/lazytensor.hpp>

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace {

lt::Device dev() {
  return lt::test::runtime().default_device();
}

std::string print(const lt::Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

TEST(Print, Matrix) {
  lt::Tensor t = lt::Tensor::from<float>(dev(), {1, 2.5f, 3, 4, 5, -6}, {2, 3});
  EXPECT_EQ(print(t),
            "tensor([[1, 2.5, 3],\n"
            "        [4, 5, -6]], dtype=f32, shape=[2,3])");
}

TEST(Print, Rank0VectorAndDtypes) {
  EXPECT_EQ(print(lt::Tensor::scalar(dev(), 3.25, lt::f64)), "tensor(3.25, dtype=f64, shape=[])");
  EXPECT_EQ(print(lt::Tensor::from<int64_t>(dev(), {-1, 20})),
            "tensor([-1, 20], dtype=i64, shape=[2])");
  EXPECT_EQ(print(lt::Tensor::from<bool>(dev(), {true, false})),
            "tensor([true, false], dtype=bool, shape=[2])");
  EXPECT_EQ(print(lt::Tensor::from<int32_t>(dev(), {7}, {1, 1})),
            "tensor([[7]], dtype=i32, shape=[1,1])");
}

TEST(Print, Rank3SeparatesBlocksWithABlankLine) {
  lt::Tensor t = lt::arange(dev(), 0, 8, 1, lt::i32).reshape({2, 2, 2});
  EXPECT_EQ(print(t),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]], dtype=i32, shape=[2,2,2])");
}

TEST(Print, EmptyAndNull) {
  EXPECT_EQ(print(lt::zeros(dev(), {0, 3})), "tensor([], dtype=f32, shape=[0,3])");
  EXPECT_EQ(print(lt::Tensor()), "tensor(null)");
  EXPECT_EQ(lt::to_string(lt::zeros(dev(), {1})), "tensor([0], dtype=f32, shape=[1])");
}

TEST(Print, LargeTensorsAreTruncated) {
  lt::Tensor v = lt::arange(dev(), 0, 2000, 1, lt::i64);
  EXPECT_EQ(print(v), "tensor([0, 1, 2, ..., 1997, 1998, 1999], dtype=i64, shape=[2000])");
  lt::Tensor m = lt::arange(dev(), 0, 100 * 100, 1, lt::i32).reshape({100, 100});
  std::string s = print(m);
  EXPECT_LT(s.size(), 400u) << s;
  EXPECT_NE(s.find("[0, 1, 2, ..., 97, 98, 99]"), std::string::npos) << s;
  EXPECT_NE(s.find("[9900, 9901, 9902, ..., 9997, 9998, 9999]]"), std::string::npos) << s;
  EXPECT_NE(s.find(" ...,\n"), std::string::npos) << s;
  // Small tensors are never truncated.
  EXPECT_EQ(print(lt::arange(dev(), 0, 10, 1, lt::i32)).find("..."), std::string::npos);
}

TEST(Print, PendingTensorsAreMaterialisedToPrint) {
  lt::Tensor a = lt::Tensor::from<float>(dev(), {1, 2});
  lt::Tensor b = a * 3;
  EXPECT_FALSE(b.is_materialized());
  EXPECT_EQ(print(b), "tensor([3, 6], dtype=f32, shape=[2])");
}

}  // namespace
