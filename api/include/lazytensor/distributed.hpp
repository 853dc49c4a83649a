// distributed.hpp — data-parallel training across processes (docs/distributed.md): the process
// group from the MPI environment (lt_dist_init), broadcasting parameters from rank 0, and the
// gradient all-reduce that packs small gradients into few collectives. Everything stays lazy:
// the reduction is part of the training step's one cached graph.
#ifndef LAZYTENSOR_DISTRIBUTED_HPP
#define LAZYTENSOR_DISTRIBUTED_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "lazytensor/autograd.hpp"
#include "lazytensor/data.hpp"
#include "lazytensor/lazytensor.hpp"

namespace lt::dist {

// Starts (or joins) the group; throws lt::Error (UNSUPPORTED in a build without MPI).
inline void init() {
  check(lt_dist_init(nullptr, nullptr));
}
inline void finalize() {
  check(lt_dist_finalize());
}
inline bool initialized() {
  return lt_dist_is_initialized() != 0;
}
// 0 and 1 before init: a program written for N processes runs unchanged as one.
inline int64_t rank() {
  return lt_dist_rank();
}
inline int64_t world_size() {
  return lt_dist_world_size();
}
// This process's share of every global batch (lt::data::Batcher::set_shard, text::sample_batch).
inline data::Shard shard() {
  return {rank(), world_size()};
}
// Ends every process of the group with `message` naming this rank; never returns.
[[noreturn]] inline void abort(int code, const std::string& message) {
  lt_dist_abort(code, message.c_str());
  for (;;) {
  }
}

// Every rank must run with the same settings (a global batch, a step count, a model): each
// rank's values are all-gathered once, on `dev`, and a difference is an lt::Error, on every
// rank, naming the setting and each rank's value ("--batch: 64 on rank 0, 16 on rank 1").
// Without it, ranks that disagree run different numbers of steps and wait on each other.
inline void check_same_settings(const Device& dev,
                                const std::vector<std::pair<std::string, int64_t>>& settings) {
  if (!initialized() || world_size() == 1 || settings.empty()) return;
  std::vector<int64_t> mine;
  for (const auto& kv : settings) mine.push_back(kv.second);
  const auto n = static_cast<int64_t>(mine.size());
  std::vector<int64_t> all = Tensor::from(dev, mine, {n}).all_gather().to_vector<int64_t>();
  for (size_t k = 0; k < settings.size(); ++k) {
    bool same = true;
    std::string values;
    for (int64_t r = 0; r < world_size(); ++r) {
      const int64_t v = all[static_cast<size_t>(r * n) + k];
      same = same && v == mine[k];
      values += (r ? ", " : "") + std::to_string(v) + " on rank " + std::to_string(r);
    }
    if (!same)
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "ranks were started with different settings: " + settings[k].first + ": " +
                      values + " (every rank must be given the same ones)");
  }
}

// Replaces every parameter by root's value (kept a leaf, requires_grad kept) and materialises
// them: after it every rank starts from the same weights, whatever its own initialisation.
inline void broadcast_parameters(const std::vector<Tensor*>& params, int64_t root = 0) {
  if (!initialized() || world_size() == 1) return;
  NoGradGuard no_grad;  // as an optimizer step: a fresh leaf per parameter
  Device dev;
  for (Tensor* p : params) {
    if (!p || !p->defined()) continue;
    const bool rg = requires_grad(*p);
    *p = p->broadcast(root);
    if (rg) set_requires_grad(*p);
    dev = p->device();
  }
  if (dev.get()) sync(dev);
}

// torch.distributed's default bucket. Measured here (benchmarks/dist, an MLP and a small GPT
// on 2 processes; docs/distributed.md) one bucket for all gradients wins or ties against
// 1 B, 64 KiB and 1 MiB buckets: collectives run between regions, so smaller buckets overlap
// nothing and each costs a latency. This size puts every gradient of those models in one.
inline constexpr size_t kDefaultBucketBytes = size_t(25) << 20;

// All-reduces the gradients of `params` (op: LT_REDUCE_SUM for a loss already divided by the
// global batch, LT_REDUCE_MEAN for a mean over each process's batch), in place (set_grad).
// Gradients are packed, in order and per dtype, into buckets of at most `bucket_bytes` (a
// gradient larger than that is one bucket of its own); each bucket is one collective over a
// flat concatenation. Returns the number of collectives traced. No-op in a group of one.
inline size_t all_reduce_gradients(const std::vector<Tensor*>& params,
                                   lt_reduce_op op = LT_REDUCE_SUM,
                                   size_t bucket_bytes = kDefaultBucketBytes) {
  if (!initialized() || world_size() == 1) return 0;
  NoGradGuard no_grad;
  struct Item {
    Tensor* p;
    Tensor g;
  };
  std::vector<Item> items;
  for (Tensor* p : params) {
    if (!p || !p->defined()) continue;
    Tensor g = grad(*p);
    if (g.defined()) items.push_back({p, std::move(g)});
  }
  size_t collectives = 0;
  std::vector<bool> done(items.size(), false);
  for (size_t i = 0; i < items.size(); ++i) {
    if (done[i]) continue;
    // One bucket: items of i's dtype from i on, while they fit.
    const DType dt = items[i].g.dtype();
    std::vector<size_t> bucket;
    size_t bytes = 0;
    for (size_t j = i; j < items.size(); ++j) {
      if (done[j] || items[j].g.dtype() != dt) continue;
      size_t nb = static_cast<size_t>(items[j].g.numel()) * lt_dtype_size(dt);
      if (!bucket.empty() && bytes + nb > bucket_bytes) break;
      bucket.push_back(j);
      bytes += nb;
      done[j] = true;
    }
    ++collectives;
    if (bucket.size() == 1) {
      Item& it = items[bucket[0]];
      set_grad(*it.p, it.g.all_reduce(op));
      continue;
    }
    std::vector<Tensor> flat;
    for (size_t j : bucket) flat.push_back(items[j].g.reshape({items[j].g.numel()}));
    Tensor reduced = concat(flat, 0).all_reduce(op);
    int64_t off = 0;
    for (size_t j : bucket) {
      const int64_t n = items[j].g.numel();
      set_grad(*items[j].p, reduced.slice(0, off, off + n).reshape(items[j].g.shape_span()));
      off += n;
    }
  }
  return collectives;
}

}  // namespace lt::dist

#endif  // LAZYTENSOR_DISTRIBUTED_HPP
