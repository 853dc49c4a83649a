// executor.cpp — collect, look up, run or queue: the path of a read or an lt_sync through the
// stages (executor.h).
#include "executor.h"

#include <algorithm>

#include "collect.h"
#include "plan_cache.h"
#include "profile.h"
#include "run.h"

namespace lt {

// Config async_execution: queues the run of `plan` on the device's worker. The roots take the
// ticket now (under exec_mu), so later graphs read them as inputs and run after this one; the
// job holds the inputs and roots, so a tensor released meanwhile is not freed under it.
static TicketPtr enqueue(Device* dev, Run r, Collected&& c) {
  ExecQueue::Job job;
  job.ticket = std::make_shared<Ticket>();
  job.ticket->device = dev;
  job.ticket->label = r.plan->label;
  for (int32_t i : c.inputs) {
    Node* in = c.nodes[i];
    job.keep.push_back(NodeRef::share(in));
    const TicketPtr& t = in->ticket;
    if (t && (!t->done() || t->failed()) &&
        std::find(job.after.begin(), job.after.end(), t) == job.after.end())
      job.after.push_back(t);
  }
  for (int32_t o : c.outputs) {
    job.keep.push_back(NodeRef::share(c.nodes[o]));
    c.nodes[o]->ticket = job.ticket;
  }
  TicketPtr ticket = job.ticket;
  r.queued = true;  // job.keep holds each input once more
  job.run = [dev, r = std::move(r), c = std::move(c)]() mutable { run(dev, r, c); };
  dev->queue->submit(std::move(job));
  return ticket;
}

// The step-boundary guard (issue #28). A training loop that reads a value every step (the loss)
// but never calls lt_sync leaves the parameters' updates pending: every read's graph then holds
// every step so far, grows, and compiles anew (measured: 35x slower, and no error). After
// kGuardReads such reads in a row, one warning per device names the cause, the fix and where
// the value read was traced; metric step_boundary.warnings counts it. lt_sync resets it.
constexpr int kGuardReads = 3;

void guard_read(Device* dev, const Collected& c, bool missed) {
  Device::StepGuard& g = dev->step_guard;
  const size_t nodes = c.nodes.size();
  g.growing_reads = missed && nodes > g.last_nodes && g.last_nodes ? g.growing_reads + 1 : 0;
  g.last_nodes = nodes;
  if (g.growing_reads < kGuardReads || g.warned) return;
  g.warned = true;
  Runtime* rt = dev->runtime;
  rt->metrics.add_named("step_boundary.warnings", 1);
  std::string at;
  for (int32_t o : c.outputs)
    if (std::string loc = trace_location(c.nodes[o]); !loc.empty()) {
      at = " (the value read was traced at " + loc + ")";
      break;
    }
  rt->log->warn(
      "{}: {} reads in a row without lt_sync each compiled a larger graph ({} nodes now){}: "
      "values that are never synced, such as updated parameters, keep every earlier step "
      "pending. Call lt_sync (lt::sync in C++) once per step, after the update, so each step "
      "is the same cached graph",
      dev->name, g.growing_reads, nodes, at);
}

// Collects the pending `roots` into one graph, finds or compiles its plan and runs it, or with
// async_execution queues it (its ticket also goes to `*fresh`). `sync`: an lt_sync (a step
// boundary), not a read. Returns the tickets of the roots' queued graphs.
static std::vector<TicketPtr> launch(Device* dev, std::vector<NodeRef>& roots, bool sync,
                                     TicketPtr* fresh = nullptr) {
  if (in_callback()) refuse_in_callback("running a graph on '" + dev->name + "'");  // async.h
  std::lock_guard lk(dev->exec_mu);
  std::vector<Node*> pending;
  std::vector<TicketPtr> queued;
  for (auto& r : roots)
    if (!r->is_leaf() && !r->materialized.load(std::memory_order_acquire)) {
      if (!r->ticket)
        pending.push_back(r.get());
      else if (queued.empty() || queued.back() != r->ticket)
        queued.push_back(r->ticket);
    }
  if (sync) dev->step_guard = {};
  if (pending.empty()) return queued;
  Runtime* rt = dev->runtime;
  Collected c;
  {
    Span span(rt, "stage", "collect");
    collect(pending, c);
    if (span.on()) span.args(fmt::format("\"nodes\": {}", c.nodes.size()));
  }
  const uint64_t misses = rt->metrics.cache_misses.load(std::memory_order_relaxed);
  Run r;
  {
    Span span(rt, "stage", "plan lookup");
    r = rt->plans->lookup(dev, c);
  }
  if (!sync) guard_read(dev, c, rt->metrics.cache_misses.load(std::memory_order_relaxed) != misses);
  if (dev->queue && !r.plan->compiled()->collectives) {
    queued.push_back(enqueue(dev, std::move(r), std::move(c)));
    if (fresh) *fresh = queued.back();
    return queued;
  }
  if (dev->queue) {  // collectives call MPI: on the calling thread, after the queue
    dev->queue->drain();
    for (int32_t i : c.inputs)
      if (const TicketPtr& t = c.nodes[i]->ticket) t->rethrow();
  }
  run(dev, r, c);
  return queued;
}

void materialize(Device* dev, std::vector<NodeRef>& roots) {
  Span span(dev->runtime, "step", "read");
  for (const TicketPtr& t : launch(dev, roots, false)) wait_ticket(dev, t);
}

// The profiler's "trace" span: the host's time since this device's last lt_sync ended (the
// program tracing its next step), so that a step's spans add up to its wall time.
void profile_trace_span(Device* dev) {
  Profiler* p = dev->runtime->profiler.get();
  if (!p) return;
  const int64_t ns = dev->profile_step_end_ns.load(std::memory_order_relaxed);
  const auto from = ns ? Profiler::Clock::time_point(std::chrono::nanoseconds(ns)) : p->started();
  p->complete("step", "trace", from, Profiler::Clock::now());
}

void sync_device(Device* dev) {
  profile_trace_span(dev);
  struct StepEnd {  // the next step's trace span starts when this lt_sync returns or throws
    Device* dev;
    ~StepEnd() {
      if (!dev->runtime->profiler) return;
      const auto now = Profiler::Clock::now().time_since_epoch();
      dev->profile_step_end_ns.store(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(),
          std::memory_order_relaxed);
    }
  } step_end{dev};
  Span span(dev->runtime, "step", "lt_sync");
  std::vector<NodeRef> roots;
  {
    std::lock_guard lk(dev->reg_mu);
    for (Tensor* t = dev->reg_head; t;) {
      Tensor* next = t->next;
      if (t->node->materialized.load(std::memory_order_acquire)) {
        tensor_unlink(dev, t);
      } else {
        roots.push_back(NodeRef::share(t->node));
      }
      t = next;
    }
  }
  if (!dev->queue) {
    for (const TicketPtr& t : launch(dev, roots, true)) wait_ticket(dev, t);
    return;
  }
  // The step is queued first, so the worker goes on to it without waiting for this thread;
  // then the graphs queued before it are waited for (the host traces the next step while this
  // one runs, never further ahead) and the first failure among them no read reported is thrown:
  // a step's failure surfaces at the latest at the next lt_sync (as PyTorch/XLA's device locks
  // do). With nothing new to queue, lt_sync waits for everything queued.
  TicketPtr fresh;
  launch(dev, roots, true, &fresh);
  if (fresh) {
    dev->queue->wait_through(fresh->seq - 1);
    dev->queue->raise_unreported(fresh->seq - 1);
  } else {
    dev->queue->drain();
    dev->queue->raise_unreported();
  }
}

void drain_queues(Runtime* rt) noexcept {
  for (auto& d : rt->devices)
    if (d->queue) d->queue->drain();
}

}  // namespace lt
