// dce.cpp — dead-code elimination: a node no output reads (directly or through other nodes) is
// dropped; graph inputs always stay (the caller binds them by position).
#include "work.hpp"

namespace lt::lower::opt {

// Every built-in op is free of effects, so an unread node is dead; custom ops and collectives
// are kept only when read as well, since a graph's value is all a caller can observe (a
// collective nobody reads is never traced: collect starts at the roots).
size_t dce(Work& w, PassStats& s) {
  const size_t dropped = w.compact();
  s.removed += dropped;
  return dropped;
}

}  // namespace lt::lower::opt
