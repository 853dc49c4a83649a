// dce.cpp — dead-code elimination: a node no output reads (directly or through other nodes) is
// dropped; graph inputs always stay (the caller binds them by position).
#include "work.hpp"

namespace lt::lower::opt {

// Every built-in op is free of effects, so an unread node is dead; custom ops and collectives
// are kept only when read as well, since a graph's value is all a caller can observe (a
// collective nobody reads is never traced: collect starts at the roots). The working graph
// keeps use counts, so a node dies the moment its last use goes, in whichever pass that
// happens (Work::replace, Work::set_operand), and compaction happens once at the end: what is
// left to this pass is to report the nodes the caller's graph held that no output read.
size_t dce(Work& w, PassStats& s) {
  s.removed += w.unread_at_start;
  return w.unread_at_start;
}

}  // namespace lt::lower::opt
