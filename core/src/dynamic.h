// dynamic.h — the dynamic-shapes stage (docs/dynamic-shapes.md): from a program generalised
// over its sizes (lower::generalize), derive each region's size forms by partitioning the
// program at sample points, and compile one plan for every size; or, for a backend that needs
// static shapes, plan the program padded to bucket sizes. Failures to generalise are results
// (why the program stays static), never exceptions. Runs under the device's exec mutex.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collect.h"
#include "plan.h"

namespace lt {

// Compiles the program of `c` (at `values` of the symbols of `dyn`) for every value. Returns a
// plan holding a CompiledPlan with dyn_graph when every region runs every value; else sets
// `not_why` and returns the static plan at c's own values when that is what was compiled, or
// null.
std::shared_ptr<Plan> compile_dynamic(Device* dev, const Collected& c,
                                      std::shared_ptr<lower::OwnedGraph> dyn,
                                      const std::vector<int64_t>& values, const std::string& why,
                                      std::string* not_why);

// The bucket of each size: the first configured bucket at least as large, else the next power
// of two.
std::vector<int64_t> bucket_of(const Config& cfg, const std::vector<int64_t>& values);

// True if `dyn` padded to the buckets of `values` runs exactly (lower::mask_padding); else
// `why` says what stops it (a failure unrelated to shapes is also warned and counted).
bool paddable(Runtime* rt, lower::OwnedGraph& dyn, const std::vector<int64_t>& values,
              std::string* why);

// The run of `c` (at `values`) padded to its bucket of `entry`, whose plan is compiled on first
// use and kept in entry.buckets.
Run bucket_run(Device* dev, BucketedPlan& entry, const Collected& c,
               const std::vector<int64_t>& values);

}  // namespace lt
