// difftest.hpp — the optimiser's differential tester (issue #27): random programs over the op
// table (every op but the collectives, every dtype, broadcasting, zero-sized and rank-0 values,
// NaN, infinities and signed zeros in the data, and the patterns the passes rewrite) traced
// through lt.h on two cpu_eager runtimes, one with optimize = none and one with exact or fast,
// and every output compared: bitwise under exact, within the stated ulps under fast.
#pragma once

#include <cstdint>
#include <string>

#include "lazytensor/lt.h"

namespace lt_difftest {

struct Outcome {
  bool ok = true;
  std::string report;  // on a mismatch: the program, and which output differs how
  size_t ops = 0, outputs = 0;
};

class Tester {
 public:
  // `level`: "exact" or "fast"; `plugin_dir`: where cpu_eager's plugin is.
  Tester(const char* level, const std::string& plugin_dir);
  ~Tester();
  Tester(const Tester&) = delete;
  Tester& operator=(const Tester&) = delete;
  bool ready() const { return ref_ && opt_; }
  const std::string& error() const { return error_; }
  // Builds the program of `seed` and compares; deterministic per seed.
  Outcome run(uint64_t seed);
  // A metric of the optimising runtime ("optimize.nodes_in", "optimize.cse.removed"), 0 if unset.
  double metric(const char* name) const;
  // Every outcome carries its program text (lt_difftest --show).
  void set_verbose(bool v) { verbose_ = v; }

 private:
  lt_runtime *ref_ = nullptr, *opt_ = nullptr;
  bool fast_ = false, verbose_ = false;
  std::string error_;
};

// Under fast: a and b agree within the stated tolerance (docs/optimizer.md): equal (+0 == -0),
// both non-finite, or within 64 float ulps of a or of `scale` (the output's largest magnitude).
bool close_fast(double a, double b, double scale);

}  // namespace lt_difftest
