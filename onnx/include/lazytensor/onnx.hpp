// onnx.hpp — the C++ API of LazyTensor::onnx over lt_onnx.h: lt::onnx::Model loads an ONNX
// file and runs it on a device; outputs are ordinary lazy lt::Tensors (they compose with
// hand-written code and autograd). Errors are lt::Error, as in lazytensor.hpp.
#ifndef LAZYTENSOR_ONNX_HPP
#define LAZYTENSOR_ONNX_HPP

#include "lazytensor/lazytensor.hpp"
#include "lazytensor/lt_onnx.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lt::onnx {

struct ValueInfo {
  std::string name;
  DType dtype = LT_DTYPE_INVALID;  // the carrier dtype (uint8 travels as i32)
  std::string onnx_type;           // "float", "uint8", ...
  bool has_rank = false;
  std::vector<int64_t> dims;  // -1: symbolic (dim_param) or unknown
};

class Model {
 public:
  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  Model& operator=(Model&& o) noexcept {
    if (this != &o) {
      lt_onnx_free(m_);
      m_ = std::exchange(o.m_, nullptr);
    }
    return *this;
  }
  ~Model() { lt_onnx_free(m_); }

  static Model load(const Device& device, const std::string& path) {
    Model m;
    check(lt_onnx_load(device.get(), path.c_str(), &m.m_));
    return m;
  }
  lt_onnx_model* get() const { return m_; }

  std::vector<ValueInfo> inputs() const { return infos(true); }
  std::vector<ValueInfo> outputs() const { return infos(false); }

  // Traces the model with named inputs; returns the outputs in graph order.
  std::vector<Tensor> run(const std::vector<std::pair<std::string, Tensor>>& feeds) const {
    std::vector<const char*> names;
    std::vector<lt_tensor*> ts;
    for (auto& [n, t] : feeds) {
      names.push_back(n.c_str());
      ts.push_back(t.get());
    }
    std::vector<lt_tensor*> outs(lt_onnx_output_count(m_), nullptr);
    check(lt_onnx_run(m_, names.data(), ts.data(), ts.size(), outs.data()));
    std::vector<Tensor> result;
    for (lt_tensor* t : outs) result.emplace_back(t);
    return result;
  }
  // The same, outputs by name.
  std::map<std::string, Tensor> run_named(
      const std::vector<std::pair<std::string, Tensor>>& feeds) const {
    std::vector<Tensor> outs = run(feeds);
    std::map<std::string, Tensor> m;
    for (size_t i = 0; i < outs.size(); ++i) m[lt_onnx_output_name(m_, i)] = outs[i];
    return m;
  }
  std::string describe() const {
    char* s = nullptr;
    check(lt_onnx_describe(m_, &s));
    return detail::take_string(s);
  }

 private:
  std::vector<ValueInfo> infos(bool in) const {
    std::vector<ValueInfo> v;
    size_t n = in ? lt_onnx_input_count(m_) : lt_onnx_output_count(m_);
    for (size_t i = 0; i < n; ++i) {
      ValueInfo vi;
      lt_dtype dt;
      size_t rank = 0;
      const int64_t* dims = nullptr;
      const char* ot = nullptr;
      check(in ? lt_onnx_input_info(m_, i, &dt, &rank, &dims, &ot)
               : lt_onnx_output_info(m_, i, &dt, &rank, &dims, &ot));
      vi.name = in ? lt_onnx_input_name(m_, i) : lt_onnx_output_name(m_, i);
      vi.dtype = dt;
      vi.onnx_type = ot ? ot : "";
      vi.has_rank = dims != nullptr;
      if (dims) vi.dims.assign(dims, dims + rank);
      v.push_back(std::move(vi));
    }
    return v;
  }
  lt_onnx_model* m_ = nullptr;
};

// Reads a TensorProto (.pb) or NumPy (.npy) file onto `device`.
inline Tensor read_tensor(const Device& device, const std::string& path, int* onnx_type = nullptr) {
  lt_tensor* out = nullptr;
  check(lt_onnx_read_tensor(device.get(), path.c_str(), &out, onnx_type));
  return Tensor(out);
}

}  // namespace lt::onnx

#endif  // LAZYTENSOR_ONNX_HPP
