// custom_ops.h — run-time registered ops (lt_register_custom_op, SDK engineer): the table of
// callbacks behind their registry ids, the core-side CPU execution of their nodes, and the
// autograd rule that forwards to a custom gradient callback.
#pragma once

#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "ir.h"
#include "lazytensor/lt.h"

namespace lt {

struct CustomOp {
  std::string name;
  std::vector<std::string> attr_names;
  lt_custom_op_def def{};  // callbacks + user; name/attr_names pointers are not kept
};

// The custom op behind a registry id; NULL for built-in ops.
const CustomOp* find_custom_op(uint16_t id);
// The custom op of that name; NULL for built-in ops and unknown names.
const CustomOp* find_custom_op(const std::string& name);
// The custom op of that name if it has a gradient callback; NULL otherwise.
const CustomOp* find_custom_op_with_grad(const std::string& name);

// Runs a node's CPU kernel: `node` describes it (output dtype/shape, attributes), `args` its
// operands and `inputs` their dense host bytes (operand order); `out` receives the output
// (numel * dtype size bytes). Throws lt::Error naming the op on failure.
void run_custom_kernel(const CustomOp& op, const lt_graph_node& node,
                       const std::vector<lt_custom_op_tensor>& args, void* out);

// autograd Rule for every custom op with a gradient callback (found through find_rule).
void custom_grad_rule(const autograd::GradFn& fn, lt_tensor* g, std::vector<autograd::Ref>& grads);

}  // namespace lt
