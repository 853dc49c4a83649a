// custom_ops.cpp — lt_register_custom_op and what custom ops need from the core: a registry
// build function that calls the op's inference callback, the CPU kernel runner the executor
// uses when no backend claims the op, and the autograd bridge to the gradient callback.
// Every user callback is C; a C++ exception escaping one is still caught and reported.
#include "custom_ops.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "error.h"
#include "ops.h"
#include "runtime.h"

namespace lt {
namespace {

struct Table {
  std::shared_mutex mu;
  std::deque<CustomOp> ops;  // deque: pointers stay valid as ops are appended
  std::unordered_map<uint16_t, const CustomOp*> by_id;
  std::unordered_map<std::string, const CustomOp*> by_name;
};
Table& table() {
  static Table* t = new Table;  // never destroyed: callbacks may run during static teardown
  return *t;
}

// Calls a user callback with a fresh error buffer; throws lt::Error("<op>: <what>: <msg>").
void call_user(const CustomOp& op, const char* what, lt_custom_op_fn fn, lt_custom_op_args& a) {
  char msg[512] = {0};
  a.struct_size = LT_CUSTOM_OP_ARGS_STRUCT_SIZE;
  a.user = op.def.user;
  a.error = msg;
  a.error_size = sizeof msg;
  lt_status_code code = LT_STATUS_OK;
  try {
    code = fn(&a);
  } catch (...) {
    fail(LT_STATUS_INTERNAL, "{}: the custom op's {} threw a C++ exception", op.name, what);
  }
  msg[sizeof msg - 1] = 0;
  if (code != LT_STATUS_OK)
    throw Error(code, fmt::format("{}: {}", op.name, msg[0] ? msg : "custom op callback failed"));
}

NodeRef build_custom(const OpCall& c) {
  const CustomOp* op = find_custom_op(c.op);
  if (!op) fail(LT_STATUS_INTERNAL, "op id {} is not a custom op", c.op);
  if (!c.device) fail(LT_STATUS_INVALID_ARGUMENT, "{}: a device is required", op->name);
  std::vector<lt_custom_op_tensor> ins(c.num_inputs);
  std::vector<Node*> operands(c.num_inputs);
  for (size_t i = 0; i < c.num_inputs; ++i) {
    Node* n = c.inputs[i].get();
    ins[i] = {n->dtype, n->shape.size(), n->shape.data(), nullptr};
    operands[i] = n;
  }
  int64_t shape[LT_CUSTOM_OP_MAX_RANK] = {0};
  lt_custom_op_args a{};
  a.num_inputs = ins.size();
  a.inputs = ins.data();
  a.num_attrs = c.num_attrs;
  a.attrs = c.attrs;
  a.out_shape = shape;
  call_user(*op, "inference", op->def.infer, a);
  if (lt_dtype_size(a.out_dtype) == 0)
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: inference returned invalid dtype {}", op->name,
         static_cast<int>(a.out_dtype));
  if (a.out_rank > LT_CUSTOM_OP_MAX_RANK)
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: inference returned rank {} (max {})", op->name,
         a.out_rank, LT_CUSTOM_OP_MAX_RANK);
  std::unique_ptr<AttrSet> attrs;
  if (c.num_attrs) {
    attrs = std::make_unique<AttrSet>();
    for (size_t i = 0; i < c.num_attrs; ++i) {
      const lt_attr& in = c.attrs[i];
      lower::OwnedAttr& s = attrs->items.emplace_back();
      s.name = in.name;
      s.kind = in.kind;
      if (in.kind == LT_ATTR_INT) s.i = in.i;
      if (in.kind == LT_ATTR_FLOAT) s.f = in.f;
      if (in.kind == LT_ATTR_INTS && in.ints_len) {
        if (!in.ints)
          fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' has NULL ints", op->name, in.name);
        s.ints.assign(in.ints, in.ints + in.ints_len);
      }
      if (in.kind == LT_ATTR_STRING) {
        if (!in.s)
          fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' has a NULL string", op->name,
               in.name);
        s.s = in.s;
      }
    }
    attrs->finish();
  }
  return make_node_n(c.device, c.op, operands.data(), operands.size(), a.out_dtype,
                     Dims(shape, a.out_rank), std::move(attrs));
}

bool valid_name(const char* n) {
  if (!n || !*n) return false;
  for (const char* p = n; *p; ++p)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
      return false;
  return true;
}

}  // namespace

const CustomOp* find_custom_op(uint16_t id) {
  if (id < kNumBuiltinOps) return nullptr;
  Table& t = table();
  std::shared_lock lk(t.mu);
  auto it = t.by_id.find(id);
  return it == t.by_id.end() ? nullptr : it->second;
}

const CustomOp* find_custom_op(const std::string& name) {
  Table& t = table();
  std::shared_lock lk(t.mu);
  auto it = t.by_name.find(name);
  return it == t.by_name.end() ? nullptr : it->second;
}

const CustomOp* find_custom_op_with_grad(const std::string& name) {
  Table& t = table();
  std::shared_lock lk(t.mu);
  auto it = t.by_name.find(name);
  return it == t.by_name.end() || !it->second->def.grad ? nullptr : it->second;
}

void run_custom_kernel(const CustomOp& op, const lt_graph_node& node,
                       const std::vector<lt_custom_op_tensor>& args, void* out) {
  std::vector<int64_t> shape(node.shape, node.shape + node.rank);
  shape.resize(LT_CUSTOM_OP_MAX_RANK);
  int64_t numel = 1;
  for (size_t i = 0; i < node.rank; ++i) numel *= node.shape[i];
  lt_custom_op_args a{};
  a.num_inputs = args.size();
  a.inputs = args.data();
  a.num_attrs = node.num_attrs;
  a.attrs = node.attrs;
  a.out_dtype = node.dtype;
  a.out_rank = node.rank;
  a.out_shape = shape.data();
  a.out_data = out;
  a.out_nbytes = static_cast<size_t>(numel) * lt_dtype_size(node.dtype);
  CallbackScope in_kernel;  // runtime calls from the kernel never wait on a queue (async.h)
  call_user(op, "cpu_kernel", op.def.cpu_kernel, a);
}

void custom_grad_rule(const autograd::GradFn& fn, lt_tensor* g, std::vector<autograd::Ref>& grads) {
  const CustomOp* op = find_custom_op_with_grad(fn.op);
  if (!op) fail(LT_STATUS_UNSUPPORTED, "{}: custom op has no gradient", fn.op);
  const std::vector<lt_attr>& attrs = fn.attrs.view;
  std::vector<lt_tensor*> ins(fn.inputs.size()), out(fn.inputs.size(), nullptr);
  for (size_t i = 0; i < ins.size(); ++i) ins[i] = fn.inputs[i].get();
  lt_error* e = nullptr;
  try {
    e = op->def.grad(op->def.user, ins.data(), ins.size(), fn.output, g, attrs.data(), attrs.size(),
                     out.data());
  } catch (...) {
    fail(LT_STATUS_INTERNAL, "{}: the custom op's gradient threw a C++ exception", fn.op);
  }
  std::vector<autograd::Ref> owned;
  for (lt_tensor* t : out) owned.emplace_back(t);  // freed on every path below
  if (e) {
    std::string m = lt_error_message(e);
    lt_status_code code = lt_error_code(e);
    lt_error_destroy(e);
    throw Error(code, fmt::format("{}: gradient: {}", fn.op, m));
  }
  grads.resize(ins.size());
  for (size_t i = 0; i < ins.size(); ++i)
    if (fn.needs_grad[i]) grads[i] = std::move(owned[i]);
}

}  // namespace lt

using namespace lt;

LT_API lt_error* lt_register_custom_op(const lt_custom_op_def* def) {
  return guard([&] {
    if (!def) fail(LT_STATUS_INVALID_ARGUMENT, "lt_register_custom_op: def is NULL");
    if (def->struct_size < LT_CUSTOM_OP_DEF_STRUCT_SIZE)
      fail(LT_STATUS_INVALID_ARGUMENT,
           "lt_register_custom_op: def->struct_size {} is smaller than {}", def->struct_size,
           LT_CUSTOM_OP_DEF_STRUCT_SIZE);
    if (!valid_name(def->name))
      fail(LT_STATUS_INVALID_ARGUMENT, "lt_register_custom_op: name '{}' is not [a-z0-9_.]+",
           def->name ? def->name : "(null)");
    if (!def->infer || !def->cpu_kernel)
      fail(LT_STATUS_INVALID_ARGUMENT,
           "lt_register_custom_op: {}: infer and cpu_kernel are required", def->name);
    if (def->max_inputs < def->min_inputs || def->max_inputs > 0xFFFF)
      fail(LT_STATUS_INVALID_ARGUMENT, "lt_register_custom_op: {}: bad input counts {}..{}",
           def->name, def->min_inputs, def->max_inputs);
    if (def->num_attr_names && !def->attr_names)
      fail(LT_STATUS_INVALID_ARGUMENT, "lt_register_custom_op: {}: attr_names is NULL", def->name);
    CustomOp op;
    op.name = def->name;
    for (size_t i = 0; i < def->num_attr_names; ++i) {
      if (!def->attr_names[i])
        fail(LT_STATUS_INVALID_ARGUMENT, "lt_register_custom_op: {}: attr_names[{}] is NULL",
             def->name, i);
      op.attr_names.emplace_back(def->attr_names[i]);
    }
    op.def = *def;
    op.def.name = nullptr;
    op.def.attr_names = nullptr;
    OpDef od;
    od.name = op.name;
    od.min_inputs = static_cast<int>(def->min_inputs);
    od.max_inputs = static_cast<int>(def->max_inputs);
    od.attr_names = op.attr_names;
    od.build = build_custom;
    Table& t = table();
    std::unique_lock lk(t.mu);  // held across register_op so the id is mapped before use
    uint16_t id = register_op(std::move(od));  // throws on a duplicate name
    const CustomOp* stored = &t.ops.emplace_back(std::move(op));
    t.by_id.emplace(id, stored);
    t.by_name.emplace(stored->name, stored);
  });
}

LT_API lt_error* lt_error_create(lt_status_code code, const char* message) {
  return make_error(code, message ? message : "");
}
