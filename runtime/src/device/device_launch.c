// The launch path every device API shares: halide_<api>_run is tally_device_run over the API's
// operations (backend.h). Everything about a launch that does not depend on the API is decided
// here, once: the checks of the call against the module's kernel table (and the one error code
// each fault gets, whatever the API), that an empty grid launches nothing, that compiling runs in
// the one-time compile slot, whether a profile_timestamps launch is timed by the device or
// followed by a sync, and the launch count. A back end only compiles, queues, times and waits.
//
// The table is trusted once its ABI version matches: kernels[0 .. num_kernels) are readable, and
// a kernel's num_args and num_buffers describe its code, or each is -1 when only the code says
// (the tables halide_<api>_initialize_kernels make from Halide's kernels): then the back end
// checks the launch against the compiled kernel. A kernel name may appear once per API; the launch
// takes the one of its own API.

#include "core/error.h"
#include "core/fault.h"
#include "device/backend.h"
#include "profiler/device_timeline.h"
#include "profiler/profiler.h"
#include "tally_runtime.h"

#include <string.h>

// More arguments than any kernel takes: a launch array without its terminating 0 stops here.
#define TALLY_DEVICE_MAX_ARGS 4096

const char *tally_device_api_name(int32_t api) {
    switch (api) {
    case TALLY_DEVICE_API_CUDA:
        return "CUDA";
    case TALLY_DEVICE_API_VULKAN:
        return "Vulkan";
    case TALLY_DEVICE_API_OPENCL:
        return "OpenCL";
    default:
        return "an unknown API";
    }
}

void *tally_device_state(const tally_kernel_table *table, int32_t api) {
    return __atomic_load_n(&table->device_state[api], __ATOMIC_ACQUIRE);
}

void *tally_device_state_install(tally_kernel_table *table, int32_t api, void *fresh) {
    void *expected = NULL;
    if (__atomic_compare_exchange_n(&table->device_state[api], &expected, fresh, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        return fresh;
    }
    return expected;
}

// Finds the kernel `l->entry_name` of the backend's API in `l->table` (ABI checked), setting
// l->kernel and l->kernel_index. A kernel of that name for another API is named in the error.
static int32_t find_kernel(const tally_device_backend *be, void *user_context,
                           tally_device_launch *l) {
    const tally_kernel_table *table = l->table;
    int32_t other_api = TALLY_DEVICE_API_NONE;
    for (int32_t i = 0; i < table->num_kernels; i++) {
        const tally_kernel_source *k = &table->kernels[i];
        if (!k->name || strcmp(k->name, l->entry_name) != 0) {
            continue;
        }
        if (k->device_api == be->api) {
            l->kernel = k;
            l->kernel_index = i;
            return 0;
        }
        if (other_api == TALLY_DEVICE_API_NONE) {
            other_api = k->device_api;
        }
    }
    if (other_api != TALLY_DEVICE_API_NONE) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel '%s' is a %s kernel, not a %s one", l->routine,
                                  l->entry_name, tally_device_api_name(other_api), be->name);
    }
    return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                              "%s: no %s kernel '%s' in the module's kernel table (%d kernels)",
                              l->routine, be->name, l->entry_name, (int)table->num_kernels);
}

// Counts the launch's arguments (up to the 0 size that ends the arrays) and checks them against
// the kernel's: how many, how many buffers.
static int32_t count_arguments(void *user_context, tally_device_launch *l) {
    int32_t n = 0, buffers = 0;
    while (n < TALLY_DEVICE_MAX_ARGS && l->arg_sizes[n] != 0) {
        buffers += l->arg_is_buffer[n] ? 1 : 0;
        n++;
    }
    l->num_args = n;
    l->num_buffers = buffers;
    const tally_kernel_source *k = l->kernel;
    // Either count may be -1: the code says, and the back end checks the launch against the
    // compiled kernel.
    if (k->num_args >= 0 && n != k->num_args) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel '%s' takes %d arguments, the launch passes %d",
                                  l->routine, l->entry_name, (int)k->num_args, (int)n);
    }
    if (k->num_buffers >= 0 && buffers != k->num_buffers) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel '%s' takes %d buffers, the launch passes %d",
                                  l->routine, l->entry_name, (int)k->num_buffers, (int)buffers);
    }
    return 0;
}

// Each argument is there, and each buffer has device memory of the backend's interface.
static int32_t check_arguments(const tally_device_backend *be, void *user_context,
                               const tally_device_launch *l) {
    for (int32_t i = 0; i < l->num_args; i++) {
        if (!l->args[i]) {
            return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                      "%s: kernel '%s', argument %d is NULL", l->routine,
                                      l->entry_name, (int)i);
        }
        if (!l->arg_is_buffer[i]) {
            continue;
        }
        const halide_buffer_t *buf = (const halide_buffer_t *)l->args[i];
        if (buf->device_interface != be->interface || !buf->device) {
            const halide_device_interface_t *on = buf->device_interface;
            return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                      "%s: kernel '%s', argument %d: the buffer has no %s device "
                                      "memory (it is on %s)",
                                      l->routine, l->entry_name, (int)i, be->name,
                                      !on        ? "the host only"
                                      : on->name ? on->name
                                                 : "(unnamed)");
        }
    }
    return 0;
}

int32_t tally_device_run(const tally_device_backend *be, void *user_context, void *state,
                         const char *entry_name, int32_t blocks_x, int32_t blocks_y,
                         int32_t blocks_z, int32_t threads_x, int32_t threads_y, int32_t threads_z,
                         int32_t shared_mem_bytes, const int64_t *arg_sizes, void **args,
                         const uint8_t *arg_is_buffer) {
    const char *routine = be->run_routine;
    // 1, 2: a usable API; the injected fault.
    int32_t r = be->ensure(user_context, routine);
    if (r != 0) {
        return r;
    }
    r = tally_fault_check(user_context, TALLY_FAULT_LAUNCH, "%s: kernel %s: launch failed", routine,
                          entry_name ? entry_name : "(null)");
    if (r != 0) {
        return r;
    }
    // 3: the call against the kernel table.
    if (!state || !entry_name || !arg_sizes || !args || !arg_is_buffer) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT, "%s: the %s is NULL",
                                  routine,
                                  !state        ? "kernel table (state)"
                                  : !entry_name ? "kernel name"
                                                : "argument array");
    }
    tally_device_launch l;
    memset(&l, 0, sizeof l);
    l.routine = routine;
    l.entry_name = entry_name;
    l.table = (tally_kernel_table *)state;
    if (l.table->abi_version != TALLY_RUNTIME_ABI_VERSION) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "%s: kernel '%s': the kernel table has ABI version %d, the "
                                  "runtime expects %d",
                                  routine, entry_name, (int)l.table->abi_version,
                                  TALLY_RUNTIME_ABI_VERSION);
    }
    l.arg_sizes = arg_sizes;
    l.args = args;
    l.arg_is_buffer = arg_is_buffer;
    r = find_kernel(be, user_context, &l);
    if (r == 0) {
        r = count_arguments(user_context, &l);
    }
    if (r != 0) {
        return r;
    }
    // 4: an empty loop nest runs nothing.
    if (blocks_x < 1 || blocks_y < 1 || blocks_z < 1 || threads_x < 1 || threads_y < 1 ||
        threads_z < 1) {
        return 0;
    }
    l.blocks[0] = blocks_x, l.blocks[1] = blocks_y, l.blocks[2] = blocks_z;
    l.threads[0] = threads_x, l.threads[1] = threads_y, l.threads[2] = threads_z;
    l.shared_mem_bytes = shared_mem_bytes;
    // 5, 6: the arguments; the kernel compiled, billed to the one-time compile slot.
    r = check_arguments(be, user_context, &l);
    if (r == 0 && !(be->kernel_ready && be->kernel_ready(&l))) {
        int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_COMPILE);
        r = be->compile(user_context, &l);
        tally_profiler_one_time_end(one_time);
    }
    if (r != 0) {
        return r;
    }
    // 7, 8: the launch, timed by the device when the run asks and the device can.
    l.owner = tally_timeline_owner_now();
    const int want_timestamps = tally_timeline_owner_wants_timestamps(&l.owner);
    const int timed = want_timestamps && be->can_time();
    r = be->launch(user_context, &l, timed);
    if (r != 0) {
        return r;
    }
    tally_profiler_count_launch();
    // 9: no timestamps on this device: time the kernel by waiting for it (sync mode).
    if (want_timestamps && !timed) {
        tally_timeline_set_mode(be->api, TALLY_TIMELINE_SYNC_FALLBACK);
        tally_context *waiting = tally_profiler_wait_begin();
        r = be->wait(user_context, NULL, TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK,
                     TALLY_ERROR_DEVICE_RUN_FAILED, routine);
        tally_profiler_wait_end(waiting);
    }
    return r;
}
