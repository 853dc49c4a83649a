// Tests of the gpu_opencl plugin driven through its C function table with hand-built
// graphs: buffers, fused elementwise/reduction/softmax kernels, matmul, conv/pool/layout
// ops against plain loops, kernel counts, the on-disk program cache and build errors.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <CL/cl.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "lazytensor/lt_plugin.h"
#include "lazytensor/lt_random.h"

namespace {

bool HaveOpenclPlatform() {
  cl_uint n = 0;
  return clGetPlatformIDs(0, nullptr, &n) == CL_SUCCESS && n > 0;
}

// Builds an lt_graph whose storage lives as long as the builder.
class GraphBuilder {
 public:
  int32_t Input(lt_dtype dtype, std::vector<int64_t> shape) {
    int32_t id = Add("input", dtype, std::move(shape), {}, {});
    inputs_.push_back(id);
    return id;
  }
  int32_t Op(const char* op, lt_dtype dtype, std::vector<int64_t> shape,
             std::vector<int32_t> operands, std::vector<lt_attr> attrs = {}) {
    return Add(op, dtype, std::move(shape), std::move(operands), std::move(attrs));
  }
  lt_attr Int(const char* name, int64_t v) {
    lt_attr a{};
    a.name = name;
    a.kind = LT_ATTR_INT;
    a.i = v;
    return a;
  }
  lt_attr Float(const char* name, double v) {
    lt_attr a{};
    a.name = name;
    a.kind = LT_ATTR_FLOAT;
    a.f = v;
    return a;
  }
  lt_attr Ints(const char* name, std::vector<int64_t> v) {
    ints_.push_back(std::move(v));
    lt_attr a{};
    a.name = name;
    a.kind = LT_ATTR_INTS;
    a.ints = ints_.back().data();
    a.ints_len = ints_.back().size();
    return a;
  }
  void Output(int32_t node) { outputs_.push_back(node); }
  const lt_graph* Graph() {
    graph_ = {};
    graph_.struct_size = LT_GRAPH_STRUCT_SIZE;
    graph_.num_nodes = nodes_.size();
    graph_.nodes = nodes_.data();
    graph_.num_inputs = inputs_.size();
    graph_.inputs = inputs_.data();
    graph_.num_outputs = outputs_.size();
    graph_.outputs = outputs_.data();
    return &graph_;
  }
  const lt_graph_node& Node(int32_t i) const { return nodes_[i]; }

 private:
  int32_t Add(const char* op, lt_dtype dtype, std::vector<int64_t> shape,
              std::vector<int32_t> operands, std::vector<lt_attr> attrs) {
    shapes_.push_back(std::move(shape));
    operands_.push_back(std::move(operands));
    attrs_.push_back(std::move(attrs));
    lt_graph_node n{};
    n.op = op;
    n.dtype = dtype;
    n.rank = shapes_.back().size();
    n.shape = shapes_.back().data();
    n.num_operands = operands_.back().size();
    n.operands = operands_.back().data();
    n.num_attrs = attrs_.back().size();
    n.attrs = attrs_.back().data();
    nodes_.push_back(n);
    return static_cast<int32_t>(nodes_.size() - 1);
  }
  std::deque<std::vector<int64_t>> shapes_, ints_;
  std::deque<std::vector<int32_t>> operands_;
  std::deque<std::vector<lt_attr>> attrs_;
  std::vector<lt_graph_node> nodes_;
  std::vector<int32_t> inputs_, outputs_;
  lt_graph graph_{};
};

size_t Bytes(const lt_graph_node& n) {
  size_t b = lt_dtype_size(n.dtype);
  for (size_t d = 0; d < n.rank; ++d) b *= static_cast<size_t>(n.shape[d]);
  return b;
}

class GpuOpencl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveOpenclPlatform()) GTEST_SKIP() << "no OpenCL platform (clGetPlatformIDs found none)";
    handle_ = dlopen(LT_GPU_OPENCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto get = reinterpret_cast<lt_plugin_get_api_fn>(dlsym(handle_, LT_PLUGIN_ENTRY_SYMBOL));
    ASSERT_NE(get, nullptr);
    api_ = get();
    ASSERT_EQ(api_->abi_major, LT_PLUGIN_ABI_MAJOR);
    cache_dir_ = std::filesystem::temp_directory_path() /
                 ("lt_ocl_test_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(cache_dir_);
    ctx_ = Create({{"cache_dir", cache_dir_.string()}});
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override {
    if (api_ && ctx_) api_->destroy(ctx_);
    if (!cache_dir_.empty()) std::filesystem::remove_all(cache_dir_);
    // The plugin stays loaded: PoCL keeps threads that must not lose their code.
  }

  // Creates a context; on failure returns nullptr and stores the message in last_error_.
  lt_plugin_context* Create(std::vector<std::pair<std::string, std::string>> options) {
    std::vector<lt_plugin_option> opts;
    for (auto& [k, v] : options) opts.push_back({k.c_str(), v.c_str()});
    lt_plugin_create_args args{};
    args.struct_size = LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.core_abi_major = LT_PLUGIN_ABI_MAJOR;
    args.core_abi_minor = LT_PLUGIN_ABI_MINOR;
    args.num_options = opts.size();
    args.options = opts.data();
    args.log = [](void* user, int level, const char* msg) {
      static_cast<GpuOpencl*>(user)->log_.push_back(std::to_string(level) + ": " + msg);
    };
    args.log_user = this;
    lt_plugin_error* e = api_->create(&args);
    if (e) {
      last_error_ = api_->error_message(e);
      last_code_ = api_->error_code(e);
      api_->error_destroy(e);
      return nullptr;
    }
    return args.context;
  }

  lt_plugin_buffer* Alloc(lt_plugin_context* ctx, size_t nbytes) {
    lt_plugin_buffer_args a{};
    a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
    a.context = ctx;
    a.nbytes = nbytes;
    lt_plugin_error* e = api_->buffer_alloc(&a);
    EXPECT_EQ(e, nullptr) << (e ? api_->error_message(e) : "");
    return a.buffer;
  }
  void Upload(lt_plugin_context* ctx, lt_plugin_buffer* b, const void* src, size_t n) {
    lt_plugin_buffer_args a{};
    a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
    a.context = ctx;
    a.buffer = b;
    a.src = src;
    a.nbytes = n;
    lt_plugin_error* e = api_->buffer_upload(&a);
    EXPECT_EQ(e, nullptr) << (e ? api_->error_message(e) : "");
  }
  void Download(lt_plugin_context* ctx, lt_plugin_buffer* b, void* dst, size_t n) {
    lt_plugin_buffer_args a{};
    a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
    a.context = ctx;
    a.buffer = b;
    a.dst = dst;
    a.nbytes = n;
    lt_plugin_error* e = api_->buffer_download(&a);
    EXPECT_EQ(e, nullptr) << (e ? api_->error_message(e) : "");
  }

  // Compiles; returns nullptr and sets last_error_ on failure.
  lt_plugin_executable* Compile(lt_plugin_context* ctx, const lt_graph* g) {
    lt_plugin_compile_args a{};
    a.struct_size = LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE;
    a.context = ctx;
    a.graph = g;
    lt_plugin_error* e = api_->compile(&a);
    if (e) {
      last_error_ = api_->error_message(e);
      last_code_ = api_->error_code(e);
      api_->error_destroy(e);
      return nullptr;
    }
    return a.executable;
  }

  std::map<std::string, double> Stats(lt_plugin_context* ctx, lt_plugin_executable* exe) {
    std::map<std::string, double> out;
    lt_plugin_stats_args a{};
    a.struct_size = LT_PLUGIN_STATS_ARGS_STRUCT_SIZE;
    a.context = ctx;
    a.executable = exe;
    a.emit = [](void* user, const char* name, double v) {
      (*static_cast<std::map<std::string, double>*>(user))[name] = v;
    };
    a.user = &out;
    lt_plugin_error* e = api_->stats(&a);
    EXPECT_EQ(e, nullptr);
    return out;
  }

  // Compiles and runs `gb` with host inputs (raw bytes per input); returns output bytes.
  std::vector<std::vector<char>> Run(GraphBuilder& gb, const std::vector<std::vector<char>>& in,
                                     double* kernels = nullptr) {
    const lt_graph* g = gb.Graph();
    lt_plugin_executable* exe = Compile(ctx_, g);
    EXPECT_NE(exe, nullptr) << last_error_;
    if (!exe) return {};
    if (kernels) *kernels = Stats(ctx_, exe)["kernels"];
    std::vector<lt_plugin_buffer*> ib, ob;
    for (size_t k = 0; k < g->num_inputs; ++k) {
      ib.push_back(Alloc(ctx_, in[k].size()));
      Upload(ctx_, ib.back(), in[k].data(), in[k].size());
    }
    for (size_t k = 0; k < g->num_outputs; ++k)
      ob.push_back(Alloc(ctx_, Bytes(gb.Node(g->outputs[k]))));
    lt_plugin_execute_args a{};
    a.struct_size = LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE;
    a.context = ctx_;
    a.executable = exe;
    a.num_inputs = ib.size();
    a.inputs = ib.data();
    a.num_outputs = ob.size();
    a.outputs = ob.data();
    lt_plugin_error* e = api_->execute(&a);
    EXPECT_EQ(e, nullptr) << (e ? api_->error_message(e) : "");
    std::vector<std::vector<char>> out;
    for (size_t k = 0; k < ob.size(); ++k) {
      out.emplace_back(Bytes(gb.Node(g->outputs[k])));
      Download(ctx_, ob[k], out.back().data(), out.back().size());
    }
    for (auto* b : ib) api_->buffer_free(ctx_, b);
    for (auto* b : ob) api_->buffer_free(ctx_, b);
    api_->executable_destroy(ctx_, exe);
    return out;
  }

  template <typename T>
  static std::vector<char> Raw(const std::vector<T>& v) {
    std::vector<char> r(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(r.data(), v.data(), r.size());
    return r;
  }
  template <typename T>
  static std::vector<T> As(const std::vector<char>& r) {
    std::vector<T> v(r.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), r.data(), r.size());
    return v;
  }
  static std::vector<float> Random(size_t n, unsigned seed, float lo = -2, float hi = 2) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
  }

  void* handle_ = nullptr;
  const lt_plugin_api* api_ = nullptr;
  lt_plugin_context* ctx_ = nullptr;
  std::filesystem::path cache_dir_;
  std::string last_error_;
  lt_status_code last_code_ = LT_STATUS_OK;
  std::vector<std::string> log_;
};

constexpr lt_dtype F32 = LT_DTYPE_F32;

TEST_F(GpuOpencl, DescribesItsDevice) {
  size_t count = 0;
  ASSERT_EQ(api_->device_count(ctx_, &count), nullptr);
  EXPECT_EQ(count, 1u);
  lt_plugin_device_info_args a{};
  a.struct_size = LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE;
  a.context = ctx_;
  ASSERT_EQ(api_->device_info(&a), nullptr);
  EXPECT_NE(std::string(a.name), "");
  EXPECT_TRUE(std::string(a.kind) == "cpu" || std::string(a.kind) == "gpu" ||
              std::string(a.kind) == "accelerator");
  EXPECT_NE(std::string(a.description).find("OpenCL platform"), std::string::npos);
  EXPECT_NE(std::string(a.description).find("driver"), std::string::npos);
  EXPECT_GT(a.memory_bytes, 0u);
  EXPECT_EQ(a.host_addressable, 0);
}

TEST_F(GpuOpencl, BufferRoundTripWithOffsetAndBoundsCheck) {
  std::vector<float> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f;
  lt_plugin_buffer* b = Alloc(ctx_, data.size() * 4);
  Upload(ctx_, b, data.data(), data.size() * 4);
  std::vector<float> back(data.size());
  Download(ctx_, b, back.data(), back.size() * 4);
  EXPECT_EQ(back, data);

  lt_plugin_buffer_args a{};
  a.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
  a.context = ctx_;
  a.buffer = b;
  float part[10];
  a.dst = part;
  a.offset = 400;
  a.nbytes = sizeof part;
  ASSERT_EQ(api_->buffer_download(&a), nullptr);
  EXPECT_EQ(part[0], data[100]);
  EXPECT_EQ(part[9], data[109]);

  a.offset = 3990;
  lt_plugin_error* e = api_->buffer_download(&a);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(api_->error_code(e), LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(api_->error_message(e)).find("exceeds"), std::string::npos);
  api_->error_destroy(e);

  lt_plugin_buffer* empty = Alloc(ctx_, 0);  // empty tensors still get a buffer
  ASSERT_NE(empty, nullptr);
  api_->buffer_free(ctx_, empty);
  api_->buffer_free(ctx_, b);

  lt_plugin_buffer_args h{};
  h.struct_size = LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE;
  h.context = ctx_;
  ASSERT_EQ(api_->buffer_host_ptr(&h), nullptr);
  EXPECT_EQ(h.host_ptr, nullptr);
}

TEST_F(GpuOpencl, EightOpElementwiseChainWithBroadcastIsOneKernel) {
  const int64_t R = 37, C = 129;
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {R, C});
  int32_t y = gb.Input(F32, {C});     // broadcast along rows
  int32_t s = gb.Input(F32, {R, 1});  // broadcast along columns
  int32_t v = gb.Op("add", F32, {R, C}, {x, y});
  v = gb.Op("mul", F32, {R, C}, {v, s});
  v = gb.Op("tanh", F32, {R, C}, {v});
  v = gb.Op("sub", F32, {R, C}, {v, x});
  v = gb.Op("exp", F32, {R, C}, {v});
  v = gb.Op("maximum", F32, {R, C}, {v, y});
  v = gb.Op("sigmoid", F32, {R, C}, {v});
  v = gb.Op("gelu", F32, {R, C}, {v});
  gb.Output(v);
  auto X = Random(R * C, 1), Y = Random(C, 2), S = Random(R, 3);
  double kernels = 0;
  auto out = Run(gb, {Raw(X), Raw(Y), Raw(S)}, &kernels);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(kernels, 1);
  auto got = As<float>(out[0]);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      float a = (X[i * C + j] + Y[j]) * S[i];
      a = std::tanh(a) - X[i * C + j];
      a = std::exp(a);
      a = std::max(a, Y[j]);
      a = 1 / (1 + std::exp(-a));
      a = 0.5f * a * (1 + std::tanh(0.7978845608f * (a + 0.044715f * a * a * a)));
      ASSERT_NEAR(got[i * C + j], a, 1e-5f) << i << "," << j;
    }
}

TEST_F(GpuOpencl, IntegerAndBoolElementwiseFollowTheOpContract) {
  GraphBuilder gb;
  int32_t a = gb.Input(LT_DTYPE_I32, {6});
  int32_t b = gb.Input(LT_DTYPE_I32, {6});
  int32_t d = gb.Op("div", LT_DTYPE_I32, {6}, {a, b});
  int32_t lt = gb.Op("lt", LT_DTYPE_BOOL, {6}, {a, b});
  int32_t w = gb.Op("where", LT_DTYPE_I32, {6}, {lt, a, b});
  int32_t f = gb.Op("cast", F32, {6}, {w});
  int32_t big = gb.Input(F32, {6});
  int32_t c = gb.Op("cast", LT_DTYPE_I32, {6}, {big});
  gb.Output(d);
  gb.Output(f);
  gb.Output(c);
  gb.Output(lt);
  std::vector<int32_t> A = {7, -7, 5, INT32_MIN, 3, 0};
  std::vector<int32_t> B = {2, 2, 0, -1, -4, 0};
  std::vector<float> BIG = {1e10f, -1e10f, NAN, 2.9f, -2.9f, 0};
  auto out = Run(gb, {Raw(A), Raw(B), Raw(BIG)});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(As<int32_t>(out[0]), (std::vector<int32_t>{3, -3, 0, INT32_MIN, 0, 0}));
  EXPECT_EQ(As<float>(out[1]),
            (std::vector<float>{2, -7, 0, static_cast<float>(INT32_MIN), -4, 0}));
  EXPECT_EQ(As<int32_t>(out[2]), (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, 2, -2, 0}));
  EXPECT_EQ(As<uint8_t>(out[3]), (std::vector<uint8_t>{0, 1, 0, 1, 0, 0}));
}

TEST_F(GpuOpencl, MatmulMatchesLoops) {
  const int64_t M = 37, K = 53, N = 29;
  GraphBuilder gb;
  int32_t a = gb.Input(F32, {M, K});
  int32_t b = gb.Input(F32, {K, N});
  int32_t bias = gb.Input(F32, {N});
  int32_t m = gb.Op("matmul", F32, {M, N}, {a, b});
  int32_t s = gb.Op("add", F32, {M, N}, {m, bias});
  int32_t r = gb.Op("relu", F32, {M, N}, {s});
  gb.Output(r);
  auto A = Random(M * K, 4), B = Random(K * N, 5), BI = Random(N, 6);
  double kernels = 0;
  auto out = Run(gb, {Raw(A), Raw(B), Raw(BI)}, &kernels);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(kernels, 1);  // bias + relu epilogue fused into the matmul kernel
  auto got = As<float>(out[0]);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
      ASSERT_NEAR(got[i * N + j], std::max(acc + BI[j], 0.0f), 1e-4f);
    }
}

TEST_F(GpuOpencl, BatchedMatmulMatchesLoops) {
  const int64_t Bt = 3, M = 17, K = 19, N = 5;
  GraphBuilder gb;
  int32_t a = gb.Input(F32, {Bt, M, K});
  int32_t b = gb.Input(F32, {Bt, K, N});
  gb.Output(gb.Op("matmul", F32, {Bt, M, N}, {a, b}));
  auto A = Random(Bt * M * K, 7), B = Random(Bt * K * N, 8);
  auto got = As<float>(Run(gb, {Raw(A), Raw(B)})[0]);
  for (int64_t t = 0; t < Bt; ++t)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += A[(t * M + i) * K + k] * B[(t * K + k) * N + j];
        ASSERT_NEAR(got[(t * M + i) * N + j], acc, 1e-4f);
      }
}

TEST_F(GpuOpencl, SoftmaxAndLogSoftmaxAreAtMostTwoKernels) {
  const int64_t R = 33, C = 70;
  for (const char* op : {"softmax", "log_softmax"}) {
    GraphBuilder gb;
    int32_t x = gb.Input(F32, {R, C});
    gb.Output(gb.Op(op, F32, {R, C}, {x}, {gb.Int("axis", 1)}));
    auto X = Random(R * C, 9, -5, 5);
    double kernels = 0;
    auto got = As<float>(Run(gb, {Raw(X)}, &kernels)[0]);
    EXPECT_LE(kernels, 2) << op;
    EXPECT_GE(kernels, 1) << op;
    bool log = std::string(op) == "log_softmax";
    for (int64_t i = 0; i < R; ++i) {
      float mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < C; ++j) mx = std::max(mx, X[i * C + j]);
      for (int64_t j = 0; j < C; ++j) sum += std::exp(X[i * C + j] - mx);
      for (int64_t j = 0; j < C; ++j) {
        float want = log ? X[i * C + j] - mx - std::log(sum) : std::exp(X[i * C + j] - mx) / sum;
        ASSERT_NEAR(got[i * C + j], want, 1e-5f) << op << " " << i << "," << j;
      }
    }
  }
}

// Rows whose length is a multiple of the vector width take the CPU vector row kernel.
TEST_F(GpuOpencl, VectorRowReductionsKeepNanAndInfSemantics) {
  const int64_t R = 16, C = 48;
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {R, C});
  gb.Output(gb.Op("softmax", F32, {R, C}, {x}, {gb.Int("axis", 1)}));
  gb.Output(gb.Op("max", F32, {R}, {x}, {gb.Ints("axes", {1}), gb.Int("keepdims", 0)}));
  gb.Output(gb.Op("min", F32, {R, 1}, {x}, {gb.Ints("axes", {1}), gb.Int("keepdims", 1)}));
  gb.Output(gb.Op("sum", F32, {R}, {x}, {gb.Ints("axes", {1}), gb.Int("keepdims", 0)}));
  auto X = Random(R * C, 21, -5, 5);
  X[3 * C + 17] = NAN;
  for (int64_t j = 0; j < C; ++j) X[5 * C + j] = -INFINITY;
  auto out = Run(gb, {Raw(X)});
  ASSERT_EQ(out.size(), 4u);
  auto sm = As<float>(out[0]), mx = As<float>(out[1]), mn = As<float>(out[2]),
       sum = As<float>(out[3]);
  EXPECT_TRUE(std::isnan(mx[3]));
  EXPECT_TRUE(std::isnan(mn[3]));
  EXPECT_TRUE(std::isnan(sm[3 * C]));
  EXPECT_EQ(mx[5], -INFINITY);
  for (int64_t i = 0; i < R; ++i) {
    if (i == 3 || i == 5) continue;
    float m = -INFINITY, lo = INFINITY, s = 0, es = 0;
    for (int64_t j = 0; j < C; ++j) {
      m = std::max(m, X[i * C + j]);
      lo = std::min(lo, X[i * C + j]);
      s += X[i * C + j];
    }
    for (int64_t j = 0; j < C; ++j) es += std::exp(X[i * C + j] - m);
    EXPECT_EQ(mx[i], m);
    EXPECT_EQ(mn[i], lo);
    EXPECT_NEAR(sum[i], s, 1e-4f);
    for (int64_t j = 0; j < C; ++j)
      ASSERT_NEAR(sm[i * C + j], std::exp(X[i * C + j] - m) / es, 1e-5f) << i << "," << j;
  }
}

// Column panels: full vector panels (aligned when N is a multiple of the vector width), a
// partial last panel and a partial row block, batched.
TEST_F(GpuOpencl, MatmulPanelsAndTailsMatchLoops) {
  for (int64_t N : {40, 32}) {
    const int64_t Bt = 2, M = 19, K = 33;
    GraphBuilder gb;
    int32_t a = gb.Input(F32, {Bt, M, K});
    int32_t b = gb.Input(F32, {Bt, K, N});
    gb.Output(gb.Op("matmul", F32, {Bt, M, N}, {a, b}));
    auto A = Random(Bt * M * K, 22), B = Random(Bt * K * N, 23);
    auto got = As<float>(Run(gb, {Raw(A), Raw(B)})[0]);
    for (int64_t t = 0; t < Bt; ++t)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          float acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += A[(t * M + i) * K + k] * B[(t * K + k) * N + j];
          ASSERT_NEAR(got[(t * M + i) * N + j], acc, 1e-4f)
              << N << ": " << t << "," << i << "," << j;
        }
  }
}

TEST_F(GpuOpencl, SoftmaxOverLeadingAxis) {
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {5, 3, 4});
  gb.Output(gb.Op("softmax", F32, {5, 3, 4}, {x}, {gb.Int("axis", 0)}));
  auto X = Random(60, 10);
  auto got = As<float>(Run(gb, {Raw(X)})[0]);
  for (int64_t j = 0; j < 12; ++j) {
    float mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < 5; ++i) mx = std::max(mx, X[i * 12 + j]);
    for (int64_t i = 0; i < 5; ++i) sum += std::exp(X[i * 12 + j] - mx);
    for (int64_t i = 0; i < 5; ++i)
      ASSERT_NEAR(got[i * 12 + j], std::exp(X[i * 12 + j] - mx) / sum, 1e-5f);
  }
}

TEST_F(GpuOpencl, LayerNormFusesIntoFewKernels) {
  const int64_t R = 24, C = 96;
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {R, C});
  int32_t gamma = gb.Input(F32, {C});
  int32_t m = gb.Op("mean", F32, {R, 1}, {x}, {gb.Ints("axes", {1}), gb.Int("keepdims", 1)});
  int32_t d = gb.Op("sub", F32, {R, C}, {x, m});
  int32_t sq = gb.Op("mul", F32, {R, C}, {d, d});
  int32_t var = gb.Op("mean", F32, {R, 1}, {sq}, {gb.Ints("axes", {1}), gb.Int("keepdims", 1)});
  int32_t eps = gb.Op("full", F32, {}, {}, {gb.Float("value", 1e-5)});
  int32_t ve = gb.Op("add", F32, {R, 1}, {var, eps});
  int32_t rs = gb.Op("rsqrt", F32, {R, 1}, {ve});
  int32_t y = gb.Op("mul", F32, {R, C}, {d, rs});
  int32_t z = gb.Op("mul", F32, {R, C}, {y, gamma});
  gb.Output(gb.Op("gelu", F32, {R, C}, {z}));
  auto X = Random(R * C, 11), G = Random(C, 12);
  double kernels = 0;
  auto got = As<float>(Run(gb, {Raw(X), Raw(G)}, &kernels)[0]);
  EXPECT_LE(kernels, 3);
  for (int64_t i = 0; i < R; ++i) {
    double mean = 0, v = 0;
    for (int64_t j = 0; j < C; ++j) mean += X[i * C + j];
    mean /= C;
    for (int64_t j = 0; j < C; ++j) v += (X[i * C + j] - mean) * (X[i * C + j] - mean);
    v /= C;
    for (int64_t j = 0; j < C; ++j) {
      double a = (X[i * C + j] - mean) / std::sqrt(v + 1e-5) * G[j];
      a = 0.5 * a * (1 + std::tanh(0.7978845608 * (a + 0.044715 * a * a * a)));
      ASSERT_NEAR(got[i * C + j], a, 1e-4) << i << "," << j;
    }
  }
}

TEST_F(GpuOpencl, ReductionsOverAnyAxesAndArgmax) {
  const int64_t A = 4, B = 300, Cc = 3;
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {A, B, Cc});
  int32_t s0 = gb.Op("sum", F32, {B}, {x}, {gb.Ints("axes", {0, 2}), gb.Int("keepdims", 0)});
  int32_t mx = gb.Op("max", F32, {A, 1, Cc}, {x}, {gb.Ints("axes", {1}), gb.Int("keepdims", 1)});
  int32_t mn = gb.Op("min", F32, {}, {x}, {gb.Ints("axes", {0, 1, 2}), gb.Int("keepdims", 0)});
  int32_t am =
      gb.Op("argmax", LT_DTYPE_I64, {A, Cc}, {x}, {gb.Int("axis", 1), gb.Int("keepdims", 0)});
  gb.Output(s0);
  gb.Output(mx);
  gb.Output(mn);
  gb.Output(am);
  auto X = Random(A * B * Cc, 13);
  X[(2 * B + 7) * Cc + 1] = 50;  // a known argmax
  auto out = Run(gb, {Raw(X)});
  ASSERT_EQ(out.size(), 4u);
  auto S = As<float>(out[0]), MX = As<float>(out[1]), MN = As<float>(out[2]);
  auto AM = As<int64_t>(out[3]);
  for (int64_t j = 0; j < B; ++j) {
    double acc = 0;
    for (int64_t i = 0; i < A; ++i)
      for (int64_t k = 0; k < Cc; ++k) acc += X[(i * B + j) * Cc + k];
    ASSERT_NEAR(S[j], acc, 1e-4);
  }
  float gmin = INFINITY;
  for (int64_t i = 0; i < A; ++i)
    for (int64_t k = 0; k < Cc; ++k) {
      float m = -INFINITY;
      int64_t arg = 0;
      for (int64_t j = 0; j < B; ++j) {
        float v = X[(i * B + j) * Cc + k];
        if (v > m) m = v, arg = j;
        gmin = std::min(gmin, v);
      }
      EXPECT_EQ(MX[i * Cc + k], m);
      EXPECT_EQ(AM[i * Cc + k], arg);
    }
  EXPECT_EQ(AM[2 * Cc + 1], 7);
  EXPECT_EQ(MN[0], gmin);
}

TEST_F(GpuOpencl, IntegerSumWrapsAndNanPropagatesInMax) {
  GraphBuilder gb;
  int32_t x = gb.Input(LT_DTYPE_I32, {3});
  gb.Output(gb.Op("sum", LT_DTYPE_I32, {}, {x}, {gb.Ints("axes", {0}), gb.Int("keepdims", 0)}));
  int32_t f = gb.Input(F32, {4});
  gb.Output(gb.Op("max", F32, {}, {f}, {gb.Ints("axes", {0}), gb.Int("keepdims", 0)}));
  std::vector<int32_t> X = {INT32_MAX, 1, 5};
  std::vector<float> F = {1, NAN, 3, 2};
  auto out = Run(gb, {Raw(X), Raw(F)});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(As<int32_t>(out[0])[0], INT32_MIN + 5);
  EXPECT_TRUE(std::isnan(As<float>(out[1])[0]));
}

TEST_F(GpuOpencl, LayoutOpsFuseAsIndexArithmetic) {
  // permute -> slice -> pad -> concat -> reshape -> gather, all against plain loops.
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {2, 3, 4});
  int32_t p = gb.Op("permute", F32, {4, 2, 3}, {x}, {gb.Ints("perm", {2, 0, 1})});
  int32_t s = gb.Op("slice", F32, {2, 2, 3}, {p},
                    {gb.Ints("starts", {3, 0, 0}), gb.Ints("steps", {-2, 1, 1})});
  int32_t pd =
      gb.Op("pad", F32, {2, 3, 5}, {s},
            {gb.Ints("before", {0, 1, 0}), gb.Ints("after", {0, 0, 2}), gb.Float("value", -1)});
  int32_t seven = gb.Op("full", F32, {2, 3, 4}, {}, {gb.Float("value", 7)});
  int32_t c = gb.Op("concat", F32, {2, 3, 9}, {pd, seven}, {gb.Int("axis", 2)});
  int32_t r = gb.Op("reshape", F32, {6, 9}, {c});
  int32_t idx = gb.Input(LT_DTYPE_I64, {4});
  int32_t g = gb.Op("gather", F32, {4, 9}, {r, idx}, {gb.Int("axis", 0)});
  gb.Output(g);
  std::vector<float> X(24);
  for (int i = 0; i < 24; ++i) X[i] = static_cast<float>(i);
  std::vector<int64_t> I = {5, 0, -3, 99};  // clamped to [0, 5]
  auto got = As<float>(Run(gb, {Raw(X), Raw(I)})[0]);
  // Reference.
  auto P = [&](int64_t a, int64_t b, int64_t c2) { return X[(b * 3 + c2) * 4 + a]; };
  auto S = [&](int64_t a, int64_t b, int64_t c2) { return P(3 - 2 * a, b, c2); };
  auto PD = [&](int64_t a, int64_t b, int64_t c2) {
    if (b < 1 || c2 >= 3) return -1.0f;
    return S(a, b - 1, c2);
  };
  auto C = [&](int64_t a, int64_t b, int64_t c2) { return c2 < 5 ? PD(a, b, c2) : 7.0f; };
  auto R = [&](int64_t i, int64_t j) {
    int64_t flat = i * 9 + j;
    return C(flat / 27, (flat / 9) % 3, flat % 9);
  };
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t j = 0; j < 9; ++j) {
      int64_t row = std::clamp<int64_t>(I[k], 0, 5);
      ASSERT_EQ(got[k * 9 + j], R(row, j)) << k << "," << j;
    }
}

TEST_F(GpuOpencl, Conv2dPoolsAndScatterAddMatchLoops) {
  const int64_t N = 2, C = 4, H = 7, W = 6, O = 6, G = 2, KH = 3, KW = 2;
  const int64_t OH = (H + 2 * 1 - 2 * (KH - 1) - 1) / 1 + 1, OW = (W + 0 - (KW - 1) - 1) / 2 + 1;
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {N, C, H, W});
  int32_t w = gb.Input(F32, {O, C / G, KH, KW});
  int32_t b = gb.Input(F32, {O});
  int32_t cv = gb.Op("conv2d", F32, {N, O, OH, OW}, {x, w, b},
                     {gb.Ints("stride", {1, 2}), gb.Ints("padding", {1, 0}),
                      gb.Ints("dilation", {2, 1}), gb.Int("groups", G)});
  int32_t mp =
      gb.Op("max_pool2d", F32, {N, C, 4, 3}, {x},
            {gb.Ints("kernel", {2, 2}), gb.Ints("stride", {2, 2}), gb.Ints("padding", {1, 0})});
  int32_t ap =
      gb.Op("avg_pool2d", F32, {N, C, 3, 3}, {x},
            {gb.Ints("kernel", {3, 2}), gb.Ints("stride", {2, 2}), gb.Ints("padding", {0, 0})});
  int32_t base = gb.Input(F32, {5, 3});
  int32_t ind = gb.Input(LT_DTYPE_I32, {4});
  int32_t upd = gb.Input(F32, {4, 3});
  int32_t sc = gb.Op("scatter_add", F32, {5, 3}, {base, ind, upd}, {gb.Int("axis", 0)});
  gb.Output(cv);
  gb.Output(mp);
  gb.Output(ap);
  gb.Output(sc);
  auto X = Random(N * C * H * W, 14), Wt = Random(O * (C / G) * KH * KW, 15), B = Random(O, 16);
  auto BASE = Random(15, 17), UPD = Random(12, 18);
  std::vector<int32_t> IND = {1, 4, 1, 9};  // repeated index accumulates, 9 is dropped
  auto out = Run(gb, {Raw(X), Raw(Wt), Raw(B), Raw(BASE), Raw(IND), Raw(UPD)});
  ASSERT_EQ(out.size(), 4u);
  auto XV = [&](int64_t n, int64_t c, int64_t h, int64_t ww) {
    return X[((n * C + c) * H + h) * W + ww];
  };
  auto CV = As<float>(out[0]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float acc = B[o];
          int64_t g = o / (O / G);
          for (int64_t c = 0; c < C / G; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh - 1 + kh * 2, iw = ow * 2 + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += XV(n, g * (C / G) + c, ih, iw) * Wt[((o * (C / G) + c) * KH + kh) * KW + kw];
              }
          ASSERT_NEAR(CV[((n * O + o) * OH + oh) * OW + ow], acc, 1e-4f);
        }
  auto MP = As<float>(out[1]), AP = As<float>(out[2]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t oh = 0; oh < 4; ++oh)
        for (int64_t ow = 0; ow < 3; ++ow) {
          float m = -INFINITY;
          for (int64_t kh = 0; kh < 2; ++kh)
            for (int64_t kw = 0; kw < 2; ++kw) {
              int64_t ih = oh * 2 - 1 + kh, iw = ow * 2 + kw;
              if (ih >= 0 && ih < H && iw < W) m = std::max(m, XV(n, c, ih, iw));
            }
          ASSERT_EQ(MP[((n * C + c) * 4 + oh) * 3 + ow], m);
        }
      for (int64_t oh = 0; oh < 3; ++oh)
        for (int64_t ow = 0; ow < 3; ++ow) {
          float s = 0;
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 2; ++kw) s += XV(n, c, oh * 2 + kh, ow * 2 + kw);
          ASSERT_NEAR(AP[((n * C + c) * 3 + oh) * 3 + ow], s / 6, 1e-5f);
        }
    }
  auto SC = As<float>(out[3]);
  std::vector<float> want = BASE;
  for (int j = 0; j < 4; ++j)
    if (IND[j] >= 0 && IND[j] < 5)
      for (int k = 0; k < 3; ++k) want[IND[j] * 3 + k] += UPD[j * 3 + k];
  for (int i = 0; i < 15; ++i) ASSERT_NEAR(SC[i], want[i], 1e-5f);
}

TEST_F(GpuOpencl, RandomMatchesTheSharedGenerator) {
  GraphBuilder gb;
  int32_t seed = gb.Input(LT_DTYPE_I64, {});
  gb.Output(
      gb.Op("random_uniform", F32, {1000}, {seed}, {gb.Float("low", -1), gb.Float("high", 3)}));
  gb.Output(gb.Op("random_normal", F32, {1000}, {seed}, {gb.Float("mean", 1), gb.Float("std", 2)}));
  gb.Output(gb.Op("arange", F32, {5}, {}, {gb.Float("start", 2), gb.Float("step", 0.5)}));
  std::vector<int64_t> S = {12345};
  auto out = Run(gb, {Raw(S)});
  ASSERT_EQ(out.size(), 3u);
  auto U = As<float>(out[0]), Nn = As<float>(out[1]), AR = As<float>(out[2]);
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(U[i], -1.0f + 4.0f * lt_random_unit_f32(12345, i));
    float u1 = 1.0f - lt_random_unit_f32(12345, 2 * i), u2 = lt_random_unit_f32(12345, 2 * i + 1);
    float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
    ASSERT_NEAR(Nn[i], 1.0f + 2.0f * z, 1e-4f);
  }
  EXPECT_EQ(AR, (std::vector<float>{2, 2.5, 3, 3.5, 4}));
}

TEST_F(GpuOpencl, OutputsThatAreInputsOrRepeatedAreCopies) {
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {3});
  int32_t n = gb.Op("neg", F32, {3}, {x});
  gb.Output(x);
  gb.Output(n);
  gb.Output(n);
  std::vector<float> X = {1, 2, 3};
  auto out = Run(gb, {Raw(X)});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(As<float>(out[0]), X);
  EXPECT_EQ(As<float>(out[1]), (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(As<float>(out[2]), (std::vector<float>{-1, -2, -3}));
}

TEST_F(GpuOpencl, ZeroSizedTensorsLaunchNothing) {
  GraphBuilder gb;
  int32_t x = gb.Input(F32, {0, 4});
  int32_t e = gb.Op("exp", F32, {0, 4}, {x});
  gb.Output(e);
  gb.Output(gb.Op("sum", F32, {4}, {x}, {gb.Ints("axes", {0}), gb.Int("keepdims", 0)}));
  auto out = Run(gb, {{}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].empty());
  EXPECT_EQ(As<float>(out[1]), (std::vector<float>{0, 0, 0, 0}));
}

TEST_F(GpuOpencl, SupportsRejectsStorageTypesAndIntegerMatmul) {
  GraphBuilder gb;
  int32_t h = gb.Input(LT_DTYPE_BF16, {4});
  int32_t e = gb.Op("neg", LT_DTYPE_BF16, {4}, {h});
  int32_t a = gb.Input(LT_DTYPE_I32, {2, 2});
  int32_t m = gb.Op("matmul", LT_DTYPE_I32, {2, 2}, {a, a});
  int32_t f = gb.Input(F32, {2, 2});
  int32_t mf = gb.Op("matmul", F32, {2, 2}, {f, f});
  int32_t u = gb.Op("my_custom_op", F32, {2, 2}, {f});
  const lt_graph* g = gb.Graph();
  auto ask = [&](int32_t node) {
    lt_plugin_supports_args s{};
    s.struct_size = LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE;
    s.context = ctx_;
    s.graph = g;
    s.node = static_cast<size_t>(node);
    EXPECT_EQ(api_->supports(&s), nullptr);
    return s.supported;
  };
  EXPECT_EQ(ask(e), 0);
  EXPECT_EQ(ask(m), 0);
  EXPECT_EQ(ask(mf), 1);
  EXPECT_EQ(ask(u), 0);
}

GraphBuilder* MakeCacheGraph(GraphBuilder& gb) {
  int32_t x = gb.Input(LT_DTYPE_F32, {64});
  int32_t y = gb.Op("sqrt", LT_DTYPE_F32, {64}, {gb.Op("abs", LT_DTYPE_F32, {64}, {x})});
  gb.Output(gb.Op("add", LT_DTYPE_F32, {64}, {y, x}));
  return &gb;
}

TEST_F(GpuOpencl, ProgramBinariesAreCachedOnDiskAcrossContexts) {
  GraphBuilder gb;
  MakeCacheGraph(gb);
  lt_plugin_executable* e1 = Compile(ctx_, gb.Graph());
  ASSERT_NE(e1, nullptr) << last_error_;
  auto s1 = Stats(ctx_, nullptr);
  EXPECT_EQ(s1["programs_built"], 1);
  EXPECT_EQ(s1["program_cache_hits"], 0);
  EXPECT_GT(s1["compile_ms"], 0);
  api_->executable_destroy(ctx_, e1);
  // Same context, same source: an in-memory hit.
  lt_plugin_executable* e2 = Compile(ctx_, gb.Graph());
  ASSERT_NE(e2, nullptr);
  EXPECT_EQ(Stats(ctx_, nullptr)["program_cache_hits"], 1);
  api_->executable_destroy(ctx_, e2);

  size_t files = 0;
  for (auto& f : std::filesystem::directory_iterator(cache_dir_))
    files += f.path().extension() == ".bin";
  EXPECT_EQ(files, 1u);

  // A second context (as a new process would) loads the binary from disk.
  lt_plugin_context* c2 = Create({{"cache_dir", cache_dir_.string()}});
  ASSERT_NE(c2, nullptr) << last_error_;
  lt_plugin_executable* e3 = Compile(c2, gb.Graph());
  ASSERT_NE(e3, nullptr) << last_error_;
  auto s2 = Stats(c2, nullptr);
  EXPECT_EQ(s2["programs_built"], 0);
  EXPECT_EQ(s2["program_cache_hits"], 1);
  EXPECT_EQ(s2["program_disk_cache_hits"], 1);
  api_->executable_destroy(c2, e3);
  api_->destroy(c2);

  // A corrupt cache file is ignored and rebuilt.
  for (auto& f : std::filesystem::directory_iterator(cache_dir_)) {
    std::ofstream(f.path(), std::ios::binary | std::ios::trunc) << "LTCLBIN1garbage";
  }
  lt_plugin_context* c3 = Create({{"cache_dir", cache_dir_.string()}});
  ASSERT_NE(c3, nullptr);
  lt_plugin_executable* e4 = Compile(c3, gb.Graph());
  ASSERT_NE(e4, nullptr) << last_error_;
  EXPECT_EQ(Stats(c3, nullptr)["programs_built"], 1);
  api_->executable_destroy(c3, e4);
  api_->destroy(c3);
}

TEST_F(GpuOpencl, BrokenGeneratedKernelFailsCompileWithBuildLog) {
  lt_plugin_context* bad =
      Create({{"cache_dir", cache_dir_.string()}, {"inject_build_error", "1"}});
  ASSERT_NE(bad, nullptr) << last_error_;
  GraphBuilder gb;
  MakeCacheGraph(gb);
  log_.clear();
  EXPECT_EQ(Compile(bad, gb.Graph()), nullptr);
  EXPECT_EQ(last_code_, LT_STATUS_PLUGIN_ERROR);
  EXPECT_NE(last_error_.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << last_error_;
  EXPECT_NE(last_error_.find("build log"), std::string::npos) << last_error_;
  EXPECT_NE(last_error_.find("inject_build_error"), std::string::npos) << last_error_;
  bool logged_source = false;
  for (auto& l : log_)
    logged_source |= l.rfind("1: ", 0) == 0 && l.find("__kernel") != std::string::npos;
  EXPECT_TRUE(logged_source) << "the failing source is logged at debug level";
  api_->destroy(bad);
}

TEST_F(GpuOpencl, BadOptionsGiveClearErrors) {
  EXPECT_EQ(Create({{"type", "quantum"}}), nullptr);
  EXPECT_EQ(last_code_, LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(last_error_.find("type"), std::string::npos);
  EXPECT_EQ(Create({{"platform", "no-such-vendor-xyz"}}), nullptr);
  EXPECT_EQ(last_code_, LT_STATUS_NOT_FOUND);
  EXPECT_NE(last_error_.find("no-such-vendor-xyz"), std::string::npos);
  EXPECT_EQ(Create({{"device", "99"}}), nullptr);
  EXPECT_EQ(last_code_, LT_STATUS_NOT_FOUND);
  lt_plugin_context* c = Create({{"platform", "0"}, {"type", "all"}, {"device", "0"}});
  EXPECT_NE(c, nullptr) << last_error_;
  if (c) api_->destroy(c);
}

TEST_F(GpuOpencl, DeepChainCompilesWithoutRecursion) {
  GraphBuilder gb;
  int32_t v = gb.Input(F32, {16});
  int32_t x = v;
  for (int i = 0; i < 3000; ++i) v = gb.Op(i % 2 ? "add" : "mul", F32, {16}, {v, x});
  gb.Output(v);
  std::vector<float> X(16, 0.0f);
  auto out = Run(gb, {Raw(X)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(As<float>(out[0]), std::vector<float>(16, 0.0f));
}

}  // namespace
