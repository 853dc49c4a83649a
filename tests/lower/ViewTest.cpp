// ViewTest.cpp — Views against a reference: random chains of broadcast_to / permute / slice /
// pad / reshape / concat-part over a small buffer, every index of the result mapped back by
// hand through the chain and compared with View::valid / View::at; and operand_view, how each op
// reads its operand.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>

#include "lazytensor/lower/graph.hpp"
#include "lazytensor/lower/view.hpp"

namespace {

using lt::lower::Shape;
using lt::lower::View;

// Reference: index of the chain's output -> flat index of the base buffer, or nullopt (fill).
using Ref = std::function<std::optional<int64_t>(const Shape&)>;

Shape unravel(int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return idx;
}
int64_t ravel(const Shape& idx, const Shape& shape) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + idx[i];
  return f;
}
int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

void expect_same(const View& v, const Ref& ref, const std::string& what) {
  for (int64_t f = 0; f < numel(v.shape); ++f) {
    Shape idx = unravel(f, v.shape);
    std::optional<int64_t> want = ref(idx);
    ASSERT_EQ(v.valid(idx), want.has_value()) << what << " at flat " << f;
    if (want) ASSERT_EQ(v.at(idx), *want) << what << " at flat " << f;
  }
}

TEST(View, RandomLayoutChainsMatchTheReference) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    Shape base{pick(1, 4), pick(1, 3), pick(1, 4)};
    View v = View::dense(base);
    Ref ref = [base](const Shape& idx) -> std::optional<int64_t> { return ravel(idx, base); };
    std::string what = "chain";
    for (int step = 0; step < 4; ++step) {
      Shape cur = v.shape;
      int op = pick(0, 4);
      if (op == 0) {  // permute
        std::vector<int64_t> perm(cur.size());
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
        std::shuffle(perm.begin(), perm.end(), rng);
        v = v.permute(perm);
        ref = [ref, perm](const Shape& o) {
          Shape in(o.size());
          for (size_t i = 0; i < o.size(); ++i) in[perm[i]] = o[i];
          return ref(in);
        };
        what += " permute";
      } else if (op == 1) {  // slice with random signs of step
        std::vector<int64_t> starts(cur.size()), steps(cur.size());
        Shape out(cur.size());
        for (size_t i = 0; i < cur.size(); ++i) {
          steps[i] = pick(0, 1) ? pick(1, 2) : -pick(1, 2);
          starts[i] = pick(0, static_cast<int>(cur[i]) - 1);
          int64_t room = steps[i] > 0 ? (cur[i] - 1 - starts[i]) / steps[i] : starts[i] / -steps[i];
          out[i] = pick(1, static_cast<int>(room) + 1);
        }
        v = v.slice(starts, steps, out);
        ref = [ref, starts, steps](const Shape& o) {
          Shape in(o.size());
          for (size_t i = 0; i < o.size(); ++i) in[i] = starts[i] + o[i] * steps[i];
          return ref(in);
        };
        what += " slice";
      } else if (op == 2) {  // pad (a constant fill keeps the reference simple)
        std::vector<int64_t> before(cur.size()), after(cur.size());
        for (size_t i = 0; i < cur.size(); ++i) before[i] = pick(0, 2), after[i] = pick(0, 2);
        v = v.pad(before, after, 0.0);
        ref = [ref, before, cur](const Shape& o) -> std::optional<int64_t> {
          Shape in(o.size());
          for (size_t i = 0; i < o.size(); ++i) {
            in[i] = o[i] - before[i];
            if (in[i] < 0 || in[i] >= cur[i]) return std::nullopt;
          }
          return ref(in);
        };
        what += " pad";
      } else if (op == 3) {  // broadcast a leading dim and size-1 dims
        Shape out{pick(1, 2)};
        for (int64_t d : cur) out.push_back(d == 1 ? pick(1, 3) : d);
        v = v.broadcast_to(out);
        ref = [ref, cur](const Shape& o) {
          Shape in(cur.size());
          for (size_t i = 0; i < cur.size(); ++i) in[i] = cur[i] == 1 ? 0 : o[i + 1];
          return ref(in);
        };
        what += " broadcast";
      } else {  // reshape: merge the first two dims when the view allows it
        if (cur.size() < 2) continue;
        Shape out{cur[0] * cur[1]};
        out.insert(out.end(), cur.begin() + 2, cur.end());
        auto r = v.reshape(out);
        if (!r) continue;
        v = *r;
        ref = [ref, cur](const Shape& o) {
          Shape in(cur.size());
          in[0] = o[0] / cur[1], in[1] = o[0] % cur[1];
          for (size_t i = 2; i < cur.size(); ++i) in[i] = o[i - 1];
          return ref(in);
        };
        what += " reshape";
      }
      expect_same(v, ref, what);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(View, ConcatPartsTileTheOutput) {
  View a = View::dense(Shape{2, 3}), b = View::dense(Shape{2, 2});
  View pa = a.concat_part(1, 0, 5), pb = b.concat_part(1, 3, 5);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 5; ++c) {
      Shape idx{r, c};
      EXPECT_NE(pa.valid(idx), pb.valid(idx));
      if (pa.valid(idx)) EXPECT_EQ(pa.at(idx), r * 3 + c);
      if (pb.valid(idx)) EXPECT_EQ(pb.at(idx), r * 2 + (c - 3));
    }
}

TEST(View, ReshapeRefusesWhatNeedsACopy) {
  View t = View::dense(Shape{3, 4}).permute(std::vector<int64_t>{1, 0});  // [4,3], strides {1,4}
  EXPECT_FALSE(t.reshape(Shape{12}).has_value());
  EXPECT_TRUE(t.reshape(Shape{4, 1, 3}).has_value());
  EXPECT_TRUE(View::dense(Shape{2, 6}).reshape(Shape{3, 4}).has_value());
}

TEST(View, CoalesceMergesWhatEveryViewWalksContiguously) {
  View out = View::dense(Shape{2, 3, 4});
  View bias = View::dense(Shape{4}).broadcast_to(Shape{2, 3, 4});
  auto l = lt::lower::coalesce(std::vector<View>{out, bias});
  EXPECT_EQ(l.dims, (Shape{6, 4}));  // 2 and 3 merge for both; 4 is where bias varies
  EXPECT_EQ(l.strides[1], (std::vector<int64_t>{0, 1}));
  auto one = lt::lower::coalesce(std::vector<View>{View::dense(Shape{1, 1})});
  EXPECT_EQ(one.dims, (Shape{1}));
  EXPECT_TRUE(View::dense(Shape{2, 3}).contiguous());
  EXPECT_FALSE(View::dense(Shape{2, 3}).permute(std::vector<int64_t>{1, 0}).contiguous());
}

TEST(View, OperandViewSaysHowEachOpReadsItsOperand) {
  lt::lower::OwnedGraph g;
  const int64_t perm[2] = {1, 0}, before[2] = {0, 1}, after[2] = {0, 2}, axes = 1;
  const lt_attr pa{"perm", LT_ATTR_INTS, 0, 0.0, perm, 2, nullptr};
  const lt_attr pad[3] = {{"before", LT_ATTR_INTS, 0, 0.0, before, 2, nullptr},
                          {"after", LT_ATTR_INTS, 0, 0.0, after, 2, nullptr},
                          {"value", LT_ATTR_FLOAT, 0, 7.0, nullptr, 0, nullptr}};
  const lt_attr cat{"axis", LT_ATTR_INT, 1, 0.0, nullptr, 0, nullptr};
  const lt_attr red{"axes", LT_ATTR_INTS, 0, 0.0, &axes, 1, nullptr};
  int32_t x = g.add("input", LT_DTYPE_F32, {2, 3}, {});
  int32_t b = g.add("input", LT_DTYPE_F32, {3}, {});
  int32_t i = g.add("input", LT_DTYPE_I64, {2}, {});
  int32_t add = g.add("add", LT_DTYPE_F32, {2, 3}, {x, b});
  int32_t t = g.add("permute", LT_DTYPE_F32, {3, 2}, {x}, &pa, 1);
  int32_t p = g.add("pad", LT_DTYPE_F32, {2, 6}, {x}, pad, 3);
  int32_t c = g.add("concat", LT_DTYPE_F32, {2, 6}, {x, x}, &cat, 1);
  int32_t s = g.add("sum", LT_DTYPE_F32, {2, 1}, {x}, &red, 1);
  int32_t gt = g.add("gather", LT_DTYPE_F32, {2, 3}, {x, i});
  const lt_graph& v = g.view();
  EXPECT_EQ(lt::lower::operand_view(v, add, 1)->strides, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(lt::lower::operand_view(v, t, 0)->strides, (std::vector<int64_t>{1, 3}));
  const View pv = *lt::lower::operand_view(v, p, 0);
  EXPECT_TRUE(pv.masked());
  EXPECT_EQ(pv.fill, 7.0);
  EXPECT_FALSE(pv.valid(Shape{0, 0}));
  EXPECT_EQ(pv.at(Shape{1, 1}), 3);
  const View second = *lt::lower::operand_view(v, c, 1);  // starts at column 3
  EXPECT_FALSE(second.valid(Shape{0, 2}));
  EXPECT_EQ(second.at(Shape{1, 4}), 4);
  EXPECT_EQ(lt::lower::operand_view(v, s, 0)->shape, (Shape{2, 3}));  // over its operand
  EXPECT_FALSE(lt::lower::operand_view(v, gt, 0).has_value());
}

}  // namespace
