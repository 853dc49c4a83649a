// compile_pool.h — the fixed pool of threads that runs background compiles (config
// background_compile): at most `threads` compiles at once and at most `capacity` waiting, so a
// program whose graphs each run once keeps a bounded number of threads, stacks and pending
// compiles however many graphs it makes (issue #29: one std::async thread per graph, never
// forgotten, reached 12,293 threads). Owned by the runtime; a job that cannot be queued is
// refused at once (the caller runs the graph on the stand-in and counts it).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lt {

class CompilePool {
 public:
  // Threads start on demand, up to `threads` (at least 1); `capacity` jobs may wait.
  CompilePool(size_t threads, size_t capacity);
  ~CompilePool();  // shutdown()
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  // Queues `job`; false, and nothing queued, when `capacity` jobs already wait (or after
  // shutdown). A job must not throw (an exception escaping it is swallowed).
  bool try_submit(std::function<void()> job);
  // Drops the jobs still waiting (never run: their std::function is destroyed, so a promise
  // they hold is broken) and joins the threads after their running job. Idempotent.
  void shutdown() noexcept;

  size_t threads_started() const;
  size_t waiting() const;
  size_t running() const;
  size_t max_threads() const { return max_threads_; }
  size_t capacity() const { return capacity_; }

  // The pool size: LT_BACKGROUND_COMPILE_THREADS if set (1..64), else half the hardware
  // threads, clamped to 1..4 (a compile is itself multi-threaded in some backends).
  static size_t default_threads();
  // Waiting jobs allowed: 4 per thread.
  static size_t default_capacity(size_t threads) { return 4 * threads; }

 private:
  void loop();

  const size_t max_threads_, capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t running_ = 0, idle_ = 0;
  bool stop_ = false;
};

}  // namespace lt
