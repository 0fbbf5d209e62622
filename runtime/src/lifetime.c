// The runtime's process lifetime: the hooks installed once per process, and the public calls that
// begin and end the profiler's and the thread pool's lives.
//
// Why a file of its own: the hooks call into every subsystem that holds threads or locks (the
// thread pool, the profiler's registry, the sampler), so they sit above all of them, and the
// calls that must install them first are defined here too. Every call runs down from here; no
// subsystem calls back up (runtime/layers.txt has the layering).
//
// Installed by the first tally_profiler_start, halide_profiler_pipeline_start or _instance_start,
// halide_do_par_for or halide_do_parallel_tasks, once:
//  - timeline recording, when TALLY_PROFILE_TRACE names a file (trace.c);
//  - one pthread_atfork. Before a fork it takes every runtime lock, in one fixed order (thread
//    pool resize and pool locks, registry lock, sampler lock, malloc cache lock, the trace's
//    pipeline table lock), so the child never inherits a lock held by a thread that does not
//    exist there; after the fork the parent releases them in the reverse order, and the child
//    resets each subsystem's thread state (no workers, no sampler thread, no armed timer) before
//    releasing them.
//  - one atexit handler: it shuts the thread pool down (joining its workers and task threads),
//    stops the sampler (thread and timer), waits for queued device work (device_waits.c: so that
//    every kernel timed by profile_timestamps is billed), prints the report (report.c: only when a
//    profiled run finished) and the exports the environment asks for (export.c; the continuous
//    pprof writer of export_continuous.c, started with the first profiled run, is stopped), then
//    hands the cached free blocks of halide_malloc back to the system.
//
// tally_profiler_write_exit_outputs writes the report and the exports now, as the handler would,
// and returns the first failure's code, so that a program can exit with it (tally-run does); the
// handler then writes them again only if runs finished since.
//
// tally_profiler_shutdown stops the sampler (a later run starts it again) and empties the malloc
// cache.

#include "core/fault.h"
#include "core/memory.h"
#include "export/export.h"
#include "halide_abi/halide_profiler.h"
#include "parallel/thread_pool.h"
#include "profiler/device_waits.h"
#include "profiler/profiler.h"
#include "profiler/report.h"
#include "profiler/sampler_posix.h"
#include "profiler/trace.h"
#include "tally_runtime.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

static void fork_prepare(void) {
    tally_thread_pool_fork_prepare();
    tally_profiler_fork_prepare();
    tally_sampler_fork_prepare();
    tally_malloc_fork_prepare();
    tally_trace_fork_prepare();
}

static void fork_parent(void) {
    tally_trace_fork_release();
    tally_malloc_fork_parent();
    tally_sampler_fork_parent();
    tally_profiler_fork_parent();
    tally_thread_pool_fork_parent();
}

static void fork_child(void) {
    tally_trace_fork_release();
    tally_malloc_fork_child();
    tally_sampler_fork_child();
    tally_profiler_fork_child();
    tally_thread_pool_fork_child();
    tally_export_continuous_fork_child();
}

// The finished runs the last tally_profiler_write_exit_outputs covered (UINT64_MAX: none wrote).
static _Atomic uint64_t outputs_cover = UINT64_MAX;

// The report and the exports, for the runs finished so far (the caller drained the devices).
static int32_t write_outputs(void *user_context) {
    const uint64_t runs = tally_profiler_runs_finished();
    const int32_t report = tally_report_at_exit(user_context);
    const int32_t exports = tally_export_at_exit(user_context);
    atomic_store(&outputs_cover, runs);
    return report != 0 ? report : exports;
}

int32_t tally_profiler_write_exit_outputs(void *user_context) {
    tally_device_drain_for_exit_report();
    return write_outputs(user_context);
}

static void at_exit(void) {
    tally_thread_pool_shutdown();
    tally_sampler_shutdown();
    tally_device_drain_for_exit_report();
    if (atomic_load(&outputs_cover) != tally_profiler_runs_finished()) {
        (void)write_outputs(NULL);  // the process is exiting: a failure is said, not returned
    }
    tally_export_continuous_stop();
    tally_malloc_cache_shutdown();
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

// At load: the state a first pipeline run writes (fault injection's environment, the malloc
// cache, the pool, the hooks' once flag) is written now, so that the run does not take the page
// faults of first writes (a read, mapping the zero page, then a copy on write: microseconds
// each, tens under nested virtualization); and the text pages the hooks call are mapped.
__attribute__((constructor)) static void prefault_runtime(void) {
    tally_fault_prefault();
    tally_malloc_prefault();
    tally_thread_pool_prefault();
    volatile pthread_once_t *once = &hooks_once;
    *once = *once;
    (void)*(volatile const char *)(const void *)&pthread_atfork;
}

static void install_hooks_once(void) {
    tally_trace_start_from_env();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atexit(at_exit);
}

static void install_hooks(void) {
    pthread_once(&hooks_once, install_hooks_once);
}

void *tally_profiler_start(void *user_context, const char *pipeline, const char *target,
                           int32_t num_slots, const char *const *slot_names,
                           const int32_t *slot_kinds, const int32_t *slot_parents, int32_t flags) {
    install_hooks();
    tally_export_continuous_start();
    return tally_profiler_start_run(user_context, pipeline, target, num_slots, slot_names,
                                    slot_kinds, slot_parents, flags);
}

int32_t halide_do_par_for(void *user_context, halide_task_t f, int32_t min, int32_t extent,
                          uint8_t *closure) {
    install_hooks();
    return tally_thread_pool_run(user_context, f, min, extent, closure);
}

int32_t halide_do_parallel_tasks(void *user_context, int32_t num_tasks,
                                 halide_parallel_task_t *tasks, void *task_parent) {
    install_hooks();
    return tally_thread_pool_run_tasks(user_context, num_tasks, tasks, task_parent);
}

int32_t halide_profiler_pipeline_start(void *user_context, const char *pipeline_name,
                                       int32_t num_funcs, const uint64_t *func_names) {
    install_hooks();
    tally_export_continuous_start();
    return tally_halide_profiler_start(user_context, pipeline_name, num_funcs, func_names);
}

int32_t halide_profiler_instance_start(void *user_context, const char *pipeline_name,
                                       int32_t num_funcs, const uint64_t *func_names,
                                       void *instance) {
    install_hooks();
    tally_export_continuous_start();
    return tally_halide21_profiler_start(user_context, pipeline_name, num_funcs, func_names,
                                         instance);
}

void tally_profiler_shutdown(void) {
    tally_sampler_shutdown();
    tally_malloc_cache_release();
}
