// dynamic.hpp — dynamic dimensions of an lt_graph (plugin ABI 1.2): a graph's numbers (shape
// dims and INTS attribute entries) that are affine functions `scale * symbol + offset` of a
// few symbols (a batch size, a sequence length). Shared by the core (which finds them by
// comparing two graphs of one program, and pads to buckets for static backends) and by the
// backends (which instantiate a graph at the values of a run).
//
// A "position" is one number of a node: dim `index` of its shape (attr == -1), or entry `index`
// of its INTS attribute number `attr` (INT attributes never follow a size). Positions are
// enumerated node by node, shape before attributes, in order; expressions produced here are sorted
// in that order.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lazytensor/lower/graph.hpp"

namespace lt::lower {

// The dynamic part of a graph: empty for a static graph or a 1.0/1.1-sized struct.
struct DynamicView {
  std::span<const int64_t> values;
  std::span<const lt_dim_expr> exprs;
  bool empty() const { return values.empty(); }
};
DynamicView dynamic_of(const lt_graph& g);

// One number as an affine form of the symbol values (symbol -1: the constant `offset`).
struct DimForm {
  int32_t symbol = -1;
  int64_t scale = 0, offset = 0;
  int64_t at(std::span<const int64_t> values) const {
    return symbol < 0 ? offset : scale * values[static_cast<size_t>(symbol)] + offset;
  }
};
// The forms of node `node`'s shape dims in `g` (constants for a static graph).
std::vector<DimForm> shape_forms(const lt_graph& g, size_t node);
// Bytes of a node whose dims have these forms, at `values` (dtype size × element count).
size_t bytes_at(std::span<const DimForm> dims, lt_dtype dtype, std::span<const int64_t> values);

// Checks the dynamic part: symbol count (<= 16), expressions in range and sorted, non-zero
// scales, and that each named number equals its expression at symbol_values. Throws Error.
void validate_dynamic(const lt_graph& g);

// A copy of `g` (a dynamic graph) at other symbol values, keeping its expressions. Throws
// Error(SHAPE_MISMATCH) when a number would become negative.
OwnedGraph instantiate(const lt_graph& g, std::span<const int64_t> values);

// True if `a` and `b` differ at most in their numbers: same ops, dtypes, ranks, operands,
// attribute names, kinds, INTS lengths, floats and strings, inputs and outputs.
bool same_structure(const lt_graph& a, const lt_graph& b);

// Expressions of `base` (at `base_values`, one per symbol) from `varied[k]`, the same graph
// with symbol k alone moved to `varied_values[k]`. False (and why) when a number moves with two
// symbols or not by a whole multiple of its symbol's step, or a structure differs.
bool derive_exprs(const lt_graph& base, std::span<const int64_t> base_values,
                  std::span<const lt_graph* const> varied, std::span<const int64_t> varied_values,
                  std::vector<lt_dim_expr>* exprs, std::string* why);

// Generalises two graphs of one program seen at different sizes: every number that differs
// between `seen` and `now` becomes an expression of a symbol, one symbol per distinct pair of
// values (seen, now) of the graph inputs' dims that changed (or, if none did, of the first
// numbers that changed), fitted through both graphs. Writes the symbols' values in `now` and the
// expressions; false (and why) when a number cannot be fitted or nothing differs.
bool generalize(const lt_graph& seen, const lt_graph& now, std::vector<int64_t>* values,
                std::vector<lt_dim_expr>* exprs, std::string* why);

// For a backend whose code for a dynamic graph depends on the symbols only through a few
// launch numbers (loop extents, global sizes): what it builds for one graph.
struct Build {
  std::string code;              // its generated code, or anything that must not change
  std::vector<int64_t> numbers;  // its launch numbers
};
// Checks that `build` gives the code of `at_base` (built from dynamic graph `g` at its own
// values) with each symbol moved and at other values, and fits every number as a form of one
// symbol. False (and why) otherwise: the backend then compiles `g` static.
bool fit_build(const lt_graph& g, const Build& at_base,
               const std::function<Build(const lt_graph&)>& build, std::vector<DimForm>* forms,
               std::string* why);

// For backends that need static shapes: `g` (a dynamic graph, its numbers at the bucket sizes
// its inputs are padded to) as a static graph that computes, at every valid index, what `g`
// computes at the run's sizes, which it takes as extra inputs: one f32 scalar per symbol, after
// g's inputs. The padded part of an input may hold anything; of an output, it is unspecified.
// Reductions, softmax and matmul contractions over a padded dim read it masked to their
// identity; a mean divides by the valid count. False (and why) where no mask makes the padded
// run exact: concat along a padded dim (but for one static row appended to it), pad or a slice
// into it, a reshape moving it across other dims, scatter_add or random values over it,
// custom ops.
bool mask_padding(const lt_graph& g, OwnedGraph* out, std::string* why);

// For a backend generating source text (OpenCL C, CUDA) whose sizes appear as integer literals
// with a suffix (`64L`): the text with each such literal (digits + suffix, not part of a name
// or a float) replaced by kNumberMark, and the literals' values in order. Texts of one graph at
// several sizes that split to the same text differ only in those numbers, which the backend
// can then pass as kernel arguments.
constexpr char kNumberMark = '\x01';
struct NumberedText {
  std::string text;
  std::vector<int64_t> numbers;
};
NumberedText split_numbers(std::string_view code, char suffix);

// One source for every size, from a generator whose text moves with the sizes only in such
// numbers: `generate` gives the text of a graph (kernels each starting at `kernel`, their
// parameter lists ending at the first ") {\n" after it). The text at the graph's values, at each
// symbol moved by one and at a check point must split to the same text; each number that moves
// becomes a parameter `<type> lt_n<k>` appended to its kernel's list (one per distinct series
// of values in a kernel).
struct SourceTemplate {
  std::string source;          // the graph's text, moving numbers as parameters
  NumberedText base;           // the graph's text, split
  std::vector<int32_t> param;  // per number: -1 (the same at every size) or its argument
  std::vector<std::pair<size_t, size_t>> where;  // per argument: its kernel, index among its own
  // Each kernel's arguments at the size whose text is `at`; false when `at` differs from the
  // graph's text in more than the moving numbers (that size needs a source of its own).
  bool arguments(std::string_view at, std::vector<std::vector<int64_t>>* args) const;
  char suffix = 'L';
};
bool template_source(const lt_graph& g, const std::function<std::string(const lt_graph&)>& generate,
                     std::string_view kernel, std::string_view type, SourceTemplate* out,
                     std::string* why);

// True if `concrete` (a static graph) is `base` (a dynamic graph) at some symbol values, written
// to `values`: same structure, every number an expression names equal to it at those values,
// every other number equal. Linear in the graph.
bool match(const lt_graph& base, const lt_graph& concrete, std::vector<int64_t>* values);

}  // namespace lt::lower
