// ThreadsTest.cpp — several threads trace and sync their own tensors on one runtime at once.
#include "test_util.h"

#include <atomic>
#include <thread>

using namespace lt_test;

TEST(Threads, ConcurrentTraceAndSyncGiveCorrectResults) {
  RuntimeHandle h{make_runtime(plugin_dir("partial"), "partial")};
  ASSERT_NE(h.rt, nullptr);
  lt_device* d = lt_runtime_default_device(h.rt);
  std::atomic<int> bad{0};
  auto worker = [&](int id) {
    for (int it = 0; it < 200; ++it) {
      float base = static_cast<float>(id * 1000 + it);
      std::vector<float> xv = {base, base + 1, base + 2};
      lt_tensor* x = nullptr;
      if (lt_tensor_from_host(d, LT_DTYPE_F32, std::vector<int64_t>{3}.data(), 1, xv.data(), 12,
                              &x))
        return (void)bad++;
      lt_tensor *y = nullptr, *z = nullptr;
      if (lt_add(x, x, &y) || lt_mul(y, x, &z)) return (void)bad++;
      if (it % 2 == 0 && lt_sync(d)) return (void)bad++;
      std::vector<float> out(3);
      if (lt_tensor_to_host(z, out.data(), 12)) return (void)bad++;
      for (int k = 0; k < 3; ++k)
        if (out[k] != 2 * xv[k] * xv[k]) bad++;
      lt_tensor_free(x);
      lt_tensor_free(y);
      lt_tensor_free(z);
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) ts.emplace_back(worker, i);
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(metric(h.rt, "cache_hits"), 1);
}
