// kernels_reduce.cpp — placeholder.
#include "kernels.h"
namespace lt::eager {
void append_reduce_ops(std::vector<OpDef>&) {}
}  // namespace lt::eager
