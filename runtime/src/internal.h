// Declarations shared between the runtime's translation units. Not installed, not seen by
// generated code. C11.
//
// Layering: each file of runtime/src calls only files of its own layer or of lower ones, as
// runtime/layers.txt declares; the build checks the library against that list after every build
// (runtime/check_layering.py). Below, the internal calls are grouped by the file that defines
// them (after the profiler's types).
#ifndef TALLY_RUNTIME_SRC_INTERNAL_H
#define TALLY_RUNTIME_SRC_INTERNAL_H

#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TALLY_CACHE_LINE 64

// Everything declared below is the runtime's own, never part of libtally.so's ABI: hidden, so
// that calls between the runtime's files are direct calls (no PLT, no interposition) on the hot
// paths. The public API (tally_runtime.h, included above) keeps default visibility.
#pragma GCC visibility push(hidden)

// ---- profiler state (the types profiler.c owns; sampling.c and report.c read them) ----------

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
    char **slot_names;
    int32_t *slot_kinds;
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

// ---- bytes.c --------------------------------------------------------------------------------

// A growable byte string; zero-initialise it. An append that runs out of memory sets `failed`
// and makes every later call a no-op. After any append, data[len] == '\0'.
typedef struct tally_bytes {
    char *data;
    size_t len;
    size_t cap;
    int failed;
} tally_bytes;

// Makes room for `extra` more bytes and a NUL.
void tally_bytes_reserve(tally_bytes *b, size_t extra);
void tally_bytes_append(tally_bytes *b, const void *bytes, size_t n);
void tally_bytes_printf(tally_bytes *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tally_bytes_free(tally_bytes *b);
// Appends `s` as a JSON string (RFC 8259, so valid UTF-8): names are any bytes; a byte that does
// not begin a well-formed UTF-8 sequence is written as U+FFFD, control bytes as \u00XX.
void tally_bytes_json_string(tally_bytes *b, const char *s);

// ---- error.c --------------------------------------------------------------------------------

// The runtime's own text (the on-demand report, warnings, Vulkan's debug messages): through the
// print handler where one is installed (so a program capturing what Halide's runtime prints gets
// it all, as with Halide's), else to stderr, where ARCHITECTURE.md puts the report; halide_print,
// what a pipeline prints, goes to stdout by default, as Halide's does.
void tally_print_diagnostic(void *user_context, const char *msg);

// Formats a message (printf-style) into a stack buffer, reports it through halide_error and
// returns `code`.
int32_t tally_report_error(void *user_context, int32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// ---- trace.c --------------------------------------------------------------------------------

// The timeline recorder (trace.c has the design; export_trace.c writes what it holds). Each hook
// below costs one predictable branch while no trace is requested.
extern _Atomic int32_t tally_trace_on __attribute__((visibility("hidden")));

static inline int tally_tracing(void) {
    return __builtin_expect(atomic_load_explicit(&tally_trace_on, memory_order_relaxed), 0);
}

enum {
    TALLY_TRACE_STATE = 1,
    TALLY_TRACE_LAUNCH,
    TALLY_TRACE_DEVICE,
    TALLY_TRACE_WAIT,
    TALLY_TRACE_MEMORY,
};

// The most pipelines one process's trace names (later ones record nothing), and the most threads
// that record (later ones' records are dropped): host thread tids stay below
// TALLY_TRACE_MAX_THREADS.
#define TALLY_TRACE_MAX_PIPELINES 256
#define TALLY_TRACE_MAX_THREADS 999

typedef struct tally_trace_record {
    _Atomic uint64_t w[4];
} tally_trace_record;

void tally_trace_run_started_slow(const struct tally_instance *inst);
void tally_trace_switch_slow(const tally_context *ctx, int32_t slot);
void tally_trace_context_slow(void);
void tally_trace_memory_slow(const struct tally_instance *inst, int32_t kind, uint64_t delta);
uint64_t tally_trace_launch_slow(const tally_context *ctx, int32_t slot);
void tally_trace_device_slow(const void *pipeline, int32_t slot, uint64_t flow, uint64_t device_ns,
                             int32_t on_host_clock, uint64_t host_begin_ns);
void tally_trace_wait_slow(uint64_t begin_ns, uint64_t end_ns);

// A run started on the calling thread, whose current context it now is (names its pipeline).
static inline void tally_trace_run_started(const struct tally_instance *inst) {
    if (tally_tracing()) {
        tally_trace_run_started_slow(inst);
    }
}
// `ctx` is about to switch to `slot`.
static inline void tally_trace_switch(const tally_context *ctx, int32_t slot) {
    if (tally_tracing()) {
        tally_trace_switch_slow(ctx, slot);
    }
}
// The calling thread's current context changed (a task's context began or ended, a run ended).
static inline void tally_trace_context(void) {
    if (tally_tracing()) {
        tally_trace_context_slow();
    }
}
// A run of `inst` allocated or freed memory of `kind` (TALLY_MEMORY_*): `delta` is added to the
// live bytes modulo 2^64 (a free passes 0 - bytes).
static inline void tally_trace_memory(const struct tally_instance *inst, int32_t kind,
                                      uint64_t delta) {
    if (tally_tracing()) {
        tally_trace_memory_slow(inst, kind, delta);
    }
}
// The calling thread, current context `ctx` in `slot`, records a device command; returns its flow
// id, 0 when not recording.
static inline uint64_t tally_trace_launch(const tally_context *ctx, int32_t slot) {
    return tally_tracing() ? tally_trace_launch_slow(ctx, slot) : 0;
}
// The device ran the command of `flow` for device_ns, from host_begin_ns when on_host_clock.
static inline void tally_trace_device(const void *pipeline, int32_t slot, uint64_t flow,
                                      uint64_t device_ns, int32_t on_host_clock,
                                      uint64_t host_begin_ns) {
    if (flow && tally_tracing()) {
        tally_trace_device_slow(pipeline, slot, flow, device_ns, on_host_clock, host_begin_ns);
    }
}
// The calling thread waited for the device from begin_ns to end_ns.
static inline void tally_trace_wait(uint64_t begin_ns, uint64_t end_ns) {
    if (tally_tracing()) {
        tally_trace_wait_slow(begin_ns, end_ns);
    }
}

// Turns recording on when TALLY_PROFILE_TRACE names a file (TALLY_PROFILE_TRACE_EVENTS sets the
// ring size). Called once per process, before the first profiled run.
void tally_trace_start_from_env(void);
void tally_trace_set_recording(int32_t on);
// Records per thread ring (rounded up to a power of two); 0 or TALLY_ERROR_BAD_ARGUMENT. Applies
// to rings created later.
int32_t tally_trace_set_capacity(uint64_t records);
uint32_t tally_trace_capacity(void);
// Forgets every record so far and the pipelines' registry records (tally_profiler_reset).
void tally_trace_clear(void);
// Fork handlers: prepare takes the pipeline table's lock, release (parent and child) releases
// it. The child keeps the records made before the fork.
void tally_trace_fork_prepare(void);
void tally_trace_fork_release(void);
// Records lost so far (overwritten in a full ring, or refused: no memory or too many threads).
uint64_t tally_trace_dropped(void);
// Whether anything was ever recorded in this process (the report mentions the trace only then).
int tally_trace_used(void);

// A copy of every ring's records, for the writer.
typedef struct tally_trace_event {
    uint64_t ts;
    uint64_t a, b;  // the record's w2 and w3
    uint64_t seq;   // index in its thread's ring: the order of the thread's records
    int32_t kind, pipe, slot, tid;
} tally_trace_event;

typedef struct tally_trace_pipeline_names {
    const char *name;
    const char *target;
    int32_t num_slots;
    const char *const *slot_names;
    const int32_t *slot_kinds;
} tally_trace_pipeline_names;

typedef struct tally_trace_snapshot {
    tally_trace_event *events;  // ring by ring, each in record order
    size_t num_events, cap_events;
    tally_trace_pipeline_names *pipelines;  // pipe p is pipelines[p - 1]
    int32_t num_pipelines;
    int32_t max_tid;
    uint64_t dropped;
    uint32_t capacity;
} tally_trace_snapshot;

// Returns 0 or TALLY_ERROR_OUT_OF_MEMORY (nothing to free).
int32_t tally_trace_snapshot_take(tally_trace_snapshot *out);
void tally_trace_snapshot_free(tally_trace_snapshot *s);

// ---- fault.c --------------------------------------------------------------------------------

// Operations TALLY_FAULT (or tally_testing_set_fault) can make fail.
enum {
    TALLY_FAULT_MALLOC = 0,
    TALLY_FAULT_DEVICE_MALLOC,
    TALLY_FAULT_COPY_TO_HOST,
    TALLY_FAULT_COPY_TO_DEVICE,
    TALLY_FAULT_LAUNCH,
    TALLY_FAULT_SYNC,
    TALLY_NUM_FAULT_OPS
};

// Counts one operation of kind `op`. Returns 0, or, when it is the one chosen to fail, reports
// the printf-style message followed by " (injected fault)" through halide_error and returns the
// operation's error code. Callers return that code (halide_malloc: NULL) without doing the work.
int32_t tally_fault_check(void *user_context, int32_t op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// pthread_create that honours tally_testing_fail_thread_starts. Returns 0 or an errno value.
int tally_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);

// ---- clock.c --------------------------------------------------------------------------------

// The clock's state (clock.c). Exact mode reads the clock on every slot switch, so the read is
// inline: the test clock hook, then the calibrated TSC conversion
// ns = base_ns + ((tsc - base_tsc) * mult) >> 32, published by `use_tsc` (release).
typedef struct tally_tsc_conversion {
    uint64_t base_tsc;
    uint64_t base_ns;
    uint64_t mult;  // ns per tick, 32.32 fixed point
} tally_tsc_conversion;
extern _Atomic(tally_testing_clock_t) tally_test_clock __attribute__((visibility("hidden")));
extern tally_tsc_conversion tally_tsc __attribute__((visibility("hidden")));
extern _Atomic int32_t tally_use_tsc __attribute__((visibility("hidden")));

// A TSC reading in ns on CLOCK_MONOTONIC's time base, by the calibrated conversion. Signed from
// the calibration's base: a reading a few ticks before it (another CPU's counter, a hair behind)
// converts to a time a few ns before the base, not to one 2^64 ticks later.
static inline uint64_t tally_tsc_ticks_to_ns(uint64_t ticks) {
    // mult (ns per tick, 32.32, at most 10 << 32 by the calibration's plausibility check) fits
    // int64: a signed 64 x 64 -> 128 multiply is one imul, as fast as the unsigned mul.
    int64_t d = (int64_t)(ticks - tally_tsc.base_tsc);
    return tally_tsc.base_ns + (uint64_t)(int64_t)(((__int128)d * (int64_t)tally_tsc.mult) >> 32);
}

// CLOCK_MONOTONIC in ns (what tally_now_ns reads without a calibrated TSC).
uint64_t tally_monotonic_ns(void);

// The clock every profiler timestamp comes from, in ns on CLOCK_MONOTONIC's time base: the
// invariant TSC once tally_clock_init has calibrated it, else clock_gettime; a test clock
// (tally_testing_set_clock) overrides both. Async-signal-safe.
static inline uint64_t tally_now_ns(void) {
    tally_testing_clock_t clock = atomic_load_explicit(&tally_test_clock, memory_order_relaxed);
    if (clock) {
        return clock();
    }
#if defined(__x86_64__) || defined(__i386__)
    if (atomic_load_explicit(&tally_use_tsc, memory_order_acquire)) {
        return tally_tsc_ticks_to_ns(__builtin_ia32_rdtsc());
    }
#endif
    return tally_monotonic_ns();
}
// Calibrates the TSC (once per process; ~1 ms). Called when a profiled run starts.
void tally_clock_init(void);
// What tally_now_ns reads: "tsc", "clock_gettime" or "test clock".
const char *tally_clock_name(void);
// The clock `p`'s runs read: its recorded one, else this process's (profiler.c).
const char *tally_pipeline_clock(const tally_pipeline *p);

// ---- context.c ------------------------------------------------------------------------------

// Thread-local variables of the hot calls (a context switch, a pool task): the initial-exec TLS
// model, one %fs-relative access instead of a __tls_get_addr call per function, which in a
// shared library (libtally.so, loaded by the Python module or a JIT host) costs several ns per
// task. Safe for a library loaded at start-up and, since these are a few bytes, for one loaded
// with dlopen too (glibc keeps a surplus of static TLS for that).
#define TALLY_HOT_TLS __attribute__((tls_model("initial-exec")))

// The calling thread's current context (NULL when none). Accessed inline: the hot calls switch
// it on every slot change. Hidden: it is no part of the ABI libtally.so exports.
extern _Thread_local tally_context *tally_current_context TALLY_HOT_TLS
    __attribute__((visibility("hidden")));

static inline tally_context *tally_get_current_context(void) {
    return tally_current_context;
}

static inline void tally_set_current_context(tally_context *ctx) {
    tally_current_context = ctx;
}

// How many pool tasks (par_for iterations, async task units) the calling thread is inside; the
// thread pool counts them, Halide's profiler ABI reads them.
extern _Thread_local int32_t tally_task_nesting TALLY_HOT_TLS __attribute__((visibility("hidden")));

// A value unique to the calling thread while it lives (the address of a thread-local).
const void *tally_thread_tag(void);

// ---- buffer.c -------------------------------------------------------------------------------

// Bytes from the start of the buffer's element span (tally_buffer_begin) to the element
// buf->host points at: nonzero only with negative strides; 0 for an empty buffer.
uint64_t tally_buffer_host_offset(const halide_buffer_t *buf);

// ---- sampling.c -----------------------------------------------------------------------------

static inline int32_t tally_valid_slot(const tally_instance *inst, int32_t slot) {
    return slot >= 0 && slot < inst->num_slots;
}

// Bills the time since the last sample of `inst` (caller holds its sampling right).
// Async-signal-safe.
void tally_sample_instance(tally_instance *inst, uint64_t now);

// ---- device_waits.c -------------------------------------------------------------------------

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

// ---- device_timeline.c ----------------------------------------------------------------------

// Who a launch is billed to: the calling thread's run (its pipeline record, only a key) and slot
// when it was recorded, and the tally_timeline_reset generation. pipeline NULL: no profiled run.
typedef struct tally_timeline_owner {
    const void *pipeline;
    int32_t slot;
    uint32_t generation;
    uint64_t trace_flow;  // the launch's flow id in the trace (trace.c); 0 when not recording
} tally_timeline_owner;

enum {
    // Measured with device timestamps; intervals placed on the host clock.
    TALLY_TIMELINE_TIMESTAMPS_CALIBRATED = 1,
    // Measured with device timestamps; durations only.
    TALLY_TIMELINE_TIMESTAMPS,
    // The device has no timestamps: the back end synced after each launch instead.
    TALLY_TIMELINE_SYNC_FALLBACK,
    // CUDA events around each launch, anchored to the host clock at blocking points.
    TALLY_TIMELINE_EVENTS,
};
#define TALLY_TIMELINE_NUM_APIS 3  // indexed by TALLY_DEVICE_API_*

// Timestamp records that could not be billed (expected 0 each).
enum {
    TALLY_TIMELINE_LOST = 0,    // completed, but no room to bill it, or its results unreadable
    TALLY_TIMELINE_OVERFLOWED,  // not timed: every query pool full and none could be added
    TALLY_TIMELINE_UNMATCHED,   // an end before its begin (beyond the counter's valid bits)
    TALLY_NUM_TIMELINE_PROBLEMS
};

typedef struct tally_timeline_summary {
    uint64_t kernels;  // timed device commands: kernels and staged copies
    uint64_t busy_ns;  // sum of the kernel intervals (one queue: they do not overlap)
    uint64_t span_ns;  // first kernel start to last kernel end, when calibrated
    // Host time the runtime spent waiting for the device during the pipeline's runs; busy_ns
    // minus it is the device time that overlapped host work.
    uint64_t host_wait_ns;
    uint64_t problems[TALLY_NUM_TIMELINE_PROBLEMS];  // process-wide
    int32_t mode[TALLY_TIMELINE_NUM_APIS];           // per device API; 0: unused
} tally_timeline_summary;

// The calling thread's owner now; while a trace is recorded, also records the launch (its flow).
tally_timeline_owner tally_timeline_owner_now(void);
// Whether the owner's pipeline was compiled for profile_timestamps.
int tally_timeline_owner_wants_timestamps(const tally_timeline_owner *o);
// Bills one completed kernel of `device_ns` to its owner; host_begin_ns is its start on the
// profiler's clock when `calibrated`.
void tally_timeline_add(const tally_timeline_owner *o, uint64_t device_ns, int32_t calibrated,
                        uint64_t host_begin_ns);
// A device wait of `ns` by the calling thread (device_waits.c), billed to its current run.
void tally_timeline_add_host_wait(uint64_t ns);
void tally_timeline_count_problem(int32_t problem);
void tally_timeline_set_mode(int32_t api, int32_t mode);
// Forgets everything billed so far (tally_profiler_reset); later completions of earlier launches
// are dropped.
void tally_timeline_reset(void);
// Per slot of `pipeline`: device time and kernels; and the pipeline's summary.
void tally_timeline_read(const void *pipeline, int32_t num_slots, uint64_t *slot_device_ns,
                         uint64_t *slot_kernels, tally_timeline_summary *out);
const char *tally_timeline_mode_name(int32_t mode);

// Device clock correlation, one map per device API: a back end takes several paired readings of
// its device clock and the profiler's clock, and tally_timeline_clock_pair keeps the tightest (the
// smallest deviation: the host clock's uncertainty about when the device reading was taken). The
// first kept pairing is the base of a drift fit: once a later one lies far enough away on the
// device clock, the rate (host ns per device ns) is refitted from the two. Device times map to the
// host clock from the newest pairing at that rate.
typedef struct tally_clock_reading {
    double device_ns;       // the device clock, in ns from the back end's own origin
    uint64_t host_ns;       // the profiler's clock at that device reading (best estimate)
    uint64_t deviation_ns;  // how far the true host time may lie from host_ns
} tally_clock_reading;
// Keeps the tightest of `n` readings for `api`; returns its index, or -1 when n <= 0.
int32_t tally_timeline_clock_pair(int32_t api, const tally_clock_reading *readings, int32_t n);
// The host time of `device_ns` on `api`'s clock; 0 when that API has no pairing yet.
int32_t tally_timeline_clock_to_host(int32_t api, double device_ns, uint64_t *host_ns);
// Forgets `api`'s pairings (its device was released: a new one has a new clock).
void tally_timeline_clock_forget(int32_t api);
// ---- exact.c --------------------------------------------------------------------------------

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

// ---- sampler_posix.c ------------------------------------------------------------------------

// Registers / unregisters an instance with the sampler of its mode. Register starts the sampler
// thread or arms the timer on first use; returns 0 or an error code (already reported).
// Unregister returns once no sampler is sampling the instance; afterwards the caller owns its
// sampling state.
int32_t tally_sampler_register(void *user_context, tally_instance *inst);
void tally_sampler_unregister(tally_instance *inst);
// Stops the sampler thread and deletes the timer (waits for a shutdown in progress).
void tally_sampler_shutdown(void);
// Fork handlers: prepare takes the sampler lock; the child forgets the thread and the timer.
void tally_sampler_fork_prepare(void);
void tally_sampler_fork_parent(void);
void tally_sampler_fork_child(void);

// ---- profiler.c -----------------------------------------------------------------------------

// tally_profiler_start without the process hooks (lifetime.c installs them first).
void *tally_profiler_start_run(void *user_context, const char *pipeline, const char *target,
                               int32_t num_slots, const char *const *slot_names,
                               const int32_t *slot_kinds, int32_t flags);

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

// ---- device back ends (device_host.c, device_cuda.c, device_vulkan.c) -----------------------

// The halide_device_interface_t of a back end whose operations are named <prefix>_device_malloc,
// <prefix>_device_free, <prefix>_copy_to_host, <prefix>_copy_to_device, <prefix>_device_sync,
// <prefix>_device_sync_global and <prefix>_release (no impl table, no reserved pointers).
#define TALLY_DEVICE_INTERFACE(name, prefix)                                                       \
    {                                                                                              \
        name, prefix##_device_malloc, prefix##_device_free, prefix##_copy_to_host,                 \
            prefix##_copy_to_device, prefix##_device_sync, prefix##_device_sync_global,            \
            prefix##_release, NULL, {NULL, NULL, NULL, NULL},                                      \
    }

// ---- memory.c -------------------------------------------------------------------------------

// Hands the cached free blocks back to the system (at exit).
void tally_malloc_cache_shutdown(void);
// Fork handlers: prepare takes the cache lock, parent and child release it.
void tally_malloc_fork_prepare(void);
void tally_malloc_fork_parent(void);
void tally_malloc_fork_child(void);
void tally_malloc_prefault(void);
void tally_fault_prefault(void);

// ---- halide_profiler.c ----------------------------------------------------------------------

// halide_profiler_pipeline_start without the process hooks (lifetime.c installs them first).
int32_t tally_halide_profiler_start(void *user_context, const char *pipeline_name,
                                    int32_t num_funcs, const uint64_t *func_names);

// ---- report.c -------------------------------------------------------------------------------

// The report at process exit (stderr, stdout or TALLY_PROFILE_OUTPUT's file; TALLY_PROFILE_JSON),
// printed when at least one run finished. The caller has stopped the sampler.
void tally_report_at_exit(void);

// ---- thread_pool.c --------------------------------------------------------------------------

// halide_do_par_for without the process hooks (lifetime.c installs them first).
int32_t tally_thread_pool_run(void *user_context, halide_task_t f, int32_t min, int32_t extent,
                              uint8_t *closure);
// halide_do_parallel_tasks without the process hooks.
int32_t tally_thread_pool_run_tasks(void *user_context, int32_t num_tasks,
                                    halide_parallel_task_t *tasks, void *task_parent);

// Fork handlers: prepare takes the resize and pool locks; the child forgets the workers.
void tally_thread_pool_fork_prepare(void);
void tally_thread_pool_fork_parent(void);
void tally_thread_pool_fork_child(void);
void tally_thread_pool_prefault(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_INTERNAL_H
