// executor.cpp — collect, look up, run or queue: the path of a read or an lt_sync through the
// stages (executor.h).
#include "executor.h"

#include <algorithm>

#include "collect.h"
#include "plan_cache.h"
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
  job.run = [dev, r = std::move(r), c = std::move(c)]() mutable { run(dev, r, c); };
  dev->queue->submit(std::move(job));
  return ticket;
}

// Collects the pending `roots` into one graph, finds or compiles its plan and runs it, or with
// async_execution queues it (its ticket also goes to `*fresh`). Returns the tickets of the
// roots' queued graphs.
static std::vector<TicketPtr> launch(Device* dev, std::vector<NodeRef>& roots,
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
  if (pending.empty()) return queued;
  Collected c;
  collect(pending, c);
  Run r = dev->runtime->plans->lookup(dev, c);
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
  for (const TicketPtr& t : launch(dev, roots)) wait_ticket(dev, t);
}

void sync_device(Device* dev) {
  std::vector<NodeRef> roots;
  {
    std::lock_guard lk(dev->reg_mu);
    for (Tensor* t = dev->reg_head; t;) {
      Tensor* next = t->next;
      if (t->node->materialized.load(std::memory_order_acquire)) {
        if (t->prev)
          t->prev->next = t->next;
        else
          dev->reg_head = t->next;
        if (t->next)
          t->next->prev = t->prev;
        else
          dev->reg_tail = t->prev;
        t->prev = t->next = nullptr;
        t->registered.store(false, std::memory_order_release);
      } else {
        roots.push_back(NodeRef::share(t->node));
      }
      t = next;
    }
  }
  if (!dev->queue) return materialize(dev, roots);
  // The step is queued first, so the worker goes on to it without waiting for this thread;
  // then the graphs queued before it are waited for (the host traces the next step while this
  // one runs, never further ahead) and the first failure among them no read reported is thrown:
  // a step's failure surfaces at the latest at the next lt_sync (as PyTorch/XLA's device locks
  // do). With nothing new to queue, lt_sync waits for everything queued.
  TicketPtr fresh;
  launch(dev, roots, &fresh);
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
