// kernels_linalg.cpp — placeholder.
#include "kernels.h"
namespace lt::eager {
void append_linalg_ops(std::vector<OpDef>&) {}
}  // namespace lt::eager
