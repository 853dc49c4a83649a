// dist.h — the process group behind lt_dist_*: rank, world size and the MPI transport the
// executor runs collective nodes with (dist.cpp). One group per process, shared by every
// runtime; collectives run under the executing device's exec mutex, one at a time per process.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lazytensor/lt.h"

namespace lt {

struct HostNode;

// True once lt_dist_init succeeded (and lt_dist_finalize has not run).
bool dist_initialized() noexcept;
// Rank and world size; throw lt::Error(UNSUPPORTED) naming the op when not initialised.
int dist_rank(const char* op);
int dist_world_size(const char* op);

// Before the first collective of a graph execution: every rank exchanges a hash of its
// collectives (op, attributes, dtype, shape, in order); on a mismatch every rank throws
// lt::Error(DISTRIBUTED) naming each rank's collectives, instead of a hang or wrong data.
void dist_check_collectives(const std::vector<const HostNode*>& nodes);
// Bytes of a collective's result for an operand of `in_bytes` (all_gather: world times).
size_t dist_output_bytes(const HostNode& h, size_t in_bytes);
// Runs one collective node on host memory: `in` holds the operand (in_bytes), `out` receives
// dist_output_bytes(h, in_bytes) bytes. in and out may not overlap.
void dist_run(const HostNode& h, const void* in, size_t in_bytes, void* out);
// "all_reduce(sum) f32 [4,3]": a collective as error messages name it.
std::string dist_describe(const HostNode& h);

}  // namespace lt
