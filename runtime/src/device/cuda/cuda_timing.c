// Command timing (profile_timestamps): a launch or a copy made while a profile_timestamps run is
// current is bracketed by two events recorded on the stream. The pairs are read at the next
// blocking point (a copy to the host, a sync, release), where the stream is idle anyway:
// cuEventElapsedTime gives each command's duration, billed to the slot that issued it (a kernel
// to its Func, a copy to its copy slot).
//
// Placing commands on the host clock: events have no absolute time, only differences, so the
// device clock here is the time since an anchor event. The first timed command records the
// anchor (device time 0) ahead of its own events. At each blocking point with timed commands the
// clocks are paired (pair_clocks_locked): TALLY_CUDA_CLOCK_READINGS times, read the host clock,
// record an event, cuEventSynchronize it, read the host clock again; the event completed inside
// that window, so the reading is its midpoint with half the window as deviation, and
// device_timeline.c keeps the tightest and fits the drift across pairings. A command's begin is
// then anchor time + cuEventElapsedTime(anchor, begin), mapped to the host clock; the kept event
// becomes the next anchor, so elapsed times stay short (float milliseconds). The stream is idle
// at a blocking point, so these syncs wait for nothing but the event itself.
//
// Events are pooled. Without the event entry points nothing is timed (the shared launch path,
// device_launch.c, follows each launch by a stream sync instead, counted as a timestamp_fallback
// wait); without cuEventSynchronize, commands are timed as durations only. All of it runs with
// the context pushed; timing_lock guards the lists.

#include "core/clock.h"
#include "device/cuda/cuda_internal.h"
#include "profiler/device_timeline.h"
#include "tally_runtime.h"

#include <stdlib.h>

#define TALLY_CUDA_CLOCK_READINGS 3

typedef struct cuda_timed_command {
    CUevent begin, end;
    tally_timeline_owner owner;
} cuda_timed_command;

static pthread_mutex_t timing_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_timed_command *timed;  // commands not read yet
static int32_t num_timed, cap_timed;
static CUevent *free_events;
static int32_t num_free_events, cap_free_events;
static CUevent anchor;  // NULL: none yet (no timed command since initialization)
static double anchor_device_ns;

int tally_cuda_has_events(void) {
    return tally_cu.EventCreate && tally_cu.EventDestroy && tally_cu.EventRecord &&
           tally_cu.EventElapsedTime;
}

// An event from the pool, or a new one; NULL on failure. timing_lock held.
static CUevent take_event_locked(void) {
    if (num_free_events > 0) {
        return free_events[--num_free_events];
    }
    CUevent e = NULL;
    return tally_cu.EventCreate(&e, CU_EVENT_DEFAULT) == CUDA_SUCCESS ? e : NULL;
}

static void give_event_locked(CUevent e) {
    if (!e) {
        return;
    }
    if (num_free_events == cap_free_events) {
        int32_t cap = cap_free_events ? 2 * cap_free_events : 64;
        CUevent *grown = (CUevent *)realloc(free_events, (size_t)cap * sizeof(CUevent));
        if (!grown) {
            tally_cu.EventDestroy(e);
            return;
        }
        free_events = grown;
        cap_free_events = cap;
    }
    free_events[num_free_events++] = e;
}

// The first time, the anchor is recorded first.
void tally_cuda_begin_timed(CUevent *begin) {
    pthread_mutex_lock(&timing_lock);
    if (!anchor) {
        anchor = take_event_locked();
        if (anchor && tally_cu.EventRecord(anchor, tally_cuda.stream) != CUDA_SUCCESS) {
            give_event_locked(anchor);
            anchor = NULL;
        }
        anchor_device_ns = 0;
    }
    *begin = take_event_locked();
    if (*begin && tally_cu.EventRecord(*begin, tally_cuda.stream) != CUDA_SUCCESS) {
        give_event_locked(*begin);
        *begin = NULL;
    }
    if (!*begin) {
        tally_timeline_count_problem(TALLY_TIMELINE_OVERFLOWED);
    }
    pthread_mutex_unlock(&timing_lock);
}

void tally_cuda_end_timed(CUevent begin, int issued, const tally_timeline_owner *owner) {
    pthread_mutex_lock(&timing_lock);
    CUevent end = issued ? take_event_locked() : NULL;
    int ok = end && tally_cu.EventRecord(end, tally_cuda.stream) == CUDA_SUCCESS;
    if (ok && num_timed == cap_timed) {
        int32_t cap = cap_timed ? 2 * cap_timed : 64;
        cuda_timed_command *grown =
            (cuda_timed_command *)realloc(timed, (size_t)cap * sizeof(cuda_timed_command));
        ok = grown != NULL;
        if (ok) {
            timed = grown;
            cap_timed = cap;
        }
    }
    if (ok) {
        cuda_timed_command *t = &timed[num_timed++];
        t->begin = begin;
        t->end = end;
        t->owner = *owner;
        tally_timeline_set_mode(TALLY_DEVICE_API_CUDA, TALLY_TIMELINE_EVENTS);
    } else {
        if (issued) {
            tally_timeline_count_problem(TALLY_TIMELINE_OVERFLOWED);
        }
        give_event_locked(begin);
        give_event_locked(end);
    }
    pthread_mutex_unlock(&timing_lock);
}

// The device time of `e` (recorded after the anchor); 0 when it cannot be read.
static int device_time_locked(CUevent e, double *device_ns) {
    float ms = 0;
    if (!anchor || tally_cu.EventElapsedTime(&ms, anchor, e) != CUDA_SUCCESS || ms < 0) {
        return 0;
    }
    *device_ns = anchor_device_ns + (double)ms * 1e6;
    return 1;
}

// Pairs the device and host clocks (see above) on the idle stream; returns the kept event (to
// become the anchor) and its device time, or NULL. timing_lock held.
static CUevent pair_clocks_locked(double *kept_device_ns) {
    if (!tally_cu.EventSynchronize || !anchor) {
        return NULL;
    }
    CUevent events[TALLY_CUDA_CLOCK_READINGS];
    tally_clock_reading readings[TALLY_CUDA_CLOCK_READINGS];
    int32_t n = 0;
    for (int32_t i = 0; i < TALLY_CUDA_CLOCK_READINGS; i++) {
        CUevent e = take_event_locked();
        if (!e) {
            break;
        }
        uint64_t before = tally_now_ns();
        int ok = tally_cu.EventRecord(e, tally_cuda.stream) == CUDA_SUCCESS &&
                 tally_cu.EventSynchronize(e) == CUDA_SUCCESS;
        uint64_t after = tally_now_ns();
        if (ok && device_time_locked(e, &readings[n].device_ns)) {
            readings[n].host_ns = before + (after - before) / 2;
            readings[n].deviation_ns = (after - before) / 2;
            events[n++] = e;
        } else {
            give_event_locked(e);
        }
    }
    int32_t best = tally_timeline_clock_pair(TALLY_DEVICE_API_CUDA, readings, n);
    for (int32_t i = 0; i < n; i++) {
        if (i != best) {
            give_event_locked(events[i]);
        }
    }
    if (best < 0) {
        return NULL;
    }
    *kept_device_ns = readings[best].device_ns;
    return events[best];
}

// The anchor moves to the kept reading.
void tally_cuda_read_timed(void) {
    if (!tally_cuda_has_events()) {
        return;
    }
    pthread_mutex_lock(&timing_lock);
    if (num_timed == 0) {
        pthread_mutex_unlock(&timing_lock);
        return;
    }
    double next_anchor_ns = 0;
    CUevent next_anchor = pair_clocks_locked(&next_anchor_ns);
    for (int32_t i = 0; i < num_timed; i++) {
        cuda_timed_command *t = &timed[i];
        float ms = 0;
        CUresult c = tally_cu.EventElapsedTime(&ms, t->begin, t->end);
        if (c == CUDA_SUCCESS && ms >= 0) {
            double begin_ns = 0;
            uint64_t host_begin = 0;
            int placed = device_time_locked(t->begin, &begin_ns) &&
                         tally_timeline_clock_to_host(TALLY_DEVICE_API_CUDA, begin_ns, &host_begin);
            tally_timeline_add(&t->owner, (uint64_t)((double)ms * 1e6 + 0.5), placed, host_begin);
        } else {
            tally_timeline_count_problem(c == CUDA_SUCCESS ? TALLY_TIMELINE_UNMATCHED
                                                           : TALLY_TIMELINE_LOST);
        }
        give_event_locked(t->begin);
        give_event_locked(t->end);
    }
    num_timed = 0;
    if (next_anchor) {
        give_event_locked(anchor);
        anchor = next_anchor;
        anchor_device_ns = next_anchor_ns;
    }
    pthread_mutex_unlock(&timing_lock);
}

// The next initialization starts a new device clock.
void tally_cuda_timing_release(void) {
    tally_cuda_read_timed();
    pthread_mutex_lock(&timing_lock);
    if (anchor) {
        tally_cu.EventDestroy(anchor);
        anchor = NULL;
    }
    for (int32_t i = 0; i < num_free_events; i++) {
        tally_cu.EventDestroy(free_events[i]);
    }
    num_free_events = 0;
    pthread_mutex_unlock(&timing_lock);
    tally_timeline_clock_forget(TALLY_DEVICE_API_CUDA);
}
