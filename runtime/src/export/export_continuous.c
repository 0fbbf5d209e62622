// Continuous profiling for long-running processes: pprof windows.
//
// tally_profiler_write_pprof_window writes what changed since the previous window: the snapshot
// of now minus the one kept from the last call (runs, wall time, samples, and per slot time,
// samples, allocations, bytes and copies; peaks and current memory are not additive and stay as
// they are now). A pipeline is matched to its previous numbers by registration index, name and
// slot count; one that does not match (new, or the registry was reset) counts from zero.
//
// TALLY_PROFILE_PPROF_EVERY=<seconds> (with TALLY_PROFILE_PPROF=<path>) starts, on the first
// profiled run, a thread that writes a window every <seconds> to <path>.<n> (n = 0, 1, ...) and
// deletes <path>.<n - keep>, keep = TALLY_PROFILE_PPROF_KEEP (default 8): disk use is bounded by
// keep files, memory by one snapshot. Each file is written under a temporary name and renamed, so
// a crash loses at most the window being measured. Runs sample (the mode becomes sampling unless
// TALLY_PROFILE_MODE is set) and, unless TALLY_PROFILE_INTERVAL_US is set, the sampling interval
// becomes TALLY_CONTINUOUS_INTERVAL_US (100 Hz). At exit the thread is stopped
// and the last, partial window written; a forked child does not inherit the thread and writes
// nothing.

#include "core/env.h"
#include "core/error.h"
#include "core/fault.h"
#include "export/export.h"
#include "tally_runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TALLY_CONTINUOUS_INTERVAL_US 10000
#define TALLY_CONTINUOUS_DEFAULT_KEEP 8

// ---- windows ----------------------------------------------------------------------------

typedef struct previous_pipeline {
    char *name;
    int32_t num_slots;
    tally_pipeline_stats stats;
    tally_slot_stats *slots;
} previous_pipeline;

static pthread_mutex_t window_lock = PTHREAD_MUTEX_INITIALIZER;
static previous_pipeline *previous;
static int32_t num_previous;

static uint64_t minus(uint64_t now, uint64_t before) {
    return now >= before ? now - before : now;
}

static void subtract_memory(tally_memory_stats *now, const tally_memory_stats *before) {
    now->num_allocs = minus(now->num_allocs, before->num_allocs);
    now->total_bytes = minus(now->total_bytes, before->total_bytes);
}

// Turns `snap` into the window since `before` (the previous window's end).
static void subtract(tally_export_snapshot *snap, const previous_pipeline *before, int32_t n) {
    for (int32_t i = 0; i < snap->num_pipelines && i < n; i++) {
        tally_export_pipeline *p = &snap->pipelines[i];
        const previous_pipeline *q = &before[i];
        if (p->stats.num_slots != q->num_slots || strcmp(p->stats.name, q->name) != 0) {
            continue;
        }
        p->stats.runs = minus(p->stats.runs, q->stats.runs);
        p->stats.total_ns = minus(p->stats.total_ns, q->stats.total_ns);
        p->stats.samples = minus(p->stats.samples, q->stats.samples);
        for (int32_t s = 0; s < p->stats.num_slots; s++) {
            tally_slot_stats *now = &p->slots[s].stats;
            const tally_slot_stats *then = &q->slots[s];
            now->time_ns = minus(now->time_ns, then->time_ns);
            now->samples = minus(now->samples, then->samples);
            now->copies = minus(now->copies, then->copies);
            now->copy_bytes = minus(now->copy_bytes, then->copy_bytes);
            subtract_memory(&now->heap, &then->heap);
            subtract_memory(&now->device, &then->device);
        }
    }
}

static void free_pipelines(previous_pipeline *list, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        free(list[i].name);
        free(list[i].slots);
    }
    free(list);
}

// A copy of the snapshot's numbers, to subtract at the next window; NULL (*n = 0) if memory ran
// out: the next window then counts from zero, over-reporting once rather than losing data.
static previous_pipeline *copy_snapshot(const tally_export_snapshot *snap, int32_t *n) {
    *n = 0;
    previous_pipeline *list =
        (previous_pipeline *)calloc((size_t)snap->num_pipelines + 1, sizeof(*list));
    for (int32_t i = 0; list && i < snap->num_pipelines; i++) {
        const tally_export_pipeline *p = &snap->pipelines[i];
        previous_pipeline *q = &list[i];
        *n = i + 1;
        q->name = (char *)malloc(strlen(p->stats.name) + 1);
        q->slots = (tally_slot_stats *)calloc((size_t)p->stats.num_slots + 1, sizeof(*q->slots));
        if (!q->name || !q->slots) {
            free_pipelines(list, *n);
            *n = 0;
            return NULL;
        }
        strcpy(q->name, p->stats.name);
        q->num_slots = p->stats.num_slots;
        q->stats = p->stats;
        for (int32_t s = 0; s < p->stats.num_slots; s++) {
            q->slots[s] = p->slots[s].stats;
        }
    }
    return list;
}

int32_t tally_profiler_write_pprof_window(void *user_context, const char *path) {
    if (!path || !*path) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "tally_profiler_write_pprof_window: no path");
    }
    pthread_mutex_lock(&window_lock);
    tally_export_snapshot snap;
    int32_t r = tally_export_snapshot_take(&snap);
    if (r != 0) {
        pthread_mutex_unlock(&window_lock);
        return tally_report_error(
            user_context, r, "tally profiler: out of memory taking a pprof window for %s", path);
    }
    int32_t n;
    previous_pipeline *now = copy_snapshot(&snap, &n);
    subtract(&snap, previous, num_previous);
    free_pipelines(previous, num_previous);
    previous = now;
    num_previous = n;
    pthread_mutex_unlock(&window_lock);

    uint8_t *bytes = NULL;
    size_t len = 0;
    r = tally_export_pprof_encode(&snap, &bytes, &len);
    tally_export_snapshot_free(&snap);
    if (r != 0) {
        return tally_report_error(user_context, r,
                                  "tally profiler: cannot encode the pprof window for %s (%s)",
                                  path, tally_error_code_name(r));
    }
    r = tally_export_write_file(user_context, path, bytes, len, "pprof window");
    free(bytes);
    return r;
}

// ---- the writer thread ------------------------------------------------------------------

static pthread_once_t writer_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t writer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t writer_wake;
static pthread_t writer_thread;
static int writer_running;  // the thread was started and not yet joined
static int writer_stop;     // guarded by writer_lock
static char *writer_path;
static uint64_t writer_period_ns;
static uint64_t writer_keep;
static uint64_t writer_seq;

static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// Writes <path>.<seq> and deletes the file `keep` windows older.
static void write_next_window(void) {
    size_t size = strlen(writer_path) + 32;
    char *name = (char *)malloc(size);
    if (!name) {
        return;
    }
    snprintf(name, size, "%s.%llu", writer_path, (unsigned long long)writer_seq);
    tally_profiler_write_pprof_window(NULL, name);
    if (writer_seq >= writer_keep) {
        snprintf(name, size, "%s.%llu", writer_path,
                 (unsigned long long)(writer_seq - writer_keep));
        remove(name);
    }
    writer_seq++;
    free(name);
}

static void *writer_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&writer_lock);
    uint64_t deadline = monotonic_ns() + writer_period_ns;
    while (!writer_stop) {
        struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
        pthread_cond_timedwait(&writer_wake, &writer_lock, &ts);
        uint64_t now = monotonic_ns();
        if (writer_stop || now < deadline) {
            continue;
        }
        pthread_mutex_unlock(&writer_lock);
        write_next_window();
        pthread_mutex_lock(&writer_lock);
        deadline += writer_period_ns;
        if (deadline <= now) {  // fell behind (a slow disk): skip the missed windows
            deadline = now + writer_period_ns;
        }
    }
    pthread_mutex_unlock(&writer_lock);
    return NULL;
}

static void start_writer(void) {
    const double seconds =
        tally_env_double("TALLY_PROFILE_PPROF_EVERY", 0, 1e6, 0, "no continuous profiling");
    if (seconds == 0) {
        return;
    }
    const char *path = tally_env_string("TALLY_PROFILE_PPROF");
    if (!path) {
        tally_env_reject("TALLY_PROFILE_PPROF_EVERY", tally_env_string("TALLY_PROFILE_PPROF_EVERY"),
                         "TALLY_PROFILE_PPROF=<path> beside it, to name the files",
                         "no continuous profiling");
        return;
    }
    char instead[48];
    snprintf(instead, sizeof instead, "%d, the default", (int)TALLY_CONTINUOUS_DEFAULT_KEEP);
    writer_keep = (uint64_t)tally_env_int("TALLY_PROFILE_PPROF_KEEP", 1, 1000000,
                                          TALLY_CONTINUOUS_DEFAULT_KEEP, instead);
    writer_path = (char *)malloc(strlen(path) + 1);
    if (!writer_path) {
        return;
    }
    strcpy(writer_path, path);
    writer_period_ns = (uint64_t)(seconds * 1e9);
    if (!tally_env_string("TALLY_PROFILE_INTERVAL_US")) {
        tally_profiler_set_interval_us(TALLY_CONTINUOUS_INTERVAL_US);
    }
    // Continuous profiling samples at a low rate (its cost is the sampler's wakeups, not a clock
    // read per switch), unless TALLY_PROFILE_MODE asks for another mode.
    if (!tally_env_string("TALLY_PROFILE_MODE")) {
        tally_profiler_set_default_mode(TALLY_PROFILER_FLAG_SAMPLING);
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&writer_wake, &attr);
    pthread_condattr_destroy(&attr);
    if (tally_thread_create(&writer_thread, writer_main, NULL) != 0) {
        tally_report_error(NULL, TALLY_ERROR_THREAD_START_FAILED,
                           "tally profiler: cannot start the continuous pprof writer");
        return;
    }
    writer_running = 1;
}

void tally_export_continuous_start(void) {
    pthread_once(&writer_once, start_writer);
}

void tally_export_continuous_stop(void) {
    if (!writer_running) {
        return;
    }
    pthread_mutex_lock(&writer_lock);
    writer_stop = 1;
    pthread_cond_signal(&writer_wake);
    pthread_mutex_unlock(&writer_lock);
    pthread_join(writer_thread, NULL);
    writer_running = 0;
    write_next_window();  // the last, partial window
}

void tally_export_continuous_fork_child(void) {
    // The writer thread does not exist in the child, and either lock may have been held by it.
    writer_running = 0;
    pthread_mutex_init(&writer_lock, NULL);
    pthread_mutex_init(&window_lock, NULL);
}
