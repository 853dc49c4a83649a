// lt-run — the main job: trains a classifier (an MLP, a small CNN or a ResNet) on the shipped
// digits set or on Fashion-MNIST (--data fashion-mnist) on the chosen backend, one lt_sync per step
// (forward + backward + update as one cached graph), then reports test accuracy and the runtime's
// metrics.
// --model gpt trains, saves, resumes and samples a character-level GPT (gpt.cpp).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "lazytensor/amp.hpp"
#include "lazytensor/autograd.hpp"
#include "lazytensor/data.hpp"
#include "lazytensor/distributed.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/nn.hpp"
#include "lazytensor/models/cnn.hpp"
#include "lazytensor/models/mlp.hpp"
#include "lazytensor/models/resnet.hpp"
#include "lazytensor/models/train_step.hpp"
#include "lazytensor/optim.hpp"
#include "gpt.hpp"
#include "progress.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string device, data, metrics_json, optimizer = "adam", model = "mlp", plugin_path;
  std::string profile;  // Chrome trace of every step's stages (LT_PROFILE)
  std::string precision = "f32";
  int64_t epochs = 20, batch = 32, hidden = 128;
  int64_t channels = 16;  // resnet: channels of the first stage (doubled by each later one)
  double lr = 0.003, test_fraction = 0.2;
  double target_accuracy = 0;             // > 0: evaluate after every epoch, stop once reached
  double lr_decay = 1;                    // the learning rate is multiplied by it after every epoch
  int64_t train_rows = 0, test_rows = 0;  // > 0: the first rows only (quick runs, tests)
  uint64_t seed = 42;
  bool metrics = false;          // --metrics: the full text report at the end
  std::string loss_log;          // per-epoch training loss, one line each, full precision (tests)
  bool distributed = false;      // data-parallel over `mpirun -np N` (docs/distributed.md)
  size_t bucket_bytes = 0;       // gradient all-reduce bucket; 0: lt::dist::kDefaultBucketBytes
  std::string fault;             // test hook "RANK:STEP:exit|error" (tests/dist)
  std::string augment = "none";  // "flip": random left-right mirroring of training images
};

// --metrics: the runtime's whole text report (per-graph timing, top graphs, regions, counters).
void print_metrics_report(lt::Runtime& rt) {
  std::printf("\n%s", rt.metrics_report(false).c_str());
}

}  // namespace

// --inject-fault RANK:STEP:MODE (tests/dist): on that rank at that step, exit(3) without a
// word ("exit": a process that dies), throw an lt::Error ("error": a rank that fails), or
// sleep forever ("hang": a rank that is stuck; the others stop after LT_DIST_TIMEOUT).
void lt_run::maybe_fault(const std::string& spec, int64_t step) {
  if (spec.empty()) return;
  long long r = -1, s = -1;
  char mode[16] = {0};
  if (std::sscanf(spec.c_str(), "%lld:%lld:%15s", &r, &s, mode) != 3)
    throw lt::Error(LT_STATUS_INVALID_ARGUMENT,
                    "--inject-fault '" + spec + "' is not RANK:STEP:exit|error|hang");
  if (r != lt::dist::rank() || s != step) return;
  if (std::string(mode) == "exit") std::_Exit(3);
  if (std::string(mode) == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  throw lt::Error(LT_STATUS_INTERNAL, "injected fault at step " + std::to_string(step));
}

namespace {

// Every model maps a [B, side * side] batch of square images to [B, 10] logits.
class Model : public lt::nn::Module {
 public:
  virtual lt::Tensor forward(const lt::Tensor& x) = 0;
};

// A network of lt::models on the rows as they come (`side` 0: the mlp) or reshaped to
// [B, 1, side, side] images (the cnn: models/cnn.hpp; the resnet: models/resnet.hpp's
// image_resnet_config, the same network benchmarks/train/fashion_mnist_torch.py builds).
template <class Net>
class OnImages : public Model {
 public:
  template <class... Args>
  explicit OnImages(int64_t side, Args&&... args) : side_(side), net_(std::forward<Args>(args)...) {
    register_module("net", net_);
  }
  lt::Tensor forward(const lt::Tensor& x) override {
    return side_ ? net_(x.reshape({x.dim(0), 1, side_, side_})) : net_(x);
  }

 private:
  int64_t side_;
  Net net_;
};

// Fashion-MNIST is asked for as "fashion-mnist" (Debian's dataset-fashion-mnist) or
// "fashion-mnist:DIR" (the same four idx files elsewhere); empty when `data` names a CSV.
std::optional<std::string> fashion_mnist_dir(const std::string& data) {
  const std::string key = "fashion-mnist";
  if (data == key) return std::string(lt::data::kFashionMnistDir);
  if (data.rfind(key + ":", 0) == 0) return data.substr(key.size() + 1);
  return std::nullopt;
}

// Test accuracy in batches of at most 1,000 rows (a 28x28 ResNet's activations for 10,000
// images at once would take gigabytes); every batch but the last has one shape, one graph.
double evaluate(Model& model, const lt::Device& dev, const lt::data::Dataset& test) {
  lt::NoGradGuard no_grad;
  const int64_t batch = std::min<int64_t>(1000, test.rows());
  int64_t correct = 0;
  for (int64_t first = 0; first < test.rows(); first += batch) {
    const int64_t n = std::min(batch, test.rows() - first);
    std::vector<float> x(test.x.begin() + first * test.features,
                         test.x.begin() + (first + n) * test.features);
    std::vector<int64_t> y(test.y.begin() + first, test.y.begin() + first + n);
    auto tx = lt::Tensor::from(dev, x, {n, test.features}).set_name("x");
    auto ty = lt::Tensor::from(dev, y, {n}).set_name("y");
    correct += lt::nn::correct_count(model.forward(tx), ty).item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(test.rows());
}

// The shipped digits set: installed beside the program (<prefix>/bin/../share/lazytensor), else
// in the source tree this lt-run was built from.
std::string default_digits() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path installed = exe.parent_path() / LT_RUN_INSTALLED_DATA;
    if (std::filesystem::exists(installed, ec)) return installed.lexically_normal().string();
  }
  return LT_RUN_SOURCE_DATA;
}

// --profile: after the runtime wrote the trace, the spans by total time (a kernel's spans are
// inside their region's, a region's inside its step's: the rows overlap by design).
void print_profile_table(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("traceEvents")) {
    std::fprintf(stderr, "lt-run: --profile: %s is not a readable trace\n", path.c_str());
    return;
  }
  struct Row {
    int64_t count = 0;
    double us = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    Row& r = rows[{e.value("cat", ""), e.value("name", "")}];
    ++r.count;
    r.us += e.value("dur", 0.0);
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Row>> top(rows.begin(), rows.end());
  std::sort(top.begin(), top.end(), [](auto& a, auto& b) { return a.second.us > b.second.us; });
  std::printf("\nprofile: %s (Chrome trace: open it in Perfetto or chrome://tracing)\n",
              path.c_str());
  std::printf("  %-10s %-40s %8s %12s %10s\n", "category", "span", "count", "total ms", "mean ms");
  for (size_t i = 0; i < top.size() && i < 20; ++i) {
    const auto& [key, r] = top[i];
    std::printf("  %-10s %-40.40s %8lld %12.2f %10.3f\n", key.first.c_str(), key.second.c_str(),
                static_cast<long long>(r.count), r.us / 1e3, r.us / 1e3 / double(r.count));
  }
}

// A counter of the metrics report, or `fallback` when this core does not report it.
double metric_or(const lt::Runtime& rt, const char* name, double fallback) {
  try {
    return rt.metric(name);
  } catch (const lt::Error&) {
    return fallback;
  }
}

// [tpu_sim engineer] Context-wide stats of a backend plugin (sums over every execution, e.g.
// tpu_sim's simulated_ns): the core's "plugin.<backend>.total.<stat>" metrics when it exposes
// them, else the plugin report's plugins[].stats. Empty when the plugin reports none.
std::map<std::string, double> plugin_totals(const lt::Runtime& rt, const std::string& backend) {
  static const char* const kStats[] = {"simulated_ns", "flops",     "executions", "peak_tflops",
                                       "mxu_ns",       "vector_ns", "dma_ns",     "hbm_bytes"};
  std::map<std::string, double> out;
  for (const char* s : kStats) {
    try {
      out[s] = rt.metric("plugin." + backend + ".total." + s);
    } catch (const lt::Error&) {
      if (out.empty()) break;  // the core does not expose totals: use the plugin report
    }
  }
  if (!out.empty()) return out;
  try {
    auto report = nlohmann::json::parse(rt.plugin_report(true));
    for (const auto& p : report.at("plugins")) {
      if (p.value("name", "") != backend || !p.contains("stats")) continue;
      for (const auto& [k, v] : p["stats"].items()) {
        if (v.is_number()) out[k] = v.get<double>();
      }
    }
  } catch (const std::exception&) {
    out.clear();  // no report: the caller prints nothing simulated
  }
  return out;
}

int run(const Options& o, const lt_run::GptOptions& gpt) {
  if (!o.profile.empty()) ::setenv("LT_PROFILE", o.profile.c_str(), 1);  // read by create()
  lt::RuntimeOptions ro;
  ro.device = o.device;
  ro.plugin_path = o.plugin_path;
  lt::Runtime rt = lt::Runtime::create(ro);
  lt::Device dev = o.device.empty() ? rt.default_device() : rt.find_device(o.device);
  const bool dist = o.distributed;
  const bool rank0 = lt::dist::rank() == 0;
  if (dist)  // before any step: ranks that disagree would run different step counts
    lt::dist::check_same_settings(
        dev, {{"--batch", o.batch},
              {"--epochs", o.epochs},
              {"--hidden", o.hidden},
              {"--channels", o.channels},
              {"--seed", static_cast<int64_t>(o.seed)},
              {"--model", static_cast<int64_t>(std::hash<std::string>{}(o.model))},
              {"--steps", gpt.steps},
              {"--context", gpt.context},
              {"--layers", gpt.layers},
              {"--width", gpt.width}});
  if (o.model == "gpt") {
    int rc = lt_run::run_gpt(gpt, rt, dev);
    if (rc == 0 && o.metrics && rank0) print_metrics_report(rt);
    return rc;
  }

  const std::string data = o.data.empty() ? default_digits() : o.data;
  lt::data::Dataset train, test;
  const auto fashion = fashion_mnist_dir(data);
  if (fashion) {  // its own test set; one mean and deviation over every pixel
    std::tie(train, test) = lt::data::load_fashion_mnist(*fashion);
    auto norm = lt::data::GlobalStandardizer::fit(train);
    norm.apply(train);
    norm.apply(test);
  } else {
    lt::data::Dataset all = lt::data::load_digits(data);
    std::tie(train, test) = lt::data::train_test_split(all, o.test_fraction, o.seed);
    auto norm = lt::data::Standardizer::fit(train);
    norm.apply(train);
    norm.apply(test);
  }
  auto first_rows = [](lt::data::Dataset& d, int64_t n) {
    if (n <= 0 || n >= d.rows()) return;
    d.x.resize(static_cast<size_t>(n * d.features));
    d.y.resize(static_cast<size_t>(n));
  };
  first_rows(train, o.train_rows);
  first_rows(test, o.test_rows);
  const auto side = static_cast<int64_t>(std::lround(std::sqrt(double(train.features))));
  // Evaluated after every epoch: the learning curve of a real data set, or a target to stop at.
  const bool eval_each_epoch = fashion || o.target_accuracy > 0;

  std::unique_ptr<Model> model;
  if (o.model == "mlp") {
    model = std::make_unique<OnImages<lt::models::Mlp>>(
        0, dev, std::vector<int64_t>{train.features, o.hidden, 10}, o.seed);
  } else if (o.model == "cnn") {
    lt::models::SmallCnnConfig c;
    c.side = side;
    c.seed = o.seed;
    model = std::make_unique<OnImages<lt::models::SmallCnn>>(side, dev, c);
  } else if (o.model == "resnet") {
    model = std::make_unique<OnImages<lt::models::ResNet>>(
        side, dev, lt::models::image_resnet_config(side, o.channels, o.seed));
  } else {
    throw lt::Error(LT_STATUS_INVALID_ARGUMENT,
                    "unknown --model '" + o.model + "' (mlp, cnn, resnet, gpt)");
  }
  model->materialize();
  if (dist) lt::dist::broadcast_parameters(model->parameters());
  std::unique_ptr<lt::optim::Optimizer> opt;
  if (o.optimizer == "adam") {
    opt = std::make_unique<lt::optim::Adam>(model->parameters(), o.lr);
  } else if (o.optimizer == "sgd") {
    opt = std::make_unique<lt::optim::SGD>(model->parameters(), o.lr, 0.9);
  } else {
    throw lt::Error(LT_STATUS_INVALID_ARGUMENT,
                    "unknown --optimizer '" + o.optimizer + "' (adam, sgd)");
  }

  // --precision bf16 / f16: matmul and conv in 16 bits with f32 accumulation, the rest in f32
  // (f32 master weights); f16 adds dynamic loss scaling.
  const lt::DType precision = lt::amp::parse_precision(o.precision);
  lt::amp::Autocast autocast(precision);
  std::optional<lt::amp::GradScaler> scaler;
  if (precision == lt::f16) scaler.emplace(dev);

  lt::data::Batcher batches(train, o.batch, o.seed);
  if (dist) batches.set_shard(lt::dist::shard());
  batches.keep_last_partial(true);  // a dynamic step (docs/dynamic-shapes.md), not a recompile
  if (o.augment == "flip") {
    batches.set_random_hflip(side);
  } else if (o.augment != "none") {
    throw lt::Error(LT_STATUS_INVALID_ARGUMENT,
                    "unknown --augment '" + o.augment + "' (none, flip)");
  }
  const int64_t steps = batches.batches();
  const size_t bucket = o.bucket_bytes ? o.bucket_bytes : lt::dist::kDefaultBucketBytes;
  lt::models::StepOptions step_options;  // models/train_step.hpp
  step_options.scaler = scaler ? &*scaler : nullptr;
  step_options.all_reduce = step_options.reduce_loss = dist;
  step_options.bucket_bytes = bucket;
  std::printf(
      "lt-run: %s on %s | %s: train %lld rows, test %lld | %s, %lld parameters, %s | "
      "batch %lld (last batch of each epoch %lld rows), %lld steps/epoch\n",
      o.model.c_str(), dev.name().c_str(), data.c_str(), static_cast<long long>(train.rows()),
      static_cast<long long>(test.rows()), o.optimizer.c_str(),
      static_cast<long long>(model->num_parameters()), o.precision.c_str(),
      static_cast<long long>(o.batch), static_cast<long long>(batches.batch_rows(steps - 1)),
      static_cast<long long>(steps));
  if (dist)
    std::printf(
        "distributed: world size %lld (MPI), global batch %lld = %lld rows on rank 0, "
        "gradients all-reduced in buckets of %zu bytes\n",
        static_cast<long long>(lt::dist::world_size()), static_cast<long long>(o.batch),
        static_cast<long long>(batches.local_batch()), bucket);
  std::FILE* loss_log = nullptr;
  if (!o.loss_log.empty() && rank0 && !(loss_log = std::fopen(o.loss_log.c_str(), "w")))
    throw lt::Error(LT_STATUS_IO_ERROR, o.loss_log + ": cannot write");
  rt.reset_metrics();
  const std::string backend = dev.backend();
  const auto sim_before = plugin_totals(rt, backend);

  lt_run::StepBar bar(o.epochs * steps);
  auto t0 = Clock::now();
  bar.compiling();
  double last_loss = 0;
  double eval_s = 0, target_s = -1;  // evaluation time (not training); time to the target
  nlohmann::json curve = nlohmann::json::array();
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    auto te = Clock::now();
    batches.shuffle(epoch);
    double loss_sum = 0;
    for (int64_t s = 0; s < steps; ++s) {
      lt_run::maybe_fault(o.fault, (epoch - 1) * steps + s);
      auto [x, y] = batches.batch_one_hot(dev, s);
      // This rank's mean times its share of the global batch: the gradients' sum over the ranks
      // is the gradient of the global batch's mean, whatever the split.
      step_options.share =
          static_cast<double>(batches.local_batch(s)) / static_cast<double>(batches.batch_rows(s));
      // forward + backward + reduction + update: one graph, cached after step 1
      auto forward = [&] { return lt::nn::cross_entropy(model->forward(x), y); };
      lt::Tensor loss = lt::models::train_step(forward, *opt, step_options).loss;
      loss_sum += loss.item<float>();
      char extra[96];
      std::snprintf(extra, sizeof extra, "| epoch %lld/%lld  loss %.4f",
                    static_cast<long long>(epoch), static_cast<long long>(o.epochs),
                    loss_sum / static_cast<double>(s + 1));
      bar.step((epoch - 1) * steps + s + 1, extra);
    }
    last_loss = loss_sum / static_cast<double>(steps);
    if (o.lr_decay != 1) opt->set_lr(opt->lr() * o.lr_decay);  // a graph parameter: no recompile
    if (loss_log) std::fprintf(loss_log, "%lld %.9g\n", static_cast<long long>(epoch), last_loss);
    const double epoch_s = std::chrono::duration<double>(Clock::now() - te).count();
    if (!eval_each_epoch) {
      bar.line(" epoch %3lld/%lld  loss %.4f  (%.2f s)", static_cast<long long>(epoch),
               static_cast<long long>(o.epochs), last_loss, epoch_s);
      continue;
    }
    auto tv = Clock::now();
    const double acc = evaluate(*model, dev, test);  // every rank: they stop together
    eval_s += std::chrono::duration<double>(Clock::now() - tv).count();
    const double trained_s = std::chrono::duration<double>(Clock::now() - t0).count() - eval_s;
    bar.line(" epoch %3lld/%lld  loss %.4f  test accuracy %.2f%%  (%.2f s; %.1f s trained)",
             static_cast<long long>(epoch), static_cast<long long>(o.epochs), last_loss,
             100.0 * acc, epoch_s, trained_s);
    curve.push_back({{"epoch", epoch},
                     {"train_loss", last_loss},
                     {"test_accuracy", acc},
                     {"train_seconds", trained_s}});
    if (o.target_accuracy > 0 && acc >= o.target_accuracy) {
      target_s = trained_s;
      bar.line(" reached %.2f%% test accuracy after %lld epochs, %.1f s of training",
               100.0 * o.target_accuracy, static_cast<long long>(epoch), trained_s);
      break;
    }
  }
  bar.finish();
  double train_s = std::chrono::duration<double>(Clock::now() - t0).count() - eval_s;
  const double train_compile_s = metric_or(rt, "compile_ms", 0) / 1e3;
  if (loss_log) std::fclose(loss_log);
  // A simulated backend (tpu_sim) prices each program it runs; the delta over the training
  // loop is the simulated time of the training steps (host wall time says nothing about it).
  nlohmann::json simulated;
  char sim_line[256] = "";
  const auto sim_after = plugin_totals(rt, backend);
  if (sim_before.count("simulated_ns") && sim_after.count("simulated_ns")) {
    auto delta = [&](const char* k) {
      return sim_after.count(k) && sim_before.count(k) ? sim_after.at(k) - sim_before.at(k) : 0.0;
    };
    const double total_steps = static_cast<double>(steps * o.epochs);
    const double sim_ns = delta("simulated_ns"), flops = delta("flops");
    const double peak = sim_after.count("peak_tflops") ? sim_after.at("peak_tflops") * 1e12 : 0;
    const double util = sim_ns > 0 && peak > 0 ? flops / (sim_ns * 1e-9 * peak) : 0.0;
    simulated = {{"step_us", sim_ns / 1e3 / total_steps},
                 {"total_ms", sim_ns / 1e6},
                 {"steps", total_steps},
                 {"programs_per_step", delta("executions") / total_steps},
                 {"mxu_utilization", util},
                 {"flops_per_step", flops / total_steps},
                 {"mxu_us_per_step", delta("mxu_ns") / 1e3 / total_steps},
                 {"vector_us_per_step", delta("vector_ns") / 1e3 / total_steps},
                 {"dma_us_per_step", delta("dma_ns") / 1e3 / total_steps},
                 {"hbm_bytes_per_step", delta("hbm_bytes") / total_steps}};
    std::snprintf(sim_line, sizeof sim_line,
                  "simulated %s time: %.2f us/step, %.3f ms total over %.0f steps (%.2f "
                  "programs/step), MXU utilisation %.2f%%\n",
                  backend.c_str(), sim_ns / 1e3 / total_steps, sim_ns / 1e6, total_steps,
                  delta("executions") / total_steps, 100.0 * util);
  }

  if (!rank0) return 0;  // rank 0 alone evaluates and reports
  const double acc = eval_each_epoch && !curve.empty() ? curve.back()["test_accuracy"].get<double>()
                                                       : evaluate(*model, dev, test);
  const auto correct = std::llround(acc * static_cast<double>(test.rows()));
  // Compile time apart from step time: the first step carries the compile of the step's graph,
  // the steady rate is over the steps after it.
  const int64_t steady = bar.steady_steps();
  std::printf(
      "test accuracy: %.2f%% (%lld/%lld)   training time: %.2f s = first step %.2f s (compile "
      "%.2f s in all) + %lld steps at %.2f ms/step\n",
      100.0 * acc, static_cast<long long>(correct), static_cast<long long>(test.rows()), train_s,
      bar.first_step_seconds(), train_compile_s, static_cast<long long>(steady),
      steady ? 1000.0 * bar.steady_seconds() / static_cast<double>(steady) : 0.0);

  if (sim_line[0]) std::fputs(sim_line, stdout);
  std::printf("metrics: compiles %.0f, cache hits %.0f, cache misses %.0f, fallbacks %.0f\n",
              metric_or(rt, "compiles", -1), metric_or(rt, "cache_hits", -1),
              metric_or(rt, "cache_misses", -1), metric_or(rt, "fallback_nodes", -1));
  if (!o.metrics_json.empty()) {
    nlohmann::json out;
    out["device"] = dev.name();
    out["model"] = o.model;
    out["optimizer"] = o.optimizer;
    out["epochs"] = o.epochs;
    out["batch"] = o.batch;
    out["precision"] = o.precision;
    out["steps_per_epoch"] = steps;
    out["final_train_loss"] = last_loss;
    out["test_accuracy"] = acc;
    out["train_seconds"] = train_s;
    out["first_step_seconds"] = bar.first_step_seconds();
    out["train_compile_seconds"] = train_compile_s;
    if (!curve.empty()) out["curve"] = curve;
    if (o.target_accuracy > 0)
      out["seconds_to_target"] = target_s >= 0 ? nlohmann::json(target_s) : nlohmann::json();
    out["steady_ms_per_step"] =
        steady ? 1000.0 * bar.steady_seconds() / static_cast<double>(steady) : 0.0;
    out["metrics"] = nlohmann::json::parse(rt.metrics_report(true));
    if (!simulated.is_null()) out["simulated"] = simulated;
    std::ofstream f(o.metrics_json);
    if (!f) throw lt::Error(LT_STATUS_IO_ERROR, o.metrics_json + ": cannot write");
    f << out.dump(2) << "\n";
  }
  if (o.metrics) print_metrics_report(rt);
  return 0;
}

}  // namespace

// Validators whose messages say what is wrong ("'abc' is not a whole number", "must be at
// least 1, got 0") instead of CLI11's "not in range 0 to <300 digits>".
CLI::Validator whole_at_least(long long min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != s.size()) return "'" + s + "' is not a whole number";
        if (v < min) return "must be at least " + std::to_string(min) + ", got " + s;
        return std::string();
      },
      "INT>=" + std::to_string(min));
}
CLI::Validator real_above(double min, bool or_equal) {
  return CLI::Validator(
      [min, or_equal](std::string& s) -> std::string {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != s.size() || !std::isfinite(v))
          return "'" + s + "' is not a number";
        if (or_equal ? v < min : v <= min)
          return std::string("must be ") + (or_equal ? "at least 0" : "positive") + ", got " + s;
        return std::string();
      },
      or_equal ? "NUM>=0" : "NUM>0");
}

int main(int argc, char** argv) {
  Options o;
  lt_run::GptOptions g;
  CLI::App app{"lt-run: train a digits classifier or a character-level GPT with LazyTensor"};
  app.add_option("--device", o.device, "device, e.g. cpu_jit or cpu_eager:0 (default: fastest)");
  app.add_option(
      "--model", o.model,
      "mlp (64-hidden-10), cnn, resnet (residual CNN, group norm), or gpt (character-level LM)");
  app.add_option("--epochs", o.epochs, "training epochs (mlp, cnn, resnet)")
      ->capture_default_str()
      ->check(whole_at_least(1));
  app.add_option("--batch", o.batch, "batch size")->capture_default_str()->check(whole_at_least(1));
  app.add_option("--lr", o.lr, "learning rate (gpt: peak of the schedule, default 1e-3)")
      ->check(real_above(0, false));
  app.add_option("--seed", o.seed, "seed for initialisation, data order and sampling");
  app.add_option("--data", o.data,
                 "digits CSV (.gz or plain; default: the shipped set, <prefix>/share/lazytensor), "
                 "or fashion-mnist (Debian's dataset-fashion-mnist; fashion-mnist:DIR for its "
                 "idx files elsewhere)");
  app.add_option("--target-accuracy", o.target_accuracy,
                 "evaluate after every epoch and stop once the test accuracy reaches this "
                 "fraction (e.g. 0.92); reports the training time to it")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--augment", o.augment,
                 "none, or flip: mirror each training image left-right with probability 1/2 "
                 "(images; drawn anew every epoch)");
  app.add_option("--lr-decay", o.lr_decay,
                 "multiply the learning rate by this after every epoch (mlp, cnn, resnet)")
      ->check(real_above(0, false));
  app.add_option("--train-rows", o.train_rows,
                 "train on the first N rows of the training set only (quick runs)")
      ->check(whole_at_least(1));
  app.add_option("--test-rows", o.test_rows, "evaluate on the first N test rows only")
      ->check(whole_at_least(1));
  app.add_option("--metrics-json", o.metrics_json, "write accuracy and metrics as JSON here");
  app.add_option("--profile", o.profile,
                 "write a Chrome trace of every step's stages here (LT_PROFILE; open it in "
                 "Perfetto or chrome://tracing)");
  app.add_flag("--metrics", o.metrics,
               "print the full metrics report at the end: per-graph compile and run time, the top "
               "graphs, per-region time, counters");
  app.add_option("--optimizer", o.optimizer, "adam or sgd (momentum 0.9)");
  app.add_option("--hidden", o.hidden, "MLP hidden width")
      ->capture_default_str()
      ->check(whole_at_least(1));
  app.add_option("--channels", o.channels,
                 "resnet: channels of the first stage, doubled by each later stage (a multiple "
                 "of its 4 norm groups)")
      ->capture_default_str()
      ->check(whole_at_least(4));
  app.add_option("--plugin-path", o.plugin_path, "extra plugin directories (':'-separated)");
  app.add_option("--precision", o.precision,
                 "f32, or bf16 / f16 automatic mixed precision (matmul and conv in 16 bits, "
                 "f32 accumulation and master weights; f16 with loss scaling)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_flag("--distributed", o.distributed,
               "data-parallel training over the MPI processes this was started with (mpirun "
               "-np N lt-run --distributed ...): --batch is the global batch, split by rank; "
               "rank 0 alone prints and saves");
  app.add_option("--bucket-bytes", o.bucket_bytes,
                 "--distributed: gradient all-reduce bucket size in bytes (default 25 MiB)")
      ->check(whole_at_least(1));
  app.add_option("--loss-log", o.loss_log,
                 "write each epoch's training loss (gpt: each evaluation's step, train and "
                 "validation loss) here, full precision");
  app.add_option("--inject-fault", o.fault, "test hook: RANK:STEP:exit|error|hang")->group("");
  auto* gg = app.add_option_group("gpt", "--model gpt");
  gg->add_option("--corpus", g.corpus, "text file or directory of fortune files")
      ->capture_default_str();
  gg->add_option("--steps", g.steps, "total training steps (a loaded run continues to it)")
      ->capture_default_str()
      ->check(whole_at_least(0));
  gg->add_option("--context", g.context, "context length")
      ->capture_default_str()
      ->check(whole_at_least(1));
  gg->add_option("--layers", g.layers, "transformer blocks")
      ->capture_default_str()
      ->check(whole_at_least(1));
  gg->add_option("--width", g.width, "model width")
      ->capture_default_str()
      ->check(whole_at_least(1));
  gg->add_option("--heads", g.heads, "attention heads")
      ->capture_default_str()
      ->check(whole_at_least(1));
  gg->add_option("--dropout", g.dropout, "dropout probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9));
  gg->add_option("--weight-decay", g.weight_decay, "AdamW weight decay")
      ->capture_default_str()
      ->check(real_above(0, true));
  gg->add_option("--clip", g.clip, "gradient clipping: max global norm")
      ->capture_default_str()
      ->check(real_above(0, false));
  gg->add_option("--warmup", g.warmup, "linear warm-up steps before the cosine decay")
      ->capture_default_str()
      ->check(whole_at_least(0));
  gg->add_option("--eval-every", g.eval_every,
                 "steps between validation evaluations (0: at the end only)")
      ->capture_default_str()
      ->check(whole_at_least(0));
  gg->add_option("--eval-batches", g.eval_batches, "validation batches per evaluation")
      ->capture_default_str()
      ->check(whole_at_least(1));
  gg->add_option("--stop-after", g.stop_after,
                 "stop (and --save) after this step, as an interrupted run would; the "
                 "learning-rate schedule still spans --steps (0: run to --steps)")
      ->capture_default_str()
      ->check(whole_at_least(0));
  gg->add_option("--save", g.save, "write a safetensors checkpoint here after training");
  gg->add_option("--load", g.load,
                 "start from this checkpoint (model, optimizer, step) and the run's settings it "
                 "stores (batch, steps, lr, ...; an option given again overrides, and says so)");
  gg->add_option("--generate", g.generate,
                 "characters to sample after training (with --load and no --steps: sample "
                 "without training)")
      ->capture_default_str()
      ->check(whole_at_least(0));
  gg->add_flag("--recompute", g.recompute,
               "rematerialise each transformer block: recompute its activations in the backward "
               "pass instead of keeping them (same losses, less activation memory; "
               "docs/memory.md)");
  gg->add_option("--prompt", g.prompt, "text the sample continues");
  gg->add_option("--temperature", g.temperature, "sampling temperature")
      ->capture_default_str()
      ->check(real_above(0, false));
  gg->add_option("--top-k", g.top_k, "sample among the k likeliest characters (0: all)")
      ->capture_default_str()
      ->check(whole_at_least(0));
  CLI11_PARSE(app, argc, argv);
  g.batch = o.batch;
  g.precision = o.precision;
  g.seed = o.seed;
  g.loss_log = o.loss_log;
  g.distributed = o.distributed;
  g.bucket_bytes = o.bucket_bytes;
  g.fault = o.fault;
  g.metrics_json = o.metrics_json;
  if (app.count("--lr")) g.lr = o.lr;
  for (const char* name :
       {"batch", "lr", "seed", "precision", "steps", "context", "layers", "width", "heads",
        "dropout", "weight-decay", "clip", "warmup", "eval-every", "eval-batches", "corpus"})
    if (app.count(std::string("--") + name)) g.given.insert(name);
  if (o.distributed) {
    try {
      lt::dist::init();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "lt-run: --distributed: %s\n", e.what());
      return 1;
    }
    // Rank 0 alone prints progress and results; every rank still reports its errors.
    if (lt::dist::rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 1;
  }
  try {
    int rc = run(o, g);  // the runtime, and with it the trace, ends inside
    if (rc == 0 && !o.profile.empty() && (!o.distributed || lt::dist::rank() == 0))
      print_profile_table(o.profile);
    if (o.distributed) lt::dist::finalize();
    return rc;
  } catch (const std::exception& e) {
    if (o.distributed && lt::dist::world_size() > 1) {
      // The others wait in their next collective: end the whole group, naming this rank.
      std::string what = std::string("lt-run: error: ") + e.what();
      std::fputs("\n", stderr);  // off the progress bar's line
      lt::dist::abort(1, what);
    }
    std::fprintf(stderr, "\nlt-run: error: %s\n", e.what());
    return 1;
  }
}
