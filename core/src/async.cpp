// async.cpp — the per-device execution queue of config async_execution (async.h): a FIFO of
// compiled graphs run by one worker thread, tickets that readers wait on, and failures kept
// until the next read of the graph's outputs or the next lt_sync on the device.
#include "async.h"

#include "profile.h"

#include <algorithm>
#include <chrono>

#include "runtime.h"

namespace lt {

namespace {
thread_local bool tls_worker = false;     // this thread is an ExecQueue's worker
thread_local int tls_callback_depth = 0;  // custom kernels running on this thread
}  // namespace

CallbackScope::CallbackScope() noexcept {
  ++tls_callback_depth;
}
CallbackScope::~CallbackScope() {
  --tls_callback_depth;
}

bool in_callback() noexcept {
  return tls_worker || tls_callback_depth > 0;
}

void refuse_in_callback(const std::string& what) {
  if (!in_callback()) return;
  fail(LT_STATUS_INVALID_ARGUMENT,
       "{}: called from inside a custom kernel or from the runtime's execution worker, where "
       "waiting for a graph would wait for the graph that runs this code (a deadlock); read the "
       "kernel's inputs through its arguments, and call lt_sync or read tensors outside kernels",
       what);
}

void Ticket::wait() const {
  if (done()) return;
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return done(); });
}

void Ticket::rethrow() const {
  if (!failed()) return;
  reported_.store(true, std::memory_order_relaxed);
  throw Error(code_, message_);
}

ExecQueue::~ExecQueue() {
  shutdown();
}

void ExecQueue::submit(Job job) {
  std::unique_lock lk(mu_);
  if (!worker_.joinable()) worker_ = std::thread([this] { loop(); });
  idle_cv_.wait(lk, [&] { return jobs_.size() < kMaxInFlight; });
  job.ticket->seq = ++submitted_;
  jobs_.push_back(std::move(job));
  cv_.notify_one();
  lk.unlock();
  dev_->runtime->metrics.add_named("async.queued", 1);
}

void ExecQueue::wait_through(uint64_t seq) noexcept {
  if (in_callback()) return;  // never waits on a queue from a worker or kernel (async.h)
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return completed_ >= seq; });
}

void ExecQueue::drain() noexcept {
  if (in_callback()) return;  // never waits on a queue from a worker or kernel (async.h)
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return jobs_.empty(); });
}

void ExecQueue::raise_unreported(uint64_t through) {
  std::vector<TicketPtr> failed;
  {
    std::lock_guard lk(mu_);
    auto later = std::stable_partition(failed_.begin(), failed_.end(),
                                       [&](const TicketPtr& t) { return t->seq <= through; });
    failed.assign(failed_.begin(), later);
    failed_.erase(failed_.begin(), later);
  }
  for (const TicketPtr& t : failed) {
    if (t->reported_.load(std::memory_order_relaxed)) continue;
    if (t->cause_ && t->cause_->reported_.load(std::memory_order_relaxed)) continue;
    t->rethrow();
  }
}

void ExecQueue::shutdown() noexcept {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

void ExecQueue::finish(Job& job, lt_status_code code, std::string message) noexcept {
  // The references go first, so that once a reader sees the ticket done every buffer the job
  // released is back in its allocator (and leak checks after a read are exact).
  job.keep.clear();
  job.after.clear();
  job.run = nullptr;
  Ticket& t = *job.ticket;
  std::lock_guard lk(t.mu_);
  t.code_ = code;
  t.message_ = std::move(message);
  t.done_.store(true, std::memory_order_release);
  t.cv_.notify_all();
}

void ExecQueue::loop() {
  tls_worker = true;
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop_ and nothing left: the queue drains before it stops
    Job& job = jobs_.front();
    lk.unlock();
    lt_status_code code = LT_STATUS_OK;
    std::string message;
    try {
      for (const TicketPtr& dep : job.after) {
        dep->wait();  // already done when it is this queue's (FIFO); another device's may run
        if (dep->failed()) {
          job.ticket->cause_ = dep->cause_ ? dep->cause_ : dep;
          fail(dep->code(), "an input of this graph comes from a graph that failed: {}",
               dep->message());
        }
      }
      job.run();
    } catch (const Error& e) {
      code = e.code();
      message = e.message();
    } catch (const std::bad_alloc&) {
      code = LT_STATUS_OUT_OF_MEMORY;
      message = "out of memory";
    } catch (const std::exception& e) {
      code = LT_STATUS_INTERNAL;
      message = e.what();
    } catch (...) {
      code = LT_STATUS_INTERNAL;
      message = "unknown exception";
    }
    if (code != LT_STATUS_OK)
      message =
          fmt::format("{}: queued graph ({}) failed: {}", dev_->name, job.ticket->label, message);
    TicketPtr ticket = job.ticket;
    finish(job, code, std::move(message));
    lk.lock();
    if (ticket->failed()) failed_.push_back(ticket);
    completed_ = ticket->seq;
    jobs_.pop_front();
    idle_cv_.notify_all();
  }
}

void wait_ticket(Device* dev, const TicketPtr& t) {
  if (!t->done()) {
    refuse_in_callback("reading a tensor of a queued graph on '" + dev->name + "'");
    auto t0 = std::chrono::steady_clock::now();
    Span span(dev->runtime, "queue", "wait for a queued graph");
    t->wait();
    auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    Metrics& m = dev->runtime->metrics;
    std::lock_guard lk(m.mu);
    m.named["async.waits"] += 1;
    m.named["async.wait_ms"] += static_cast<double>(ns) / 1e6;
  }
  t->rethrow();
}

}  // namespace lt
