// difftest.cpp — random programs traced on two cpu_eager runtimes (optimize none against exact
// or fast) and their outputs compared (difftest.hpp).
#include "difftest.hpp"

#include "lazytensor/lower/graph.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

namespace lt_difftest {
namespace {

using Attr = lt::lower::OwnedAttr;  // the core IR's owned attribute

// One value of the program: an input (host data) or an op over earlier values.
struct Step {
  std::string op;  // "" for an input
  std::vector<int> in;
  std::vector<Attr> attrs;
  lt_dtype dtype = LT_DTYPE_F32;  // of an input
  std::vector<int64_t> shape;     // of an input
  std::vector<unsigned char> data;
};

struct Val {
  lt_dtype dt;
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

bool is_float(lt_dtype d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64 || d == LT_DTYPE_BF16 || d == LT_DTYPE_F16;
}
bool is_int(lt_dtype d) {
  return d == LT_DTYPE_I32 || d == LT_DTYPE_I64;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Records `s` on runtime device `dev` from the tensors of its operands; null with `why` set
// when lt.h refuses it.
lt_tensor* record(lt_device* dev, const Step& s, const std::vector<lt_tensor*>& t,
                  std::string* why) {
  lt_tensor* out = nullptr;
  lt_error* e = nullptr;
  if (s.op.empty()) {
    e = lt_tensor_from_host(dev, s.dtype, s.shape.data(), s.shape.size(),
                            s.data.empty() ? nullptr : s.data.data(), s.data.size(), &out);
  } else {
    std::vector<lt_tensor*> ins;
    for (int k : s.in) ins.push_back(t[static_cast<size_t>(k)]);
    std::vector<lt_attr> attrs;
    for (const Attr& a : s.attrs) attrs.push_back(a.view());
    e = lt_apply(dev, s.op.c_str(), ins.data(), ins.size(), attrs.data(), attrs.size(), &out);
  }
  if (e) {
    if (why) *why = lt_error_message(e);
    lt_error_destroy(e);
    return nullptr;
  }
  return out;
}

class Generator {
 public:
  Generator(uint64_t seed, lt_device* dev) : rng_(seed), dev_(dev) {}
  ~Generator() {
    for (lt_tensor* t : t_) lt_tensor_free(t);
  }

  std::vector<Step> steps;
  std::vector<Val> vals;

  void build(size_t n_ops) {
    for (int k = 0, n = 1 + static_cast<int>(below(3)); k < n; ++k) input(any_dtype(), shape());
    for (size_t k = 0; k < n_ops * 4 && count_ops_ < n_ops; ++k) one();
  }
  lt_tensor* tensor(size_t i) const { return t_[i]; }
  void release(size_t i) {
    lt_tensor_free(t_[i]);
    t_[i] = nullptr;
  }

 private:
  uint64_t below(uint64_t n) { return n ? rng_() % n : 0; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  lt_dtype any_dtype() {
    static const lt_dtype kAll[] = {LT_DTYPE_F32,  LT_DTYPE_F32,  LT_DTYPE_F32,
                                    LT_DTYPE_F64,  LT_DTYPE_I32,  LT_DTYPE_I64,
                                    LT_DTYPE_BOOL, LT_DTYPE_BF16, LT_DTYPE_F16};
    return kAll[below(sizeof kAll / sizeof kAll[0])];
  }
  std::vector<int64_t> shape(size_t max_rank = 3) {
    std::vector<int64_t> s(below(max_rank + 1));
    for (int64_t& d : s) d = chance(0.05) ? 0 : 1 + static_cast<int64_t>(below(4));
    return s;
  }

  double special() {
    static const double kSpecial[] = {0.0,  -0.0,   1.0,   -1.0,  0.5,  -2.5,  3.0,
                                      1e30, -1e-40, 1e-45, 65504, 7.25, -100.0};
    const uint64_t r = below(20);
    if (r == 0) return std::numeric_limits<double>::quiet_NaN();
    if (r == 1) return -std::numeric_limits<double>::quiet_NaN();
    if (r == 2) return std::numeric_limits<double>::infinity();
    if (r == 3) return -std::numeric_limits<double>::infinity();
    if (r < 10) return kSpecial[below(sizeof kSpecial / sizeof kSpecial[0])];
    return std::normal_distribution<double>(0, 2)(rng_);
  }

  int add(Step s) {
    std::string why;
    lt_tensor* t = record(dev_, s, t_, &why);
    if (!t) return -1;
    t_.push_back(t);
    vals.push_back(
        {lt_tensor_dtype(t),
         std::vector<int64_t>(lt_tensor_shape(t), lt_tensor_shape(t) + lt_tensor_rank(t))});
    if (!s.op.empty()) ++count_ops_;
    steps.push_back(std::move(s));
    return static_cast<int>(vals.size() - 1);
  }

  int input(lt_dtype dt, std::vector<int64_t> sh, int64_t index_below = 0) {
    Step s;
    s.dtype = dt;
    s.shape = std::move(sh);
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    const size_t es = lt_dtype_size(dt);
    s.data.resize(static_cast<size_t>(n) * es);
    for (int64_t i = 0; i < n; ++i) {
      unsigned char* p = s.data.data() + static_cast<size_t>(i) * es;
      if (index_below > 0) {
        const int64_t v = static_cast<int64_t>(below(static_cast<uint64_t>(index_below)));
        if (dt == LT_DTYPE_I64)
          std::memcpy(p, &v, 8);
        else {
          const int32_t v32 = static_cast<int32_t>(v);
          std::memcpy(p, &v32, 4);
        }
        continue;
      }
      const double v = special();
      switch (dt) {
        case LT_DTYPE_F32: {
          const float f = static_cast<float>(v);
          std::memcpy(p, &f, 4);
          break;
        }
        case LT_DTYPE_F64:
          std::memcpy(p, &v, 8);
          break;
        case LT_DTYPE_BF16: {
          const float f = static_cast<float>(v);
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          const uint16_t h = static_cast<uint16_t>(bits >> 16);
          std::memcpy(p, &h, 2);
          break;
        }
        case LT_DTYPE_F16: {
          static const uint16_t kHalf[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7e00, 0x7c00,
                                           0xfc00, 0x3555, 0x0001, 0x7bff, 0xc900};
          const uint16_t h = kHalf[below(sizeof kHalf / sizeof kHalf[0])];
          std::memcpy(p, &h, 2);
          break;
        }
        case LT_DTYPE_I32: {
          const int32_t x = chance(0.05) ? std::numeric_limits<int32_t>::max()
                                         : static_cast<int32_t>(below(11)) - 5;
          std::memcpy(p, &x, 4);
          break;
        }
        case LT_DTYPE_I64: {
          const int64_t x = chance(0.05) ? (int64_t{1} << 60) : static_cast<int64_t>(below(11)) - 5;
          std::memcpy(p, &x, 8);
          break;
        }
        default:
          p[0] = static_cast<unsigned char>(below(2));
      }
    }
    return add(std::move(s));
  }

  // A value of a dtype `ok` accepts: an existing one (preferred) or a new input.
  template <class Pred>
  int pick(Pred ok, lt_dtype fresh) {
    std::vector<int> c;
    for (size_t i = 0; i < vals.size(); ++i)
      if (ok(vals[i].dt)) c.push_back(static_cast<int>(i));
    if (!c.empty() && !chance(0.15)) {
      // Recent values more often: deeper programs.
      const size_t k =
          chance(0.6) ? c.size() - 1 - below(std::min<size_t>(c.size(), 3)) : below(c.size());
      return c[k];
    }
    return input(fresh, shape());
  }
  int pick_float() {
    return pick([](lt_dtype d) { return d == LT_DTYPE_F32 || d == LT_DTYPE_F64; }, LT_DTYPE_F32);
  }
  int pick_numeric() {
    return pick([](lt_dtype d) { return is_float(d) || is_int(d); }, LT_DTYPE_F32);
  }

  // A shape b such that a and b broadcast (b suffix of a with some dims set to 1).
  std::vector<int64_t> broadcastable(const std::vector<int64_t>& a) {
    std::vector<int64_t> b(a.end() - static_cast<long>(below(a.size() + 1)), a.end());
    for (int64_t& d : b)
      if (chance(0.3)) d = 1;
    if (chance(0.2) && b.size() == a.size() && b.size() < 4) b.insert(b.begin(), 2);
    return b;
  }
  // A partner for a binary op with x: same dtype, broadcastable.
  int partner(int x) {
    const Val& v = vals[static_cast<size_t>(x)];
    for (size_t i = 0; i < vals.size(); ++i)
      if (static_cast<int>(i) != x && vals[i].dt == v.dt && vals[i].shape == v.shape && chance(0.5))
        return static_cast<int>(i);
    if (chance(0.2)) return x;  // x op x
    return input(v.dt, broadcastable(v.shape));
  }
  int full_like(int x, double value) {
    Step s;
    s.op = "full";
    std::vector<int64_t> sh =
        chance(0.7) ? std::vector<int64_t>{} : vals[static_cast<size_t>(x)].shape;
    s.attrs = {{"shape", LT_ATTR_INTS, 0, 0, sh},
               {"value", LT_ATTR_FLOAT, 0, value, {}},
               {"dtype", LT_ATTR_INT, vals[static_cast<size_t>(x)].dt, 0, {}}};
    return add(std::move(s));
  }
  int op(const char* name, std::vector<int> in, std::vector<Attr> attrs = {}) {
    for (int k : in)
      if (k < 0) return -1;
    Step s;
    s.op = name;
    s.in = std::move(in);
    s.attrs = std::move(attrs);
    return add(std::move(s));
  }
  std::vector<int64_t> perm(size_t r) {
    std::vector<int64_t> p(r);
    for (size_t i = 0; i < r; ++i) p[i] = static_cast<int64_t>(i);
    std::shuffle(p.begin(), p.end(), rng_);
    return p;
  }

  void one() {
    static const char* kUnaryFloat[] = {"exp",     "log",  "sqrt", "rsqrt", "tanh",
                                        "sigmoid", "gelu", "silu", "erf",   "softplus",
                                        "sin",     "cos",  "floor"};
    static const char* kUnaryNum[] = {"neg", "abs", "relu"};
    static const char* kBinNum[] = {"add", "sub", "mul", "maximum", "minimum"};
    static const char* kCmp[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    static const lt_dtype kCastTo[] = {LT_DTYPE_F32,  LT_DTYPE_F64,  LT_DTYPE_I32, LT_DTYPE_I64,
                                       LT_DTYPE_BOOL, LT_DTYPE_BF16, LT_DTYPE_F16};
    switch (below(34)) {
      case 0:
        op(kUnaryFloat[below(13)], {pick_float()});
        break;
      case 1:
        op(kUnaryNum[below(3)], {pick_numeric()});
        break;
      case 2:
      case 3: {
        const int x = pick_numeric();
        op(kBinNum[below(5)], {x, partner(x)});
        break;
      }
      case 4: {
        const int x = pick_float();
        op(chance(0.5) ? "div" : "pow", {x, partner(x)});
        break;
      }
      case 5: {
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        op(kCmp[below(6)], {x, partner(x)});
        break;
      }
      case 6: {
        const int x = pick([](lt_dtype d) { return d == LT_DTYPE_BOOL; }, LT_DTYPE_BOOL);
        if (chance(0.3))
          op("not", {x});
        else
          op(chance(0.5) ? "and" : "or", {x, partner(x)});
        break;
      }
      case 7: {  // where, sometimes where(c, x, x)
        const int x = pick_numeric();
        const int c = input(LT_DTYPE_BOOL, broadcastable(vals[static_cast<size_t>(x)].shape));
        op("where", {c, x, chance(0.3) ? x : partner(x)});
        break;
      }
      case 8: {
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        op("cast", {x}, {{"dtype", LT_ATTR_INT, kCastTo[below(7)], 0, {}}});
        break;
      }
      case 9: {  // a cast chain
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        const int y = op("cast", {x}, {{"dtype", LT_ATTR_INT, kCastTo[below(7)], 0, {}}});
        op("cast", {y},
           {{"dtype",
             LT_ATTR_INT,
             chance(0.5) ? vals[static_cast<size_t>(x)].dt : kCastTo[below(7)],
             0,
             {}}});
        break;
      }
      case 10: {  // constants
        Step s;
        s.op = "full";
        s.attrs = {{"shape", LT_ATTR_INTS, 0, 0, shape()},
                   {"value", LT_ATTR_FLOAT, 0, special(), {}},
                   {"dtype", LT_ATTR_INT, any_dtype(), 0, {}}};
        const int f = add(std::move(s));
        if (f >= 0 && chance(0.5) && is_float(vals[static_cast<size_t>(f)].dt))
          op(kUnaryFloat[below(13)], {f});
        break;
      }
      case 11: {
        const double start = static_cast<double>(below(5)) - 2;
        const double step = chance(0.2) ? -1.0 : chance(0.5) ? 1.0 : 0.5;
        const double stop = start + step * static_cast<double>(below(6));
        const int a =
            op("arange", {},
               {{"start", LT_ATTR_FLOAT, 0, start, {}},
                {"stop", LT_ATTR_FLOAT, 0, stop, {}},
                {"step", LT_ATTR_FLOAT, 0, step, {}},
                {"dtype", LT_ATTR_INT, chance(0.7) ? LT_DTYPE_F32 : LT_DTYPE_I64, 0, {}}});
        if (a >= 0 && chance(0.6)) op(kBinNum[below(5)], {a, partner(a)});
        break;
      }
      case 12: {
        Step s;
        s.op = chance(0.5) ? "random_uniform" : "random_normal";
        // lt_apply's random ops take their seed as an operand: a scalar i64 parameter.
        const int seed = input(LT_DTYPE_I64, {});
        if (seed < 0) break;
        s.in = {seed};
        s.attrs = {{"shape", LT_ATTR_INTS, 0, 0, shape()}};
        add(std::move(s));
        break;
      }
      case 13:
      case 14: {
        static const char* kRed[] = {"sum", "mean", "max", "min"};
        const char* r = kRed[below(4)];
        const int x = std::strcmp(r, "mean") ? pick_numeric() : pick_float();
        std::vector<int64_t> axes;
        for (size_t d = 0; d < vals[static_cast<size_t>(x)].shape.size(); ++d)
          if (chance(0.5))
            axes.push_back(chance(0.2)
                               ? static_cast<int64_t>(d) -
                                     static_cast<int64_t>(vals[static_cast<size_t>(x)].shape.size())
                               : static_cast<int64_t>(d));
        op(r, {x},
           {{"axes", LT_ATTR_INTS, 0, 0, axes},
            {"keepdims", LT_ATTR_INT, static_cast<int64_t>(below(2)), 0, {}}});
        break;
      }
      case 15: {
        const int x = pick_numeric();
        const int64_t r = static_cast<int64_t>(vals[static_cast<size_t>(x)].shape.size());
        op("argmax", {x},
           {{"axis",
             LT_ATTR_INT,
             r ? static_cast<int64_t>(below(static_cast<uint64_t>(r))) : 0,
             0,
             {}},
            {"keepdims", LT_ATTR_INT, static_cast<int64_t>(below(2)), 0, {}}});
        break;
      }
      case 16:
      case 17: {  // matmul, sometimes reading a transpose, sometimes twice
        const int64_t m = 1 + static_cast<int64_t>(below(4)),
                      k = static_cast<int64_t>(below(4)) + (chance(0.9) ? 1 : 0),
                      n = 1 + static_cast<int64_t>(below(4));
        const lt_dtype dt = chance(0.8) ? LT_DTYPE_F32 : LT_DTYPE_F64;
        std::vector<int64_t> as = {m, k};
        if (chance(0.3)) as.insert(as.begin(), 2);
        const int a = input(dt, as);
        int b = chance(0.5)
                    ? input(dt, {k, n})
                    : op("permute", {input(dt, {n, k})}, {{"perm", LT_ATTR_INTS, 0, 0, {1, 0}}});
        if (b >= 0 && chance(0.3))
          b = op("permute", {op("permute", {b}, {{"perm", LT_ATTR_INTS, 0, 0, {1, 0}}})},
                 {{"perm", LT_ATTR_INTS, 0, 0, {1, 0}}});
        const int y = op("matmul", {a, b});
        if (chance(0.3)) op("matmul", {a, b});
        if (y >= 0 && chance(0.3)) op("mul", {y, full_like(y, 1.0)});
        break;
      }
      case 18: {  // reshape, sometimes twice
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        const Val v = vals[static_cast<size_t>(x)];
        std::vector<int64_t> to = {v.numel()};
        if (chance(0.4) && v.numel() % 2 == 0 && v.numel() > 0) to = {2, v.numel() / 2};
        const int y = op("reshape", {x}, {{"shape", LT_ATTR_INTS, 0, 0, to}});
        if (y >= 0 && chance(0.5))
          op("reshape", {y},
             {{"shape", LT_ATTR_INTS, 0, 0,
               chance(0.5) ? v.shape : std::vector<int64_t>{v.numel()}}});
        break;
      }
      case 19: {  // permute, sometimes twice (compose or cancel)
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        const size_t r = vals[static_cast<size_t>(x)].shape.size();
        const std::vector<int64_t> p = perm(r);
        const int y = op("permute", {x}, {{"perm", LT_ATTR_INTS, 0, 0, p}});
        if (y >= 0 && chance(0.6)) {
          std::vector<int64_t> q = perm(r);
          if (chance(0.5))  // the inverse: cancels
            for (size_t i = 0; i < r; ++i) q[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
          op("permute", {y}, {{"perm", LT_ATTR_INTS, 0, 0, q}});
        }
        break;
      }
      case 20: {  // broadcast_to, sometimes of a scalar, sometimes twice
        const int x = chance(0.3) ? full_like(pick_numeric(), special())
                                  : pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        if (x < 0) break;
        std::vector<int64_t> to = vals[static_cast<size_t>(x)].shape;
        for (int64_t& d : to)
          if (d == 1 && chance(0.5)) d = 3;
        if (chance(0.5)) to.insert(to.begin(), 2);
        const int y = op("broadcast_to", {x}, {{"shape", LT_ATTR_INTS, 0, 0, to}});
        if (y >= 0) {
          if (chance(0.3)) {
            std::vector<int64_t> t2 = to;
            t2.insert(t2.begin(), 2);
            op("broadcast_to", {y}, {{"shape", LT_ATTR_INTS, 0, 0, t2}});
          } else if (chance(0.5) && vals[static_cast<size_t>(y)].dt != LT_DTYPE_BOOL) {
            op(kBinNum[below(5)], {y, input(vals[static_cast<size_t>(y)].dt, to)});
          }
        }
        break;
      }
      case 21: {
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        const Val v = vals[static_cast<size_t>(x)];
        std::vector<int64_t> st, sp, ss;
        for (int64_t d : v.shape) {
          const int64_t step = chance(0.2) ? -1 : chance(0.3) ? 2 : 1;
          int64_t a = static_cast<int64_t>(below(static_cast<uint64_t>(d) + 1));
          int64_t b = static_cast<int64_t>(below(static_cast<uint64_t>(d) + 1));
          if (step < 0)
            std::swap(a, b), a = a > 0 ? a - 1 : 0, b = b > 0 ? b - 1 : -d - 1;
          else if (b < a)
            std::swap(a, b);
          st.push_back(a), sp.push_back(b), ss.push_back(step);
        }
        op("slice", {x},
           {{"starts", LT_ATTR_INTS, 0, 0, st},
            {"stops", LT_ATTR_INTS, 0, 0, sp},
            {"steps", LT_ATTR_INTS, 0, 0, ss}});
        break;
      }
      case 22: {  // concat, then sometimes a slice taking exactly one piece back
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        const Val v = vals[static_cast<size_t>(x)];
        if (v.shape.empty()) break;
        const int64_t axis = static_cast<int64_t>(below(v.shape.size()));
        std::vector<int64_t> s2 = v.shape;
        s2[static_cast<size_t>(axis)] = static_cast<int64_t>(below(3));
        const int y = chance(0.3) ? x : input(v.dt, s2);
        const int c = op("concat", {x, y}, {{"axis", LT_ATTR_INT, axis, 0, {}}});
        if (c >= 0 && chance(0.6)) {
          std::vector<int64_t> st(v.shape.size(), 0), sp = vals[static_cast<size_t>(c)].shape,
                                                      ss(v.shape.size(), 1);
          const int64_t len0 = v.shape[static_cast<size_t>(axis)];
          if (chance(0.5))
            sp[static_cast<size_t>(axis)] = len0;
          else
            st[static_cast<size_t>(axis)] = len0;
          op("slice", {c},
             {{"starts", LT_ATTR_INTS, 0, 0, st},
              {"stops", LT_ATTR_INTS, 0, 0, sp},
              {"steps", LT_ATTR_INTS, 0, 0, ss}});
        }
        break;
      }
      case 23: {
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        const size_t r = vals[static_cast<size_t>(x)].shape.size();
        std::vector<int64_t> b(r), a(r);
        for (size_t d = 0; d < r; ++d)
          b[d] = static_cast<int64_t>(below(3)), a[d] = static_cast<int64_t>(below(3));
        op("pad", {x},
           {{"before", LT_ATTR_INTS, 0, 0, b},
            {"after", LT_ATTR_INTS, 0, 0, a},
            {"value", LT_ATTR_FLOAT, 0, special(), {}}});
        break;
      }
      case 24: {
        const int x = pick([](lt_dtype) { return true; }, LT_DTYPE_F32);
        const Val v = vals[static_cast<size_t>(x)];
        if (v.shape.empty() || v.shape[0] == 0) break;
        const int idx = input(LT_DTYPE_I64, shape(1), v.shape[0]);
        op("gather", {x, idx}, {{"axis", LT_ATTR_INT, 0, 0, {}}});
        break;
      }
      case 25: {
        const int x = pick_numeric();
        const Val v = vals[static_cast<size_t>(x)];
        if (v.shape.empty() || v.shape[0] == 0) break;
        const int64_t n = static_cast<int64_t>(below(4));
        const int idx = input(LT_DTYPE_I64, {n}, v.shape[0]);
        std::vector<int64_t> us = v.shape;
        us[0] = n;
        op("scatter_add", {x, idx, input(v.dt, us)}, {{"axis", LT_ATTR_INT, 0, 0, {}}});
        break;
      }
      case 26: {
        const int64_t c = 1 + static_cast<int64_t>(below(2)),
                      hw = 3 + static_cast<int64_t>(below(3));
        const int x = input(LT_DTYPE_F32, {1, c, hw, hw});
        const char* which = chance(0.5) ? "conv2d" : chance(0.5) ? "max_pool2d" : "avg_pool2d";
        if (!std::strcmp(which, "conv2d"))
          op(which, {x, input(LT_DTYPE_F32, {2, c, 2, 2})},
             {{"padding", LT_ATTR_INTS, 0, 0, {static_cast<int64_t>(below(2)), 0}}});
        else
          op(which, {x}, {{"kernel", LT_ATTR_INTS, 0, 0, {2, 2}}});
        break;
      }
      case 27: {
        const int x = pick_float();
        const int64_t r = static_cast<int64_t>(vals[static_cast<size_t>(x)].shape.size());
        op(chance(0.5) ? "softmax" : "log_softmax", {x},
           {{"axis",
             LT_ATTR_INT,
             r ? -1 - static_cast<int64_t>(below(static_cast<uint64_t>(r))) : 0,
             0,
             {}}});
        break;
      }
      case 28:
      case 29: {  // the same op again on the same operands (CSE), commutative ops swapped
        if (steps.empty()) break;
        const Step& s = steps[below(steps.size())];
        if (s.op.empty()) break;
        Step again = s;
        if (again.in.size() == 2 && chance(0.5)) std::swap(again.in[0], again.in[1]);
        add(std::move(again));
        break;
      }
      case 30: {  // identities: x*1, 1*x, x/1, x+(-0), x+0, x-0, x-(-0)
        const int x = pick_numeric();
        switch (below(7)) {
          case 0:
            op("mul", {x, full_like(x, 1.0)});
            break;
          case 1:
            op("mul", {full_like(x, 1.0), x});
            break;
          case 2:
            op("div", {x, full_like(x, 1.0)});
            break;
          case 3:
            op("add", {x, full_like(x, -0.0)});
            break;
          case 4:
            op("add", {full_like(x, 0.0), x});
            break;
          case 5:
            op("sub", {x, full_like(x, 0.0)});
            break;
          default:
            op("sub", {x, full_like(x, -0.0)});
            break;
        }
        break;
      }
      case 31: {  // double negation
        const int x = pick_numeric();
        op("neg", {op("neg", {x})});
        break;
      }
      case 32: {  // constant subgraphs: arange and full through several ops
        const int a = op("arange", {},
                         {{"start", LT_ATTR_FLOAT, 0, 0.0, {}},
                          {"stop", LT_ATTR_FLOAT, 0, 4.0, {}},
                          {"step", LT_ATTR_FLOAT, 0, 1.0, {}},
                          {"dtype", LT_ATTR_INT, LT_DTYPE_F32, 0, {}}});
        const int b = a >= 0 ? op("mul", {a, full_like(a, special())}) : -1;
        const int c = b >= 0 ? op(kUnaryFloat[below(13)], {b}) : -1;
        if (c >= 0 && chance(0.5)) op("add", {c, input(LT_DTYPE_F32, {4})});
        break;
      }
      default: {  // a custom-free reduction of a broadcast (shape arithmetic)
        const int x = pick_numeric();
        op("sum",
           {op("broadcast_to", {x},
               {{"shape", LT_ATTR_INTS, 0, 0,
                 [&] {
                   auto s = vals[static_cast<size_t>(x)].shape;
                   s.insert(s.begin(), 2);
                   return s;
                 }()}})},
           {{"axes", LT_ATTR_INTS, 0, 0, {0}}});
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  lt_device* dev_;
  std::vector<lt_tensor*> t_;
  size_t count_ops_ = 0;
};

std::string program_text(const std::vector<Step>& steps, const std::vector<Val>& vals) {
  std::ostringstream os;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    os << "  %" << i << " = " << (s.op.empty() ? "input" : s.op) << "(";
    for (size_t k = 0; k < s.in.size(); ++k) os << (k ? ", %" : "%") << s.in[k];
    os << ")";
    for (const Attr& a : s.attrs) {
      os << " " << a.name << "=";
      if (a.kind == LT_ATTR_INTS)
        os << shape_str(a.ints);
      else if (a.kind == LT_ATTR_FLOAT)
        os << a.f;
      else
        os << a.i;
    }
    os << " : " << lt_dtype_name(vals[i].dt) << " " << shape_str(vals[i].shape) << "\n";
  }
  return os.str();
}

lt_runtime* make(const char* level, const std::string& dir, std::string* why) {
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  o.plugin_path = dir.c_str();
  o.device = "cpu_eager";
  o.fallback = "silent";
  o.log_level = "off";
  o.optimize = level;
  lt_runtime* rt = nullptr;
  if (lt_error* e = lt_runtime_create(&o, &rt)) {
    *why = lt_error_message(e);
    lt_error_destroy(e);
    return nullptr;
  }
  return rt;
}

// Bits of element i of a float buffer as a double (bf16/f16 widened exactly).
double element(const std::vector<unsigned char>& b, lt_dtype d, size_t i) {
  switch (d) {
    case LT_DTYPE_F32: {
      float f;
      std::memcpy(&f, b.data() + 4 * i, 4);
      return f;
    }
    case LT_DTYPE_F64: {
      double f;
      std::memcpy(&f, b.data() + 8 * i, 8);
      return f;
    }
    case LT_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default: {  // f16
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      const int e = (h >> 10) & 31, m = h & 1023;
      const double sign = (h & 0x8000) ? -1.0 : 1.0;
      if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
      if (e == 0) return sign * std::ldexp(m, -24);
      return sign * std::ldexp(1024 + m, e - 25);
    }
  }
}

}  // namespace

bool close_fast(double a, double b, double scale) {
  // fast keeps no signed zeros (x - (-0) -> x; a GEMM's layout): +0 == -0, and what follows
  // from a zero's sign (1 / x, rsqrt, then inf - inf) may be any non-finite value.
  if (!std::isfinite(a) || !std::isfinite(b)) return !std::isfinite(a) && !std::isfinite(b);
  if (a == b) return true;
  // 64 ulps of the value, or of the output's largest magnitude (a sum that cancels).
  const double tol = 64 * std::numeric_limits<float>::epsilon() * std::max(std::fabs(a), scale);
  return std::fabs(a - b) <= tol;
}

Tester::Tester(const char* level, const std::string& plugin_dir) {
  fast_ = std::strcmp(level, "fast") == 0;
  ref_ = make("none", plugin_dir, &error_);
  if (ref_) opt_ = make(level, plugin_dir, &error_);
}

double Tester::metric(const char* name) const {
  double v = 0;
  lt_error_destroy(lt_metric_get(opt_, name, &v));
  return v;
}

Tester::~Tester() {
  lt_runtime_destroy(ref_);
  lt_runtime_destroy(opt_);
}

Outcome Tester::run(uint64_t seed) {
  Outcome out;
  lt_device* rd = lt_runtime_default_device(ref_);
  lt_device* od = lt_runtime_default_device(opt_);
  std::mt19937_64 pick(seed ^ 0x5eedULL);
  Generator gen(seed, rd);
  gen.build(4 + pick() % 24);
  const size_t n = gen.steps.size();
  out.ops = n;
  // Replay on the optimising runtime.
  std::vector<lt_tensor*> ot;
  for (size_t i = 0; i < n; ++i) {
    std::string why;
    lt_tensor* t = record(od, gen.steps[i], ot, &why);
    if (!t) {
      for (lt_tensor* x : ot) lt_tensor_free(x);
      out.ok = false;
      out.report = "replay refused %" + std::to_string(i) + ": " + why + "\n" +
                   program_text(gen.steps, gen.vals);
      return out;
    }
    ot.push_back(t);
  }
  // Outputs: the last values and some others; the rest are freed so the optimiser may drop them.
  std::vector<size_t> outs;
  for (size_t i = 0; i < n; ++i)
    if (i + 2 >= n || pick() % 4 == 0) outs.push_back(i);
  std::vector<uint8_t> keep(n, 0);
  for (size_t i : outs) keep[i] = 1;
  std::vector<lt_tensor*> rt_keep(n, nullptr);
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) rt_keep[i] = lt_tensor_retain(gen.tensor(i));
  for (size_t i = 0; i < n; ++i)
    if (!keep[i]) lt_tensor_free(ot[i]), ot[i] = nullptr, gen.release(i);
  // One graph per runtime (lt_sync), then the reads; the generator's handles go with it.
  lt_error* e1 = lt_sync(rd);
  lt_error* e2 = lt_sync(od);
  std::ostringstream why;
  if ((e1 == nullptr) != (e2 == nullptr))
    why << "lt_sync: reference " << (e1 ? lt_error_message(e1) : "ok") << ", optimised "
        << (e2 ? lt_error_message(e2) : "ok") << "\n";
  lt_error_destroy(e1);
  lt_error_destroy(e2);
  for (size_t i : outs) {
    const Val& v = gen.vals[i];
    const size_t bytes = static_cast<size_t>(v.numel()) * lt_dtype_size(v.dt);
    std::vector<unsigned char> a(bytes), b(bytes);
    lt_error* ra = lt_tensor_to_host(rt_keep[i], a.data(), bytes);
    lt_error* rb = lt_tensor_to_host(ot[i], b.data(), bytes);
    const bool fa = ra != nullptr, fb = rb != nullptr;
    if (fa != fb)
      why << "%" << i << ": reference " << (ra ? lt_error_message(ra) : "ok") << ", optimised "
          << (rb ? lt_error_message(rb) : "ok") << "\n";
    lt_error_destroy(ra);
    lt_error_destroy(rb);
    ++out.outputs;
    if (fa || fb || a == b) continue;
    if (!is_float(v.dt)) {
      why << "%" << i << " (" << lt_dtype_name(v.dt) << "): bytes differ\n";
      continue;
    }
    const size_t es = lt_dtype_size(v.dt);
    double scale = 0;
    for (size_t k = 0; k < bytes / es; ++k) {
      const double x = element(a, v.dt, k);
      if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
    }
    for (size_t k = 0; k < bytes / es; ++k) {
      const double x = element(a, v.dt, k), y = element(b, v.dt, k);
      const bool same_bits = std::memcmp(a.data() + k * es, b.data() + k * es, es) == 0;
      // exact: bitwise, a NaN matching any NaN (IEEE leaves its sign and payload open).
      const bool ok =
          same_bits || (std::isnan(x) && std::isnan(y)) || (fast_ && close_fast(x, y, scale));
      if (!ok) {
        why << "%" << i << " (" << lt_dtype_name(v.dt) << " " << shape_str(v.shape) << ") element "
            << k << ": reference " << x << ", optimised " << y << "\n";
        break;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    lt_tensor_free(rt_keep[i]);
    lt_tensor_free(ot[i]);
  }
  if (verbose_) out.report = program_text(gen.steps, gen.vals);
  if (!why.str().empty()) {
    out.ok = false;
    out.report = why.str() + "program (seed " + std::to_string(seed) + "):\n" +
                 program_text(gen.steps, gen.vals);
  }
  return out;
}

}  // namespace lt_difftest
