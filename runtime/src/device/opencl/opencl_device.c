// The OpenCL device: its two tables of operations, the halide_device_interface_t buffers use and
// the tally_device_backend launches and frees use (device/backend.h), over the files of opencl/;
// and its lifetime. The first use (halide_opencl_device_interface, halide_opencl_run, any buffer
// operation that needs the device) initializes it (opencl_driver.c, then the clock pairing of
// opencl_timing.c) under tally_ocl_lock, billed to the one-time device-init slot. A failure leaves
// OpenCL unusable with a reason: halide_opencl_device_interface() reports it once through
// halide_error and returns NULL; halide_opencl_run() reports it and returns
// TALLY_ERROR_NO_DEVICE_INTERFACE each time. Once initialized, the back end registers with the
// device-wait ledger (device_waits.h): the end of each profile_timestamps run bills the timed
// commands that have completed, and the at-exit report first waits for the queue.
//
// halide_device_release() finishes the queue (PoCL runs commands on its own threads: nothing may
// be left in flight), bills what was timed, releases every kernel and program and the queue and
// context; the next use starts again from the top. At exit the same release runs once more and
// is final (never blocking exit on a lock another thread holds): device memory freed after it
// (destructors running late) counts as already gone. Buffers allocated before a release keep
// their cl_mem, which OpenCL keeps valid after its context is released: freeing one later
// releases it without initializing again.

#include "device/opencl/opencl_internal.h"

#include "core/error.h"
#include "tally_runtime.h"

#if !TALLY_HAVE_OPENCL_HEADERS

#include <stdatomic.h>

// Built without the OpenCL headers: the back end is always unavailable.
const halide_device_interface_t *halide_opencl_device_interface(void) {
    static _Atomic int reported = 0;
    if (!atomic_exchange(&reported, 1)) {
        tally_report_error(NULL, TALLY_ERROR_NO_DEVICE_INTERFACE,
                           "OpenCL: the runtime was built without the OpenCL headers (CL/cl.h)");
    }
    return NULL;
}

int32_t halide_opencl_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer) {
    (void)state, (void)blocks_x, (void)blocks_y, (void)blocks_z;
    (void)threads_x, (void)threads_y, (void)threads_z, (void)shared_mem_bytes;
    (void)arg_sizes, (void)args, (void)arg_is_buffer;
    return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                              "halide_opencl_run: kernel %s: the runtime was built without the "
                              "OpenCL headers (CL/cl.h)",
                              entry_name ? entry_name : "(null)");
}

#else

#include "device/backend.h"
#include "device/device_interface.h"
#include "profiler/device_waits.h"
#include "profiler/profiler.h"

#include <stdlib.h>
#include <string.h>

static const halide_device_interface_t opencl_interface;
static const tally_device_backend opencl_backend;

// ---- lifetime --------------------------------------------------------------------------------

// Finishes the queue (a release wait when it was not known idle), bills and drops the timed
// commands, reclaims, releases every kernel, program, the queue and the context. Errors are
// ignored: at exit the implementation may already be shutting down. Forgets a failed
// initialization too, so that the next use tries again. tally_ocl_lock held.
static void release_locked(void) {
    if (atomic_load_explicit(&tally_ocl_ready, memory_order_relaxed)) {
        int idle = tally_ocl_known_idle();
        uint64_t mark = tally_ocl_idle_mark();
        uint64_t begin = idle ? 0 : tally_device_wait_begin();
        cl_int err = tally_cl.clFinish(tally_ocl.queue);
        if (!idle) {
            tally_device_wait_end(TALLY_DEVICE_WAIT_RELEASE, begin);
        }
        if (err == CL_SUCCESS) {
            tally_ocl_now_idle(mark);
        }
        tally_ocl_timing_release();
        tally_ocl_memory_release();
        tally_ocl_kernels_release_locked();
        tally_ocl_destroy_locked();
        atomic_store_explicit(&tally_ocl_ready, 0, memory_order_release);
    }
    tally_ocl.failed = 0;
    tally_ocl.failure_reported = 0;
    tally_ocl.reason[0] = '\0';
}

static void release_at_exit(void) {
    // Never block process exit on a lock some other thread holds.
    if (pthread_mutex_trylock(&tally_ocl_lock) == 0) {
        release_locked();
        atomic_store(&tally_ocl_shut_down, 1);
        pthread_mutex_unlock(&tally_ocl_lock);
    }
}

// The end of a profile_timestamps run: bills what completed, without waiting.
static void collect_completed(void) {
    if (atomic_load_explicit(&tally_ocl_ready, memory_order_acquire)) {
        tally_ocl_read_timed(0);
        tally_ocl_reclaim();
    }
}

// Before the at-exit report: waits for all queued work, so that every timed kernel is billed.
static void drain(int32_t reason) {
    // At exit: never block on a lock some other thread holds, and never initialize.
    if (!atomic_load_explicit(&tally_ocl_ready, memory_order_acquire) ||
        pthread_mutex_trylock(&tally_ocl_lock) != 0) {
        return;
    }
    if (atomic_load_explicit(&tally_ocl_ready, memory_order_relaxed)) {
        (void)tally_ocl_finish(NULL, reason, TALLY_ERROR_DEVICE_SYNC_FAILED,
                               "the at-exit report (opencl)");
    }
    pthread_mutex_unlock(&tally_ocl_lock);
}

// 0 when OpenCL is usable, initializing it on first use. Otherwise reports why through
// halide_error (always when `routine` is given, else only the first time) and returns
// TALLY_ERROR_NO_DEVICE_INTERFACE.
static int32_t ensure(void *user_context, const char *routine) {
    if (atomic_load_explicit(&tally_ocl_ready, memory_order_acquire)) {
        return 0;
    }
    pthread_mutex_lock(&tally_ocl_lock);
    int ok = atomic_load_explicit(&tally_ocl_ready, memory_order_relaxed);
    if (!ok) {
        int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_DEVICE_INIT);
        ok = tally_ocl_init_locked();
        if (ok) {
            tally_ocl_timing_init_locked();
            if (!tally_ocl.atexit_registered) {
                tally_ocl.atexit_registered = 1;
                atexit(release_at_exit);
            }
            tally_device_register_drain(TALLY_DEVICE_API_OPENCL, collect_completed, drain);
            atomic_store_explicit(&tally_ocl_ready, 1, memory_order_release);
        }
        tally_profiler_one_time_end(one_time);
    }
    char reason[sizeof tally_ocl.reason];
    memcpy(reason, tally_ocl.reason, sizeof reason);
    int report = !ok && (routine || !tally_ocl.failure_reported);
    if (report && !routine) {
        tally_ocl.failure_reported = 1;
    }
    pthread_mutex_unlock(&tally_ocl_lock);
    if (ok) {
        return 0;
    }
    // Reported outside the lock: the error handler is user code.
    if (report) {
        return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                                  "%s%sOpenCL is not available: %s", routine ? routine : "",
                                  routine ? ": " : "", reason);
    }
    return TALLY_ERROR_NO_DEVICE_INTERFACE;
}

// ---- the interface ---------------------------------------------------------------------------

static int32_t ocl_device_malloc(void *user_context, halide_buffer_t *buf,
                                 const halide_device_interface_t *iface) {
    (void)iface;
    const char *routine = "halide_device_malloc (opencl)";
    int32_t r = ensure(user_context, routine);
    return r != 0 ? r : tally_ocl_device_malloc(user_context, buf, routine);
}

static int32_t ocl_device_free(void *user_context, halide_buffer_t *buf) {
    if (!buf->device || atomic_load(&tally_ocl_shut_down)) {
        buf->device = 0;  // at exit: released with the context
        return 0;
    }
    if (!atomic_load_explicit(&tally_ocl_ready, memory_order_acquire)) {
        // Allocated before a release, which finished the queue: nothing can use it.
        return tally_ocl_free_now(user_context, buf);
    }
    return tally_device_free(&opencl_backend, user_context, buf, "halide_device_free (opencl)");
}

static int32_t ocl_copy_to_host(void *user_context, halide_buffer_t *buf) {
    const char *routine = "halide_copy_to_host (opencl)";
    int32_t r = ensure(user_context, routine);
    return r != 0 ? r : tally_ocl_copy(user_context, buf, 0, routine);
}

static int32_t ocl_copy_to_device(void *user_context, halide_buffer_t *buf) {
    const char *routine = "halide_copy_to_device (opencl)";
    int32_t r = ensure(user_context, routine);
    return r != 0 ? r : tally_ocl_copy(user_context, buf, 1, routine);
}

// Nothing can be in flight before initialization (or after a release): no need to initialize
// just to wait.
static int32_t ocl_device_sync(void *user_context, halide_buffer_t *buf) {
    (void)buf;
    if (!atomic_load_explicit(&tally_ocl_ready, memory_order_acquire)) {
        return 0;
    }
    return tally_ocl_finish(user_context, TALLY_DEVICE_WAIT_SYNC, TALLY_ERROR_DEVICE_SYNC_FAILED,
                            "halide_device_sync (opencl)");
}

static int32_t ocl_device_sync_global(void *user_context, const halide_device_interface_t *iface) {
    (void)iface;
    if (!atomic_load_explicit(&tally_ocl_ready, memory_order_acquire)) {
        return 0;
    }
    return tally_ocl_finish(user_context, TALLY_DEVICE_WAIT_SYNC_GLOBAL,
                            TALLY_ERROR_DEVICE_SYNC_FAILED, "halide_device_sync_global (opencl)");
}

static int32_t ocl_release(void *user_context, const halide_device_interface_t *iface) {
    (void)user_context;
    (void)iface;
    pthread_mutex_lock(&tally_ocl_lock);
    release_locked();
    pthread_mutex_unlock(&tally_ocl_lock);
    return 0;
}

static const halide_device_interface_t opencl_interface = TALLY_DEVICE_INTERFACE("opencl", ocl);

const halide_device_interface_t *halide_opencl_device_interface(void) {
    return ensure(NULL, NULL) == 0 ? &opencl_interface : NULL;
}

// ---- launches --------------------------------------------------------------------------------

static const tally_device_backend opencl_backend = {
    .api = TALLY_DEVICE_API_OPENCL,
    .name = "OpenCL",
    .run_routine = "halide_opencl_run",
    .interface = &opencl_interface,
    .ensure = ensure,
    .kernel_ready = tally_ocl_kernel_ready,
    .compile = tally_ocl_compile,
    .launch = tally_ocl_launch,
    .can_time = tally_ocl_can_time,
    .wait = tally_ocl_wait,
    .defer_free = tally_ocl_defer_free,
    .free_now = tally_ocl_free_now,
};

int32_t halide_opencl_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer) {
    return tally_device_run(&opencl_backend, user_context, state, entry_name, blocks_x, blocks_y,
                            blocks_z, threads_x, threads_y, threads_z, shared_mem_bytes, arg_sizes,
                            args, arg_is_buffer);
}

#endif  // TALLY_HAVE_OPENCL_HEADERS
