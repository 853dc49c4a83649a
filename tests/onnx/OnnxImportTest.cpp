// OnnxImportTest.cpp — LazyTensor::onnx on bad models (truncated and garbage files, cycles,
// missing initializers, impossible shapes, a too-new opset, out-of-scope types, external data
// outside the model's folder) and on good ones: an MLP against a plain-loop reference on every
// backend, external data, and a symbolic batch axis served by at most 2 compiles on cpu_jit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "lazytensor/onnx.hpp"
#include "onnx_writer.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace lt::onnx_test;

namespace {

class OnnxImport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lt_onnx_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    rt_ = lt::Runtime::create();
    dev_ = rt_.find_device("cpu_eager");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    std::string p = (dir_ / name).string();
    write_file(p, bytes);
    return p;
  }
  // The error of loading `path`, or "" when it loads.
  lt::Error load_error(const std::string& path) {
    try {
      lt::onnx::Model::load(dev_, path);
    } catch (const lt::Error& e) {
      return e;
    }
    return lt::Error(LT_STATUS_OK, "");
  }
  fs::path dir_;
  lt::Runtime rt_;
  lt::Device dev_;
};

std::string small_model() {
  Graph g;
  g.nodes = {node("Add", {"x", "b"}, {"y"}, "add_node")};
  g.initializers = {tensor_f32("b", {3}, {1, 2, 3})};
  g.inputs = {value_info("x", 1, {2, 3})};
  g.outputs = {value_info("y", 1, {2, 3})};
  return g.encode();
}

TEST_F(OnnxImport, MissingFileAndDirectoryAreClearErrors) {
  lt::Error e = load_error((dir_ / "nope.onnx").string());
  EXPECT_EQ(e.code(), LT_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(e.what()).find("nope.onnx"), std::string::npos) << e.what();
  e = load_error(dir_.string());
  EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR);
  EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
}

TEST_F(OnnxImport, TruncatedFilesAreRefusedNamingTheFile) {
  std::string m = small_model();
  int refused = 0;
  for (size_t n = 1; n < m.size(); ++n) {
    std::string p = write("trunc.onnx", m.substr(0, n));
    lt::Error e = load_error(p);
    if (e.code() == LT_STATUS_OK) continue;  // a prefix can be a valid, smaller message
    ++refused;
    EXPECT_NE(std::string(e.what()).find("trunc.onnx"), std::string::npos) << e.what();
  }
  EXPECT_GT(refused, static_cast<int>(m.size()) / 2);
  lt::Error e = load_error(write("trunc.onnx", m.substr(0, m.size() - 3)));
  EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR) << e.what();
  EXPECT_NE(std::string(e.what()).find("not a valid ONNX model"), std::string::npos) << e.what();
}

TEST_F(OnnxImport, GarbageIsRefusedNeverCrashes) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string g(1 + rng() % 300, '\0');
    for (char& ch : g) ch = static_cast<char>(rng());
    lt::Error e = load_error(write("garbage.onnx", g));
    EXPECT_NE(e.code(), LT_STATUS_OK);
    EXPECT_NE(std::string(e.what()).find("garbage.onnx"), std::string::npos) << e.what();
  }
  // A length field far past the end of the file.
  std::string huge;
  tag(huge, 7, 2);
  varint(huge, uint64_t(1) << 40);
  lt::Error e = load_error(write("huge.onnx", huge));
  EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR);
  EXPECT_NE(std::string(e.what()).find("huge.onnx: not a valid ONNX model"), std::string::npos)
      << e.what();
}

// protobuf parses at most 2 GiB - 1 per message: a larger model file is refused from its size
// (a sparse file, so nothing is written or read), naming the file and the way out.
TEST_F(OnnxImport, ModelPastProtobufsLimitIsRefusedBeforeReading) {
  std::string p = write("big.onnx", small_model());
  fs::resize_file(p, (uint64_t(1) << 31) + 1);
  lt::Error e = load_error(p);
  EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR);
  std::string m = e.what();
  EXPECT_NE(m.find("big.onnx: 2147483649 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("external-data"), std::string::npos) << m;
}

TEST_F(OnnxImport, CycleIsRefusedNamingANode) {
  Graph g;
  g.nodes = {node("Add", {"x", "b_out"}, {"a_out"}, "node_a"),
             node("Relu", {"a_out"}, {"b_out"}, "node_b")};
  g.inputs = {value_info("x", 1, {2})};
  g.outputs = {value_info("b_out", 1, {2})};
  lt::Error e = load_error(write("cycle.onnx", g.encode()));
  EXPECT_EQ(e.code(), LT_STATUS_INVALID_ARGUMENT);
  std::string m = e.what();
  EXPECT_NE(m.find("cycle.onnx"), std::string::npos) << m;
  EXPECT_NE(m.find("cycle"), std::string::npos) << m;
  EXPECT_TRUE(m.find("node_a") != std::string::npos || m.find("node_b") != std::string::npos) << m;
}

TEST_F(OnnxImport, MissingInitializerIsRefusedNamingNodeAndInput) {
  Graph g;
  g.nodes = {node("MatMul", {"x", "W"}, {"y"}, "fc")};
  g.inputs = {value_info("x", 1, {2, 3})};
  g.outputs = {value_info("y", 1, {2, 4})};
  lt::Error e = load_error(write("noinit.onnx", g.encode()));
  std::string m = e.what();
  EXPECT_EQ(e.code(), LT_STATUS_INVALID_ARGUMENT) << m;
  EXPECT_NE(m.find("noinit.onnx"), std::string::npos) << m;
  EXPECT_NE(m.find("node 'fc' (MatMul"), std::string::npos) << m;
  EXPECT_NE(m.find("'W'"), std::string::npos) << m;
}

TEST_F(OnnxImport, TooNewOpsetIsRefusedNamingNodeOpAndOpset) {
  Graph g;
  g.nodes = {node("Relu", {"x"}, {"y"}, "act")};
  g.inputs = {value_info("x", 1, {2})};
  g.outputs = {value_info("y", 1, {2})};
  g.opset = LT_ONNX_MAX_OPSET + 1;
  lt::Error e = load_error(write("new.onnx", g.encode()));
  std::string m = e.what();
  EXPECT_EQ(e.code(), LT_STATUS_UNSUPPORTED) << m;
  EXPECT_NE(m.find("new.onnx"), std::string::npos) << m;
  EXPECT_NE(m.find("node 'act' (Relu, opset " + std::to_string(LT_ONNX_MAX_OPSET + 1) + ")"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("newer than the newest supported"), std::string::npos) << m;
}

TEST_F(OnnxImport, UnknownOpAndSequenceTypeAreRefused) {
  Graph g;
  g.nodes = {node("FancyOp", {"x"}, {"y"}, "fancy")};
  g.inputs = {value_info("x", 1, {2})};
  g.outputs = {value_info("y", 1, {2})};
  lt::Error e = load_error(write("unknown.onnx", g.encode()));
  EXPECT_EQ(e.code(), LT_STATUS_UNSUPPORTED);
  EXPECT_NE(std::string(e.what()).find("node 'fancy' (FancyOp, opset 13): op type not supported"),
            std::string::npos)
      << e.what();
  Graph s;
  s.nodes = {node("Identity", {"x"}, {"y"}, "id")};
  s.inputs = {sequence_info("x")};
  s.outputs = {sequence_info("y")};
  e = load_error(write("seq.onnx", s.encode()));
  EXPECT_EQ(e.code(), LT_STATUS_UNSUPPORTED);
  EXPECT_EQ(std::string(e.what()).rfind("out of scope: ", 0), 0u) << e.what();
}

TEST_F(OnnxImport, ImpossibleShapesNameFileAndNode) {
  Graph g;
  g.nodes = {node("MatMul", {"x", "W"}, {"y"}, "bad_fc")};
  g.initializers = {tensor_f32("W", {4, 5}, std::vector<float>(20, 1.0f))};
  g.inputs = {value_info("x", 1, {2, 3})};
  g.outputs = {value_info("y", 1, {2, 5})};
  auto m = lt::onnx::Model::load(dev_, write("shapes.onnx", g.encode()));
  lt::Tensor x = lt::zeros(dev_, {2, 3});
  try {
    m.run({{"x", x}});
    FAIL() << "an impossible matmul ran";
  } catch (const lt::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("shapes.onnx"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node 'bad_fc' (MatMul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2,3]"), std::string::npos) << msg;
  }
  // An input that contradicts its declared shape is refused before tracing.
  try {
    m.run({{"x", lt::zeros(dev_, {2, 4})}});
    FAIL() << "a [2,4] input was accepted for a [2,3] declaration";
  } catch (const lt::Error& e) {
    EXPECT_EQ(e.code(), LT_STATUS_SHAPE_MISMATCH) << e.what();
  }
  // A Reshape to a shape of another element count.
  Graph r;
  r.nodes = {node("Reshape", {"x", "s"}, {"y"}, "bad_reshape")};
  r.initializers = {tensor_i64("s", {2}, {4, 4})};
  r.inputs = {value_info("x", 1, {2, 3})};
  r.outputs = {value_info("y", 1, {4, 4})};
  auto m2 = lt::onnx::Model::load(dev_, write("reshape.onnx", r.encode()));
  try {
    m2.run({{"x", x}});
    FAIL() << "an impossible reshape ran";
  } catch (const lt::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node 'bad_reshape' (Reshape"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot reshape [2,3] to [4,4]"), std::string::npos) << msg;
  }
  // An Unsqueeze that inserts one axis twice (it read past the input's dims before).
  Graph u;
  u.nodes = {node("Unsqueeze", {"x", "axes"}, {"y"}, "twice")};
  u.initializers = {tensor_i64("axes", {2}, {0, 0})};
  u.inputs = {value_info("x", 1, {2, 3})};
  u.outputs = {value_info("y", 1, {1, 1, 2, 3})};
  auto m3 = lt::onnx::Model::load(dev_, write("unsqueeze.onnx", u.encode()));
  try {
    m3.run({{"x", x}});
    FAIL() << "an Unsqueeze of a repeated axis ran";
  } catch (const lt::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node 'twice' (Unsqueeze"), std::string::npos) << msg;
    EXPECT_NE(msg.find("repeat an axis"), std::string::npos) << msg;
  }
}

// Inputs the libFuzzer harness found: a huge declared shape with no data (refused before its
// bytes are allocated) and an LSTM whose weights have the wrong rank.
TEST_F(OnnxImport, FuzzFindingsAreClearErrors) {
  Graph g;
  g.nodes = {node("Add", {"x", "big"}, {"y"}, "add")};
  std::string big;
  for (int64_t d : {int64_t(1) << 20, int64_t(1) << 19}) vint(big, 1, d);
  vint(big, 2, 1);
  bytes(big, 8, "big");
  g.initializers = {big};
  g.inputs = {value_info("x", 1, {1})};
  g.outputs = {value_info("y", 1, {1})};
  lt::Error e = load_error(write("big.onnx", g.encode()));
  EXPECT_EQ(e.code(), LT_STATUS_SHAPE_MISMATCH) << e.what();
  EXPECT_NE(std::string(e.what()).find("0 values for shape [1048576,524288]"), std::string::npos)
      << e.what();

  Graph r;
  r.nodes = {node("LSTM", {"X", "W", "R"}, {"Y"}, "lstm", {Attr::Int("hidden_size", 3)})};
  r.initializers = {tensor_f32("W", {12, 2}, std::vector<float>(24, 0.1f)),
                    tensor_f32("R", {1, 12, 3}, std::vector<float>(36, 0.1f))};
  r.inputs = {value_info("X", 1, {4, 1, 2})};
  r.outputs = {value_info("Y", 1, {4, 1, 1, 3})};
  auto m = lt::onnx::Model::load(dev_, write("lstm.onnx", r.encode()));
  try {
    m.run({{"X", lt::zeros(dev_, {4, 1, 2})}});
    FAIL() << "an LSTM with a rank-2 W ran";
  } catch (const lt::Error& err) {
    EXPECT_NE(
        std::string(err.what()).find("node 'lstm' (LSTM, opset 13): W has rank 2, expected 3"),
        std::string::npos)
        << err.what();
  }
}

TEST_F(OnnxImport, ExternalDataLoadsAndEscapesAreRefused) {
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  write("weights.bin",
        std::string(16, 'x') + std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4));
  auto model = [&](const std::string& loc, int64_t off, int64_t len) {
    Graph g;
    g.nodes = {node("MatMul", {"x", "W"}, {"y"}, "fc")};
    g.initializers = {tensor_external("W", {3, 2}, loc, off, len)};
    g.inputs = {value_info("x", 1, {1, 3})};
    g.outputs = {value_info("y", 1, {1, 2})};
    return g.encode();
  };
  auto m = lt::onnx::Model::load(dev_, write("ext.onnx", model("weights.bin", 16, 24)));
  auto y = m.run({{"x", lt::Tensor::from<float>(dev_, {1, 1, 1}, {1, 3})}})[0].to_vector<float>();
  ASSERT_EQ(y.size(), 2u);
  EXPECT_FLOAT_EQ(y[0], 1 + 3 + 5);
  EXPECT_FLOAT_EQ(y[1], 2 + 4 + 6);
  lt::Error e = load_error(write("ext2.onnx", model("../weights.bin", 16, 24)));
  EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR);
  EXPECT_NE(std::string(e.what()).find("inside the model's directory"), std::string::npos)
      << e.what();
  e = load_error(write("ext3.onnx", model("weights.bin", 30, 24)));
  EXPECT_EQ(e.code(), LT_STATUS_IO_ERROR);
  EXPECT_NE(std::string(e.what()).find("exceed"), std::string::npos) << e.what();
}

// y = relu(x W1 + b1) W2 + b2 by plain loops.
std::vector<float> mlp_reference(const std::vector<float>& x, int64_t n, int64_t in, int64_t h,
                                 int64_t out, const std::vector<float>& w1,
                                 const std::vector<float>& b1, const std::vector<float>& w2,
                                 const std::vector<float>& b2) {
  std::vector<float> y(n * out);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<double> hid(h);
    for (int64_t j = 0; j < h; ++j) {
      double s = b1[j];
      for (int64_t k = 0; k < in; ++k) s += double(x[r * in + k]) * w1[k * h + j];
      hid[j] = s > 0 ? s : 0;
    }
    for (int64_t j = 0; j < out; ++j) {
      double s = b2[j];
      for (int64_t k = 0; k < h; ++k) s += hid[k] * w2[k * out + j];
      y[r * out + j] = static_cast<float>(s);
    }
  }
  return y;
}

TEST_F(OnnxImport, MlpMatchesAPlainLoopOnEveryBackendAndSymbolicBatchCompilesOnce) {
  const int64_t in = 8, h = 16, out = 4;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = u(rng);
    return v;
  };
  auto w1 = rnd(in * h), b1 = rnd(h), w2 = rnd(h * out), b2 = rnd(out);
  std::string path = write("mlp.onnx", mlp(in, h, out, w1, b1, w2, b2).encode());
  for (const std::string& backend : lt::test::built_backends()) {
    SCOPED_TRACE(backend);
    lt::Runtime rt = lt::Runtime::create();
    lt::Device dev = rt.find_device(backend);
    auto m = lt::onnx::Model::load(dev, path);
    auto ins = m.inputs();
    ASSERT_EQ(ins.size(), 1u);
    EXPECT_EQ(ins[0].dims, (std::vector<int64_t>{-1, in}));
    double tol = backend == "tpu_sim" ? 3e-2 : 1e-5;  // tpu_sim's MXU multiplies in bf16
    for (int64_t n : {1, 8, 32}) {
      auto x = rnd(n * in);
      auto y = m.run({{"x", lt::Tensor::from<float>(dev, x, {n, in})}})[0];
      ASSERT_EQ(y.shape(), (std::vector<int64_t>{n, out}));
      auto got = y.to_vector<float>();
      auto want = mlp_reference(x, n, in, h, out, w1, b1, w2, b2);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "batch " << n << " at " << i;
      }
    }
    if (backend == "cpu_jit") {
      // batch 1 static, then one dynamic executable for every batch size (docs/dynamic-shapes.md)
      EXPECT_LE(rt.metric("compiles"), 2.0);
    }
  }
}

TEST_F(OnnxImport, ShapeComputationsFoldOnTheHost) {
  // Reshape(x, Concat(Gather(Shape(x), 0), [-1])): the shape chain never reaches the device.
  Graph g;
  g.nodes = {node("Shape", {"x"}, {"s"}, "shape"),
             node("Gather", {"s", "zero"}, {"n"}, "gather", {Attr::Int("axis", 0)}),
             node("Unsqueeze", {"n", "axes"}, {"n1"}, "unsq"),
             node("Concat", {"n1", "minus1"}, {"target"}, "concat", {Attr::Int("axis", 0)}),
             node("Reshape", {"x", "target"}, {"y"}, "reshape")};
  g.initializers = {tensor_i64("zero", {}, {0}), tensor_i64("axes", {1}, {0}),
                    tensor_i64("minus1", {1}, {-1})};
  g.inputs = {value_info("x", 1, {"N", 2, 3})};
  g.outputs = {value_info("y", 1, {"N", 6})};
  auto m = lt::onnx::Model::load(dev_, write("fold.onnx", g.encode()));
  lt::Tensor x = lt::zeros(dev_, {5, 2, 3});
  x.materialize();
  rt_.reset_metrics();
  auto y = m.run({{"x", x}})[0];
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{5, 6}));
  // One reshape of the input is the whole device graph: no gather or concat was traced.
  EXPECT_EQ(rt_.metric("ops_traced"), 1.0);
}

}  // namespace
