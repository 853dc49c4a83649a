// gpt.cpp — lt-run --model gpt: trains a character-level GPT (models/gpt.hpp) on English
// text (Debian's fortunes by default), evaluates validation loss and bits per character,
// saves and resumes safetensors checkpoints, and samples text with a key/value cache.
#include "gpt.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lazytensor/amp.hpp"
#include "lazytensor/autograd.hpp"
#include "lazytensor/checkpoint.hpp"
#include "lazytensor/distributed.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/models/gpt.hpp"
#include "lazytensor/models/train_step.hpp"
#include "lazytensor/optim.hpp"
#include "lazytensor/text.hpp"
#include "progress.hpp"

namespace lt_run {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Shortest text that reads back as the same double.
std::string num(double v) {
  char buf[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// The run's settings a resumed run restores (--load), as metadata keys "run.<option>": the
// option's command-line name, its value in `o`, and how to set it back.
struct Setting {
  const char* name;
  std::string (*get)(const GptOptions&);
  void (*set)(GptOptions&, const std::string&);
};
const Setting kSettings[] = {
    {"batch", [](const GptOptions& o) { return std::to_string(o.batch); },
     [](GptOptions& o, const std::string& v) { o.batch = std::stoll(v); }},
    {"steps", [](const GptOptions& o) { return std::to_string(o.steps); },
     [](GptOptions& o, const std::string& v) { o.steps = std::stoll(v); }},
    {"lr", [](const GptOptions& o) { return num(o.lr); },
     [](GptOptions& o, const std::string& v) { o.lr = std::stod(v); }},
    {"warmup", [](const GptOptions& o) { return std::to_string(o.warmup); },
     [](GptOptions& o, const std::string& v) { o.warmup = std::stoll(v); }},
    {"weight-decay", [](const GptOptions& o) { return num(o.weight_decay); },
     [](GptOptions& o, const std::string& v) { o.weight_decay = std::stod(v); }},
    {"clip", [](const GptOptions& o) { return num(o.clip); },
     [](GptOptions& o, const std::string& v) { o.clip = std::stod(v); }},
    {"dropout", [](const GptOptions& o) { return num(o.dropout); },
     [](GptOptions& o, const std::string& v) { o.dropout = std::stod(v); }},
    {"precision", [](const GptOptions& o) { return o.precision; },
     [](GptOptions& o, const std::string& v) { o.precision = v; }},
    {"seed", [](const GptOptions& o) { return std::to_string(o.seed); },
     [](GptOptions& o, const std::string& v) { o.seed = std::stoull(v); }},
    {"eval-every", [](const GptOptions& o) { return std::to_string(o.eval_every); },
     [](GptOptions& o, const std::string& v) { o.eval_every = std::stoll(v); }},
    {"eval-batches", [](const GptOptions& o) { return std::to_string(o.eval_batches); },
     [](GptOptions& o, const std::string& v) { o.eval_batches = std::stoll(v); }},
    {"corpus", [](const GptOptions& o) { return o.corpus; },
     [](GptOptions& o, const std::string& v) { o.corpus = v; }},
};

// What a checkpoint records besides tensors, as safetensors' string metadata.
std::map<std::string, std::string> metadata(const lt::models::GptConfig& c,
                                            const lt::text::Vocab& vocab, int64_t step,
                                            const GptOptions& o) {
  nlohmann::json bytes = nlohmann::json::array();  // bytes, not chars: JSON wants UTF-8
  for (char ch : vocab.chars()) bytes.push_back(static_cast<unsigned char>(ch));
  std::map<std::string, std::string> m = {
      {"format", "lazytensor-gpt-1"},         {"vocab_bytes", bytes.dump()},
      {"context", std::to_string(c.context)}, {"layers", std::to_string(c.layers)},
      {"width", std::to_string(c.dim)},       {"heads", std::to_string(c.heads)},
      {"step", std::to_string(step)}};
  for (const Setting& s : kSettings) m[std::string("run.") + s.name] = s.get(o);
  return m;
}

// --load: the checkpoint's run settings replace the defaults of the options not given; a given
// option that differs overrides it, and says so. Returns the restored ones, for the header.
std::string restore_settings(const lt::Checkpoint& ck, const std::string& file, GptOptions& o) {
  std::string restored;
  for (const Setting& s : kSettings) {
    auto v = ck.metadata(std::string("run.") + s.name);
    if (!v) continue;  // a checkpoint from before settings were stored
    if (o.given.count(s.name)) {
      if (s.get(o) != *v)
        std::printf("lt-run: --%s %s overrides the checkpoint's %s\n", s.name, s.get(o).c_str(),
                    v->c_str());
      continue;
    }
    try {
      s.set(o, *v);
    } catch (const std::exception&) {
      throw lt::Error(LT_STATUS_INVALID_ARGUMENT,
                      file + ": bad run setting '" + s.name + "' = '" + *v + "' in its metadata");
    }
    restored += (restored.empty() ? "" : ", ") + std::string(s.name) + " " + *v;
  }
  return restored;
}

int64_t meta_int(const lt::Checkpoint& ck, const std::string& file, const char* key) {
  auto v = ck.metadata(key);
  char* end = nullptr;
  long long x = v ? std::strtoll(v->c_str(), &end, 10) : 0;
  if (!v || v->empty() || *end || x < 0) {
    throw lt::Error(
        LT_STATUS_INVALID_ARGUMENT,
        file + ": not an lt-run GPT checkpoint (metadata '" + key + "' missing or bad)");
  }
  return x;
}

lt::text::Vocab meta_vocab(const lt::Checkpoint& ck, const std::string& file) {
  auto v = ck.metadata("vocab_bytes");
  std::string chars;
  try {
    for (const auto& b : nlohmann::json::parse(v.value_or("")))
      chars.push_back(static_cast<char>(b.get<int>()));
  } catch (const std::exception&) {
    chars.clear();
  }
  if (chars.empty()) {
    throw lt::Error(LT_STATUS_INVALID_ARGUMENT,
                    file + ": not an lt-run GPT checkpoint (no vocabulary in its metadata)");
  }
  return lt::text::Vocab::from_chars(chars);
}

// Mean loss over `batches` validation batches (dropout off, no gradients).
double evaluate(lt::models::Gpt& model, const lt::Device& dev, const std::vector<int64_t>& tokens,
                const GptOptions& o, int64_t batches) {
  lt::NoGradGuard no_grad;
  model.eval();
  double sum = 0;
  const lt::data::Shard shard = o.distributed ? lt::dist::shard() : lt::data::Shard{};
  const double share = static_cast<double>(shard.count(o.batch)) / static_cast<double>(o.batch);
  for (int64_t i = 0; i < batches; ++i) {
    auto [x, y] = lt::text::sample_batch(dev, tokens, o.batch, model.config().context,
                                         o.seed ^ 0xE7A1u, static_cast<uint64_t>(i), shard);
    lt::Tensor l = model.loss(x, y);
    if (o.distributed) l = (l * share).all_reduce(LT_REDUCE_SUM);  // the global batch's mean
    sum += l.item<float>();
  }
  model.train();
  return sum / static_cast<double>(batches);
}

// Samples `n` characters after `prompt` (top-k, temperature) with a key/value cache.
std::string generate(lt::models::Gpt& model, const lt::Device& dev, const lt::text::Vocab& vocab,
                     const GptOptions& o, lt::Runtime& rt, double* compiles) {
  lt::NoGradGuard no_grad;
  model.eval();
  const int64_t ctx = model.config().context, v = model.config().vocab;
  std::vector<int64_t> tokens = vocab.encode(o.prompt.empty() ? std::string("\n") : o.prompt);
  std::string out;
  lt::models::KVCache cache;
  uint64_t draw = 0;
  // Feeds `fresh` tokens (the last of `tokens`) and returns the next token's logits.
  auto feed = [&](int64_t fresh) {
    std::vector<int64_t> chunk(tokens.end() - fresh, tokens.end());
    lt::Tensor x = lt::Tensor::from(dev, chunk, {1, fresh});
    lt::Tensor logits = model(x, &cache).slice(1, fresh - 1, fresh).reshape({v});
    // One graph computes the logits and the grown cache: reading the logits alone would leave
    // the cache pending, and every later step would recompute the whole history (a graph,
    // and a compile, growing with the length: 5.9 s per token at 110 on cpu_jit).
    lt::sync(dev);
    return logits.to_vector<float>();
  };
  // A prompt longer than the context keeps its end.
  int64_t start = std::max<int64_t>(0, static_cast<int64_t>(tokens.size()) - ctx);
  tokens.erase(tokens.begin(), tokens.begin() + start);
  std::vector<float> logits = feed(static_cast<int64_t>(tokens.size()));
  const double compiles_before = rt.metric("compiles");
  const double compile_ms_before = rt.metric("compile_ms");
  for (int64_t i = 0; i < o.generate; ++i) {
    // Top-k, then softmax at the temperature, then one draw from (seed, i).
    std::vector<int> order(static_cast<size_t>(v));
    for (int k = 0; k < v; ++k) order[static_cast<size_t>(k)] = k;
    const int64_t k = o.top_k > 0 ? std::min(o.top_k, v) : v;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
    std::vector<double> p(static_cast<size_t>(k));
    double mx = logits[static_cast<size_t>(order[0])], z = 0;
    for (int64_t j = 0; j < k; ++j) {
      p[size_t(j)] = std::exp((logits[size_t(order[size_t(j)])] - mx) / o.temperature);
      z += p[size_t(j)];
    }
    double u = static_cast<double>(lt_random_bits(o.seed, draw++) >> 11) * 0x1.0p-53 * z;
    int64_t pick = k - 1;
    for (int64_t j = 0; j < k; ++j) {
      u -= p[size_t(j)];
      if (u < 0) {
        pick = j;
        break;
      }
    }
    int64_t next = order[size_t(pick)];
    tokens.push_back(next);
    out.push_back(vocab.chr(next));
    if (i + 1 == o.generate) break;
    if (cache.length >= ctx) {
      // The window is full: start again from its second half (positions are absolute, so
      // the cache cannot slide); these re-fills have one shape, compiled once.
      cache.clear();
      tokens.erase(tokens.begin(), tokens.end() - ctx / 2);
      logits = feed(static_cast<int64_t>(tokens.size()));
    } else {
      logits = feed(1);
    }
  }
  model.train();
  *compiles = rt.metric("compiles") - compiles_before;
  return out;
}

// The training step's memory (docs/memory.md, "Memory planning"): the training state (parameters
// and optimizer moments), the step's activations and temporaries (the arena of its executable,
// the largest one the backend reports as workspace_bytes), the peak of live device buffers over
// the run, and resident = peak + arena, against the bound 1.3 x (state + arena). Printed, and
// with --metrics-json written with every step's loss and the metrics report.
void print_memory(lt::Runtime& rt, const lt::Device& dev, lt::models::Gpt& model,
                  lt::optim::Optimizer& opt, const GptOptions& o, const std::vector<double>& losses,
                  double donated) {
  double state = 0;
  for (lt::Tensor* p : model.parameters())
    state += static_cast<double>(p->numel() * lt::dtype_size(p->dtype()));
  for (auto& [name, t] : opt.named_state())
    state += static_cast<double>(t.numel() * lt::dtype_size(t.dtype()));
  nlohmann::json report = nlohmann::json::parse(rt.metrics_report(true));
  double arena = 0;
  for (const auto& g : report["graphs"])
    for (const auto& r : g["regions"])
      if (r["backend_stats"].contains("workspace_bytes"))
        arena = std::max(arena, r["backend_stats"]["workspace_bytes"].get<double>());
  const double peak = rt.metric("memory." + dev.name() + ".bytes_peak");
  const double resident = peak + arena, bound = 1.3 * (state + arena);
  std::printf(
      "memory: training state %.2f MiB, step activations and temporaries (arena) %.2f MiB, peak "
      "live buffers %.2f MiB, resident peak %.2f MiB = %.3f x (state + arena); donated %.2f "
      "MiB/step%s\n",
      state / 1048576, arena / 1048576, peak / 1048576, resident / 1048576,
      resident / (state + arena), donated / 1048576, o.recompute ? "; blocks recomputed" : "");
  if (o.metrics_json.empty()) return;
  nlohmann::json out;
  out["device"] = dev.name();
  out["model"] = "gpt";
  out["recompute"] = o.recompute;
  out["losses"] = losses;
  out["memory"] = {{"state_bytes", state},
                   {"arena_bytes", arena},
                   {"peak_live_bytes", peak},
                   {"resident_peak_bytes", resident},
                   {"bound_bytes", bound},
                   {"resident_over_state_plus_arena", resident / (state + arena)},
                   {"donated_bytes_per_step", donated}};
  out["metrics"] = report;
  std::FILE* f = std::fopen(o.metrics_json.c_str(), "w");
  if (!f) throw lt::Error(LT_STATUS_IO_ERROR, o.metrics_json + ": cannot write");
  std::fputs((out.dump(2) + "\n").c_str(), f);
  std::fclose(f);
}

}  // namespace

int run_gpt(const GptOptions& options, lt::Runtime& rt, const lt::Device& dev) {
  GptOptions o = options;
  std::unique_ptr<lt::Checkpoint> ck;
  lt::text::Vocab vocab;
  int64_t start_step = 0;
  lt::models::GptConfig cfg;
  std::string restored;
  if (!o.load.empty()) {
    ck = std::make_unique<lt::Checkpoint>(o.load);
    vocab = meta_vocab(*ck, o.load);
    cfg.context = meta_int(*ck, o.load, "context");
    cfg.layers = meta_int(*ck, o.load, "layers");
    cfg.dim = meta_int(*ck, o.load, "width");
    cfg.heads = meta_int(*ck, o.load, "heads");
    start_step = meta_int(*ck, o.load, "step");
    // The model's shape is the checkpoint's: a different one given again cannot apply.
    const std::pair<const char*, std::pair<int64_t, int64_t>> shape[] = {
        {"context", {o.context, cfg.context}},
        {"layers", {o.layers, cfg.layers}},
        {"width", {o.width, cfg.dim}},
        {"heads", {o.heads, cfg.heads}}};
    for (const auto& [name, v] : shape)
      if (o.given.count(name) && v.first != v.second)
        std::printf("lt-run: --%s %lld ignored: the checkpoint's model has %s %lld\n", name,
                    (long long)v.first, name, (long long)v.second);
    restored = restore_settings(*ck, o.load, o);
    // Sampling from a checkpoint trains only when steps are asked for.
    if (o.generate > 0 && !o.given.count("steps")) o.steps = start_step;
  } else {
    cfg.context = o.context;
    cfg.layers = o.layers;
    cfg.dim = o.width;
    cfg.heads = o.heads;
  }
  cfg.dropout = o.dropout;
  cfg.seed = o.seed;
  cfg.recompute_blocks = o.recompute;
  // --precision: training, evaluation and sampling under autocast (f16: loss scaling too).
  const lt::DType precision = lt::amp::parse_precision(o.precision);
  lt::amp::Autocast autocast(precision);
  const bool train = o.steps > start_step;
  lt::text::Corpus corpus;
  if (train || o.generate == 0 || !ck) {
    corpus = lt::text::Corpus::from_text(lt::text::load_corpus(o.corpus), 0.1);
    if (ck && corpus.vocab.chars() != vocab.chars()) {
      throw lt::Error(LT_STATUS_INVALID_ARGUMENT,
                      o.load + ": its vocabulary differs from the corpus " + o.corpus);
    }
    vocab = corpus.vocab;
  }
  cfg.vocab = vocab.size();

  // The model, AdamW and the step (models/train_step.hpp); parameters are broadcast in place.
  lt::models::GptTraining training(dev, cfg, lt::models::adamw(o.lr, o.weight_decay));
  lt::models::Gpt& model = training.model();
  lt::optim::Optimizer& opt = training.optimizer();
  const bool dist = o.distributed, rank0 = lt::dist::rank() == 0;
  const lt::data::Shard shard = dist ? lt::dist::shard() : lt::data::Shard{};
  const size_t bucket = o.bucket_bytes ? o.bucket_bytes : lt::dist::kDefaultBucketBytes;
  if (dist) {
    lt::dist::broadcast_parameters(model.parameters());
    model.set_shard(shard.first(o.batch));
  }
  if (ck) {
    lt::load_checkpoint(o.load, model, &opt);
    ck.reset();
  }
  const double tokens_per_step = static_cast<double>(o.batch * cfg.context);
  char data[512];
  if (corpus.train.empty() && corpus.val.empty())
    std::snprintf(data, sizeof data, "sampling from %s (no training: corpus not read)",
                  o.load.c_str());
  else
    std::snprintf(data, sizeof data,
                  "corpus %s: %zu train / %zu validation characters | batch %lld, steps "
                  "%lld..%lld",
                  o.corpus.c_str(), corpus.train.size(), corpus.val.size(), (long long)o.batch,
                  (long long)start_step, (long long)o.steps);
  std::printf(
      "lt-run: gpt on %s | %lld layers, width %lld, %lld heads, context %lld, vocab %lld, "
      "%lld parameters, %s | %s\n",
      dev.name().c_str(), (long long)cfg.layers, (long long)cfg.dim, (long long)cfg.heads,
      (long long)cfg.context, (long long)cfg.vocab, (long long)model.num_parameters(),
      o.precision.c_str(), data);
  if (!restored.empty()) std::printf("restored from %s: %s\n", o.load.c_str(), restored.c_str());
  if (dist)
    std::printf(
        "distributed: world size %lld (MPI), global batch %lld = %lld rows on rank 0, "
        "gradients all-reduced in buckets of %zu bytes\n",
        (long long)shard.world, (long long)o.batch, (long long)shard.count(o.batch), bucket);
  std::fflush(stdout);
  std::FILE* loss_log = nullptr;
  if (!o.loss_log.empty() && rank0 && !(loss_log = std::fopen(o.loss_log.c_str(), "w")))
    throw lt::Error(LT_STATUS_IO_ERROR, o.loss_log + ": cannot write");

  // A run shorter than the warm-up warms up over the whole run.
  lt::optim::WarmupCosine schedule{o.lr, std::min(o.warmup, o.steps), o.steps, o.lr * 0.1};
  std::optional<lt::amp::GradScaler> scaler;
  if (precision == lt::f16) scaler.emplace(dev);
  lt::models::StepOptions step_options;
  step_options.clip = o.clip;
  step_options.keep_grad_norm = true;  // printed with each evaluation
  step_options.scaler = scaler ? &*scaler : nullptr;
  step_options.all_reduce = step_options.reduce_loss = dist;
  step_options.bucket_bytes = bucket;
  StepBar bar(o.steps, start_step);
  if (train) bar.compiling();
  double ema = 0, tok_s = 0, interval_sum = 0;
  int64_t interval_n = 0;
  // --stop-after: an interrupted run (the schedule still spans --steps).
  const int64_t end = o.stop_after > 0 ? std::min(o.steps, o.stop_after) : o.steps;
  double train_s = 0;
  int64_t timed_steps = 0;
  const double compiles_before = rt.metric("compiles");
  const double compile_ms_before = rt.metric("compile_ms");
  std::vector<double> losses;  // every step's, for --metrics-json
  double donated_step = 0;     // bytes the last training step donated
  for (int64_t step = start_step; step < end; ++step) {
    auto t0 = Clock::now();
    const double lr = schedule(step);
    opt.set_lr(lr);
    maybe_fault(o.fault, step);
    // Forward + backward + clipping + update: one graph, compiled once. Distributed, the loss
    // is this rank's share of the global batch's mean (see main.cpp): gradients then sum.
    const lt::models::StepResult r = training.step(
        corpus.train, o.batch, o.seed, static_cast<uint64_t>(step), step_options, shard);
    const lt::Tensor &loss = r.loss, &norm = r.grad_norm;
    if (step + 1 == end) donated_step = rt.metric("donation.bytes_last_graph");
    const double l = loss.item<float>();
    losses.push_back(l);
    const double dt = seconds_since(t0);
    if (step > start_step) {  // the first step compiles
      train_s += dt;
      ++timed_steps;
      tok_s = tokens_per_step * static_cast<double>(timed_steps) / train_s;
    }
    ema = step == start_step ? l : 0.9 * ema + 0.1 * l;
    interval_sum += l;
    ++interval_n;
    char extra[96];
    std::snprintf(extra, sizeof extra, "| loss %.4f  lr %.2e  %.0f tok/s", ema, lr, tok_s);
    bar.step(step + 1, extra);
    const bool last = step + 1 == end;
    if ((o.eval_every > 0 && (step + 1) % o.eval_every == 0) || last) {
      double val = evaluate(model, dev, corpus.val, o, o.eval_batches);
      bar.line(
          "step %5lld  train loss %.4f  val loss %.4f  (%.3f bits/char)  lr "
          "%.2e  "
          "grad norm %.3f  %.0f tokens/s",
          (long long)(step + 1), interval_sum / static_cast<double>(interval_n), val,
          val / std::log(2.0), lr, norm.item<float>(), tok_s);
      if (loss_log)
        std::fprintf(loss_log, "%lld %.9g %.9g\n", (long long)(step + 1),
                     interval_sum / static_cast<double>(interval_n), val);
      interval_sum = 0;
      interval_n = 0;
    }
  }
  bar.finish();
  if (loss_log) std::fclose(loss_log);
  if (train) {
    const double flops = model.train_flops(o.batch, cfg.context);
    // ms/step is over the steps after the first, which carries the compile (shown apart).
    std::printf(
        "training: %lld steps, first step %.2f s (compile %.2f s), then %.1f ms/step, %.0f "
        "tokens/s, %.1f GFLOP/s (model FLOPs), compiles during training %.0f\n",
        (long long)std::max<int64_t>(0, end - start_step), bar.first_step_seconds(),
        (rt.metric("compile_ms") - compile_ms_before) / 1e3,
        timed_steps ? 1e3 * train_s / timed_steps : 0.0, tok_s,
        timed_steps ? flops * timed_steps / train_s / 1e9 : 0.0,
        rt.metric("compiles") - compiles_before);
  }
  if (!o.save.empty() && rank0) {  // rank 0 alone writes checkpoints
    lt::save_checkpoint(o.save, model, &opt, metadata(cfg, vocab, std::max(end, start_step), o));
    std::printf("saved %s (step %lld)\n", o.save.c_str(), (long long)std::max(end, start_step));
  }
  if (o.generate > 0) {
    double gen_compiles = 0;
    std::string text = generate(model, dev, vocab, o, rt, &gen_compiles);
    std::printf("--- sample (%lld characters, temperature %.2f, top-k %lld, seed %llu) ---\n%s%s\n",
                (long long)o.generate, o.temperature, (long long)o.top_k,
                (unsigned long long)o.seed, o.prompt.c_str(), text.c_str());
    std::printf(
        "--- generation compiled %.0f graphs (dynamic in the cache length: "
        "docs/dynamic-shapes.md)\n",
        gen_compiles);
  }
  std::printf("metrics: compiles %.0f, cache hits %.0f, fallbacks %.0f\n", rt.metric("compiles"),
              rt.metric("cache_hits"), rt.metric("fallback_nodes"));
  if (train) print_memory(rt, dev, model, opt, o, losses, donated_step);
  return 0;
}

}  // namespace lt_run
