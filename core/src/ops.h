// ops.h — the op registry: one table-driven schema per op of docs/ops.md (operand count,
// attribute names, validation, dtype promotion, shape inference, canonicalisation).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir.h"

namespace lt {

// Built-in op ids; equal to their index in the registry table (order is internal only:
// ops cross the plugin ABI by name).
enum OpId : uint16_t {
  kOpInput,
  kOpNeg,
  kOpAbs,
  kOpExp,
  kOpLog,
  kOpSqrt,
  kOpRsqrt,
  kOpTanh,
  kOpSigmoid,
  kOpRelu,
  kOpGelu,
  kOpSin,
  kOpCos,
  kOpFloor,
  kOpNot,
  kOpAdd,
  kOpSub,
  kOpMul,
  kOpDiv,
  kOpPow,
  kOpMaximum,
  kOpMinimum,
  kOpEq,
  kOpNe,
  kOpLt,
  kOpLe,
  kOpGt,
  kOpGe,
  kOpAnd,
  kOpOr,
  kOpWhere,
  kOpCast,
  kOpFull,
  kOpArange,
  kOpRandomUniform,
  kOpRandomNormal,
  kOpSum,
  kOpMean,
  kOpMax,
  kOpMin,
  kOpArgmax,
  kOpMatmul,
  kOpReshape,
  kOpPermute,
  kOpBroadcastTo,
  kOpSlice,
  kOpConcat,
  kOpPad,
  kOpGather,
  kOpScatterAdd,
  kOpConv2d,
  kOpMaxPool2d,
  kOpAvgPool2d,
  kOpSoftmax,
  kOpLogSoftmax,
  kNumBuiltinOps
};

// Arguments of one user-level op call, before canonicalisation.
struct OpCall {
  Device* device;
  uint16_t op;
  const NodeRef* inputs;
  size_t num_inputs;
  const lt_attr* attrs;
  size_t num_attrs;

  const lt_attr* attr(const char* name) const;  // NULL if absent
  int64_t attr_int(const char* name, int64_t dflt) const;
  double attr_float(const char* name, double dflt) const;
  // INTS attribute; `present` false when absent.
  std::vector<int64_t> attr_ints(const char* name, bool* present = nullptr) const;
};

// Builds the canonical IR for a call (may create several nodes) and returns its result.
using BuildFn = NodeRef (*)(const OpCall& call);

struct OpDef {
  std::string name;
  int min_inputs = 0;
  int max_inputs = 0;                   // -1: unbounded
  std::vector<std::string> attr_names;  // accepted user attribute names
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
NodeRef make_node(Device* device, uint16_t op, std::initializer_list<Node*> operands,
                  lt_dtype dtype, const Dims& shape, std::unique_ptr<AttrSet> attrs = nullptr);
NodeRef make_node_n(Device* device, uint16_t op, Node* const* operands, size_t n, lt_dtype dtype,
                    const Dims& shape, std::unique_ptr<AttrSet> attrs = nullptr);
// Leaves: a placeholder/host-data leaf (buffer attached by the caller) or a scalar parameter.
NodeRef make_leaf(Device* device, lt_dtype dtype, const Dims& shape);
NodeRef make_scalar_leaf(Device* device, lt_dtype dtype, uint64_t raw_bits);
// Encodes `value` as dtype's raw bytes (as cast does).
uint64_t encode_scalar(lt_dtype dtype, double value);

// A canonical f32 example call for `op` (for capability listing): input leaves' specs and
// attributes. Returns false for ops without an example (input).
struct ExampleInput {
  lt_dtype dtype;
  Dims shape;
};
bool op_example(uint16_t op, std::vector<ExampleInput>* inputs, std::vector<StoredAttr>* attrs);

}  // namespace lt
