// The host device interface: a stand-in device whose memory is a second host allocation.
//
// It exists so that pipelines lowered for a device run (and are tested) on machines without one,
// and so that the copy and sync bookkeeping in device_interface.c has a back-end whose copies
// really move bytes. buf->device holds the allocation's address; it mirrors the buffer's element
// span (tally_buffer_begin .. + tally_buffer_size_in_bytes). Everything is synchronous, so the
// syncs have nothing to wait for.

#include "device/device_interface.h"
#include "tally_runtime.h"

#include <string.h>

static int32_t host_device_malloc(void *user_context, halide_buffer_t *buf,
                                  const halide_device_interface_t *iface) {
    (void)iface;
    uint64_t size = tally_buffer_size_in_bytes(buf);
    void *p = halide_malloc(user_context, (size_t)size);
    if (!p) {
        return TALLY_ERROR_DEVICE_MALLOC_FAILED;
    }
    buf->device = (uint64_t)(uintptr_t)p;
    return 0;
}

static int32_t host_device_free(void *user_context, halide_buffer_t *buf) {
    halide_free(user_context, (void *)(uintptr_t)buf->device);
    buf->device = 0;
    return 0;
}

static int32_t host_copy_to_host(void *user_context, halide_buffer_t *buf) {
    (void)user_context;
    uint64_t size = tally_buffer_size_in_bytes(buf);
    if (size) {
        memcpy(tally_buffer_begin(buf), (const void *)(uintptr_t)buf->device, (size_t)size);
    }
    return 0;
}

static int32_t host_copy_to_device(void *user_context, halide_buffer_t *buf) {
    (void)user_context;
    uint64_t size = tally_buffer_size_in_bytes(buf);
    if (size) {
        memcpy((void *)(uintptr_t)buf->device, tally_buffer_begin(buf), (size_t)size);
    }
    return 0;
}

static int32_t host_device_sync(void *user_context, halide_buffer_t *buf) {
    (void)user_context;
    (void)buf;
    return 0;
}

static int32_t host_device_sync_global(void *user_context, const halide_device_interface_t *iface) {
    (void)user_context;
    (void)iface;
    return 0;
}

static int32_t host_release(void *user_context, const halide_device_interface_t *iface) {
    (void)user_context;
    (void)iface;
    return 0;
}

static const halide_device_interface_t host_interface = TALLY_DEVICE_INTERFACE("host", host);

const halide_device_interface_t *halide_host_device_interface(void) {
    return &host_interface;
}
