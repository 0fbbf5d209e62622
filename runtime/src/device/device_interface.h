// What the device back ends (device_host.c, cuda/, vulkan/) share beyond
// tally_runtime.h: the halide_device_interface_t each builds from its operations, through which
// device_interface.c dispatches. Layer device.interface (runtime/layers.txt). Not installed, not
// seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_DEVICE_DEVICE_INTERFACE_H
#define TALLY_RUNTIME_SRC_DEVICE_DEVICE_INTERFACE_H

#include "tally_runtime.h"

#include <stddef.h>

// The halide_device_interface_t of a back end whose operations are named <prefix>_device_malloc,
// <prefix>_device_free, <prefix>_copy_to_host, <prefix>_copy_to_device, <prefix>_device_sync,
// <prefix>_device_sync_global and <prefix>_release (no impl table, no reserved pointers).
#define TALLY_DEVICE_INTERFACE(name, prefix)                                                       \
    {                                                                                              \
        name, prefix##_device_malloc, prefix##_device_free, prefix##_copy_to_host,                 \
            prefix##_copy_to_device, prefix##_device_sync, prefix##_device_sync_global,            \
            prefix##_release, NULL, {NULL, NULL, NULL, NULL},                                      \
    }

#endif  // TALLY_RUNTIME_SRC_DEVICE_DEVICE_INTERFACE_H
