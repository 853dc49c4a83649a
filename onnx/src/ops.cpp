// ops.cpp — the ai.onnx op table of LazyTensor::onnx: each family in ops/<family>.cpp adds its
// translations (each ONNX node becomes lazy ops of lt_ops.def or a composition of them, so every
// backend runs it; host code only computes shapes and shape-only index tables); this file
// builds the one table from them and names the ops refused as out of scope.
#include "ops/common.hpp"

namespace lt::onnx::detail {

namespace {

std::map<std::string, OpEntry> build_table() {
  std::map<std::string, OpEntry> t;
  add_elementwise_ops(t);
  add_shape_ops(t);
  add_gather_scatter_ops(t);
  add_layout_ops(t);
  add_reduce_ops(t);
  add_linalg_ops(t);
  add_conv_pool_ops(t);
  add_norm_ops(t);
  add_rnn_ops(t);
  add_sampling_ops(t);
  add_quant_ops(t);
  add_signal_ops(t);
  return t;
}

}  // namespace

const std::map<std::string, OpEntry>& op_table() {
  static const std::map<std::string, OpEntry> t = build_table();
  return t;
}

std::string out_of_scope_reason(const std::string& domain, const std::string& op) {
  if (domain == "ai.onnx.preview.training") return "training-domain op";
  if (domain == "ai.onnx.ml") return "";
  static const char* seq[] = {
      "SequenceConstruct", "SequenceInsert", "SequenceAt",         "SequenceEmpty",
      "SequenceErase",     "SequenceLength", "SplitToSequence",    "ConcatFromSequence",
      "SequenceMap",       "Optional",       "OptionalGetElement", "OptionalHasElement",
      "StringNormalizer",  "RegexFullMatch", "StringConcat",       "StringSplit"};
  if (domain.empty() || domain == "ai.onnx") {
    for (const char* s : seq) {
      if (op == s) return "sequence, optional and string types are not supported";
    }
  }
  return "";
}

}  // namespace lt::onnx::detail
