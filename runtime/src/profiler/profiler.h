// The profiler (profiler.c): the pipeline registry, per-run instances, and the calls beyond
// tally_runtime.h that the report, the thread pool, the device entry points and Halide's profiler
// ABI make. Layer profiler.runs (runtime/layers.txt). Not installed, not seen by generated code.
// C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_PROFILER_H
#define TALLY_RUNTIME_SRC_PROFILER_PROFILER_H

#include "core/context.h"
#include "profiler/run.h"
#include "tally_runtime.h"

#include <pthread.h>
#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// The clock `p`'s runs read: its recorded one, else this process's (profiler.c).
const char *tally_pipeline_clock(const tally_pipeline *p);

// tally_profiler_start without the process hooks (lifetime.c installs them first).
void *tally_profiler_start_run(void *user_context, const char *pipeline, const char *target,
                               int32_t num_slots, const char *const *slot_names,
                               const int32_t *slot_kinds, const int32_t *slot_parents,
                               int32_t flags);

// tally_profiler_end, or, when `count` is 0, the same end without merging the run into its
// pipeline's totals: Halide 21's bounds queries run its probes but are no runs of the pipeline.
int32_t tally_profiler_end_run(void *user_context, void *instance, int32_t count);

// Profiled runs finished in this process (merged into a pipeline's totals), counting on through
// tally_profiler_reset: what the outputs written at exit or on demand cover (lifetime.c).
uint64_t tally_profiler_runs_finished(void);

// The registry. Report code walks it with the lock held.
extern pthread_mutex_t tally_registry_lock;
tally_pipeline *tally_registry_first_locked(void);

// Fills stats structs from a pipeline (registry lock held).
void tally_fill_pipeline_stats_locked(const tally_pipeline *p, tally_pipeline_stats *out);
void tally_fill_slot_stats_locked(const tally_pipeline *p, int32_t slot, tally_slot_stats *out);

// A pipeline outside the registry holding the numbers of stats structs (the inverse of the fill
// functions), for tally_profiler_format_text. Returns 0 (*out set; free it with
// tally_pipeline_free_unregistered), TALLY_ERROR_BAD_ARGUMENT or TALLY_ERROR_OUT_OF_MEMORY.
int32_t tally_pipeline_from_stats(const tally_pipeline_stats *ps, const tally_slot_stats *slots,
                                  tally_pipeline **out);
void tally_pipeline_free_unregistered(tally_pipeline *p);

// Ends the worker contexts the calling thread opened through Halide's profiler ABI and left
// current (innermost first), until the current context is `keep` or one it does not own. The
// thread pool calls it after every task: Halide's code opens a context when a task starts
// (halide_profiler_incr_active_threads) and never closes it.
void tally_profiler_end_owned_contexts(tally_context *keep);

// Exact mode's lingering worker contexts (profiler.c): a pool task's context, ended by its task,
// keeps counting until the thread's next task of the same run takes it back, or until the pool
// flushes it. tally_linger_ok is set by the pool while it runs a task it will flush after;
// tally_profiler_linger_flush ends the calling thread's lingering context, if any;
// tally_profiler_linger_keep flushes it unless `next` (the context the thread's next task will
// run with, or NULL) belongs to the same run, and returns whether one still lingers.
extern _Thread_local int32_t tally_linger_ok TALLY_HOT_TLS __attribute__((visibility("hidden")));
void tally_profiler_linger_flush(void);
int32_t tally_profiler_linger_keep(const tally_context *next);

// Context state changes outside the hot calls (Halide's profiler ABI): a slot switch, and
// suspending / resuming a context (a count; only the thread holding the context calls them).
// In exact mode they bill the context up to now first.
void tally_profiler_switch_slot(tally_context *ctx, int32_t slot);
void tally_profiler_suspend(tally_context *ctx);
void tally_profiler_resume(tally_context *ctx);

// Device waits and counters, used by the device entry points. wait_begin marks the calling
// thread's current context (if any) waiting and returns it; pass it to wait_end.
tally_context *tally_profiler_wait_begin(void);
void tally_profiler_wait_end(tally_context *ctx);
void tally_profiler_count_copy(int32_t to_device, uint64_t bytes);
void tally_profiler_count(int32_t counter);

// Fork handlers: prepare takes the registry lock, parent and child release it.
void tally_profiler_fork_prepare(void);
void tally_profiler_fork_parent(void);
void tally_profiler_fork_child(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_PROFILER_H
