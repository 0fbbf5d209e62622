// The device timeline: kernel intervals measured by device timestamps (profile_timestamps), billed
// to the Func that launched them, and the mode each device API measured in.
//
// A back end captures the owner of a launch when it records it (tally_timeline_owner_now: the
// calling thread's run and current slot) and adds the interval once the device has completed it,
// wherever the runtime learns that anyway (a fence it waited for at a copy to the host or a sync,
// a submission reclaimed later, release). Owners are keyed by the pipeline record and slot, never
// dereferenced later, and tagged with the generation of tally_profiler_reset they belong to:
// intervals that complete after a reset are dropped, not billed to a new pipeline that happens
// to reuse the address.
//
// While a trace is recorded, the owner also carries the launch's flow id (trace.c), and each
// completed interval is recorded for the timeline's device track.
//
// Storage: a fixed open-addressed table of (pipeline, slot) totals under one mutex. Its lock is a
// leaf: nothing is called while it is held. An interval that finds the table full is counted as
// lost (the report prints the count; expected 0).

#include "internal.h"

#include <string.h>

#define TALLY_TIMELINE_ENTRIES 1024

typedef struct timeline_entry {
    const void *pipeline;  // NULL: free
    int32_t slot;
    uint64_t device_ns;
    uint64_t kernels;
} timeline_entry;

typedef struct timeline_pipeline {
    const void *pipeline;
    uint64_t busy_ns;
    uint64_t host_wait_ns;       // the runtime's device waits during its runs
    uint64_t first_ns, last_ns;  // host clock, calibrated intervals only
} timeline_pipeline;

static pthread_mutex_t timeline_lock = PTHREAD_MUTEX_INITIALIZER;
static timeline_entry entries[TALLY_TIMELINE_ENTRIES];
static timeline_pipeline pipelines[TALLY_TIMELINE_ENTRIES / 8];
static uint64_t problem_counts[TALLY_NUM_TIMELINE_PROBLEMS];
static int32_t api_mode[TALLY_TIMELINE_NUM_APIS];
static _Atomic uint32_t generation;

// The calling thread's run and slot, without recording anything.
static tally_timeline_owner current_owner(tally_context **ctx_out) {
    tally_timeline_owner o = {NULL, 0, 0, 0};
    tally_context *ctx = tally_get_current_context();
    if (ctx && ctx->instance && ctx->instance->pipeline) {
        o.pipeline = ctx->instance->pipeline;
        o.slot = atomic_load_explicit(&ctx->slot, memory_order_relaxed);
        o.generation = atomic_load_explicit(&generation, memory_order_relaxed);
    }
    *ctx_out = ctx;
    return o;
}

tally_timeline_owner tally_timeline_owner_now(void) {
    tally_context *ctx;
    tally_timeline_owner o = current_owner(&ctx);
    if (o.pipeline) {
        o.trace_flow = tally_trace_launch(ctx, o.slot);
    }
    return o;
}

int tally_timeline_owner_wants_timestamps(const tally_timeline_owner *o) {
    const tally_pipeline *p = (const tally_pipeline *)o->pipeline;
    return p && p->target && strstr(p->target, "profile_timestamps") != NULL;
}

static size_t hash_of(const void *pipeline, int32_t slot) {
    uint64_t h = (uint64_t)(uintptr_t)pipeline * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uint32_t)slot;
    return (size_t)(h ^ (h >> 29));
}

// The entry of (pipeline, slot), created if absent; NULL when the table is full. Lock held.
static timeline_entry *entry_locked(const void *pipeline, int32_t slot) {
    size_t i = hash_of(pipeline, slot) % TALLY_TIMELINE_ENTRIES;
    for (size_t n = 0; n < TALLY_TIMELINE_ENTRIES; n++, i = (i + 1) % TALLY_TIMELINE_ENTRIES) {
        timeline_entry *e = &entries[i];
        if (e->pipeline == pipeline && e->slot == slot) {
            return e;
        }
        if (!e->pipeline) {
            e->pipeline = pipeline;
            e->slot = slot;
            return e;
        }
    }
    return NULL;
}

static timeline_pipeline *pipeline_locked(const void *pipeline) {
    const size_t n = sizeof(pipelines) / sizeof(pipelines[0]);
    for (size_t i = 0; i < n; i++) {
        if (pipelines[i].pipeline == pipeline) {
            return &pipelines[i];
        }
        if (!pipelines[i].pipeline) {
            pipelines[i].pipeline = pipeline;
            return &pipelines[i];
        }
    }
    return NULL;
}

void tally_timeline_add(const tally_timeline_owner *o, uint64_t device_ns, int32_t calibrated,
                        uint64_t host_begin_ns) {
    if (!o->pipeline) {
        return;
    }
    tally_trace_device(o->pipeline, o->slot, o->trace_flow, device_ns, calibrated, host_begin_ns);
    pthread_mutex_lock(&timeline_lock);
    if (o->generation == atomic_load_explicit(&generation, memory_order_relaxed)) {
        timeline_entry *e = entry_locked(o->pipeline, o->slot);
        timeline_pipeline *p = pipeline_locked(o->pipeline);
        if (e && p) {
            e->device_ns += device_ns;
            e->kernels++;
            p->busy_ns += device_ns;
            if (calibrated) {
                uint64_t end = host_begin_ns + device_ns;
                p->first_ns =
                    p->first_ns && p->first_ns < host_begin_ns ? p->first_ns : host_begin_ns;
                p->last_ns = p->last_ns > end ? p->last_ns : end;
            }
        } else {
            problem_counts[TALLY_TIMELINE_LOST]++;
        }
    }
    pthread_mutex_unlock(&timeline_lock);
}

void tally_timeline_add_host_wait(uint64_t ns) {
    tally_context *ctx;
    tally_timeline_owner o = current_owner(&ctx);
    if (!o.pipeline || !tally_timeline_owner_wants_timestamps(&o)) {
        return;
    }
    pthread_mutex_lock(&timeline_lock);
    if (o.generation == atomic_load_explicit(&generation, memory_order_relaxed)) {
        timeline_pipeline *p = pipeline_locked(o.pipeline);
        if (p) {
            p->host_wait_ns += ns;
        }
    }
    pthread_mutex_unlock(&timeline_lock);
}

void tally_timeline_count_problem(int32_t problem) {
    if (problem < 0 || problem >= TALLY_NUM_TIMELINE_PROBLEMS) {
        return;
    }
    pthread_mutex_lock(&timeline_lock);
    problem_counts[problem]++;
    pthread_mutex_unlock(&timeline_lock);
}

void tally_timeline_set_mode(int32_t api, int32_t mode) {
    if (api < 0 || api >= TALLY_TIMELINE_NUM_APIS) {
        return;
    }
    pthread_mutex_lock(&timeline_lock);
    api_mode[api] = mode;
    pthread_mutex_unlock(&timeline_lock);
}

void tally_timeline_reset(void) {
    pthread_mutex_lock(&timeline_lock);
    atomic_fetch_add_explicit(&generation, 1, memory_order_relaxed);
    memset(entries, 0, sizeof(entries));
    memset(pipelines, 0, sizeof(pipelines));
    memset(problem_counts, 0, sizeof(problem_counts));
    pthread_mutex_unlock(&timeline_lock);
}

void tally_timeline_read(const void *pipeline, int32_t num_slots, uint64_t *slot_device_ns,
                         uint64_t *slot_kernels, tally_timeline_summary *out) {
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&timeline_lock);
    for (int32_t s = 0; s < num_slots; s++) {
        slot_device_ns[s] = 0;
        slot_kernels[s] = 0;
    }
    for (size_t i = 0; i < TALLY_TIMELINE_ENTRIES; i++) {
        const timeline_entry *e = &entries[i];
        if (e->pipeline == pipeline && e->slot >= 0 && e->slot < num_slots) {
            slot_device_ns[e->slot] += e->device_ns;
            slot_kernels[e->slot] += e->kernels;
            out->kernels += e->kernels;
        }
    }
    const size_t n = sizeof(pipelines) / sizeof(pipelines[0]);
    for (size_t i = 0; i < n; i++) {
        if (pipelines[i].pipeline == pipeline) {
            out->busy_ns = pipelines[i].busy_ns;
            out->host_wait_ns = pipelines[i].host_wait_ns;
            out->span_ns = pipelines[i].last_ns - pipelines[i].first_ns;
        }
    }
    for (int32_t k = 0; k < TALLY_NUM_TIMELINE_PROBLEMS; k++) {
        out->problems[k] = problem_counts[k];
    }
    for (int32_t a = 0; a < TALLY_TIMELINE_NUM_APIS; a++) {
        out->mode[a] = api_mode[a];
    }
    pthread_mutex_unlock(&timeline_lock);
}

const char *tally_timeline_mode_name(int32_t mode) {
    switch (mode) {
    case TALLY_TIMELINE_TIMESTAMPS_CALIBRATED:
        return "device timestamps, clock calibrated (VK_EXT_calibrated_timestamps, "
               "CLOCK_MONOTONIC)";
    case TALLY_TIMELINE_TIMESTAMPS:
        return "device timestamps (durations only: no host clock correlation)";
    case TALLY_TIMELINE_EVENTS:
        return "CUDA events (cuEventElapsedTime), anchored to the host clock at blocking points";
    case TALLY_TIMELINE_SYNC_FALLBACK:
        return "no device timestamps: fell back to a sync after each launch";
    default:
        return "unused";
    }
}
