// plan_cache.h — the plan cache: the one owner of compiled state. It keeps the compiled plans
// (LRU by key), the dynamic plans by program, the compiles running in the background, and per
// device the history that explains a miss (the recompile reason) and lets a program become
// dynamic. The executor asks it for the Run of a collected graph; on a miss it compiles
// (compile and dynamic stages) before answering.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "collect.h"
#include "compile_pool.h"
#include "plan.h"

namespace lt {

class PlanCache {
 public:
  explicit PlanCache(Runtime* rt) : rt_(rt) {}
  ~PlanCache() { shutdown(); }
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // How `c` runs on `dev`: its cached plan, an instance of a dynamic plan, or a fresh compile
  // (static, dynamic, bucketed, or a stand-in while a background compile runs). The caller
  // holds dev->exec_mu.
  Run lookup(Device* dev, const Collected& c);

  // Waits for the background compiles, then drops every plan (runtime teardown).
  void shutdown() noexcept;
  size_t size();
  // Every plan whose runs the metrics report shows: cached plans (not dynamic instances) and
  // dynamic plans.
  void for_each_plan(const std::function<void(const Plan&)>& fn);
  void reset_timings() noexcept;

 private:
  struct Key {
    const Device* device;
    uint64_t options_hash;
    uint64_t graph_key;
    bool operator==(const Key& o) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  // Every node's shape, stored flat: a Dims per node costs 72 bytes, 144 MB for a
  // 2,000,000-node graph, kept for 32 graphs (issue #18's scale lane).
  struct Shapes {
    std::vector<int64_t> dims;
    std::vector<size_t> end;  // node i's dims: dims[end[i - 1] .. end[i])
    void push_back(const Dims& d);
    size_t size() const { return end.size(); }
    Dims operator[](size_t i) const;
  };
  // A compiled graph as a miss is explained against it: ops and operand structure, shapes,
  // inputs.
  struct Signature {
    uint64_t program = 0;
    std::vector<uint16_t> ops;
    Shapes shapes;                // every node's
    std::vector<int32_t> inputs;  // node index of input k
    std::vector<lt_dtype> input_dtypes;
    std::vector<std::string> input_names;
  };
  // Per device, under its exec mutex.
  struct History {
    std::deque<Signature> recent;  // the graphs compiled last, most recent first (at most 32)
    // The last graph compiled static per program (at most 8, none over 100,000 nodes), to
    // generalise against when the program comes back at other sizes; and the programs that
    // could not be generalised, with why (at most 64), not tried again.
    std::list<std::pair<uint64_t, std::shared_ptr<lower::OwnedGraph>>> seen;
    std::list<std::pair<uint64_t, std::string>> static_programs;
  };

  std::shared_ptr<Plan> find(const Key& key, const Collected& c);
  void insert(const Key& key, std::shared_ptr<Plan> plan);
  std::shared_ptr<Plan> compile_miss(Device* dev, const Key& key, const Collected& c);
  std::string count_miss(Device* dev, const Collected& c);
  std::string miss_reason(History& h, Device* dev, const Collected& c);
  std::shared_ptr<Plan> background(Device* dev, const Key& key, const Collected& c);
  void sweep_background();
  std::shared_ptr<Plan> dynamic_find(Device* dev, const Collected& c, const lt_graph& full);
  std::shared_ptr<Plan> try_dynamic(Device* dev, const Collected& c, const lt_graph& full,
                                    const std::string& why, bool* static_plan);
  void enter_dynamic(Device* dev, uint64_t program, std::shared_ptr<Plan> plan);
  void remember(Device* dev, const Collected& c, const lt_graph& full);
  Run resolve(Device* dev, const std::shared_ptr<Plan>& plan, const Collected& c);
  History& history(const Device* dev);

  Runtime* rt_;
  std::mutex mu_;  // the LRU, the index and the dynamic plans
  std::list<std::pair<Key, std::shared_ptr<Plan>>> lru_;
  std::unordered_map<Key, decltype(lru_)::iterator, KeyHash> index_;
  // Dynamic plans by program (graph_key is the program hash); at most 64.
  std::list<std::pair<Key, std::shared_ptr<Plan>>> dynamic_;
  // Config background_compile: the compile queued or running for each key (bg_mu_), on the
  // pool made at the first background compile (at most its threads + queue entries).
  std::mutex bg_mu_;
  std::unordered_map<Key, std::shared_future<std::shared_ptr<Plan>>, KeyHash> compiling_;
  std::unique_ptr<CompilePool> pool_;
  std::mutex hist_mu_;  // the map itself; each History is its device's (exec mutex)
  std::unordered_map<const Device*, History> history_;
};

}  // namespace lt
