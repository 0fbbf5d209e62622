// The sampling rule (sampling.c): one tick billed to a run's slots. Layer profiler.base
// (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_SAMPLING_H
#define TALLY_RUNTIME_SRC_PROFILER_SAMPLING_H

#include "profiler/run.h"

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// Bills the time since the last sample of `inst` (caller holds its sampling right).
// Async-signal-safe.
void tally_sample_instance(tally_instance *inst, uint64_t now);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_SAMPLING_H
