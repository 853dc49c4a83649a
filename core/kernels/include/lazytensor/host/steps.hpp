// steps.hpp — a host step program: the executor of a validated graph as a list of steps (host
// kernels, GEMMs, convolutions, reshape aliases, and steps a backend supplies, e.g. generated
// kernels), with one arena for every temporary, shared by temporaries whose live ranges do not
// overlap. A matrix transpose read only by GEMMs is never materialised: the GEMM reads its
// operand transposed (the backward pass's x^T·dy and dy·w^T). Nor is the transpose of a 2-D GEMM
// that nothing else reads: the GEMM writes its product transposed, (A·B)^T = B^T·A^T (the
// gradient of a Linear's [out, in] weight, (x^T·dy)^T, without a strided copy).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lazytensor/host/attention.hpp"
#include "lazytensor/host/kernels.hpp"

namespace lt::host {

class StepProgram {
 public:
  // `graph` must outlive the program; it is validated.
  explicit StepProgram(const lt_graph& graph);
  StepProgram(const StepProgram&) = delete;
  StepProgram& operator=(const StepProgram&) = delete;

  // Steps run in the order added, operands before users. add_node: node v by the host
  // kernels; throws lower::Error (UNSUPPORTED) when they lack it. A matrix transpose whose
  // users are all f32/f64 matmuls becomes no step: add its users with add_node too. A 2-D
  // matmul whose one reader is a transpose is held until the next add: when that is the
  // transpose, one GEMM writes the transposed product (no step for the matmul, no buffer).
  void add_node(int32_t v);
  // A step the backend runs: it writes `writes`, reads `reads`, and gets every node's buffer
  // (indexed by node; null where a node has none).
  // `name` labels the step in profiles ("k3 add+mul").
  using Custom = std::function<void(void* const* node_buffers)>;
  void add_custom(std::vector<int32_t> writes, std::vector<int32_t> reads, Custom run,
                  std::string name = "kernel");
  // The fused attention of `match` (find_attention on this graph) as one step writing
  // match.output; add none of its interior nodes (they get no step and no buffer).
  void add_attention(const AttentionMatch& match);
  // Plans the arena; call once, after the last step.
  void finish();

  // Host pointers of the graph's input/output buffers, in graph order. Concurrent runs are
  // safe (a run that finds the arena busy allocates its own). With `span` (the plugin ABI's
  // lt_plugin_span_fn: a profiling core's callback), each step is timed and reported by name
  // (its op, or a custom step's name) with its steady-clock start and end in nanoseconds.
  using SpanFn = void (*)(void* user, const char* name, int64_t start_ns, int64_t end_ns);
  void run(void* const* inputs, void* const* outputs, SpanFn span = nullptr,
           void* span_user = nullptr) const;
  size_t arena_bytes() const { return arena_bytes_; }
  // Buffer donation (plugin ABI 1.3): true when run() stays right with outputs[output] being the
  // very buffer of inputs[input]: the step that writes that output comes after every step that
  // reads the input (through reshape aliases and GEMM-folded transposes too), or is that
  // reader itself as an elementwise host kernel reading the input at the output's own shape
  // (element i read before element i is written). A custom step that writes the output may not
  // read the input. Call after finish().
  bool can_donate(size_t input, size_t output) const;
  size_t num_steps() const { return steps_.size(); }

 private:
  // kGemmT: `node` is the transpose of a matmul nothing else reads, computed as B^T·A^T from
  // the matmul's operands.
  enum class Kind : uint8_t { kHost, kGemm, kGemmT, kConv, kReshape, kCustom };
  struct Step {
    Kind kind;
    int32_t node = -1;      // what a host / gemm / conv / reshape step computes
    size_t index = 0;       // kConv: convs_; kCustom: customs_
    KernelFn fn = nullptr;  // kHost, called with params_[params, params + num_params)
    size_t params = 0, num_params = 0;
    int64_t scratch = -1;  // kConv: arena byte offset of the im2col matrix, -1 if none
  };
  struct CustomStep {
    std::vector<int32_t> writes, reads;
    Custom run;
    std::string name;
  };
  void run_step(const Step& s, std::vector<void*>& ptr, char* arena,
                std::vector<TensorArg>& args) const;
  int32_t source(int32_t v) const { return transposed_[v] ? g_.nodes[v].operands[0] : v; }
  // The node whose operands a step reads (a kGemmT step's matmul).
  const lt_graph_node& computed(const Step& s) const {
    return g_.nodes[s.kind == Kind::kGemmT ? g_.nodes[s.node].operands[0] : s.node];
  }
  // Adds the held matmul as a plain GEMM step unless `next` is its transpose; true when the
  // transpose was added as its kGemmT step.
  bool flush_held(int32_t next);
  // The node whose buffer holds v's data (through GEMM-folded transposes and unbound reshapes).
  int32_t holder(int32_t v) const;

  const lt_graph& g_;
  std::vector<Step> steps_;
  std::vector<CustomStep> customs_;
  std::vector<int64_t> params_;
  std::vector<ConvGeom> convs_;
  std::vector<int64_t> numel_;        // per node
  std::vector<char> gemm_only_;       // per node: a transpose read only by f32/f64 GEMMs
  std::vector<char> transposed_;      // per node: such a transpose, added as no step
  std::vector<char> product_t_;       // per node: a 2-D GEMM whose one reader is a transpose
  int32_t held_ = -1;                 // such a GEMM added last, its step not yet decided
  std::vector<char> reshape_;         // per node: op is reshape
  std::vector<int64_t> temp_offset_;  // per node: byte offset in the arena, -1 if none
  std::vector<char> bound_;           // per node: a graph input or output (its own buffer)
  std::vector<int64_t> writer_;       // per node: the step that writes it, -1 if none
  std::vector<int64_t> last_read_;    // per holder node: the last step reading its buffer
  size_t arena_bytes_ = 0;
  mutable std::mutex arena_mu_;  // guards arena_ and ptr_ (reused by one run at a time)
  mutable std::unique_ptr<char[], void (*)(void*)> arena_{nullptr, nullptr};
  mutable std::vector<void*> ptr_;  // per node: its buffer during a run
};

// A graph with no inputs (a cone of constants) evaluated by the host kernels, cpu_eager's
// reference semantics: each output's bytes, in graph order. The optimiser's constant folding
// uses it (the core, its tests and its benchmark). Throws lower::Error where the host kernels
// lack an op.
std::vector<std::vector<unsigned char>> evaluate(const lt_graph& graph);

}  // namespace lt::host
