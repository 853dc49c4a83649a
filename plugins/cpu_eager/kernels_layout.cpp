// kernels_layout.cpp — placeholder.
#include "kernels.h"
namespace lt::eager {
void append_layout_ops(std::vector<OpDef>&) {}
}  // namespace lt::eager
