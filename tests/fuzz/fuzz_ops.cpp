// fuzz_ops.cpp — libFuzzer harness of the C API op surface on cpu_eager: the input is a small
// program over a stack of tensors (create, lt_apply any op of lt_ops.def with fuzzed operands
// and attributes, materialise, sync, backward, free). Errors are fine; crashes, hangs,
// sanitizer reports and escaping exceptions are bugs.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.hpp"

namespace {

using lt::fuzz::Reader;

struct AttrSpec {
  std::string name;
  std::string kind;  // int float ints dtype
};
struct OpRow {
  const char* name;
  int min_in, max_in;
  std::vector<AttrSpec> attrs;
};

std::vector<AttrSpec> parse_specs(std::string_view s) {
  std::vector<AttrSpec> out;
  while (!s.empty()) {
    size_t sp = s.find(' ');
    std::string_view tok = s.substr(0, sp);
    s = sp == std::string_view::npos ? std::string_view{} : s.substr(sp + 1);
    if (tok.empty()) continue;
    size_t colon = tok.find(':');
    std::string_view kind = tok.substr(colon + 1);
    kind = kind.substr(0, kind.find_first_of("=?"));
    out.push_back({std::string(tok.substr(0, colon)), std::string(kind)});
  }
  return out;
}

const std::vector<OpRow>& ops() {
  static const std::vector<OpRow> rows = [] {
    std::vector<OpRow> r;
#define LT_OP(Camel, name, capi, cfn, cppfn, category, lo, hi, attrs, ...) \
  r.push_back({name, lo, hi, parse_specs(attrs)});
#include "lazytensor/lt_ops.def"
#undef LT_OP
    return r;
  }();
  return rows;
}

constexpr size_t kMaxStack = 8;
constexpr int64_t kMaxElements = int64_t{1} << 16;  // larger results are dropped unread

struct Program {
  lt_device* dev;
  Reader in;
  std::vector<lt_tensor*> stack;

  ~Program() {
    for (lt_tensor* t : stack) lt_tensor_free(t);
  }

  // A result joins the stack only if it is small: a huge shape that the op accepted (the
  // limit is 2^46 bytes) is a correct answer, but computing it is not this harness's job, and
  // lt_sync would compute every live tensor.
  // `t` by reference: it is read after the call that fills it, whatever the compiler's order of
  // evaluating arguments. Input bytes are likewise read into locals before a call that uses
  // several, so that a corpus file means the same program under every compiler.
  void push(lt_error* e, lt_tensor* const& t) {
    if (!lt::fuzz::ok(e)) return;
    if (!t) std::abort();  // success without a tensor
    int64_t n = lt_tensor_numel(t);
    if (n < 0 || n > kMaxElements || stack.size() >= kMaxStack) {
      lt_tensor_free(t);
      return;
    }
    stack.push_back(t);
  }
  lt_tensor* pick() { return stack.empty() ? nullptr : stack[in.u8() % stack.size()]; }

  std::vector<int64_t> ints(size_t max_len) {
    std::vector<int64_t> v(in.u8() % (max_len + 1));
    for (auto& x : v) x = in.int_value();
    return v;
  }
  // Small shapes, occasionally with an edge value.
  std::vector<int64_t> shape() {
    std::vector<int64_t> v(in.u8() % 5);
    for (auto& x : v) {
      uint8_t b = in.u8();
      x = b < 0xf0 ? b % 5 : in.int_value();
    }
    return v;
  }

  void read(lt_tensor* t) {
    if (!t) return;
    int64_t n = lt_tensor_numel(t);
    std::vector<unsigned char> host(static_cast<size_t>(n) * lt_dtype_size(lt_tensor_dtype(t)));
    lt::fuzz::ok(lt_tensor_to_host(t, host.data(), host.size()));
  }

  void apply_row() {
    const auto& table = ops();
    const OpRow& op = table[in.u8() % table.size()];
    int hi = op.max_in < 0 ? 4 : op.max_in;
    int n = op.min_in + in.u8() % (hi - op.min_in + 1);
    if (in.u8() == 0xff) n = in.u8() % 5;  // a wrong operand count now and then
    std::vector<lt_tensor*> inputs;
    for (int i = 0; i < n; ++i) {
      lt_tensor* t = pick();
      if (!t) return;
      inputs.push_back(t);
    }
    std::vector<std::vector<int64_t>> arrays;  // keeps INTS alive through the call
    arrays.reserve(op.attrs.size() + 1);
    std::vector<lt_attr> attrs;
    for (const auto& spec : op.attrs) {
      uint8_t b = in.u8();
      if (b % 4 == 0) continue;  // leave it to the default (or miss a required one)
      lt_attr a{};
      a.name = spec.name.c_str();
      std::string_view kind = spec.kind;
      if (b == 0xff) kind = "float";  // a wrong kind now and then
      if (kind == "int") {
        a.kind = LT_ATTR_INT;
        a.i = in.int_value();
      } else if (kind == "float") {
        a.kind = LT_ATTR_FLOAT;
        a.f = in.float_value();
      } else if (kind == "ints") {
        a.kind = LT_ATTR_INTS;
        arrays.push_back(spec.name == "shape" ? shape() : ints(4));
        a.ints = arrays.back().data();
        a.ints_len = arrays.back().size();
      } else {  // dtype
        a.kind = LT_ATTR_INT;
        a.i = in.dtype();
      }
      attrs.push_back(a);
    }
    if (in.u8() == 0xfe) {  // an attribute the op does not have
      lt_attr a{};
      a.name = "bogus";
      a.kind = LT_ATTR_INT;
      attrs.push_back(a);
    }
    lt_tensor* out = nullptr;
    push(lt_apply(dev, op.name, inputs.data(), inputs.size(), attrs.data(), attrs.size(), &out),
         out);
  }

  void step() {
    lt_tensor* out = nullptr;
    switch (in.u8() % 12) {
      case 0:
      case 1: {
        auto s = shape();
        double value = in.float_value();
        lt_dtype d = in.dtype();
        push(lt_full(dev, s.data(), s.size(), value, d, &out), out);
        break;
      }
      case 2: {
        double a = in.float_value(), b = in.float_value(), c = in.float_value();
        push(lt_arange(dev, a, b, c, in.dtype(), &out), out);
        break;
      }
      case 3: {
        auto s = shape();
        uint64_t seed = in.u8();
        double a = in.float_value(), b = in.float_value();
        lt_dtype d = in.dtype();
        lt_error* e = in.u8() & 1 ? lt_random_normal(dev, s.data(), s.size(), seed, a, b, d, &out)
                                  : lt_random_uniform(dev, s.data(), s.size(), seed, a, b, d, &out);
        push(e, out);
        break;
      }
      case 4: {  // host data: bytes of the input, any bit pattern (NaNs, bools that are not 0/1)
        auto s = shape();
        lt_dtype d = in.dtype();
        int64_t n = 1;
        for (int64_t x : s) n = x >= 0 && x <= 64 && n <= 4096 ? n * x : -1;
        if (n < 0) n = 0;
        size_t bytes = static_cast<size_t>(n) * lt_dtype_size(d);
        std::vector<unsigned char> host(bytes);
        for (auto& c : host) c = in.u8();
        if (in.u8() == 0xff) bytes += 1;  // a wrong byte count
        push(lt_tensor_from_host(dev, d, s.data(), s.size(), host.data(), bytes, &out), out);
        break;
      }
      case 5:
      case 6:
      case 7:
        apply_row();
        break;
      case 8:
        read(pick());
        break;
      case 9:
        lt::fuzz::ok(lt_sync(dev));
        break;
      case 10: {  // gradients of a sum of a float tensor with respect to itself
        lt_tensor* t = pick();
        if (!t) break;
        lt_tensor* leaf = nullptr;
        if (!lt::fuzz::ok(lt_tensor_detach(t, &leaf))) break;
        lt_tensor* loss = nullptr;
        if (lt::fuzz::ok(lt_tensor_set_requires_grad(leaf, 1)) &&
            lt::fuzz::ok(lt_sum(leaf, nullptr, 0, 0, &loss))) {
          if (lt::fuzz::ok(lt_backward(loss, nullptr))) {
            lt_tensor* g = nullptr;
            if (lt::fuzz::ok(lt_tensor_grad(leaf, &g))) {
              read(g);
              lt_tensor_free(g);
            }
          }
          lt_tensor_free(loss);
        }
        lt_tensor_free(leaf);
        break;
      }
      case 11:
        if (!stack.empty()) {
          size_t i = in.u8() % stack.size();
          lt_tensor_free(stack[i]);
          stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i));
        }
        break;
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Program p{lt::fuzz::eager_device(), Reader(data, size), {}};
  for (int steps = 0; steps < 48 && !p.in.empty(); ++steps) p.step();
  for (lt_tensor* t : p.stack) p.read(t);
  return 0;
}
