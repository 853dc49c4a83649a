// DistBenchmark.cpp — data-parallel training over MPI, run as `mpirun -np N bench_dist`
// (benchmarks/dist/run.sh runs N = 1 and 2 and computes the scaling efficiency):
//   AllReduce/<bytes>        f32 all_reduce through the lazy graph (trace, cached plan, device
//                            copies, MPI_Allreduce): algorithm bandwidth bytes / time
//   MpiAllReduce/<bytes>     MPI_Allreduce alone on a host buffer: what the lazy path adds
//   TrainStep/<model>/<n>    a data-parallel step at a fixed global batch (strong scaling):
//                            ms per step and samples/s, with the world size and core count
//   Bucket/<model>/<bytes>   the same step with gradient all-reduce buckets of that size
// Every rank runs every benchmark for a fixed number of iterations (collectives must match);
// rank 0 alone reports.
#include <benchmark/benchmark.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_runtime.h"
#include "lazytensor/distributed.hpp"
#include "lazytensor/models/mlp.hpp"
#include "lazytensor/models/train_step.hpp"

namespace {

lt::Runtime& runtime() {
  return lt::bench::runtime(lt::bench::runtime_options("silent"));
}
lt::Device dev() {
  return runtime().default_device();
}

void context_counters(benchmark::State& state) {
  state.counters["world_size"] = static_cast<double>(lt::dist::world_size());
  state.counters["cores"] = static_cast<double>(std::thread::hardware_concurrency());
}

void BM_AllReduce(benchmark::State& state) {
  const int64_t bytes = state.range(0), n = bytes / 4;
  lt::Tensor x = lt::full(dev(), {n}, 1.0);
  lt::sync(dev());
  (void)x.all_reduce().to_vector<float>();  // compile outside the timed loop
  for (auto _ : state) {
    lt::Tensor y = x.all_reduce();
    lt::sync(dev());
    benchmark::DoNotOptimize(y.get());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  context_counters(state);
}

void BM_MpiAllReduce(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<float> buf(static_cast<size_t>(bytes / 4), 1.0f);
  for (auto _ : state) {
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  context_counters(state);
}

// One model and its data: a step is forward, backward, gradient all-reduce, update, sync
// (models/train_step.hpp).
struct Job {
  std::function<lt::models::StepResult(const lt::models::StepOptions&)> step;
  std::shared_ptr<void> keep;  // the model and its optimizer
  size_t gradient_tensors = 0;
  int64_t global_batch = 0;
  double share = 1;  // this rank's rows of the global batch
};

// SGD with momentum for both models.
std::unique_ptr<lt::optim::Optimizer> sgd(std::vector<lt::Tensor*> params) {
  return std::make_unique<lt::optim::SGD>(std::move(params), 0.01, 0.9);
}

Job make_job(const std::string& model) {
  Job j;
  const lt::data::Shard shard = lt::dist::shard();
  if (model == "mlp") {
    j.global_batch = 128;
    struct Trained {
      lt::models::Mlp model{dev(), {784, 512, 512, 10}, 1};
      std::unique_ptr<lt::optim::Optimizer> opt;
    };
    auto m = std::make_shared<Trained>();
    m->model.materialize();
    m->opt = sgd(m->model.parameters());
    const int64_t rows = shard.count(j.global_batch);
    std::mt19937 gen(1 + static_cast<unsigned>(shard.rank));
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> xs(static_cast<size_t>(rows * 784)), ys(static_cast<size_t>(rows * 10), 0);
    for (float& v : xs) v = nd(gen);
    for (int64_t i = 0; i < rows; ++i) ys[static_cast<size_t>(i * 10 + i % 10)] = 1.0f;
    lt::Tensor x = lt::Tensor::from(dev(), xs, {rows, 784});
    lt::Tensor y = lt::Tensor::from(dev(), ys, {rows, 10});
    j.share = static_cast<double>(rows) / static_cast<double>(j.global_batch);
    Trained* mp = m.get();
    j.step = [mp, x, y](const lt::models::StepOptions& o) {
      return lt::models::train_step([&] { return lt::nn::cross_entropy(mp->model(x), y); },
                                    *mp->opt, o);
    };
    j.gradient_tensors = mp->opt->parameters().size();
    j.keep = m;
  } else {  // a small GPT: many small tensors (norms, biases) besides the matrices
    j.global_batch = 16;
    lt::models::GptConfig c;
    c.vocab = 96;
    c.context = 64;
    c.layers = 2;
    c.dim = 128;
    c.heads = 4;
    c.dropout = 0.0;
    auto m = std::make_shared<lt::models::GptTraining>(dev(), c, sgd);
    const int64_t rows = shard.count(j.global_batch);
    std::vector<int64_t> toks(static_cast<size_t>(rows * c.context)), next(toks.size());
    for (size_t i = 0; i < toks.size(); ++i) {
      toks[i] = static_cast<int64_t>((i * 7 + 3) % 96);
      next[i] = static_cast<int64_t>((i * 7 + 10) % 96);
    }
    lt::Tensor x = lt::Tensor::from(dev(), toks, {rows, c.context});
    lt::Tensor y = lt::Tensor::from(dev(), next, {rows * c.context});
    j.share = static_cast<double>(rows) / static_cast<double>(j.global_batch);
    lt::models::GptTraining* mp = m.get();
    j.step = [mp, x, y](const lt::models::StepOptions& o) { return mp->step(x, y, 0, o); };
    j.gradient_tensors = mp->parameters().size();
    j.keep = m;
  }
  return j;
}

void run_steps(benchmark::State& state, const std::string& model, size_t bucket) {
  Job j = make_job(model);
  lt::models::StepOptions o;
  o.all_reduce = true;
  o.share = j.share;
  o.bucket_bytes = bucket;
  size_t collectives = 0;
  auto step = [&] { collectives = j.step(o).collectives; };
  step();  // compile outside the timed loop
  step();
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.counters["ms_per_step"] = 1e3 * s / static_cast<double>(state.iterations());
  state.counters["samples_per_s"] = static_cast<double>(j.global_batch * state.iterations()) / s;
  state.counters["collectives_per_step"] = static_cast<double>(collectives);
  state.counters["gradient_tensors"] = static_cast<double>(j.gradient_tensors);
  context_counters(state);
}

void BM_TrainStep(benchmark::State& state, std::string model) {
  run_steps(state, model, lt::dist::kDefaultBucketBytes);
}
void BM_Bucket(benchmark::State& state, std::string model) {
  run_steps(state, model, static_cast<size_t>(state.range(0)));
}

class Silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  try {
    lt::dist::init();
  } catch (const lt::Error& e) {
    std::fprintf(stderr, "bench_dist: %s\n", e.what());
    return 1;
  }
  const bool rank0 = lt::dist::rank() == 0;
  // Only rank 0 writes --benchmark_out; the others run the same benchmarks silently.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i)
    if (rank0 || std::strncmp(argv[i], "--benchmark_out", 15) != 0) args.push_back(argv[i]);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (rank0)
    std::fprintf(stderr, "bench_dist: world size %lld, %u cores on this machine, device %s\n",
                 static_cast<long long>(lt::dist::world_size()),
                 std::thread::hardware_concurrency(), dev().name().c_str());
  for (int64_t bytes = 1 << 12; bytes <= (int64_t(1) << 24); bytes *= 4) {
    benchmark::RegisterBenchmark("AllReduce", BM_AllReduce)
        ->Arg(bytes)
        ->Iterations(bytes >= (1 << 22) ? 20 : 200)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("MpiAllReduce", BM_MpiAllReduce)
        ->Arg(bytes)
        ->Iterations(bytes >= (1 << 22) ? 20 : 200)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (const char* model : {"mlp", "gpt"}) {
    benchmark::RegisterBenchmark(("TrainStep/" + std::string(model)).c_str(), BM_TrainStep,
                                 std::string(model))
        ->Iterations(30)
        ->Repetitions(3)  // run.sh takes the fastest: this machine is shared
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    for (int64_t b : {int64_t(1), int64_t(64) << 10, int64_t(1) << 20, int64_t(25) << 20})
      benchmark::RegisterBenchmark(("Bucket/" + std::string(model)).c_str(), BM_Bucket,
                                   std::string(model))
          ->Arg(b)
          ->Iterations(30)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  }
  if (rank0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Silent quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  lt::dist::finalize();
  return 0;
}
