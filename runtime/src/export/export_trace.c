// The timeline export: what the recorder (trace.c) holds, as Chrome Trace Event JSON (the object
// form, {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}), which Perfetto UI,
// chrome://tracing and speedscope open.
//
// What the file shows:
//   - one process (pid 1, 2, ... in the order the pipelines were first run) per pipeline: all
//     its runs, on the process's tracks;
//   - one track per host thread that worked in the pipeline (tid 1, 2, ...: the order threads
//     first recorded, the same tid in every pipeline), with an `X` slice per activation of a slot
//     (a Func, a copy slot, a one-time row): from the switch into it to the switch out of it.
//     Consecutive records of the same slot make one slice. A thread still in a slot when the
//     trace is written gets a slice up to that moment;
//   - one device track (tid TRACE_DEVICE_TID) with a slice per kernel and staged copy: placed by
//     device timestamps when the back end measured them on the host clock (profile_timestamps,
//     calibrated); otherwise from the host's view: from the launch to the end of the first
//     device wait that followed it (sync mode: the injected sync), each launch cut off at the
//     next launch that the same wait completed. Slices on the device track never overlap: one
//     that would start before the previous one ends starts at its end;
//   - a flow (`s` on the launching thread at the launch, `f` with "bp":"e" inside the device
//     slice, sharing cat, name and id: the v1 flow events of chrome://tracing and Perfetto's JSON
//     importer) from each launch to its device slice;
//   - counter tracks "heap" and "device memory" per pipeline (`C`, bytes live in its runs);
//   - `M` metadata naming every process and every thread a track uses.
// Timestamps are the profiler's clock (CLOCK_MONOTONIC's time base) in microseconds with three
// decimals (nanoseconds exactly: integers are formatted, no floating point is written).
// otherData says how many records were dropped (expected 0; a thread's ring keeps its newest
// TALLY_PROFILE_TRACE_EVENTS records).

#include "core/bytes.h"
#include "core/clock.h"
#include "core/error.h"
#include "export/export.h"
#include "profiler/trace.h"
#include "tally_runtime.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_DEVICE_TID TALLY_TRACE_MAX_THREADS + 1

typedef struct device_slice {
    int32_t pipe;
    uint64_t ts, dur;
    uint64_t flow;
    int32_t slot;
    int32_t timed;  // 1: device timestamps; 0: the host's view
} device_slice;

typedef struct launch_info {
    uint64_t ts;
    uint64_t flow;
    int32_t pipe, slot, tid;
    const tally_trace_event *device;  // its DEVICE record, or NULL
} launch_info;

// Times are written in microseconds with three decimals: nanoseconds exactly, as Perfetto's
// importer reads them. Readers that keep microseconds in doubles compute a slice's end from its
// ts and dur, and can land a rounding error past the ts of the slice that starts where it ends
// (10.3 + 0.3 > 10.6), and then nest every following slice inside it. speedscope also first
// subtracts the earliest ts of the track from every ts and computes the end as (ts - origin) +
// dur. So a slice's dur is written a few ns shorter where either sum would pass the next ts
// (checked with the same correctly rounded parse, in the C locale: tally_export_trace_format).
static void format_us(char *out, size_t size, uint64_t ns) {
    snprintf(out, size, "%llu.%03llu", (unsigned long long)(ns / 1000),
             (unsigned long long)(ns % 1000));
}

static void put_us(tally_bytes *b, uint64_t ns) {
    char s[32];
    format_us(s, sizeof(s), ns);
    tally_bytes_append(b, s, strlen(s));
}

// The dur of a slice [ts, ts + dur) on a track whose first slice starts at `origin`, as written:
// dur, or less by the nanoseconds that keep both ts + dur and (ts - origin) + dur, in doubles,
// at or before the end's own ts (at most a few, in practice 0 or 1).
static uint64_t written_dur(uint64_t ts, uint64_t dur, uint64_t origin) {
    char ts_s[32], dur_s[32], end_s[32], origin_s[32];
    format_us(ts_s, sizeof(ts_s), ts);
    format_us(end_s, sizeof(end_s), ts + dur);
    format_us(origin_s, sizeof(origin_s), origin);
    const double t = strtod(ts_s, NULL), end = strtod(end_s, NULL), o = strtod(origin_s, NULL);
    for (uint64_t d = dur; d > 0 && d + 8 > dur; d--) {
        format_us(dur_s, sizeof(dur_s), d);
        const double x = strtod(dur_s, NULL);
        if (t + x <= end && (t - o) + x <= end - o) {
            return d;
        }
    }
    return dur > 8 ? dur - 8 : 0;
}

static const char *slot_name(const tally_trace_pipeline_names *p, int32_t slot) {
    if (slot >= 0 && slot < p->num_slots) {
        return p->slot_names[slot];
    }
    if (slot == p->num_slots + TALLY_ONE_TIME_DEVICE_INIT) {
        return "device init (one-time)";
    }
    if (slot == p->num_slots + TALLY_ONE_TIME_COMPILE) {
        return "kernel compilation (one-time)";
    }
    return "unknown slot";
}

static const char *slot_category(const tally_trace_pipeline_names *p, int32_t slot) {
    if (slot < 0 || slot >= p->num_slots) {
        return "one-time";
    }
    return p->slot_kinds[slot] == TALLY_SLOT_COPY_TO_DEVICE ? "copy_to_device"
           : p->slot_kinds[slot] == TALLY_SLOT_COPY_TO_HOST ? "copy_to_host"
                                                            : "func";
}

static const char *device_track_name(int32_t device_api) {
    switch (device_api) {
    case TALLY_DEVICE_API_VULKAN:
        return "Vulkan queue";
    case TALLY_DEVICE_API_CUDA:
        return "CUDA stream";
    case TALLY_DEVICE_API_OPENCL:
        return "OpenCL queue";
    default:
        return "device queue";
    }
}

static void begin_event(tally_bytes *b, int *first, char ph, int32_t pid, int32_t tid) {
    tally_bytes_printf(b, "%s\n{\"ph\":\"%c\",\"pid\":%d,\"tid\":%d", *first ? "" : ",", ph,
                       (int)pid, (int)tid);
    *first = 0;
}

// A slice on a track whose first slice's ts is *origin (UINT64_MAX: this is the first).
static void put_slice(tally_bytes *b, int *first, int32_t pid, int32_t tid, uint64_t *origin,
                      uint64_t ts, uint64_t dur, const char *name, const char *cat) {
    if (*origin == UINT64_MAX || ts < *origin) {
        *origin = ts;
    }
    begin_event(b, first, 'X', pid, tid);
    tally_bytes_printf(b, ",\"ts\":");
    put_us(b, ts);
    tally_bytes_printf(b, ",\"dur\":");
    put_us(b, written_dur(ts, dur, *origin));
    tally_bytes_printf(b, ",\"name\":");
    tally_bytes_json_string(b, name);
    tally_bytes_printf(b, ",\"cat\":\"%s\"}", cat);
}

static void put_flow(tally_bytes *b, int *first, char ph, int32_t pid, int32_t tid, uint64_t ts,
                     uint64_t flow) {
    begin_event(b, first, ph, pid, tid);
    tally_bytes_printf(b, ",\"ts\":");
    put_us(b, ts);
    tally_bytes_printf(b, ",\"name\":\"launch\",\"cat\":\"launch\",\"id\":%llu%s}",
                       (unsigned long long)flow, ph == 'f' ? ",\"bp\":\"e\"" : "");
}

static void put_name(tally_bytes *b, int *first, const char *what, int32_t pid, int32_t tid,
                     const char *name) {
    begin_event(b, first, 'M', pid, tid);
    tally_bytes_printf(b, ",\"name\":\"%s\",\"args\":{\"name\":", what);
    tally_bytes_json_string(b, name);
    tally_bytes_printf(b, "}}");
}

static int compare_launches(const void *x, const void *y) {
    const launch_info *a = (const launch_info *)x, *b = (const launch_info *)y;
    if (a->pipe != b->pipe) {
        return a->pipe < b->pipe ? -1 : 1;
    }
    if (a->ts != b->ts) {
        return a->ts < b->ts ? -1 : 1;
    }
    return a->flow < b->flow ? -1 : a->flow > b->flow;
}

static int compare_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static int compare_done(const void *x, const void *y) {
    const tally_trace_event *a = *(const tally_trace_event *const *)x;
    const tally_trace_event *b = *(const tally_trace_event *const *)y;
    return a->a < b->a ? -1 : a->a > b->a;
}

// The DEVICE record of `flow` in done (sorted by flow), or NULL.
static const tally_trace_event *find_done(const tally_trace_event **done, size_t n, uint64_t flow) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (done[mid]->a < flow) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < n && done[lo]->a == flow ? done[lo] : NULL;
}

// Whether `flow` is among flows[0..n) (sorted).
static int has_flow(const uint64_t *flows, size_t n, uint64_t flow) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (flows[mid] < flow) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < n && flows[lo] == flow;
}

static int compare_device(const void *x, const void *y) {
    const device_slice *a = (const device_slice *)x, *b = (const device_slice *)y;
    if (a->pipe != b->pipe) {
        return a->pipe < b->pipe ? -1 : 1;
    }
    if (a->ts != b->ts) {
        return a->ts < b->ts ? -1 : 1;
    }
    return a->flow < b->flow ? -1 : a->flow > b->flow;
}

// The first wait end at or after t (ends sorted), or 0.
static uint64_t wait_end_after(const uint64_t *ends, size_t n, uint64_t t) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ends[mid] < t) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < n ? ends[lo] : 0;
}

// The device slices of the snapshot's launches, sorted by pipeline and start (*out, *n).
static int32_t device_slices(const tally_trace_snapshot *s, device_slice **out, size_t *num) {
    size_t nl = 0, nw = 0, nd = 0;
    for (size_t i = 0; i < s->num_events; i++) {
        nl += s->events[i].kind == TALLY_TRACE_LAUNCH;
        nw += s->events[i].kind == TALLY_TRACE_WAIT;
        nd += s->events[i].kind == TALLY_TRACE_DEVICE;
    }
    launch_info *launches = (launch_info *)calloc(nl + 1, sizeof(launch_info));
    uint64_t *ends = (uint64_t *)calloc(nw + 1, sizeof(uint64_t));
    const tally_trace_event **done =
        (const tally_trace_event **)calloc(nd + 1, sizeof(tally_trace_event *));
    device_slice *slices = (device_slice *)calloc(nl + 1, sizeof(device_slice));
    if (!launches || !ends || !done || !slices) {
        free(launches);
        free(ends);
        free(done);
        free(slices);
        return TALLY_ERROR_OUT_OF_MEMORY;
    }
    nl = nw = nd = 0;
    for (size_t i = 0; i < s->num_events; i++) {
        const tally_trace_event *e = &s->events[i];
        if (e->kind == TALLY_TRACE_LAUNCH) {
            launch_info *l = &launches[nl++];
            l->ts = e->ts;
            l->flow = e->a;
            l->pipe = e->pipe;
            l->slot = e->slot;
            l->tid = e->tid;
        } else if (e->kind == TALLY_TRACE_WAIT) {
            ends[nw++] = e->ts;
        } else if (e->kind == TALLY_TRACE_DEVICE) {
            done[nd++] = e;
        }
    }
    qsort(ends, nw, sizeof(uint64_t), compare_u64);
    qsort(launches, nl, sizeof(launch_info), compare_launches);
    // Flow ids are unique: match completions to launches through the completions sorted by flow.
    qsort(done, nd, sizeof(done[0]), compare_done);
    for (size_t l = 0; l < nl; l++) {
        launches[l].device = find_done(done, nd, launches[l].flow);
    }
    size_t n = 0;
    for (size_t l = 0; l < nl; l++) {
        const launch_info *li = &launches[l];
        device_slice *d = &slices[n];
        d->pipe = li->pipe;
        d->flow = li->flow;
        d->slot = li->slot;
        if (li->device && (li->device->b >> 63)) {
            d->ts = li->device->ts;
            d->dur = li->device->b & ~(1ull << 63);
            d->timed = 1;
            n++;
            continue;
        }
        // The host's view: the launch to the first wait after it, cut at the next launch of the
        // pipeline that the same wait completed.
        uint64_t end = wait_end_after(ends, nw, li->ts);
        if (!end) {
            continue;  // nothing waited for it yet: no device slice, and no flow
        }
        if (l + 1 < nl && launches[l + 1].pipe == li->pipe && launches[l + 1].ts < end) {
            end = launches[l + 1].ts;
        }
        d->ts = li->ts;
        d->dur = end - li->ts;
        if (li->device) {  // a measured duration without a host clock: within the window
            uint64_t measured = li->device->b & ~(1ull << 63);
            d->dur = measured < d->dur ? measured : d->dur;
            d->timed = 1;
        }
        n++;
    }
    qsort(slices, n, sizeof(device_slice), compare_device);
    for (size_t i = 1; i < n; i++) {
        if (slices[i].pipe == slices[i - 1].pipe) {
            uint64_t prev_end = slices[i - 1].ts + slices[i - 1].dur;
            if (slices[i].ts < prev_end) {
                uint64_t end = slices[i].ts + slices[i].dur;
                slices[i].ts = prev_end;
                slices[i].dur = end > prev_end ? end - prev_end : 0;
            }
        }
    }
    free(launches);
    free(ends);
    free(done);
    *out = slices;
    *num = n;
    return 0;
}

static int32_t format_trace(const tally_trace_snapshot *s, uint64_t now, tally_bytes *b) {
    // pid of each pipe: 1, 2, ... for pipes with records, in pipe order.
    int32_t *pid = (int32_t *)calloc((size_t)s->num_pipelines + 1, sizeof(int32_t));
    // used[(pipe) * (max_tid + 1) + tid]: the pipe's process has a track for tid.
    size_t width = (size_t)s->max_tid + 1;
    unsigned char *used = (unsigned char *)calloc(((size_t)s->num_pipelines + 1) * width, 1);
    // origin[(pipe) * (max_tid + 2) + tid]: the ts of the track's first slice (tid max_tid + 1:
    // the pipe's device track).
    const size_t tracks = ((size_t)s->num_pipelines + 1) * (width + 1);
    uint64_t *origin = (uint64_t *)malloc(tracks * sizeof(uint64_t));
    for (size_t t = 0; origin && t < tracks; t++) {
        origin[t] = UINT64_MAX;
    }
    device_slice *dev = NULL;
    size_t ndev = 0;
    int32_t r = pid && used && origin ? device_slices(s, &dev, &ndev) : TALLY_ERROR_OUT_OF_MEMORY;
    // The flows that reach a device slice (only those get a flow start).
    uint64_t *flows = r == 0 ? (uint64_t *)calloc(ndev + 1, sizeof(uint64_t)) : NULL;
    if (r == 0 && !flows) {
        r = TALLY_ERROR_OUT_OF_MEMORY;
    }
    if (r != 0) {
        free(dev);
        free(pid);
        free(used);
        free(origin);
        return r;
    }
    for (size_t d = 0; d < ndev; d++) {
        flows[d] = dev[d].flow;
    }
    qsort(flows, ndev, sizeof(uint64_t), compare_u64);
    for (size_t i = 0; i < s->num_events; i++) {
        const tally_trace_event *e = &s->events[i];
        if (e->pipe > 0 && e->pipe <= s->num_pipelines) {
            pid[e->pipe] = 1;
        }
    }
    int32_t next_pid = 0;
    for (int32_t p = 1; p <= s->num_pipelines; p++) {
        pid[p] = pid[p] ? ++next_pid : 0;
    }

    tally_bytes_printf(b, "{\"traceEvents\":[");
    int first = 1;
    // Host slices, launches and memory counters, thread by thread in record order.
    int32_t cur_pipe = 0, cur_slot = 0, cur_tid = -1;
    uint64_t cur_ts = 0;
    for (size_t i = 0; i <= s->num_events; i++) {
        const tally_trace_event *e = i < s->num_events ? &s->events[i] : NULL;
        int new_thread = !e || e->tid != cur_tid;
        int is_state = e && e->kind == TALLY_TRACE_STATE;
        if (cur_pipe &&
            (new_thread || (is_state && (e->pipe != cur_pipe || e->slot != cur_slot)))) {
            uint64_t end = new_thread ? now : e->ts;
            const tally_trace_pipeline_names *p = &s->pipelines[cur_pipe - 1];
            put_slice(b, &first, pid[cur_pipe], cur_tid,
                      &origin[(size_t)cur_pipe * (width + 1) + (size_t)cur_tid], cur_ts,
                      end > cur_ts ? end - cur_ts : 0, slot_name(p, cur_slot),
                      slot_category(p, cur_slot));
            used[(size_t)cur_pipe * width + (size_t)cur_tid] = 1;
            cur_pipe = 0;
        }
        if (!e) {
            break;
        }
        cur_tid = e->tid;
        if (is_state) {
            if (e->pipe != cur_pipe || e->slot != cur_slot || !cur_pipe) {
                cur_ts = e->ts;
            }
            cur_pipe = e->pipe > 0 && e->pipe <= s->num_pipelines ? e->pipe : 0;
            cur_slot = e->slot;
        } else if (e->kind == TALLY_TRACE_LAUNCH && e->pipe > 0 && e->pipe <= s->num_pipelines &&
                   has_flow(flows, ndev, e->a)) {
            put_flow(b, &first, 's', pid[e->pipe], e->tid, e->ts, e->a);
            used[(size_t)e->pipe * width + (size_t)e->tid] = 1;
        } else if (e->kind == TALLY_TRACE_MEMORY && e->pipe > 0 && e->pipe <= s->num_pipelines) {
            begin_event(b, &first, 'C', pid[e->pipe], e->tid);
            tally_bytes_printf(b, ",\"ts\":");
            put_us(b, e->ts);
            tally_bytes_printf(b, ",\"name\":\"%s\",\"args\":{\"bytes\":%lld}}",
                               e->slot == TALLY_MEMORY_DEVICE ? "device memory" : "heap",
                               (long long)(int64_t)e->a);
            used[(size_t)e->pipe * width + (size_t)e->tid] = 1;
        }
    }
    // The device tracks: each slice, then the end of its flow inside it.
    for (size_t d = 0; d < ndev; d++) {
        const device_slice *ds = &dev[d];
        const tally_trace_pipeline_names *p = &s->pipelines[ds->pipe - 1];
        put_slice(b, &first, pid[ds->pipe], TRACE_DEVICE_TID,
                  &origin[(size_t)ds->pipe * (width + 1) + width], ds->ts, ds->dur,
                  slot_name(p, ds->slot), ds->timed ? "device" : "device (host view)");
        put_flow(b, &first, 'f', pid[ds->pipe], TRACE_DEVICE_TID, ds->ts + ds->dur / 2, ds->flow);
    }
    // Names: every process, every host thread track, every device track.
    for (int32_t pp = 1; pp <= s->num_pipelines; pp++) {
        if (!pid[pp]) {
            continue;
        }
        const tally_trace_pipeline_names *p = &s->pipelines[pp - 1];
        put_name(b, &first, "process_name", pid[pp], 0, p->name);
        begin_event(b, &first, 'M', pid[pp], 0);
        tally_bytes_printf(b, ",\"name\":\"process_labels\",\"args\":{\"labels\":");
        tally_bytes_json_string(b, p->target);
        tally_bytes_printf(b, "}}");
        for (int32_t tid = 1; tid <= s->max_tid; tid++) {
            if (used[(size_t)pp * width + (size_t)tid]) {
                char name[32];
                snprintf(name, sizeof name, "host thread %d", (int)tid);
                put_name(b, &first, "thread_name", pid[pp], tid, name);
            }
        }
        for (size_t d = 0; d < ndev; d++) {
            if (dev[d].pipe == pp) {
                put_name(b, &first, "thread_name", pid[pp], TRACE_DEVICE_TID,
                         device_track_name(p->device_api));
                break;
            }
        }
    }
    tally_bytes_printf(b,
                       "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"producer\":\"tally\","
                       "\"clock\":");
    tally_bytes_json_string(b, tally_clock_name());
    tally_bytes_printf(b,
                       ",\"dropped_events\":%llu,\"ring_events_per_thread\":%u,"
                       "\"host_threads\":%d}}\n",
                       (unsigned long long)s->dropped, (unsigned)s->capacity, (int)s->max_tid);
    free(flows);
    free(dev);
    free(pid);
    free(used);
    free(origin);
    return b->failed ? TALLY_ERROR_OUT_OF_MEMORY : 0;
}

int32_t tally_export_trace_format(char **out, size_t *out_len) {
    uint64_t now = tally_now_ns();
    tally_trace_snapshot s;
    int32_t r = tally_trace_snapshot_take(&s);
    if (r != 0) {
        return r;
    }
    tally_bytes b = {0};
    // written_dur parses numbers as a JSON reader does: '.' is the decimal point whatever the
    // process's locale says.
    locale_t c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t previous = c_numeric ? uselocale(c_numeric) : (locale_t)0;
    r = format_trace(&s, now, &b);
    if (c_numeric) {
        uselocale(previous);
        freelocale(c_numeric);
    }
    tally_trace_snapshot_free(&s);
    if (r != 0) {
        tally_bytes_free(&b);
        return r;
    }
    *out = b.data;
    *out_len = b.len;
    return 0;
}

int32_t tally_profiler_write_trace(void *user_context, const char *path) {
    if (!path || !*path) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "tally_profiler_write_trace: no path");
    }
    char *json = NULL;
    size_t len = 0;
    int32_t r = tally_export_trace_format(&json, &len);
    if (r != 0) {
        return tally_report_error(
            user_context, r, "tally profiler: out of memory formatting the trace for %s", path);
    }
    r = tally_export_write_file(user_context, path, json, len, "trace");
    free(json);
    return r;
}

int32_t tally_profiler_trace_record(void *user_context, int32_t on, uint64_t events_per_thread) {
    if (events_per_thread && tally_trace_set_capacity(events_per_thread) != 0) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "tally_profiler_trace_record: %llu events per thread is out of "
                                  "range",
                                  (unsigned long long)events_per_thread);
    }
    tally_trace_set_recording(on);
    return 0;
}
