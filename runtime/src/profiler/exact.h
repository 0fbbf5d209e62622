// The exact rule (exact.c): switch-timed billing against the run's share clock. Layer
// profiler.base (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_EXACT_H
#define TALLY_RUNTIME_SRC_PROFILER_EXACT_H

#include "profiler/run.h"

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// The run's share clock at `now` (lock-free read).
void tally_exact_read(tally_instance *inst, uint64_t now, tally_exact_point *out);
// Bills the context's time since its mark to its current slot and moves the mark to `now`.
// Called by the thread holding the context, before its slot or state changes.
void tally_exact_bill(tally_context *c, uint64_t now);
// Bills `c` (may be NULL) up to `now` and changes the share clock's counts by the deltas, as one
// step: d_active / d_working for worker contexts starting or stopping to count or wait,
// d_main_idle for the main context. `mark_only` (may be NULL), a context of the calling thread
// that does not count until now, gets its mark moved to now without billing.
void tally_exact_change(tally_instance *inst, tally_context *c, uint64_t now, int32_t d_active,
                        int32_t d_working, int32_t d_main_idle, tally_context *mark_only);
// Adds every context's accumulators into the instance's acc (time_ns, busy_ns, thread_ns; share
// rounded to ns). The run's contexts have all billed up to its end.
void tally_exact_collect(tally_instance *inst);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_EXACT_H
