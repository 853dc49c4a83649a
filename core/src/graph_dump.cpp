// graph_dump.cpp — LT_DUMP_DIR's Graphviz view of a compiled graph: every node (op, dtype,
// shape), its regions as clusters (backend, fallback, core-run custom ops), inside regions of
// the backends that compile with the shared kernel planner the kernels and host steps they run,
// and why it compiled.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "graph_dump.h"
#include "lazytensor/lower/kernel_plan.hpp"
#include "ops.h"

namespace lt {
namespace {

// DOT string literal contents: quotes and backslashes escaped, newlines as \n.
std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\')
      o += '\\', o += ch;
    else if (ch == '\n')
      o += "\\n";
    else
      o += ch;
  }
  return o;
}

const char* kind_name(fusion::GroupKind k) {
  switch (k) {
    case fusion::GroupKind::kElementwise:
      return "elementwise";
    case fusion::GroupKind::kRowReduction:
      return "row reduction";
    case fusion::GroupKind::kReduction:
      return "reduction";
    case fusion::GroupKind::kOpaque:
      return "op + epilogue";
  }
  return "?";
}

}  // namespace

std::vector<DotStep> planner_steps(const std::string& backend, const lt_graph& region,
                                   const std::vector<int32_t>& in_globals,
                                   const std::vector<int32_t>& members) {
  std::vector<DotStep> out;
  const lower::KernelTarget* target = lower::builtin_kernel_target(backend);
  if (!target) return out;  // the core cannot know how another backend runs its region
  lower::KernelPlan p;
  try {
    p = lower::plan_kernels(region, *target);
  } catch (const std::exception&) {
    return out;  // a region the planner refuses is shown without steps
  }
  const size_t first = in_globals.size();  // region_graph puts the inputs first, then members
  for (const lower::Step& st : p.steps) {
    DotStep s{static_cast<int>(st.kind), static_cast<int>(st.group_kind), {}};
    for (int32_t v : st.nodes)
      if (v >= static_cast<int32_t>(first) && static_cast<size_t>(v) - first < members.size())
        s.nodes.push_back(members[static_cast<size_t>(v) - first]);
    if (!s.nodes.empty()) out.push_back(std::move(s));
  }
  return out;
}

void dump_dot(Runtime* rt, const DotDump& d) {
  namespace fs = std::filesystem;
  const lt_graph& g = *d.graph;
  std::error_code ec;
  fs::create_directories(rt->config.dump_dir, ec);
  std::string path = fmt::format("{}/lt_graph_{:016x}.dot", rt->config.dump_dir, d.key);
  std::ofstream out(path);
  if (!out) {
    rt->log->warn("dump: cannot write {}", path);
    return;
  }
  std::vector<int32_t> region_of(g.num_nodes, -1);
  std::string backends;
  for (size_t r = 0; r < d.regions.size(); ++r) {
    for (int32_t v : d.regions[r].members) region_of[v] = static_cast<int32_t>(r);
    backends += (r ? "," : "") + d.regions[r].backend;
  }
  std::vector<uint8_t> is_output(g.num_nodes, 0);
  for (size_t k = 0; k < g.num_outputs; ++k) is_output[g.outputs[k]] = 1;

  std::string title = fmt::format(
      "graph {:016x} on {}: {} nodes{} ({} inputs, {} outputs), {} region{}\ncompiled because: {}",
      d.key, d.device, g.num_nodes,
      g.num_nodes != d.traced_nodes ? fmt::format(" ({} traced, then decomposed)", d.traced_nodes)
                                    : "",
      g.num_inputs, g.num_outputs, d.regions.size(), d.regions.size() == 1 ? "" : "s", d.reason);
  out << fmt::format("digraph \"lt_graph_{:016x}\" {{\n", d.key);
  out << fmt::format(
      "  graph [label=\"{}\", labelloc=t, labeljust=l, fontname=\"Helvetica\", fontsize=12, "
      "rankdir=TB, newrank=true,\n         lt_key=\"{:016x}\", lt_device=\"{}\", lt_nodes=\"{}\", "
      "lt_regions=\"{}\", lt_backends=\"{}\", lt_reason=\"{}\"];\n",
      esc(title), d.key, esc(d.device), g.num_nodes, d.regions.size(), esc(backends),
      esc(d.reason));
  out << "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\", "
         "fontsize=10];\n  edge [color=\"#555555\", arrowsize=0.6];\n";

  // Per node: the kernel-plan step that runs it on a compiling backend ("" elsewhere).
  std::vector<const char*> step_note(g.num_nodes, "");
  for (const DotRegion& reg : d.regions)
    for (const DotStep& st : reg.steps)
      for (int32_t v : st.nodes)
        step_note[v] = st.kind == static_cast<int>(lower::StepKind::kHost) ? "\nhost step" : "";
  auto node_line = [&](size_t i, const std::string& indent) {
    const lt_graph_node& n = g.nodes[i];
    std::string shape = dims_str(n.shape, n.rank);
    std::string label;
    std::string extra;
    if (std::strcmp(n.op, "input") == 0) {
      size_t k = 0;
      while (k < g.num_inputs && g.inputs[k] != static_cast<int32_t>(i)) ++k;
      std::string name = k < d.input_names.size() ? d.input_names[k] : "";
      label = fmt::format("input {}{}\n{} {}", k, name.empty() ? "" : " '" + name + "'",
                          lt_dtype_name(n.dtype), shape);
      extra = ", shape=ellipse, fillcolor=\"#eeeeee\"";
    } else {
      label = fmt::format("%{} {}\n{} {}", i, n.op, lt_dtype_name(n.dtype), shape);
      if (i < d.origin.size() && d.origin[i] >= 0)
        label += fmt::format("\n(from {})", op_name(static_cast<uint16_t>(d.origin[i])));
      if (i < d.traced_at.size() && !d.traced_at[i].empty())
        label += "\nat " + d.traced_at[i];  // the user's line that traced it (issue #28)
      label += step_note[i];
    }
    if (is_output[i]) extra += ", peripheries=2";
    out << fmt::format("{}n{} [label=\"{}\"{}];\n", indent, i, esc(label), extra);
  };

  for (size_t i = 0; i < g.num_nodes; ++i)
    if (region_of[i] < 0) node_line(i, "  ");
  for (size_t r = 0; r < d.regions.size(); ++r) {
    const DotRegion& reg = d.regions[r];
    const char* fill = reg.role == DotRegion::kBackend    ? "#e3edf9"
                       : reg.role == DotRegion::kFallback ? "#fbe3d6"
                                                          : "#e6f4e1";
    std::string label =
        fmt::format("region {}: {} ({} node{}){}", r, reg.backend, reg.members.size(),
                    reg.members.size() == 1 ? "" : "s", reg.note.empty() ? "" : "\n" + reg.note);
    out << fmt::format(
        "  subgraph cluster_r{} {{\n    label=\"{}\"; style=\"rounded,filled\"; "
        "fillcolor=\"{}\"; color=\"#7a8aa0\"; lt_region=\"{}\"; lt_backend=\"{}\"; "
        "lt_role=\"{}\";\n",
        r, esc(label), fill, r, esc(reg.backend),
        reg.role == DotRegion::kBackend    ? "backend"
        : reg.role == DotRegion::kFallback ? "fallback"
                                           : "core");
    // Kernels (fused groups run as one generated kernel) as clusters; host steps and nodes
    // evaluated where they are read stay in the region.
    std::vector<int32_t> in_group(g.num_nodes, -1);
    size_t kernels = 0;
    for (const DotStep& st : reg.steps) {
      if (st.kind == static_cast<int>(lower::StepKind::kHost)) continue;
      const size_t k = kernels++;
      const bool split = st.kind == static_cast<int>(lower::StepKind::kSplit);
      out << fmt::format(
          "    subgraph cluster_r{}_g{} {{\n      label=\"kernel {} ({}{}, {} node{})\"; "
          "style=\"dashed,rounded\"; color=\"#3060a0\"; fillcolor=\"#f4f8fd\";\n",
          r, k, k, kind_name(static_cast<fusion::GroupKind>(st.group_kind)),
          split ? ", split from its group" : "", st.nodes.size(), st.nodes.size() == 1 ? "" : "s");
      for (int32_t v : st.nodes) {
        in_group[v] = static_cast<int32_t>(k);
        node_line(static_cast<size_t>(v), "      ");
      }
      out << "    }\n";
    }
    for (int32_t v : reg.members)
      if (in_group[v] < 0) node_line(static_cast<size_t>(v), "    ");
    out << "  }\n";
  }
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    for (size_t k = 0; k < n.num_operands; ++k) {
      int32_t o = n.operands[k];
      bool crosses = region_of[o] >= 0 && region_of[o] != region_of[i];
      out << fmt::format("  n{} -> n{}{};\n", o, i,
                         crosses ? " [color=\"#c0392b\", penwidth=1.5]" : "");
    }
  }
  out << "}\n";
}

void dump_region_text(Runtime* rt, const lt_graph& g, const std::string& backend, uint64_t key,
                      size_t region) {
  write_graph_text(rt, g, key, fmt::format("r{}_{}", region, backend),
                   fmt::format("region {} backend {}", region, backend));
}

void write_graph_text(Runtime* rt, const lt_graph& g, uint64_t key, const std::string& suffix,
                      const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(rt->config.dump_dir, ec);
  std::string path = fmt::format("{}/lt_graph_{:016x}_{}.txt", rt->config.dump_dir, key, suffix);
  std::ofstream out(path);
  if (!out) {
    rt->log->warn("dump: cannot write {}", path);
    return;
  }
  out << fmt::format("# graph {:016x} {}: {} nodes, {} inputs, {} outputs\n", key, what,
                     g.num_nodes, g.num_inputs, g.num_outputs);
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    std::string ops;
    for (size_t k = 0; k < n.num_operands; ++k)
      ops += fmt::format("{}%{}", k ? ", " : "", n.operands[k]);
    std::string attrs;
    for (size_t k = 0; k < n.num_attrs; ++k) {
      const lt_attr& a = n.attrs[k];
      attrs += fmt::format(" {}=", a.name);
      if (a.kind == LT_ATTR_INT)
        attrs += std::to_string(a.i);
      else if (a.kind == LT_ATTR_FLOAT)
        attrs += fmt::format("{}", a.f);
      else if (a.kind == LT_ATTR_INTS)
        attrs += dims_str(a.ints, a.ints_len);
      else
        attrs += a.s ? a.s : "";
    }
    out << fmt::format("%{} = {}({}) : {} {}{}\n", i, n.op, ops, lt_dtype_name(n.dtype),
                       dims_str(n.shape, n.rank), attrs);
  }
  out << "outputs:";
  for (size_t k = 0; k < g.num_outputs; ++k) out << " %" << g.outputs[k];
  out << "\n";
}

}  // namespace lt
