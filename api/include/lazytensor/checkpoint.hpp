// checkpoint.hpp — header-only C++ over the checkpoint C API of lt.h (safetensors files):
// lt::save and lt::Checkpoint for named tensors, and lt::save_checkpoint / lt::load_checkpoint
// for an nn::Module's parameters plus an optimizer's state. docs/checkpoints.md has the format.
//
// Names in a module checkpoint: every parameter under its Module::named_parameters() name
// ("fc1.weight"), the optimizer's Optimizer::named_state() under "optim.<name>" ("optim.step",
// "optim.m.0", ...), the optimizer's name() as metadata "lt.optimizer", and the format as
// metadata "lt.format" ("2": nn::Linear weights [out, in]; absent in format-1 files, read with
// a one-time conversion). lt::load_state_dict reads PyTorch-saved safetensors state dicts.
#ifndef LAZYTENSOR_CHECKPOINT_HPP
#define LAZYTENSOR_CHECKPOINT_HPP

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/optim.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace lt {

// Writes `tensors` (distinct, non-empty names) and string metadata to `path` atomically
// (a temporary file in the same directory, flushed, then renamed over `path`). Materialises
// the tensors.
inline void save(const std::string& path,
                 const std::vector<std::pair<std::string, Tensor>>& tensors,
                 const std::map<std::string, std::string>& metadata = {}) {
  std::vector<const char*> names, keys, values;
  std::vector<lt_tensor*> raw;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "save: '" + path + "': tensor '" + name + "' is null");
    }
    if (name.find('\0') != std::string::npos) {  // the C API would see a shorter name
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "save: '" + path + "': a tensor name contains a NUL byte (names are C strings)");
    }
    names.push_back(name.c_str());
    raw.push_back(t.get());
  }
  for (const auto& [k, v] : metadata) {
    if (k.find('\0') != std::string::npos || v.find('\0') != std::string::npos) {
      throw Error(LT_STATUS_INVALID_ARGUMENT, "save: '" + path +
                                                  "': a metadata key or value contains a NUL "
                                                  "byte (metadata strings are C strings)");
    }
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  check(lt_checkpoint_save(path.c_str(), raw.size(), names.data(), raw.data(), keys.size(),
                           keys.data(), values.data()));
}

// What a checkpoint says about one tensor.
struct TensorInfo {
  DType dtype = LT_DTYPE_INVALID;
  std::vector<int64_t> shape;
};

// An open checkpoint file (move-only; closes on destruction). Opening validates the whole
// file; tensors are read when asked for.
class Checkpoint {
 public:
  Checkpoint() = default;
  explicit Checkpoint(const std::string& path) { check(lt_checkpoint_open(path.c_str(), &c_)); }
  static Checkpoint open(const std::string& path) { return Checkpoint(path); }
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
  Checkpoint(Checkpoint&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Checkpoint& operator=(Checkpoint&& o) noexcept {
    if (this != &o) {
      lt_checkpoint_close(c_);
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  ~Checkpoint() { lt_checkpoint_close(c_); }

  lt_checkpoint* get() const { return c_; }
  bool defined() const { return c_ != nullptr; }

  size_t size() const { return lt_checkpoint_count(req()); }
  // In file order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < size(); ++i) out.emplace_back(lt_checkpoint_name(c_, i));
    return out;
  }
  bool contains(const std::string& name) const {
    lt_error* e = lt_checkpoint_info(req(), name.c_str(), nullptr, nullptr, nullptr);
    if (e && lt_error_code(e) == LT_STATUS_NOT_FOUND) {
      lt_error_destroy(e);
      return false;
    }
    check(e);
    return true;
  }
  // Throws NOT_FOUND naming the tensor when absent.
  TensorInfo info(const std::string& name) const {
    TensorInfo out;
    size_t rank = 0;
    const int64_t* shape = nullptr;
    check(lt_checkpoint_info(req(), name.c_str(), &out.dtype, &rank, &shape));
    out.shape.assign(shape, shape + rank);
    return out;
  }
  // Reads one tensor onto `device`; throws NOT_FOUND naming the tensor when absent.
  Tensor tensor(const std::string& name, const Device& device) const {
    lt_tensor* out = nullptr;
    check(lt_checkpoint_tensor(req(), name.c_str(), device.get(), &out));
    return Tensor(out);
  }
  std::optional<std::string> metadata(const std::string& key) const {
    const char* v = lt_checkpoint_metadata(req(), key.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  }
  std::map<std::string, std::string> metadata() const {
    std::map<std::string, std::string> out;
    for (size_t i = 0; i < lt_checkpoint_metadata_count(req()); ++i) {
      const char* k = lt_checkpoint_metadata_key(c_, i);
      out.emplace(k, lt_checkpoint_metadata(c_, k));
    }
    return out;
  }

 private:
  lt_checkpoint* req() const {
    if (!c_) throw Error(LT_STATUS_INVALID_ARGUMENT, "Checkpoint: not open");
    return c_;
  }
  lt_checkpoint* c_ = nullptr;
};

namespace detail {
inline constexpr const char* kOptimizerKey = "lt.optimizer";
inline constexpr const char* kOptimizerPrefix = "optim.";
// Module checkpoint format, metadata "lt.format": absent in format 1 (nn::Linear weights
// [in, out]); "2" since Linear stores [out, in] like PyTorch. Readers convert format 1 once.
inline constexpr const char* kFormatKey = "lt.format";
inline constexpr int kFormat = 2;

// The file names (parameters, and optimizer state "optim.<slot>.<i>") whose tensors a format-1
// file holds transposed (Module::transposed_since_format2).
inline std::set<std::string> format1_transposed(nn::Module& module, optim::Optimizer* optimizer) {
  std::set<std::string> out;
  std::vector<const Tensor*> moved = module.transposed_since_format2();
  auto is_moved = [&](const Tensor* t) {
    return std::find(moved.begin(), moved.end(), t) != moved.end();
  };
  for (auto& [name, slot] : module.named_parameters())
    if (is_moved(slot)) out.insert(name);
  if (optimizer) {
    const auto& ps = optimizer->parameters();
    for (auto& [name, t] : optimizer->named_state()) {
      size_t dot = name.rfind('.');
      if (dot == std::string::npos) continue;
      const std::string index = name.substr(dot + 1);
      if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) continue;
      size_t i = std::stoul(index);
      if (i < ps.size() && is_moved(ps[i])) out.insert(kOptimizerPrefix + name);
    }
  }
  return out;
}
inline std::vector<int64_t> reversed(std::vector<int64_t> v) {
  std::reverse(v.begin(), v.end());
  return v;
}
}  // namespace detail

// Saves the module's parameters and, when given, the optimizer's state (see the top of this
// file for the names). `metadata` must not use the key "lt.optimizer". Call it after
// lt::sync at the end of a step, so that nothing pending is computed twice.
inline void save_checkpoint(const std::string& path, nn::Module& module,
                            optim::Optimizer* optimizer = nullptr,
                            std::map<std::string, std::string> metadata = {}) {
  for (const char* key : {detail::kOptimizerKey, detail::kFormatKey}) {
    if (metadata.count(key)) {
      throw Error(LT_STATUS_INVALID_ARGUMENT,
                  "save_checkpoint: '" + path + "': metadata key '" + key + "' is reserved");
    }
  }
  metadata[detail::kFormatKey] = std::to_string(detail::kFormat);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, slot] : module.named_parameters()) tensors.emplace_back(name, *slot);
  if (optimizer) {
    for (auto& [name, t] : optimizer->named_state())
      tensors.emplace_back(detail::kOptimizerPrefix + name, std::move(t));
    metadata[detail::kOptimizerKey] = optimizer->name();
  }
  save(path, tensors, metadata);
}

// Loads a checkpoint written by save_checkpoint into `module` (and `optimizer`, when given).
// Every expected tensor's presence, dtype and shape is checked, and tensors the module does
// not have are reported, before anything is assigned: on any error the module and the
// optimizer are exactly as they were. Without an optimizer, optimizer state in the file is
// ignored. Loaded parameters keep the requires-grad setting of the ones they replace, on the
// same devices.
inline void load_checkpoint(const std::string& path, nn::Module& module,
                            optim::Optimizer* optimizer = nullptr) {
  Checkpoint ck(path);
  const std::optional<std::string> format = ck.metadata(detail::kFormatKey);
  if (format && *format != std::to_string(detail::kFormat)) {
    throw Error(LT_STATUS_UNSUPPORTED, "load_checkpoint: '" + path + "' has checkpoint format '" +
                                           *format + "'; this LazyTensor reads formats 1 and " +
                                           std::to_string(detail::kFormat));
  }
  // Format 1 (no "lt.format"): Linear weights and their optimizer state are stored transposed.
  const std::set<std::string> transposed =
      format ? std::set<std::string>{} : detail::format1_transposed(module, optimizer);
  std::vector<std::string> problems;
  lt_status_code code = LT_STATUS_OK;
  auto problem = [&](lt_status_code c, std::string what) {
    if (code == LT_STATUS_OK) code = c;
    problems.push_back(std::move(what));
  };
  std::set<std::string> expected;
  auto expect = [&](const std::string& name, const Tensor& like, const char* what) {
    expected.insert(name);
    if (!ck.contains(name)) {
      problem(LT_STATUS_NOT_FOUND, std::string(what) + " '" + name + "' is missing");
      return;
    }
    TensorInfo info = ck.info(name);
    if (info.dtype != like.dtype()) {
      problem(LT_STATUS_DTYPE_MISMATCH, "'" + name + "' is " + dtype_name(info.dtype) +
                                            " in the file but " + dtype_name(like.dtype()) +
                                            " in the " + what);
    } else if ((transposed.count(name) ? detail::reversed(info.shape) : info.shape) !=
               like.shape()) {
      problem(LT_STATUS_SHAPE_MISMATCH,
              "'" + name + "' has shape " + detail::shape_string(info.shape) + " in the file but " +
                  detail::shape_string(like.shape_span()) + " in the " + what +
                  (transposed.count(name) ? " (read as checkpoint format 1, [in, out], since the "
                                            "file has no 'lt.format')"
                                          : ""));
    }
  };

  auto params = module.named_parameters();
  for (auto& [name, slot] : params) expect(name, *slot, "module");
  std::vector<std::pair<std::string, Tensor>> state;
  bool state_checked = false;  // "optim.*" names were compared with the optimizer's
  if (optimizer) {
    state = optimizer->named_state();
    std::optional<std::string> saved_by = ck.metadata(detail::kOptimizerKey);
    if (!saved_by) {
      problem(LT_STATUS_NOT_FOUND, "it holds no optimizer state (saved without an optimizer)");
    } else if (*saved_by != optimizer->name()) {
      problem(LT_STATUS_INVALID_ARGUMENT,
              "its optimizer state is " + *saved_by + "'s, not " + optimizer->name() + "'s");
    } else {
      for (auto& [name, t] : state) expect(detail::kOptimizerPrefix + name, t, "optimizer");
      state_checked = true;
    }
  }
  for (const std::string& name : ck.names()) {
    if (expected.count(name)) continue;
    bool optim_state = name.rfind(detail::kOptimizerPrefix, 0) == 0;
    if (optim_state && !state_checked) continue;  // ignored, or already reported above
    problem(LT_STATUS_INVALID_ARGUMENT,
            "unexpected tensor '" + name + "' (not in the " +
                (optim_state ? std::string("optimizer's state") : std::string("module")) + ")");
  }
  if (!problems.empty()) {
    std::string msg = "load_checkpoint: '" + path + "' does not match: ";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    throw Error(code, msg);
  }

  // Read everything first; any failure here still leaves the module and optimizer untouched.
  // A format-1 tensor stored transposed is transposed once, here, and computed at once.
  auto read = [&](const std::string& name, const Device& device) {
    Tensor t = ck.tensor(name, device);
    if (!transposed.count(name)) return t;
    NoGradGuard no_grad;
    return t.t().materialize();
  };
  std::vector<Tensor> values;
  values.reserve(params.size());
  for (auto& [name, slot] : params) {
    Tensor t = read(name, slot->device());
    if (requires_grad(*slot)) set_requires_grad(t);
    values.push_back(std::move(t));
  }
  if (optimizer) {
    std::vector<std::pair<std::string, Tensor>> loaded;
    for (auto& [name, t] : state)
      loaded.emplace_back(name, read(detail::kOptimizerPrefix + name, t.device()));
    optimizer->load_state(loaded);  // checks everything before it changes anything
  }
  for (size_t i = 0; i < params.size(); ++i) *params[i].second = std::move(values[i]);
}

// Loads a state dict saved by PyTorch (safetensors.torch.save_file(model.state_dict(), path))
// into the same module tree, by PyTorch's names (Module::torch_named_parameters: "0.weight" in
// an nn::Sequential, LayerNorm's "weight"/"bias"); Linear weights are [out, in] on both sides.
// Floating tensors of another dtype (f16, bf16, f64) are converted to the parameter's dtype.
// strict (PyTorch's default): tensors the module does not have are an error too. Everything is
// checked before anything is assigned; the error lists every problem.
inline void load_state_dict(const std::string& path, nn::Module& module, bool strict = true) {
  Checkpoint ck(path);
  auto params = module.torch_named_parameters();
  std::vector<std::string> problems;
  lt_status_code code = LT_STATUS_OK;
  auto problem = [&](lt_status_code c, std::string what) {
    if (code == LT_STATUS_OK) code = c;
    problems.push_back(std::move(what));
  };
  auto is_float = [](DType d) { return d == f32 || d == f64 || d == bf16 || d == f16; };
  std::set<std::string> expected;
  for (auto& [name, slot] : params) {
    expected.insert(name);
    if (!ck.contains(name)) {
      problem(LT_STATUS_NOT_FOUND, "'" + name + "' is missing");
      continue;
    }
    TensorInfo info = ck.info(name);
    if (info.dtype != slot->dtype() && !(is_float(info.dtype) && is_float(slot->dtype()))) {
      problem(LT_STATUS_DTYPE_MISMATCH, "'" + name + "' is " + dtype_name(info.dtype) +
                                            " in the file but " + dtype_name(slot->dtype()) +
                                            " in the module");
    } else if (info.shape != slot->shape()) {
      problem(LT_STATUS_SHAPE_MISMATCH,
              "'" + name + "' has shape " + detail::shape_string(info.shape) + " in the file but " +
                  detail::shape_string(slot->shape_span()) + " in the module");
    }
  }
  if (strict) {
    for (const std::string& name : ck.names())
      if (!expected.count(name))
        problem(LT_STATUS_INVALID_ARGUMENT, "unexpected tensor '" + name + "' (not in the module)");
  }
  if (!problems.empty()) {
    std::string msg = "load_state_dict: '" + path + "' does not match: ";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    throw Error(code, msg);
  }
  std::vector<Tensor> values;
  for (auto& [name, slot] : params) {
    Tensor t = ck.tensor(name, slot->device());
    if (t.dtype() != slot->dtype()) {
      NoGradGuard no_grad;
      t = t.cast(slot->dtype()).materialize();
    }
    if (requires_grad(*slot)) set_requires_grad(t);
    values.push_back(std::move(t));
  }
  for (size_t i = 0; i < params.size(); ++i) *params[i].second = std::move(values[i]);
}

}  // namespace lt

#endif  // LAZYTENSOR_CHECKPOINT_HPP
