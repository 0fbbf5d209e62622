// The device back-end contract: what a GPU API implements so that what every launch and every
// free does is written once, for all of them. device_launch.c holds the launch path
// (tally_device_run), device_free.c the free path (tally_device_free); each back end
// (cuda/, vulkan/) fills one tally_device_backend with its operations and calls them
// from its halide_<api>_run and its device_free. Layer device.contract (runtime/layers.txt). Not
// installed, not seen by generated code. C11.
//
// A launch, in the order tally_device_run does it (each step may fail and end the launch):
//   1. ensure    the API is usable (it initializes on first use)
//   2.           the injected launch fault (TALLY_FAULT=launch)
//   3.           the call's pointers; the kernel table's ABI version; the kernel, by name, of this
//                back end's API (else a message naming the API it is for); the argument count
//                and the number of buffers against the kernel's (when the table gives them:
//                else the back end checks the count against the compiled kernel at launch)
//   4.           an empty grid (any block or thread extent < 1) launches nothing and returns 0
//   5.           each argument: non-NULL; a buffer has device memory of this back end
//   6. compile   unless kernel_ready says the kernel is ready, in the one-time compile slot
//   7. launch    the kernel, asynchronously, timed with device timestamps when the run asks for
//                them (profile_timestamps) and can_time says the device has them
//   8.           one launch counted
//   9. wait      when the run asks for timestamps and the device has none: the sync fallback
// Error codes, one per fault whatever the API:
//   TALLY_ERROR_BAD_ARGUMENT        a NULL where the ABI needs a pointer: the kernel table, the
//                                   kernel name, an argument array, an argument
//   TALLY_ERROR_NO_DEVICE_INTERFACE the API is unusable here (no loader or driver, no device)
//   TALLY_ERROR_DEVICE_RUN_FAILED   anything else: a table of another ABI version, no kernel of
//                                   that name for this API, an argument count or buffer count
//                                   that differs from the kernel's, a buffer without this API's
//                                   device memory, a grid or argument the device cannot run, a
//                                   failed compile, launch, or sync-fallback wait
//   TALLY_ERROR_OUT_OF_MEMORY       the host ran out of memory
// The operations report their own failures (tally_report_error, the message starting with the
// routine they are given) and return the code; the shared code adds no second report.
#ifndef TALLY_RUNTIME_SRC_DEVICE_BACKEND_H
#define TALLY_RUNTIME_SRC_DEVICE_BACKEND_H

#include "profiler/device_timeline.h"
#include "tally_runtime.h"

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// One launch, checked (steps 1-5 passed) and read-only to the operations.
typedef struct tally_device_launch {
    const char *routine;  // "halide_vulkan_run": every message starts with it
    const char *entry_name;
    tally_kernel_table *table;
    const tally_kernel_source *kernel;  // &table->kernels[kernel_index], of the back end's API
    int32_t kernel_index;
    int32_t blocks[3];   // work groups per dimension, each >= 1
    int32_t threads[3];  // threads per work group per dimension, each >= 1
    int32_t shared_mem_bytes;
    // num_args entries each (== kernel->num_args), num_buffers of them buffers
    // (== kernel->num_buffers): args[i] is a non-NULL halide_buffer_t * with device memory of the
    // back end's interface when arg_is_buffer[i], else a non-NULL pointer to arg_sizes[i] bytes.
    int32_t num_args;
    int32_t num_buffers;
    const int64_t *arg_sizes;
    void *const *args;
    const uint8_t *arg_is_buffer;
    // Whom the kernel's device time is billed to (set just before `launch`).
    tally_timeline_owner owner;
} tally_device_launch;

// What the back end of one device API implements. Every operation may block on the back end's
// own locks; none may call tally_device_run or tally_device_free.
typedef struct tally_device_backend {
    int32_t api;              // TALLY_DEVICE_API_*: the kernels of the table it launches
    const char *name;         // "Vulkan", in messages: "no Vulkan kernel named ..."
    const char *run_routine;  // "halide_vulkan_run"
    const halide_device_interface_t *interface;  // whose device memory its kernels take

    // Makes the API usable, initializing it on first use. Returns 0, or reports why it is not
    // (naming `routine`) and returns TALLY_ERROR_NO_DEVICE_INTERFACE.
    int32_t (*ensure)(void *user_context, const char *routine);

    // Whether the kernel of `l` is compiled for its launch (its work-group size and argument
    // layout included), so that compile would have nothing to do. A quick look, no reports; may
    // say 0 when unsure. NULL: compile is always called.
    int (*kernel_ready)(const tally_device_launch *l);

    // Compiles the kernel of `l` (ensure done): loads or builds whatever the device needs to run
    // it and keeps it with the table (device_state[api]) for later launches, or finds it there.
    // Rejects, before building anything, a kernel the device cannot take (code, work-group size,
    // argument layout). Runs in the one-time compile slot. Returns 0 or the reported error.
    int32_t (*compile)(void *user_context, const tally_device_launch *l);

    // Queues the kernel of `l` (compile done) on the back end's queue without waiting for it; a
    // grid, shared memory or argument the device cannot take is reported here, before anything is
    // queued. `timed` (the run asks for timestamps, and can_time said yes): brackets the kernel
    // with device timestamps billed to l->owner (device_timeline.c); when no more can be taken,
    // the kernel runs untimed and the back end counts TALLY_TIMELINE_OVERFLOWED. Returns 0 or
    // the reported error (TALLY_ERROR_DEVICE_RUN_FAILED, TALLY_ERROR_OUT_OF_MEMORY).
    int32_t (*launch)(void *user_context, const tally_device_launch *l, int timed);

    // Whether launches can be timed with device timestamps now (ensure done). Asked at each
    // launch of a profile_timestamps run; 0 makes the launch sync instead.
    int (*can_time)(void);

    // Blocks until the work queued so far that uses `buf` (NULL: all work queued so far on the
    // back end's queue; a back end with one queue may wait for all of it either way) has
    // completed. Counts the wait in the device-wait ledger under `reason` (a
    // TALLY_DEVICE_WAIT_*) when it blocked; the caller marks the thread waiting for the profiler.
    // Called with the API initialized. Returns 0, or reports the failure with `code` (`routine`:
    // the caller, for messages) and returns `code`.
    int32_t (*wait)(void *user_context, const halide_buffer_t *buf, int32_t reason, int32_t code,
                    const char *routine);

    // Frees buf's device memory (buf->device non-zero, of this back end) without waiting for the
    // device: at once when no queued work can still use it, else behind that work (released by
    // the back end when it completes, counted with tally_device_count_deferred_release). Returns
    // TALLY_DEVICE_FREED or TALLY_DEVICE_FREE_DEFERRED, both with buf->device cleared;
    // TALLY_DEVICE_FREE_NEEDS_WAIT, with nothing changed, when it can do neither (no host memory
    // to remember the free); or a reported error (TALLY_ERROR_DEVICE_FREE_FAILED).
    int32_t (*defer_free)(void *user_context, halide_buffer_t *buf);

    // Frees buf's device memory at once (after a wait for its work) and clears buf->device.
    // Returns 0 or the reported error (TALLY_ERROR_DEVICE_FREE_FAILED).
    int32_t (*free_now)(void *user_context, halide_buffer_t *buf);
} tally_device_backend;

// defer_free's results besides errors (which are negative).
enum {
    TALLY_DEVICE_FREED = 0,
    TALLY_DEVICE_FREE_DEFERRED = 1,
    TALLY_DEVICE_FREE_NEEDS_WAIT = 2,
};

// halide_<api>_run over `backend`: the launch steps above. Arguments as for halide_vulkan_run.
int32_t tally_device_run(const tally_device_backend *backend, void *user_context, void *state,
                         const char *entry_name, int32_t blocks_x, int32_t blocks_y,
                         int32_t blocks_z, int32_t threads_x, int32_t threads_y, int32_t threads_z,
                         int32_t shared_mem_bytes, const int64_t *arg_sizes, void **args,
                         const uint8_t *arg_is_buffer);

// The back end's device_free (buf->device non-zero, of `backend`): never waits for the device
// unless the free cannot be deferred (then waits for buf's work, counted as a
// TALLY_DEVICE_WAIT_FREE wait). Counts a deferred free. Returns 0 (buf->device cleared) or the
// reported error. `routine` names the caller in messages.
int32_t tally_device_free(const tally_device_backend *backend, void *user_context,
                          halide_buffer_t *buf, const char *routine);

// "CUDA", "Vulkan" for a TALLY_DEVICE_API_*; "an unknown API" otherwise.
const char *tally_device_api_name(int32_t api);

// A kernel table's state of back end `api` (table->device_state[api]): NULL until installed.
void *tally_device_state(const tally_kernel_table *table, int32_t api);

// Installs `fresh` as the table's state of `api` unless another thread installed one first
// (concurrent first launches agree on one). Returns the state that won: `fresh`, or the other
// one, in which case the caller frees `fresh`.
void *tally_device_state_install(tally_kernel_table *table, int32_t api, void *fresh);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_DEVICE_BACKEND_H
