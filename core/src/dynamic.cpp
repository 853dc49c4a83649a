// dynamic.cpp — size forms derived from the partition at sample points; bucket plans
// (dynamic.h).
#include "dynamic.h"

#include <algorithm>

#include "compile.h"
#include "error.h"
#include "lazytensor/lower/error.hpp"

namespace lt {
namespace {

// Why a dynamic attempt failed. A failure that says nothing about the program's shapes (out of
// memory, I/O, a plugin or internal error: issue #29, a corrupt cache entry) is never taken
// silently for "stays static": warned and counted (dynamic.compile_errors).
std::string dynamic_failure(Runtime* rt, const Error& e) {
  switch (e.code()) {
    case LT_STATUS_OUT_OF_MEMORY:
    case LT_STATUS_IO_ERROR:
    case LT_STATUS_PLUGIN_ERROR:
    case LT_STATUS_INTERNAL:
      rt->log->warn("dynamic-shape compile failed: {}", e.message());
      rt->metrics.add_named("dynamic.compile_errors", 1);
      break;
    default:
      break;
  }
  return e.message();
}

// The program at one point of its symbols: the graph, its partition and its regions' graphs.
struct Sample {
  lower::OwnedGraph graph;
  Partition part;
  std::vector<PreparedRegion> regions;
};

// False (and why) when the program breaks an op's shape rule at `values` (lower::instantiate
// and validate report it as lower::Error) or cannot be placed there.
bool sample_at(Device* dev, const lt_graph& dg, const std::vector<int64_t>& values, Sample& s,
               std::string* why) {
  try {
    s.graph = lower::instantiate(dg, values);
    lower::validate(s.graph.view());  // every op's shape rule holds at these values too
    s.part = partition(s.graph.view(), placement(dev));
    s.regions = prepare_regions(s.part);
    return true;
  } catch (const lower::Error& e) {
    *why = e.what();
  } catch (const Error& e) {
    *why = dynamic_failure(dev->runtime, e);
  }
  return false;
}

std::string site_backend(Device* dev, Site site) {
  return site == Site::kTarget ? dev->plugin->name : dev->runtime->fallback->name;
}

// Gives every region of `base` its expressions, derived from the samples with one symbol moved
// each (`varied`) and checked against `check`. False (and why) when the program is not the
// same partition at every value, or a region is not affine in the sizes.
bool derive_regions(Device* dev, Sample& base, const std::vector<int64_t>& base_values,
                    std::vector<Sample>& varied, const std::vector<int64_t>& moved, Sample& check,
                    const std::vector<int64_t>& check_values, std::string* why) {
  const size_t n = base.part.graph().num_nodes, regions = base.part.regions.size();
  auto same_shape = [&](Sample& s) {
    return s.part.graph().num_nodes == n && s.part.regions.size() == regions;
  };
  if (!same_shape(check) || !std::all_of(varied.begin(), varied.end(), same_shape)) {
    *why = "its partition into regions changes with its sizes";
    return false;
  }
  for (size_t r = 0; r < regions; ++r) {
    const Site site = base.part.regions[r].site;
    if (site == Site::kHost) {
      *why = "a custom op or a collective runs on the host";
      return false;
    }
    RegionGraph& rg = base.regions[r].graph;
    std::vector<const lt_graph*> moved_graphs;
    for (Sample& s : varied) {
      const RegionGraph& v = s.regions[r].graph;
      if (v.in_globals != rg.in_globals || v.out_globals != rg.out_globals) {
        *why = "its regions' inputs and outputs change with its sizes";
        return false;
      }
      moved_graphs.push_back(&v.buf.g);
    }
    std::vector<lt_dim_expr>& exprs = base.regions[r].exprs;
    std::string derive_why;
    if (!lower::derive_exprs(rg.buf.g, base_values, moved_graphs, moved, &exprs, &derive_why)) {
      *why = fmt::format("region {} ({}): {}", r, site_backend(dev, site), derive_why);
      return false;
    }
    lt_graph& g = rg.buf.g;
    g.num_symbols = base_values.size();
    g.symbol_values = base_values.data();
    g.num_dim_exprs = exprs.size();
    g.dim_exprs = exprs.data();
    std::vector<int64_t> at;
    if (!lower::match(g, check.regions[r].graph.buf.g, &at) || at != check_values) {
      *why = fmt::format("region {} ({}) is not affine in its sizes", r, site_backend(dev, site));
      return false;
    }
  }
  return true;
}

}  // namespace

std::shared_ptr<Plan> compile_dynamic(Device* dev, const Collected& c,
                                      std::shared_ptr<lower::OwnedGraph> dyn,
                                      const std::vector<int64_t>& values, const std::string& why,
                                      std::string* not_why) {
  const lt_graph& dg = dyn->view();
  // Base values at least 2, so no dim is 1 by accident; each symbol moved by one; a check at
  // other values of all of them.
  std::vector<int64_t> base = values, moved, check_values;
  for (int64_t& v : base) v = std::max<int64_t>(v, 2);
  std::vector<Sample> varied(base.size());
  for (size_t k = 0; k < base.size(); ++k) {
    std::vector<int64_t> vals = base;
    moved.push_back(vals[k] += 1);
    if (!sample_at(dev, dg, vals, varied[k], not_why)) return nullptr;
  }
  for (int64_t v : base) check_values.push_back(2 * v + 5);
  Sample check, real;
  if (!sample_at(dev, dg, check_values, check, not_why) ||
      !sample_at(dev, dg, base, real, not_why) ||
      !derive_regions(dev, real, base, varied, moved, check, check_values, not_why))
    return nullptr;
  bool all_dynamic = false;
  std::shared_ptr<Plan> plan;
  try {
    plan =
        compile_partition(dev, real.part, real.regions, PlanSource(c, why), &all_dynamic, not_why);
  } catch (const Error& e) {  // e.g. a backend that refuses the dynamic graph: compile static
    *not_why = dynamic_failure(dev->runtime, e);
    return nullptr;
  }
  if (!all_dynamic) return base == values ? plan : nullptr;  // still the right static plan for c
  plan->compiled()->dyn_graph = std::move(dyn);
  return plan;
}

std::vector<int64_t> bucket_of(const Config& cfg, const std::vector<int64_t>& values) {
  std::vector<int64_t> out;
  for (int64_t v : values) {
    auto it = std::lower_bound(cfg.dynamic_buckets.begin(), cfg.dynamic_buckets.end(), v);
    int64_t b = 1;
    while (b < v) b <<= 1;
    out.push_back(it != cfg.dynamic_buckets.end() ? *it : b);
  }
  return out;
}

bool paddable(Runtime* rt, lower::OwnedGraph& dyn, const std::vector<int64_t>& values,
              std::string* why) {
  try {
    lower::OwnedGraph at = lower::instantiate(dyn.view(), bucket_of(rt->config, values)), padded;
    lower::validate(at.view());  // every op's shape rule holds at the bucket sizes
    return lower::mask_padding(at.view(), &padded, why);
  } catch (const Error& e) {
    *why = dynamic_failure(rt, e);
  } catch (const lower::Error& e) {
    *why = e.what();
  }
  return false;
}

Run bucket_run(Device* dev, BucketedPlan& entry, const Collected& c,
               const std::vector<int64_t>& values) {
  Runtime* rt = dev->runtime;
  const std::vector<int64_t> bucket = bucket_of(rt->config, values);
  const lt_graph& dg = entry.dyn_graph->view();
  std::shared_ptr<Plan>& plan = entry.buckets[bucket];
  if (!plan) {
    lower::OwnedGraph at = lower::instantiate(dg, bucket), padded;
    std::string why;
    if (!lower::mask_padding(at.view(), &padded, &why))
      fail(LT_STATUS_INTERNAL, "padding to bucket {} failed: {}",
           dims_str(bucket.data(), bucket.size()), why);
    rt->metrics.cache_misses.fetch_add(1, std::memory_order_relaxed);
    plan = compile_plan(
        dev, padded.view(),
        PlanSource(padded.view(), c,
                   "sizes padded to bucket " + dims_str(bucket.data(), bucket.size())));
    rt->metrics.add_named("dynamic.bucket_compiles", 1);
  }
  Run run{plan, values, true, {}, {}};
  auto padded_shape = [&](int32_t node) {
    lower::Shape out;
    for (const lower::DimForm& f : lower::shape_forms(dg, static_cast<size_t>(node)))
      out.push_back(f.at(bucket));
    return out;
  };
  for (int32_t k : c.inputs) run.in_padded.push_back(padded_shape(k));
  for (int32_t o : c.outputs) run.root_padded.push_back(padded_shape(o));
  return run;
}

}  // namespace lt
