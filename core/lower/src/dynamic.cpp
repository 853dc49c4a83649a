// dynamic.cpp — dynamic dimensions: reading, checking, instantiating, deriving and matching the
// affine expressions of a graph's numbers (lazytensor/lower/dynamic.hpp). Every walk is linear.
#include "lazytensor/lower/dynamic.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "lazytensor/lower/error.hpp"

namespace lt::lower {
namespace {

constexpr size_t kMaxSymbols = 16;

// Calls f(attr, index, value) for every number of a node that may follow a size, in position
// order: its dims and the entries of its INTS attributes (shapes, slice bounds, pads). INT
// attributes (an axis, a reduce kind, a dtype, a seed) are part of the structure.
template <class F>
void for_each_number(const lt_graph_node& n, F&& f) {
  for (size_t d = 0; d < n.rank; ++d) f(-1, static_cast<int32_t>(d), n.shape[d]);
  for (size_t a = 0; a < n.num_attrs; ++a) {
    const lt_attr& at = n.attrs[a];
    if (at.kind == LT_ATTR_INTS)
      for (size_t j = 0; j < at.ints_len; ++j)
        f(static_cast<int32_t>(a), static_cast<int32_t>(j), at.ints[j]);
  }
}

auto position(const lt_dim_expr& e) {
  return std::make_tuple(e.node, e.attr, e.index);
}

// The number at an expression's position (the expression is in range).
int64_t number_at(const lt_graph& g, const lt_dim_expr& e) {
  const lt_graph_node& n = g.nodes[e.node];
  if (e.attr < 0) return n.shape[e.index];
  return n.attrs[e.attr].ints[e.index];
}

bool same_node(const lt_graph_node& a, const lt_graph_node& b) {
  if (std::strcmp(a.op, b.op) != 0 || a.dtype != b.dtype || a.rank != b.rank ||
      a.num_operands != b.num_operands || a.num_attrs != b.num_attrs)
    return false;
  if (a.num_operands && std::memcmp(a.operands, b.operands, a.num_operands * sizeof(int32_t)) != 0)
    return false;
  for (size_t k = 0; k < a.num_attrs; ++k) {
    const lt_attr &x = a.attrs[k], &y = b.attrs[k];
    if (x.kind != y.kind || std::strcmp(x.name ? x.name : "", y.name ? y.name : "") != 0)
      return false;
    if (x.kind == LT_ATTR_FLOAT && std::memcmp(&x.f, &y.f, sizeof(double)) != 0) return false;
    if (x.kind == LT_ATTR_INT && x.i != y.i) return false;
    if (x.kind == LT_ATTR_INTS && x.ints_len != y.ints_len) return false;
    if (x.kind == LT_ATTR_STRING && std::strcmp(x.s ? x.s : "", y.s ? y.s : "") != 0) return false;
  }
  return true;
}

std::string where(const lt_dim_expr& e, const lt_graph& g) {
  const lt_graph_node& n = g.nodes[e.node];
  std::string s = "node " + std::to_string(e.node) + " (" + n.op + ") ";
  if (e.attr < 0) return s + "dim " + std::to_string(e.index);
  return s + "attribute '" + (n.attrs[e.attr].name ? n.attrs[e.attr].name : "?") + "'[" +
         std::to_string(e.index) + "]";
}

}  // namespace

DynamicView dynamic_of(const lt_graph& g) {
  if (!LT_GRAPH_HAS_DYNAMIC(&g) || !g.symbol_values) return {};
  return {{g.symbol_values, g.num_symbols}, {g.dim_exprs, g.dim_exprs ? g.num_dim_exprs : 0}};
}

std::vector<DimForm> shape_forms(const lt_graph& g, size_t node) {
  const lt_graph_node& n = g.nodes[node];
  std::vector<DimForm> out(n.rank);
  for (size_t d = 0; d < n.rank; ++d) out[d].offset = n.shape[d];
  DynamicView dv = dynamic_of(g);
  auto it = std::lower_bound(dv.exprs.begin(), dv.exprs.end(), static_cast<int32_t>(node),
                             [](const lt_dim_expr& e, int32_t v) { return e.node < v; });
  for (; it != dv.exprs.end() && it->node == static_cast<int32_t>(node) && it->attr < 0; ++it)
    out[static_cast<size_t>(it->index)] = {it->symbol, it->scale, it->offset};
  return out;
}

size_t bytes_at(std::span<const DimForm> dims, lt_dtype dtype, std::span<const int64_t> values) {
  size_t n = lt_dtype_size(dtype);
  for (const DimForm& d : dims) n *= static_cast<size_t>(std::max<int64_t>(0, d.at(values)));
  return n;
}

void validate_dynamic(const lt_graph& g) {
  DynamicView dv = dynamic_of(g);
  if (dv.empty()) return;
  if (dv.values.size() > kMaxSymbols)
    fail(LT_STATUS_INVALID_ARGUMENT, "graph: " + std::to_string(dv.values.size()) +
                                         " dynamic symbols (at most " +
                                         std::to_string(kMaxSymbols) + ")");
  if (!dv.exprs.empty() && !g.dim_exprs)
    fail(LT_STATUS_INVALID_ARGUMENT, "graph: dim_exprs is NULL");
  for (size_t k = 0; k < dv.exprs.size(); ++k) {
    const lt_dim_expr& e = dv.exprs[k];
    std::string at = "graph: dim expression " + std::to_string(k);
    if (e.node < 0 || static_cast<size_t>(e.node) >= g.num_nodes)
      fail(LT_STATUS_INVALID_ARGUMENT, at + " names node " + std::to_string(e.node));
    const lt_graph_node& n = g.nodes[e.node];
    bool ok = e.attr < 0 ? e.attr == -1 && e.index >= 0 && static_cast<size_t>(e.index) < n.rank
                         : static_cast<size_t>(e.attr) < n.num_attrs &&
                               n.attrs[e.attr].kind == LT_ATTR_INTS && e.index >= 0 &&
                               static_cast<size_t>(e.index) < n.attrs[e.attr].ints_len;
    if (!ok)
      fail(LT_STATUS_INVALID_ARGUMENT, at + " names no number of node " + std::to_string(e.node));
    if (e.symbol < 0 || static_cast<size_t>(e.symbol) >= dv.values.size() || e.scale == 0)
      fail(LT_STATUS_INVALID_ARGUMENT, at + ": bad symbol or zero scale");
    if (k && !(position(dv.exprs[k - 1]) < position(e)))
      fail(LT_STATUS_INVALID_ARGUMENT, at + ": expressions are not sorted by position");
    if (number_at(g, e) != e.scale * dv.values[static_cast<size_t>(e.symbol)] + e.offset)
      fail(LT_STATUS_SHAPE_MISMATCH, at + ": " + where(e, g) + " is " +
                                         std::to_string(number_at(g, e)) + ", not " +
                                         std::to_string(e.scale) + " * " +
                                         std::to_string(dv.values[static_cast<size_t>(e.symbol)]) +
                                         " + " + std::to_string(e.offset));
  }
}

OwnedGraph instantiate(const lt_graph& g, std::span<const int64_t> values) {
  DynamicView dv = dynamic_of(g);
  if (values.size() != dv.values.size())
    fail(LT_STATUS_INVALID_ARGUMENT, "instantiate: " + std::to_string(values.size()) +
                                         " symbol values for a graph of " +
                                         std::to_string(dv.values.size()));
  OwnedGraph og;
  size_t e = 0;
  Shape shape;
  std::vector<lt_attr> attrs;
  std::vector<std::vector<int64_t>> ints;
  for (size_t i = 0; i < g.num_nodes; ++i) {
    const lt_graph_node& n = g.nodes[i];
    shape.assign(n.shape, n.shape + n.rank);
    attrs.assign(n.attrs, n.attrs + n.num_attrs);
    ints.assign(n.num_attrs, {});
    for (; e < dv.exprs.size() && dv.exprs[e].node == static_cast<int32_t>(i); ++e) {
      const lt_dim_expr& x = dv.exprs[e];
      int64_t v = x.scale * values[static_cast<size_t>(x.symbol)] + x.offset;
      if (x.attr < 0) {
        if (v < 0)
          fail(LT_STATUS_SHAPE_MISMATCH,
               "instantiate: " + where(x, g) + " would be " + std::to_string(v));
        shape[static_cast<size_t>(x.index)] = v;
        continue;
      }
      lt_attr& a = attrs[static_cast<size_t>(x.attr)];
      auto& store = ints[static_cast<size_t>(x.attr)];
      if (store.empty()) store.assign(a.ints, a.ints + a.ints_len);
      store[static_cast<size_t>(x.index)] = v;
      a.ints = store.data();
    }
    og.add(n.op, n.dtype, shape, std::vector<int32_t>(n.operands, n.operands + n.num_operands),
           attrs.data(), attrs.size());
  }
  og.set_inputs(std::vector<int32_t>(g.inputs, g.inputs + g.num_inputs));
  og.set_outputs(std::vector<int32_t>(g.outputs, g.outputs + g.num_outputs));
  og.set_hash(g.hash);
  og.set_dynamic(std::vector<int64_t>(values.begin(), values.end()),
                 std::vector<lt_dim_expr>(dv.exprs.begin(), dv.exprs.end()));
  return og;
}

bool same_structure(const lt_graph& a, const lt_graph& b) {
  if (a.num_nodes != b.num_nodes || a.num_inputs != b.num_inputs || a.num_outputs != b.num_outputs)
    return false;
  if (a.num_inputs && std::memcmp(a.inputs, b.inputs, a.num_inputs * sizeof(int32_t)) != 0)
    return false;
  if (a.num_outputs && std::memcmp(a.outputs, b.outputs, a.num_outputs * sizeof(int32_t)) != 0)
    return false;
  for (size_t i = 0; i < a.num_nodes; ++i)
    if (!same_node(a.nodes[i], b.nodes[i])) return false;
  return true;
}

bool derive_exprs(const lt_graph& base, std::span<const int64_t> base_values,
                  std::span<const lt_graph* const> varied, std::span<const int64_t> varied_values,
                  std::vector<lt_dim_expr>* exprs, std::string* why) {
  exprs->clear();
  for (size_t k = 0; k < varied.size(); ++k)
    if (!same_structure(base, *varied[k]) || varied_values[k] == base_values[k]) {
      *why = "the graph's structure changes with symbol " + std::to_string(k);
      return false;
    }
  // Per node: walk the numbers of base and every varied graph in lockstep.
  std::vector<int64_t> moved(varied.size());
  for (size_t i = 0; i < base.num_nodes; ++i) {
    std::vector<std::vector<int64_t>> numbers(varied.size());
    for (size_t k = 0; k < varied.size(); ++k)
      for_each_number(varied[k]->nodes[i],
                      [&](int32_t, int32_t, int64_t v) { numbers[k].push_back(v); });
    size_t p = 0;
    bool ok = true;
    for_each_number(base.nodes[i], [&](int32_t attr, int32_t index, int64_t x0) {
      if (!ok) return;
      int found = -1;
      for (size_t k = 0; k < varied.size(); ++k) {
        if (numbers[k][p] == x0) continue;
        if (found >= 0) {
          *why = where({static_cast<int32_t>(i), attr, index, 0, 1, 0}, base) +
                 " moves with two symbols";
          ok = false;
          return;
        }
        found = static_cast<int>(k);
      }
      ++p;
      if (found < 0) return;
      const auto k = static_cast<size_t>(found);
      const int64_t step = varied_values[k] - base_values[k];
      const int64_t diff = numbers[k][p - 1] - x0;
      if (diff % step != 0) {
        *why = where({static_cast<int32_t>(i), attr, index, 0, 1, 0}, base) +
               " does not move by a whole multiple of its symbol";
        ok = false;
        return;
      }
      const int64_t scale = diff / step;
      exprs->push_back({static_cast<int32_t>(i), attr, index, static_cast<int32_t>(k), scale,
                        x0 - scale * base_values[k]});
    });
    if (!ok) return false;
  }
  return true;
}

bool generalize(const lt_graph& seen, const lt_graph& now, std::vector<int64_t>* values,
                std::vector<lt_dim_expr>* exprs, std::string* why) {
  values->clear();
  exprs->clear();
  if (!same_structure(seen, now)) {
    *why = "the graph's structure changed";
    return false;
  }
  struct Change {
    int32_t node, attr, index;
    int64_t was, is;
  };
  std::vector<Change> changes;
  std::vector<uint8_t> is_input(now.num_nodes, 0);
  for (size_t k = 0; k < now.num_inputs; ++k) is_input[now.inputs[k]] = 1;
  for (size_t i = 0; i < now.num_nodes; ++i) {
    std::vector<int64_t> old;
    for_each_number(seen.nodes[i], [&](int32_t, int32_t, int64_t v) { old.push_back(v); });
    size_t p = 0;
    for_each_number(now.nodes[i], [&](int32_t attr, int32_t index, int64_t v) {
      if (old[p] != v) changes.push_back({static_cast<int32_t>(i), attr, index, old[p], v});
      ++p;
    });
  }
  if (changes.empty()) {
    *why = "nothing changed";
    return false;
  }
  // Symbols: the distinct (was, is) pairs of the inputs' changed dims, else of the first change.
  std::map<std::pair<int64_t, int64_t>, int32_t> symbol_of;
  std::vector<std::pair<int64_t, int64_t>> symbols;
  auto add_symbol = [&](const Change& c) {
    if (symbol_of.count({c.was, c.is})) return;
    if (symbols.size() == kMaxSymbols) return;
    symbol_of[{c.was, c.is}] = static_cast<int32_t>(symbols.size());
    symbols.push_back({c.was, c.is});
  };
  for (const Change& c : changes)
    if (is_input[c.node] && c.attr < 0) add_symbol(c);
  if (symbols.empty()) add_symbol(changes.front());
  for (const Change& c : changes) {
    auto it = symbol_of.find({c.was, c.is});
    int32_t s = -1;
    int64_t scale = 1;
    if (it != symbol_of.end()) {
      s = it->second;
    } else {  // the first symbol that fits through both points with a whole scale
      for (size_t k = 0; k < symbols.size() && s < 0; ++k) {
        int64_t step = symbols[k].second - symbols[k].first, diff = c.is - c.was;
        if (diff % step == 0) s = static_cast<int32_t>(k), scale = diff / step;
      }
    }
    if (s < 0) {
      *why = where({c.node, c.attr, c.index, 0, 1, 0}, now) + " changed " + std::to_string(c.was) +
             " -> " + std::to_string(c.is) + ", which no dynamic size explains";
      return false;
    }
    exprs->push_back(
        {c.node, c.attr, c.index, s, scale, c.is - scale * symbols[static_cast<size_t>(s)].second});
  }
  for (const auto& [was, is] : symbols) values->push_back(is);
  return true;
}

bool fit_build(const lt_graph& g, const Build& at_base,
               const std::function<Build(const lt_graph&)>& build, std::vector<DimForm>* forms,
               std::string* why) {
  DynamicView dv = dynamic_of(g);
  const std::vector<int64_t> base(dv.values.begin(), dv.values.end());
  forms->assign(at_base.numbers.size(), DimForm{});
  for (size_t i = 0; i < forms->size(); ++i) (*forms)[i].offset = at_base.numbers[i];
  auto at = [&](const std::vector<int64_t>& values, const char* what) {
    Build b;
    try {  // a number the sizes move may be no size (an axis, a permutation)
      b = build(instantiate(g, values).view());
    } catch (const std::exception& e) {
      *why = std::string("it cannot be built at ") + what + ": " + e.what();
      return std::optional<Build>();
    }
    if (b.code != at_base.code || b.numbers.size() != at_base.numbers.size()) {
      *why = std::string("its code changes with ") + what;
      return std::optional<Build>();
    }
    return std::optional<Build>(std::move(b));
  };
  for (size_t k = 0; k < base.size(); ++k) {
    std::vector<int64_t> values = base;
    values[k] += 1;
    std::optional<Build> b = at(values, "a size");
    if (!b) return false;
    for (size_t i = 0; i < forms->size(); ++i) {
      const int64_t diff = b->numbers[i] - at_base.numbers[i];
      if (!diff) continue;
      DimForm& f = (*forms)[i];
      if (f.symbol >= 0) {
        *why = "a launch number moves with two sizes";
        return false;
      }
      f = {static_cast<int32_t>(k), diff, at_base.numbers[i] - diff * base[k]};
    }
  }
  std::vector<int64_t> check = base;
  for (int64_t& v : check) v = 2 * v + 5;
  std::optional<Build> b = at(check, "other sizes");
  if (!b) return false;
  for (size_t i = 0; i < forms->size(); ++i)
    if ((*forms)[i].at(check) != b->numbers[i]) {
      *why = "a launch number is not affine in its size";
      return false;
    }
  return true;
}

bool match(const lt_graph& base, const lt_graph& concrete, std::vector<int64_t>* values) {
  DynamicView dv = dynamic_of(base);
  if (!same_structure(base, concrete)) return false;
  values->assign(dv.values.size(), 0);
  std::vector<uint8_t> known(dv.values.size(), 0);
  size_t e = 0;
  for (size_t i = 0; i < base.num_nodes; ++i) {
    const lt_graph_node &b = base.nodes[i], &c = concrete.nodes[i];
    std::vector<int64_t> mine;
    for_each_number(c, [&](int32_t, int32_t, int64_t v) { mine.push_back(v); });
    size_t p = 0;
    bool ok = true;
    for_each_number(b, [&](int32_t attr, int32_t index, int64_t x) {
      const int64_t v = mine[p++];
      if (!ok) return;
      if (e < dv.exprs.size() && dv.exprs[e].node == static_cast<int32_t>(i) &&
          dv.exprs[e].attr == attr && dv.exprs[e].index == index) {
        const lt_dim_expr& x_e = dv.exprs[e++];
        const auto s = static_cast<size_t>(x_e.symbol);
        if (!known[s]) {
          if ((v - x_e.offset) % x_e.scale != 0) {
            ok = false;
            return;
          }
          (*values)[s] = (v - x_e.offset) / x_e.scale;
          known[s] = 1;
        }
        ok = x_e.scale * (*values)[s] + x_e.offset == v;
        return;
      }
      ok = x == v;
    });
    if (!ok) return false;
  }
  return std::all_of(known.begin(), known.end(), [](uint8_t k) { return k != 0; });
}

NumberedText split_numbers(std::string_view code, char suffix) {
  NumberedText out;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  size_t i = 0;
  while (i < code.size()) {
    size_t j = i;
    while (j < code.size() && std::isdigit(static_cast<unsigned char>(code[j]))) ++j;
    const bool literal = j > i && (i == 0 || (!word(code[i - 1]) && code[i - 1] != '.')) &&
                         j < code.size() && code[j] == suffix &&
                         (j + 1 == code.size() || !word(code[j + 1])) && j - i <= 18;
    if (literal) {
      out.numbers.push_back(std::stoll(std::string(code.substr(i, j - i))));
      out.text += kNumberMark;
      i = j + 1;
    } else {  // copy up to the next digit that starts a token
      out.text += code[i++];
      while (i < code.size() && !(std::isdigit(static_cast<unsigned char>(code[i])) &&
                                  !word(code[i - 1]) && code[i - 1] != '.'))
        out.text += code[i++];
    }
  }
  return out;
}

bool SourceTemplate::arguments(std::string_view at, std::vector<std::vector<int64_t>>* args) const {
  NumberedText t = split_numbers(at, suffix);
  if (t.text != base.text) return false;
  std::vector<std::optional<int64_t>> found(where.size());
  for (size_t j = 0; j < t.numbers.size(); ++j) {
    if (param[j] < 0) {
      if (t.numbers[j] != base.numbers[j]) return false;
      continue;
    }
    std::optional<int64_t>& a = found[static_cast<size_t>(param[j])];
    if (a && *a != t.numbers[j]) return false;
    a = t.numbers[j];
  }
  args->clear();
  for (size_t p = 0; p < where.size(); ++p) {
    if (args->size() <= where[p].first) args->resize(where[p].first + 1);
    std::vector<int64_t>& k = (*args)[where[p].first];
    k.resize(std::max(k.size(), where[p].second + 1));
    k[where[p].second] = *found[p];
  }
  return true;
}

bool template_source(const lt_graph& g, const std::function<std::string(const lt_graph&)>& generate,
                     std::string_view kernel, std::string_view type, SourceTemplate* out,
                     std::string* why) {
  out->base = split_numbers(generate(g), out->suffix);
  const NumberedText& base = out->base;
  const size_t count = base.numbers.size();
  std::vector<std::vector<int64_t>> seen(count);  // each number at every point
  for (size_t j = 0; j < count; ++j) seen[j] = {base.numbers[j]};
  std::vector<char> moves(count, 0);
  DynamicView dv = dynamic_of(g);
  for (size_t k = 0; k <= dv.values.size(); ++k) {  // each symbol moved by one, then a check point
    std::vector<int64_t> at(dv.values.begin(), dv.values.end());
    for (size_t s = 0; s < at.size(); ++s) at[s] = k < at.size() ? at[s] + (s == k) : 2 * at[s] + 5;
    NumberedText t;
    try {
      t = split_numbers(generate(instantiate(g, at).view()), out->suffix);
    } catch (const std::exception& e) {  // a number the sizes move is no size (an axis)
      *why = std::string("it cannot be generated at other sizes: ") + e.what();
      return false;
    }
    if (t.text != base.text) {
      *why = k < at.size() ? "its code changes with a size" : "its code changes at other sizes";
      return false;
    }
    for (size_t j = 0; j < count; ++j)
      seen[j].push_back(t.numbers[j]), moves[j] |= t.numbers[j] != base.numbers[j];
  }
  std::string& src = out->source;
  src.clear(), out->where.clear(), out->param.assign(count, -1);
  std::map<std::vector<int64_t>, size_t> series;  // of the current kernel
  size_t j = 0, kernels = 0, sig = std::string::npos;
  std::string params;
  auto close = [&] {  // the arguments into the previous kernel's parameter list
    if (sig != std::string::npos) src.insert(src.find(") {\n", sig), params);
    params.clear(), series.clear();
  };
  for (size_t i = 0; i < base.text.size(); ++i) {
    if (base.text.compare(i, kernel.size(), kernel) == 0) close(), sig = src.size(), ++kernels;
    if (base.text[i] != kNumberMark) {
      src += base.text[i];
    } else if (!moves[j]) {
      src += std::to_string(base.numbers[j++]) + out->suffix;
    } else {
      if (!kernels) {
        *why = "a size moves a number outside its kernels";
        return false;
      }
      auto [it, fresh] = series.emplace(seen[j], series.size());
      if (fresh) {
        params += ", " + std::string(type) + " lt_n" + std::to_string(it->second);
        out->where.emplace_back(kernels - 1, it->second);
      }
      out->param[j++] = static_cast<int32_t>(out->where.size() - series.size() + it->second);
      src += "lt_n" + std::to_string(it->second);
    }
  }
  close();
  return true;
}

}  // namespace lt::lower
