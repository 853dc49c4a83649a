// ops.cpp — the op table as data: one row per LT_OP of lt_ops.def, attribute specs parsed once.
#include <array>
#include "lazytensor/lower/ops.hpp"

#include <charconv>
#include <cstdlib>
#include <unordered_map>

#include "lazytensor/lower/error.hpp"

namespace lt::lower {
namespace {

struct Row {
  OpId id;
  const char* name;
  Category category;
  int min_inputs, max_inputs;
  const char* attrs;
  DTypes dtypes;
  Rule rule;
  bool composite;
};

#define LT_CAT_INPUT Category::kInput
#define LT_CAT_ELEMENTWISE Category::kElementwise
#define LT_CAT_CREATION Category::kCreation
#define LT_CAT_REDUCTION Category::kReduction
#define LT_CAT_CONTRACTION Category::kContraction
#define LT_CAT_LAYOUT Category::kLayout
#define LT_CAT_NN Category::kNn
#define LT_CAT_COLLECTIVE Category::kCollective
#define LT_DT_FLOAT DTypes::kFloat
#define LT_DT_NUMERIC DTypes::kNumeric
#define LT_DT_BOOL DTypes::kBool
#define LT_DT_ANY DTypes::kAny
#define LT_KIND_PRIMITIVE false
#define LT_KIND_COMPOSITE true

constexpr Row kRows[] = {
#define LT_OP(Camel, name, capi, cfn, cppfn, category, lo, hi, attrs, dtypes, rule, grad, kind) \
  {kOp##Camel, name, LT_CAT_##category, lo, hi, attrs, LT_DT_##dtypes, Rule::rule, LT_KIND_##kind},
#include "lazytensor/lt_ops.def"
#undef LT_OP
};
static_assert(sizeof(kRows) / sizeof(kRows[0]) == kNumBuiltinOps);

int64_t parse_int(std::string_view s, std::string_view spec) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    fail(LT_STATUS_INTERNAL,
         "op table: bad integer '" + std::string(s) + "' in '" + std::string(spec) + "'");
  return v;
}

lt_dtype parse_dtype(std::string_view s, std::string_view spec) {
  static const std::pair<std::string_view, lt_dtype> kNames[] = {
      {"f32", LT_DTYPE_F32}, {"f64", LT_DTYPE_F64},   {"i32", LT_DTYPE_I32},
      {"i64", LT_DTYPE_I64}, {"bool", LT_DTYPE_BOOL}, {"bf16", LT_DTYPE_BF16},
      {"f16", LT_DTYPE_F16}};
  for (const auto& [n, d] : kNames)
    if (n == s) return d;
  fail(LT_STATUS_INTERNAL,
       "op table: bad dtype '" + std::string(s) + "' in '" + std::string(spec) + "'");
}

struct Table {
  std::vector<OpInfo> infos;
  std::unordered_map<std::string_view, OpId> by_name;
  Table() {
    infos.reserve(kNumBuiltinOps);
    for (const Row& r : kRows) {
      OpInfo& o = infos.emplace_back();
      o.id = r.id;
      o.name = r.name;
      o.category = r.category;
      o.min_inputs = r.min_inputs;
      o.max_inputs = r.max_inputs;
      o.attrs = parse_attr_specs(r.attrs);
      o.dtypes = r.dtypes;
      o.rule = r.rule;
      o.composite = r.composite;
      by_name.emplace(o.name, o.id);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

std::vector<AttrSpec> parse_attr_specs(std::string_view spec) {
  std::vector<AttrSpec> out;
  size_t pos = 0;
  while (pos < spec.size()) {
    if (spec[pos] == ' ') {
      ++pos;
      continue;
    }
    size_t end = spec.find(' ', pos);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view item = spec.substr(pos, end - pos);
    pos = end;
    AttrSpec a;
    size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon == 0)
      fail(LT_STATUS_INTERNAL, "op table: attribute '" + std::string(item) + "' has no kind");
    a.name = std::string(item.substr(0, colon));
    std::string_view kind = item.substr(colon + 1), dflt;
    if (!kind.empty() && kind.back() == '?') {
      a.presence = AttrSpec::Presence::kOptional;
      kind.remove_suffix(1);
    } else if (size_t eq = kind.find('='); eq != std::string_view::npos) {
      a.presence = AttrSpec::Presence::kDefault;
      dflt = kind.substr(eq + 1);
      kind = kind.substr(0, eq);
    }
    if (kind == "int") {
      a.kind = LT_ATTR_INT;
      if (!dflt.empty()) a.i = parse_int(dflt, spec);
    } else if (kind == "dtype") {
      a.kind = LT_ATTR_INT;
      a.is_dtype = true;
      if (!dflt.empty()) a.i = parse_dtype(dflt, spec);
    } else if (kind == "float") {
      a.kind = LT_ATTR_FLOAT;
      if (!dflt.empty()) {
        std::string text(dflt);
        char* end = nullptr;
        a.f = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size())
          fail(LT_STATUS_INTERNAL,
               "op table: bad number '" + text + "' in '" + std::string(spec) + "'");
      }
    } else if (kind == "ints") {
      a.kind = LT_ATTR_INTS;
      if (!dflt.empty()) {
        if (dflt.size() < 2 || dflt.front() != '[' || dflt.back() != ']')
          fail(LT_STATUS_INTERNAL, "op table: bad list '" + std::string(dflt) + "'");
        std::string_view body = dflt.substr(1, dflt.size() - 2);
        while (!body.empty()) {
          size_t comma = body.find(',');
          a.ints.push_back(parse_int(body.substr(0, comma), spec));
          body = comma == std::string_view::npos ? std::string_view() : body.substr(comma + 1);
        }
      }
    } else {
      fail(LT_STATUS_INTERNAL, "op table: unknown attribute kind in '" + std::string(item) + "'");
    }
    out.push_back(std::move(a));
  }
  return out;
}

const AttrSpec* OpInfo::attr(std::string_view attr_name) const {
  for (const AttrSpec& a : attrs)
    if (a.name == attr_name) return &a;
  return nullptr;
}

const OpInfo& op_info(OpId id) {
  return table().infos[id];
}

const OpInfo* find_op(std::string_view name) {
  // Graphs from the core name ops with the registry's own strings, so the same few pointers
  // come back for every node: a small per-thread cache, placed by the pointer and confirmed
  // by comparing the name, skips hashing (a 100k-node chain spent a fifth of its compile
  // time hashing op names).
  thread_local std::array<const OpInfo*, 32> cache{};
  const OpInfo*& slot = cache[(reinterpret_cast<uintptr_t>(name.data()) >> 3) % cache.size()];
  if (slot && slot->name == name) return slot;
  const Table& t = table();
  auto it = t.by_name.find(name);
  if (it == t.by_name.end()) return nullptr;
  slot = &t.infos[it->second];
  return slot;
}

bool is_float(lt_dtype d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64 || d == LT_DTYPE_BF16 || d == LT_DTYPE_F16;
}
bool is_int(lt_dtype d) {
  return d == LT_DTYPE_I32 || d == LT_DTYPE_I64;
}
bool is_numeric(lt_dtype d) {
  return is_float(d) || is_int(d);
}

bool dtype_in(DTypes c, lt_dtype d) {
  switch (c) {
    case DTypes::kFloat:
      return is_float(d);
    case DTypes::kNumeric:
      return is_numeric(d);
    case DTypes::kBool:
      return d == LT_DTYPE_BOOL;
    case DTypes::kAny:
      return lt_dtype_size(d) != 0;
  }
  return false;
}

const char* dtypes_name(DTypes c) {
  switch (c) {
    case DTypes::kFloat:
      return "float";
    case DTypes::kNumeric:
      return "numeric";
    case DTypes::kBool:
      return "bool";
    case DTypes::kAny:
      return "any";
  }
  return "?";
}

const char* category_name(Category c) {
  static const char* const kNames[] = {"input",       "elementwise", "creation", "reduction",
                                       "contraction", "layout",      "nn",       "collective"};
  return kNames[static_cast<int>(c)];
}

}  // namespace lt::lower
