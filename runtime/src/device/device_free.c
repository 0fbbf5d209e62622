// The free path every device API shares: a device free never waits for the device. Halide's
// lowering frees a producer's device buffer right after its consumer's launch; a free that waited
// there would bill the producer's whole kernel to the consumer. So the back end frees at once
// when no queued work can still use the memory, and otherwise defers the free behind that work
// (counted here as deferred; the back end counts its release when the work completes). Only
// when it cannot even remember the free (no host memory) does the free wait for the buffer's
// work, counted as a `free` wait, and free at once.

#include "device/backend.h"
#include "profiler/device_waits.h"
#include "profiler/profiler.h"
#include "tally_runtime.h"

int32_t tally_device_free(const tally_device_backend *be, void *user_context, halide_buffer_t *buf,
                          const char *routine) {
    int32_t r = be->defer_free(user_context, buf);
    if (r == TALLY_DEVICE_FREE_DEFERRED) {
        tally_device_count_deferred_free();
        return 0;
    }
    if (r != TALLY_DEVICE_FREE_NEEDS_WAIT) {
        return r;
    }
    tally_context *waiting = tally_profiler_wait_begin();
    r = be->wait(user_context, buf, TALLY_DEVICE_WAIT_FREE, TALLY_ERROR_DEVICE_FREE_FAILED,
                 routine);
    tally_profiler_wait_end(waiting);
    return r != 0 ? r : be->free_now(user_context, buf);
}
