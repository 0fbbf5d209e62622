// The driver: loading libcuda and its entry points, and bringing up the device, its primary
// context and the one stream every operation uses; the state every file of the back end
// shares. On first use (cuda_device.c, under tally_cuda_lock) it opens $TALLY_CUDA_LIBRARY if set
// (tests point it at a stand-in), else libcuda.so.1, else libcuda.so; resolves the entry points
// (the _v2 names where cuda.h maps the plain name to them); initializes the driver, picks device
// $TALLY_CUDA_DEVICE (else $HL_GPU_DEVICE, else 0), retains its primary context and creates one
// stream. A failure leaves CUDA unusable with a reason ("libcuda.so.1 not found", "no CUDA
// device", ...) for the caller to report.

#include "core/env.h"
#include "core/error.h"
#include "device/cuda/cuda_internal.h"
#include "tally_runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The symbols, in the order of cuda_api's fields.
static const struct {
    const char *symbol;
    int required;
} cuda_symbols[] = {
    {"cuInit", 1},
    {"cuDriverGetVersion", 1},
    {"cuDeviceGetCount", 1},
    {"cuDeviceGet", 1},
    {"cuDeviceGetName", 1},
    {"cuDeviceGetAttribute", 1},
    {"cuDevicePrimaryCtxRetain", 1},
    {"cuDevicePrimaryCtxRelease_v2", 1},
    {"cuCtxPushCurrent_v2", 1},
    {"cuCtxPopCurrent_v2", 1},
    {"cuCtxSynchronize", 1},
    {"cuStreamCreate", 1},
    {"cuStreamDestroy_v2", 1},
    {"cuStreamSynchronize", 1},
    {"cuMemAlloc_v2", 1},
    {"cuMemFree_v2", 1},
    {"cuMemcpyHtoDAsync_v2", 1},
    {"cuMemcpyDtoHAsync_v2", 1},
    {"cuModuleLoadDataEx", 1},
    {"cuModuleGetFunction", 1},
    {"cuModuleUnload", 1},
    {"cuLaunchKernel", 1},
    {"cuEventCreate", 0},
    {"cuEventDestroy_v2", 0},
    {"cuEventRecord", 0},
    {"cuEventElapsedTime", 0},
    {"cuEventSynchronize", 0},
    {"cuGetErrorName", 0},
    {"cuGetErrorString", 0},
    {"cuMemFreeAsync", 0},
};
_Static_assert(sizeof(cuda_symbols) / sizeof(cuda_symbols[0]) ==
                   sizeof(cuda_api) / sizeof(CUresult(*)(void)),
               "one symbol per cuda_api field");

pthread_mutex_t tally_cuda_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic int32_t tally_cuda_ready;
_Atomic int32_t tally_cuda_shut_down;
cuda_api tally_cu;
tally_cuda_state tally_cuda;

void tally_cuda_describe(CUresult r, char *out, size_t size) {
    const char *name = NULL, *text = NULL;
    if (tally_cu.GetErrorName && tally_cu.GetErrorName(r, &name) != CUDA_SUCCESS) {
        name = NULL;
    }
    if (tally_cu.GetErrorString && tally_cu.GetErrorString(r, &text) != CUDA_SUCCESS) {
        text = NULL;
    }
    snprintf(out, size, "%s (%d)%s%s", name ? name : "CUDA error", (int)r, text ? ": " : "",
             text ? text : "");
}

int32_t tally_cuda_error(void *user_context, int32_t code, const char *what, CUresult r) {
    char d[256];
    tally_cuda_describe(r, d, sizeof d);
    return tally_report_error(user_context, code, "CUDA: %s failed: %s", what, d);
}

static void set_reason(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_reason(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tally_cuda.reason, sizeof tally_cuda.reason, fmt, ap);
    va_end(ap);
}

static int open_driver_locked(void) {
    if (tally_cuda.lib) {
        return 1;
    }
    const char *override = tally_env_string("TALLY_CUDA_LIBRARY");
    const char *candidates[2] = {"libcuda.so.1", "libcuda.so"};
    int n = 2;
    if (override) {
        candidates[0] = override;
        n = 1;
    }
    char first_error[256] = "";
    for (int i = 0; i < n && !tally_cuda.lib; i++) {
        tally_cuda.lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (tally_cuda.lib) {
            tally_cuda.lib_name = candidates[i];
        } else if (i == 0) {
            const char *e = dlerror();
            snprintf(first_error, sizeof first_error, "%s", e ? e : "dlopen failed");
        }
    }
    if (!tally_cuda.lib) {
        set_reason("%s not found (%s); is the NVIDIA driver installed?", candidates[0],
                   first_error);
        return 0;
    }
    void *table[sizeof(cuda_symbols) / sizeof(cuda_symbols[0])];
    for (size_t i = 0; i < sizeof(cuda_symbols) / sizeof(cuda_symbols[0]); i++) {
        table[i] = dlsym(tally_cuda.lib, cuda_symbols[i].symbol);
        if (!table[i] && cuda_symbols[i].required) {
            set_reason("%s has no %s (the driver is too old)", tally_cuda.lib_name,
                       cuda_symbols[i].symbol);
            dlclose(tally_cuda.lib);
            tally_cuda.lib = NULL;
            return 0;
        }
    }
    // dlsym returns object pointers; POSIX guarantees they convert to function pointers.
    _Static_assert(sizeof table == sizeof tally_cu, "cuda_api is a table of pointers");
    memcpy(&tally_cu, table, sizeof tally_cu);
    return 1;
}

// The device TALLY_CUDA_DEVICE (else HL_GPU_DEVICE) names (*name: the variable read), 0 when
// neither is set, or -1 when the value is not a device index (said by the environment rule).
static int device_index(const char **name) {
    *name = tally_env_string("TALLY_CUDA_DEVICE") ? "TALLY_CUDA_DEVICE" : "HL_GPU_DEVICE";
    return (int)tally_env_int(*name, 0, INT_MAX, tally_env_string(*name) ? -1 : 0,
                              "no CUDA device: CUDA is not available");
}

int tally_cuda_init_locked(void) {
    if (atomic_load_explicit(&tally_cuda_ready, memory_order_relaxed)) {
        return 1;
    }
    if (tally_cuda.failed) {
        return 0;
    }
    if (atomic_load(&tally_cuda_shut_down)) {
        set_reason("the process is exiting and CUDA was released");
        return 0;
    }
    tally_cuda.failed = 1;
    if (!open_driver_locked()) {
        return 0;
    }
    char d[256];
    CUresult r = tally_cu.Init(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        tally_cuda_describe(r, d, sizeof d);
        set_reason("no CUDA device (cuInit: %s)", d);
        return 0;
    }
    if (r != CUDA_SUCCESS) {
        tally_cuda_describe(r, d, sizeof d);
        set_reason("cuInit failed: %s", d);
        return 0;
    }
    int count = 0;
    r = tally_cu.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count <= 0) {
        set_reason("no CUDA device (%s reports none)", tally_cuda.lib_name);
        return 0;
    }
    const char *name = "";
    int index = device_index(&name);
    if (index < 0) {
        set_reason("%s=%s is not a device index", name, tally_env_string(name));
        return 0;
    }
    if (index >= count) {
        set_reason("no CUDA device %d (TALLY_CUDA_DEVICE / HL_GPU_DEVICE; %d present)", index,
                   count);
        return 0;
    }
    r = tally_cu.DeviceGet(&tally_cuda.device, index);
    if (r == CUDA_SUCCESS) {
        r = tally_cu.DevicePrimaryCtxRetain(&tally_cuda.context, tally_cuda.device);
    }
    if (r != CUDA_SUCCESS) {
        tally_cuda_describe(r, d, sizeof d);
        set_reason("cannot open the CUDA device: %s", d);
        return 0;
    }
    r = tally_cu.CtxPushCurrent(tally_cuda.context);
    if (r == CUDA_SUCCESS) {
        r = tally_cu.StreamCreate(&tally_cuda.stream, 0);
        CUcontext popped;
        tally_cu.CtxPopCurrent(&popped);
    }
    if (r != CUDA_SUCCESS) {
        tally_cuda_describe(r, d, sizeof d);
        set_reason("cannot create a CUDA stream: %s", d);
        tally_cu.DevicePrimaryCtxRelease(tally_cuda.device);
        return 0;
    }
    tally_cuda.failed = 0;
    tally_cuda.reason[0] = '\0';
    atomic_store_explicit(&tally_cuda_ready, 1, memory_order_release);
    return 1;
}

int32_t tally_cuda_push(void *user_context, int32_t code) {
    CUresult c = tally_cu.CtxPushCurrent(tally_cuda.context);
    return c == CUDA_SUCCESS ? 0 : tally_cuda_error(user_context, code, "cuCtxPushCurrent", c);
}

void tally_cuda_pop(void) {
    CUcontext popped;
    tally_cu.CtxPopCurrent(&popped);
}
