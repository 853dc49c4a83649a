// toy_plugin.cpp — the out-of-tree example backend "toy", written with the plugin kit
// (lazytensor/plugin_kit.hpp): host memory, f32 add / mul / neg / relu on operands of the
// output's shape. The core makes broadcasts explicit where it can, decomposes composite ops
// into what toy runs, and sends the rest to cpu_eager. docs/writing-a-backend.md walks
// through it; examples/external_plugin/CMakeLists.txt builds it against the installed package.
#include <lazytensor/plugin_kit.hpp>

#include <cstring>
#include <string_view>

namespace {

enum class Op { kAdd, kMul, kNeg, kRelu };

bool parse(std::string_view name, Op* op) {
  static const std::pair<std::string_view, Op> kOps[] = {
      {"add", Op::kAdd}, {"mul", Op::kMul}, {"neg", Op::kNeg}, {"relu", Op::kRelu}};
  for (const auto& [n, o] : kOps)
    if (n == name) return *op = o, true;
  return false;
}

// One step per computed node; node values live in `vals` during a run (inputs are read in place).
struct Step {
  Op op;
  int32_t node, a, b;  // b < 0 for unary ops
};

class ToyExecutable : public lt::kit::Executable {
 public:
  explicit ToyExecutable(const lt_graph& g)
      : nodes_(g.num_nodes),
        inputs_(g.inputs, g.inputs + g.num_inputs),
        outputs_(g.outputs, g.outputs + g.num_outputs) {
    for (size_t i = 0; i < g.num_nodes; ++i) {
      const lt_graph_node& n = g.nodes[i];
      numel_.push_back(lt::lower::DescRef(n).numel());
      Op op;
      if (!parse(n.op, &op)) continue;  // "input": bound to a buffer at run time
      steps_.push_back(
          {op, static_cast<int32_t>(i), n.operands[0], n.num_operands > 1 ? n.operands[1] : -1});
    }
  }

  void run(std::span<lt::kit::Buffer* const> in, std::span<lt::kit::Buffer* const> out) override {
    std::vector<std::vector<float>> vals(nodes_);
    std::vector<const float*> ptr(nodes_, nullptr);
    for (size_t k = 0; k < in.size(); ++k) ptr[inputs_[k]] = static_cast<const float*>(in[k]->data);
    for (const Step& s : steps_) {
      std::vector<float>& y = vals[s.node];
      y.resize(static_cast<size_t>(numel_[s.node]));
      const float *x = ptr[s.a], *z = s.b >= 0 ? ptr[s.b] : nullptr;
      for (size_t e = 0; e < y.size(); ++e) {
        switch (s.op) {
          case Op::kAdd:
            y[e] = x[e] + z[e];
            break;
          case Op::kMul:
            y[e] = x[e] * z[e];
            break;
          case Op::kNeg:
            y[e] = -x[e];
            break;
          case Op::kRelu:
            y[e] = x[e] < 0.0f ? 0.0f : x[e];
            break;  // NaN stays NaN
        }
      }
      ptr[s.node] = y.data();
    }
    for (size_t k = 0; k < out.size(); ++k)
      std::memcpy(out[k]->data, ptr[outputs_[k]],
                  static_cast<size_t>(numel_[outputs_[k]]) * sizeof(float));
  }
  void stats(const lt::kit::Stats& emit) const override {
    emit("nodes", static_cast<double>(steps_.size()));
  }

 private:
  size_t nodes_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<int64_t> numel_;
  std::vector<Step> steps_;
};

class Toy : public lt::kit::Backend {
 public:
  explicit Toy(lt::kit::Context& ctx) : Backend(ctx) { ctx.log(1, "toy: context created"); }

  std::vector<lt::kit::Device> devices() const override {
    return {{"toy-host", "cpu", "example backend: f32 add, mul, relu, neg", 0, true}};
  }
  // Claims a node only if it runs it exactly: known op, f32 everywhere, no broadcasting.
  bool supports(const lt_graph& g, size_t i, size_t) override {
    const lt_graph_node& n = g.nodes[i];
    Op op;
    if (!parse(n.op, &op) || n.dtype != LT_DTYPE_F32) return false;
    for (size_t k = 0; k < n.num_operands; ++k) {
      const lt_graph_node& o = g.nodes[n.operands[k]];
      if (o.dtype != LT_DTYPE_F32 || o.rank != n.rank || std::memcmp(o.shape, n.shape, n.rank * 8))
        return false;
    }
    return true;
  }
  std::unique_ptr<lt::kit::Executable> compile(const lt_graph& g, size_t) override {
    for (size_t i = 0; i < g.num_nodes; ++i)
      if (std::string_view(g.nodes[i].op) != "input" && !supports(g, i, 0))
        lt::kit::fail(LT_STATUS_UNSUPPORTED, std::string("node ") + std::to_string(i) + " (" +
                                                 g.nodes[i].op + ") is not supported");
    return std::make_unique<ToyExecutable>(g);
  }
};

}  // namespace

LT_KIT_PLUGIN(Toy, "toy", "1.0.0")
