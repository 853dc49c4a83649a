// fuzz_onnx.cpp — libFuzzer harness of the ONNX loader (onnx/src: protobuf parse, checks,
// initializer decoding) and of the trace of a run: the input is the .onnx file. A model that
// loads is described, then traced once with small inputs of its declared shapes (symbolic
// dims as 1); nothing is materialised, so a model asking for huge tensors costs nothing.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "lazytensor/lt_onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lt_device* dev = lt::fuzz::eager_device();
  std::string path = lt::fuzz::write_scratch("model.onnx", data, size);
  char* info = nullptr;
  if (lt::fuzz::ok(lt_onnx_describe_file(path.c_str(), &info))) lt_string_free(info);
  lt_onnx_model* m = nullptr;
  if (!lt::fuzz::ok(lt_onnx_load(dev, path.c_str(), &m))) return 0;
  if (lt::fuzz::ok(lt_onnx_describe(m, &info))) lt_string_free(info);
  size_t n = lt_onnx_input_count(m);
  std::vector<lt_tensor*> inputs;
  std::vector<const char*> names;
  bool small = true;
  for (size_t i = 0; i < n; ++i) {
    lt_dtype dt{};
    size_t rank = 0;
    const int64_t* dims = nullptr;
    if (!lt::fuzz::ok(lt_onnx_input_info(m, i, &dt, &rank, &dims, nullptr))) std::abort();
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (size_t k = 0; dims && k < rank; ++k) {
      int64_t d = dims[k] < 0 ? 1 : dims[k];
      if (d > 4096) small = false;
      shape.push_back(d);
      numel *= small ? d : 1;
    }
    if (!small || numel > 4096) {
      small = false;
      break;
    }
    lt_tensor* t = nullptr;
    if (!lt::fuzz::ok(lt_full(dev, shape.data(), shape.size(), 1.0, dt, &t))) {
      small = false;
      break;
    }
    inputs.push_back(t);
    names.push_back(lt_onnx_input_name(m, i));
  }
  if (small) {
    std::vector<lt_tensor*> outs(lt_onnx_output_count(m), nullptr);
    if (lt::fuzz::ok(lt_onnx_run(m, names.data(), inputs.data(), inputs.size(), outs.data()))) {
      for (lt_tensor* t : outs) {
        if (!t) std::abort();
        lt_tensor_free(t);
      }
    }
  }
  for (lt_tensor* t : inputs) lt_tensor_free(t);
  lt_onnx_free(m);
  return 0;
}
