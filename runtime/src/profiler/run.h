// The profiler's data model: a run (tally_instance) with its per-thread contexts, accumulators
// and exact mode's share clock, and a pipeline's totals over finished runs (tally_pipeline).
// profiler.c owns them; the rules (exact.c, sampling.c), the sampler, the recorder, the report,
// the thread pool and Halide's profiler ABI read them, and error.c (core) writes one flag of a run
// (tally_instance.failed). Types only: they define no symbol, so they belong to no layer of
// runtime/layers.txt. Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_RUN_H
#define TALLY_RUNTIME_SRC_PROFILER_RUN_H

#include <stdatomic.h>
#include <stdint.h>

#define TALLY_CACHE_LINE 64

enum {
    TALLY_COUNTER_LAUNCHES = 0,
    TALLY_COUNTER_INJECTED_SYNCS,
    TALLY_COUNTER_EXPLICIT_SYNCS,
    TALLY_COUNTER_COPIES_TO_DEVICE,
    TALLY_COUNTER_COPY_TO_DEVICE_BYTES,
    TALLY_COUNTER_COPIES_TO_HOST,
    TALLY_COUNTER_COPY_TO_HOST_BYTES,
    TALLY_NUM_COUNTERS
};

struct tally_instance;

// Exact mode: what one context has billed to one slot. `share` is the slot's part of the run's
// wall time in 1/65536 ns (a context working alongside n-1 others bills 1/n of each
// nanosecond); `busy_ns` the context's own time in the slot, `thread_ns` the integral over that
// time of the number of threads working in the run (average threads = thread_ns / busy_ns).
typedef struct tally_exact_acc {
    uint64_t share;
    uint64_t busy_ns;
    uint64_t thread_ns;
} tally_exact_acc;

// A reading of the run's share clock (exact.c) at `ns`.
typedef struct tally_exact_point {
    uint64_t ns;
    uint64_t worker_share;    // integral of [A > 0] / A, 1/65536 ns (A: counted workers)
    uint64_t main_ns;         // integral of [A == 0]
    uint64_t worker_threads;  // integral of [A > 0] * W (W: counted workers not waiting)
} tally_exact_point;

#define TALLY_SHARE_SHIFT 16

// One thread's view of a run: the main thread's context is embedded at the start of the instance
// (so the instance pointer is that context); worker tasks claim their own. Fields written by the
// owning thread and read by the sampler are atomics. One cache line each, so workers writing
// their slots do not share lines.
typedef struct tally_context {
    _Alignas(TALLY_CACHE_LINE) _Atomic int32_t slot;
    // > 0 while the owning thread is blocked in a device wait.
    _Atomic int32_t waiting;
    // Worker contexts: 1 while a task holds it and it should be sampled.
    _Atomic int32_t active;
    // > 0 while the context is not working and must not be sampled: a nested task on the same
    // thread holds a newer context, or Halide's code said its thread went idle
    // (halide_profiler_decr_active_threads). A count: both can hold at once.
    _Atomic int32_t suspended;
    // Worker contexts: ownership (claimed before the fields are set, released after `active`).
    _Atomic int32_t claimed;
    int32_t is_worker;
    struct tally_instance *instance;
    // The thread's current context before this one became current; restored at the end.
    struct tally_context *saved_tls;
    // The suspended worker context of the same run this one nests in, or NULL.
    struct tally_context *parent;
    // Overflow contexts (beyond the preallocated pool) form a push-only list.
    _Atomic(struct tally_context *) next_extra;
    // The thread (tally_thread_tag) that opened the context through Halide's profiler ABI, whose
    // pool task ends it (tally_profiler_end_owned_contexts); NULL for every other context.
    const void *owner;
    // Exact mode (owned by the thread holding the context): the share clock when the context
    // last billed, and its per-slot accumulators ([num_acc]; for worker contexts allocated at
    // first claim and kept for the run).
    tally_exact_point mark;
    tally_exact_acc *exact;
} tally_context;

// Per-slot sampled time of one run: written only by whoever holds the instance's sampling right
// (the sampler, the timer handler, or tally_profiler_end once unregistered).
typedef struct tally_slot_acc {
    uint64_t time_ns;
    uint64_t samples;
    uint64_t thread_sum;
    uint64_t busy_ns;    // exact mode (tally_exact_acc)
    uint64_t thread_ns;  // exact mode
} tally_slot_acc;

typedef struct tally_mem_acc {
    _Atomic int64_t current;
    _Atomic uint64_t peak;
    _Atomic uint64_t num_allocs;
    _Atomic uint64_t total_bytes;
} tally_mem_acc;

typedef struct tally_copy_acc {
    _Atomic uint64_t count;
    _Atomic uint64_t bytes;
} tally_copy_acc;

struct tally_pipeline;

#define TALLY_WORKER_POOL_SIZE 64

// Exact mode: the run's share clock, a seqlock. Writers (a worker context starting or stopping
// to count, a wait, the main context going idle) take it by making `seq` odd, advance the
// integrals to their time and apply the change; readers (every slot switch) retry while it is
// odd or changed. Its own cache line: readers on every core share it clean between writes.
typedef struct tally_share_clock {
    _Alignas(TALLY_CACHE_LINE) _Atomic uint32_t seq;
    _Atomic int32_t active;       // A: worker contexts counting (active, not suspended)
    _Atomic int32_t working;      // W: of those, not blocked in a device wait
    _Atomic int32_t main_idle;    // > 0 while the main context waits or is suspended
    _Atomic uint64_t share_rate;  // 2^48 / A (0 when A = 0): a reader's share per ns, no division
    _Atomic uint64_t base_ns;
    _Atomic uint64_t worker_share;
    _Atomic uint64_t main_ns;
    _Atomic uint64_t worker_threads;
    _Atomic uint64_t run_threads;  // integral of the run's working threads (W, or the main's 1)
} tally_share_clock;

// One-time costs (tally_profiler_one_time_begin): hidden slots after a pipeline's own.
#define TALLY_NUM_ONE_TIME 2

typedef struct tally_instance {
    tally_context main;  // must stay first: an instance pointer is its main context
    struct tally_pipeline *pipeline;
    int32_t num_slots;
    int32_t num_acc;     // num_slots + TALLY_NUM_ONE_TIME: the entries of acc and contexts' exact
    int32_t flags;       // exactly one mode flag (TALLY_PROFILER_FLAG_*), resolved at start
    int32_t live_index;  // index in the sampler's live table of its mode
    int32_t token;       // Halide's profiler ABI: the run's token (-1 for Tally's own runs)
    int32_t start_nesting;  // Halide's profiler ABI: tally_task_nesting where the run started
    // Started with TALLY_PROFILER_FLAG_POOL_CONTEXTS: the pool opens its tasks' contexts.
    int32_t pool_contexts;
    const void *main_thread;  // tally_thread_tag of the thread that started the run
    _Atomic int32_t bad_call_reported;
    // Set when an error is reported while the run is a thread's current context (halide_error):
    // the run is exiting through its error path.
    _Atomic int32_t failed;
    uint64_t start_ns;
    // Sampling state, owned by whoever holds the sampling right (see tally_slot_acc).
    uint64_t last_ns;
    uint64_t ticks;
    uint64_t tick_thread_sum;
    tally_slot_acc *acc;     // [num_acc]
    tally_mem_acc *mem;      // [num_slots * 2], index slot * 2 + kind
    tally_copy_acc *copies;  // [num_slots]
    _Atomic int64_t mem_current[2];
    _Atomic uint64_t mem_peak[2];
    _Atomic uint64_t counters[TALLY_NUM_COUNTERS];
    // Worker contexts: a preallocated pool, then an overflow list.
    tally_context *workers;               // [TALLY_WORKER_POOL_SIZE]
    _Atomic int32_t workers_high_water;   // 1 + highest pool index ever claimed
    _Atomic(tally_context *) extra_head;  // overflow contexts, push-only
    tally_share_clock share;              // exact mode
} tally_instance;

// Per-slot totals of a pipeline over finished runs (guarded by the registry lock).
typedef struct tally_mem_total {
    int64_t current;
    uint64_t peak;
    uint64_t num_allocs;
    uint64_t total_bytes;
} tally_mem_total;

typedef struct tally_slot_total {
    uint64_t time_ns;
    uint64_t samples;
    uint64_t thread_sum;
    uint64_t busy_ns;    // exact mode
    uint64_t thread_ns;  // exact mode
    uint64_t copies;
    uint64_t copy_bytes;
    tally_mem_total mem[2];
} tally_slot_total;

typedef struct tally_pipeline {
    struct tally_pipeline *next;
    char *name;
    char *target;
    // The clock its runs read, for a pipeline made from stats read elsewhere (a static string:
    // "tsc", "clock_gettime", "test clock", or "not recorded"); NULL for the registry's, whose
    // clock is this process's (tally_clock_name).
    const char *clock;
    int32_t num_slots;
    int32_t flags;
    // What the pipeline was compiled for (tally_profiler_start's flags, not its target string):
    // TALLY_PROFILER_FLAG_TIMESTAMPS and the device API bits (TALLY_PROFILER_DEVICE_API_MASK).
    int32_t device_flags;
    char **slot_names;
    int32_t *slot_kinds;
    int32_t *slot_parents;  // the Func slot of a copy slot, else -1
    tally_slot_total *slots;
    uint64_t runs;
    uint64_t total_ns;
    uint64_t ticks;
    uint64_t tick_thread_sum;
    uint64_t run_threads_ns;  // exact mode: integral of working threads over all runs
    uint64_t mem_peak[2];
    uint64_t counters[TALLY_NUM_COUNTERS];
    int32_t active_runs;  // runs in flight
    int32_t orphaned;     // removed from the registry by reset; freed by its last run's end
} tally_pipeline;

// Whether `slot` is one of the run's own slots (not a one-time row).
static inline int32_t tally_valid_slot(const tally_instance *inst, int32_t slot) {
    return slot >= 0 && slot < inst->num_slots;
}

#endif  // TALLY_RUNTIME_SRC_PROFILER_RUN_H
