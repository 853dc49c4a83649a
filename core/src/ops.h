// ops.h — the op registry: the rows of lazytensor/lt_ops.def (ids, operand counts, attribute
// specs, dtype classes) joined to the core's builders (validation, dtype promotion, shape
// inference, canonicalisation into the IR of docs/ops.md), plus custom ops appended at run time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir.h"
#include "lazytensor/lower/ops.hpp"

namespace lt {

// Arguments of one user-level op call, before canonicalisation.
struct OpCall {
  Device* device;
  uint16_t op;
  const NodeRef* inputs;
  size_t num_inputs;
  const lt_attr* attrs;
  size_t num_attrs;

  const lt_attr* attr(const char* name) const;  // NULL if absent
  // Attribute values; when absent, the default of the op's table row (a required attribute
  // was already checked by apply_op). Kinds were checked by apply_op too.
  int64_t attr_int(const char* name) const;
  double attr_float(const char* name) const;
  lt_dtype attr_dtype(const char* name) const;
  // INTS attribute; `present` false when absent (then the row's default, or empty).
  std::vector<int64_t> attr_ints(const char* name, bool* present = nullptr) const;
};

// Builds the canonical IR for a call (may create several nodes) and returns its result.
using BuildFn = NodeRef (*)(const OpCall& call);

struct OpDef {
  std::string name;
  int min_inputs = 0;
  int max_inputs = 0;                   // -1: unbounded
  std::vector<std::string> attr_names;  // custom ops: accepted attribute names (any kind)
  const lower::OpInfo* info = nullptr;  // built-in ops: the lt_ops.def row
  BuildFn build = nullptr;
};

// Registry access. Built-ins are registered at first use; lookups by id never lock.
const OpDef& op_def(uint16_t id);
const char* op_name(uint16_t id);
size_t op_count();
// Finds an op id by name; returns false if unknown.
bool find_op(std::string_view name, uint16_t* id);
// Appends an op at run time (custom ops); returns its id. Throws on a duplicate name.
uint16_t register_op(OpDef def);

// Validates and records `call`; throws lt::Error naming the op and offending shapes/dtypes.
NodeRef apply_op(const OpCall& call);

// The primitive behind every builder: a canonical node with hashes computed.
// No tensor may hold more than 2^46 bytes (64 TiB: more than any machine here can allocate);
// every node's shape is checked at creation, so element counts and byte sizes computed later
// cannot overflow.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 46;
// The byte size of a tensor of `dtype` and `shape`; fails (INVALID_ARGUMENT, naming `what`, the
// shape and the size) on a negative dimension, an overflow or more than kMaxTensorBytes.
size_t checked_bytes(const char* what, lt_dtype dtype, const Dims& shape);
NodeRef make_node(Device* device, uint16_t op, std::initializer_list<Node*> operands,
                  lt_dtype dtype, const Dims& shape, std::unique_ptr<AttrSet> attrs = nullptr);
NodeRef make_node_n(Device* device, uint16_t op, Node* const* operands, size_t n, lt_dtype dtype,
                    const Dims& shape, std::unique_ptr<AttrSet> attrs = nullptr);
// Leaves: a placeholder/host-data leaf (buffer attached by the caller) or a scalar parameter.
NodeRef make_leaf(Device* device, lt_dtype dtype, const Dims& shape);
NodeRef make_scalar_leaf(Device* device, lt_dtype dtype, uint64_t raw_bits);
// Encodes `value` as dtype's raw bytes (as cast does).
uint64_t encode_scalar(lt_dtype dtype, double value);

}  // namespace lt
