// lt-graph — the graph viewer: lists what an LT_DUMP_DIR holds (one Graphviz DOT file per
// compiled graph, one text file per region) and renders DOT files to SVG (or any format
// Graphviz's own library, libgvc, can write) without the `dot` program.
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <CLI/CLI.hpp>

#include "lazytensor/regular_file.hpp"

namespace fs = std::filesystem;

namespace {

std::string g_graphviz_error;  // what Graphviz reported for the current file

int capture_error(char* message) {
  if (message) g_graphviz_error += message;
  return 0;
}

// Graphviz's message without its "Error: " prefix and trailing newline.
std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.rfind("Error: ", 0) == 0) s.erase(0, 7);
  return s;
}

// A parsed DOT file, closed on scope exit. Fails with a message naming the file.
struct Dot {
  Agraph_t* g = nullptr;
  Dot(const Dot&) = delete;
  Dot& operator=(const Dot&) = delete;
  Dot() = default;
  ~Dot() {
    if (g) agclose(g);
  }
  bool open(const fs::path& path, std::string* why) {
    // Non-blocking, regular files only, at most 256 MiB (lazytensor/regular_file.hpp).
    lt::file::RegularFile in;
    std::string text, what;
    if (!in.open(path.string(), &what)) {
      *why = in.error() == ENOENT ? "no such file '" + path.string() + "'"
                                  : "cannot read '" + path.string() + "': it " + what;
      return false;
    }
    if (!in.read_all(&text, uint64_t{256} << 20, &what)) {
      *why = "cannot read '" + path.string() + "': it " + what;
      return false;
    }
    g_graphviz_error.clear();
    g = agmemread(text.c_str());
    if (!g) {
      *why = "'" + path.string() + "' is not a Graphviz DOT file" +
             (g_graphviz_error.empty() ? "" : ": " + trimmed(g_graphviz_error));
      return false;
    }
    return true;
  }
  std::string attr(const char* name) const {
    char* v = agget(g, const_cast<char*>(name));
    return v ? v : "";
  }
};

std::vector<fs::path> dot_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".dot") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

int list(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    std::fprintf(stderr, "lt-graph: '%s' is not a directory (give the LT_DUMP_DIR a run wrote)\n",
                 dir.c_str());
    return 1;
  }
  std::map<std::string, int> region_texts;  // graph key -> text region dumps
  int texts = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    // lt_graph_<16 hex>_r<k>_<backend>.txt; the optimiser's _opt<k>_<pass>.txt are not regions.
    if (e.path().extension() == ".txt" && name.rfind("lt_graph_", 0) == 0 &&
        name.compare(25, 2, "_r") == 0) {
      ++texts;
      ++region_texts[name.substr(9, 16)];
    }
  }
  std::vector<fs::path> dots = dot_files(dir);
  std::printf("%s: %zu compiled graph%s (DOT), %d region dump%s (text)\n", dir.c_str(), dots.size(),
              dots.size() == 1 ? "" : "s", texts, texts == 1 ? "" : "s");
  int bad = 0;
  for (const fs::path& p : dots) {
    Dot d;
    std::string why;
    if (!d.open(p, &why)) {
      std::printf("  %s  (unreadable: %s)\n", p.filename().c_str(), why.c_str());
      ++bad;
      continue;
    }
    std::string key = d.attr("lt_key");
    std::printf("  %s  %s  %s nodes  %s region%s (%s)  %d text file%s\n", p.filename().c_str(),
                d.attr("lt_device").c_str(), d.attr("lt_nodes").c_str(),
                d.attr("lt_regions").c_str(), d.attr("lt_regions") == "1" ? "" : "s",
                d.attr("lt_backends").c_str(), region_texts[key],
                region_texts[key] == 1 ? "" : "s");
    std::printf("      compiled because: %s\n", d.attr("lt_reason").c_str());
  }
  return bad ? 1 : 0;
}

// Renders one DOT file; returns false with a message naming the file on failure.
bool render_one(GVC_t* gvc, const fs::path& in, const fs::path& out, const std::string& format,
                const std::string& layout, std::string* why) {
  Dot d;
  if (!d.open(in, why)) return false;
  // dot's layered layout with clusters grows steeply: the 384-node GPT eval graph takes 0.2 s,
  // its 2,500-node training step more than 10 minutes; sfdp lays that out in a second.
  const int nodes = std::atoi(d.attr("lt_nodes").c_str());
  if (layout == "dot" && nodes > 1000)
    std::fprintf(stderr,
                 "lt-graph: %s has %d nodes: the dot layout may take many minutes; "
                 "-l sfdp draws it in seconds (without region clusters)\n",
                 in.c_str(), nodes);
  g_graphviz_error.clear();
  if (gvLayout(gvc, d.g, layout.c_str()) != 0) {
    *why = "Graphviz could not lay out '" + in.string() + "'" +
           (g_graphviz_error.empty() ? "" : ": " + trimmed(g_graphviz_error));
    return false;
  }
  char* data = nullptr;
  unsigned int len = 0;  // Graphviz 2.43's type (later versions: size_t)
  int rc = gvRenderData(gvc, d.g, format.c_str(), &data, &len);
  gvFreeLayout(gvc, d.g);
  if (rc != 0 || !data) {
    *why = "Graphviz could not render '" + in.string() + "' as '" + format + "'" +
           (g_graphviz_error.empty() ? "" : ": " + trimmed(g_graphviz_error));
    if (data) gvFreeRenderData(data);
    return false;
  }
  std::ofstream o(out, std::ios::binary);
  o.write(data, static_cast<std::streamsize>(len));
  gvFreeRenderData(data);
  if (!o.good()) {
    *why = "cannot write '" + out.string() + "'";
    return false;
  }
  return true;
}

int render(const fs::path& in, const std::string& out_opt, const std::string& format,
           const std::string& layout) {
  std::error_code ec;
  if (!fs::exists(in, ec)) {
    std::fprintf(stderr, "lt-graph: no such file or directory '%s'\n", in.c_str());
    return 1;
  }
  std::vector<std::pair<fs::path, fs::path>> jobs;
  if (fs::is_directory(in, ec)) {
    fs::path out_dir = out_opt.empty() ? in : fs::path(out_opt);
    fs::create_directories(out_dir, ec);
    for (const fs::path& p : dot_files(in))
      jobs.emplace_back(p, out_dir / p.filename().replace_extension(format));
    if (jobs.empty()) {
      std::fprintf(stderr, "lt-graph: '%s' holds no .dot files (was LT_DUMP_DIR set?)\n",
                   in.c_str());
      return 1;
    }
  } else {
    fs::path out = out_opt.empty() ? fs::path(in).replace_extension(format) : fs::path(out_opt);
    jobs.emplace_back(in, out);
  }
  GVC_t* gvc = gvContext();
  if (!gvc) {
    std::fprintf(stderr, "lt-graph: cannot create a Graphviz context\n");
    return 1;
  }
  int failed = 0;
  for (const auto& [src, dst] : jobs) {
    std::string why;
    if (render_one(gvc, src, dst, format, layout, &why)) {
      std::printf("%s -> %s\n", src.c_str(), dst.c_str());
    } else {
      std::fprintf(stderr, "lt-graph: %s\n", why.c_str());
      ++failed;
    }
  }
  gvFreeContext(gvc);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "lt-graph: list and render the graphs a run dumped (LT_DUMP_DIR=dir lt-run ...).\n"
      "  lt-graph list DIR                  what the dump holds: each compiled graph, its device,\n"
      "                                     size, regions and why it was compiled\n"
      "  lt-graph render FILE.dot [-o F]    one graph to SVG (default: FILE.svg)\n"
      "  lt-graph render DIR [-o OUTDIR]    every .dot file of DIR"};
  app.require_subcommand(1);
  std::string dir, path, out, format = "svg", layout = "dot";
  CLI::App* ls = app.add_subcommand("list", "list the graphs of a dump directory");
  ls->add_option("dir", dir, "dump directory (LT_DUMP_DIR)")->required();
  CLI::App* rd =
      app.add_subcommand("render", "render a DOT file, or every DOT file of a directory");
  rd->add_option("path", path, "a .dot file or a dump directory")->required();
  rd->add_option("-o,--output", out, "output file (for a file) or directory (for a directory)");
  rd->add_option("-f,--format", format, "any Graphviz output format: svg, png, pdf, ...")
      ->capture_default_str();
  rd->add_option("-l,--layout", layout,
                 "Graphviz layout engine: dot (layered, clusters drawn; slow beyond ~1,000 "
                 "nodes), sfdp (fast for large graphs), neato, fdp")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  agseterr(AGERR);
  agseterrf(capture_error);
  if (*ls) return list(dir);
  return render(path, out, format, layout);
}
