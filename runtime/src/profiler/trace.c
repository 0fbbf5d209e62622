// The timeline recorder: what TALLY_PROFILE_TRACE (or tally_profiler_trace_record) asks the
// runtime to remember, event by event, for the Chrome Trace Event export (export_trace.c).
//
// Cost. Every hook is an inline test of one process-wide flag (tally_trace_on, relaxed load,
// predicted not taken) in front of an out-of-line call: with no trace requested a hook costs one
// predictable branch. While recording, a hook reads the clock and appends one 32-byte record to
// the calling thread's ring: no lock, no shared cache line (except a launch's flow id and a
// pipeline's memory counter, one atomic add each).
//
// Records. Each host thread owns a ring of `capacity` records (TALLY_PROFILE_TRACE_EVENTS, default
// 262144, rounded up to a power of two: 8 MiB per thread that records), allocated at its first
// record and kept until the process exits, so the events of threads that ended are still
// written. A full ring overwrites its oldest record; the writer counts every record it did not
// get (overwritten, or refused because the thread had no ring) as dropped. Each record stands
// alone (a state record says where the thread is, not what changed), so losing the oldest ones
// loses their time span, never the meaning of the rest. Record kinds:
//   STATE   the thread's current context is now in slot `slot` of pipeline `pipe` (pipe 0: the
//           thread has no profiled context). Written at every slot switch and context change
//           that changes it (not when a task sets its loop's slot again), whichever mode the run
//           uses (exact or sampling): the timeline's slices are switch-timed in every mode.
//   LAUNCH  a device command (kernel or staged copy) was recorded for slot `slot`; w2 its flow id.
//   DEVICE  the device ran flow w2 for w3 ns (bit 63: its start w0 is on the host clock).
//   WAIT    the thread waited for the device from w2 to w0.
//   MEMORY  the pipeline's live bytes of kind `slot` (heap, device) are now w2 (signed).
// Pipelines are numbered (`pipe` = index + 1) in a table that copies their names at their first
// recorded run, so the writer needs nothing from the registry; a reset (tally_trace_clear) empties
// it with the records.
//
// Readers (tally_trace_snapshot) copy each ring without stopping its writer: a ring's records are
// atomics, published by a release store of its head, and the reader re-reads the head after
// copying to discard records overwritten meanwhile (a seqlock's read side).

#include "profiler/trace.h"
#include "core/clock.h"
#include "core/context.h"
#include "core/env.h"
#include "core/error.h"
#include "profiler/run.h"
#include "tally_runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_DEFAULT_CAPACITY 262144u
#define TRACE_MAX_CAPACITY (1u << 26)

_Atomic int32_t tally_trace_on;

typedef struct trace_ring {
    struct trace_ring *next;  // push-only list of every ring
    int32_t tid;              // 1, 2, ...: the order threads first recorded
    uint64_t mask;            // capacity - 1
    _Atomic uint64_t head;    // records ever written (owner: release store)
    _Atomic uint64_t start;   // records before this index were cleared (tally_trace_clear)
    tally_trace_record *records;
} trace_ring;

typedef struct trace_pipeline {
    _Atomic(const void *) key;  // the registry's record while it is current; NULL after a reset
    char *name;
    char *target;
    int32_t device_api;  // tally_device_api_t
    int32_t num_slots;
    char **slot_names;
    int32_t *slot_kinds;      // TALLY_SLOT_*
    _Atomic int64_t live[2];  // heap, device bytes of the pipeline's runs in flight
} trace_pipeline;

static _Atomic(trace_ring *) rings;
static _Atomic int32_t next_tid;
static _Atomic uint64_t refused;    // records of threads that could not get a ring
static _Atomic uint64_t next_flow;  // flow ids, from 1
static _Atomic uint32_t capacity_setting;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static trace_pipeline table[TALLY_TRACE_MAX_PIPELINES];
static _Atomic int32_t table_count;
static _Atomic uint32_t table_generation;

static _Thread_local trace_ring *my_ring;
static _Thread_local int my_ring_refused;
// The calling thread's last state record (put_state), and the clears so far when it was made.
static _Thread_local int32_t last_pipe = -1, last_slot;
static _Thread_local uint32_t last_clears;
static _Atomic uint32_t clear_count;
// The calling thread's last pipeline lookup (key, table generation, pipe).
static _Thread_local const void *cached_key;
static _Thread_local uint32_t cached_generation;
static _Thread_local int32_t cached_pipe;

static uint32_t round_up_pow2(uint64_t n) {
    uint32_t c = 1;
    while (c < n && c < TRACE_MAX_CAPACITY) {
        c <<= 1;
    }
    return c;
}

int32_t tally_trace_set_capacity(uint64_t records) {
    if (records == 0 || records > TRACE_MAX_CAPACITY) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    atomic_store_explicit(&capacity_setting, round_up_pow2(records), memory_order_relaxed);
    return 0;
}

uint32_t tally_trace_capacity(void) {
    uint32_t c = atomic_load_explicit(&capacity_setting, memory_order_relaxed);
    return c ? c : TRACE_DEFAULT_CAPACITY;
}

// The calling thread's ring, created at its first record; NULL when it cannot have one (no
// memory, or TALLY_TRACE_MAX_THREADS threads have rings): then it never tries again.
static trace_ring *attach_ring(void) {
    if (my_ring_refused) {
        return NULL;
    }
    uint64_t cap = tally_trace_capacity();
    trace_ring *r = (trace_ring *)calloc(1, sizeof(trace_ring));
    tally_trace_record *records =
        r ? (tally_trace_record *)calloc((size_t)cap, sizeof(tally_trace_record)) : NULL;
    int32_t tid = records ? atomic_fetch_add_explicit(&next_tid, 1, memory_order_relaxed) + 1 : 0;
    if (!records || tid >= TALLY_TRACE_MAX_THREADS) {
        free(records);
        free(r);
        my_ring_refused = 1;
        return NULL;
    }
    r->records = records;
    r->mask = cap - 1;
    r->tid = tid;
    trace_ring *h = atomic_load_explicit(&rings, memory_order_relaxed);
    do {
        r->next = h;
    } while (!atomic_compare_exchange_weak_explicit(&rings, &h, r, memory_order_release,
                                                    memory_order_relaxed));
    my_ring = r;
    return r;
}

static void put(uint64_t ts, int32_t kind, int32_t pipe, int32_t slot, uint64_t w2, uint64_t w3) {
    trace_ring *r = my_ring ? my_ring : attach_ring();
    if (!r) {
        atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
        return;
    }
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    tally_trace_record *rec = &r->records[h & r->mask];
    atomic_store_explicit(&rec->w[0], ts, memory_order_relaxed);
    atomic_store_explicit(&rec->w[1],
                          (uint64_t)(uint32_t)kind | (uint64_t)(uint32_t)pipe << 8 |
                              (uint64_t)(uint32_t)slot << 32,
                          memory_order_relaxed);
    atomic_store_explicit(&rec->w[2], w2, memory_order_relaxed);
    atomic_store_explicit(&rec->w[3], w3, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

// The pipe number of a registry record (0: none, or not in the table).
static int32_t pipe_of(const void *key) {
    if (!key) {
        return 0;
    }
    uint32_t gen = atomic_load_explicit(&table_generation, memory_order_acquire);
    if (key == cached_key && gen == cached_generation) {
        return cached_pipe;
    }
    int32_t n = atomic_load_explicit(&table_count, memory_order_acquire);
    for (int32_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&table[i].key, memory_order_relaxed) == key) {
            cached_key = key;
            cached_generation = gen;
            cached_pipe = i + 1;
            return i + 1;
        }
    }
    return 0;
}

static char *copy_string(const char *s) {
    size_t n = strlen(s ? s : "") + 1;
    char *d = (char *)malloc(n);
    if (d) {
        memcpy(d, s ? s : "", n);
    }
    return d;
}

// Adds the pipeline to the table (lock held). Returns its pipe, or 0 when out of room or memory.
static int32_t add_pipeline_locked(const tally_pipeline *p) {
    int32_t n = atomic_load_explicit(&table_count, memory_order_relaxed);
    if (n >= TALLY_TRACE_MAX_PIPELINES) {
        return 0;
    }
    trace_pipeline *t = &table[n];
    t->name = copy_string(p->name);
    t->target = copy_string(p->target);
    t->device_api = TALLY_PROFILER_DEVICE_API_OF(p->device_flags);
    t->slot_names = (char **)calloc((size_t)p->num_slots, sizeof(char *));
    t->slot_kinds = (int32_t *)calloc((size_t)p->num_slots, sizeof(int32_t));
    int ok = t->name && t->target && t->slot_names && t->slot_kinds;
    for (int32_t s = 0; ok && s < p->num_slots; s++) {
        t->slot_names[s] = copy_string(p->slot_names[s]);
        ok = t->slot_names[s] != NULL;
        t->slot_kinds[s] = p->slot_kinds ? p->slot_kinds[s] : TALLY_SLOT_FUNC;
    }
    if (!ok) {
        for (int32_t s = 0; t->slot_names && s < p->num_slots; s++) {
            free(t->slot_names[s]);
        }
        free(t->slot_names);
        free(t->slot_kinds);
        free(t->name);
        free(t->target);
        memset(t, 0, sizeof(*t));
        return 0;
    }
    t->num_slots = p->num_slots;
    atomic_store_explicit(&t->live[0], 0, memory_order_relaxed);
    atomic_store_explicit(&t->live[1], 0, memory_order_relaxed);
    atomic_store_explicit(&t->key, (const void *)p, memory_order_relaxed);
    atomic_store_explicit(&table_count, n + 1, memory_order_release);
    return n + 1;
}

// Whether the calling thread works in `ctx`: a pool thread holding a run's main context between
// tasks (the pool makes the caller's context current for tasks that open none) does not; its
// time is the main thread's.
static int works_in(const tally_context *ctx) {
    return ctx && ctx->instance &&
           (ctx != &ctx->instance->main || ctx->instance->main_thread == tally_thread_tag());
}

// A state record (pipe 0: no profiled context), unless it says what the thread's last one did:
// tasks set their loop's slot again on entry, and a pool thread ends a task and then drops the
// context it borrowed, both without changing where the thread is.
static void put_state(int32_t pipe, int32_t slot) {
    uint32_t clears = atomic_load_explicit(&clear_count, memory_order_relaxed);
    if (clears == last_clears && pipe == last_pipe && (pipe == 0 || slot == last_slot)) {
        return;
    }
    last_clears = clears;
    last_pipe = pipe;
    last_slot = slot;
    put(tally_now_ns(), TALLY_TRACE_STATE, pipe, slot, 0, 0);
}

// The state record of the thread's context `ctx` (NULL: none).
static void put_state_of(const tally_context *ctx) {
    if (works_in(ctx)) {
        put_state(pipe_of(ctx->instance->pipeline),
                  atomic_load_explicit(&ctx->slot, memory_order_relaxed));
    } else {
        put_state(0, 0);
    }
}

void tally_trace_run_started_slow(const tally_instance *inst) {
    const tally_pipeline *p = inst->pipeline;
    if (pipe_of(p) == 0) {
        pthread_mutex_lock(&table_lock);
        if (pipe_of(p) == 0) {
            add_pipeline_locked(p);
        }
        pthread_mutex_unlock(&table_lock);
    }
    put_state_of(tally_get_current_context());
}

void tally_trace_switch_slow(const tally_context *ctx, int32_t slot) {
    if (works_in(ctx)) {
        put_state(pipe_of(ctx->instance->pipeline), slot);
    }
}

void tally_trace_context_slow(void) {
    put_state_of(tally_get_current_context());
}

void tally_trace_memory_slow(const tally_instance *inst, int32_t kind, uint64_t delta) {
    int32_t pipe = pipe_of(inst->pipeline);
    if (pipe == 0 || kind < 0 || kind > 1) {
        return;
    }
    // The atomic add wraps (C11 7.17.7.5); the sum after it is taken in unsigned arithmetic.
    uint64_t live = (uint64_t)atomic_fetch_add_explicit(&table[pipe - 1].live[kind], (int64_t)delta,
                                                        memory_order_relaxed) +
                    delta;
    put(tally_now_ns(), TALLY_TRACE_MEMORY, pipe, kind, live, 0);
}

uint64_t tally_trace_launch_slow(const tally_context *ctx, int32_t slot) {
    int32_t pipe = works_in(ctx) ? pipe_of(ctx->instance->pipeline) : 0;
    if (pipe == 0) {
        return 0;
    }
    uint64_t flow = atomic_fetch_add_explicit(&next_flow, 1, memory_order_relaxed) + 1;
    put(tally_now_ns(), TALLY_TRACE_LAUNCH, pipe, slot, flow, 0);
    return flow;
}

void tally_trace_device_slow(const void *pipeline, int32_t slot, uint64_t flow, uint64_t device_ns,
                             int32_t on_host_clock, uint64_t host_begin_ns) {
    int32_t pipe = pipe_of(pipeline);
    if (pipe == 0 || flow == 0) {
        return;
    }
    uint64_t dur = device_ns & ~(1ull << 63);
    put(on_host_clock ? host_begin_ns : 0, TALLY_TRACE_DEVICE, pipe, slot, flow,
        dur | (on_host_clock ? 1ull << 63 : 0));
}

void tally_trace_wait_slow(uint64_t begin_ns, uint64_t end_ns) {
    put(end_ns, TALLY_TRACE_WAIT, 0, 0, begin_ns, 0);
}

void tally_trace_start_from_env(void) {
    if (!tally_env_string("TALLY_PROFILE_TRACE")) {
        return;
    }
    if (tally_env_string("TALLY_PROFILE_TRACE_EVENTS")) {  // unset: the capacity as it is
        char instead[48];
        snprintf(instead, sizeof instead, "%u, the default", TRACE_DEFAULT_CAPACITY);
        (void)tally_trace_set_capacity((uint64_t)tally_env_int(
            "TALLY_PROFILE_TRACE_EVENTS", 1, TRACE_MAX_CAPACITY, TRACE_DEFAULT_CAPACITY, instead));
    }
    atomic_store_explicit(&tally_trace_on, 1, memory_order_relaxed);
}

void tally_trace_set_recording(int32_t on) {
    atomic_store_explicit(&tally_trace_on, on ? 1 : 0, memory_order_relaxed);
}

void tally_trace_clear(void) {
    pthread_mutex_lock(&table_lock);
    for (trace_ring *r = atomic_load_explicit(&rings, memory_order_acquire); r; r = r->next) {
        atomic_store_explicit(&r->start, atomic_load_explicit(&r->head, memory_order_acquire),
                              memory_order_relaxed);
    }
    atomic_store_explicit(&refused, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&clear_count, 1, memory_order_relaxed);
    // The table starts empty again: no record refers to it any more, and a registry record freed
    // by the reset that comes with a clear must not match a new pipeline at the same address.
    // (Runs still in flight record nothing for their pipeline from now on: its key is gone.)
    int32_t n = atomic_load_explicit(&table_count, memory_order_relaxed);
    atomic_store_explicit(&table_count, 0, memory_order_release);
    atomic_fetch_add_explicit(&table_generation, 1, memory_order_release);
    for (int32_t i = 0; i < n; i++) {
        trace_pipeline *t = &table[i];
        atomic_store_explicit(&t->key, NULL, memory_order_relaxed);
        for (int32_t s = 0; s < t->num_slots; s++) {
            free(t->slot_names[s]);
        }
        free(t->slot_names);
        free(t->slot_kinds);
        free(t->name);
        free(t->target);
        t->slot_names = NULL;
        t->slot_kinds = NULL;
        t->name = t->target = NULL;
        t->num_slots = 0;
    }
    pthread_mutex_unlock(&table_lock);
}

// Copies ring r's records since its start into out (grown as needed). Returns 0 or
// TALLY_ERROR_OUT_OF_MEMORY.
static int32_t copy_ring(trace_ring *r, tally_trace_snapshot *out) {
    uint64_t cap = r->mask + 1;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t start = atomic_load_explicit(&r->start, memory_order_relaxed);
    uint64_t first = head > cap && head - cap > start ? head - cap : start;
    size_t n = (size_t)(head - first);
    size_t base = out->num_events;
    if (base + n > out->cap_events) {
        size_t cap_events = out->cap_events ? out->cap_events : 1024;
        while (cap_events < base + n) {
            cap_events *= 2;
        }
        tally_trace_event *e =
            (tally_trace_event *)realloc(out->events, cap_events * sizeof(tally_trace_event));
        if (!e) {
            return TALLY_ERROR_OUT_OF_MEMORY;
        }
        out->events = e;
        out->cap_events = cap_events;
    }
    for (uint64_t i = first; i < head; i++) {
        const tally_trace_record *rec = &r->records[i & r->mask];
        tally_trace_event *e = &out->events[base + (i - first)];
        e->ts = atomic_load_explicit(&rec->w[0], memory_order_relaxed);
        uint64_t w1 = atomic_load_explicit(&rec->w[1], memory_order_relaxed);
        e->kind = (int32_t)(w1 & 0xff);
        e->pipe = (int32_t)((w1 >> 8) & 0xffffff);
        e->slot = (int32_t)(uint32_t)(w1 >> 32);
        e->a = atomic_load_explicit(&rec->w[2], memory_order_relaxed);
        e->b = atomic_load_explicit(&rec->w[3], memory_order_relaxed);
        e->tid = r->tid;
        e->seq = i;
    }
    // Records the owner overwrote while they were copied are torn: keep only those still intact.
    // The fence orders the copy's loads before the second read of head. (GCC rejects fences under
    // ThreadSanitizer, which does not model them: there a sequentially consistent load stands in.)
#if defined(__SANITIZE_THREAD__)
    uint64_t head2 = atomic_load_explicit(&r->head, memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_acquire);
    uint64_t head2 = atomic_load_explicit(&r->head, memory_order_relaxed);
#endif
    uint64_t valid = head2 > cap && head2 - cap > first ? head2 - cap : first;
    if (valid > head) {
        valid = head;
    }
    size_t skip = (size_t)(valid - first);
    if (skip > 0 && n > skip) {  // (no events: out->events may be NULL)
        memmove(&out->events[base], &out->events[base + skip],
                (n - skip) * sizeof(tally_trace_event));
    }
    out->num_events = base + (n - skip);
    out->dropped += valid - start;
    return 0;
}

int32_t tally_trace_snapshot_take(tally_trace_snapshot *out) {
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&table_lock);
    int32_t r = 0;
    for (trace_ring *ring = atomic_load_explicit(&rings, memory_order_acquire); ring && r == 0;
         ring = ring->next) {
        r = copy_ring(ring, out);
        if (ring->tid > out->max_tid) {
            out->max_tid = ring->tid;
        }
    }
    out->dropped += atomic_load_explicit(&refused, memory_order_relaxed);
    out->capacity = tally_trace_capacity();
    int32_t n = atomic_load_explicit(&table_count, memory_order_acquire);
    out->pipelines = (tally_trace_pipeline_names *)calloc((size_t)(n > 0 ? n : 1),
                                                          sizeof(tally_trace_pipeline_names));
    if (!out->pipelines) {
        r = TALLY_ERROR_OUT_OF_MEMORY;
    }
    for (int32_t i = 0; r == 0 && i < n; i++) {
        // Owned by the table until the next tally_trace_clear (tally_profiler_reset, which must
        // not run while a trace is written).
        out->pipelines[i].name = table[i].name;
        out->pipelines[i].target = table[i].target;
        out->pipelines[i].device_api = table[i].device_api;
        out->pipelines[i].num_slots = table[i].num_slots;
        out->pipelines[i].slot_names = (const char *const *)table[i].slot_names;
        out->pipelines[i].slot_kinds = table[i].slot_kinds;
    }
    out->num_pipelines = r == 0 ? n : 0;
    pthread_mutex_unlock(&table_lock);
    if (r != 0) {
        tally_trace_snapshot_free(out);
    }
    return r;
}

void tally_trace_snapshot_free(tally_trace_snapshot *s) {
    free(s->events);
    free(s->pipelines);
    memset(s, 0, sizeof(*s));
}

uint64_t tally_trace_dropped(void) {
    uint64_t dropped = atomic_load_explicit(&refused, memory_order_relaxed);
    pthread_mutex_lock(&table_lock);
    for (trace_ring *r = atomic_load_explicit(&rings, memory_order_acquire); r; r = r->next) {
        uint64_t cap = r->mask + 1;
        uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
        uint64_t start = atomic_load_explicit(&r->start, memory_order_relaxed);
        dropped += head - start > cap ? head - start - cap : 0;
    }
    pthread_mutex_unlock(&table_lock);
    return dropped;
}

int tally_trace_used(void) {
    return atomic_load_explicit(&tally_trace_on, memory_order_relaxed) ||
           atomic_load_explicit(&rings, memory_order_acquire) != NULL ||
           atomic_load_explicit(&refused, memory_order_relaxed) != 0;
}

void tally_trace_fork_prepare(void) {
    pthread_mutex_lock(&table_lock);
}

void tally_trace_fork_release(void) {
    pthread_mutex_unlock(&table_lock);
}
