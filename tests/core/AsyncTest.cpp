// AsyncTest.cpp — config async_execution: lt_sync returns once the step is queued and the host
// traces on while it runs; reads wait for their graph and see the right values; an execution
// error surfaces at the next read or lt_sync naming the op, and graphs reading its outputs fail
// too; inputs released while queued stay alive; a runtime destroyed with work queued drains it.
// A custom op whose CPU kernel waits on a gate (run by the core on the worker thread) holds a
// step in execution for as long as a test needs, so nothing here depends on timing.
#include "test_util.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unistd.h>

using namespace lt_test;

namespace {

// The gate: test_async.gate copies its input once the gate is open; `entered` counts kernels
// that started (so a test knows the worker is inside a step).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = true;
  int entered = 0;
  void close() {
    std::lock_guard lk(mu);
    open = false;
  }
  void release() {
    std::lock_guard lk(mu);
    open = true;
    cv.notify_all();
  }
  // True once `n` kernels have started; false after 60 s (a hang, not a speed bound).
  bool wait_entered(int n) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(60), [&] { return entered >= n; });
  }
};
Gate g_gate;

lt_status_code same_shape(lt_custom_op_args* a) {
  a->out_dtype = a->inputs[0].dtype;
  a->out_rank = a->inputs[0].rank;
  for (size_t i = 0; i < a->out_rank; ++i) a->out_shape[i] = a->inputs[0].shape[i];
  return LT_STATUS_OK;
}
lt_status_code gate_kernel(lt_custom_op_args* a) {
  std::unique_lock lk(g_gate.mu);
  ++g_gate.entered;
  g_gate.cv.notify_all();
  g_gate.cv.wait(lk, [] { return g_gate.open; });
  std::memcpy(a->out_data, a->inputs[0].data, a->out_nbytes);
  return LT_STATUS_OK;
}
lt_status_code fail_kernel(lt_custom_op_args* a) {
  std::snprintf(a->error, a->error_size, "injected failure");
  return LT_STATUS_INVALID_ARGUMENT;
}

// Kernels that call back into the runtime (issue #29): the runtime and device they use, and
// what the calls returned.
struct Reentry {
  lt_runtime* rt = nullptr;
  lt_device* dev = nullptr;
  lt_tensor* pending = nullptr;  // a tensor whose graph has not run
  std::atomic<int> calls{0};
  lt_status_code metric_code = LT_STATUS_INTERNAL, sync_code = LT_STATUS_OK,
                 read_code = LT_STATUS_OK;
  double metric = -1;
  std::string sync_msg;
};
Reentry g_re;
lt_status_code metric_kernel(lt_custom_op_args* a) {
  Err e(lt_metric_get(g_re.rt, "compiles", &g_re.metric));
  g_re.metric_code = e.code();
  std::memcpy(a->out_data, a->inputs[0].data, a->out_nbytes);
  ++g_re.calls;
  return LT_STATUS_OK;
}
lt_status_code sync_kernel(lt_custom_op_args* a) {
  Err s(lt_sync(g_re.dev));
  g_re.sync_code = s.code();
  g_re.sync_msg = s.msg();
  float v = 0;
  Err r(lt_tensor_to_host(g_re.pending, &v, sizeof v));
  g_re.read_code = r.code();
  std::memcpy(a->out_data, a->inputs[0].data, a->out_nbytes);
  ++g_re.calls;
  return LT_STATUS_OK;
}

void register_ops() {
  static bool once = [] {
    using Entry = std::pair<const char*, lt_custom_op_fn>;
    for (auto [name, kernel] :
         {Entry{"test_async.gate", gate_kernel}, Entry{"test_async.fail", fail_kernel},
          Entry{"test_async.metric", metric_kernel}, Entry{"test_async.sync", sync_kernel}}) {
      lt_custom_op_def d{};
      d.struct_size = LT_CUSTOM_OP_DEF_STRUCT_SIZE;
      d.name = name;
      d.min_inputs = d.max_inputs = 1;
      d.infer = same_shape;
      d.cpu_kernel = kernel;
      Err e(lt_register_custom_op(&d));
      EXPECT_TRUE(e.ok()) << e.msg();
    }
    return true;
  }();
  (void)once;
}

// A runtime on the "partial" test backend with async_execution on (from a config file).
struct AsyncRuntime {
  lt_runtime* rt = nullptr;
  lt_device* dev = nullptr;
  std::string config;
  explicit AsyncRuntime(bool async = true) {
    register_ops();
    config = (std::filesystem::temp_directory_path() /
              ("lt_async_" + std::to_string(::getpid()) + ".toml"))
                 .string();
    std::ofstream(config) << "async_execution = " << (async ? "true" : "false") << "\n";
    rt = make_runtime(plugin_dir("partial"), "partial", "silent", config.c_str());
    if (rt) dev = lt_runtime_default_device(rt);
  }
  ~AsyncRuntime() {
    if (rt) lt_runtime_destroy(rt);
    std::filesystem::remove(config);
  }
};

lt_tensor* apply1(lt_device* d, const char* op, lt_tensor* x) {
  lt_tensor* out = nullptr;
  Err e(lt_apply(d, op, &x, 1, nullptr, 0, &out));
  EXPECT_TRUE(e.ok()) << e.msg();
  return out;
}
lt_tensor* add(lt_tensor* a, lt_tensor* b) {
  lt_tensor* out = nullptr;
  Err e(lt_add(a, b, &out));
  EXPECT_TRUE(e.ok()) << e.msg();
  return out;
}
lt_tensor* mul(lt_tensor* a, lt_tensor* b) {
  lt_tensor* out = nullptr;
  Err e(lt_mul(a, b, &out));
  EXPECT_TRUE(e.ok()) << e.msg();
  return out;
}
void free_all(std::initializer_list<lt_tensor*> ts) {
  for (lt_tensor* t : ts) lt_tensor_free(t);
}

}  // namespace

TEST(Async, SyncReturnsWhileTheStepRunsAndTheHostTracesOn) {
  AsyncRuntime r;
  ASSERT_NE(r.dev, nullptr);
  g_gate.entered = 0;
  g_gate.close();
  lt_tensor* x = from_host(r.dev, {1, 2, 3}, {3});
  lt_tensor* y = apply1(r.dev, "test_async.gate", x);
  lt_tensor* z = add(y, x);
  LT_OK(lt_sync(r.dev));  // returns although the step cannot finish until the gate opens
  ASSERT_TRUE(g_gate.wait_entered(1));  // the worker is inside the step
  lt_tensor* w = mul(z, x);             // the host traces the next step meanwhile
  g_gate.release();
  EXPECT_EQ(to_host(w), (std::vector<float>{2, 8, 18}));
  EXPECT_EQ(to_host(z), (std::vector<float>{2, 4, 6}));
  EXPECT_TRUE(lt_tensor_is_materialized(z));
  EXPECT_GE(metric(r.rt, "async.queued"), 2);
  free_all({x, y, z, w});
}

TEST(Async, ManyStepsComputeWhatSynchronousStepsCompute) {
  AsyncRuntime r;
  ASSERT_NE(r.dev, nullptr);
  std::vector<float> want = {0.5f, -1, 2, 4};
  lt_tensor* a = from_host(r.dev, want, {4});
  lt_tensor* k = nullptr;
  LT_OK(lt_scalar(r.dev, LT_DTYPE_F32, 0.75, &k));  // a scalar leaf, uploaded by the worker
  lt_tensor* one = from_host(r.dev, {1, 1, 1, 1}, {4});
  g_gate.entered = 0;
  g_gate.close();
  lt_tensor* held = apply1(r.dev, "test_async.gate", a);  // the first step waits on the gate
  LT_OK(lt_sync(r.dev));
  ASSERT_TRUE(g_gate.wait_entered(1));
  std::thread opener([] {  // the next lt_sync waits for the held step: open it meanwhile
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g_gate.release();
  });
  for (int step = 0; step < 200; ++step) {
    lt_tensor* t = mul(a, k);
    lt_tensor* next = add(t, one);
    lt_tensor_free(t);
    lt_tensor_free(a);  // the previous step's output, possibly still queued
    a = next;
    for (float& v : want) v = v * 0.75f + 1;
    LT_OK(lt_sync(r.dev));
  }
  opener.join();
  EXPECT_EQ(to_host(a), want);
  EXPECT_EQ(to_host(held), (std::vector<float>{0.5f, -1, 2, 4}));
  EXPECT_GE(metric(r.rt, "async.queued"), 201);
  free_all({a, k, one, held});
}

TEST(Async, AnExecuteErrorSurfacesAtTheNextReadNamingTheOp) {
  AsyncRuntime r;
  ASSERT_NE(r.dev, nullptr);
  lt_tensor* x = from_host(r.dev, {1, 2}, {2});
  lt_tensor* y = apply1(r.dev, "test_async.fail", x);
  lt_tensor* z = add(y, x);
  LT_OK(lt_sync(r.dev));         // queued: the failure is not known yet
  for (int i = 0; i < 2; ++i) {  // readable as the error, every time
    std::vector<float> out(2);
    Err e(lt_tensor_to_host(z, out.data(), 8));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.code(), LT_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(e.msg().find("test_async.fail: injected failure"), std::string::npos) << e.msg();
    EXPECT_NE(e.msg().find("queued graph"), std::string::npos) << e.msg();
  }
  EXPECT_FALSE(lt_tensor_is_materialized(y));
  LT_OK(lt_sync(r.dev));  // a read reported it already
  // A later graph reading the failed outputs fails too, saying why.
  lt_tensor* w = mul(z, x);
  std::vector<float> out(2);
  Err e(lt_tensor_to_host(w, out.data(), 8));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.msg().find("comes from a graph that failed"), std::string::npos) << e.msg();
  EXPECT_NE(e.msg().find("test_async.fail: injected failure"), std::string::npos) << e.msg();
  // Graphs that do not touch them still run.
  lt_tensor* v = add(x, x);
  EXPECT_EQ(to_host(v), (std::vector<float>{2, 4}));
  free_all({x, y, z, w, v});
}

TEST(Async, AnExecuteErrorSurfacesAtTheNextSync) {
  AsyncRuntime r;
  ASSERT_NE(r.dev, nullptr);
  lt_tensor* x = from_host(r.dev, {1, 2}, {2});
  lt_tensor* y = apply1(r.dev, "test_async.fail", x);
  LT_OK(lt_sync(r.dev));
  lt_tensor* z = add(x, x);
  {
    Err e(lt_sync(r.dev));  // the step boundary after the failure reports it, once
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.msg().find("test_async.fail: injected failure"), std::string::npos) << e.msg();
    EXPECT_NE(e.msg().find("partial:0"), std::string::npos) << e.msg();
  }
  LT_OK(lt_sync(r.dev));  // reported once; z, queued by the failing lt_sync, does not read y
  EXPECT_EQ(to_host(z), (std::vector<float>{2, 4}));
  free_all({x, y, z});
}

TEST(Async, AFailureCausedByAReportedOneIsNotReportedAgainBySync) {
  AsyncRuntime r;
  ASSERT_NE(r.dev, nullptr);
  lt_tensor* x = from_host(r.dev, {1, 2}, {2});
  lt_tensor* y = apply1(r.dev, "test_async.fail", x);
  LT_OK(lt_sync(r.dev));
  lt_tensor* z = add(y, x);  // the next step reads the failed output
  Err first(lt_sync(r.dev));
  EXPECT_NE(first.msg().find("test_async.fail: injected failure"), std::string::npos)
      << first.msg();
  LT_OK(lt_sync(r.dev));  // z's graph failed because of y's: not a new failure to report
  std::vector<float> out(2);
  Err e(lt_tensor_to_host(z, out.data(), 8));  // but z reads as that error
  EXPECT_NE(e.msg().find("comes from a graph that failed"), std::string::npos) << e.msg();
  free_all({x, y, z});
}

TEST(Async, InputsReleasedWhileQueuedAreNotFreedOrReused) {
  AsyncRuntime r;
  ASSERT_NE(r.dev, nullptr);
  const size_t n = 1 << 14;
  std::vector<float> xv(n);
  for (size_t i = 0; i < n; ++i) xv[i] = static_cast<float>(i);
  const double nodes_before = metric(r.rt, "nodes_alive");
  g_gate.entered = 0;
  g_gate.close();
  lt_tensor* x = from_host(r.dev, xv, {static_cast<int64_t>(n)});
  lt_tensor* y = apply1(r.dev, "test_async.gate", x);
  lt_tensor* z = add(y, x);
  LT_OK(lt_sync(r.dev));
  ASSERT_TRUE(g_gate.wait_entered(1));
  lt_tensor_free(x);  // the queued graph still reads x (after the gate) and writes y
  lt_tensor_free(y);
  // Buffers of the same size class: the allocator must not hand out x's.
  std::vector<lt_tensor*> others;
  for (int i = 0; i < 4; ++i)
    others.push_back(from_host(r.dev, std::vector<float>(n, -7.0f), {static_cast<int64_t>(n)}));
  g_gate.release();
  std::vector<float> got = to_host(z);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 2 * xv[i]) << i;
  for (lt_tensor* t : others) lt_tensor_free(t);
  lt_tensor_free(z);
  EXPECT_EQ(metric(r.rt, "nodes_alive"), nodes_before);  // the job let go of everything
}

TEST(Async, RuntimeDestroyedWithWorkQueuedDrainsIt) {
  register_ops();
  AsyncRuntime r;
  ASSERT_NE(r.dev, nullptr);
  g_gate.entered = 0;
  g_gate.close();
  lt_tensor* x = from_host(r.dev, {1, 2, 3}, {3});
  lt_tensor* y = apply1(r.dev, "test_async.gate", x);
  lt_tensor* z = add(y, x);
  LT_OK(lt_sync(r.dev));
  ASSERT_TRUE(g_gate.wait_entered(1));
  free_all({x, y, z});  // the queued job alone holds the graph now
  std::thread opener([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g_gate.release();
  });
  lt_runtime_destroy(r.rt);  // the last reference: waits for the queued step, then tears down
  r.rt = nullptr;
  opener.join();
}

TEST(Async, ThreadsTraceAndSyncOneDeviceAtOnce) {
  AsyncRuntime r;
  ASSERT_NE(r.dev, nullptr);
  std::atomic<int> bad{0};
  auto worker = [&](int id) {
    for (int it = 0; it < 100; ++it) {
      float base = static_cast<float>(id * 1000 + it);
      std::vector<float> xv = {base, base + 1, base + 2};
      lt_tensor* x = nullptr;
      int64_t shape = 3;
      if (lt_tensor_from_host(r.dev, LT_DTYPE_F32, &shape, 1, xv.data(), 12, &x))
        return (void)bad++;
      lt_tensor *y = nullptr, *z = nullptr;
      if (lt_add(x, x, &y) || lt_mul(y, x, &z)) return (void)bad++;
      if (it % 2 == 0 && lt_sync(r.dev)) return (void)bad++;
      if (it % 3 == 0) lt_tensor_free(x), x = nullptr;  // released while maybe queued
      std::vector<float> out(3);
      if (lt_tensor_to_host(z, out.data(), 12)) return (void)bad++;
      for (int k = 0; k < 3; ++k)
        if (out[k] != 2 * xv[k] * xv[k]) bad++;
      free_all({x, y, z});
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) ts.emplace_back(worker, i);
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// Sets an environment variable for one scope, restoring what was there.
struct ScopedEnv {
  std::string name, old;
  bool had = false;
  ScopedEnv(const char* n, const char* v) : name(n) {
    if (const char* o = std::getenv(n)) had = true, old = o;
    if (v)
      ::setenv(n, v, 1);
    else
      ::unsetenv(n);
  }
  ~ScopedEnv() {
    if (had)
      ::setenv(name.c_str(), old.c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

TEST(Async, ConfigKeyAndEnvironment) {
  register_ops();
  {
    ScopedEnv env("LT_ASYNC_EXECUTION", "maybe");
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    std::string path = plugin_dir("partial");
    o.plugin_path = path.c_str();
    lt_runtime* rt = nullptr;
    Err e(lt_runtime_create(&o, &rt));
    EXPECT_EQ(e.code(), LT_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(e.msg().find("LT_ASYNC_EXECUTION='maybe'"), std::string::npos) << e.msg();
  }
  {
    std::string config = (std::filesystem::temp_directory_path() /
                          ("lt_async_bad_" + std::to_string(::getpid()) + ".toml"))
                             .string();
    std::ofstream(config) << "async_execution = \"yes\"\n";
    lt_runtime_options o{};
    o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
    o.config_path = config.c_str();
    lt_runtime* rt = nullptr;
    Err e(lt_runtime_create(&o, &rt));
    EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR);
    EXPECT_NE(e.msg().find("async_execution must be true or false"), std::string::npos) << e.msg();
    std::filesystem::remove(config);
  }
  {
    ScopedEnv env("LT_ASYNC_EXECUTION", "1");  // the environment wins over the file
    AsyncRuntime r(false);
    ASSERT_NE(r.dev, nullptr);
    lt_tensor* x = from_host(r.dev, {1, 2}, {2});
    lt_tensor* y = add(x, x);
    LT_OK(lt_sync(r.dev));
    EXPECT_EQ(to_host(y), (std::vector<float>{2, 4}));
    EXPECT_EQ(metric(r.rt, "async.queued"), 1);
    free_all({x, y});
  }
}

TEST(Async, OffMeansSynchronous) {
  ScopedEnv env("LT_ASYNC_EXECUTION", nullptr);
  AsyncRuntime r(false);
  ASSERT_NE(r.dev, nullptr);
  lt_tensor* x = from_host(r.dev, {1, 2}, {2});
  lt_tensor* y = apply1(r.dev, "test_async.fail", x);
  Err e(lt_sync(r.dev));  // without the queue the step's own lt_sync fails
  EXPECT_NE(e.msg().find("test_async.fail: injected failure"), std::string::npos) << e.msg();
  EXPECT_EQ(metric(r.rt, "async.queued"), -1);  // never created
  free_all({x, y});
}

// Issue #29: a custom kernel that reads a metric ran on the worker, and the metric read waited
// for the worker's queue to drain: a deadlock. Metrics reads from a kernel answer at once; a
// kernel that calls lt_sync or reads a pending tensor gets an error, never a wait (on the
// worker with async_execution, and under the device's lock without it).
TEST(Async, KernelsThatCallTheRuntimeNeverWaitOnTheirOwnQueue) {
  for (bool async : {true, false}) {
    SCOPED_TRACE(async ? "async" : "synchronous");
    AsyncRuntime r(async);
    ASSERT_NE(r.dev, nullptr);
    g_re.rt = r.rt;
    g_re.dev = r.dev;
    g_re.calls = 0;
    ::alarm(60);  // the bug was a deadlock: end the test process rather than hang
    lt_tensor* x = from_host(r.dev, {1, 2, 3}, {3});
    lt_tensor* y = apply1(r.dev, "test_async.metric", x);
    LT_OK(lt_sync(r.dev));
    EXPECT_EQ(to_host(y), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(g_re.calls.load(), 1);
    EXPECT_EQ(g_re.metric_code, LT_STATUS_OK);
    EXPECT_GE(g_re.metric, 1.0);  // this graph was compiled before it ran

    g_re.pending = add(x, x);  // never synced: reading it would run a graph
    lt_tensor* z = apply1(r.dev, "test_async.sync", x);
    LT_OK(lt_sync(r.dev));
    EXPECT_EQ(to_host(z), (std::vector<float>{1, 2, 3}));
    ::alarm(0);
    EXPECT_EQ(g_re.calls.load(), 2);
    EXPECT_EQ(g_re.sync_code, LT_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(g_re.sync_msg.find("from inside a custom kernel"), std::string::npos)
        << g_re.sync_msg;
    EXPECT_EQ(g_re.read_code, LT_STATUS_INVALID_ARGUMENT);
    // Outside the kernel the same calls work.
    EXPECT_EQ(to_host(g_re.pending), (std::vector<float>{2, 4, 6}));
    free_all({x, y, z, g_re.pending});
  }
}
