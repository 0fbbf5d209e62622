// The device-wait ledger (device_waits.c): every wait of a back end on its queue, by reason,
// billed to the waiting thread's run; deferred frees; the drain before the exit report. Layer
// profiler.sources (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_DEVICE_WAITS_H
#define TALLY_RUNTIME_SRC_PROFILER_DEVICE_WAITS_H

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// A back end brackets each wait on its queue that blocks on work not known complete:
//   uint64_t t = tally_device_wait_begin(); ...wait...; tally_device_wait_end(reason, t);
// reason: a tally_device_wait_reason.
uint64_t tally_device_wait_begin(void);
void tally_device_wait_end(int32_t reason, uint64_t begin_ns);
// profile_timestamps run end (tally_profiler_end, `pipeline` its record): bills the device
// intervals already completed, without waiting. At exit, before the report: waits for all queued
// device work (counted as TALLY_DEVICE_WAIT_EXIT_REPORT) so every timed kernel is billed.
// A back end registers its parts once initialized (api: TALLY_DEVICE_API_*): `collect` bills
// what completed without waiting, `drain` waits for all queued work under `reason`; both must
// be no-ops while the back end is not initialized, and `drain` must not block on a lock another
// thread holds.
typedef void (*tally_device_collect_fn)(void);
typedef void (*tally_device_drain_fn)(int32_t reason);
void tally_device_register_drain(int32_t api, tally_device_collect_fn collect,
                                 tally_device_drain_fn drain);
void tally_device_collect_completed(const void *pipeline);
void tally_device_drain_for_exit_report(void);
// A halide_device_free whose release was deferred past queued work, and that release later.
void tally_device_count_deferred_free(void);
void tally_device_count_deferred_release(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_DEVICE_WAITS_H
