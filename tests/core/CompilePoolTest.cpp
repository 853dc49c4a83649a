// CompilePoolTest.cpp — lt::CompilePool (core/src/compile_pool.h), the bounded pool behind
// background compiles: never more threads than its size, a full queue refuses at once, waiting
// jobs are dropped at shutdown (their promises broken, never run) while running ones finish.
// Jobs block on a gate, so nothing here depends on timing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <vector>

#include "compile_pool.h"

namespace {

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int entered = 0;
  void wait() {
    std::unique_lock lk(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lk, [&] { return open; });
  }
  void release() {
    std::lock_guard lk(mu);
    open = true;
    cv.notify_all();
  }
  bool wait_entered(int n) {  // false after 60 s: a hang, not a speed bound
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(60), [&] { return entered >= n; });
  }
};

}  // namespace

TEST(CompilePool, BoundedThreadsAndQueueRefusesWhenFull) {
  lt::CompilePool pool(2, 3);
  Gate gate;
  std::atomic<int> ran{0};
  std::vector<std::future<void>> done;
  int accepted = 0, refused = 0;
  for (int i = 0; i < 100; ++i) {
    auto p = std::make_shared<std::promise<void>>();
    std::future<void> f = p->get_future();
    bool ok = pool.try_submit([&, p] {
      gate.wait();
      ++ran;
      p->set_value();
    });
    if (ok) {
      ++accepted;
      done.push_back(std::move(f));
    } else {
      ++refused;
    }
    if (i == 1) ASSERT_TRUE(gate.wait_entered(2));  // both threads busy from here on
  }
  EXPECT_EQ(pool.threads_started(), 2u);
  EXPECT_EQ(accepted, 2 + 3) << "two running, three waiting";
  EXPECT_EQ(refused, 95);
  EXPECT_EQ(pool.waiting(), 3u);
  gate.release();
  for (auto& f : done) EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(ran.load(), 5);
  EXPECT_EQ(pool.threads_started(), 2u);
  // Free again: accepted.
  auto p = std::make_shared<std::promise<void>>();
  auto f = p->get_future();
  EXPECT_TRUE(pool.try_submit([p] { p->set_value(); }));
  EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
}

TEST(CompilePool, ShutdownDropsWaitingJobsAndFinishesRunningOnes) {
  Gate gate;
  std::future<int> running, waiting;
  auto pool = std::make_unique<lt::CompilePool>(1, 4);
  {
    auto task = std::make_shared<std::packaged_task<int()>>([&] {
      gate.wait();
      return 1;
    });
    running = task->get_future();
    ASSERT_TRUE(pool->try_submit([task] { (*task)(); }));
    auto task2 = std::make_shared<std::packaged_task<int()>>([] { return 2; });
    waiting = task2->get_future();
    ASSERT_TRUE(pool->try_submit([task2] { (*task2)(); }));
  }
  ASSERT_TRUE(gate.wait_entered(1));
  std::thread closer([&] { pool->shutdown(); });
  // The running job holds the only thread until released: release it only once shutdown has
  // dropped the waiting one (else the thread could pick that up first, and it would run).
  for (int i = 0; i < 10000 && pool->waiting() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(pool->waiting(), 0u);
  gate.release();
  closer.join();
  EXPECT_EQ(running.get(), 1);                     // the running job finished
  EXPECT_THROW(waiting.get(), std::future_error);  // the waiting one never ran: broken promise
  EXPECT_FALSE(pool->try_submit([] {})) << "no job after shutdown";
  pool.reset();
}

TEST(CompilePool, ThrowingJobDoesNotKillTheThread) {
  lt::CompilePool pool(1, 1);
  ASSERT_TRUE(pool.try_submit([] { throw 42; }));
  auto p = std::make_shared<std::promise<void>>();
  auto f = p->get_future();
  while (!pool.try_submit([p] { p->set_value(); })) std::this_thread::yield();
  EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(pool.threads_started(), 1u);
}
