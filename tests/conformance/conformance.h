// conformance.h — shared fixture, tolerance table, host reference tensors and comparison
// helpers of the op conformance suite. References are plain loops over doubles written here,
// never computed by the code under test.
#ifndef LT_TESTS_CONFORMANCE_H
#define LT_TESTS_CONFORMANCE_H

#include <lazytensor/lazytensor.hpp>

#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <vector>

namespace ltc {

// ---- tolerances ---------------------------------------------------------------------------
// One table for the whole suite. An element passes when |got - want| <= atol + rtol * |want|
// (NaN matches NaN, infinities must match exactly). Integer and bool results are exact.
//
//   op class       f32 rtol  f32 atol   f64 rtol  f64 atol   used by
//   kExact         1e-6      1e-6       1e-12     1e-12      add sub mul neg abs relu floor
//                                                            maximum minimum where cast
//                                                            layout ops, full, arange, pools(max)
//   kDiv           2e-6      1e-6       1e-12     1e-12      div
//   kTranscendent  2e-5      2e-6       1e-11     1e-12      exp log sqrt rsqrt tanh sigmoid gelu
//                                                            sin cos pow, random_normal
//   kReduce        2e-5      2e-5       1e-10     1e-10      sum mean, avg_pool2d, scatter_add
//   kMatmul        2e-5      2e-5       1e-10     1e-10      matmul, conv2d
//   kSoftmax       2e-5      2e-6       1e-10     1e-12      softmax log_softmax
//
// kMatmul's relative term is taken against sum |a||b| (expect_close_scaled), not |result|.
// Backend factors: a backend may compute some op classes in lower precision. The table below
// replaces the f32 entry for (backend, class); e.g. tpu_sim runs matmul/conv on a bf16
// systolic array (8 mantissa bits: 2^-8 relative per input), so rtol 1e-2 of sum |a||b|.
enum class OpClass { kExact, kDiv, kTranscendent, kReduce, kMatmul, kSoftmax };

struct Tol {
  double rtol = 0;
  double atol = 0;
};

Tol tolerance(OpClass cls, lt::DType dtype, const std::string& backend);

// ---- fixture ------------------------------------------------------------------------------

// Device names to run on: $LT_CONFORMANCE_DEVICES (comma-separated; lt-conformance sets it to
// the plugin it is given) or every device the suite's runtime reports (lt::test::runtime(): its
// creation error fails the listing).
std::vector<std::string> conformance_devices();

// One conformance test on one named device (lt::test::BackendTest: a device that was named but
// does not load fails the test, naming it), with the tolerance table of its backend.
class ConformanceTest : public lt::test::BackendTest {
 protected:
  Tol tol(OpClass cls, lt::DType dtype) const { return tolerance(cls, dtype, backend()); }
};

#define LT_CONFORMANCE_SUITE(Fixture) \
  LT_INSTANTIATE_PER_BACKEND(Fixture, ::ltc::conformance_devices())

// ---- host reference tensors ---------------------------------------------------------------

using Shape = std::vector<int64_t>;

// A dense row-major host tensor; values held as double (exact for every dtype used here:
// test integers stay far below 2^53).
struct Host {
  lt::DType dtype = lt::f32;
  Shape shape;
  std::vector<double> v;
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  double at(const Shape& idx) const;
};

int64_t numel_of(const Shape& s);
std::vector<int64_t> strides_of(const Shape& s);
std::string str(const Shape& s);
// Every multi-index of `shape` in row-major order (callers keep tensors small).
std::vector<Shape> all_indices(const Shape& shape);
// NumPy broadcasting of two shapes; fails the test (and returns {}) when they do not fit.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Flat index into a tensor of `in_shape` for multi-index `out_idx` of the broadcast shape.
int64_t broadcast_flat(const Shape& out_idx, const Shape& in_shape);

// Rounds `x` to what dtype stores (f32 rounding, integer wrap, bool as 0/1).
double round_to(lt::DType dtype, double x);

enum class Fill {
  kAny,       // floats in [-3, 3], ints in [-9, 9], bools 0/1
  kPositive,  // floats in [0.1, 3], ints in [1, 9]
  kNonZero,   // like kAny but never 0
};
// Deterministic data of `dtype` and `shape`; `salt` varies the stream.
Host make(lt::DType dtype, const Shape& shape, Fill fill = Fill::kAny, uint32_t salt = 0);
Host from_values(lt::DType dtype, const Shape& shape, std::vector<double> values);

lt::Tensor upload(const lt::Device& dev, const Host& h);
Host download(const lt::Tensor& t);

// Reference elementwise ops over broadcast shapes.
Host ref_unary(const Host& a, lt::DType out_dtype, const std::function<double(double)>& f);
Host ref_binary(const Host& a, const Host& b, lt::DType out_dtype,
                const std::function<double(double, double)>& f);

// Checks dtype, shape and every element of `got` against `want`; reports the first few
// mismatches with their index.
void expect_close(const lt::Tensor& got, const Host& want, Tol tol, const std::string& what);
// Same, for sums of products (matmul, conv2d): the relative term is taken against
// `magnitude` (the same op on |a| and |b|), the scale that rounding of inputs and partial sums
// (bf16 on tpu_sim) is proportional to, so a result that cancels to near 0 is judged fairly.
void expect_close_scaled(const lt::Tensor& got, const Host& want, const Host& magnitude, Tol tol,
                         const std::string& what);
Host abs_of(const Host& h);

// A non-contiguous view holding exactly `h`'s values: h is uploaded permuted (or reversed) and
// the op under test sees the result of a permute / slice, not a fresh buffer.
lt::Tensor upload_permuted(const lt::Device& dev, const Host& h);
lt::Tensor upload_reversed(const lt::Device& dev, const Host& h);

// Runs `fn` and expects an lt::Error whose code is `code` and whose message contains every
// string of `needles` (the op name, the offending shapes or dtypes). LT_STATUS_OK as `code`
// accepts any code (where docs/ops.md does not fix the category).
void expect_error(const std::function<void()>& fn, lt_status_code code,
                  const std::vector<std::string>& needles,
                  std::source_location where = std::source_location::current());

const std::vector<lt::DType>& float_dtypes();
const std::vector<lt::DType>& int_dtypes();
const std::vector<lt::DType>& numeric_dtypes();
inline bool is_float(lt::DType d) {
  return d == lt::f32 || d == lt::f64;
}

}  // namespace ltc

#endif  // LT_TESTS_CONFORMANCE_H
