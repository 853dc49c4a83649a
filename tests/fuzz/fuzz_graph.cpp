// fuzz_graph.cpp — libFuzzer harness of the graph a plugin receives: raw lt_graph structs built
// from the input (any op name, dtype, shape, operand index, attribute, input and output list)
// go to cpu_eager's supports / compile / execute through its C table (the kit validates them
// first). A bad graph must come back as an lt_plugin_error, never a crash.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "plugin_harness.hpp"

namespace {

using lt::fuzz::Reader;
namespace pt = lt::plugin_test;

const char* const kOps[] = {
#define LT_OP(Camel, name, ...) name,
#include "lazytensor/lt_ops.def"
#undef LT_OP
    "no_such_op", ""};
constexpr size_t kNumOps = sizeof kOps / sizeof kOps[0];
const char* const kAttrNames[] = {
    "shape", "axes",  "keepdims", "axis",   "perm",    "starts",   "stops",  "steps",  "before",
    "after", "value", "dtype",    "stride", "padding", "dilation", "groups", "kernel", "start",
    "stop",  "step",  "low",      "high",   "mean",    "std",      "offset", "bogus"};
constexpr size_t kNumAttrNames = sizeof kAttrNames / sizeof kAttrNames[0];
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 20;

struct NodeData {
  std::vector<int64_t> shape;
  std::vector<int32_t> operands;
  std::vector<lt_attr> attrs;
  std::vector<std::vector<int64_t>> ints;
};

const pt::Context& session() {
  static pt::Session* s = [] {
    std::string why;
    const lt_plugin_api* api = pt::load_api(LT_FUZZ_CPU_EAGER_PATH, &why);
    if (!api) {
      std::fprintf(stderr, "fuzz_graph: cannot load %s: %s\n", LT_FUZZ_CPU_EAGER_PATH, why.c_str());
      std::abort();
    }
    auto* session = new pt::Session(api);  // lives as long as the process
    if (!session->create().ok()) std::abort();
    return session;
  }();
  return *s;
}

// Bytes of a node's value, or UINT64_MAX when it overflows or the node is malformed.
uint64_t bytes_of(const lt_graph_node& n) {
  uint64_t b = lt_dtype_size(n.dtype);
  if (!b) return UINT64_MAX;
  for (size_t d = 0; d < n.rank; ++d) {
    if (n.shape[d] < 0 || __builtin_mul_overflow(b, static_cast<uint64_t>(n.shape[d]), &b))
      return UINT64_MAX;
  }
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pt::Context ctx = session();
  Reader in(data, size);
  size_t num_nodes = in.u8() % 9;
  std::vector<NodeData> store(num_nodes);
  std::vector<lt_graph_node> nodes(num_nodes);
  std::vector<int32_t> inputs, outputs;
  for (size_t i = 0; i < num_nodes; ++i) {
    NodeData& d = store[i];
    lt_graph_node& n = nodes[i];
    uint8_t op = in.u8();
    n.op = op == 0xff ? nullptr : kOps[op % kNumOps];
    n.dtype = in.dtype();
    d.shape.resize(in.u8() % 5);
    for (auto& x : d.shape) {
      uint8_t b = in.u8();
      x = b < 0xf0 ? b % 5 : in.int_value();
    }
    n.rank = d.shape.size();
    n.shape = d.shape.data();
    if (in.u8() == 0xff) n.rank += 3;  // a rank that does not match the array: NULL shape below
    if (n.rank != d.shape.size()) n.shape = nullptr, n.rank = in.u8() == 0 ? n.rank : 0;
    d.operands.resize(in.u8() % 4);
    for (auto& x : d.operands) {
      uint8_t b = in.u8();
      x = b < 0xf0 ? static_cast<int32_t>(b % (i + 1)) : static_cast<int32_t>(in.int_value());
    }
    n.num_operands = d.operands.size();
    n.operands = d.operands.empty() ? nullptr : d.operands.data();
    size_t num_attrs = in.u8() % 4;
    d.ints.reserve(num_attrs);
    for (size_t k = 0; k < num_attrs; ++k) {
      lt_attr a{};
      a.name = kAttrNames[in.u8() % kNumAttrNames];
      uint8_t kind = in.u8();
      a.kind = static_cast<lt_attr_kind>(1 + kind % 4);
      if (kind == 0xff) a.kind = static_cast<lt_attr_kind>(77);
      a.i = in.int_value();
      a.f = in.float_value();
      auto& v = d.ints.emplace_back(in.u8() % 5);
      for (auto& x : v) x = in.int_value();
      a.ints = v.data();
      a.ints_len = v.size();
      a.s = in.u8() & 1 ? "f32" : nullptr;
      d.attrs.push_back(a);
    }
    n.num_attrs = d.attrs.size();
    n.attrs = d.attrs.empty() ? nullptr : d.attrs.data();
    uint8_t role = in.u8();
    if (role & 1) inputs.push_back(static_cast<int32_t>(i));
    if (role & 2) outputs.push_back(static_cast<int32_t>(i));
    if (role == 0xff) outputs.push_back(static_cast<int32_t>(in.int_value()));
  }
  lt_graph g{};
  g.struct_size = LT_GRAPH_STRUCT_SIZE;
  g.num_nodes = nodes.size();
  g.nodes = nodes.empty() ? nullptr : nodes.data();
  g.num_inputs = inputs.size();
  g.inputs = inputs.empty() ? nullptr : inputs.data();
  g.num_outputs = outputs.size();
  g.outputs = outputs.empty() ? nullptr : outputs.data();
  g.hash = in.u64();

  for (size_t i = 0; i < num_nodes + 1; ++i) {  // one past the end too
    int supported = -7;
    ctx.supports(g, i, &supported);
  }
  lt_plugin_executable* exe = nullptr;
  if (!ctx.compile(g, &exe).ok()) return 0;
  if (!exe) std::abort();  // success without an executable
  // A graph that compiled is valid: its inputs and outputs name nodes with sane shapes.
  std::vector<std::vector<char>> host_in, host_out;
  bool small = true;
  for (int32_t k : inputs) small &= bytes_of(nodes[k]) <= kMaxBufferBytes;
  for (int32_t k : outputs)
    small &= k >= 0 && k < static_cast<int32_t>(num_nodes) && bytes_of(nodes[k]) <= kMaxBufferBytes;
  ctx.destroy(exe);
  if (!small) return 0;
  for (int32_t k : inputs) {
    host_in.emplace_back(bytes_of(nodes[k]));
    for (char& c : host_in.back()) c = static_cast<char>(in.u8());
  }
  ctx.run(g, host_in, &host_out);
  return 0;
}
