// make_seeds.cpp — writes the checkpoint seed corpus with the checkpoint API itself, so the
// seeds are real files of today's writer: lt_fuzz_make_seeds <dir>.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lazytensor/lt.h"

namespace {

void check(lt_error* e) {
  if (!e) return;
  std::fprintf(stderr, "make_seeds: %s\n", lt_error_message(e));
  std::exit(1);
}

lt_tensor* tensor(lt_device* dev, lt_dtype d, std::vector<int64_t> shape, double v) {
  lt_tensor* t = nullptr;
  check(lt_full(dev, shape.data(), shape.size(), v, d, &t));
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: lt_fuzz_make_seeds <dir>\n");
    return 2;
  }
  std::string dir = argv[1];
  lt_runtime_options o{};
  o.struct_size = LT_RUNTIME_OPTIONS_STRUCT_SIZE;
  o.device = "cpu_eager";
  lt_runtime* rt = nullptr;
  check(lt_runtime_create(&o, &rt));
  lt_device* dev = lt_runtime_default_device(rt);

  // One tensor of every dtype, with metadata.
  const lt_dtype dtypes[] = {LT_DTYPE_F32,  LT_DTYPE_F64,  LT_DTYPE_I32, LT_DTYPE_I64,
                             LT_DTYPE_BOOL, LT_DTYPE_BF16, LT_DTYPE_F16};
  const char* names[] = {"f32", "f64", "i32", "i64", "bool", "bf16", "f16"};
  std::vector<lt_tensor*> all;
  for (lt_dtype d : dtypes) all.push_back(tensor(dev, d, {2, 3}, 1));
  const char* keys[] = {"format", "step"};
  const char* values[] = {"pt", "42"};
  check(lt_checkpoint_save((dir + "/dtypes.safetensors").c_str(), all.size(), names, all.data(), 2,
                           keys, values));
  // A scalar, an empty tensor and a rank-4 tensor.
  lt_tensor* odd[] = {tensor(dev, LT_DTYPE_F32, {}, 3.5), tensor(dev, LT_DTYPE_I64, {0, 4}, 0),
                      tensor(dev, LT_DTYPE_F32, {1, 2, 1, 2}, -2)};
  const char* odd_names[] = {"scalar", "empty", "weight.0"};
  check(lt_checkpoint_save((dir + "/shapes.safetensors").c_str(), 3, odd_names, odd, 0, nullptr,
                           nullptr));
  // Nothing at all.
  check(lt_checkpoint_save((dir + "/empty.safetensors").c_str(), 0, nullptr, nullptr, 0, nullptr,
                           nullptr));
  for (lt_tensor* t : all) lt_tensor_free(t);
  for (lt_tensor* t : odd) lt_tensor_free(t);
  lt_runtime_destroy(rt);
  return 0;
}
