// The Vulkan device: its two tables of operations, the halide_device_interface_t buffers use and
// the tally_device_backend launches and frees use (device/backend.h), over the files of
// vulkan/; and its lifetime. Initialization is lazy (the first call that needs the device),
// guarded by tally_vk_lock, billed to the one-time device-init slot; a failure is reported once
// with its reason (halide_vulkan_device_interface() then returns NULL) and again by each call
// that needed the device. Release (halide_device_release) and process exit wait for the device
// and destroy every Vulkan object, so that the Khronos validation layer sees each destroyed; the
// next use initializes again. The operations below check what the interface promises callers
// (the device ready, a buffer of this interface) and hand the rest to the file that owns it.

#include "core/error.h"
#include "device/backend.h"
#include "device/device_interface.h"
#include "device/vulkan/vulkan_internal.h"
#include "profiler/device_timeline.h"
#include "profiler/device_waits.h"
#include "profiler/profiler.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#if !TALLY_HAVE_VULKAN_HEADERS

// Built without the Vulkan headers: the back end is always unavailable.
const halide_device_interface_t *halide_vulkan_device_interface(void) {
    static _Atomic int reported = 0;
    if (!atomic_exchange(&reported, 1)) {
        tally_report_error(NULL, TALLY_ERROR_NO_DEVICE_INTERFACE,
                           "Vulkan: the runtime was built without the Vulkan headers");
    }
    return NULL;
}

int32_t halide_vulkan_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer) {
    (void)state, (void)blocks_x, (void)blocks_y, (void)blocks_z;
    (void)threads_x, (void)threads_y, (void)threads_z, (void)shared_mem_bytes;
    (void)arg_sizes, (void)args, (void)arg_is_buffer;
    return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                              "halide_vulkan_run: kernel %s: the runtime was built without the "
                              "Vulkan headers",
                              entry_name ? entry_name : "(null)");
}

int32_t tally_testing_vulkan_hold(int32_t mode) {
    (void)mode;
    return tally_report_error(NULL, TALLY_ERROR_NO_DEVICE_INTERFACE,
                              "tally_testing_vulkan_hold: the runtime was built without the "
                              "Vulkan headers");
}

int32_t tally_testing_vulkan_live_buffers(void) {
    return 0;
}

void tally_testing_set_vulkan_calibration(tally_testing_vulkan_calibration_t reader) {
    (void)reader;
}

#else

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const halide_device_interface_t vulkan_interface;
static const tally_device_backend vulkan_backend;

// ---- lifetime --------------------------------------------------------------------------------

// Destroys every Vulkan object (waiting for the device first). tally_vk_lock held.
static void teardown_locked(void) {
    if (atomic_load_explicit(&tally_vk_ready, memory_order_relaxed)) {
        // Counted as a wait only when submissions were still in flight, held ones included: asked
        // before the gate opens, so that held work cannot complete in between.
        int busy = tally_vk_reclaim_locked() < tally_vk.next_serial;
        tally_vk_open_gate_locked();
        uint64_t begin = tally_device_wait_begin();
        VkResult idle = tally_vk.f.vkDeviceWaitIdle(tally_vk.device);
        if (busy) {
            tally_device_wait_end(TALLY_DEVICE_WAIT_RELEASE, begin);
        }
        tally_vk_submit_teardown_locked(idle == VK_SUCCESS);
        tally_vk_timestamps_teardown_locked();
        tally_vk_kernels_teardown_locked();
        tally_vk_memory_teardown_locked();
        tally_vk_destroy_core_locked();
        tally_timeline_clock_forget(TALLY_DEVICE_API_VULKAN);
        atomic_store_explicit(&tally_vk_ready, 0, memory_order_release);
    }
    // A failed initialization is forgotten too: the next use tries (and reports) again.
    tally_vk.failed = 0;
    tally_vk.failure_reported = 0;
    tally_vk.failure[0] = '\0';
}

static void release_at_exit(void) {
    // Never block process exit on a lock some other thread holds.
    if (pthread_mutex_trylock(&tally_vk_lock) == 0) {
        teardown_locked();
        pthread_mutex_unlock(&tally_vk_lock);
    }
}

// The end of a profile_timestamps run: bills what completed, and re-pairs the clocks (the drift
// fit).
static void collect_completed(void) {
    if (atomic_load_explicit(&tally_vk_ready, memory_order_acquire)) {
        pthread_mutex_lock(&tally_vk_lock);
        if (atomic_load_explicit(&tally_vk_ready, memory_order_relaxed)) {
            tally_vk_calibrate_clocks_locked(0);
            tally_vk_reclaim_locked();
        }
        pthread_mutex_unlock(&tally_vk_lock);
    }
}

// Before the at-exit report: waits for all queued work, so that every timed kernel is billed.
static void drain(int32_t reason) {
    // At exit: never block on a lock some other thread holds (as release_at_exit), never
    // initialize, and never wait behind a closed testing gate.
    if (!atomic_load_explicit(&tally_vk_ready, memory_order_acquire) ||
        pthread_mutex_trylock(&tally_vk_lock) != 0) {
        return;
    }
    int ready = atomic_load_explicit(&tally_vk_ready, memory_order_relaxed);
    if (ready) {
        tally_vk_open_gate_locked();
    }
    pthread_mutex_unlock(&tally_vk_lock);
    if (ready) {
        (void)tally_vk_wait_serial(NULL, UINT64_MAX, reason, TALLY_ERROR_DEVICE_SYNC_FAILED,
                                   "the at-exit report (vulkan)");
    }
}

// Makes sure Vulkan is initialized. On failure reports the reason the first time and, when
// `routine` is not NULL, a per-call error naming the routine on later calls; returns
// TALLY_ERROR_NO_DEVICE_INTERFACE.
static int32_t ensure_ready(void *user_context, const char *routine) {
    if (atomic_load_explicit(&tally_vk_ready, memory_order_acquire)) {
        return 0;
    }
    char reason[sizeof(tally_vk.failure)];
    int report_reason = 0;
    pthread_mutex_lock(&tally_vk_lock);
    if (!atomic_load_explicit(&tally_vk_ready, memory_order_relaxed) && !tally_vk.failed) {
        int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_DEVICE_INIT);
        if (tally_vk_init_locked(tally_vk.failure, sizeof(tally_vk.failure)) == 0) {
            tally_vk_calibrate_clocks_locked(1);
            if (!tally_vk.atexit_registered) {
                tally_vk.atexit_registered = 1;
                atexit(release_at_exit);
            }
            tally_device_register_drain(TALLY_DEVICE_API_VULKAN, collect_completed, drain);
            atomic_store_explicit(&tally_vk_ready, 1, memory_order_release);
        } else {
            tally_vk.failed = 1;
        }
        tally_profiler_one_time_end(one_time);
    }
    int ok = atomic_load_explicit(&tally_vk_ready, memory_order_relaxed);
    if (!ok) {
        memcpy(reason, tally_vk.failure, sizeof(reason));
        report_reason = !tally_vk.failure_reported;
        tally_vk.failure_reported = 1;
    }
    pthread_mutex_unlock(&tally_vk_lock);
    if (ok) {
        return 0;
    }
    // Reported outside the lock: the error handler is user code.
    if (report_reason) {
        return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                                  "%s%sVulkan is not available: %s", routine ? routine : "",
                                  routine ? ": " : "", reason);
    }
    if (routine) {
        return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                                  "%s: Vulkan is not available: %s", routine, reason);
    }
    return TALLY_ERROR_NO_DEVICE_INTERFACE;
}

// ---- the interface ---------------------------------------------------------------------------

// Whether buf has device memory of this interface; else reports it with `code`.
static int32_t check_ours(void *user_context, const halide_buffer_t *buf, const char *routine,
                          int32_t code) {
    if (!buf) {
        return halide_error_buffer_is_null(user_context, routine);
    }
    if (!buf->device || buf->device_interface != &vulkan_interface) {
        const halide_device_interface_t *on = buf->device_interface;
        return tally_report_error(
            user_context, code, "%s: the buffer has no Vulkan device memory (it is on %s)", routine,
            !on        ? "the host only"
            : on->name ? on->name
                       : "(unnamed)");
    }
    return 0;
}

static int32_t vk_device_malloc(void *user_context, halide_buffer_t *buf,
                                const halide_device_interface_t *iface) {
    (void)iface;
    const char *routine = "halide_device_malloc (vulkan)";
    int32_t r = ensure_ready(user_context, routine);
    return r != 0 ? r : tally_vk_device_malloc(user_context, buf, routine);
}

static int32_t vk_device_free(void *user_context, halide_buffer_t *buf) {
    if (!buf->device) {
        return 0;
    }
    return tally_device_free(&vulkan_backend, user_context, buf, "halide_device_free (vulkan)");
}

static int32_t vk_copy(void *user_context, halide_buffer_t *buf, int to_device) {
    const char *routine =
        to_device ? "halide_copy_to_device (vulkan)" : "halide_copy_to_host (vulkan)";
    int32_t r = ensure_ready(user_context, routine);
    if (r == 0) {
        r = check_ours(user_context, buf, routine,
                       to_device ? TALLY_ERROR_COPY_TO_DEVICE_FAILED
                                 : TALLY_ERROR_COPY_TO_HOST_FAILED);
    }
    return r != 0 ? r : tally_vk_copy(user_context, buf, to_device, routine);
}

static int32_t vk_copy_to_device(void *user_context, halide_buffer_t *buf) {
    return vk_copy(user_context, buf, 1);
}

static int32_t vk_copy_to_host(void *user_context, halide_buffer_t *buf) {
    return vk_copy(user_context, buf, 0);
}

static int32_t vk_device_sync(void *user_context, halide_buffer_t *buf) {
    if (!buf || !buf->device || buf->device_interface != &vulkan_interface) {
        return 0;
    }
    return tally_vk_device_sync(user_context, buf, "halide_device_sync (vulkan)");
}

static int32_t vk_device_sync_global(void *user_context, const halide_device_interface_t *iface) {
    (void)iface;
    // Nothing can be in flight before initialization; do not initialize just to wait.
    return tally_vk_wait_serial(user_context, UINT64_MAX, TALLY_DEVICE_WAIT_SYNC_GLOBAL,
                                TALLY_ERROR_DEVICE_SYNC_FAILED,
                                "halide_device_sync_global (vulkan)");
}

static int32_t vk_release(void *user_context, const halide_device_interface_t *iface) {
    (void)user_context;
    (void)iface;
    pthread_mutex_lock(&tally_vk_lock);
    teardown_locked();
    pthread_mutex_unlock(&tally_vk_lock);
    return 0;
}

static const halide_device_interface_t vulkan_interface = TALLY_DEVICE_INTERFACE("vulkan", vk);

const halide_device_interface_t *halide_vulkan_device_interface(void) {
    return ensure_ready(NULL, NULL) == 0 ? &vulkan_interface : NULL;
}

// ---- launches --------------------------------------------------------------------------------

static const tally_device_backend vulkan_backend = {
    .api = TALLY_DEVICE_API_VULKAN,
    .name = "Vulkan",
    .run_routine = "halide_vulkan_run",
    .interface = &vulkan_interface,
    .ensure = ensure_ready,
    .kernel_ready = tally_vk_kernel_ready,
    .compile = tally_vk_compile,
    .launch = tally_vk_launch,
    .can_time = tally_vk_can_time,
    .wait = tally_vk_wait,
    .defer_free = tally_vk_defer_free,
    .free_now = tally_vk_free_now,
};

int32_t halide_vulkan_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                          int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                          int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                          void **args, const uint8_t *arg_is_buffer) {
    return tally_device_run(&vulkan_backend, user_context, state, entry_name, blocks_x, blocks_y,
                            blocks_z, threads_x, threads_y, threads_z, shared_mem_bytes, arg_sizes,
                            args, arg_is_buffer);
}

// ---- the testing gate ------------------------------------------------------------------------

// A host gate in front of the queue, so tests can order host calls against device work without
// timing it: closed, every later submission starts with vkCmdWaitEvents on an event that only
// the host sets: when the gate opens, in mode 2 when a thread waits for queued work (the work
// queued so far is let through, later work is held again), and at teardown (which never waits
// on a closed gate).
int32_t tally_testing_vulkan_hold(int32_t mode) {
    const char *routine = "tally_testing_vulkan_hold";
    if (mode < 0 || mode > 2) {
        return tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT, "%s: mode %d is not 0, 1 or 2",
                                  routine, (int)mode);
    }
    int32_t r = ensure_ready(NULL, routine);
    if (r != 0) {
        return r;
    }
    pthread_mutex_lock(&tally_vk_lock);
    tally_vk_open_gate_locked();
    VkResult vr = VK_SUCCESS;
    int32_t failed = mode != 0 && tally_vk_close_gate_locked(mode, &vr) != 0;
    pthread_mutex_unlock(&tally_vk_lock);
    if (failed && vr != VK_SUCCESS) {
        return tally_vk_fail(NULL, TALLY_ERROR_DEVICE_MALLOC_FAILED, routine, "vkCreateEvent", vr);
    }
    if (failed) {
        return tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                                  "%s: more than %d closings before a release", routine,
                                  TALLY_VK_MAX_GATES);
    }
    return 0;
}

#endif  // TALLY_HAVE_VULKAN_HEADERS
