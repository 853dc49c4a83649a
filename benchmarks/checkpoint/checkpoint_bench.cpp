// checkpoint_bench.cpp — time to open a safetensors file of N one-element tensors (the header is
// about 70 bytes an entry; 1,000,000 entries are 70 MB, within the 100 MB header cap). The
// counter ns_per_entry stays flat when the reader is linear.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "lazytensor/lt.h"

namespace {

std::string write_file(int64_t n) {
  std::string path = "/tmp/lt_bench_ckpt_" + std::to_string(::getpid()) + ".safetensors";
  std::string h = "{";
  for (int64_t i = 0; i < n; ++i)
    h += (i ? ",\"" : "\"") + ("layer." + std::to_string(i) + ".w") +
         "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + std::to_string(4 * i) + "," +
         std::to_string(4 * i + 4) + "]}";
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(len >> (8 * i)));
  f << h << std::string(static_cast<size_t>(n) * 4, '\0');
  return path;
}

void BM_OpenManyEntries(benchmark::State& st) {
  const std::string path = write_file(st.range(0));
  for (auto _ : st) {
    lt_checkpoint* ck = nullptr;
    if (lt_error* e = lt_checkpoint_open(path.c_str(), &ck)) {
      st.SkipWithError(lt_error_message(e));
      lt_error_destroy(e);
      break;
    }
    lt_checkpoint_close(ck);
  }
  ::unlink(path.c_str());
  st.counters["seconds_per_entry"] = benchmark::Counter(
      static_cast<double>(st.range(0)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_OpenManyEntries)->Arg(10000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
