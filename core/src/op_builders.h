// op_builders.h — the builders of the op registry (ops.cpp's table names one per lt_ops.def
// row, `build_<rule>`) and the helpers they share: validation, dtype promotion with cast
// insertion, NumPy broadcasting, axis normalisation. Internal to core/src.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "ops.h"

namespace lt::builders {

bool valid_dtype(int64_t d);
lt_dtype promote(lt_dtype a, lt_dtype b);
const char* name_of(const OpCall& c);
NodeRef cast_to(Device* dev, Node* a, lt_dtype dt);
// NumPy broadcasting: the lowering library's rule, with its error in the core's type.
Dims broadcast_shapes(const char* op, const Dims& a, const Dims& b);
// Normalises an axis in [-rank, rank) to [0, rank).
int64_t norm_axis(const char* op, int64_t axis, size_t rank, const Dims& shape);
void check_dims_nonneg(const char* op, const std::vector<int64_t>& s);
// "dtype X is not a float type" / "... a numeric type" / "... is not bool": the dtype class of
// the op's table row, checked on a data operand.
void expect_class(const OpCall& c, lt_dtype d);
Device* need_device(const OpCall& c);
NodeRef reshape_to(Device* dev, Node* a, const Dims& s);
NodeRef broadcast_node(Device* dev, Node* a, const Dims& s);

// A node's attribute set, built in order.
class AttrBuilder {
 public:
  AttrBuilder() : set_(std::make_unique<AttrSet>()) {}
  AttrBuilder& i(const char* n, int64_t v) {
    auto& a = set_->items.emplace_back();
    a.name = n, a.kind = LT_ATTR_INT, a.i = v;
    return *this;
  }
  AttrBuilder& f(const char* n, double v) {
    auto& a = set_->items.emplace_back();
    a.name = n, a.kind = LT_ATTR_FLOAT, a.f = v;
    return *this;
  }
  AttrBuilder& ints(const char* n, std::vector<int64_t> v) {
    auto& a = set_->items.emplace_back();
    a.name = n, a.kind = LT_ATTR_INTS, a.ints = std::move(v);
    return *this;
  }
  std::unique_ptr<AttrSet> done() {
    set_->finish();
    return std::move(set_);
  }

 private:
  std::unique_ptr<AttrSet> set_;
};

// One builder per rule of lt_ops.def (several rows may share one).
#define LT_OP(Camel, name, capi, cfn, cppfn, category, lo, hi, attrs, dtypes, rule, grad, kind) \
  NodeRef build_##rule(const OpCall& c);
#include "lazytensor/lt_ops.def"
#undef LT_OP

}  // namespace lt::builders
