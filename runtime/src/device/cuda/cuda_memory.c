// Device memory: allocations, copies, waits, and stream-ordered frees. Every operation pushes
// the context and runs on the one stream; a copy to the host and the syncs wait for it, and each
// such wait is a point where the stream is idle: the timed commands are read there
// (cuda_timing.c) and the deferred frees released.
//
// A free never waits for the device (device_free.c; cuMemFree may synchronize it). With
// cuMemFreeAsync the free is queued on the stream, behind the buffer's last use; without it (not
// exported, or CUDA_ERROR_NOT_SUPPORTED: no memory pools) the pointer is kept and given to
// cuMemFree at the next point where the runtime waits for the stream anyway (a copy to the host,
// a sync, release), when the stream is idle. Either way the free counts as deferred, and as
// released at that next idle point. Should the list not grow, the free waits for the stream and
// is done at once. free_lock guards the list; it is a leaf.

#include "core/error.h"
#include "device/backend.h"
#include "device/cuda/cuda_internal.h"
#include "profiler/device_timeline.h"
#include "profiler/device_waits.h"
#include "tally_runtime.h"

#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static CUdeviceptr *retired;  // freed, awaiting an idle stream
static int32_t num_retired, cap_retired;
static int32_t queued_async_frees;  // cuMemFreeAsync calls since the last idle point
static _Atomic int32_t free_async_unsupported;

void tally_cuda_stream_idle(void) {
    pthread_mutex_lock(&free_lock);
    for (int32_t i = 0; i < num_retired; i++) {
        tally_cu.MemFree(retired[i]);
        tally_device_count_deferred_release();
    }
    num_retired = 0;
    for (; queued_async_frees > 0; queued_async_frees--) {
        tally_device_count_deferred_release();
    }
    pthread_mutex_unlock(&free_lock);
}

void tally_cuda_memory_release(void) {
    atomic_store_explicit(&free_async_unsupported, 0, memory_order_relaxed);
}

// Keeps `ptr` for cuMemFree at the next idle point. Returns 0 when the list cannot grow.
static int keep_for_idle(CUdeviceptr ptr) {
    pthread_mutex_lock(&free_lock);
    int kept = num_retired < cap_retired;
    if (!kept) {
        int32_t cap = cap_retired ? 2 * cap_retired : 64;
        CUdeviceptr *grown = (CUdeviceptr *)realloc(retired, (size_t)cap * sizeof(CUdeviceptr));
        if (grown) {
            retired = grown;
            cap_retired = cap;
            kept = 1;
        }
    }
    if (kept) {
        retired[num_retired++] = ptr;
    }
    pthread_mutex_unlock(&free_lock);
    return kept;
}

int32_t tally_cuda_defer_free(void *user_context, halide_buffer_t *buf) {
    int32_t r = tally_cuda_push(user_context, TALLY_ERROR_DEVICE_FREE_FAILED);
    if (r != 0) {
        return r;
    }
    CUdeviceptr ptr = (CUdeviceptr)buf->device;
    r = TALLY_DEVICE_FREE_NEEDS_WAIT;
    if (tally_cu.MemFreeAsync &&
        !atomic_load_explicit(&free_async_unsupported, memory_order_relaxed)) {
        CUresult c = tally_cu.MemFreeAsync(ptr, tally_cuda.stream);
        if (c == CUDA_SUCCESS) {
            pthread_mutex_lock(&free_lock);
            queued_async_frees++;
            pthread_mutex_unlock(&free_lock);
            r = TALLY_DEVICE_FREE_DEFERRED;
        } else if (c != CUDA_ERROR_NOT_SUPPORTED) {
            r = tally_cuda_error(user_context, TALLY_ERROR_DEVICE_FREE_FAILED, "cuMemFreeAsync", c);
        } else {
            atomic_store_explicit(&free_async_unsupported, 1, memory_order_relaxed);
        }
    }
    if (r == TALLY_DEVICE_FREE_NEEDS_WAIT && keep_for_idle(ptr)) {
        r = TALLY_DEVICE_FREE_DEFERRED;
    }
    tally_cuda_pop();
    if (r == TALLY_DEVICE_FREE_DEFERRED) {
        buf->device = 0;
    }
    return r;
}

int32_t tally_cuda_free_now(void *user_context, halide_buffer_t *buf) {
    int32_t r = tally_cuda_push(user_context, TALLY_ERROR_DEVICE_FREE_FAILED);
    if (r != 0) {
        return r;
    }
    CUresult c = tally_cu.MemFree((CUdeviceptr)buf->device);
    tally_cuda_pop();
    if (c != CUDA_SUCCESS) {
        return tally_cuda_error(user_context, TALLY_ERROR_DEVICE_FREE_FAILED, "cuMemFree", c);
    }
    buf->device = 0;
    return 0;
}

int32_t tally_cuda_device_malloc(void *user_context, halide_buffer_t *buf) {
    uint64_t size = tally_buffer_size_in_bytes(buf);
    int32_t r = tally_cuda_push(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED);
    if (r != 0) {
        return r;
    }
    CUdeviceptr p = 0;
    CUresult c = tally_cu.MemAlloc(&p, (size_t)(size ? size : 1));
    tally_cuda_pop();
    if (c != CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "cuMemAlloc of %llu bytes", (unsigned long long)size);
        return tally_cuda_error(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED, what, c);
    }
    buf->device = p;
    return 0;
}

// Copies the buffer's span on the stream; a copy to the host also waits for it. Under
// profile_timestamps each copy is timed with events (cuda_timing.c).
int32_t tally_cuda_copy(void *user_context, halide_buffer_t *buf, int to_device) {
    uint64_t size = tally_buffer_size_in_bytes(buf);
    if (!size) {
        return 0;
    }
    int32_t code = to_device ? TALLY_ERROR_COPY_TO_DEVICE_FAILED : TALLY_ERROR_COPY_TO_HOST_FAILED;
    int32_t r = tally_cuda_push(user_context, code);
    if (r != 0) {
        return r;
    }
    // Timed like a launch under profile_timestamps, billed to the copy slot that is current.
    tally_timeline_owner owner = tally_timeline_owner_now();
    CUevent begin = NULL;
    if (tally_timeline_owner_wants_timestamps(&owner) && tally_cuda_has_events()) {
        tally_cuda_begin_timed(&begin);
    }
    CUresult c;
    const char *what;
    if (to_device) {
        c = tally_cu.MemcpyHtoDAsync((CUdeviceptr)buf->device, tally_buffer_begin(buf),
                                     (size_t)size, tally_cuda.stream);
        what = "cuMemcpyHtoDAsync";
        if (begin) {
            tally_cuda_end_timed(begin, c == CUDA_SUCCESS, &owner);
        }
    } else {
        c = tally_cu.MemcpyDtoHAsync(tally_buffer_begin(buf), (CUdeviceptr)buf->device,
                                     (size_t)size, tally_cuda.stream);
        what = "cuMemcpyDtoHAsync";
        if (begin) {
            tally_cuda_end_timed(begin, c == CUDA_SUCCESS, &owner);
        }
        if (c == CUDA_SUCCESS) {
            uint64_t begin = tally_device_wait_begin();
            c = tally_cu.StreamSynchronize(tally_cuda.stream);
            tally_device_wait_end(TALLY_DEVICE_WAIT_COPY_TO_HOST, begin);
            what = "cuStreamSynchronize after a copy to the host";
            if (c == CUDA_SUCCESS) {
                tally_cuda_read_timed();
                tally_cuda_stream_idle();
            }
        }
    }
    tally_cuda_pop();
    return c == CUDA_SUCCESS ? 0 : tally_cuda_error(user_context, code, what, c);
}

int32_t tally_cuda_synchronize(void *user_context, int global, int32_t reason, int32_t code) {
    int32_t r = tally_cuda_push(user_context, code);
    if (r != 0) {
        return r;
    }
    uint64_t begin = tally_device_wait_begin();
    CUresult c = global ? tally_cu.CtxSynchronize() : tally_cu.StreamSynchronize(tally_cuda.stream);
    tally_device_wait_end(reason, begin);
    if (c == CUDA_SUCCESS) {
        tally_cuda_read_timed();
        tally_cuda_stream_idle();
    }
    tally_cuda_pop();
    return c == CUDA_SUCCESS
               ? 0
               : tally_cuda_error(user_context, code,
                                  global ? "cuCtxSynchronize" : "cuStreamSynchronize", c);
}

// One stream: the work that uses any buffer is all the work queued on it.
int32_t tally_cuda_wait(void *user_context, const halide_buffer_t *buf, int32_t reason,
                        int32_t code, const char *routine) {
    (void)buf;
    (void)routine;
    return tally_cuda_synchronize(user_context, 0, reason, code);
}
