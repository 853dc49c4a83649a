// ops.hpp — the op table (lazytensor/lt_ops.def) as data: op ids, names, categories, operand
// counts, attribute specs with their defaults, dtype classes, rules and primitive/composite.
// Everything here is generated from the table at compile time or parsed from it once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lazytensor/lt_types.h"

namespace lt {

// Built-in op ids, in table order. Internal only: ops cross every ABI by name.
enum OpId : uint16_t {
#define LT_OP(Camel, ...) kOp##Camel,
#include "lazytensor/lt_ops.def"
#undef LT_OP
  kNumBuiltinOps
};

}  // namespace lt

namespace lt::lower {

enum class Category : uint8_t {
  kInput,
  kElementwise,
  kCreation,
  kReduction,
  kContraction,
  kLayout,
  kNn,
  kCollective
};

// Dtypes an op accepts for its data operands (lt_ops.def, column `dtypes`).
enum class DTypes : uint8_t { kFloat, kNumeric, kBool, kAny };

// The shape/dtype rules of the table (column `rule`); several ops share one.
enum class Rule : uint8_t {
  input,
  unary,
  binary,
  compare,
  where,
  cast,
  full,
  arange,
  random_unit,
  random,
  reduce,
  argmax,
  matmul,
  reshape,
  permute,
  broadcast_to,
  slice,
  concat,
  pad,
  gather,
  scatter_add,
  conv2d,
  conv2d_grad,
  pool,
  softmax,
  collective,
  all_gather,
};

// One attribute of an op as the table declares it.
struct AttrSpec {
  enum class Presence : uint8_t { kRequired, kOptional, kDefault };
  std::string name;
  lt_attr_kind kind = LT_ATTR_INT;
  bool is_dtype = false;  // an INT holding an lt_dtype value
  Presence presence = Presence::kRequired;
  int64_t i = 0;  // default of an int / dtype
  double f = 0;   // default of a float
  std::vector<int64_t> ints;
};

struct OpInfo {
  OpId id{};
  std::string_view name;
  Category category{};
  int min_inputs = 0, max_inputs = 0;  // max -1: unbounded
  std::vector<AttrSpec> attrs;
  DTypes dtypes{};
  Rule rule{};
  bool composite = false;
  const AttrSpec* attr(std::string_view attr_name) const;
};

// The row of a built-in op.
const OpInfo& op_info(OpId id);
// The built-in op of that name, or nullptr (custom ops are the core's business).
const OpInfo* find_op(std::string_view name);

// True if data operands of class `c` may have dtype `d` (FLOAT includes bf16/f16 storage).
bool dtype_in(DTypes c, lt_dtype d);
const char* dtypes_name(DTypes c);  // "float", "numeric", "bool", "any"
const char* category_name(Category c);

bool is_float(lt_dtype d);    // f32 f64 bf16 f16
bool is_int(lt_dtype d);      // i32 i64
bool is_numeric(lt_dtype d);  // float or int

// Parses an attribute spec ("axes:ints=[] keepdims:int=0"); throws lower::Error naming the
// text on a malformed spec (a bug in the table, caught by the unit tests).
std::vector<AttrSpec> parse_attr_specs(std::string_view spec);

}  // namespace lt::lower
