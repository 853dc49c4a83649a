// GraphViewerTest.cpp — the graph viewer end to end: LT_DUMP_DIR's DOT files (regions as
// clusters with their backend, fallback and core roles, the kernels and host steps cpu_jit
// runs, the recompile reason in the title), lt-graph listing and rendering lt-run's training
// step to SVG (parsed as XML by libxml2), lt-graph's errors, and the metrics report (per-graph
// timing, top graphs, time on the fallback and in the core) through the C API and
// `lt-run --metrics`.
#include <gtest/gtest.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <lazytensor/custom_op.hpp>
#include <lazytensor/lazytensor.hpp>
#include <lazytensor/nn.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::vector<fs::path> files(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs a shell command; returns its exit status and (stdout + stderr) in *out.
int run(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  out->clear();
  while (size_t n = fread(buf, 1, sizeof buf, p)) out->append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// "graph_dump.double_it": a custom op no backend claims, so the core runs it (a "core" region).
void register_double_it() {
  static std::once_flag once;
  std::call_once(once, [] {
    lt::CustomOpDef d;
    d.name = "graph_dump.double_it";
    d.infer = [](const std::vector<lt::TensorSpec>& in, const lt::CustomAttrs&) { return in[0]; };
    d.cpu_kernel = [](const std::vector<lt::HostInput>& in, const lt::HostOutput& out,
                      const lt::CustomAttrs&) {
      auto x = in[0].as<float>();
      auto y = out.as<float>();
      for (size_t i = 0; i < x.size(); ++i) y[i] = 2 * x[i];
    };
    lt::register_custom_op(d);
  });
}

// The test backend "partial" runs add, mul, relu and matmul; exp and sum go to cpu_eager.
lt::Runtime partial_runtime(const fs::path& dump) {
  lt::RuntimeOptions o;
  o.plugin_path = LT_TEST_PLUGIN_DIR "/partial";
  o.device = "partial";
  o.fallback = "silent";
  o.dump_dir = dump.string();
  return lt::Runtime::create(o);
}

lt::Tensor mixed_graph(const lt::Device& d, int64_t rows) {
  std::vector<float> xv(static_cast<size_t>(rows * 4), 0.5f);
  lt::Tensor x = lt::Tensor::from(d, xv, {rows, 4});
  x.set_name("x");
  lt::Tensor e = lt::exp(lt::relu(x));                    // partial, then the fallback
  lt::Tensor c = lt::apply("graph_dump.double_it", {e});  // the core
  return lt::sum(c + x, {1});                             // partial, then the fallback
}

TEST(GraphDump, RegionsAreClustersWithBackendRoleAndReasonInTheTitle) {
  register_double_it();
  fs::path dump = fresh_dir("lt_graph_dump_regions");
  lt::Runtime rt = partial_runtime(dump);
  lt::Device d = rt.default_device();
  std::vector<float> got = mixed_graph(d, 2).to_vector<float>();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NEAR(got[0], 4 * (2 * std::exp(0.5f) + 0.5f), 1e-4);

  std::vector<fs::path> dots = files(dump, ".dot");
  ASSERT_EQ(dots.size(), 1u) << "one DOT file per compiled graph";
  std::string dot = read_file(dots[0]);
  // Regions in order: partial (relu), fallback (exp), core (double_it), partial (add),
  // fallback (sum).
  EXPECT_EQ(count(dot, "subgraph cluster_r"), 5u) << dot;
  EXPECT_EQ(count(dot, "lt_role=\"backend\""), 2u) << dot;
  EXPECT_EQ(count(dot, "lt_role=\"fallback\""), 2u) << dot;
  EXPECT_EQ(count(dot, "lt_role=\"core\""), 1u) << dot;
  EXPECT_NE(dot.find("region 1: cpu_eager (1 node)\\nfallback: not supported by partial"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("region 2: core (1 node)\\ncustom op: its CPU kernel run by the core"),
            std::string::npos)
      << dot;
  // Nodes: op, dtype and shape; the named input; outputs drawn with a double border.
  EXPECT_NE(dot.find("exp\\nf32 [2,4]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("graph_dump.double_it\\nf32 [2,4]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("input 0 'x'\\nf32 [2,4]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("sum\\nf32 [2]\", peripheries=2"), std::string::npos) << dot;
  // Title and machine-readable attributes: device, counts, the reason.
  EXPECT_NE(dot.find("on partial:0"), std::string::npos);
  EXPECT_NE(
      dot.find("5 regions\\ncompiled because: partial:0: first graph compiled on this device"),
      std::string::npos)
      << dot;
  EXPECT_NE(dot.find("lt_backends=\"partial,cpu_eager,core,partial,cpu_eager\""), std::string::npos)
      << dot;
  // The text dumps are still written, one per plugin region (lt_graph_<key>_r<region>_<backend>;
  // the optimiser's after-pass listings, _opt<k>_<pass>, are not region dumps).
  size_t region_texts = 0;
  for (const fs::path& p : files(dump, ".txt"))
    region_texts += std::regex_search(p.filename().string(), std::regex("_r[0-9]+_")) ? 1 : 0;
  EXPECT_EQ(region_texts, 4u);

  // The same program on a new batch size recompiles: the new file's title names the input.
  mixed_graph(d, 3).to_vector<float>();
  dots = files(dump, ".dot");
  ASSERT_EQ(dots.size(), 2u);
  bool found = false;
  for (const fs::path& p : dots)
    found = found ||
            read_file(p).find("compiled because: input 0 'x' dim 0: 2 -> 3") != std::string::npos;
  EXPECT_TRUE(found) << "no DOT title names the changed input";
}

// cpu_jit runs a group of fewer than 1,024 elements as host steps (a kernel would cost more
// LLVM time than it saves): the dump shows those steps, not a fused group that never runs.
TEST(GraphDump, SmallGroupsAreDrawnAsTheHostStepsCpuJitRuns) {
  fs::path dump = fresh_dir("lt_graph_dump_host_steps");
  lt::RuntimeOptions o;
  o.device = "cpu_jit";
  o.dump_dir = dump.string();
  lt::Runtime rt = lt::Runtime::create(o);
  lt::Device d = rt.default_device();
  lt::Tensor x = lt::Tensor::from(d, std::vector<float>(8 * 8, 0.25f), {8, 8});
  std::vector<float> y = lt::tanh(x * 3.0 + 1.0).to_vector<float>();
  ASSERT_EQ(y.size(), 64u);
  EXPECT_NEAR(y[0], std::tanh(1.75f), 1e-6);
  std::vector<fs::path> dots = files(dump, ".dot");
  ASSERT_EQ(dots.size(), 1u);
  std::string dot = read_file(dots[0]);
  EXPECT_EQ(count(dot, "cluster_r0_g"), 0u) << dot;
  EXPECT_GE(count(dot, "\\nhost step"), 3u) << dot;  // mul, add, tanh (and constants)
}

TEST(GraphDump, KernelsOfTheSharedPlannerAreDrawnForCpuJit) {
  fs::path dump = fresh_dir("lt_graph_dump_fused");
  lt::RuntimeOptions o;
  o.device = "cpu_jit";
  o.dump_dir = dump.string();
  lt::Runtime rt = lt::Runtime::create(o);
  lt::Device d = rt.default_device();
  lt::Tensor x = lt::Tensor::from(d, std::vector<float>(64 * 64, 0.25f), {64, 64});
  lt::Tensor y = lt::softmax(lt::tanh(x * 3.0 + 1.0), 1);
  y.to_vector<float>();
  std::vector<fs::path> dots = files(dump, ".dot");
  ASSERT_EQ(dots.size(), 1u);
  std::string dot = read_file(dots[0]);
  EXPECT_EQ(count(dot, "subgraph cluster_r0 "), 1u);
  EXPECT_GE(count(dot, "subgraph cluster_r0_g"), 1u) << dot;
  EXPECT_NE(dot.find("kernel 0 ("), std::string::npos) << dot;
  EXPECT_EQ(dot.find("host step"), std::string::npos) << dot;
  // softmax was decomposed for cpu_jit: its nodes say where they came from.
  EXPECT_NE(dot.find("(from softmax)"), std::string::npos) << dot;

  // tpu_sim does not compile from the shared planner: no groups are claimed for it.
  fs::path dump2 = fresh_dir("lt_graph_dump_tpu");
  o.device = "tpu_sim";
  o.dump_dir = dump2.string();
  lt::Runtime rt2 = lt::Runtime::create(o);
  lt::Device d2 = rt2.default_device();
  lt::Tensor x2 = lt::Tensor::from(d2, std::vector<float>(64 * 64, 0.25f), {64, 64});
  lt::softmax(lt::tanh(x2 * 3.0 + 1.0), 1).to_vector<float>();
  dots = files(dump2, ".dot");
  ASSERT_EQ(dots.size(), 1u);
  dot = read_file(dots[0]);
  EXPECT_EQ(count(dot, "cluster_r0_g"), 0u);
  EXPECT_NE(dot.find("region 0: tpu_sim"), std::string::npos);
  // What tpu_sim reports about the executable (simulated time by unit) is in the report.
  std::string report = rt2.metrics_report(false);
  EXPECT_TRUE(std::regex_search(report, std::regex("region 0: tpu_sim: [^\\n]*\\n *backend "
                                                   "reports: simulated_ns [0-9.e+]+, ")))
      << report;
}

// Every node names the line of this file that traced it (issue #28): ops recorded here, and
// the nodes a composite recorded inside the API's headers (a loss) was decomposed into.
TEST(GraphDump, NodesNameTheLineThatTracedThem) {
  fs::path dump = fresh_dir("lt_graph_dump_lines");
  lt::RuntimeOptions o;
  o.device = "cpu_jit";
  o.dump_dir = dump.string();
  lt::Runtime rt = lt::Runtime::create(o);
  lt::Device d = rt.default_device();
  lt::Tensor x = lt::Tensor::from(d, std::vector<float>(8 * 10, 0.25f), {8, 10});
  lt::Tensor target = lt::Tensor::from(d, std::vector<float>(8 * 10, 0.1f), {8, 10});
  const int relu_line = __LINE__ + 1;
  lt::Tensor h = lt::relu(x) * 3.0;
  const int loss_line = __LINE__ + 1;
  lt::Tensor loss = lt::nn::cross_entropy(h, target);  // log_softmax: decomposed for cpu_jit
  loss.item<float>();
  std::vector<fs::path> dots = files(dump, ".dot");
  ASSERT_EQ(dots.size(), 1u);
  const std::string dot = read_file(dots[0]);
  const std::string at = "\\nat GraphViewerTest.cpp:";
  // relu (or what it was decomposed into) and the mul of the same line.
  // The line ends the label or precedes the backend's note on the node ("\\nhost step").
  const std::string relu_at = at + std::to_string(relu_line);
  EXPECT_GE(count(dot, relu_at + "\"") + count(dot, relu_at + "\\n"), 2u) << dot;
  EXPECT_NE(dot.find("(from log_softmax)" + at + std::to_string(loss_line)), std::string::npos)
      << dot;
}

// The lt-run training step, rendered by lt-graph with Graphviz, parses as SVG and shows it.
TEST(LtGraph, RendersTheLtRunTrainingStepToSvg) {
  fs::path dump = fresh_dir("lt_graph_lt_run");
  std::string out;
  ASSERT_EQ(run("LT_DUMP_DIR=" + dump.string() + " " LT_RUN " --device cpu_jit --epochs 1", &out),
            0)
      << out;

  ASSERT_EQ(run(LT_GRAPH " list " + dump.string(), &out), 0) << out;
  EXPECT_NE(out.find("compiled graphs (DOT)"), std::string::npos) << out;
  EXPECT_NE(out.find("compiled because: cpu_jit:0: first graph compiled on this device"),
            std::string::npos)
      << out;
  // The training step: the graph whose outputs include the loss, the new parameters and Adam's
  // moments; it is the largest, and its inputs are the named batch 'x', 'y'.
  fs::path step;
  size_t most = 0;
  for (const fs::path& p : files(dump, ".dot")) {
    std::string dot = read_file(p);
    std::smatch m;
    if (std::regex_search(dot, m, std::regex("lt_nodes=\"(\\d+)\"")) && std::stoul(m[1]) > most &&
        dot.find("'x'") != std::string::npos)
      most = std::stoul(m[1]), step = p;
  }
  ASSERT_FALSE(step.empty()) << "no dumped graph reads the batch 'x'";
  EXPECT_GT(most, 50u);

  fs::path svg = dump / "step.svg";
  ASSERT_EQ(run(LT_GRAPH " render " + step.string() + " -o " + svg.string(), &out), 0) << out;
  xmlDocPtr doc = xmlReadFile(svg.c_str(), nullptr, XML_PARSE_NONET);
  ASSERT_NE(doc, nullptr) << "lt-graph wrote no well-formed XML";
  xmlNodePtr root = xmlDocGetRootElement(doc);
  ASSERT_NE(root, nullptr);
  EXPECT_STREQ(reinterpret_cast<const char*>(root->name), "svg");
  xmlFreeDoc(doc);
  std::string text = read_file(svg);
  EXPECT_NE(text.find("<title>cluster_r0</title>"), std::string::npos) << "the region cluster";
  EXPECT_NE(text.find("region 0: cpu_jit"), std::string::npos);
  EXPECT_NE(text.find("kernel 0 ("), std::string::npos);
  EXPECT_NE(text.find("matmul"), std::string::npos);
  EXPECT_NE(text.find("compiled because"), std::string::npos);
  EXPECT_NE(text.find("input 1 &#39;x&#39;"), std::string::npos) << "the named batch input";

  // sfdp (for graphs too large for dot's layered layout) draws the nodes, without clusters.
  fs::path fast = dump / "step_sfdp.svg";
  ASSERT_EQ(run(LT_GRAPH " render " + step.string() + " -l sfdp -o " + fast.string(), &out), 0)
      << out;
  std::string sfdp = read_file(fast);
  EXPECT_NE(sfdp.find("matmul"), std::string::npos);
  EXPECT_EQ(sfdp.find("<title>cluster_r0</title>"), std::string::npos);
  EXPECT_EQ(run(LT_GRAPH " render " + step.string() + " -l nosuchlayout -o " + fast.string(), &out),
            1);
  EXPECT_NE(out.find("Graphviz could not lay out '" + step.string() + "'"), std::string::npos)
      << out;

  // Everything at once into another directory.
  fs::path all = dump / "svg";
  ASSERT_EQ(run(LT_GRAPH " render " + dump.string() + " -o " + all.string(), &out), 0) << out;
  EXPECT_EQ(files(all, ".svg").size(), files(dump, ".dot").size());
}

TEST(LtGraph, ErrorsNameTheFileAndWhatIsWrong) {
  fs::path dir = fresh_dir("lt_graph_errors");
  std::string out;
  EXPECT_EQ(run(LT_GRAPH " render " + (dir / "missing.dot").string(), &out), 1);
  EXPECT_NE(out.find("no such file or directory '" + (dir / "missing.dot").string() + "'"),
            std::string::npos)
      << out;
  std::ofstream(dir / "bad.dot") << "digraph { a -> ";
  EXPECT_EQ(run(LT_GRAPH " render " + (dir / "bad.dot").string(), &out), 1);
  EXPECT_NE(
      out.find("'" + (dir / "bad.dot").string() + "' is not a Graphviz DOT file: syntax error"),
      std::string::npos)
      << out;
  EXPECT_EQ(run(LT_GRAPH " list " + (dir / "bad.dot").string(), &out), 1);
  EXPECT_NE(out.find("is not a directory"), std::string::npos) << out;
  fs::path empty = fresh_dir("lt_graph_empty");
  EXPECT_EQ(run(LT_GRAPH " render " + empty.string(), &out), 1);
  EXPECT_NE(out.find("holds no .dot files"), std::string::npos) << out;
  EXPECT_NE(run(LT_GRAPH, &out), 0) << "a subcommand is required";
}

// ---- the metrics report

TEST(MetricsReport, NamesGraphsByHashAndLabelAndTimesRegionsOffTheBackend) {
  register_double_it();
  fs::path dump = fresh_dir("lt_metrics_report");
  lt::Runtime rt = partial_runtime(dump);
  lt::Device d = rt.default_device();
  for (int i = 0; i < 3; ++i) mixed_graph(d, 2).to_vector<float>();  // 1 compile, 3 runs
  std::string text = rt.metrics_report(false);
  std::string key = files(dump, ".dot")[0].stem().string().substr(9);  // lt_graph_<key>

  EXPECT_NE(text.find("Top graphs by time"), std::string::npos) << text;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m,
                                std::regex("\\n +1 " + key +
                                           " partial:0 +3 +([0-9.]+) ms +([0-9.]+) ms +([0-9.]+) "
                                           "ms  [0-9]+ nodes; outputs sum; inputs 'x'\\n")))
      << text;
  EXPECT_GT(std::stod(m[1]), 0.0);  // run total
  EXPECT_GT(std::stod(m[3]), 0.0);  // compile
  // Every region with its time; the ones off the backend summed by what they ran.
  for (const char* region : {"region 0: partial: relu", "region 1: fallback cpu_eager: exp",
                             "region 2: core (custom op CPU kernel): graph_dump.double_it",
                             "region 3: partial: add", "region 4: fallback cpu_eager: sum"})
    EXPECT_NE(text.find(region), std::string::npos) << region << "\n" << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("Time on the fallback and in the core[^\\n]*\\n"
                                                 "(  .* ms +3 runs\\n){3}")))
      << text;
  EXPECT_NE(text.find("No backend reports per-op time"), std::string::npos);
  EXPECT_NE(text.find("Counters\n"), std::string::npos);
  EXPECT_NE(text.find("  fallback.exp: 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Recompile reasons (last 1)\n  - partial:0: first graph compiled"),
            std::string::npos)
      << text;

  // JSON: the same, as data.
  nlohmann::json j = nlohmann::json::parse(rt.metrics_report(true));
  ASSERT_EQ(j["graphs"].size(), 1u);
  EXPECT_EQ(j["graphs"][0]["hash"], key);
  EXPECT_EQ(j["graphs"][0]["runs"], 3);
  EXPECT_EQ(j["graphs"][0]["regions"].size(), 5u);
  EXPECT_EQ(j["off_target_regions"].size(), 3u);
  EXPECT_EQ(j["cache_misses"], 1.0);

  // A reset zeroes the per-graph timings too; an idle cached graph is not listed.
  rt.reset_metrics();
  text = rt.metrics_report(false);
  EXPECT_NE(text.find("(compile + run; 0 of 1 cached graph active since the last reset)"),
            std::string::npos)
      << text;
  mixed_graph(d, 2).to_vector<float>();
  j = nlohmann::json::parse(rt.metrics_report(true));
  ASSERT_EQ(j["graphs"].size(), 1u);
  EXPECT_EQ(j["graphs"][0]["runs"], 1);
  EXPECT_EQ(j["graphs"][0]["compile_ms"], 0.0) << "compiled before the reset";
}

TEST(MetricsReport, LtRunPrintsTheFullReportWithMetricsFlag) {
  std::string out;
  ASSERT_EQ(run(LT_RUN " --device cpu_jit --epochs 1 --metrics", &out), 0) << out;
  EXPECT_NE(out.find("LazyTensor metrics\n"), std::string::npos) << out;
  // The training step is among the top graphs (44 full batches; the last, partial batch is
  // another graph, dynamic or static): its label names the batch inputs.
  EXPECT_TRUE(std::regex_search(
      out, std::regex("\\n +[1-5] [0-9a-f]{16} cpu_jit:0 +[0-9]+ .* outputs .*inputs 'y', 'x'\\n")))
      << out;
  EXPECT_NE(out.find("region 0: cpu_jit: "), std::string::npos);
  EXPECT_NE(out.find("Counters\n"), std::string::npos);
  EXPECT_NE(out.find("  cache_hits: "), std::string::npos);
  ASSERT_EQ(run(LT_RUN " --device cpu_jit --epochs 1", &out), 0) << out;
  EXPECT_EQ(out.find("LazyTensor metrics"), std::string::npos) << "only with --metrics";
  EXPECT_NE(out.find("metrics: compiles"), std::string::npos) << "the one summary line";
}

}  // namespace
