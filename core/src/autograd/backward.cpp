// backward.cpp — the reverse pass: an iterative topological walk over recorded histories
// that applies each op's gradient rule (rules.cpp) as new lazy ops, so the backward pass is
// itself a lazy graph; and the C entry points lt_backward and lt_grad.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autograd.h"
#include "error.h"
#include "runtime.h"  // lt::live_tensor: handles used after lt_tensor_free

namespace lt::autograd {
namespace {

struct NodeInfo {
  Ref keep;  // holds the handle alive for the walk
  Snapshot snap;
};

// Tensors reachable from `roots` through recorded histories, outputs before their inputs
// (reverse post-order of an explicit-stack DFS: no recursion, any depth).
std::vector<lt_tensor*> topo_order(const std::vector<lt_tensor*>& roots,
                                   std::unordered_map<lt_tensor*, NodeInfo>& info) {
  std::vector<lt_tensor*> post;
  struct Frame {
    lt_tensor* t;
    size_t next;
  };
  std::vector<Frame> stack;
  auto visit = [&](lt_tensor* t) {
    auto [it, inserted] = info.try_emplace(t);
    if (!inserted) return false;
    it->second.keep = Ref::retain(t);
    it->second.snap = snapshot(t);
    return true;
  };
  for (lt_tensor* r : roots) {
    if (!visit(r)) continue;
    stack.push_back({r, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      const auto& fn = info[f.t].snap.fn;
      if (fn && f.next < fn->inputs.size()) {
        size_t i = f.next++;
        lt_tensor* in = fn->inputs[i].get();
        if (fn->needs_grad[i] && visit(in)) stack.push_back({in, 0});
      } else {
        post.push_back(f.t);
        stack.pop_back();
      }
    }
  }
  std::reverse(post.begin(), post.end());
  return post;
}

// Rematerialisation (lt_recompute_begin, docs/memory.md): the record of an op recorded in a
// recompute region, with each input and the output that the region computed replaced by a
// recomputation from the region's inputs (nodes tagged with the region), so the gradient rule
// reads no value of the region's forward. One per backward walk: a value is recomputed once.
class Recompute {
 public:
  std::shared_ptr<GradFn> rebuild(const GradFn& fn) {
    auto re = std::make_shared<GradFn>();
    re->op = fn.op;
    re->attrs = AttrSet::copy(fn.attrs.view.data(), fn.attrs.view.size());
    re->needs_grad = fn.needs_grad;
    re->region = fn.region;
    for (const Ref& in : fn.inputs) re->inputs.push_back(Ref::retain(value(in.get(), fn.region)));
    re->output = value(fn.output, fn.region);
    return re;
  }

 private:
  // t itself when the region did not compute it, else its recomputation (borrowed from memo_).
  // An explicit stack: a region may be long.
  lt_tensor* value(lt_tensor* t, uint32_t region) {
    auto in_region = [&](lt_tensor* x) -> std::shared_ptr<GradFn> {
      Snapshot s = snapshot(x);
      return s.fn && s.fn->region == region ? s.fn : nullptr;
    };
    if (auto it = memo_.find(t); it != memo_.end()) return it->second.get();
    std::shared_ptr<GradFn> top = in_region(t);
    if (!top) return t;
    struct Frame {
      lt_tensor* t;
      std::shared_ptr<GradFn> fn;
      size_t next;
    };
    std::vector<Frame> stack{{t, std::move(top), 0}};
    while (!stack.empty()) {
      if (stack.back().next < stack.back().fn->inputs.size()) {
        lt_tensor* x = stack.back().fn->inputs[stack.back().next++].get();
        if (memo_.count(x)) continue;
        if (auto fx = in_region(x)) stack.push_back({x, std::move(fx), 0});
        continue;
      }
      Frame f = std::move(stack.back());
      stack.pop_back();
      std::vector<lt_tensor*> ins;
      for (const Ref& x : f.fn->inputs) {
        auto it = memo_.find(x.get());
        ins.push_back(it != memo_.end() ? it->second.get() : x.get());
      }
      lt_tensor* out = nullptr;
      const uint32_t saved = t_recompute_tag;
      t_recompute_tag = region;
      lt_error* e = lt_apply(lt_tensor_device(f.t), f.fn->op.c_str(), ins.data(), ins.size(),
                             f.fn->attrs.view.data(), f.fn->attrs.view.size(), &out);
      t_recompute_tag = saved;
      check(e, ("backward: recomputing '" + f.fn->op + "' of a recompute region").c_str());
      memo_[f.t] = Ref(out);
    }
    return memo_[t].get();
  }

  std::unordered_map<lt_tensor*, Ref> memo_;
};

}  // namespace

Ref reduce_to_shape(Ref g, const Shape& target) {
  Shape gs = shape_of(g.get());
  if (gs == target) return g;
  if (gs.size() < target.size()) {
    raise(LT_STATUS_INTERNAL, "backward: gradient of shape " + shape_str(gs) +
                                  " cannot be reduced to " + shape_str(target));
  }
  size_t lead = gs.size() - target.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < gs.size(); ++i) {
    if (i < lead || (target[i - lead] == 1 && gs[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  }
  lt_tensor* r = g.release();
  if (!axes.empty()) {
    lt_tensor* s = nullptr;
    lt_error* e = lt_sum(r, axes.data(), axes.size(), 1, &s);
    lt_tensor_free(r);
    check(e, "backward: reducing a broadcast gradient");
    r = s;
  }
  Ref holder(r);
  lt_tensor* out = nullptr;
  check(lt_reshape(r, target.data(), target.size(), &out),
        "backward: reducing a broadcast gradient");
  return Ref(out);
}

namespace {

// The seed d(result)/d(output): ones for a one-element output, else `seed` checked.
Ref make_seed(lt_tensor* output, lt_tensor* seed, const char* who) {
  Shape os = shape_of(output);
  lt_dtype dt = lt_tensor_dtype(output);
  if (!seed) {
    if (lt_tensor_numel(output) != 1) {
      raise(LT_STATUS_INVALID_ARGUMENT,
            std::string(who) + ": the output has shape " + shape_str(os) +
                " (not one element); pass a seed gradient of that shape");
    }
    lt_tensor* ones = nullptr;
    check(lt_full(lt_tensor_device(output), os.data(), os.size(), 1.0, dt, &ones), who);
    return Ref(ones);
  }
  Shape ss = shape_of(seed);
  if (ss != os) {
    raise(LT_STATUS_SHAPE_MISMATCH,
          std::string(who) + ": seed shape " + shape_str(ss) + " != output shape " + shape_str(os));
  }
  if (lt_tensor_dtype(seed) == dt) return Ref::retain(seed);
  lt_tensor* c = nullptr;
  check(lt_cast(seed, dt, &c), who);
  return Ref(c);
}

void add_into(std::unordered_map<lt_tensor*, Ref>& grads, lt_tensor* t, Ref g) {
  auto [it, inserted] = grads.try_emplace(t);
  if (inserted) {
    it->second = std::move(g);
    return;
  }
  lt_tensor* s = nullptr;
  check(lt_add(it->second.get(), g.get(), &s), "backward: summing gradients");
  it->second = Ref(s);
}

// Runs the reverse pass from outputs (with their seeds). `on_leaf` receives each leaf that
// requires gradients with its total gradient; `capture` (may be empty) names tensors whose
// total gradient is reported through `on_capture` even when they are not leaves.
template <class OnLeaf, class OnCapture>
void run_backward(const std::vector<lt_tensor*>& outputs, std::vector<Ref> seeds,
                  const std::unordered_set<lt_tensor*>& capture, bool free_history, const char* who,
                  OnLeaf&& on_leaf, OnCapture&& on_capture) {
  NoGradScope no_grad;  // the backward ops themselves record no history
  NoRecomputeRegion no_region;
  Recompute recompute;
  std::unordered_map<lt_tensor*, NodeInfo> info;
  std::vector<lt_tensor*> order = topo_order(outputs, info);
  std::unordered_map<lt_tensor*, Ref> grads;
  for (size_t k = 0; k < outputs.size(); ++k) add_into(grads, outputs[k], std::move(seeds[k]));

  for (lt_tensor* t : order) {
    auto git = grads.find(t);
    if (git == grads.end()) continue;
    Ref g = std::move(git->second);
    grads.erase(git);
    const Snapshot& snap = info[t].snap;
    if (capture.count(t)) on_capture(t, Ref::retain(g.get()));
    if (!snap.fn) {
      if (snap.graph_freed) {
        raise(LT_STATUS_INVALID_ARGUMENT,
              std::string(who) +
                  ": the history of a tensor on this path was freed by an earlier lt_backward; "
                  "run the forward pass again (or use lt_grad, which keeps it)");
      }
      if (snap.requires_grad) on_leaf(t, std::move(g));
      continue;
    }
    std::shared_ptr<GradFn> rebuilt = snap.fn->region ? recompute.rebuild(*snap.fn) : nullptr;
    const GradFn& fn = rebuilt ? *rebuilt : *snap.fn;
    Rule rule = find_rule(fn.op);
    if (!rule) {
      raise(LT_STATUS_UNSUPPORTED, std::string(who) + ": op '" + fn.op +
                                       "' has no gradient rule (wrap it in a no-grad scope or "
                                       "detach its inputs)");
    }
    std::vector<Ref> in_grads(fn.inputs.size());
    try {
      rule(fn, g.get(), in_grads);
    } catch (const lt::Error& e) {
      throw lt::Error(e.code(), std::string(who) + ": gradient of '" + fn.op + "': " + e.message());
    }
    for (size_t i = 0; i < fn.inputs.size(); ++i) {
      if (!in_grads[i] || !fn.needs_grad[i]) continue;
      lt_tensor* in = snap.fn->inputs[i].get();  // the walk's tensor, not a recomputation
      Ref gi = reduce_to_shape(std::move(in_grads[i]), shape_of(in));
      lt_dtype want = lt_tensor_dtype(in);
      if (lt_tensor_dtype(gi.get()) != want) {
        lt_tensor* c = nullptr;
        check(lt_cast(gi.get(), want, &c), who);
        gi = Ref(c);
      }
      add_into(grads, in, std::move(gi));
    }
  }
  if (free_history) {
    for (lt_tensor* t : order) release_history(t);
  }
}

void require_history(lt_tensor* t, const char* who) {
  if (!lt_tensor_requires_grad(t)) {
    raise(LT_STATUS_INVALID_ARGUMENT,
          std::string(who) +
              ": the output does not require gradients (no input of its ops was marked with "
              "lt_tensor_set_requires_grad, or it was computed in a no-grad scope)");
  }
}

}  // namespace
}  // namespace lt::autograd

using namespace lt::autograd;

extern "C" {

LT_API lt_error* lt_backward(lt_tensor* loss, lt_tensor* seed) {
  return lt::guard([&] {
    lt::live_tensor(loss, "backward", "loss");
    if (seed) lt::live_tensor(seed, "backward", "seed");
    require_history(loss, "backward");
    std::vector<Ref> seeds;
    seeds.push_back(make_seed(loss, seed, "backward"));
    run_backward(
        {loss}, std::move(seeds), {}, /*free_history=*/true, "backward",
        [](lt_tensor* leaf, Ref g) { accumulate_grad(leaf, std::move(g)); },
        [](lt_tensor*, Ref) {});
  });
}

LT_API lt_error* lt_grad(lt_tensor* const* outputs, lt_tensor* const* seeds, size_t num_outputs,
                         lt_tensor* const* inputs, size_t num_inputs, lt_tensor** grads) {
  return lt::guard([&] {
    if (!outputs || num_outputs == 0) raise(LT_STATUS_INVALID_ARGUMENT, "grad: no outputs");
    if (num_inputs > 0 && (!inputs || !grads)) {
      raise(LT_STATUS_INVALID_ARGUMENT, "grad: inputs or grads is NULL");
    }
    std::vector<lt_tensor*> outs;
    std::vector<Ref> seed_refs;
    for (size_t k = 0; k < num_outputs; ++k) {
      if (!outputs[k])
        raise(LT_STATUS_INVALID_ARGUMENT, "grad: outputs[" + std::to_string(k) + "] is NULL");
      lt::live_tensor(outputs[k], "grad", ("outputs[" + std::to_string(k) + "]").c_str());
      require_history(outputs[k], "grad");
      outs.push_back(outputs[k]);
      seed_refs.push_back(make_seed(outputs[k], seeds ? seeds[k] : nullptr, "grad"));
    }
    std::unordered_set<lt_tensor*> capture;
    for (size_t j = 0; j < num_inputs; ++j) {
      if (!inputs[j])
        raise(LT_STATUS_INVALID_ARGUMENT, "grad: inputs[" + std::to_string(j) + "] is NULL");
      lt::live_tensor(inputs[j], "grad", ("inputs[" + std::to_string(j) + "]").c_str());
      capture.insert(inputs[j]);
    }
    std::unordered_map<lt_tensor*, Ref> found;
    run_backward(
        outs, std::move(seed_refs), capture, /*free_history=*/false, "grad", [](lt_tensor*, Ref) {},
        [&](lt_tensor* t, Ref g) { found[t] = std::move(g); });
    std::vector<Ref> result(num_inputs);
    for (size_t j = 0; j < num_inputs; ++j) {
      auto it = found.find(inputs[j]);
      if (it != found.end()) {
        result[j] = Ref::retain(it->second.get());
      } else {
        Shape s = shape_of(inputs[j]);
        lt_tensor* z = nullptr;
        check(lt_full(lt_tensor_device(inputs[j]), s.data(), s.size(), 0.0,
                      lt_tensor_dtype(inputs[j]), &z),
              "grad");
        result[j] = Ref(z);
      }
    }
    for (size_t j = 0; j < num_inputs; ++j) grads[j] = result[j].release();
  });
}

}  // extern "C"
