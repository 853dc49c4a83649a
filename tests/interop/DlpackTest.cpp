// DlpackTest.cpp — DLPack export and import on every built backend: values seen through a second
// library (Eigen::Map over the exported pointer), zero-copy where the device is host-addressable
// and a copy otherwise, the deleter's lifetime (once, never early), strided and misaligned
// imports, dtype round trips and the errors that name what was wrong.
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <lazytensor/lazytensor.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

lt::Runtime& runtime() {
  return lt::test::runtime(lt::test::with_fallback("silent"));
}

double metric(const char* name) {
  return lt::test::metric_or_zero(runtime(), name);
}

// A producer's tensor: 64-byte aligned host memory and a deleter that counts its calls.
struct Producer {
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
  void* memory = nullptr;
  int* deleted = nullptr;

  static DLManagedTensor* make(DLDataType dtype, std::vector<int64_t> shape, size_t bytes,
                               int* deleted, std::vector<int64_t> strides = {}) {
    auto* p = new Producer;
    p->shape = std::move(shape);
    p->strides = std::move(strides);
    p->memory = std::aligned_alloc(64, (bytes + 64) / 64 * 64);
    std::memset(p->memory, 0, bytes);
    p->deleted = deleted;
    DLTensor& t = p->managed.dl_tensor;
    t.data = p->memory;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int>(p->shape.size());
    t.dtype = dtype;
    t.shape = p->shape.data();
    t.strides = p->strides.empty() ? nullptr : p->strides.data();
    p->managed.manager_ctx = p;
    p->managed.deleter = [](DLManagedTensor* m) {
      auto* self = static_cast<Producer*>(m->manager_ctx);
      ++*self->deleted;
      std::free(self->memory);
      delete self;
    };
    return &p->managed;
  }
  static float* floats(DLManagedTensor* m) { return static_cast<float*>(m->dl_tensor.data); }
};

constexpr DLDataType kF32{kDLFloat, 32, 1};

class Dlpack : public lt::test::BackendTest {
 protected:
  Dlpack() : BackendTest(lt::test::with_fallback("silent")) {}
  // gpu_opencl's buffers live in OpenCL memory; every other in-tree backend's are host memory.
  bool host_addressable() const { return GetParam() != "gpu_opencl"; }
};

std::vector<float> values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i) - 1.5f;
  return v;
}

TEST_P(Dlpack, ExportIsReadThroughEigenMap) {
  std::vector<float> xv = values(12);
  lt::Tensor x = lt::Tensor::from(dev_, xv, {3, 4});
  lt::Tensor y = x * 2.0 + 1.0;  // computed by the backend, then exported
  double zero_copy = metric("dlpack.exports_zero_copy"), copied = metric("dlpack.exports_copied");
  DLManagedTensor* m = y.to_dlpack();
  ASSERT_NE(m, nullptr);
  const DLTensor& t = m->dl_tensor;
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.dtype.code, kDLFloat);
  EXPECT_EQ(t.dtype.bits, 32);
  EXPECT_EQ(t.dtype.lanes, 1);
  EXPECT_EQ(t.shape[0], 3);
  EXPECT_EQ(t.shape[1], 4);
  ASSERT_NE(t.strides, nullptr);
  EXPECT_EQ(t.strides[0], 4);
  EXPECT_EQ(t.strides[1], 1);
  EXPECT_EQ(t.byte_offset, 0u);

  Eigen::Map<const RowMajor> view(static_cast<const float*>(t.data), 3, 4);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(view(r, c), xv[r * 4 + c] * 2 + 1) << r << "," << c;
  // Eigen computes on the exported memory; LazyTensor computes the same thing.
  Eigen::VectorXf eigen_rows = view.rowwise().sum();
  std::vector<float> lt_rows = lt::sum(y, {1}).to_vector<float>();
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(eigen_rows(r), lt_rows[r], 1e-5f) << r;

  if (host_addressable()) {
    EXPECT_EQ(metric("dlpack.exports_zero_copy"), zero_copy + 1);
    // Zero-copy: a second export of the same value is the same memory.
    DLManagedTensor* again = y.to_dlpack();
    EXPECT_EQ(again->dl_tensor.data, t.data);
    again->deleter(again);
  } else {
    EXPECT_EQ(metric("dlpack.exports_copied"), copied + 1);
  }
  m->deleter(m);
}

TEST_P(Dlpack, ExportOutlivesTheTensorAndTheRuntimeHandle) {
  DLManagedTensor* m = nullptr;
  std::vector<float> xv = values(6);
  {
    lt::RuntimeOptions o;
    o.device = GetParam();
    lt::Runtime own = lt::Runtime::create(o);
    lt::Tensor x = lt::Tensor::from(own.default_device(), xv, {2, 3});
    m = lt::exp(x).to_dlpack();
  }  // tensor and runtime handle released: the export keeps the value (and its plugin) alive
  Eigen::Map<const RowMajor> view(static_cast<const float*>(m->dl_tensor.data), 2, 3);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(view(i / 3, i % 3), std::exp(xv[i]), 1e-5f) << i;
  m->deleter(m);
}

TEST_P(Dlpack, ImportInPlaceCallsTheDeleterOnceWhenTheLastReferenceGoes) {
  int deleted = 0;
  DLManagedTensor* m = Producer::make(kF32, {2, 3}, 6 * sizeof(float), &deleted);
  float* mem = Producer::floats(m);
  for (int i = 0; i < 6; ++i) mem[i] = static_cast<float>(i);
  double in_place = metric("dlpack.imports_zero_copy"), copied = metric("dlpack.imports_copied");
  lt::Tensor a = lt::from_dlpack(m, dev_);
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.dtype(), lt::f32);
  EXPECT_TRUE(a.is_materialized());
  if (!host_addressable()) {
    EXPECT_EQ(deleted, 1) << "copied onto the device: the producer's memory is released at once";
    EXPECT_EQ(metric("dlpack.imports_copied"), copied + 1);
    EXPECT_EQ((a * 2.0).to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
    return;
  }
  EXPECT_EQ(metric("dlpack.imports_zero_copy"), in_place + 1);
  EXPECT_EQ(deleted, 0);
  EXPECT_EQ((a * 2.0).to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  // In place: the tensor reads the producer's memory.
  mem[0] = 100;
  EXPECT_EQ(a.to_vector<float>()[0], 100.0f);
  lt::Tensor b = a;              // a second handle
  lt::Tensor pending = a + 1.0;  // a pending graph that reads the value
  a = lt::Tensor();
  b = lt::Tensor();
  EXPECT_EQ(deleted, 0) << "the pending graph still reads the memory";
  EXPECT_EQ(pending.to_vector<float>()[1], 2.0f);
  EXPECT_EQ(deleted, 1) << "the graph ran and was cut: nothing references the memory";
  pending = lt::Tensor();
  EXPECT_EQ(deleted, 1);
}

// The export's own deleter, wrapped to count its calls.
int g_export_deleted = 0;
void (*g_export_deleter)(DLManagedTensor*) = nullptr;

TEST_P(Dlpack, ImportOfAnExportSharesTheValueAndReleasesItOnce) {
  std::vector<float> xv = values(16);
  lt::Tensor x = lt::Tensor::from(dev_, xv, {16});
  lt::Tensor x1 = x + 1.0;
  DLManagedTensor* m = x1.to_dlpack();
  g_export_deleted = 0;
  g_export_deleter = m->deleter;
  m->deleter = [](DLManagedTensor* self) {
    ++g_export_deleted;
    g_export_deleter(self);
  };
  const void* data = m->dl_tensor.data;
  lt::Tensor y = lt::from_dlpack(m, dev_);  // y owns m now
  EXPECT_EQ(y.to_vector<float>(), x1.to_vector<float>());
  if (host_addressable()) {
    // Our own buffers are 64-byte aligned: shared both ways, no copy at all.
    EXPECT_EQ(g_export_deleted, 0);
    DLManagedTensor* again = y.to_dlpack();
    EXPECT_EQ(again->dl_tensor.data, data);
    again->deleter(again);
    EXPECT_EQ(g_export_deleted, 0);
  }
  y = lt::Tensor();
  EXPECT_EQ(g_export_deleted, 1);
}

TEST_P(Dlpack, MisalignedImportIsCopiedAndReleasedAtOnce) {
  int deleted = 0;
  DLManagedTensor* m = Producer::make(kF32, {5}, 6 * sizeof(float), &deleted);
  float* mem = Producer::floats(m);
  for (int i = 0; i < 6; ++i) mem[i] = static_cast<float>(i);
  m->dl_tensor.byte_offset = sizeof(float);  // data + 4 bytes: not 64-byte aligned
  double copied = metric("dlpack.imports_copied");
  lt::Tensor a = lt::from_dlpack(m, dev_);
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(metric("dlpack.imports_copied"), copied + 1);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST_P(Dlpack, StridedImportIsGatheredIntoRowMajor) {
  // A 4x3 transposed view of a 3x4 row-major matrix (strides in elements: 1, 4).
  int deleted = 0;
  DLManagedTensor* m = Producer::make(kF32, {4, 3}, 12 * sizeof(float), &deleted, {1, 4});
  float* mem = Producer::floats(m);
  for (int i = 0; i < 12; ++i) mem[i] = static_cast<float>(i);
  Eigen::Map<const RowMajor> src(mem, 3, 4);
  RowMajor want = src.transpose();
  lt::Tensor a = lt::from_dlpack(m, dev_);
  EXPECT_EQ(deleted, 1);
  std::vector<float> got = a.to_vector<float>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(got[r * 3 + c], want(r, c)) << r << "," << c;

  // Every other row, reversed: a negative stride and an offset.
  int deleted2 = 0;
  DLManagedTensor* n = Producer::make(kF32, {2, 2}, 16 * sizeof(float), &deleted2, {-8, 1});
  float* mem2 = Producer::floats(n);
  for (int i = 0; i < 16; ++i) mem2[i] = static_cast<float>(i);
  n->dl_tensor.byte_offset = 8 * sizeof(float);  // starts at row 2 of a 4x4: rows 2 and 0
  lt::Tensor b = lt::from_dlpack(n, dev_);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{8, 9, 0, 1}));
  EXPECT_EQ(deleted2, 1);
}

TEST_P(Dlpack, EveryDtypeRoundTrips) {
  struct Case {
    lt::DType dtype;
    DLDataType dl;
  };
  for (Case c : {Case{lt::f32, {kDLFloat, 32, 1}}, Case{lt::f64, {kDLFloat, 64, 1}},
                 Case{lt::f16, {kDLFloat, 16, 1}}, Case{lt::bf16, {kDLBfloat, 16, 1}},
                 Case{lt::i32, {kDLInt, 32, 1}}, Case{lt::i64, {kDLInt, 64, 1}},
                 Case{lt::bool_, {kDLUInt, 8, 1}}}) {
    SCOPED_TRACE(lt::dtype_name(c.dtype));
    lt::Tensor x =
        lt::cast(lt::Tensor::from(dev_, std::vector<float>{0, 1, 1, 0, 1, 0}, {2, 3}), c.dtype);
    std::vector<uint8_t> bytes = x.to_bytes();
    DLManagedTensor* m = x.to_dlpack();
    EXPECT_EQ(m->dl_tensor.dtype.code, c.dl.code);
    EXPECT_EQ(m->dl_tensor.dtype.bits, c.dl.bits);
    EXPECT_EQ(m->dl_tensor.dtype.lanes, 1);
    EXPECT_EQ(std::memcmp(m->dl_tensor.data, bytes.data(), bytes.size()), 0);
    lt::Tensor y = lt::from_dlpack(m, dev_);
    EXPECT_EQ(y.dtype(), c.dtype);
    EXPECT_EQ(y.to_bytes(), bytes);
  }
}

TEST_P(Dlpack, ScalarsAndEmptyTensorsExport) {
  DLManagedTensor* s = lt::Tensor::scalar(dev_, 2.5, lt::f32).to_dlpack();
  EXPECT_EQ(s->dl_tensor.ndim, 0);
  EXPECT_EQ(*static_cast<const float*>(s->dl_tensor.data), 2.5f);
  lt::Tensor back = lt::from_dlpack(s, dev_);
  EXPECT_EQ(back.item<float>(), 2.5f);

  DLManagedTensor* e = lt::full(dev_, {0, 3}, 1.0).to_dlpack();
  EXPECT_EQ(e->dl_tensor.shape[0], 0);
  EXPECT_NE(e->dl_tensor.data, nullptr);
  lt::Tensor empty = lt::from_dlpack(e, dev_);
  EXPECT_EQ(empty.shape(), (std::vector<int64_t>{0, 3}));
}

// Each error names what was wrong, and leaves the managed tensor (and its deleter) to the caller.
TEST_P(Dlpack, ImportErrorsNameTheProblemAndTakeNothing) {
  auto expect_error = [&](DLManagedTensor* m, lt_status_code code, const std::string& words) {
    lt_tensor* out = nullptr;
    lt_error* e = lt_tensor_from_dlpack(dev_.get(), m, &out);
    ASSERT_NE(e, nullptr) << words;
    EXPECT_EQ(lt_error_code(e), code) << lt_error_message(e);
    EXPECT_NE(std::string(lt_error_message(e)).find(words), std::string::npos)
        << lt_error_message(e);
    EXPECT_EQ(out, nullptr);
    lt_error_destroy(e);
  };
  int deleted = 0;
  DLManagedTensor* m = Producer::make(kF32, {2, 2}, 16, &deleted);
  expect_error(nullptr, LT_STATUS_INVALID_ARGUMENT, "managed tensor is NULL");
  {
    lt_tensor* out = nullptr;
    lt_error* e = lt_tensor_from_dlpack(nullptr, m, &out);
    ASSERT_NE(e, nullptr);
    EXPECT_NE(std::string(lt_error_message(e)).find("device is NULL"), std::string::npos);
    lt_error_destroy(e);
    e = lt_tensor_from_dlpack(dev_.get(), m, nullptr);
    ASSERT_NE(e, nullptr);
    EXPECT_NE(std::string(lt_error_message(e)).find("out is NULL"), std::string::npos);
    lt_error_destroy(e);
  }
  m->dl_tensor.device = {kDLCUDA, 0};
  expect_error(m, LT_STATUS_UNSUPPORTED, "device type 2 is not host memory");
  m->dl_tensor.device = {kDLCPU, 0};
  m->dl_tensor.dtype = {kDLUInt, 16, 1};
  expect_error(m, LT_STATUS_UNSUPPORTED, "unsupported dtype {code 1 (kDLUInt), bits 16, lanes 1}");
  m->dl_tensor.dtype = {kDLFloat, 32, 4};
  expect_error(m, LT_STATUS_UNSUPPORTED, "lanes 4");
  m->dl_tensor.dtype = {kDLComplex, 64, 1};
  expect_error(m, LT_STATUS_UNSUPPORTED, "kDLComplex");
  m->dl_tensor.dtype = kF32;
  m->dl_tensor.shape[1] = -2;
  expect_error(m, LT_STATUS_INVALID_ARGUMENT, "negative dimension in shape [2,-2]");
  m->dl_tensor.shape[1] = 2;
  void* data = m->dl_tensor.data;
  m->dl_tensor.data = nullptr;
  expect_error(m, LT_STATUS_INVALID_ARGUMENT, "data is NULL");
  m->dl_tensor.data = data;
  m->dl_tensor.dtype = {kDLUInt, 8, 1};
  static_cast<unsigned char*>(data)[3] = 2;
  expect_error(m, LT_STATUS_INVALID_ARGUMENT, "bool (uint8) element 3 is 2, not 0 or 1");
  EXPECT_EQ(deleted, 0) << "a failed import takes nothing";
  m->deleter(m);
  EXPECT_EQ(deleted, 1);

  lt_error* e = lt_tensor_to_dlpack(nullptr, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(std::string(lt_error_message(e)).find("tensor is NULL"), std::string::npos);
  lt_error_destroy(e);
}

LT_INSTANTIATE_PER_BACKEND(Dlpack, lt::test::built_backends());

}  // namespace
