// gemm_layout.hpp — the two layout decisions the host executor (host::StepProgram) makes about
// GEMMs, stated once: StepProgram decides by them, and the optimiser's `exact` guard
// (optimize.cpp) compares them between the traced and the optimised graph, because OpenBLAS's
// transposed and plain kernels round differently (even the sign of a zero).
#pragma once

#include <cstdint>
#include <vector>

#include "lazytensor/lt_plugin.h"

namespace lt::lower {

// A permute that swaps the last two dims of a value of rank >= 2 and keeps the others (a batch
// of matrix transposes).
bool is_matrix_transpose(const lt_graph_node& n);
// A matmul the host executor runs as a BLAS GEMM (f32 or f64); other dtypes are plain kernels.
inline bool is_host_gemm_dtype(lt_dtype d) {
  return d == LT_DTYPE_F32 || d == LT_DTYPE_F64;
}
bool is_host_gemm(const lt_graph_node& n);

// 1. A matrix transpose that nothing but host GEMMs reads (and no graph output) is read in
//    place: each GEMM takes its operand with the transposed flag, and no step writes it.
//    `read_by_other`: an operand slot of anything but a host GEMM reads it, or an output is it.
inline bool transpose_read_in_place(bool matrix_transpose, bool read_by_other) {
  return matrix_transpose && !read_by_other;
}

// 2. A 2-D host GEMM of 2-D operands read by exactly one operand slot (and no graph output),
//    that slot a 2-D matrix transpose which is not itself read in place, writes its product
//    transposed (B^T·A^T) into the transpose's buffer. `reader_*`: that one reader.
inline bool gemm_writes_transposed(bool gemm_2d, bool read_once, bool reader_transpose_2d,
                                   bool reader_in_place) {
  return gemm_2d && read_once && reader_transpose_2d && !reader_in_place;
}

// Both decisions for every node of a graph (static shapes), as StepProgram takes them for the
// graph it runs: `in_place[v]` decision 1, `transposed[m]` decision 2 (on the GEMM).
struct GemmLayouts {
  // What the decisions read of one node (eight bytes): its kind, and for a GEMM or a permute
  // the last operand slot reading it, how many slots and outputs read it (2: two or more) and
  // whether anything but a host GEMM (or an output) reads it.
  enum Kind : uint8_t { kOther, kGemm, kPermute };
  struct Facts {
    int32_t reader = -1;
    uint8_t kind = kOther, count = 0;
    bool other = false;
  };
  // Operand slot of node `reader` (a host GEMM or not) reads `of`; and `of` is a graph output.
  static void read(Facts& of, int32_t reader, bool by_gemm) {
    if (of.kind == kOther) return;  // no decision reads who reads it
    of.other = of.other || !by_gemm;
    of.count = of.count ? 2 : 1;
    of.reader = reader;
  }
  static void output(Facts& of) {
    of.other = true;
    of.count = 2;  // an output is never "read once"
  }

  // Gathers the facts of `g` (op kinds by name) and decides.
  explicit GemmLayouts(const lt_graph& g);
  // Decides from facts a caller gathered while walking `g` anyway (one per node, every read and
  // output noted with read() and output(), in node order).
  GemmLayouts(const lt_graph& g, const std::vector<Facts>& facts);

  std::vector<char> in_place, transposed;
  std::vector<int32_t> gemms;  // the host GEMMs, in node order
  bool any = false;            // some node has either decision

 private:
  void decide(const lt_graph& g, const std::vector<Facts>& facts);
};

}  // namespace lt::lower
