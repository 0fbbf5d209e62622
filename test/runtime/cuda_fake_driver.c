// A stand-in for libcuda.so.1, for the runtime's CUDA tests (CudaTest.cpp): the driver entry
// points runtime/src/device/cuda/ uses, with "device memory" in host memory, so that the
// CUDA interface's bookkeeping (allocation, copies both ways, module caching, argument marshalling,
// context push/pop balance, launch counting, error paths) is tested on machines without a GPU.
//
//   FAKE_CUDA_DEVICES=<n>   device count (default 1); 0 makes cuInit fail with
//                           CUDA_ERROR_NO_DEVICE, as the real driver does.
//
// Modules are the PTX text, copied. A PTX containing "FAIL_LOAD" fails to load with an error log.
// cuModuleGetFunction finds `.entry <name>` in the text. A launch runs the kernel when the fake
// knows its name:
//   fill(int32 *out, int32 value, int32 n):  out[i] = value + i  for i = ctaid.x * ntid.x +
//                                            tid.x < n (x dimension only)
//   fail_launch(...):                        the launch fails (CUDA_ERROR_LAUNCH_FAILED)
// and otherwise only records the launch. fake_cuda_get_stats() returns the counters.
//
// Timing: the stream has a device clock that each successful launch advances by the kernel
// duration fake_cuda_set_kernel_ns() set last (default 1 ms), each copy by its bytes times
// fake_cuda_set_copy_ns_per_byte() (default 0), and fake_cuda_advance_clock() by any amount (idle
// time), so event intervals are exact. cuEventRecord stamps an event with the clock;
// cuEventElapsedTime returns the difference in ms; cuEventQuery succeeds once an event was
// recorded; cuEventSynchronize calls the hook fake_cuda_set_event_sync_hook() installed (tests
// script the host clock with it: what the host sees while it waits for an event).
//
// Frees: work is "queued" on the stream from a launch or a copy until the next stream or context
// sync; cuMemFree while work is queued counts as a blocking free (a real driver may wait for the
// device there). cuMemFreeAsync frees in stream order (counted apart); with
// FAKE_CUDA_NO_MEMPOOLS=1 it returns CUDA_ERROR_NOT_SUPPORTED, as on devices without memory pools.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fake_driver.h"

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct fake_context *CUcontext;
typedef struct fake_module *CUmodule;
typedef struct fake_function *CUfunction;
typedef struct fake_stream *CUstream;
typedef int CUjit_option;

struct fake_context {
    int retained;
};
struct fake_module {
    char *ptx;
    // Functions belong to their module, as in the real driver.
    struct fake_function *functions[8];
    int num_functions;
};
struct fake_function {
    char name[64];
};
struct fake_stream {
    int unused;
};
struct fake_event {
    uint64_t stamp_ns;
    int recorded;
};
typedef struct fake_event *CUevent;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

#define EXPORT __attribute__((visibility("default")))

static fake_cuda_stats stats;
static struct fake_context context;
static struct fake_stream stream;
static int initialized;
static uint64_t device_clock_ns, kernel_ns = 1000000;
static uint64_t copy_ns_per_byte;
static fake_cuda_event_sync_hook_fn event_sync_hook;
static int stream_queued;  // a launch or copy since the last sync

EXPORT void fake_cuda_set_kernel_ns(uint64_t ns) {
    kernel_ns = ns;
}

EXPORT void fake_cuda_set_copy_ns_per_byte(uint64_t ns) {
    copy_ns_per_byte = ns;
}

EXPORT void fake_cuda_advance_clock(uint64_t ns) {
    device_clock_ns += ns;
}

EXPORT void fake_cuda_set_event_sync_hook(fake_cuda_event_sync_hook_fn hook) {
    event_sync_hook = hook;
}

EXPORT const fake_cuda_stats *fake_cuda_get_stats(void) {
    return &stats;
}

static int device_count(void) {
    const char *s = getenv("FAKE_CUDA_DEVICES");
    return s && *s ? atoi(s) : 1;
}

EXPORT CUresult cuInit(unsigned int flags) {
    (void)flags;
    stats.inits++;
    if (device_count() <= 0) {
        return CUDA_ERROR_NO_DEVICE;
    }
    initialized = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *version) {
    *version = 12000;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
    *count = initialized ? device_count() : 0;
    return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (ordinal < 0 || ordinal >= device_count()) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice device) {
    (void)device;
    snprintf(name, (size_t)len, "Fake CUDA device");
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    (void)device;
    *value = attribute == 75 ? 7 : attribute == 76 ? 5 : 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice device) {
    (void)device;
    context.retained++;
    stats.ctx_retains++;
    *ctx = &context;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    (void)device;
    context.retained--;
    stats.ctx_releases++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    if (ctx != &context || context.retained <= 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    stats.ctx_depth++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    stats.ctx_depth--;
    if (ctx) {
        *ctx = &context;
    }
    return CUDA_SUCCESS;
}

// Operations on the device need the context current.
static CUresult need_context(void) {
    return stats.ctx_depth > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuCtxSynchronize(void) {
    stats.ctx_syncs++;
    stream_queued = 0;
    return need_context();
}

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
    (void)flags;
    stats.streams_created++;
    *s = &stream;
    return need_context();
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
    (void)s;
    stats.streams_destroyed++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s) {
    stats.stream_syncs += s == &stream;
    stream_queued = s == &stream ? 0 : stream_queued;
    return need_context();
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
    if (need_context() != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (bytes == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    void *p = malloc(bytes);
    if (!p) {
        return 2;  // CUDA_ERROR_OUT_OF_MEMORY
    }
    memset(p, 0xcd, bytes);
    stats.allocs++;
    stats.live_allocs++;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
    if (need_context() != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    free((void *)(uintptr_t)ptr);
    stats.frees++;
    stats.live_allocs--;
    stats.blocking_frees += stream_queued;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream s) {
    if (need_context() != CUDA_SUCCESS || s != &stream) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    const char *no_pools = getenv("FAKE_CUDA_NO_MEMPOOLS");
    if (no_pools && *no_pools && strcmp(no_pools, "0") != 0) {
        return 801;  // CUDA_ERROR_NOT_SUPPORTED
    }
    free((void *)(uintptr_t)ptr);
    stats.frees++;
    stats.live_allocs--;
    stats.async_frees++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
    if (need_context() != CUDA_SUCCESS || s != &stream) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    memcpy((void *)(uintptr_t)dst, src, bytes);
    stats.copies_to_device++;
    device_clock_ns += copy_ns_per_byte * bytes;
    stream_queued = 1;
    stats.bytes_to_device += bytes;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
    if (need_context() != CUDA_SUCCESS || s != &stream) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    stats.copies_to_host++;
    device_clock_ns += copy_ns_per_byte * bytes;
    stream_queued = 1;
    stats.bytes_to_host += bytes;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int num_options,
                                   CUjit_option *options, void **values) {
    if (need_context() != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    const char *ptx = (const char *)image;
    snprintf(stats.last_ptx, sizeof stats.last_ptx, "%s", ptx);
    if (strstr(ptx, "FAIL_LOAD")) {
        char *log = NULL;
        size_t size = 0;
        for (unsigned int i = 0; i < num_options; i++) {
            if (options[i] == CU_JIT_ERROR_LOG_BUFFER) {
                log = (char *)values[i];
            } else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
                size = (size_t)(uintptr_t)values[i];
            }
        }
        if (log && size) {
            snprintf(log, size, "ptxas fatal   : fake syntax error at FAIL_LOAD");
        }
        return CUDA_ERROR_INVALID_PTX;
    }
    struct fake_module *m = (struct fake_module *)calloc(1, sizeof *m);
    m->ptx = strdup(ptx);
    stats.module_loads++;
    *module = m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *fn, CUmodule module, const char *name) {
    char entry[96];
    snprintf(entry, sizeof entry, ".entry %s", name);
    if (!strstr(module->ptx, entry)) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (module->num_functions == 8) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fake_function *f = (struct fake_function *)calloc(1, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    module->functions[module->num_functions++] = f;
    *fn = f;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule module) {
    for (int i = 0; i < module->num_functions; i++) {
        free(module->functions[i]);
    }
    free(module->ptx);
    free(module);
    stats.module_unloads++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction fn, unsigned int grid_x, unsigned int grid_y,
                               unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                               unsigned int block_z, unsigned int shared_mem_bytes, CUstream s,
                               void **params, void **extra) {
    (void)extra;
    if (need_context() != CUDA_SUCCESS || s != &stream) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    snprintf(stats.last_kernel, sizeof stats.last_kernel, "%s", fn->name);
    stream_queued = 1;
    stats.grid[0] = grid_x, stats.grid[1] = grid_y, stats.grid[2] = grid_z;
    stats.block[0] = block_x, stats.block[1] = block_y, stats.block[2] = block_z;
    stats.shared_mem_bytes = shared_mem_bytes;
    if (strcmp(fn->name, "fail_launch") == 0) {
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    stats.launches++;
    device_clock_ns += kernel_ns;
    if (strcmp(fn->name, "fill") == 0) {
        CUdeviceptr out = *(const CUdeviceptr *)params[0];
        int32_t value = *(const int32_t *)params[1];
        int32_t n = *(const int32_t *)params[2];
        stats.last_pointer_arg = out;
        for (unsigned int b = 0; b < grid_x; b++) {
            for (unsigned int t = 0; t < block_x; t++) {
                int64_t i = (int64_t)b * block_x + t;
                if (i < n) {
                    ((int32_t *)(uintptr_t)out)[i] = value + (int32_t)i;
                }
            }
        }
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **name) {
    switch (error) {
    case CUDA_ERROR_NO_DEVICE:
        *name = "CUDA_ERROR_NO_DEVICE";
        return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_PTX:
        *name = "CUDA_ERROR_INVALID_PTX";
        return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED:
        *name = "CUDA_ERROR_LAUNCH_FAILED";
        return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND:
        *name = "CUDA_ERROR_NOT_FOUND";
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **text) {
    const char *name;
    if (cuGetErrorName(error, &name) != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *text = "fake driver error";
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags) {
    (void)flags;
    if (need_context() != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *event = (CUevent)calloc(1, sizeof(struct fake_event));
    stats.events_created++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent event) {
    free(event);
    stats.events_destroyed++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent event, CUstream s) {
    if (need_context() != CUDA_SUCCESS || s != &stream || !event) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    event->stamp_ns = device_clock_ns;
    event->recorded = 1;
    stats.events_recorded++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent event) {
    return event && event->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    if (!start || !end || !start->recorded || !end->recorded) {
        return CUDA_ERROR_NOT_READY;
    }
    *ms = (float)((double)((int64_t)(end->stamp_ns - start->stamp_ns)) / 1e6);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventSynchronize(CUevent event) {
    if (!event || !event->recorded) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    stats.event_syncs++;
    if (event_sync_hook) {
        event_sync_hook();
    }
    return CUDA_SUCCESS;
}
