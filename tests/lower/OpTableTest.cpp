// OpTableTest.cpp — the op table (lt_ops.def) as the lowering library reads it: every row
// parses, names are unique and found, and docs/ops.md's op index says what the table says.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "lazytensor/lower/error.hpp"
#include "lazytensor/lower/ops.hpp"

namespace {

using lt::lower::AttrSpec;
using lt::lower::op_info;

std::string lower_case(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" `"), e = s.find_last_not_of(" `");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The attribute spec text of a row, rebuilt from the parsed specs (round trip).
std::string spec_text(const lt::lower::OpInfo& o) {
  std::string s;
  for (const AttrSpec& a : o.attrs) {
    if (!s.empty()) s += ' ';
    s += a.name + ':';
    s += a.is_dtype                ? "dtype"
         : a.kind == LT_ATTR_INT   ? "int"
         : a.kind == LT_ATTR_FLOAT ? "float"
                                   : "ints";
    if (a.presence == AttrSpec::Presence::kOptional) s += '?';
    if (a.presence != AttrSpec::Presence::kDefault) continue;
    s += '=';
    if (a.is_dtype) {
      s += lt_dtype_name(static_cast<lt_dtype>(a.i));
    } else if (a.kind == LT_ATTR_INT) {
      s += std::to_string(a.i);
    } else if (a.kind == LT_ATTR_FLOAT) {
      std::ostringstream f;
      f << a.f;
      s += f.str();
    } else {
      s += '[';
      for (size_t i = 0; i < a.ints.size(); ++i) s += (i ? "," : "") + std::to_string(a.ints[i]);
      s += ']';
    }
  }
  return s;
}

TEST(OpTable, EveryRowParsesAndIsFoundByName) {
  std::set<std::string> names;
  for (uint16_t id = 0; id < lt::kNumBuiltinOps; ++id) {
    const auto& o = op_info(static_cast<lt::OpId>(id));
    EXPECT_EQ(o.id, id);
    EXPECT_TRUE(names.insert(std::string(o.name)).second) << "duplicate op " << o.name;
    ASSERT_NE(lt::lower::find_op(o.name), nullptr) << o.name;
    EXPECT_EQ(lt::lower::find_op(o.name)->id, id);
    EXPECT_TRUE(o.max_inputs < 0 || o.max_inputs >= o.min_inputs) << o.name;
  }
  EXPECT_EQ(lt::lower::find_op("no_such_op"), nullptr);
  EXPECT_EQ(op_info(lt::kOpInput).name, "input");  // leaves are op 0 in the core's IR
}

TEST(OpTable, AttributeSpecsCarryKindsAndDefaults) {
  const auto& conv = op_info(lt::kOpConv2d);
  const AttrSpec* stride = conv.attr("stride");
  ASSERT_NE(stride, nullptr);
  EXPECT_EQ(stride->kind, LT_ATTR_INTS);
  EXPECT_EQ(stride->presence, AttrSpec::Presence::kDefault);
  EXPECT_EQ(stride->ints, (std::vector<int64_t>{1, 1}));
  const AttrSpec* dt = op_info(lt::kOpFull).attr("dtype");
  ASSERT_NE(dt, nullptr);
  EXPECT_TRUE(dt->is_dtype);
  EXPECT_EQ(dt->i, LT_DTYPE_F32);
  EXPECT_EQ(op_info(lt::kOpCast).attr("dtype")->presence, AttrSpec::Presence::kRequired);
  EXPECT_EQ(op_info(lt::kOpSlice).attr("steps")->presence, AttrSpec::Presence::kOptional);
  EXPECT_DOUBLE_EQ(op_info(lt::kOpRandomUniform).attr("high")->f, 1.0);
}

TEST(OpTable, MalformedSpecsAreRefusedNamingTheText) {
  for (const char* bad : {"axis", "axis:long", "axes:ints=[1,x]", "dtype:dtype=q8"}) {
    try {
      lt::lower::parse_attr_specs(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const lt::lower::Error& e) {
      EXPECT_EQ(e.code(), LT_STATUS_INTERNAL);
    }
  }
}

// docs/ops.md's "Op index": one row per op but "input", in table order, with the table's
// category, kind, operand count, dtype class and attribute spec.
TEST(OpTable, DocsIndexMatchesTheTable) {
  std::ifstream in(std::string(LT_SOURCE_DIR) + "/docs/ops.md");
  ASSERT_TRUE(in) << "cannot read docs/ops.md";
  std::string line;
  bool in_index = false;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_index = line == "## Op index";
    if (!in_index || line.rfind("| ", 0) != 0 || line.rfind("| op ", 0) == 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(trim(cell));
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), lt::kNumBuiltinOps - 1u)
      << "docs/ops.md's op index has " << rows.size() << " rows; the table has "
      << lt::kNumBuiltinOps - 1 << " ops";
  for (uint16_t id = 1; id < lt::kNumBuiltinOps; ++id) {
    const auto& o = op_info(static_cast<lt::OpId>(id));
    const auto& r = rows[id - 1];
    ASSERT_GE(r.size(), 6u) << "row " << id;
    std::string operands = std::to_string(o.min_inputs);
    if (o.max_inputs < 0)
      operands += "+";
    else if (o.max_inputs != o.min_inputs)
      operands += ".." + std::to_string(o.max_inputs);
    std::string attrs = o.attrs.empty() ? "–" : spec_text(o);
    EXPECT_EQ(r[0], o.name);
    EXPECT_EQ(r[1], lt::lower::category_name(o.category)) << o.name;
    EXPECT_EQ(r[2], o.composite ? "composite" : "primitive") << o.name;
    EXPECT_EQ(r[3], operands) << o.name;
    EXPECT_EQ(r[4], lt::lower::dtypes_name(o.dtypes)) << o.name;
    EXPECT_EQ(r[5], attrs) << o.name;
  }
}

}  // namespace
