// async.h — asynchronous execution (config async_execution): one FIFO queue and one worker
// thread per device run compiled graphs while the host traces the next step. Compile stays on
// the calling thread (it reads the live IR under exec_mu); only the execution is queued.
// Ownership: the device owns its ExecQueue; a queued job owns references to its graph's
// inputs and roots (so released tensors are never freed under it) and to its plan; a Ticket is
// shared by the job, the graph's roots (Node::ticket) and every later job that reads them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "error.h"
#include "ir.h"

namespace lt {

// The completion of one queued graph. Set once by the worker; waited for by readers.
struct Ticket {
  Device* device = nullptr;
  std::string label;  // the plan's label ("3 nodes; outputs add"), for error messages

  // Blocks until the graph ran (or failed); never throws.
  void wait() const;
  bool done() const { return done_.load(std::memory_order_acquire); }
  // After done(): the failure, if any (code and message naming the device, graph and op).
  bool failed() const { return code_ != LT_STATUS_OK; }
  lt_status_code code() const { return code_; }
  const std::string& message() const { return message_; }
  // Throws the failure as an lt::Error and marks it reported (lt_sync does not repeat it).
  void rethrow() const;
  uint64_t seq = 0;  // position in its device's queue (1, 2, ...), set by submit

 private:
  friend class ExecQueue;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> done_{false};
  lt_status_code code_ = LT_STATUS_OK;  // written before done_ is published
  std::string message_;
  mutable std::atomic<bool> reported_{false};
  // The failed graph whose output this one read, if that is why it failed: once the cause is
  // reported, lt_sync does not report this consequence again.
  std::shared_ptr<const Ticket> cause_;
};
using TicketPtr = std::shared_ptr<Ticket>;

// One device's queue of graph executions, run in order by one worker thread (started on the
// first submit). Jobs never take the device's exec_mu, so the host compiles and traces while
// the worker runs.
class ExecQueue {
 public:
  // Jobs allowed in the queue at once; submit blocks beyond that, so a host that traces faster
  // than the device runs keeps at most this many steps (and their buffers) in flight.
  static constexpr size_t kMaxInFlight = 4;

  explicit ExecQueue(Device* dev) : dev_(dev) {}
  ~ExecQueue();  // drains and joins

  struct Job {
    TicketPtr ticket;
    std::vector<TicketPtr> after;  // tickets of queued graphs whose outputs this one reads
    std::vector<NodeRef> keep;     // inputs and roots: alive until the job is done
    std::function<void()> run;     // the execution (run_plan); throws lt::Error
  };
  // Queues a job (the caller holds exec_mu and has recorded job.ticket on the roots); sets
  // job.ticket->seq.
  void submit(Job job);
  // Waits until every job up to sequence number `seq` has run. Never throws.
  void wait_through(uint64_t seq) noexcept;
  // Waits until every queued job has run. Never throws.
  void drain() noexcept;
  // lt_sync: throws the first failure, among the graphs up to sequence number `through`, that
  // no read or sync reported yet (a failure caused by a reported one does not count), and
  // forgets those (they stay readable as errors on their tensors).
  void raise_unreported(uint64_t through = UINT64_MAX);
  // Stops the worker after draining (runtime destruction).
  void shutdown() noexcept;

 private:
  void loop();
  static void finish(Job& job, lt_status_code code, std::string message) noexcept;

  Device* dev_;
  std::mutex mu_;
  std::condition_variable cv_;       // work queued / stop
  std::condition_variable idle_cv_;  // a job finished
  std::deque<Job> jobs_;
  uint64_t submitted_ = 0, completed_ = 0;  // sequence numbers (FIFO: completed in order)
  bool stop_ = false;
  std::vector<TicketPtr> failed_;  // failed graphs, in order, until lt_sync reports them
  std::thread worker_;
};

// Waits for `t` (counting async.waits and the time waited) and throws its failure. From a
// queue's worker or a custom kernel (below), a ticket not yet done is an error, not a wait.
void wait_ticket(Device* dev, const TicketPtr& t);

// Code the runtime runs on the application's behalf must never wait on a queue: the worker
// that runs a custom kernel cannot also wait for the graph that kernel belongs to (issue #29:
// lt_metric_get from a kernel deadlocked), and a synchronous kernel runs under its device's
// exec_mu. CallbackScope marks a custom kernel while it runs (any thread); queue workers are
// marked for their lifetime. In such code:
// - metrics reads (lt_metric_get, the report, lt_metrics_reset) answer at once, with what has
//   run so far (ExecQueue::drain and wait_through return without waiting);
// - a call that would run or wait for a graph (lt_sync, reading a pending tensor) fails with
//   LT_STATUS_INVALID_ARGUMENT naming the call (refuse_in_callback).
class CallbackScope {
 public:
  CallbackScope() noexcept;
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
};
// True on a queue's worker thread or inside a custom kernel.
bool in_callback() noexcept;
// Throws the error above when in_callback(); `what` names the call ("lt_sync on 'cpu_jit:0'").
void refuse_in_callback(const std::string& what);

}  // namespace lt
