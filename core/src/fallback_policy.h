// fallback_policy.h — what the core does with a node the chosen backend cannot run.
#pragma once

namespace lt {

// silent: run it on the fallback (cpu_eager); warn: the same, logged once per op; error: refuse
// (FALLBACK_REFUSED, naming the op and the backend).
enum class FallbackPolicy { kSilent, kWarn, kError };

}  // namespace lt
