// Device entry points: the halide_* calls generated code makes on buffers, dispatched to the
// buffer's (or the given) halide_device_interface_t.
//
// These functions own the bookkeeping every back-end shares, following Halide's rules:
//  - dirty bits: copy_to_host copies only when device_dirty; copy_to_device only when host_dirty;
//    both bits set is an error; a successful copy clears the bit it consumed;
//  - ownership: buf->device_interface names the interface that owns buf->device; moving a buffer
//    to another interface copies it home first and frees the old allocation;
//  - profiling: copies and syncs are counted against the calling thread's current run, and while
//    a call blocks (copy to host, syncs) the thread's context is marked waiting so that the
//    sampler counts it as 0 working threads.
// Back-ends (host here; Vulkan and CUDA elsewhere) implement only the raw operations.

#include "core/error.h"
#include "core/fault.h"
#include "profiler/profiler.h"
#include "profiler/run.h"
#include "tally_runtime.h"

#include <string.h>

// Checks that buf is non-NULL and its device fields are consistent.
static int32_t check_buffer(void *user_context, const halide_buffer_t *buf, const char *routine) {
    if (!buf) {
        return halide_error_buffer_is_null(user_context, routine);
    }
    if (buf->device && !buf->device_interface) {
        return halide_error_no_device_interface(user_context);
    }
    if (!buf->device && buf->device_interface) {
        return halide_error_device_interface_no_device(user_context);
    }
    return 0;
}

static int32_t check_interface(void *user_context, const halide_device_interface_t *iface,
                               const char *routine) {
    if (!iface) {
        return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                                  "%s: device interface is NULL", routine);
    }
    if (!iface->device_malloc || !iface->device_free || !iface->copy_to_host ||
        !iface->copy_to_device || !iface->device_sync || !iface->device_sync_global ||
        !iface->release) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "%s: device interface %s has a NULL function", routine,
                                  iface->name ? iface->name : "(unnamed)");
    }
    return 0;
}

static int32_t check_buffer_and_interface(void *user_context, const halide_buffer_t *buf,
                                          const halide_device_interface_t *iface,
                                          const char *routine) {
    int32_t r = check_buffer(user_context, buf, routine);
    return r != 0 ? r : check_interface(user_context, iface, routine);
}

int32_t halide_device_malloc(void *user_context, halide_buffer_t *buf,
                             const halide_device_interface_t *iface) {
    int32_t r = check_buffer_and_interface(user_context, buf, iface, "halide_device_malloc");
    if (r != 0) {
        return r;
    }
    if (buf->device_interface && buf->device_interface != iface) {
        return tally_report_error(user_context, TALLY_ERROR_INCOMPATIBLE_DEVICE_INTERFACE,
                                  "halide_device_malloc: buffer already has a device allocation "
                                  "on interface %s, asked for %s",
                                  buf->device_interface->name, iface->name);
    }
    if (buf->device) {
        return 0;
    }
    r = tally_fault_check(user_context, TALLY_FAULT_DEVICE_MALLOC,
                          "halide_device_malloc: %s: device allocation of %llu bytes failed",
                          iface->name, (unsigned long long)tally_buffer_size_in_bytes(buf));
    if (r != 0) {
        return r;
    }
    r = iface->device_malloc(user_context, buf, iface);
    if (r != 0) {
        return r;
    }
    buf->device_interface = iface;
    return 0;
}

int32_t halide_device_free(void *user_context, halide_buffer_t *buf) {
    int32_t r = check_buffer(user_context, buf, "halide_device_free");
    if (r != 0) {
        return r;
    }
    if (buf->device_interface) {
        r = buf->device_interface->device_free(user_context, buf);
        if (r != 0) {
            return r;
        }
    }
    buf->device = 0;
    buf->device_interface = NULL;
    tally_buffer_set_device_dirty(buf, false);
    return 0;
}

int32_t halide_device_and_host_malloc(void *user_context, halide_buffer_t *buf,
                                      const halide_device_interface_t *iface) {
    int32_t r =
        check_buffer_and_interface(user_context, buf, iface, "halide_device_and_host_malloc");
    if (r != 0) {
        return r;
    }
    int allocated_host = 0;
    if (!buf->host) {
        buf->host = (uint8_t *)halide_malloc(user_context, tally_buffer_size_in_bytes(buf));
        if (!buf->host) {
            return TALLY_ERROR_OUT_OF_MEMORY;
        }
        allocated_host = 1;
    }
    r = halide_device_malloc(user_context, buf, iface);
    if (r != 0 && allocated_host) {
        halide_free(user_context, buf->host);
        buf->host = NULL;
    }
    return r;
}

int32_t halide_device_and_host_free(void *user_context, halide_buffer_t *buf) {
    int32_t r = halide_device_free(user_context, buf);
    if (r != 0) {
        return r;
    }
    halide_free(user_context, buf->host);
    buf->host = NULL;
    tally_buffer_set_host_dirty(buf, false);
    return 0;
}

void halide_device_host_nop_free(void *user_context, void *obj) {
    (void)user_context;
    (void)obj;
}

int32_t halide_copy_to_host(void *user_context, halide_buffer_t *buf) {
    int32_t r = check_buffer(user_context, buf, "halide_copy_to_host");
    if (r != 0) {
        return r;
    }
    if (tally_buffer_get_host_dirty(buf) && tally_buffer_get_device_dirty(buf)) {
        return halide_error_host_and_device_dirty(user_context);
    }
    if (!tally_buffer_get_device_dirty(buf)) {
        return 0;
    }
    if (!buf->device_interface) {
        return halide_error_no_device_interface(user_context);
    }
    if (!buf->host) {
        return halide_error_host_is_null(user_context, "halide_copy_to_host");
    }
    r = tally_fault_check(user_context, TALLY_FAULT_COPY_TO_HOST,
                          "halide_copy_to_host: %s: copy to host failed",
                          buf->device_interface->name);
    if (r != 0) {
        return r;
    }
    tally_context *waiting = tally_profiler_wait_begin();
    r = buf->device_interface->copy_to_host(user_context, buf);
    tally_profiler_wait_end(waiting);
    if (r != 0) {
        return r;
    }
    tally_buffer_set_device_dirty(buf, false);
    tally_profiler_count_copy(0, tally_buffer_size_in_bytes(buf));
    return 0;
}

int32_t halide_copy_to_device(void *user_context, halide_buffer_t *buf,
                              const halide_device_interface_t *iface) {
    int32_t r = check_buffer(user_context, buf, "halide_copy_to_device");
    if (r != 0) {
        return r;
    }
    if (!iface) {
        iface = buf->device_interface;
    }
    r = check_interface(user_context, iface, "halide_copy_to_device");
    if (r != 0) {
        return r;
    }
    if (tally_buffer_get_host_dirty(buf) && tally_buffer_get_device_dirty(buf)) {
        return halide_error_host_and_device_dirty(user_context);
    }
    if (buf->device_interface && buf->device_interface != iface) {
        // Move the buffer: bring the data home, then drop the old allocation.
        r = halide_copy_to_host(user_context, buf);
        if (r == 0) {
            r = halide_device_free(user_context, buf);
        }
        if (r != 0) {
            return r;
        }
        tally_buffer_set_host_dirty(buf, true);
    }
    if (!buf->device) {
        r = halide_device_malloc(user_context, buf, iface);
        if (r != 0) {
            return r;
        }
    }
    if (!tally_buffer_get_host_dirty(buf)) {
        return 0;
    }
    if (!buf->host) {
        return halide_error_host_is_null(user_context, "halide_copy_to_device");
    }
    r = tally_fault_check(user_context, TALLY_FAULT_COPY_TO_DEVICE,
                          "halide_copy_to_device: %s: copy to device failed", iface->name);
    if (r != 0) {
        return r;
    }
    r = iface->copy_to_device(user_context, buf);
    if (r != 0) {
        return r;
    }
    tally_buffer_set_host_dirty(buf, false);
    tally_profiler_count_copy(1, tally_buffer_size_in_bytes(buf));
    return 0;
}

int32_t halide_device_sync(void *user_context, halide_buffer_t *buf) {
    int32_t r = check_buffer(user_context, buf, "halide_device_sync");
    if (r != 0) {
        return r;
    }
    tally_profiler_count(TALLY_COUNTER_EXPLICIT_SYNCS);
    if (!buf->device_interface) {
        return 0;
    }
    r = tally_fault_check(user_context, TALLY_FAULT_SYNC,
                          "halide_device_sync: %s: device sync failed",
                          buf->device_interface->name);
    if (r != 0) {
        return r;
    }
    tally_context *waiting = tally_profiler_wait_begin();
    r = buf->device_interface->device_sync(user_context, buf);
    tally_profiler_wait_end(waiting);
    return r;
}

int32_t halide_device_sync_global(void *user_context, const halide_device_interface_t *iface) {
    int32_t r = check_interface(user_context, iface, "halide_device_sync_global");
    if (r != 0) {
        return r;
    }
    tally_profiler_count(TALLY_COUNTER_INJECTED_SYNCS);
    r = tally_fault_check(user_context, TALLY_FAULT_SYNC,
                          "halide_device_sync_global: %s: device sync failed", iface->name);
    if (r != 0) {
        return r;
    }
    tally_context *waiting = tally_profiler_wait_begin();
    r = iface->device_sync_global(user_context, iface);
    tally_profiler_wait_end(waiting);
    return r;
}

int32_t halide_device_release(void *user_context, const halide_device_interface_t *iface) {
    int32_t r = check_interface(user_context, iface, "halide_device_release");
    if (r != 0) {
        return r;
    }
    return iface->release(user_context, iface);
}

void halide_device_free_as_destructor(void *user_context, void *buf) {
    (void)halide_device_free(user_context, (halide_buffer_t *)buf);
}

void halide_device_and_host_free_as_destructor(void *user_context, void *buf) {
    (void)halide_device_and_host_free(user_context, (halide_buffer_t *)buf);
}

const tally_kernel_source *tally_find_kernel(const tally_kernel_table *table, const char *name) {
    if (!table || !name) {
        return NULL;
    }
    for (int32_t i = 0; i < table->num_kernels; i++) {
        if (table->kernels[i].name && strcmp(table->kernels[i].name, name) == 0) {
            return &table->kernels[i];
        }
    }
    return NULL;
}
