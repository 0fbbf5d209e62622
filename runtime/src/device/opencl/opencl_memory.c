// Device memory: allocations, copies, waits and frees, all on the one in-order queue.
//
// A copy to the device must not wait, yet the host may change its buffer as soon as the call
// returns: the span is copied into a staging allocation and a non-blocking write is enqueued from
// it. The staging copy is kept with the write's event and freed once that event has completed:
// looked at (never waited for) at each later copy to the device, at each point where the queue
// was seen idle (a copy to the host, a sync, release), and at the end of each profile_timestamps
// run. Should the staging copies outgrow TALLY_OCL_MAX_STAGED_BYTES without completing, the copy
// waits for the queue (a throttle wait); should no host memory be left for one, the copy is a
// blocking write from the buffer itself (a copy_to_device wait). A copy to the host is a blocking
// read (a copy_to_host wait). device_sync, device_sync_global and the back end's wait are clFinish,
// counted in the device-wait ledger unless the queue was known idle (nothing to wait for).
//
// A free never waits for the device (device_free.c). clReleaseMemObject already defers the
// deletion until the queued commands that use the memory have completed (OpenCL's rule), so the
// free itself is always immediate; what this file decides is what to report. When the queue is
// known idle (opencl_driver.c's bookkeeping) nothing can use the memory: freed. Otherwise a marker
// is enqueued behind the buffer's last use and kept like a staging copy: deferred, and counted as
// released (tally_device_count_deferred_release) once the marker is seen complete. retire_lock
// guards the list of kept events; it is a leaf.
//
// For tests, live_buffers counts the allocations made here and not yet freed here (a deferred
// free counts as freed, as on Vulkan): tally_testing_opencl_live_buffers.

#include "device/opencl/opencl_internal.h"

#include "tally_runtime_testing.h"

#include <stdatomic.h>

static _Atomic int32_t live_buffers;

int32_t tally_testing_opencl_live_buffers(void) {
    return atomic_load(&live_buffers);
}

#if TALLY_HAVE_OPENCL_HEADERS

#include "core/error.h"
#include "device/backend.h"
#include "profiler/device_timeline.h"
#include "profiler/device_waits.h"
#include "tally_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Staging copies in flight beyond which a copy to the device waits for the queue.
#define TALLY_OCL_MAX_STAGED_BYTES (256ull << 20)

// A command kept until it completes: a staging copy to free, or a deferred free to count.
typedef struct ocl_retired {
    cl_event after;
    void *staging;
    uint64_t bytes;
    int32_t counts_release;
} ocl_retired;

static pthread_mutex_t retire_lock = PTHREAD_MUTEX_INITIALIZER;
static ocl_retired *retired;
static int32_t num_retired, cap_retired;
static uint64_t staged_bytes;

// Room for one more entry. retire_lock held.
static int reserve_locked(void) {
    if (num_retired < cap_retired) {
        return 1;
    }
    int32_t cap = cap_retired ? 2 * cap_retired : 64;
    ocl_retired *grown = (ocl_retired *)realloc(retired, (size_t)cap * sizeof(ocl_retired));
    if (!grown) {
        return 0;
    }
    retired = grown;
    cap_retired = cap;
    return 1;
}

// Keeps `after` (taking the caller's reference) with what to do once it completes; 0 when there
// is no room (nothing kept).
static int retire(cl_event after, void *staging, uint64_t bytes, int32_t counts_release) {
    pthread_mutex_lock(&retire_lock);
    int ok = reserve_locked();
    if (ok) {
        ocl_retired *r = &retired[num_retired++];
        r->after = after;
        r->staging = staging;
        r->bytes = bytes;
        r->counts_release = counts_release;
        staged_bytes += bytes;
    }
    pthread_mutex_unlock(&retire_lock);
    return ok;
}

void tally_ocl_reclaim(void) {
    pthread_mutex_lock(&retire_lock);
    int32_t kept = 0;
    for (int32_t i = 0; i < num_retired; i++) {
        ocl_retired *r = &retired[i];
        cl_int status = CL_COMPLETE;
        cl_int err = tally_cl.clGetEventInfo(r->after, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                             sizeof status, &status, NULL);
        if (err == CL_SUCCESS && status > CL_COMPLETE) {
            retired[kept++] = *r;  // still queued or running
            continue;
        }
        // Completed, or failed: either way no command reads the staging copy any more.
        free(r->staging);
        staged_bytes -= r->bytes;
        if (r->counts_release) {
            tally_device_count_deferred_release();
        }
        tally_cl.clReleaseEvent(r->after);
    }
    num_retired = kept;
    pthread_mutex_unlock(&retire_lock);
}

static int anything_retired(void) {
    pthread_mutex_lock(&retire_lock);
    int any = num_retired > 0;
    pthread_mutex_unlock(&retire_lock);
    return any;
}

void tally_ocl_queue_idle(void) {
    tally_ocl_read_timed(1);
    tally_ocl_reclaim();
}

void tally_ocl_memory_release(void) {
    tally_ocl_reclaim();
}

int32_t tally_ocl_device_malloc(void *user_context, halide_buffer_t *buf, const char *routine) {
    uint64_t size = tally_buffer_size_in_bytes(buf);
    cl_int err = CL_SUCCESS;
    cl_mem mem = tally_cl.clCreateBuffer(tally_ocl.context, CL_MEM_READ_WRITE,
                                         (size_t)(size ? size : 1), NULL, &err);
    if (!mem || err != CL_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "clCreateBuffer of %llu bytes", (unsigned long long)size);
        return tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED, routine, what,
                              err != CL_SUCCESS ? err : CL_OUT_OF_RESOURCES);
    }
    buf->device = (uint64_t)(uintptr_t)mem;
    atomic_fetch_add(&live_buffers, 1);
    return 0;
}

int32_t tally_ocl_finish(void *user_context, int32_t reason, int32_t code, const char *routine) {
    int idle = tally_ocl_known_idle();
    uint64_t mark = tally_ocl_idle_mark();
    uint64_t begin = idle ? 0 : tally_device_wait_begin();
    cl_int err = tally_cl.clFinish(tally_ocl.queue);
    if (!idle) {
        tally_device_wait_end(reason, begin);
    }
    if (err != CL_SUCCESS) {
        return tally_ocl_fail(user_context, code, routine, "clFinish", err);
    }
    tally_ocl_now_idle(mark);
    tally_ocl_queue_idle();
    return 0;
}

// Bounds the staging copies still in flight (see above).
static int32_t throttle(void *user_context, const char *routine) {
    pthread_mutex_lock(&retire_lock);
    int over = staged_bytes > TALLY_OCL_MAX_STAGED_BYTES;
    pthread_mutex_unlock(&retire_lock);
    if (over) {
        tally_ocl_reclaim();
        pthread_mutex_lock(&retire_lock);
        over = staged_bytes > TALLY_OCL_MAX_STAGED_BYTES;
        pthread_mutex_unlock(&retire_lock);
    }
    return over ? tally_ocl_finish(user_context, TALLY_DEVICE_WAIT_THROTTLE,
                                   TALLY_ERROR_COPY_TO_DEVICE_FAILED, routine)
                : 0;
}

// `owner`: the copy is timed, billed to it; NULL: untimed.
static int32_t copy_to_device(void *user_context, halide_buffer_t *buf, cl_mem mem, size_t bytes,
                              const tally_timeline_owner *owner, const char *routine) {
    if (anything_retired()) {
        tally_ocl_reclaim();
    }
    char what[96];
    snprintf(what, sizeof what, "clEnqueueWriteBuffer of %llu bytes", (unsigned long long)bytes);
    cl_event event = NULL;
    void *staging = malloc(bytes);
    if (staging) {
        memcpy(staging, tally_buffer_begin(buf), bytes);
        cl_int err = tally_cl.clEnqueueWriteBuffer(tally_ocl.queue, mem, CL_FALSE, 0, bytes,
                                                   staging, 0, NULL, &event);
        if (err != CL_SUCCESS || !event) {
            free(staging);
            return tally_ocl_fail(user_context, TALLY_ERROR_COPY_TO_DEVICE_FAILED, routine, what,
                                  err != CL_SUCCESS ? err : CL_OUT_OF_RESOURCES);
        }
        tally_ocl_count_enqueued();
        if (owner && tally_cl.clRetainEvent(event) == CL_SUCCESS) {
            tally_ocl_keep_timed(event, owner);
        }
        if (retire(event, staging, bytes, 0)) {
            return throttle(user_context, routine);
        }
        // No room to keep the staging copy: wait for its write.
        uint64_t begin = tally_device_wait_begin();
        err = tally_cl.clWaitForEvents(1, &event);
        tally_device_wait_end(TALLY_DEVICE_WAIT_COPY_TO_DEVICE, begin);
        free(staging);
        tally_cl.clReleaseEvent(event);
        return err == CL_SUCCESS ? 0
                                 : tally_ocl_fail(user_context, TALLY_ERROR_COPY_TO_DEVICE_FAILED,
                                                  routine, "waiting for a copy to the device", err);
    }
    // No host memory for a staging copy: a blocking write straight from the buffer.
    uint64_t mark = tally_ocl_idle_mark();
    uint64_t begin = tally_device_wait_begin();
    cl_int err =
        tally_cl.clEnqueueWriteBuffer(tally_ocl.queue, mem, CL_TRUE, 0, bytes,
                                      tally_buffer_begin(buf), 0, NULL, owner ? &event : NULL);
    tally_device_wait_end(TALLY_DEVICE_WAIT_COPY_TO_DEVICE, begin);
    if (err != CL_SUCCESS) {
        return tally_ocl_fail(user_context, TALLY_ERROR_COPY_TO_DEVICE_FAILED, routine, what, err);
    }
    tally_ocl_count_enqueued();
    tally_ocl_now_idle(mark + 1);
    if (event) {
        tally_ocl_keep_timed(event, owner);
    }
    tally_ocl_queue_idle();
    return 0;
}

static int32_t copy_to_host(void *user_context, halide_buffer_t *buf, cl_mem mem, size_t bytes,
                            const tally_timeline_owner *owner, const char *routine) {
    cl_event event = NULL;
    uint64_t mark = tally_ocl_idle_mark();
    uint64_t begin = tally_device_wait_begin();
    cl_int err =
        tally_cl.clEnqueueReadBuffer(tally_ocl.queue, mem, CL_TRUE, 0, bytes,
                                     tally_buffer_begin(buf), 0, NULL, owner ? &event : NULL);
    tally_device_wait_end(TALLY_DEVICE_WAIT_COPY_TO_HOST, begin);
    if (err != CL_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "clEnqueueReadBuffer of %llu bytes", (unsigned long long)bytes);
        return tally_ocl_fail(user_context, TALLY_ERROR_COPY_TO_HOST_FAILED, routine, what, err);
    }
    tally_ocl_count_enqueued();
    tally_ocl_now_idle(mark + 1);
    if (event) {
        tally_ocl_keep_timed(event, owner);
    }
    tally_ocl_queue_idle();
    return 0;
}

// Copies the buffer's span; under profile_timestamps the copy is timed like a launch, billed to
// the copy slot that is current.
int32_t tally_ocl_copy(void *user_context, halide_buffer_t *buf, int to_device,
                       const char *routine) {
    uint64_t size = tally_buffer_size_in_bytes(buf);
    if (!size) {
        return 0;
    }
    if (!buf->device) {
        return tally_report_error(user_context,
                                  to_device ? TALLY_ERROR_COPY_TO_DEVICE_FAILED
                                            : TALLY_ERROR_COPY_TO_HOST_FAILED,
                                  "%s: the buffer has no OpenCL device memory", routine);
    }
    cl_mem mem = (cl_mem)(uintptr_t)buf->device;
    tally_timeline_owner owner = tally_timeline_owner_now();
    const tally_timeline_owner *timed =
        tally_timeline_owner_wants_timestamps(&owner) && tally_ocl_can_time() ? &owner : NULL;
    return to_device ? copy_to_device(user_context, buf, mem, (size_t)size, timed, routine)
                     : copy_to_host(user_context, buf, mem, (size_t)size, timed, routine);
}

// One queue: the work that uses any buffer is all the work queued on it.
int32_t tally_ocl_wait(void *user_context, const halide_buffer_t *buf, int32_t reason, int32_t code,
                       const char *routine) {
    (void)buf;
    return tally_ocl_finish(user_context, reason, code, routine);
}

int32_t tally_ocl_defer_free(void *user_context, halide_buffer_t *buf) {
    const char *routine = "halide_device_free (opencl)";
    cl_mem mem = (cl_mem)(uintptr_t)buf->device;
    if (tally_ocl_known_idle()) {
        cl_int err = tally_cl.clReleaseMemObject(mem);
        if (err != CL_SUCCESS) {
            return tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_FREE_FAILED, routine,
                                  "clReleaseMemObject", err);
        }
        buf->device = 0;
        atomic_fetch_sub(&live_buffers, 1);
        return TALLY_DEVICE_FREED;
    }
    // Work may still use it: released by OpenCL behind that work, which the marker follows.
    cl_event marker = NULL;
    cl_int err = tally_cl.clEnqueueMarkerWithWaitList(tally_ocl.queue, 0, NULL, &marker);
    if (err != CL_SUCCESS || !marker) {
        return TALLY_DEVICE_FREE_NEEDS_WAIT;
    }
    tally_ocl_count_enqueued();
    pthread_mutex_lock(&retire_lock);
    int room = reserve_locked();
    if (room) {
        err = tally_cl.clReleaseMemObject(mem);
        if (err == CL_SUCCESS) {
            ocl_retired *r = &retired[num_retired++];
            r->after = marker;
            r->staging = NULL;
            r->bytes = 0;
            r->counts_release = 1;
        }
    }
    pthread_mutex_unlock(&retire_lock);
    if (!room || err != CL_SUCCESS) {
        tally_cl.clReleaseEvent(marker);
        return !room ? TALLY_DEVICE_FREE_NEEDS_WAIT
                     : tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_FREE_FAILED, routine,
                                      "clReleaseMemObject", err);
    }
    buf->device = 0;
    atomic_fetch_sub(&live_buffers, 1);
    return TALLY_DEVICE_FREE_DEFERRED;
}

int32_t tally_ocl_free_now(void *user_context, halide_buffer_t *buf) {
    cl_int err = tally_cl.clReleaseMemObject((cl_mem)(uintptr_t)buf->device);
    if (err != CL_SUCCESS) {
        return tally_ocl_fail(user_context, TALLY_ERROR_DEVICE_FREE_FAILED,
                              "halide_device_free (opencl)", "clReleaseMemObject", err);
    }
    buf->device = 0;
    atomic_fetch_sub(&live_buffers, 1);
    return 0;
}

#endif  // TALLY_HAVE_OPENCL_HEADERS
