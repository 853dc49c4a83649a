// ops.cpp — the op registry: the table joining every lt_ops.def row to its builder
// (op_builders.h), attribute checks, apply_op, custom ops appended at run time, and the node
// constructors every builder ends in.
#include "ops.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "error.h"
#include "lazytensor/lower/element.hpp"
#include "op_builders.h"

namespace lt {
namespace {

// ---- the table ----------------------------------------------------------------------------

struct Registry {
  std::deque<OpDef> defs;  // deque: ids stay valid while custom ops are appended
  std::unordered_map<std::string, uint16_t> by_name;
  std::shared_mutex mu;  // guards appends and by_name; defs[id] reads need no lock
  // The built-in ops' names by id, filled once here: op_name is asked up to three times per
  // traced op (for messages that are rarely written), and indexing the deque was 4% of tracing.
  std::vector<const char*> builtin_names;

  Registry() {
    auto add = [&](OpId id, BuildFn fn) {
      const lower::OpInfo& info = lower::op_info(id);
      OpDef d;
      d.name = std::string(info.name);
      d.min_inputs = info.min_inputs;
      d.max_inputs = info.max_inputs;
      d.info = &info;
      d.build = fn;
      by_name.emplace(d.name, static_cast<uint16_t>(defs.size()));
      defs.push_back(std::move(d));
    };
#define LT_OP(Camel, name, capi, cfn, cppfn, category, lo, hi, attrs, dtypes, rule, grad, kind) \
  add(kOp##Camel, &builders::build_##rule);
#include "lazytensor/lt_ops.def"
#undef LT_OP
    for (const OpDef& d : defs) builtin_names.push_back(d.name.c_str());  // deque: they stay
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

// ---- OpCall accessors ---------------------------------------------------------------------

const lt_attr* OpCall::attr(const char* name) const {
  for (size_t i = 0; i < num_attrs; ++i)
    if (attrs[i].name && std::strcmp(attrs[i].name, name) == 0) return &attrs[i];
  return nullptr;
}

namespace {
// The table's spec of attribute `name` of the call's op; only asked for attributes the op's
// row declares (a builder reading an undeclared one is a bug).
const lower::AttrSpec& spec_of(const OpCall& c, const char* name) {
  const lower::OpInfo* info = op_def(c.op).info;
  const lower::AttrSpec* s = info ? info->attr(name) : nullptr;
  if (!s)
    fail(LT_STATUS_INTERNAL, "{}: attribute '{}' is not in the op table", op_name(c.op), name);
  return *s;
}
}  // namespace

int64_t OpCall::attr_int(const char* name) const {
  const lt_attr* a = attr(name);
  return a ? a->i : spec_of(*this, name).i;
}
double OpCall::attr_float(const char* name) const {
  const lt_attr* a = attr(name);
  if (!a) return spec_of(*this, name).f;
  return a->kind == LT_ATTR_INT ? static_cast<double>(a->i) : a->f;
}
lt_dtype OpCall::attr_dtype(const char* name) const {
  return static_cast<lt_dtype>(attr_int(name));
}
std::vector<int64_t> OpCall::attr_ints(const char* name, bool* present) const {
  const lt_attr* a = attr(name);
  if (present) *present = a != nullptr;
  if (!a) return spec_of(*this, name).ints;
  return std::vector<int64_t>(a->ints, a->ints + a->ints_len);
}

// ---- registry -----------------------------------------------------------------------------

const OpDef& op_def(uint16_t id) {
  return registry().defs[id];
}
const char* op_name(uint16_t id) {
  const Registry& r = registry();
  return id < r.builtin_names.size() ? r.builtin_names[id] : r.defs[id].name.c_str();
}
size_t op_count() {
  auto& r = registry();
  std::shared_lock lk(r.mu);
  return r.defs.size();
}
bool find_op(std::string_view name, uint16_t* id) {
  auto& r = registry();
  std::shared_lock lk(r.mu);
  auto it = r.by_name.find(std::string(name));
  if (it == r.by_name.end()) return false;
  *id = it->second;
  return true;
}
uint16_t register_op(OpDef def) {
  auto& r = registry();
  std::unique_lock lk(r.mu);
  if (r.by_name.count(def.name))
    fail(LT_STATUS_INVALID_ARGUMENT, "register_op: op '{}' already exists", def.name);
  if (r.defs.size() >= 0xFFFF) fail(LT_STATUS_INVALID_ARGUMENT, "register_op: too many ops");
  uint16_t id = static_cast<uint16_t>(r.defs.size());
  r.by_name.emplace(def.name, id);
  r.defs.push_back(std::move(def));
  return id;
}

namespace {

const char* kind_name(lt_attr_kind k) {
  switch (k) {
    case LT_ATTR_INT:
      return "INT";
    case LT_ATTR_FLOAT:
      return "FLOAT";
    case LT_ATTR_INTS:
      return "INTS";
    default:
      return "STRING";
  }
}

// Checks the call's attributes against the op's table row: known names, kinds (a FLOAT also
// takes an INT), valid dtype values, INTS arrays present, required attributes given.
void check_attrs(const OpCall& call, const OpDef& def) {
  for (size_t i = 0; i < call.num_attrs; ++i) {
    const lt_attr& a = call.attrs[i];
    if (!a.name) fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute {} has no name", def.name, i);
    if (!def.info) {  // custom op: names only; its inference callback reads the values
      bool known = false;
      for (const auto& s : def.attr_names) known = known || s == a.name;
      if (!known) fail(LT_STATUS_INVALID_ARGUMENT, "{}: unknown attribute '{}'", def.name, a.name);
      continue;
    }
    const lower::AttrSpec* s = def.info->attr(a.name);
    if (!s) fail(LT_STATUS_INVALID_ARGUMENT, "{}: unknown attribute '{}'", def.name, a.name);
    bool ok = a.kind == s->kind || (s->kind == LT_ATTR_FLOAT && a.kind == LT_ATTR_INT);
    if (!ok)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' must be {}", def.name, a.name,
           kind_name(s->kind));
    if (s->is_dtype && !builders::valid_dtype(a.i))
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: invalid dtype value {}", def.name, a.i);
    if (a.kind == LT_ATTR_INTS && a.ints_len && !a.ints)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' has NULL ints with length {}", def.name,
           a.name, a.ints_len);
  }
  if (!def.info) return;
  for (const lower::AttrSpec& s : def.info->attrs)
    if (s.presence == lower::AttrSpec::Presence::kRequired && !call.attr(s.name.c_str()))
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: attribute '{}' is required", def.name, s.name);
}

}  // namespace

NodeRef apply_op(const OpCall& call) {
  const OpDef& def = op_def(call.op);
  int n = static_cast<int>(call.num_inputs);
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    if (def.min_inputs == def.max_inputs)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: expects {} inputs, got {}", def.name, def.min_inputs,
           n);
    fail(LT_STATUS_INVALID_ARGUMENT, "{}: expects at least {} inputs, got {}", def.name,
         def.min_inputs, n);
  }
  check_attrs(call, def);
  return def.build(call);
}

// ---- node construction --------------------------------------------------------------------

size_t checked_bytes(const char* what, lt_dtype dtype, const Dims& shape) {
  // The zero dims aside, the dims must multiply within the limit too: an empty [0, 2^62, 4]
  // holds nothing, but its row-major strides and every numel computed in order overflow.
  uint64_t numel = 1, bytes = 0;
  bool overflow = false, empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: negative dimension in shape {}", what, dims_str(shape));
    if (shape[i] == 0)
      empty = true;
    else
      overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(shape[i]), &numel);
  }
  overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(lt_dtype_size(dtype)), &bytes);
  if (overflow || bytes > kMaxTensorBytes)
    fail(LT_STATUS_INVALID_ARGUMENT,
         "{}: shape {} of {} is {} bytes{}: more than any tensor can hold (at most 2^46)", what,
         dims_str(shape), lt_dtype_name(dtype),
         overflow ? std::string("over 2^64") : std::to_string(bytes),
         empty ? " without its zero dims" : "");
  return empty ? 0 : static_cast<size_t>(bytes);
}

NodeRef make_node_n(Device* device, uint16_t op, Node* const* operands, size_t n, lt_dtype dtype,
                    const Dims& shape, std::unique_ptr<AttrSet> attrs) {
  checked_bytes(op_name(op), dtype, shape);
  Node* node = new Node;
  g_nodes_alive.fetch_add(1, std::memory_order_relaxed);
  NodeRef ref = NodeRef::adopt(node);
  node->op = op;
  node->dtype = dtype;
  node->shape = shape;
  node->device = device;
  node->recompute_tag = t_recompute_tag;  // never hashed (ir.h)
  static std::atomic<uint64_t> next_seq{1};
  node->seq = next_seq.fetch_add(1, std::memory_order_relaxed);
  uint64_t h = hash_combine(hash_mix(op + 1), static_cast<uint64_t>(dtype));
  h = hash_combine(h, hash_bytes(shape.data(), shape.size() * sizeof(int64_t), shape.size()));
  if (attrs) h = hash_combine(h, attrs->hash);
  node->hash = h;
  node->attrs = std::move(attrs);
  if (n > 3) node->heap_ops = new Node*[n];
  Node** ops = node->operands();
  for (size_t i = 0; i < n; ++i) ops[i] = node_retain(operands[i]);
  node->num_operands = static_cast<uint32_t>(n);
  return ref;
}

NodeRef make_node(Device* device, uint16_t op, std::initializer_list<Node*> operands,
                  lt_dtype dtype, const Dims& shape, std::unique_ptr<AttrSet> attrs) {
  return make_node_n(device, op, operands.begin(), operands.size(), dtype, shape, std::move(attrs));
}

NodeRef make_leaf(Device* device, lt_dtype dtype, const Dims& shape) {
  return make_node_n(device, kOpInput, nullptr, 0, dtype, shape);
}

NodeRef make_scalar_leaf(Device* device, lt_dtype dtype, uint64_t raw_bits) {
  NodeRef r = make_node_n(device, kOpInput, nullptr, 0, dtype, Dims());
  r->has_scalar = true;
  r->scalar_bits = raw_bits;
  return r;
}

uint64_t encode_scalar(lt_dtype dtype, double v) {
  uint64_t bits = 0;  // little-endian: the element's bytes are the low bytes of the word
  if (!lower::store_element(dtype, v, &bits))
    fail(LT_STATUS_INVALID_ARGUMENT, "scalar: invalid dtype {}", static_cast<int>(dtype));
  return bits;
}

}  // namespace lt
