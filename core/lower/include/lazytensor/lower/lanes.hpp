// lanes.hpp — whether a fused row kernel (lower::LoopKernel) may compute each row in vectors of
// consecutive elements along its last dim: a schedule decision made here from the kernel's
// dtypes, ops and reads, so a generator with vector types (gpu_opencl's CPU-device row kernels)
// picks its kernel form up front instead of trying one and catching a failure.
#pragma once

#include <functional>
#include <string_view>

#include "lazytensor/lower/loop_kernel.hpp"

namespace lt::lower {

// Which ops and dtypes the generator's vector types compute lane by lane: `lane(op, d)` for a
// node `op` of dtype d, and `lane("", d)` for a plain load or store of d (c_expr::lane_wise for
// C-family vectors).
using LaneOp = std::function<bool(std::string_view op, lt_dtype d)>;

// True when the reduced dims of `k` are its last ones (at least one element per row), every
// reduction and full output is of a dtype lane("", d) accepts, every node evaluated over a row
// (what the reductions and the full outputs read, reductions themselves aside) is `full`,
// `broadcast_to` or `slice` of such a dtype or an op `lane` accepts, and every buffer those
// nodes read moves by 0 or 1 element along the last loop (LoopKernel::dense_along), of a dtype
// lane("", d) accepts where it moves. How many lanes (a divisor of the last dim) and on which
// devices it pays stay the generator's choice.
bool vector_rows(const lt_graph& graph, const LoopKernel& k, const LaneOp& lane);

}  // namespace lt::lower
