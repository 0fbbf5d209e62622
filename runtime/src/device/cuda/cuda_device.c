// The CUDA device: its two tables of operations, the halide_device_interface_t buffers use and
// the tally_device_backend launches and frees use (device/backend.h), over the files of cuda/;
// and its lifetime. The first use (halide_cuda_device_interface, halide_cuda_run, any buffer
// operation) initializes the driver (cuda_driver.c) under tally_cuda_lock, billed to the one-time
// device-init slot. A failure leaves CUDA unusable with a reason: halide_cuda_device_interface()
// reports it once through halide_error and returns NULL; halide_cuda_run() reports it and returns
// TALLY_ERROR_NO_DEVICE_INTERFACE each time. halide_device_release() syncs, unloads the kernels,
// destroys the stream and releases the context; the next use starts again from the top. At exit
// the same release runs once more and is final: device memory freed after it (destructors running
// late) counts as already gone.

#include "core/error.h"
#include "device/backend.h"
#include "device/cuda/cuda_internal.h"
#include "device/device_interface.h"
#include "profiler/device_waits.h"
#include "profiler/profiler.h"
#include "tally_runtime.h"

#include <stdlib.h>
#include <string.h>

static const halide_device_interface_t cuda_interface;
static const tally_device_backend cuda_backend;

// ---- lifetime --------------------------------------------------------------------------------

// Syncs, unloads every kernel, destroys the stream and releases the context (errors are
// ignored: at exit the driver may already be shutting down). Forgets a failed initialization
// too, so that the next use tries again. tally_cuda_lock held.
static void release_locked(void) {
    if (atomic_load_explicit(&tally_cuda_ready, memory_order_relaxed)) {
        CUcontext popped;
        if (tally_cu.CtxPushCurrent(tally_cuda.context) == CUDA_SUCCESS) {
            tally_cu.CtxSynchronize();
            tally_cuda_timing_release();
            tally_cuda_stream_idle();
            tally_cuda_kernels_release_locked();
            tally_cu.StreamDestroy(tally_cuda.stream);
            tally_cu.CtxPopCurrent(&popped);
        }
        tally_cu.DevicePrimaryCtxRelease(tally_cuda.device);
        tally_cuda.stream = NULL;
        tally_cuda.context = NULL;
        tally_cuda_memory_release();
        atomic_store_explicit(&tally_cuda_ready, 0, memory_order_release);
    }
    tally_cuda.failed = 0;
    tally_cuda.failure_reported = 0;
    tally_cuda.reason[0] = '\0';
}

static void release_at_exit(void) {
    pthread_mutex_lock(&tally_cuda_lock);
    release_locked();
    atomic_store(&tally_cuda_shut_down, 1);
    pthread_mutex_unlock(&tally_cuda_lock);
}

// 0 when CUDA is usable, initializing it on first use. Otherwise reports why through halide_error
// (always when `routine` is given, else only the first time) and returns
// TALLY_ERROR_NO_DEVICE_INTERFACE.
static int32_t ensure(void *user_context, const char *routine) {
    if (atomic_load_explicit(&tally_cuda_ready, memory_order_acquire)) {
        return 0;
    }
    pthread_mutex_lock(&tally_cuda_lock);
    int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_DEVICE_INIT);
    int ok = tally_cuda_init_locked();
    if (ok && !tally_cuda.atexit_registered) {
        tally_cuda.atexit_registered = 1;
        atexit(release_at_exit);
    }
    tally_profiler_one_time_end(one_time);
    char reason[sizeof tally_cuda.reason];
    memcpy(reason, tally_cuda.reason, sizeof reason);
    int report = !ok && (routine || !tally_cuda.failure_reported);
    if (report && !routine) {
        tally_cuda.failure_reported = 1;
    }
    pthread_mutex_unlock(&tally_cuda_lock);
    if (ok) {
        return 0;
    }
    if (report) {
        return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                                  "%s%sCUDA is not available: %s", routine ? routine : "",
                                  routine ? ": " : "", reason);
    }
    return TALLY_ERROR_NO_DEVICE_INTERFACE;
}

// ---- the interface ---------------------------------------------------------------------------

static int32_t cuda_device_malloc(void *user_context, halide_buffer_t *buf,
                                  const halide_device_interface_t *iface) {
    (void)iface;
    int32_t r = ensure(user_context, "CUDA");
    return r != 0 ? r : tally_cuda_device_malloc(user_context, buf);
}

static int32_t cuda_device_free(void *user_context, halide_buffer_t *buf) {
    if (atomic_load(&tally_cuda_shut_down)) {
        buf->device = 0;  // released with the context at exit
        return 0;
    }
    int32_t r = ensure(user_context, "CUDA");
    return r != 0 ? r : tally_device_free(&cuda_backend, user_context, buf, "halide_device_free");
}

static int32_t cuda_copy_to_host(void *user_context, halide_buffer_t *buf) {
    int32_t r = ensure(user_context, "CUDA");
    return r != 0 ? r : tally_cuda_copy(user_context, buf, 0);
}

static int32_t cuda_copy_to_device(void *user_context, halide_buffer_t *buf) {
    int32_t r = ensure(user_context, "CUDA");
    return r != 0 ? r : tally_cuda_copy(user_context, buf, 1);
}

static int32_t cuda_device_sync(void *user_context, halide_buffer_t *buf) {
    (void)buf;
    int32_t r = ensure(user_context, "CUDA");
    return r != 0 ? r
                  : tally_cuda_synchronize(user_context, 0, TALLY_DEVICE_WAIT_SYNC,
                                           TALLY_ERROR_DEVICE_SYNC_FAILED);
}

static int32_t cuda_device_sync_global(void *user_context, const halide_device_interface_t *iface) {
    (void)iface;
    int32_t r = ensure(user_context, "CUDA");
    return r != 0 ? r
                  : tally_cuda_synchronize(user_context, 1, TALLY_DEVICE_WAIT_SYNC_GLOBAL,
                                           TALLY_ERROR_DEVICE_SYNC_FAILED);
}

static int32_t cuda_release(void *user_context, const halide_device_interface_t *iface) {
    (void)user_context;
    (void)iface;
    pthread_mutex_lock(&tally_cuda_lock);
    release_locked();
    pthread_mutex_unlock(&tally_cuda_lock);
    return 0;
}

static const halide_device_interface_t cuda_interface = TALLY_DEVICE_INTERFACE("cuda", cuda);

const halide_device_interface_t *halide_cuda_device_interface(void) {
    return ensure(NULL, NULL) == 0 ? &cuda_interface : NULL;
}

// ---- launches --------------------------------------------------------------------------------

static const tally_device_backend cuda_backend = {
    .api = TALLY_DEVICE_API_CUDA,
    .name = "CUDA",
    .run_routine = "halide_cuda_run",
    .interface = &cuda_interface,
    .ensure = ensure,
    .kernel_ready = tally_cuda_kernel_ready,
    .compile = tally_cuda_compile,
    .launch = tally_cuda_launch,
    .can_time = tally_cuda_has_events,
    .wait = tally_cuda_wait,
    .defer_free = tally_cuda_defer_free,
    .free_now = tally_cuda_free_now,
};

int32_t halide_cuda_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                        int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                        int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                        void **args, const uint8_t *arg_is_buffer) {
    return tally_device_run(&cuda_backend, user_context, state, entry_name, blocks_x, blocks_y,
                            blocks_z, threads_x, threads_y, threads_z, shared_mem_bytes, arg_sizes,
                            args, arg_is_buffer);
}
