// executor.h — what a read or an lt_sync asks of the core: the pending roots collected into one
// graph (collect.h), its run found or compiled by the plan cache (plan_cache.h), then run on the
// calling thread (run.h) or, with async_execution, queued on the device's worker (async.h).
#pragma once

#include <vector>

#include "runtime.h"

namespace lt {

// Materialises `roots` (all on `dev`) as one graph. Waits until every root holds its buffer
// (throws a queued graph's failure).
void materialize(Device* dev, std::vector<NodeRef>& roots);
// lt_sync: materialises every pending tensor of `dev`; with async_execution it queues them as
// one graph, waits for the graphs queued before it (throwing the first unreported failure
// among them) and returns.
void sync_device(Device* dev);
// Waits for every graph queued on the runtime's devices (metrics reads, destruction).
void drain_queues(Runtime* rt) noexcept;

}  // namespace lt
