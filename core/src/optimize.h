// optimize.h — the optimise stage: on a plan-cache miss (never on a hit), between collect and
// partition, the collected graph goes through lower::optimize (docs/optimizer.md) at the
// runtime's level (config `optimize`, LT_OPTIMIZE, lt_runtime_options.optimize); the plan maps
// the caller's inputs and outputs to the optimised graph's and keeps its folded constants.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "compile.h"

namespace lt {

// Optimises `g` (the collected graph; `tags`: its nodes' recompute tags, empty = all 0) and
// compiles the result for `dev` as compile_plan does. Plugins see only the optimised graph.
std::shared_ptr<Plan> compile_optimized(Device* dev, const lt_graph& g, const PlanSource& src,
                                        std::span<const uint32_t> tags,
                                        const Collected* live = nullptr);

}  // namespace lt
