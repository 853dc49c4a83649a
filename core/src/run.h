// run.h — the run stage: executes a Run (plan cache) over a collected graph's buffers: inputs
// placed, transfers between devices at region borders, each region's execute call through the
// device client, custom-op kernels and collectives on host memory, bucket padding in and out;
// then the roots take their buffers and the graph is cut. Runs under the device's exec mutex,
// or on its async worker (it never touches the plan cache).
#pragma once

#include "collect.h"
#include "plan.h"

namespace lt {

void run(Device* dev, const Run& run, Collected& c);

}  // namespace lt
