// Command timing (profile_timestamps): a launch or a copy made while a profile_timestamps run is
// current asks the queue for its event; the event is kept until the command has completed, and
// its CL_PROFILING_COMMAND_START..END (device nanoseconds) is billed to the slot that issued it (a
// kernel to its Func, a copy to its copy slot) through device_timeline.c. Completed commands are
// read at each point where the queue was seen idle (a copy to the host, a sync, release), and
// at the end of each profile_timestamps run (device_waits.c's collect), which bills what has
// completed without waiting; the at-exit report first waits for the queue (its drain).
//
// Placing commands on the host clock: profiling timestamps are absolute readings of a device
// clock (on PoCL, CLOCK_MONOTONIC_RAW), paired with the profiler's clock by readings whose host
// time is bounded by a window (device_timeline.c keeps the tightest of each pairing and fits the
// drift across pairings). With OpenCL 2.1's clGetDeviceAndHostTimer, when the platform has it and
// it works, a reading is that call between two readings of the host clock (its own host
// timestamp is ignored: its clock is the implementation's); such readings cost no queue round
// trip, so every read pairs again. Otherwise (PoCL 3.1: its platform's host timer resolution is
// 0 and the call fails) a reading is a marker's CL_PROFILING_COMMAND_END, enqueued and waited for
// between two readings of the host clock; taken at initialization (the queue empty) and at each
// blocking point with timed commands to read, only while the queue is known idle (opencl_driver.c),
// so that the marker waits for nothing but itself. The mode reported (device_timeline.h) is
// calibrated once a pairing exists, durations only before.
//
// can_time: the queue has CL_QUEUE_PROFILING_ENABLE and a marker's event gave its timestamps at
// initialization; without it the shared launch path (device_launch.c) syncs after each launch
// instead. timing_lock guards the list and the pairing state.

#include "device/opencl/opencl_internal.h"

#if TALLY_HAVE_OPENCL_HEADERS

#include "core/clock.h"
#include "profiler/device_timeline.h"
#include "tally_runtime.h"

#include <stdlib.h>

#define TALLY_OCL_CLOCK_READINGS 3

typedef struct ocl_timed_command {
    cl_event event;
    tally_timeline_owner owner;
} ocl_timed_command;

static pthread_mutex_t timing_lock = PTHREAD_MUTEX_INITIALIZER;
static ocl_timed_command *timed;  // commands not billed yet
static int32_t num_timed, cap_timed;
static _Atomic int32_t can_time;
static int32_t paired;            // a pairing of the current device's clock exists
static int32_t host_timer_works;  // clGetDeviceAndHostTimer gives readings

int tally_ocl_can_time(void) {
    return atomic_load_explicit(&can_time, memory_order_relaxed);
}

static int profiling_time(cl_event e, cl_profiling_info what, cl_ulong *out) {
    *out = 0;
    return tally_cl.clGetEventProfilingInfo(e, what, sizeof *out, out, NULL) == CL_SUCCESS;
}

static void fill_reading(tally_clock_reading *r, cl_ulong device_ns, uint64_t before,
                         uint64_t after) {
    uint64_t width = after > before ? after - before : 0;
    r->device_ns = (double)device_ns;
    r->host_ns = before + width / 2;
    r->deviation_ns = width / 2;
}

// A reading through clGetDeviceAndHostTimer. timing_lock held.
static int timer_reading_locked(tally_clock_reading *r) {
    cl_ulong device_ns = 0, host_ns = 0;
    uint64_t before = tally_now_ns();
    cl_int err = tally_cl.clGetDeviceAndHostTimer(tally_ocl.device, &device_ns, &host_ns);
    uint64_t after = tally_now_ns();
    if (err != CL_SUCCESS || device_ns == 0) {
        return 0;
    }
    fill_reading(r, device_ns, before, after);
    return 1;
}

// A reading through a marker's completion (the queue's order bookkeeping sees it as a blocking
// operation). timing_lock held.
static int marker_reading_locked(tally_clock_reading *r) {
    cl_event marker = NULL;
    uint64_t mark = tally_ocl_idle_mark();
    uint64_t before = tally_now_ns();
    cl_int err = tally_cl.clEnqueueMarkerWithWaitList(tally_ocl.queue, 0, NULL, &marker);
    if (err != CL_SUCCESS || !marker) {
        return 0;
    }
    tally_ocl_count_enqueued();
    err = tally_cl.clWaitForEvents(1, &marker);
    uint64_t after = tally_now_ns();
    cl_ulong end = 0;
    int ok = err == CL_SUCCESS && profiling_time(marker, CL_PROFILING_COMMAND_END, &end) && end;
    if (err == CL_SUCCESS) {
        tally_ocl_now_idle(mark + 1);
    }
    tally_cl.clReleaseEvent(marker);
    if (ok) {
        fill_reading(r, end, before, after);
    }
    return ok;
}

// Pairs the clocks when a reading can be taken: with the timer always; with markers only where
// the caller may wait (`may_wait`: a blocking point) and while the queue is known idle, so that a
// marker never waits for work another thread has queued meanwhile. timing_lock held.
static void pair_clocks_locked(int may_wait) {
    if (!host_timer_works && !may_wait) {
        return;
    }
    tally_clock_reading readings[TALLY_OCL_CLOCK_READINGS];
    int32_t n = 0;
    for (int32_t i = 0; i < TALLY_OCL_CLOCK_READINGS; i++) {
        if (host_timer_works ? timer_reading_locked(&readings[n])
                             : tally_ocl_known_idle() && marker_reading_locked(&readings[n])) {
            n++;
        }
    }
    if (tally_timeline_clock_pair(TALLY_DEVICE_API_OPENCL, readings, n) >= 0) {
        paired = 1;
    }
}

void tally_ocl_timing_init_locked(void) {
    pthread_mutex_lock(&timing_lock);
    paired = 0;
    host_timer_works = 0;
    int ok = 0;
    if (tally_ocl.profiling) {
        tally_clock_reading r;
        host_timer_works = tally_cl.clGetDeviceAndHostTimer && timer_reading_locked(&r);
        ok = marker_reading_locked(&r);  // events carry timestamps
        if (ok) {
            pair_clocks_locked(1);
        }
    }
    atomic_store_explicit(&can_time, ok, memory_order_relaxed);
    pthread_mutex_unlock(&timing_lock);
}

void tally_ocl_keep_timed(cl_event event, const tally_timeline_owner *owner) {
    pthread_mutex_lock(&timing_lock);
    int ok = num_timed < cap_timed;
    if (!ok) {
        int32_t cap = cap_timed ? 2 * cap_timed : 64;
        ocl_timed_command *grown =
            (ocl_timed_command *)realloc(timed, (size_t)cap * sizeof(ocl_timed_command));
        if (grown) {
            timed = grown;
            cap_timed = cap;
            ok = 1;
        }
    }
    if (ok) {
        timed[num_timed].event = event;
        timed[num_timed].owner = *owner;
        num_timed++;
        tally_timeline_set_mode(TALLY_DEVICE_API_OPENCL, paired
                                                             ? TALLY_TIMELINE_TIMESTAMPS_CALIBRATED
                                                             : TALLY_TIMELINE_TIMESTAMPS);
    }
    pthread_mutex_unlock(&timing_lock);
    if (!ok) {
        tally_cl.clReleaseEvent(event);
        tally_timeline_count_problem(TALLY_TIMELINE_OVERFLOWED);
    }
}

// Bills one completed command. timing_lock held.
static void bill_locked(const ocl_timed_command *t) {
    cl_ulong start = 0, end = 0;
    if (!profiling_time(t->event, CL_PROFILING_COMMAND_START, &start) ||
        !profiling_time(t->event, CL_PROFILING_COMMAND_END, &end)) {
        tally_timeline_count_problem(TALLY_TIMELINE_LOST);
        return;
    }
    if (end < start) {
        tally_timeline_count_problem(TALLY_TIMELINE_UNMATCHED);
        return;
    }
    uint64_t host_begin = 0;
    int placed =
        paired && tally_timeline_clock_to_host(TALLY_DEVICE_API_OPENCL, (double)start, &host_begin);
    tally_timeline_add(&t->owner, (uint64_t)(end - start), placed, host_begin);
}

void tally_ocl_read_timed(int blocking_point) {
    pthread_mutex_lock(&timing_lock);
    if (num_timed == 0) {
        pthread_mutex_unlock(&timing_lock);
        return;
    }
    pair_clocks_locked(blocking_point);
    int32_t kept = 0;
    for (int32_t i = 0; i < num_timed; i++) {
        ocl_timed_command *t = &timed[i];
        cl_int status = CL_COMPLETE;
        cl_int err = tally_cl.clGetEventInfo(t->event, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                             sizeof status, &status, NULL);
        if (err == CL_SUCCESS && status > CL_COMPLETE) {
            timed[kept++] = *t;  // queued, submitted or running: read later
            continue;
        }
        if (err != CL_SUCCESS || status < 0) {
            tally_timeline_count_problem(TALLY_TIMELINE_LOST);  // the command failed
        } else {
            bill_locked(t);
        }
        tally_cl.clReleaseEvent(t->event);
    }
    num_timed = kept;
    pthread_mutex_unlock(&timing_lock);
}

// The next initialization starts a new device clock.
void tally_ocl_timing_release(void) {
    tally_ocl_read_timed(0);
    pthread_mutex_lock(&timing_lock);
    for (int32_t i = 0; i < num_timed; i++) {
        tally_cl.clReleaseEvent(timed[i].event);
        tally_timeline_count_problem(TALLY_TIMELINE_LOST);
    }
    num_timed = 0;
    paired = 0;
    host_timer_works = 0;
    atomic_store_explicit(&can_time, 0, memory_order_relaxed);
    pthread_mutex_unlock(&timing_lock);
    tally_timeline_clock_forget(TALLY_DEVICE_API_OPENCL);
}

#endif  // TALLY_HAVE_OPENCL_HEADERS
