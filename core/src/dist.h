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

struct CompiledPlan;
struct Collected;
// Before the first collective of a graph execution (the one call site, run_plan): every rank
// checks that the others run the same graph, as one small all-gather of two hashes: the
// collectives (op, attributes, dtype, shape, in order) with every input's dtype and rank, and
// the exact dims of every input. Collectives, dtypes and ranks must be equal; an input dim may
// differ only as the rows of one global batch split over the ranks do (docs/distributed.md:
// non-increasing by rank, by at most one). Equal hashes (the usual step) end the check; else a
// second exchange of the dims decides, and a mismatch throws lt::Error(DISTRIBUTED) on every
// rank naming each rank's side (issue #29: different --batch per rank went undetected).
void dist_check_graph(const CompiledPlan& plan, const Collected& c);
// Bytes of a collective's result for an operand of `in_bytes` (all_gather: world times).
size_t dist_output_bytes(const HostNode& h, size_t in_bytes);
// Runs one collective node on host memory: `in` holds the operand (in_bytes), `out` receives
// dist_output_bytes(h, in_bytes) bytes. in and out may not overlap.
void dist_run(const HostNode& h, const void* in, size_t in_bytes, void* out);
// "all_reduce(sum) f32 [4,3]": a collective as error messages name it.
std::string dist_describe(const HostNode& h);

}  // namespace lt
