// The timeline recorder (trace.c): per-thread rings of switch, launch, device, wait and memory
// records, the inline hooks that record them, and the snapshot export_trace.c writes. Layer
// profiler.base (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_TRACE_H
#define TALLY_RUNTIME_SRC_PROFILER_TRACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

struct tally_context;
struct tally_instance;

// Whether a trace is being recorded (trace.c has the design). Each hook below costs one
// predictable branch while none is.
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
void tally_trace_switch_slow(const struct tally_context *ctx, int32_t slot);
void tally_trace_context_slow(void);
void tally_trace_memory_slow(const struct tally_instance *inst, int32_t kind, uint64_t delta);
uint64_t tally_trace_launch_slow(const struct tally_context *ctx, int32_t slot);
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
static inline void tally_trace_switch(const struct tally_context *ctx, int32_t slot) {
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
static inline uint64_t tally_trace_launch(const struct tally_context *ctx, int32_t slot) {
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
    int32_t device_api;  // tally_device_api_t, from tally_profiler_start's flags
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

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_TRACE_H
