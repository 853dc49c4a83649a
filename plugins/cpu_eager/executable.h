// executable.h — cpu_eager's compiled form of a graph region: an owned copy of the borrowed
// lt_graph and a host step program (one host kernel per live node, one arena for the
// intermediates, planned by liveness).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "lazytensor/host/steps.hpp"
#include "lazytensor/lower/graph.hpp"
#include "lazytensor/plugin_kit.hpp"

namespace lt::eager {

// Run, with the profiler's spans per op, and donation by kit::StepsExecutable.
class Executable : public kit::StepsExecutable<host::StepProgram> {
 public:
  // Prepares every live node of a validated graph (dead nodes are dropped). Throws
  // UNSUPPORTED naming a node the host kernels do not run (supports() said no to it).
  explicit Executable(const lt_graph& graph);

  void run(std::span<kit::Buffer* const> inputs, std::span<kit::Buffer* const> outputs) override {
    StepsExecutable::run(inputs, outputs);
    executions_.fetch_add(1);
  }
  void stats(const kit::Stats& emit) const override;
  const host::StepProgram& steps() const override { return *steps_; }

 private:
  lower::OwnedGraph graph_;
  std::unique_ptr<host::StepProgram> steps_;
  size_t nodes_ = 0;
  std::atomic<uint64_t> executions_{0};
  double compile_ms_ = 0;
};

}  // namespace lt::eager
