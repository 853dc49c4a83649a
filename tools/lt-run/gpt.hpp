// gpt.hpp — lt-run's GPT mode (gpt.cpp): options and entry point.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "lazytensor/lazytensor.hpp"

namespace lt_run {

struct GptOptions {
  std::string corpus = "/usr/share/games/fortunes";
  std::string save, load, prompt;
  std::string precision = "f32";  // f32, bf16, f16 (lazytensor/amp.hpp)
  int64_t steps = 1000, batch = 32, context = 128, layers = 4, width = 256, heads = 4;
  int64_t warmup = 100, eval_every = 100, eval_batches = 8;
  int64_t generate = 0, top_k = 20, stop_after = 0;
  double lr = 1e-3, weight_decay = 0.1, clip = 1.0, dropout = 0.1, temperature = 0.8;
  uint64_t seed = 42;
  std::string loss_log;      // "step train val" per evaluation, full precision (tests)
  bool distributed = false;  // data-parallel over the lt_dist_init group (docs/distributed.md)
  size_t bucket_bytes = 0;   // gradient all-reduce bucket; 0: lt::dist::kDefaultBucketBytes
  std::string fault;         // test hook "RANK:STEP:exit|error" (main.cpp)
  bool recompute = false;    // --recompute: each block a recompute region (docs/memory.md)
  std::string metrics_json;  // --metrics-json: memory figures, losses and the metrics report
  // Options given on the command line by name ("batch", "steps", ...): with --load, the
  // others are restored from the checkpoint and these override it (gpt.cpp says which).
  std::set<std::string> given;
};

// --inject-fault (main.cpp): exits or throws on that rank at that step.
void maybe_fault(const std::string& spec, int64_t step);

// Trains (steps beyond the loaded checkpoint's), saves, and samples, as `o` says.
int run_gpt(const GptOptions& o, lt::Runtime& rt, const lt::Device& dev);

}  // namespace lt_run
