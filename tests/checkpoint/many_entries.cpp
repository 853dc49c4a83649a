// many_entries.cpp — lt_checkpoint_many N: writes a safetensors file of N F32 scalars by hand,
// opens it through the C API and checks every name is found (issue #29: a header of 1,000,000
// entries took minutes, the reader being quadratic). CTest runs it with N = 1,000,000 under a
// 60 s timeout, which is the hang bound, not a speed goal (the figure lives in
// benchmarks/checkpoint). Prints the open time.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include "lazytensor/lt.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: lt_checkpoint_many N FILE\n");
    return 2;
  }
  const long n = std::atol(argv[1]);
  const std::string path = argv[2];
  std::string h = "{";
  h.reserve(static_cast<size_t>(n) * 72);
  for (long i = 0; i < n; ++i) {
    h += (i ? ",\"" : "\"") + ("layer." + std::to_string(i) + ".w") +
         "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * i) + "," +
         std::to_string(4 * i + 4) + "]}";
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    uint64_t len = h.size();
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(len >> (8 * i));
    f.write(reinterpret_cast<const char*>(b), 8);
    f.write(h.data(), static_cast<std::streamsize>(h.size()));
    std::string data(static_cast<size_t>(n) * 4, '\0');
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  auto t0 = std::chrono::steady_clock::now();
  lt_checkpoint* ck = nullptr;
  lt_error* e = lt_checkpoint_open(path.c_str(), &ck);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::unlink(path.c_str());
  if (e) {
    std::fprintf(stderr, "open failed: %s\n", lt_error_message(e));
    return 1;
  }
  int bad = 0;
  if (lt_checkpoint_count(ck) != static_cast<size_t>(n)) bad = 1;
  for (long i = 0; i < n && !bad; i += 9973) {
    std::string name = "layer." + std::to_string(i) + ".w";
    if (lt_error* ie = lt_checkpoint_info(ck, name.c_str(), nullptr, nullptr, nullptr)) {
      std::fprintf(stderr, "%s\n", lt_error_message(ie));
      bad = 1;
    }
    if (std::string(lt_checkpoint_name(ck, static_cast<size_t>(i))) != name) bad = 1;
  }
  lt_checkpoint_close(ck);
  std::printf("%ld entries, header %zu bytes: opened in %.3f s%s\n", n, h.size(), s,
              bad ? " (WRONG CONTENT)" : "");
  return bad;
}
