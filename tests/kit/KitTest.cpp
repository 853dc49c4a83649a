// KitTest.cpp — lazytensor/plugin_kit.hpp seen from the core's side: a small backend built with
// the kit is driven only through the C table it exports, as the plugin loader would drive it.
// Covers the table's fields, argument checks, graph validation before the backend's code runs,
// options, error plumbing (codes, the plugin's name prefix, foreign exceptions), the host
// buffer pool and the persistent cache's counters.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "lazytensor/lower/graph.hpp"
#include "lazytensor/plugin_kit.hpp"

namespace {

using lt::lower::OwnedGraph;

// What the backend saw, so tests can tell whether the kit stopped a call before it.
struct Seen {
  int supports = 0;
  int compile = 0;
} g_seen;

// Negates f32 tensors. Other unary ops make compile() fail in one way each, to exercise the
// kit's conversion of exceptions into plugin errors.
class NegExe final : public lt::kit::Executable {
 public:
  explicit NegExe(size_t n) : n_(n) {}
  void run(std::span<lt::kit::Buffer* const> in, std::span<lt::kit::Buffer* const> out) override {
    auto* x = static_cast<const float*>(in[0]->data);
    auto* y = static_cast<float*>(out[0]->data);
    for (size_t i = 0; i < n_; ++i) y[i] = -x[i];
  }
  void stats(const lt::kit::Stats& emit) const override { emit("elements", double(n_)); }

 private:
  size_t n_;
};

class TestBackend final : public lt::kit::Backend {
 public:
  explicit TestBackend(lt::kit::Context& ctx)
      : Backend(ctx),
        mode_(ctx.options.take_choice("mode", {"fast", "slow"})),
        devices_(ctx.options.take_int("devices", 1, 1, 4)) {}
  std::vector<lt::kit::Device> devices() const override {
    return std::vector<lt::kit::Device>(static_cast<size_t>(devices_));
  }
  bool supports(const lt_graph& g, size_t node, size_t) override {
    ++g_seen.supports;
    return std::string(g.nodes[node].op) == "neg";
  }
  std::unique_ptr<lt::kit::Executable> compile(const lt_graph& g, size_t) override {
    ++g_seen.compile;
    std::string op = g.nodes[g.outputs[0]].op;
    if (op == "sqrt") throw std::runtime_error("boom");
    if (op == "exp") throw std::bad_alloc();
    if (op == "log") throw 42;
    if (op == "abs") lt::kit::fail(LT_STATUS_UNSUPPORTED, "abs is not here");
    if (op == "tanh") return nullptr;
    return std::make_unique<NegExe>(
        static_cast<size_t>(lt::lower::DescRef(g.nodes[g.outputs[0]]).numel()));
  }

 private:
  std::string mode_;
  int64_t devices_;
};

}  // namespace

LT_KIT_PLUGIN(TestBackend, "kit_test", "0.7")

namespace {

const lt_plugin_api& api() {
  return *lt_plugin_get_api();
}

// The error's code and message; destroys it.
struct Err {
  lt_status_code code = LT_STATUS_OK;
  std::string message;
};
Err take(lt_plugin_error* e) {
  Err r;
  if (!e) return r;
  r.code = api().error_code(e);
  r.message = api().error_message(e);
  api().error_destroy(e);
  return r;
}

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// A context made with `options`; destroyed with the fixture.
class Kit : public ::testing::Test {
 protected:
  void TearDown() override {
    if (ctx_) api().destroy(ctx_);
  }
  Err create(std::vector<lt_plugin_option> options = {}) {
    lt_plugin_create_args a{};
    a.struct_size = sizeof a;
    a.core_abi_major = LT_PLUGIN_ABI_MAJOR;
    a.options = options.data();
    a.num_options = options.size();
    Err e = take(api().create(&a));
    ctx_ = a.context;
    return e;
  }
  lt_plugin_buffer* alloc(size_t nbytes, size_t device = 0) {
    lt_plugin_buffer_args a{};
    a.struct_size = sizeof a;
    a.context = ctx_;
    a.device = device;
    a.nbytes = nbytes;
    Err e = take(api().buffer_alloc(&a));
    EXPECT_EQ(e.code, LT_STATUS_OK) << e.message;
    return a.buffer;
  }
  Err transfer(lt_plugin_buffer* b, size_t offset, size_t n, const void* src, void* dst) {
    lt_plugin_buffer_args a{};
    a.struct_size = sizeof a;
    a.context = ctx_;
    a.buffer = b;
    a.offset = offset;
    a.nbytes = n;
    a.src = src;
    a.dst = dst;
    return take(src || !dst ? api().buffer_upload(&a) : api().buffer_download(&a));
  }
  std::map<std::string, double> stats(lt_plugin_executable* exe = nullptr) {
    std::map<std::string, double> out;
    lt_plugin_stats_args a{};
    a.struct_size = sizeof a;
    a.context = ctx_;
    a.executable = exe;
    a.user = &out;
    a.emit = [](void* user, const char* name, double v) {
      (*static_cast<std::map<std::string, double>*>(user))[name] = v;
    };
    Err e = take(api().stats(&a));
    EXPECT_EQ(e.code, LT_STATUS_OK) << e.message;
    return out;
  }
  Err compile(OwnedGraph& g, lt_plugin_executable** exe) {
    lt_plugin_compile_args a{};
    a.struct_size = sizeof a;
    a.context = ctx_;
    a.graph = &g.view();
    Err e = take(api().compile(&a));
    *exe = a.executable;
    return e;
  }
  lt_plugin_context* ctx_ = nullptr;
};

// input f32 [n] -> op.
OwnedGraph unary(const char* op, int64_t n = 4) {
  OwnedGraph g;
  g.add("input", LT_DTYPE_F32, {n}, {});
  g.add(op, LT_DTYPE_F32, {n}, {0});
  g.set_inputs({0});
  g.set_outputs({1});
  return g;
}

TEST_F(Kit, TableHasEveryEntryTheNameAndTheAbi) {
  const lt_plugin_api& t = api();
  EXPECT_EQ(t.struct_size, LT_PLUGIN_API_STRUCT_SIZE);
  EXPECT_EQ(t.abi_major, LT_PLUGIN_ABI_MAJOR);
  EXPECT_EQ(t.abi_minor, LT_PLUGIN_ABI_MINOR);
  EXPECT_STREQ(t.name, "kit_test");
  EXPECT_STREQ(t.version, "0.7");
  const void* fns[] = {reinterpret_cast<const void*>(t.error_message),
                       reinterpret_cast<const void*>(t.error_code),
                       reinterpret_cast<const void*>(t.error_destroy),
                       reinterpret_cast<const void*>(t.create),
                       reinterpret_cast<const void*>(t.destroy),
                       reinterpret_cast<const void*>(t.device_count),
                       reinterpret_cast<const void*>(t.device_info),
                       reinterpret_cast<const void*>(t.buffer_alloc),
                       reinterpret_cast<const void*>(t.buffer_free),
                       reinterpret_cast<const void*>(t.buffer_upload),
                       reinterpret_cast<const void*>(t.buffer_download),
                       reinterpret_cast<const void*>(t.buffer_host_ptr),
                       reinterpret_cast<const void*>(t.supports),
                       reinterpret_cast<const void*>(t.compile),
                       reinterpret_cast<const void*>(t.execute),
                       reinterpret_cast<const void*>(t.executable_destroy),
                       reinterpret_cast<const void*>(t.stats)};
  for (const void* f : fns) EXPECT_NE(f, nullptr);
  // NULL errors are success; destroying one is a no-op.
  EXPECT_EQ(t.error_code(nullptr), LT_STATUS_OK);
  EXPECT_STREQ(t.error_message(nullptr), "");
  t.error_destroy(nullptr);
}

TEST_F(Kit, CreateChecksItsArgumentsAndOptions) {
  EXPECT_EQ(take(api().create(nullptr)).code, LT_STATUS_INVALID_ARGUMENT);

  lt_plugin_create_args small{};
  small.struct_size = 4;
  Err e = take(api().create(&small));
  EXPECT_EQ(e.code, LT_STATUS_ABI_MISMATCH);
  EXPECT_TRUE(contains(e.message, "kit_test: create: struct_size 4 is smaller than")) << e.message;

  lt_plugin_create_args major{};
  major.struct_size = sizeof major;
  major.core_abi_major = LT_PLUGIN_ABI_MAJOR + 1;
  e = take(api().create(&major));
  EXPECT_EQ(e.code, LT_STATUS_ABI_MISMATCH);
  EXPECT_TRUE(contains(e.message, "core ABI major")) << e.message;
  EXPECT_EQ(major.context, nullptr);

  e = create({{"mode", "slow"}, {"colour", "blue"}});
  EXPECT_EQ(e.code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.message, "unknown option 'colour'")) << e.message;
  EXPECT_TRUE(contains(e.message, "buffer_cache_mb, mode, devices")) << e.message;
  EXPECT_EQ(ctx_, nullptr);

  e = create({{"mode", "medium"}});
  EXPECT_TRUE(contains(e.message, "option mode = 'medium' (expected fast, slow)")) << e.message;
  e = create({{"devices", "9"}});
  EXPECT_TRUE(contains(e.message, "option devices = '9' is not an integer in [1, 4]")) << e.message;
  e = create({{"devices", "2x"}});
  EXPECT_TRUE(contains(e.message, "is not an integer")) << e.message;

  lt_plugin_option null_value{"mode", nullptr};
  e = create({null_value});
  EXPECT_TRUE(contains(e.message, "NULL key or value")) << e.message;

  ASSERT_EQ(create({{"mode", "slow"}, {"devices", "3"}}).code, LT_STATUS_OK);
  size_t n = 0;
  ASSERT_EQ(take(api().device_count(ctx_, &n)).code, LT_STATUS_OK);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(take(api().device_count(ctx_, nullptr)).code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(take(api().device_count(nullptr, &n)).code, LT_STATUS_INVALID_ARGUMENT);
}

TEST_F(Kit, DeviceInfoComesFromTheBackendAndIndicesAreChecked) {
  ASSERT_EQ(create().code, LT_STATUS_OK);
  lt_plugin_device_info_args a{};
  a.struct_size = sizeof a;
  a.context = ctx_;
  ASSERT_EQ(take(api().device_info(&a)).code, LT_STATUS_OK);
  EXPECT_STREQ(a.name, "cpu");
  EXPECT_STREQ(a.kind, "cpu");
  EXPECT_EQ(a.host_addressable, 1);
  a.device = 1;
  Err e = take(api().device_info(&a));
  EXPECT_EQ(e.code, LT_STATUS_NOT_FOUND);
  EXPECT_TRUE(contains(e.message, "device_info: device 1 does not exist (1 devices)")) << e.message;
}

TEST_F(Kit, BufferCallsCheckRangesAndPointers) {
  ASSERT_EQ(create().code, LT_STATUS_OK);
  lt_plugin_buffer* b = alloc(16);
  ASSERT_NE(b, nullptr);
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  EXPECT_EQ(transfer(b, 0, 16, in, nullptr).code, LT_STATUS_OK);
  EXPECT_EQ(transfer(b, 4, 8, nullptr, out).code, LT_STATUS_OK);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 3.0f);

  Err e = transfer(b, 8, 12, in, nullptr);
  EXPECT_EQ(e.code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.message, "buffer_upload: byte range [8, 20) exceeds the buffer's 16"))
      << e.message;
  // An offset so large that offset + n wraps around is still refused.
  e = transfer(b, SIZE_MAX, 2, nullptr, out);
  EXPECT_TRUE(contains(e.message, "buffer_download: byte range")) << e.message;
  e = transfer(b, 0, 4, nullptr, nullptr);
  EXPECT_TRUE(contains(e.message, "buffer_upload: src is NULL")) << e.message;
  EXPECT_EQ(transfer(b, 0, 0, nullptr, nullptr).code, LT_STATUS_OK);  // empty ranges need none
  e = transfer(nullptr, 0, 4, in, nullptr);
  EXPECT_TRUE(contains(e.message, "buffer_upload: buffer is NULL")) << e.message;

  lt_plugin_buffer_args h{};
  h.struct_size = sizeof h;
  h.context = ctx_;
  h.buffer = b;
  ASSERT_EQ(take(api().buffer_host_ptr(&h)).code, LT_STATUS_OK);
  EXPECT_EQ(static_cast<float*>(h.host_ptr)[3], 4.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(h.host_ptr) % 64, 0u);

  lt_plugin_buffer_args other{};
  other.struct_size = sizeof other;
  other.context = ctx_;
  other.device = 5;
  other.nbytes = 4;
  EXPECT_EQ(take(api().buffer_alloc(&other)).code, LT_STATUS_NOT_FOUND);
  api().buffer_free(ctx_, b);
  api().buffer_free(ctx_, nullptr);
}

// buffer_wrap_host (ABI 1.1, DLPack import): aligned host memory is used in place and never
// freed or cached by the kit; misaligned memory is declined (no error), and the core copies.
TEST_F(Kit, WrapsAlignedHostMemoryInPlaceAndNeverFreesIt) {
  ASSERT_EQ(create().code, LT_STATUS_OK);
  alignas(64) static float memory[32] = {1, 2, 3, 4};
  lt_plugin_buffer_args w{};
  w.struct_size = sizeof w;
  w.context = ctx_;
  w.nbytes = 16;
  w.host_ptr = memory;
  ASSERT_EQ(take(api().buffer_wrap_host(&w)).code, LT_STATUS_OK);
  ASSERT_NE(w.buffer, nullptr);
  EXPECT_EQ(w.buffer->data, memory);
  EXPECT_TRUE(w.buffer->borrowed);
  float out[4] = {};
  EXPECT_EQ(transfer(w.buffer, 0, 16, nullptr, out).code, LT_STATUS_OK);
  EXPECT_EQ(out[3], 4.0f);
  api().buffer_free(ctx_, w.buffer);  // frees the handle only (a free() here would crash)
  EXPECT_EQ(stats()["buffer_cache_bytes"], 0.0) << "borrowed memory never enters the cache";
  EXPECT_EQ(memory[0], 1.0f);

  lt_plugin_buffer_args m{};
  m.struct_size = sizeof m;
  m.context = ctx_;
  m.nbytes = 8;
  m.host_ptr = memory + 1;  // 4 bytes past a 64-byte boundary
  ASSERT_EQ(take(api().buffer_wrap_host(&m)).code, LT_STATUS_OK);
  EXPECT_EQ(m.buffer, nullptr);
  m.device = 3;
  EXPECT_EQ(take(api().buffer_wrap_host(&m)).code, LT_STATUS_NOT_FOUND);
}

TEST_F(Kit, FreedHostBuffersAreReusedBySizeClass) {
  ASSERT_EQ(create().code, LT_STATUS_OK);
  lt_plugin_buffer* a = alloc(1000);
  void* first = a->data;
  api().buffer_free(ctx_, a);
  lt_plugin_buffer* b = alloc(1020);  // same 64-byte class
  EXPECT_EQ(b->data, first);
  auto s = stats();
  EXPECT_EQ(s["buffer_cache_hits"], 1.0);
  EXPECT_EQ(s["buffer_cache_misses"], 1.0);
  EXPECT_EQ(s["live_buffers"], 1.0);
  api().buffer_free(ctx_, b);
  EXPECT_EQ(stats()["buffer_cache_bytes"], 1024.0);

  // Classes waste at most a quarter above 4 KiB, and are 64-byte multiples below it.
  for (size_t n : {size_t{1}, size_t{63}, size_t{65}, size_t{4096}, size_t{4097}, size_t{5000},
                   size_t{1} << 20, (size_t{1} << 20) + 1, size_t{123456789}}) {
    size_t c = lt::kit::HostPool::size_class(n);
    EXPECT_GE(c, n);
    if (n <= 4096) EXPECT_EQ(c % 64, 0u) << n;
    if (n > 4096) EXPECT_LE(c, n + n / 4 + 64) << n;
  }
}

TEST_F(Kit, ZeroCacheLimitFreesEveryBuffer) {
  ASSERT_EQ(create({{"buffer_cache_mb", "0"}}).code, LT_STATUS_OK);
  api().buffer_free(ctx_, alloc(256));
  EXPECT_EQ(stats()["buffer_cache_bytes"], 0.0);
}

TEST_F(Kit, SupportsValidatesTheNodeBeforeAskingTheBackend) {
  ASSERT_EQ(create().code, LT_STATUS_OK);
  auto ask = [&](OwnedGraph& g, size_t node, Err* err = nullptr) {
    lt_plugin_supports_args a{};
    a.struct_size = sizeof a;
    a.context = ctx_;
    a.graph = &g.view();
    a.node = node;
    Err e = take(api().supports(&a));
    if (err) *err = e;
    return a.supported;
  };
  OwnedGraph ok = unary("neg");
  g_seen = {};
  EXPECT_EQ(ask(ok, 1), 1);
  EXPECT_EQ(ask(ok, 0), 1);  // inputs are everyone's, without asking
  EXPECT_EQ(g_seen.supports, 1);
  OwnedGraph other = unary("exp");
  EXPECT_EQ(ask(other, 1), 0);

  // neg declared as f32 [5] over an f32 [4] input: invalid, so "no" and the backend never sees it.
  OwnedGraph bad;
  bad.add("input", LT_DTYPE_F32, {4}, {});
  bad.add("neg", LT_DTYPE_F32, {5}, {0});
  bad.set_inputs({0});
  bad.set_outputs({1});
  g_seen = {};
  Err e;
  EXPECT_EQ(ask(bad, 1, &e), 0);
  EXPECT_EQ(e.code, LT_STATUS_OK) << e.message;
  EXPECT_EQ(g_seen.supports, 0);

  EXPECT_EQ(ask(ok, 7, &e), 0);
  EXPECT_EQ(e.code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.message, "supports: node 7 is out of range (2 nodes)")) << e.message;
}

TEST_F(Kit, CompileValidatesAndExecuteChecksBuffers) {
  ASSERT_EQ(create().code, LT_STATUS_OK);
  OwnedGraph bad;
  bad.add("input", LT_DTYPE_F32, {4}, {});
  bad.add("neg", LT_DTYPE_F32, {4}, {1});  // reads itself
  bad.set_inputs({0});
  bad.set_outputs({1});
  g_seen = {};
  lt_plugin_executable* exe = nullptr;
  Err e = compile(bad, &exe);
  EXPECT_EQ(e.code, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.message, "kit_test: node 1 (neg): operand 0 refers to node 1"))
      << e.message;
  EXPECT_EQ(exe, nullptr);
  EXPECT_EQ(g_seen.compile, 0);

  OwnedGraph g = unary("neg");
  ASSERT_EQ(compile(g, &exe).code, LT_STATUS_OK);
  ASSERT_NE(exe, nullptr);
  lt_plugin_buffer* in = alloc(16);
  lt_plugin_buffer* out = alloc(16);
  lt_plugin_buffer* small = alloc(8);
  float x[4] = {1, -2, 3, 0.5f}, y[4] = {};
  ASSERT_EQ(transfer(in, 0, 16, x, nullptr).code, LT_STATUS_OK);

  auto run = [&](std::vector<lt_plugin_buffer*> ins, std::vector<lt_plugin_buffer*> outs) {
    lt_plugin_execute_args a{};
    a.struct_size = sizeof a;
    a.context = ctx_;
    a.executable = exe;
    a.inputs = ins.data();
    a.num_inputs = ins.size();
    a.outputs = outs.data();
    a.num_outputs = outs.size();
    return take(api().execute(&a));
  };
  ASSERT_EQ(run({in}, {out}).code, LT_STATUS_OK);
  ASSERT_EQ(transfer(out, 0, 16, nullptr, y).code, LT_STATUS_OK);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(y[3], -0.5f);
  EXPECT_EQ(stats(exe)["elements"], 4.0);

  e = run({in, in}, {out});
  EXPECT_TRUE(contains(e.message, "execute: got 2 inputs, the executable has 1")) << e.message;
  e = run({in}, {small});
  EXPECT_TRUE(contains(e.message, "execute: output 0 has 8 bytes, needs 16")) << e.message;
  e = run({nullptr}, {out});
  EXPECT_TRUE(contains(e.message, "execute: input 0 is NULL")) << e.message;

  api().executable_destroy(ctx_, exe);
  for (auto* b : {in, out, small}) api().buffer_free(ctx_, b);
}

TEST_F(Kit, EveryFailureBecomesAnErrorWithThePluginsName) {
  ASSERT_EQ(create().code, LT_STATUS_OK);
  struct Case {
    const char* op;
    lt_status_code code;
    const char* message;
  } cases[] = {
      {"sqrt", LT_STATUS_INTERNAL, "kit_test: internal error: boom"},
      {"exp", LT_STATUS_OUT_OF_MEMORY, "kit_test: out of memory"},
      {"log", LT_STATUS_INTERNAL, "kit_test: internal error: unknown exception"},
      {"abs", LT_STATUS_UNSUPPORTED, "kit_test: abs is not here"},
      {"tanh", LT_STATUS_INTERNAL, "kit_test: compile returned no executable"},
  };
  for (const Case& c : cases) {
    OwnedGraph g = unary(c.op);
    lt_plugin_executable* exe = nullptr;
    Err e = compile(g, &exe);
    EXPECT_EQ(e.code, c.code) << c.op << ": " << e.message;
    EXPECT_EQ(e.message, c.message) << c.op;
    EXPECT_EQ(exe, nullptr) << c.op;
  }
}

TEST(KitDiskCache, StatsReportTheHitsAndMissesUnderTheSharedNames) {
  const std::string dir = ::testing::TempDir() + "kit_disk_cache_stats";
  std::filesystem::remove_all(dir);  // a fresh cache: its first load misses
  lt::lower::DiskCache cache(dir);
  const std::vector<char> data{'o', 'b', 'j'};
  EXPECT_FALSE(cache.load("k1").has_value());  // a miss
  cache.store("k1", data);
  EXPECT_TRUE(cache.load("k1").has_value());  // a hit
  EXPECT_TRUE(cache.load("k1").has_value());  // a hit
  std::map<std::string, double> got;
  auto sink = [](void* user, const char* name, double v) {
    (*static_cast<std::map<std::string, double>*>(user))[name] = v;
  };
  lt::kit::disk_cache_stats(cache, lt::kit::Stats(sink, &got));
  EXPECT_EQ(got, (std::map<std::string, double>{{"persistent_cache_hits", 2.0},
                                                {"persistent_cache_misses", 1.0}}));
}

// StepsExecutable: a host step program's executable passes the buffers' host pointers and the
// thread's span callback (set by the kit while the core profiles) to the program, and answers
// donation as the program does.
struct RecordingSteps {
  mutable std::vector<void*> inputs, outputs;
  mutable lt_plugin_span_fn span = nullptr;
  mutable void* span_user = nullptr;
  void run(void* const* in, void* const* out, lt_plugin_span_fn fn, void* user) const {
    inputs.assign(in, in + 2);
    outputs.assign(out, out + 1);
    span = fn;
    span_user = user;
  }
  bool can_donate(size_t input, size_t output) const { return input == 1 && output == 0; }
};
struct RecordingExe final : lt::kit::StepsExecutable<RecordingSteps> {
  RecordingSteps program;
  const RecordingSteps& steps() const override { return program; }
};

TEST(KitStepsExecutable, RunsTheProgramOnHostPointersWithTheSpanCallbackAndAsksItForDonation) {
  float a = 1, b = 2, c = 0;
  lt::kit::Buffer in0{}, in1{}, out0{};
  in0.data = &a;
  in1.data = &b;
  out0.data = &c;
  lt::kit::Buffer* in[] = {&in0, &in1};
  lt::kit::Buffer* out[] = {&out0};
  RecordingExe exe;
  auto fn = [](void*, const char*, int64_t, int64_t) {};
  int user = 0;
  lt::kit::current_spans() = {fn, &user};
  exe.run(in, out);
  lt::kit::current_spans() = {};
  EXPECT_EQ(exe.program.inputs, (std::vector<void*>{&a, &b}));
  EXPECT_EQ(exe.program.outputs, (std::vector<void*>{&c}));
  EXPECT_EQ(exe.program.span, static_cast<lt_plugin_span_fn>(fn));
  EXPECT_EQ(exe.program.span_user, &user);
  exe.run(in, out);  // not profiling: no callback
  EXPECT_EQ(exe.program.span, nullptr);
  EXPECT_TRUE(exe.accepts_donation(1, 0));
  EXPECT_FALSE(exe.accepts_donation(0, 0));
}

}  // namespace
