// program.h — a compiled region: fusion plan, generated kernels, BLAS/layout steps and the
// buffer plan; executes with TBB over kernel outer loops. No LLVM types here.
#ifndef LT_CPU_JIT_PROGRAM_H
#define LT_CPU_JIT_PROGRAM_H

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernel.h"
#include "lazytensor/fusion.hpp"

namespace lt::cpujit {

class Program {
 public:
  // Plans and compiles `graph`; nullptr + *error on failure (unsupported op, codegen).
  static std::shared_ptr<Program> build(const lt_graph& graph, Compiler& compiler,
                                        std::string* error);
  // inputs/outputs: host pointers of the region's input/output buffers, in graph order.
  // Returns false + *error on failure.
  bool execute(void* const* inputs, void* const* outputs, std::string* error) const;

  size_t num_kernels() const { return kernels_.size(); }
  double compile_ms() const { return compile_ms_; }
  size_t num_inputs() const { return num_inputs_; }
  size_t num_outputs() const { return num_outputs_; }
  size_t input_bytes(size_t k) const;
  size_t output_bytes(size_t k) const;

 private:
  struct Step {
    int kernel = -1;    // index into kernels_, or -1 for an opaque node
    int32_t node = -1;  // opaque node (matmul, reshape, permute, slice)
  };
  size_t node_bytes(int32_t v) const;
  // scratch: the arena (conv2d's im2col matrix lives at scratch_offset_[v]).
  bool run_opaque(int32_t v, std::vector<void*>& ptr, char* scratch, std::string* error) const;

  fusion::OwnedGraph owned_;
  const lt_graph* g_ = nullptr;
  std::vector<Step> steps_;
  std::vector<KernelDesc> kernels_;
  std::vector<KernelFn> fns_;
  std::vector<int64_t> temp_offset_;     // per node: byte offset in the arena, -1 if none
  std::vector<int64_t> scratch_offset_;  // per conv2d node: im2col offset in the arena
  size_t arena_bytes_ = 0;
  size_t num_inputs_ = 0, num_outputs_ = 0;
  double compile_ms_ = 0;
  mutable std::mutex arena_mu_;  // guards arena_ (reused by one execute at a time)
  mutable std::unique_ptr<char[], void (*)(void*)> arena_{nullptr, nullptr};
};

// Whether the plugin (codegen or an opaque step) can run `node`.
bool program_supports(const lt_graph& graph, size_t node);

}  // namespace lt::cpujit

#endif  // LT_CPU_JIT_PROGRAM_H
