// plan_cache.cpp — cached plans, dynamic plans, background compiles, miss reasons
// (plan_cache.h).
#include "plan_cache.h"

#include <algorithm>

#include "compile.h"
#include "dynamic.h"
#include "error.h"
#include "lazytensor/lower/error.hpp"
#include "ops.h"
#include "optimize.h"
#include "profile.h"

namespace lt {
namespace {

constexpr size_t kMaxSeenNodes = 100000;

// The plan `base` at c's `values`, as the cache keeps it under c's own key.
std::shared_ptr<Plan> dynamic_instance(const std::shared_ptr<Plan>& base, const Collected& c,
                                       std::vector<int64_t> values) {
  auto p = std::make_shared<Plan>();
  p->num_nodes = c.nodes.size();
  p->num_inputs = c.inputs.size();
  p->outputs = c.outputs;
  p->key = c.key;
  p->device = base->device;
  p->label = base->label + " (dynamic, at " + dims_str(values.data(), values.size()) + ")";
  p->kind = DynamicInstance{base, std::move(values)};
  return p;
}

const lt_graph& dynamic_graph(Plan& p) {
  if (auto* cp = p.compiled()) return cp->dyn_graph->view();
  return std::get<BucketedPlan>(p.kind).dyn_graph->view();
}

// Where the user's program made collected node i: its own traced line, or for an input without
// one (host data) the line of the first node that reads it; "" when neither is known.
std::string where_traced(const Collected& c, size_t i) {
  if (std::string loc = trace_location(c.nodes[i]); !loc.empty()) return ", traced at " + loc;
  if (!c.is_input(i)) return {};
  for (size_t n = 0; n < c.nodes.size(); ++n) {
    if (c.is_input(n)) continue;
    for (int32_t k = c.op_begin[n]; k < c.op_begin[n + 1]; ++k)
      if (c.operand_idx[static_cast<size_t>(k)] == static_cast<int32_t>(i)) {
        std::string loc = trace_location(c.nodes[n]);
        if (!loc.empty()) return ", first used at " + loc;
        break;
      }
  }
  return {};
}

// What differs between two graphs of one program: the inputs whose shape or dtype changed,
// named ("input 3 'x' dim 0: 32 -> 24, first used at train.cpp:57"), else the first inner node
// whose shape changed.
template <class Signature>
std::string program_diff(const Signature& old, const Signature& sig, const Collected& c) {
  std::vector<std::string> parts;
  size_t changed = 0;
  for (size_t k = 0; k < sig.inputs.size(); ++k) {
    const Dims &a = old.shapes[old.inputs[k]], &b = sig.shapes[sig.inputs[k]];
    std::string what;
    if (a.size() != b.size()) {
      what = fmt::format("rank {} -> {} ({} -> {})", a.size(), b.size(), dims_str(a), dims_str(b));
    } else {
      for (size_t d = 0; d < a.size(); ++d)
        if (a[d] != b[d])
          what += fmt::format("{}dim {}: {} -> {}", what.empty() ? "" : ", ", d, a[d], b[d]);
    }
    if (old.input_dtypes[k] != sig.input_dtypes[k])
      what += fmt::format("{}dtype {} -> {}", what.empty() ? "" : ", ",
                          lt_dtype_name(old.input_dtypes[k]), lt_dtype_name(sig.input_dtypes[k]));
    if (what.empty()) continue;
    if (++changed > 3) continue;
    const std::string& name = sig.input_names[k];
    parts.push_back(fmt::format("input {}{} {}{}", k, name.empty() ? "" : " '" + name + "'", what,
                                where_traced(c, static_cast<size_t>(sig.inputs[k]))));
  }
  if (changed > 3) parts.push_back(fmt::format("and {} more inputs", changed - 3));
  if (!parts.empty()) {
    std::string out = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) out += "; " + parts[i];
    return out;
  }
  for (size_t i = 0; i < sig.shapes.size(); ++i)
    if (old.shapes[i] != sig.shapes[i])
      return fmt::format("node {} ({}) shape {} -> {}{}", i, op_name(sig.ops[i]),
                         dims_str(old.shapes[i]), dims_str(sig.shapes[i]), where_traced(c, i));
  return "same program, input shapes and dtypes: attributes changed";
}

}  // namespace

size_t PlanCache::KeyHash::operator()(const Key& k) const {
  return hash_combine(hash_combine(reinterpret_cast<uintptr_t>(k.device), k.options_hash),
                      k.graph_key);
}

void PlanCache::Shapes::push_back(const Dims& d) {
  dims.insert(dims.end(), d.begin(), d.end());
  end.push_back(dims.size());
}

Dims PlanCache::Shapes::operator[](size_t i) const {
  const size_t b = i ? end[i - 1] : 0;
  return Dims(dims.data() + b, end[i] - b);
}

Run PlanCache::lookup(Device* dev, const Collected& c) {
  const Key key{dev, dev->plugin->options_hash, c.key};
  std::shared_ptr<Plan> plan = find(key, c);
  if (plan)
    rt_->metrics.cache_hits.fetch_add(1, std::memory_order_relaxed);
  else
    plan = compile_miss(dev, key, c);
  return resolve(dev, plan, c);
}

std::shared_ptr<Plan> PlanCache::compile_miss(Device* dev, const Key& key, const Collected& c) {
  Span span(rt_, "compile", "compile");
  if (span.on())
    span.args(fmt::format("\"device\": \"{}\", \"nodes\": {}", dev->name, c.nodes.size()));
  if (rt_->config.background_compile && rt_->fallback && rt_->fallback != dev->plugin)
    return background(dev, key, c);
  const bool dynamic = rt_->config.dynamic_shapes != "off";
  GraphBuf full;
  full_graph(c, full);
  std::shared_ptr<Plan> plan;
  if (dynamic && (plan = dynamic_find(dev, c, full.g))) {
    rt_->metrics.cache_hits.fetch_add(1, std::memory_order_relaxed);
    rt_->metrics.add_named("dynamic.hits", 1);
  } else {
    std::string why = count_miss(dev, c);
    bool static_plan = false;
    if (dynamic) plan = try_dynamic(dev, c, full.g, why, &static_plan);
    if (!plan) plan = compile_optimized(dev, full.g, PlanSource(c, why), c.tags, &c);
    if (dynamic && !std::holds_alternative<DynamicInstance>(plan->kind)) remember(dev, c, full.g);
  }
  insert(key, plan);
  return plan;
}

Run PlanCache::resolve(Device* dev, const std::shared_ptr<Plan>& plan, const Collected& c) {
  const auto* inst = std::get_if<DynamicInstance>(&plan->kind);
  if (!inst) return Run{plan, {}, false, {}, {}};
  if (auto* bucketed = std::get_if<BucketedPlan>(&inst->base->kind))
    return bucket_run(dev, *bucketed, c, inst->symbols);
  return Run{inst->base, inst->symbols, false, {}, {}};
}

std::shared_ptr<Plan> PlanCache::find(const Key& key, const Collected& c) {
  std::lock_guard lk(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  const Plan& p = *it->second->second;
  if (p.num_nodes != c.nodes.size() || p.num_inputs != c.inputs.size() || p.outputs != c.outputs)
    return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void PlanCache::insert(const Key& key, std::shared_ptr<Plan> plan) {
  std::vector<std::shared_ptr<Plan>> evicted;  // destroyed outside the cache lock
  std::lock_guard lk(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    evicted.push_back(it->second->second);
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.emplace_front(key, std::move(plan));
  index_[key] = lru_.begin();
  while (lru_.size() > rt_->config.cache_capacity) {
    evicted.push_back(lru_.back().second);
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

PlanCache::History& PlanCache::history(const Device* dev) {
  std::lock_guard lk(hist_mu_);
  return history_[dev];  // references into an unordered_map stay valid as it grows
}

// Counts a miss and records why (the recompile reason), which it returns.
std::string PlanCache::count_miss(Device* dev, const Collected& c) {
  rt_->metrics.cache_misses.fetch_add(1, std::memory_order_relaxed);
  std::string why = miss_reason(history(dev), dev, c);
  rt_->log->debug("compile cache miss on {}: {}", dev->name, why);
  std::lock_guard ml(rt_->metrics.mu);
  rt_->metrics.recompile_reasons.push_back(why);
  while (rt_->metrics.recompile_reasons.size() > 16) rt_->metrics.recompile_reasons.pop_front();
  return why;
}

// Why c missed the cache: compared with the last compiled graph of the same program (an eval
// graph in between does not matter), else with the compiled graph sharing the longest prefix
// of ops.
std::string PlanCache::miss_reason(History& hist, Device* dev, const Collected& c) {
  Signature sig;
  uint64_t h = 0x6c745f70726f67ULL;
  sig.ops.reserve(c.nodes.size());
  sig.shapes.end.reserve(c.nodes.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const uint16_t op = c.is_input(i) ? kOpInput : c.nodes[i]->op;
    sig.ops.push_back(op);
    sig.shapes.push_back(c.nodes[i]->shape);
    h = hash_combine(h, op);
    if (!c.is_input(i))
      for (int32_t k = c.op_begin[i]; k < c.op_begin[i + 1]; ++k)
        h = hash_combine(h, static_cast<uint64_t>(c.operand_idx[static_cast<size_t>(k)]));
  }
  for (int32_t o : c.outputs) h = hash_combine(h, 0x0u + static_cast<uint64_t>(o) + (1ull << 40));
  sig.program = h;
  for (int32_t k : c.inputs) {
    sig.inputs.push_back(k);
    sig.input_dtypes.push_back(c.nodes[k]->dtype);
  }
  sig.input_names = input_names(c);
  std::deque<Signature>& recent = hist.recent;
  std::string why;
  auto same = std::find_if(recent.begin(), recent.end(), [&](const Signature& s) {
    return s.program == sig.program && s.ops == sig.ops &&
           s.inputs == sig.inputs;  // (a hash collision is no match)
  });
  if (same != recent.end()) {
    why = program_diff(*same, sig, c);
    recent.erase(same);
  } else if (recent.empty()) {
    why = fmt::format("{}: first graph compiled on this device", dev->name);
  } else {
    size_t best = 0;
    const Signature* closest = nullptr;
    for (const Signature& s : recent) {
      size_t i = 0;
      while (i < s.ops.size() && i < sig.ops.size() && s.ops[i] == sig.ops[i]) ++i;
      if (!closest || i > best) best = i, closest = &s;
    }
    why = fmt::format("new program ({} nodes, {} inputs)", sig.ops.size(), sig.inputs.size());
    if (best < closest->ops.size() && best < sig.ops.size())
      why += fmt::format("; the closest compiled graph ({} nodes) differs from node {}: {} -> {}",
                         closest->ops.size(), best, op_name(closest->ops[best]),
                         op_name(sig.ops[best]));
    else
      why += fmt::format("; the closest compiled graph has the same first {} ops of {}", best,
                         closest->ops.size());
  }
  recent.push_front(std::move(sig));
  if (recent.size() > 32) recent.pop_back();
  return why;
}

// Under bg_mu_: every finished background compile leaves compiling_, its plan into the cache
// (failed ones are counted and dropped), so the map never holds more than the pool's running
// and waiting compiles.
void PlanCache::sweep_background() {
  for (auto it = compiling_.begin(); it != compiling_.end();) {
    if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    try {
      insert(it->first, it->second.get());
    } catch (const std::exception& e) {
      rt_->log->warn("background compile failed ({}); its graph will compile again if it runs",
                     e.what());
      rt_->metrics.add_named("background_compile.failed", 1);
    }
    it = compiling_.erase(it);
  }
}

// Config background_compile: the first miss of a graph queues its compile for `dev` on the
// CompilePool (a fixed number of threads, a bounded queue; compile_pool.h), from a copy of the
// graph, and every execution until it is ready runs on the fallback (cpu_eager, its plan cached
// under the fallback's device); the first execution after that caches and returns the compiled
// plan. A compile that failed is rethrown under the fallback policy "error", else logged and
// replaced by the fallback's plan for good. When the queue is full the graph runs on the
// fallback without a compile (background_compile.queue_full) and its next miss tries again.
// Finished compiles never pile up: each new miss first moves every finished one into the cache
// (bounded by cache_capacity) or, failed, drops it (issue #29).
std::shared_ptr<Plan> PlanCache::background(Device* dev, const Key& key, const Collected& c) {
  std::shared_future<std::shared_ptr<Plan>> job;
  {
    std::lock_guard lk(bg_mu_);
    auto it = compiling_.find(key);
    if (it == compiling_.end()) {
      sweep_background();
      std::string why = count_miss(dev, c);
      GraphBuf full;
      full_graph(c, full);
      auto graph = std::make_shared<lower::OwnedGraph>(lower::copy_graph(full.g));
      auto task = std::make_shared<std::packaged_task<std::shared_ptr<Plan>()>>(
          [dev, graph, tags = c.tags, src = PlanSource(c, why + " (background)")] {
            auto p = compile_optimized(dev, graph->view(), src, tags);
            p->made = Plan::Made::kBackground;
            return p;
          });
      if (!pool_) {
        const size_t n = CompilePool::default_threads();
        pool_ = std::make_unique<CompilePool>(n, CompilePool::default_capacity(n));
      }
      if (pool_->try_submit([task] { (*task)(); })) {
        job = task->get_future().share();
        compiling_.emplace(key, job);
        rt_->metrics.add_named("background_compile.started", 1);
      } else {
        rt_->metrics.add_named("background_compile.queue_full", 1);
      }
    } else {
      job = it->second;
    }
  }
  Device* fb = rt_->fallback->devices.front();
  auto on_fallback = [&](const std::string& why) {
    GraphBuf full;
    full_graph(c, full);
    auto p = compile_optimized(fb, full.g, PlanSource(c, why), c.tags, &c);
    p->made = Plan::Made::kStandIn;
    return p;
  };
  if (job.valid() && job.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    {
      std::lock_guard lk(bg_mu_);
      compiling_.erase(key);
    }
    std::shared_ptr<Plan> plan;
    try {
      plan = job.get();
    } catch (const Error& e) {
      if (rt_->policy == FallbackPolicy::kError) throw;
      rt_->log->warn("background compile on '{}' failed ({}); the graph keeps running on '{}'",
                     dev->plugin->name, e.message(), fb->plugin->name);
      rt_->metrics.add_named("background_compile.failed", 1);
    }
    if (!plan) plan = on_fallback("the background compile on " + dev->name + " failed");
    insert(key, plan);
    return plan;
  }
  const Key eager_key{fb, fb->plugin->options_hash, c.key};
  std::shared_ptr<Plan> eager = find(eager_key, c);
  if (!eager) {
    eager = on_fallback("stand-in while " + dev->name + " compiles in the background");
    insert(eager_key, eager);
  }
  return eager;
}

// A dynamic plan of c's program that c matches, as an instance at c's values; else null.
std::shared_ptr<Plan> PlanCache::dynamic_find(Device* dev, const Collected& c,
                                              const lt_graph& full) {
  std::vector<std::shared_ptr<Plan>> candidates;
  {
    std::lock_guard lk(mu_);
    for (auto& [key, plan] : dynamic_)
      if (key.device == dev && key.options_hash == dev->plugin->options_hash &&
          key.graph_key == c.program)
        candidates.push_back(plan);
  }
  std::vector<int64_t> values;
  for (auto& cand : candidates)
    if (lower::match(dynamic_graph(*cand), full, &values)) return dynamic_instance(cand, c, values);
  return nullptr;
}

void PlanCache::enter_dynamic(Device* dev, uint64_t program, std::shared_ptr<Plan> plan) {
  std::lock_guard lk(mu_);
  dynamic_.emplace_front(Key{dev, dev->plugin->options_hash, program}, std::move(plan));
  if (dynamic_.size() > 64) dynamic_.pop_back();
}

// After a miss: c's program was compiled before at other sizes. Generalises the two graphs and
// compiles a dynamic plan; null when the program stays static (remembered, with why).
std::shared_ptr<Plan> PlanCache::try_dynamic(Device* dev, const Collected& c, const lt_graph& full,
                                             const std::string& why, bool* static_plan) {
  *static_plan = false;
  History& hist = history(dev);
  auto it = std::find_if(hist.seen.begin(), hist.seen.end(),
                         [&](auto& e) { return e.first == c.program; });
  if (it == hist.seen.end()) return nullptr;
  std::shared_ptr<lower::OwnedGraph> old = it->second;
  hist.seen.erase(it);
  std::vector<int64_t> values;
  std::vector<lt_dim_expr> exprs;
  std::string not_why;
  std::shared_ptr<Plan> plan;
  std::shared_ptr<lower::OwnedGraph> dyn;
  // Marks (lt_tensor_mark_dynamic): a changed input dim marked static, or under "marked" one
  // not marked dynamic, keeps the program static.
  const lt_graph& seen_g = old->view();
  for (size_t k = 0; k < c.inputs.size() && not_why.empty(); ++k) {
    const Node* in = c.nodes[c.inputs[k]];
    const lt_graph_node& was = seen_g.nodes[c.inputs[k]];
    for (size_t d = 0; d < in->shape.size() && d < was.rank && not_why.empty(); ++d) {
      if (in->shape[d] == was.shape[d]) continue;
      const uint32_t bit = d < 32 ? 1u << d : 0u;
      if (in->static_dims & bit)
        not_why = fmt::format("input {} dim {} is marked static", k, d);
      else if (rt_->config.dynamic_shapes == "marked" && !(in->dynamic_dims & bit))
        not_why =
            fmt::format("input {} dim {} is not marked dynamic (dynamic_shapes = marked)", k, d);
    }
  }
  if (not_why.empty() && lower::generalize(seen_g, full, &values, &exprs, &not_why)) {
    dyn = std::make_shared<lower::OwnedGraph>(lower::copy_graph(full));
    dyn->set_dynamic(values, std::move(exprs));
    plan = compile_dynamic(dev, c, dyn, values, why, &not_why);
  }
  if (plan && plan->compiled()->dyn_graph) {
    enter_dynamic(dev, c.program, plan);
    rt_->log->info("{}: graph '{}' is now dynamic in {} size(s)", dev->name, plan->label,
                   plan->compiled()->dyn_graph->view().num_symbols);
    rt_->metrics.add_named("dynamic.compiles", 1);
    return dynamic_instance(plan, c, values);
  }
  // Static shapes only: pad to buckets if masks make the padded run exact.
  std::string pad_why;
  if (dyn && paddable(rt_, *dyn, values, &pad_why)) {
    auto entry = std::make_shared<Plan>();
    entry->kind = BucketedPlan{dyn, {}};
    entry->device = dev->name;
    entry->key = c.key;
    entry->label = graph_label(c) + " (padded to buckets)";
    enter_dynamic(dev, c.program, entry);
    rt_->log->info("{}: graph '{}' runs padded to buckets ({})", dev->name, entry->label, not_why);
    rt_->metrics.add_named("dynamic.bucketed_programs", 1);
    *static_plan = plan != nullptr;
    return plan ? plan : dynamic_instance(entry, c, values);
  }
  if (dyn) not_why += "; padding: " + pad_why;
  rt_->log->info("{}: graph '{}' stays static: {}", dev->name, graph_label(c), not_why);
  hist.static_programs.emplace_front(c.program, not_why);
  if (hist.static_programs.size() > 64) hist.static_programs.pop_back();
  rt_->metrics.add_named("dynamic.static_programs", 1);
  *static_plan = plan != nullptr;
  return plan;
}

void PlanCache::remember(Device* dev, const Collected& c, const lt_graph& full) {
  if (c.nodes.size() > kMaxSeenNodes) return;
  History& hist = history(dev);
  for (auto& [prog, why] : hist.static_programs)
    if (prog == c.program) return;
  std::erase_if(hist.seen, [&](auto& e) { return e.first == c.program; });
  hist.seen.emplace_front(c.program, std::make_shared<lower::OwnedGraph>(lower::copy_graph(full)));
  if (hist.seen.size() > 8) hist.seen.pop_back();
}

void PlanCache::shutdown() noexcept {
  if (pool_) pool_->shutdown();  // drops waiting compiles, joins running ones
  {
    std::lock_guard lk(bg_mu_);
    compiling_.clear();
  }
  std::lock_guard lk(mu_);
  index_.clear();
  lru_.clear();
  dynamic_.clear();
}

size_t PlanCache::size() {
  std::lock_guard lk(mu_);
  return lru_.size();
}

void PlanCache::for_each_plan(const std::function<void(const Plan&)>& fn) {
  std::vector<std::shared_ptr<Plan>> plans;
  {
    std::lock_guard lk(mu_);
    for (auto& [key, plan] : lru_)
      if (!std::holds_alternative<DynamicInstance>(plan->kind)) plans.push_back(plan);
    for (auto& [key, plan] : dynamic_) plans.push_back(plan);  // its instances' runs
  }
  for (const auto& p : plans) fn(*p);
}

void PlanCache::reset_timings() noexcept {
  std::lock_guard lk(mu_);
  for (auto& [key, p] : lru_) {
    p->runs.store(0), p->run_ns.store(0), p->compile_ns.store(0);
    if (CompiledPlan* cp = p->compiled())
      for (size_t i = 0; i < cp->regions.size(); ++i) cp->region_ns[i].store(0);
  }
}

}  // namespace lt
