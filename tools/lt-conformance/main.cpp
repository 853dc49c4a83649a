// lt-conformance main: loads ONE plugin file, runs the shared conformance suite (plus the kit's
// own checks) against its backend, and prints a per-op pass/fail table. Exit status: 0 all
// passed, 1 a test failed, 2 the plugin could not be loaded or the arguments are wrong.
#include <gtest/gtest.h>

#include <lazytensor/lazytensor.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kit.h"

namespace fs = std::filesystem;

namespace {

// Every op of lazytensor/lt_ops.def ("input" aside): failure messages and test names are
// matched against these words.
const std::vector<std::string> kOps = [] {
  std::vector<std::string> ops = {
#define LT_OP(Camel, name, ...) name,
#include "lazytensor/lt_ops.def"
#undef LT_OP
  };
  ops.erase(ops.begin());  // "input": a leaf, not an op a backend runs
  return ops;
}();

// COLLECTIVE ops of the table: the core runs them on host memory unless a backend claims them,
// so a plugin that does not claim them still has them (not "fallback").
const std::set<std::string> kCollectives = [] {
  std::set<std::string> out;
#define LT_OP(Camel, name, capi, cfn, cppfn, category, ...) \
  if (std::string(#category) == "COLLECTIVE") out.insert(name);
#include "lazytensor/lt_ops.def"
#undef LT_OP
  return out;
}();

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Ops named in `text` as whole words ("max" does not match inside "max_pool2d").
std::set<std::string> ops_named(const std::string& text) {
  std::set<std::string> out;
  for (const auto& op : kOps) {
    for (size_t p = text.find(op); p != std::string::npos; p = text.find(op, p + 1)) {
      bool left = p == 0 || !is_word_char(text[p - 1]);
      bool right = p + op.size() >= text.size() || !is_word_char(text[p + op.size()]);
      if (left && right) {
        out.insert(op);
        break;
      }
    }
  }
  return out;
}

// Test names in CamelCase ("MatmulTwoDBatched", "ScatterAdd") -> lower snake words.
std::string snake(const std::string& name) {
  std::string s;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (std::isupper(static_cast<unsigned char>(c)) && i) s += '_';
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

// Aggregates results per op and per test while the suite runs.
class OpTable : public ::testing::EmptyTestEventListener {
 public:
  std::map<std::string, int> op_failures, op_tests;
  struct Row {
    std::string name;
    const char* result;
  };
  std::vector<Row> tests;
  int failed = 0, skipped = 0, passed = 0;

  void OnTestStart(const ::testing::TestInfo&) override { current_ops_.clear(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    auto named = ops_named(r.message());
    current_ops_.insert(named.begin(), named.end());
    if (named.empty()) current_ops_.insert("(unattributed)");
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    std::string full = std::string(t.test_suite_name()) + "." + t.name();
    // Ops a test exercises: those its name mentions (matching the snake-cased name).
    std::string words = snake(t.name());
    for (char& c : words)
      if (c == '_') c = ' ';
    auto covered = ops_named(snake(t.name()));
    auto more = ops_named(words);
    covered.insert(more.begin(), more.end());
    const auto* r = t.result();
    const char* res = r->Skipped() ? "SKIP" : r->Failed() ? "FAIL" : "pass";
    if (r->Skipped()) {
      ++skipped;
    } else if (r->Failed()) {
      ++failed;
      for (const auto& op : current_ops_) ++op_failures[op];
    } else {
      ++passed;
    }
    for (const auto& op : covered) ++op_tests[op];
    tests.push_back({full, res});
  }

 private:
  std::set<std::string> current_ops_;
};

// Replaces GoogleTest's printer, whose failure lines start with the suite's source path in
// the tree lt-conformance was built in (meaningless in an installed package). Each failing test
// gets: its name, each failed check as "<file name>:<line>: <message>" (the file under
// tests/conformance/ in the LazyTensor sources), and the command that reruns only that test.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  FailurePrinter(std::string argv0, std::string plugin)
      : argv0_(std::move(argv0)), plugin_(std::move(plugin)) {}
  void OnTestProgramStart(const ::testing::UnitTest& u) override {
    std::printf("running %d conformance tests\n", u.test_to_run_count());
    std::fflush(stdout);
  }
  void OnTestStart(const ::testing::TestInfo&) override {
    lines_.clear();
    more_ = 0;
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed() && !r.skipped()) return;
    if (lines_.size() >= kMaxChecks) {  // the first few say what is wrong; the rest, how often
      ++more_;
      return;
    }
    std::string where = r.file_name() ? fs::path(r.file_name()).filename().string() : "";
    if (!where.empty() && r.line_number() >= 0) where += ":" + std::to_string(r.line_number());
    // The message, its SCOPED_TRACE lines ("<path>:<line>: <what>") reduced to <what>.
    std::string msg, line;
    std::string text = r.message();
    for (size_t b = 0; b <= text.size();) {
      size_t e = text.find('\n', b);
      if (e == std::string::npos) e = text.size();
      line = text.substr(b, e - b);
      b = e + 1;
      if (line.empty() || line == "Google Test trace:") continue;
      size_t colon = line.find(": ");
      if (colon != std::string::npos && line.find('/') < colon && line.find(".cpp:") < colon)
        line = "while: " + line.substr(colon + 2);
      msg += (msg.empty() ? "" : "\n      ") + line;
    }
    lines_.push_back("    " + (where.empty() ? "" : where + ": ") + msg);
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    const auto* r = t.result();
    if (!r->Failed() && !r->Skipped()) return;
    std::string full = std::string(t.test_suite_name()) + "." + t.name();
    std::printf("%s %s\n", r->Failed() ? "FAIL" : "SKIP", full.c_str());
    for (const auto& l : lines_) std::printf("%s\n", l.c_str());
    if (more_) std::printf("    ... and %d more failed checks\n", more_);
    if (r->Failed())
      std::printf("    rerun it alone: %s %s --gtest_filter=%s\n", argv0_.c_str(), plugin_.c_str(),
                  full.c_str());
    std::fflush(stdout);
  }

 private:
  static constexpr size_t kMaxChecks = 5;
  std::string argv0_, plugin_;
  std::vector<std::string> lines_;
  int more_ = 0;
};

int usage() {
  std::fprintf(stderr,
               "usage: lt-conformance <path/to/liblt_plugin_NAME.so> [gtest options]\n"
               "Runs the LazyTensor conformance suite against the backend in that plugin file\n"
               "(numerics against host references, error paths, buffer round trips, cache).\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage();
  std::error_code ec;
  fs::path plugin = fs::weakly_canonical(fs::absolute(argv[1]), ec);
  if (ec || !fs::is_regular_file(plugin)) {
    std::fprintf(stderr, "lt-conformance: %s: no such plugin file\n", argv[1]);
    return 2;
  }
  // The plugin's folder first; the core always adds its install plugin folder (cpu_eager,
  // the fallback and reference) after it.
  std::string dir = plugin.parent_path().string();
  setenv("LT_PLUGIN_PATH", dir.c_str(), 1);
  setenv("LT_FALLBACK", "silent", 0);

  // Which backend does this file hold, and what does it claim? Ask the core.
  std::string backend;
  std::vector<std::string> claimed, decomposed;
  try {
    lt::RuntimeOptions o;
    o.plugin_path = dir;
    o.log_level = "error";
    lt::Runtime probe = lt::Runtime::create(o);
    auto report = nlohmann::json::parse(probe.plugin_report(true));
    for (const auto& p : report["plugins"]) {
      if (fs::weakly_canonical(p["path"].get<std::string>(), ec) == plugin) {
        backend = p["name"].get<std::string>();
        for (const auto& op : p["ops"]) claimed.push_back(op.get<std::string>());
        for (const auto& op : p.value("decomposed_ops", nlohmann::json::array()))
          decomposed.push_back(op.get<std::string>());
      }
    }
    if (backend.empty()) {
      std::string why = "it was not loaded (another plugin of the same name loaded first?)";
      for (const auto& f : report["failed"])
        if (fs::weakly_canonical(f["path"].get<std::string>(), ec) == plugin)
          why = f["reason"].get<std::string>();
      std::fprintf(stderr, "lt-conformance: %s: %s\n", plugin.c_str(), why.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lt-conformance: cannot create a runtime with %s: %s\n", plugin.c_str(),
                 e.what());
    return 2;
  }
  setenv("LT_CONFORMANCE_DEVICES", backend.c_str(), 1);
  ltkit::set_claimed_ops(backend, claimed);
  std::printf(
      "lt-conformance: backend '%s' from %s runs %zu ops natively, %zu as their "
      "decomposition\n",
      backend.c_str(), plugin.c_str(), claimed.size(), decomposed.size());

  // argv[1] is ours; the rest go to GoogleTest (--gtest_filter=..., --gtest_brief=1, ...).
  std::vector<char*> args = {argv[0]};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  int gargc = static_cast<int>(args.size());
  args.push_back(nullptr);  // GoogleTest shifts argv up to and including argv[argc]
  ::testing::InitGoogleTest(&gargc, args.data());
  auto* table = new OpTable;  // owned by GoogleTest's listener list
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  listeners.Append(table);
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new FailurePrinter(fs::path(argv[0]).filename().string(), plugin.string()));
  int rc = RUN_ALL_TESTS();

  // One row per op of the table. An op the plugin runs (natively, or as its decomposition into
  // ops it runs natively) gets a result: FAIL when a failing test names it. Every other op runs
  // on cpu_eager here, so its row reports no result of this plugin's.
  std::printf("\nconformance of backend '%s' (%s)\n", backend.c_str(), plugin.c_str());
  std::printf("%-16s %-12s %-8s %s\n", "op", "runs as", "result", "notes");
  std::set<std::string> claimed_set(claimed.begin(), claimed.end());
  std::set<std::string> decomposed_set(decomposed.begin(), decomposed.end());
  int unattributed =
      table->op_failures.count("(unattributed)") ? table->op_failures["(unattributed)"] : 0;
  for (const auto& op : kOps) {
    int fails = table->op_failures.count(op) ? table->op_failures[op] : 0;
    const char* runs = claimed_set.count(op)      ? "native"
                       : decomposed_set.count(op) ? "decomposed"
                       : kCollectives.count(op)   ? "core"
                                                  : "fallback";
    std::string res = "pass", note;
    if (runs[0] == 'c') {
      res = "-";
      note = "collective: the core runs it on host memory (a backend may claim it)";
      if (fails) unattributed += fails;
    } else if (runs[0] == 'f') {
      res = "-";
      note = "not run here: cpu_eager runs it";
      if (fails) unattributed += fails;
    } else if (fails) {
      res = "FAIL";
      note = std::to_string(fails) + " failing test(s) name this op";
    }
    std::printf("%-16s %-12s %-8s %s\n", op.c_str(), runs, res.c_str(), note.c_str());
  }
  if (unattributed)
    std::printf("%d failing test(s) name no op this plugin runs: see the list below\n",
                unattributed);
  std::printf("\ntests: %d passed, %d failed, %d skipped\n", table->passed, table->failed,
              table->skipped);
  for (const auto& row : table->tests)
    if (std::string(row.result) != "pass") std::printf("  %s %s\n", row.result, row.name.c_str());
  bool ok = rc == 0 && table->failed == 0 && table->passed > 0;
  std::printf("%s\n", ok ? "CONFORMANT" : "NOT CONFORMANT");
  return ok ? 0 : 1;
}
