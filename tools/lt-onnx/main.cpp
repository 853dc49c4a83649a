// lt-onnx — command line of LazyTensor::onnx: `info MODEL`, `run MODEL [--input NAME=FILE]...
// [--device D] [--bench N]`, and `test DIR...` over the ONNX backend-test layout (model.onnx
// beside test_data_set_*/input_*.pb and output_*.pb), one line per case, then
// "N passed, N failed, N skipped".
#include "lazytensor/onnx.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: lt-onnx info MODEL\n"
               "       lt-onnx run MODEL [--input NAME=FILE]... [--device D] [--bench N]\n"
               "       lt-onnx test DIR... [--device D] [--rtol R] [--atol A]\n"
               "                           [--expect LIST [--only-listed]] [--filter SUBSTR]\n"
               "  test: DIR is a case (model.onnx + test_data_set_*) or a folder of cases.\n"
               "  --expect LIST: a file of case names expected to pass; exit status 1 only\n"
               "  when one of them does not (without it: when any case fails);\n"
               "  --only-listed runs only the cases of LIST (a smoke subset).\n");
  return 2;
}

std::vector<double> to_doubles(const lt::Tensor& t) {
  std::vector<uint8_t> b = t.to_bytes();
  size_t n = static_cast<size_t>(t.numel());
  std::vector<double> out(n);
  lt::DType d = t.dtype();
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = b.data() + i * lt::dtype_size(d);
    switch (d) {
      case LT_DTYPE_F32: {
        float f;
        std::memcpy(&f, p, 4);
        out[i] = f;
        break;
      }
      case LT_DTYPE_F64:
        std::memcpy(&out[i], p, 8);
        break;
      case LT_DTYPE_I32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        out[i] = x;
        break;
      }
      case LT_DTYPE_I64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        out[i] = static_cast<double>(x);
        break;
      }
      case LT_DTYPE_BOOL:
        out[i] = *p ? 1 : 0;
        break;
      case LT_DTYPE_F16:
      case LT_DTYPE_BF16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = d == LT_DTYPE_F16 ? lt::detail::f16_to_float(h) : lt::detail::bf16_to_float(h);
        break;
      }
      default:
        out[i] = NAN;
    }
  }
  return out;
}

std::string shape_str(const std::vector<int64_t>& s) {
  return lt::detail::shape_string(s);
}

// "" when equal within tolerance, else what differs.
std::string compare(const lt::Tensor& got, const lt::Tensor& want, double rtol, double atol) {
  if (got.shape() != want.shape()) {
    return "shape " + shape_str(got.shape()) + ", expected " + shape_str(want.shape());
  }
  if (got.dtype() != want.dtype()) {
    return std::string("dtype ") + lt::dtype_name(got.dtype()) + ", expected " +
           lt::dtype_name(want.dtype());
  }
  std::vector<double> g = to_doubles(got), w = to_doubles(want);
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(w[i]))
      ok = std::isnan(g[i]);
    else if (std::isinf(w[i]))
      ok = g[i] == w[i];
    else
      ok = std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
    if (!ok) {
      if (!bad) first = i;
      ++bad;
      double d = std::abs(g[i] - w[i]);
      if (!(d <= worst)) worst = d;
    }
  }
  if (!bad) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%zu of %zu values differ (first at %zu: %.9g, expected %.9g; max |diff| %.3g)",
                bad, g.size(), first, g[first], w[first], worst);
  return buf;
}

std::vector<fs::path> sorted_dirs(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> v;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() && e.path().filename().string().rfind(prefix, 0) == 0)
      v.push_back(e.path());
  }
  std::sort(v.begin(), v.end());
  return v;
}

// NumPy has no bfloat16: the backend tests store bfloat16 values as uint16 bits (ONNX type 4).
// Such a file meant for a bfloat16 input or output is reinterpreted, whatever the case.
lt::Tensor as_declared(const lt::Device& dev, lt::Tensor t, int file_type,
                       const std::string& declared) {
  if (declared != "bfloat16" || file_type != 4) return t;
  std::vector<int32_t> v = t.to_vector<int32_t>();
  std::vector<uint16_t> bits(v.begin(), v.end());
  auto s = t.shape();
  lt_tensor* out = nullptr;
  lt::check(lt_tensor_from_host(dev.get(), LT_DTYPE_BF16, s.data(), s.size(), bits.data(),
                                bits.size() * 2, &out));
  return lt::Tensor(out);
}

struct Outcome {
  enum Kind { kPass, kFail, kSkip } kind;
  std::string detail;
};

Outcome run_case(const lt::Device& dev, const fs::path& dir, double rtol, double atol) {
  lt::onnx::Model model;
  try {
    model = lt::onnx::Model::load(dev, (dir / "model.onnx").string());
  } catch (const lt::Error& e) {
    std::string m = e.what();
    if (e.code() == LT_STATUS_UNSUPPORTED && m.rfind("out of scope: ", 0) == 0) {
      return {Outcome::kSkip, m.substr(14)};
    }
    return {Outcome::kFail, "load: " + m};
  }
  auto inputs = model.inputs();
  auto outputs = model.outputs();
  auto sets = sorted_dirs(dir, "test_data_set_");
  if (sets.empty()) return {Outcome::kFail, "no test_data_set_* folder"};
  try {
    for (const fs::path& set : sets) {
      std::vector<std::pair<std::string, lt::Tensor>> feeds;
      for (size_t i = 0;; ++i) {
        fs::path f = set / ("input_" + std::to_string(i) + ".pb");
        if (!fs::exists(f)) break;
        int ft = 0;
        lt::Tensor t = lt::onnx::read_tensor(dev, f.string(), &ft);
        if (i >= inputs.size())
          return {Outcome::kFail, f.string() + ": more inputs than the model has"};
        t = as_declared(dev, t, ft, inputs[i].onnx_type);
        feeds.emplace_back(inputs[i].name, t);
      }
      std::vector<lt::Tensor> outs = model.run(feeds);
      for (size_t j = 0; j < outs.size(); ++j) {
        fs::path f = set / ("output_" + std::to_string(j) + ".pb");
        if (!fs::exists(f)) break;
        int ft = 0;
        lt::Tensor want = lt::onnx::read_tensor(dev, f.string(), &ft);
        want = as_declared(dev, want, ft, outputs[j].onnx_type);
        std::string diff = compare(outs[j], want, rtol, atol);
        if (!diff.empty()) {
          return {Outcome::kFail,
                  set.filename().string() + " output " + std::to_string(j) + ": " + diff};
        }
      }
    }
  } catch (const lt::Error& e) {
    std::string m = e.what();
    if (e.code() == LT_STATUS_UNSUPPORTED && m.rfind("out of scope: ", 0) == 0) {
      return {Outcome::kSkip, m.substr(14)};
    }
    return {Outcome::kFail, m};
  }
  return {Outcome::kPass, std::to_string(sets.size()) + " data set" + (sets.size() > 1 ? "s" : "")};
}

lt::Device pick_device(lt::Runtime& rt, const std::string& name) {
  return name.empty() ? rt.default_device() : rt.find_device(name);
}

int cmd_test(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  std::string device, expect_path, filter;
  bool only_listed = false;
  double rtol = 1e-3, atol = 1e-7;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::runtime_error(a + " needs a value");
      return args[++i];
    };
    if (a == "--device")
      device = next();
    else if (a == "--rtol")
      rtol = std::stod(next());
    else if (a == "--atol")
      atol = std::stod(next());
    else if (a == "--expect")
      expect_path = next();
    else if (a == "--filter")
      filter = next();
    else if (a == "--only-listed")
      only_listed = true;
    else
      dirs.push_back(a);
  }
  if (dirs.empty()) return usage();
  std::set<std::string> expected;
  if (!expect_path.empty()) {
    std::ifstream f(expect_path);
    if (!f) {
      std::fprintf(stderr, "lt-onnx: cannot read %s\n", expect_path.c_str());
      return 2;
    }
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      expected.insert(line.substr(0, line.find_first_of(" \t")));
    }
  }
  std::vector<fs::path> cases;
  for (const std::string& d : dirs) {
    if (fs::exists(fs::path(d) / "model.onnx")) {
      cases.emplace_back(d);
    } else if (fs::is_directory(d)) {
      for (auto& c : sorted_dirs(d, "")) {
        if (fs::exists(c / "model.onnx")) cases.push_back(c);
      }
    } else {
      std::fprintf(stderr, "lt-onnx: %s is neither a test case nor a folder of cases\n", d.c_str());
      return 2;
    }
  }
  lt::Runtime rt = lt::Runtime::create();
  lt::Device dev = pick_device(rt, device);
  size_t pass = 0, failed = 0, skip = 0, expected_failed = 0, expected_seen = 0;
  for (const fs::path& c : cases) {
    std::string name = c.filename().string();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    if (only_listed && !expected.count(name)) continue;
    Outcome o = run_case(dev, c, rtol, atol);
    bool listed = expected.count(name) > 0;
    expected_seen += listed;
    const char* tag = o.kind == Outcome::kPass   ? "PASS"
                      : o.kind == Outcome::kSkip ? "SKIP"
                                                 : "FAIL";
    std::printf("%s %s: %s%s\n", tag, name.c_str(), o.detail.c_str(),
                listed && o.kind != Outcome::kPass ? "  [listed as passing]" : "");
    std::fflush(stdout);
    if (o.kind == Outcome::kPass)
      ++pass;
    else if (o.kind == Outcome::kSkip)
      ++skip;
    else
      ++failed;
    if (listed && o.kind != Outcome::kPass) ++expected_failed;
  }
  std::printf("%zu passed, %zu failed, %zu skipped\n", pass, failed, skip);
  if (!expected.empty()) {
    if (filter.empty() && expected_seen != expected.size()) {
      std::printf("%zu listed cases were not found\n", expected.size() - expected_seen);
      return 1;
    }
    if (expected_failed) {
      std::printf("%zu cases listed as passing did not pass on %s\n", expected_failed,
                  dev.name().c_str());
      return 1;
    }
    return 0;
  }
  return failed ? 1 : 0;
}

int cmd_info(const std::vector<std::string>& args) {
  if (args.size() != 1) return usage();
  char* s = nullptr;
  lt::check(lt_onnx_describe_file(args[0].c_str(), &s));
  std::fputs(s, stdout);
  lt_string_free(s);
  return 0;
}

int cmd_run(const std::vector<std::string>& args) {
  std::string model_path, device;
  std::vector<std::pair<std::string, std::string>> inputs;
  int bench = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::runtime_error(a + " needs a value");
      return args[++i];
    };
    if (a == "--device")
      device = next();
    else if (a == "--bench")
      bench = std::stoi(next());
    else if (a == "--input") {
      std::string v = next();
      size_t eq = v.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--input wants NAME=FILE, got " + v);
      inputs.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (model_path.empty())
      model_path = a;
    else
      return usage();
  }
  if (model_path.empty()) return usage();
  lt::Runtime rt = lt::Runtime::create();
  lt::Device dev = pick_device(rt, device);
  lt::onnx::Model model = lt::onnx::Model::load(dev, model_path);
  std::vector<std::pair<std::string, lt::Tensor>> feeds;
  for (auto& [n, f] : inputs) feeds.emplace_back(n, lt::onnx::read_tensor(dev, f));
  auto step = [&] {
    auto outs = model.run(feeds);
    for (auto& o : outs) o.materialize();
    return outs;
  };
  auto t0 = std::chrono::steady_clock::now();
  std::vector<lt::Tensor> outs = step();
  double first_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto names = model.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    std::cout << names[i].name << " = " << outs[i] << "\n";
  }
  std::printf("device: %s  first step: %.3f ms\n", dev.name().c_str(), first_ms);
  if (bench > 0) {
    std::vector<double> ms;
    for (int i = 0; i < bench; ++i) {
      auto t = std::chrono::steady_clock::now();
      step();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("bench: %d steps, median %.3f ms, min %.3f ms\n", bench, ms[ms.size() / 2], ms[0]);
  }
  std::printf("compiles: %.0f\n", rt.metric("compiles"));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "info") return cmd_info(args);
    if (cmd == "run") return cmd_run(args);
    if (cmd == "test") return cmd_test(args);
    if (cmd == "-h" || cmd == "--help") {
      usage();
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lt-onnx: %s\n", e.what());
    return 1;
  }
  return usage();
}
