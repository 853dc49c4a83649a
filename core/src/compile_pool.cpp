// compile_pool.cpp — the bounded pool of background-compile threads (compile_pool.h).
#include "compile_pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace lt {

CompilePool::CompilePool(size_t threads, size_t capacity)
    : max_threads_(std::max<size_t>(1, threads)), capacity_(capacity) {}

CompilePool::~CompilePool() {
  shutdown();
}

bool CompilePool::try_submit(std::function<void()> job) {
  std::lock_guard lk(mu_);
  if (stop_ || jobs_.size() >= capacity_ + idle_) return false;
  jobs_.push_back(std::move(job));
  // A thread is started only when none is idle to take the job, never beyond the pool's size.
  if (idle_ == 0 && threads_.size() < max_threads_)
    threads_.emplace_back([this] { loop(); });
  else
    cv_.notify_one();
  return true;
}

void CompilePool::shutdown() noexcept {
  std::deque<std::function<void()>> dropped;
  std::vector<std::thread> threads;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    dropped.swap(jobs_);
    threads.swap(threads_);
    cv_.notify_all();
  }
  dropped.clear();  // outside the lock: destroying a job may run arbitrary destructors
  for (std::thread& t : threads)
    if (t.joinable()) t.join();
}

size_t CompilePool::threads_started() const {
  std::lock_guard lk(mu_);
  return threads_.size();
}
size_t CompilePool::waiting() const {
  std::lock_guard lk(mu_);
  return jobs_.size();
}
size_t CompilePool::running() const {
  std::lock_guard lk(mu_);
  return running_;
}

size_t CompilePool::default_threads() {
  if (const char* v = std::getenv("LT_BACKGROUND_COMPILE_THREADS"); v && *v) {
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 64) return static_cast<size_t>(n);
  }
  size_t hw = std::thread::hardware_concurrency();
  return std::clamp<size_t>(hw / 2, 1, 4);
}

void CompilePool::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
    --idle_;
    if (stop_) return;  // waiting jobs are dropped by shutdown()
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lk.unlock();
    try {
      job();
    } catch (...) {  // a job reports through its own promise; nothing may escape a thread
    }
    job = nullptr;
    lk.lock();
    --running_;
  }
}

}  // namespace lt
