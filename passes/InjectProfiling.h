/** \file
 * The inject-profiling pass.
 */
#ifndef TALLY_PASSES_INJECTPROFILING_H
#define TALLY_PASSES_INJECTPROFILING_H

#include "tally/Module.h"
#include "tally/Passes.h"  // ProfilingOptions

namespace tally {

/** Instruments every pipeline function of `m` for the Tally profiler when the module's target
 * has `profile` or `profile_by_timer`; otherwise returns `m` unchanged (same nodes).
 *
 * Inserts (see ARCHITECTURE.md, "Profiling semantics", which the golden tests pin rule by rule):
 * the slot table and `tally_profiler_start` / `tally_profiler_end` bracketing the body (the end
 * also on every error exit); a slot switch entering each `produce f` and a restore leaving each
 * `consume f`; a `<f> (copy to device)` / `<f> (copy to host)` slot around each copy call and
 * its check; one `halide_device_sync_global` with its own assert after each kernel launch's
 * assert and after each copy to the device; memory accounting for allocations; worker-thread
 * bookkeeping in parallel loops.
 *
 * Runs last in lower(), after offload-gpu-loops. Idempotent: a function already instrumented
 * (it calls tally_profiler_start) is left alone. Deterministic: slot ids follow walk order.
 */
Module inject_profiling(const Module &m, const ProfilingOptions &opts);

}  // namespace tally

#endif  // TALLY_PASSES_INJECTPROFILING_H
