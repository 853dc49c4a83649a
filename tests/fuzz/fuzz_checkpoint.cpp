// fuzz_checkpoint.cpp — libFuzzer harness of the safetensors reader (core/src/checkpoint.cpp):
// the input is the file. Opening validates the header; then every accessor of lt.h runs and
// every tensor is read onto cpu_eager and copied out.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lt_device* dev = lt::fuzz::eager_device();
  std::string path = lt::fuzz::write_scratch("input.safetensors", data, size);
  lt_checkpoint* ck = nullptr;
  if (!lt::fuzz::ok(lt_checkpoint_open(path.c_str(), &ck))) return 0;
  size_t n = lt_checkpoint_count(ck);
  for (size_t i = 0; i <= n; ++i) {  // one past the end must answer NULL
    const char* name = lt_checkpoint_name(ck, i);
    if ((i == n) != (name == nullptr)) std::abort();
    if (!name) break;
    lt_dtype dtype{};
    size_t rank = 0;
    const int64_t* shape = nullptr;
    if (!lt::fuzz::ok(lt_checkpoint_info(ck, name, &dtype, &rank, &shape))) std::abort();
    lt_tensor* t = nullptr;
    if (!lt::fuzz::ok(lt_checkpoint_tensor(ck, name, dev, &t))) continue;
    if (lt_tensor_dtype(t) != dtype || lt_tensor_rank(t) != rank) std::abort();
    // The validated byte range bounds the tensor by the file's size.
    std::vector<unsigned char> host(static_cast<size_t>(lt_tensor_numel(t)) * lt_dtype_size(dtype));
    lt::fuzz::ok(lt_tensor_to_host(t, host.data(), host.size()));
    lt_tensor_free(t);
  }
  lt::fuzz::ok(lt_checkpoint_info(ck, "no such tensor", nullptr, nullptr, nullptr));
  size_t m = lt_checkpoint_metadata_count(ck);
  for (size_t i = 0; i < m; ++i) {
    const char* key = lt_checkpoint_metadata_key(ck, i);
    if (!key || !lt_checkpoint_metadata(ck, key)) std::abort();
  }
  if (lt_checkpoint_metadata_key(ck, m)) std::abort();
  lt_checkpoint_close(ck);
  return 0;
}
