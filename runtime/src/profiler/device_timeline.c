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
//
// Clock correlation (tally_timeline_clock_*): a back end places device intervals on the host clock
// through paired readings of both clocks. Each pairing is the tightest of several readings (a
// reading's deviation bounds how far off its host time may be; scheduling and driver latency make
// some readings much looser than others, so the smallest is kept, as Vulkan's maxDeviation
// advises). Pairings are repeated (per run on Vulkan, per blocking point on CUDA); the first kept
// pairing is the base of a drift fit: once the newest lies at least TALLY_CLOCK_FIT_MIN_NS past it
// on the device clock, the rate is the host span over the device span, so the clocks may run at
// rates a little apart (crystal drift: tens of ppm) without the placement wandering between
// pairings. A fitted rate further than TALLY_CLOCK_MAX_DRIFT from 1 is not believed (a clock was
// stepped, or a reading was wrong): the previous rate stays. Device times map from the newest
// pairing. The maps live under their own leaf lock and survive tally_profiler_reset (they describe
// devices, not runs); a back end forgets its map when it releases its device.

#include "profiler/device_timeline.h"
#include "core/context.h"
#include "profiler/run.h"
#include "profiler/trace.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include <pthread.h>
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

#define TALLY_CLOCK_FIT_MIN_NS 1e9
#define TALLY_CLOCK_MAX_DRIFT 1e-3

typedef struct clock_map {
    int32_t pairings, readings;
    tally_clock_reading base, last;
    double rate;  // host ns per device ns
} clock_map;

static pthread_mutex_t clock_lock = PTHREAD_MUTEX_INITIALIZER;
static clock_map clocks[TALLY_TIMELINE_NUM_APIS];

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
    return p && (p->device_flags & TALLY_PROFILER_FLAG_TIMESTAMPS) != 0;
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
        return "device timestamps, clock calibrated (paired readings of the device and host "
               "clocks, drift fitted)";
    case TALLY_TIMELINE_TIMESTAMPS:
        return "device timestamps (durations only: no host clock correlation)";
    case TALLY_TIMELINE_EVENTS:
        return "CUDA events (cuEventElapsedTime), correlated with the host clock by paired "
               "readings at blocking points";
    case TALLY_TIMELINE_SYNC_FALLBACK:
        return "no device timestamps: fell back to a sync after each launch";
    default:
        return "unused";
    }
}

// ---- clock correlation
// ---------------------------------------------------------------------------

int32_t tally_timeline_clock_pair(int32_t api, const tally_clock_reading *readings, int32_t n) {
    if (api < 0 || api >= TALLY_TIMELINE_NUM_APIS || n <= 0) {
        return -1;
    }
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (readings[i].deviation_ns < readings[best].deviation_ns) {
            best = i;
        }
    }
    const tally_clock_reading *r = &readings[best];
    pthread_mutex_lock(&clock_lock);
    clock_map *m = &clocks[api];
    m->readings += n;
    if (m->pairings++ == 0) {
        m->base = *r;
        m->rate = 1.0;
    } else {
        double device_span = r->device_ns - m->base.device_ns;
        if (device_span >= TALLY_CLOCK_FIT_MIN_NS) {
            double rate = ((double)r->host_ns - (double)m->base.host_ns) / device_span;
            if (rate > 1.0 - TALLY_CLOCK_MAX_DRIFT && rate < 1.0 + TALLY_CLOCK_MAX_DRIFT) {
                m->rate = rate;
            }
        }
    }
    m->last = *r;
    pthread_mutex_unlock(&clock_lock);
    return best;
}

int32_t tally_timeline_clock_to_host(int32_t api, double device_ns, uint64_t *host_ns) {
    if (api < 0 || api >= TALLY_TIMELINE_NUM_APIS) {
        return 0;
    }
    pthread_mutex_lock(&clock_lock);
    const clock_map *m = &clocks[api];
    int32_t ok = m->pairings > 0;
    double host = ok ? (double)m->last.host_ns + (device_ns - m->last.device_ns) * m->rate : 0;
    pthread_mutex_unlock(&clock_lock);
    ok = ok && host > 0;
    *host_ns = ok ? (uint64_t)(host + 0.5) : 0;
    return ok;
}

void tally_timeline_clock_forget(int32_t api) {
    if (api < 0 || api >= TALLY_TIMELINE_NUM_APIS) {
        return;
    }
    pthread_mutex_lock(&clock_lock);
    memset(&clocks[api], 0, sizeof(clocks[api]));
    pthread_mutex_unlock(&clock_lock);
}

int32_t tally_testing_get_device_clock(int32_t device_api, tally_testing_device_clock *out) {
    if (!out || device_api < 0 || device_api >= TALLY_TIMELINE_NUM_APIS) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    pthread_mutex_lock(&clock_lock);
    const clock_map *m = &clocks[device_api];
    out->pairings = m->pairings;
    out->readings = m->readings;
    out->device_ns = m->last.device_ns;
    out->host_ns = m->last.host_ns;
    out->deviation_ns = m->last.deviation_ns;
    out->rate = m->pairings ? m->rate : 0.0;
    pthread_mutex_unlock(&clock_lock);
    return 0;
}
