// The CUDA device interface: the CUDA driver API, loaded at run time with dlopen so that machines
// without a driver build, link and run everything else.
//
// Loading: the first use (halide_cuda_device_interface, halide_cuda_run) opens $TALLY_CUDA_LIBRARY
// if set (tests point it at a stand-in), else libcuda.so.1, else libcuda.so; resolves the entry
// points below (the _v2 names where cuda.h maps the plain name to them); initializes the driver,
// picks device $TALLY_CUDA_DEVICE (else $HL_GPU_DEVICE, else 0), retains its primary context and
// creates one stream. A failure leaves CUDA unusable with a reason ("libcuda.so.1 not found",
// "no CUDA device", ...): halide_cuda_device_interface() reports it once through halide_error and
// returns NULL; halide_cuda_run() reports it and returns TALLY_ERROR_NO_DEVICE_INTERFACE each
// time. halide_device_release() syncs, unloads the kernels, destroys the stream and releases the
// context; the next use starts again from the top. At exit the same release runs once more and is
// final: device memory freed after it (destructors running late) counts as already gone.
//
// Ordering: every operation runs with the context pushed, on the one stream. Copies to the device
// and launches are asynchronous (cuMemcpyHtoDAsync from pageable memory returns once the driver
// has staged the data, so the host buffer may change at once); a copy to the host waits for the
// stream. device_sync waits for the stream, device_sync_global for the whole context
// (cuCtxSynchronize), which is also where asynchronous kernel faults surface.
//
// Memory: buf->device is a CUdeviceptr to an allocation mirroring the buffer's span
// (tally_buffer_begin .. + tally_buffer_size_in_bytes), as for the host interface. Frees never
// wait for the device (see "stream-ordered frees"). A kernel
// receives the address of the element buf->host points at, inside that span.
//
// Kernels: each tally_kernel_source holds one PTX module (NUL-terminated text). A table's
// device_state[TALLY_DEVICE_API_CUDA] points at a record installed once with compare-exchange;
// it holds each kernel's CUmodule and CUfunction, loaded on first launch under a lock (the PTX
// JIT's error log goes into the report). Records live as long as the process (a table may be
// used again after a release); release only unloads their modules.
//
// No header of the CUDA toolkit is needed: the few driver types and constants are declared here
// with the values and ABI of cuda.h.

#include "core/buffer.h"
#include "core/clock.h"
#include "core/context.h"
#include "core/error.h"
#include "core/fault.h"
#include "device/device_interface.h"
#include "profiler/device_timeline.h"
#include "profiler/device_waits.h"
#include "profiler/profiler.h"
#include "tally_runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the driver API, as cuda.h declares it ---------------------------------------------------

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef int CUjit_option;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CU_EVENT_DEFAULT = 0,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

typedef struct cuda_api {
    CUresult (*Init)(unsigned int flags);
    CUresult (*DriverGetVersion)(int *version);
    CUresult (*DeviceGetCount)(int *count);
    CUresult (*DeviceGet)(CUdevice *device, int ordinal);
    CUresult (*DeviceGetName)(char *name, int len, CUdevice device);
    CUresult (*DeviceGetAttribute)(int *value, int attribute, CUdevice device);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice device);
    CUresult (*CtxPushCurrent)(CUcontext ctx);
    CUresult (*CtxPopCurrent)(CUcontext *ctx);
    CUresult (*CtxSynchronize)(void);
    CUresult (*StreamCreate)(CUstream *stream, unsigned int flags);
    CUresult (*StreamDestroy)(CUstream stream);
    CUresult (*StreamSynchronize)(CUstream stream);
    CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*MemFree)(CUdeviceptr ptr);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
    CUresult (*MemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*ModuleLoadDataEx)(CUmodule *module, const void *image, unsigned int num_options,
                                 CUjit_option *options, void **values);
    CUresult (*ModuleGetFunction)(CUfunction *fn, CUmodule module, const char *name);
    CUresult (*ModuleUnload)(CUmodule module);
    CUresult (*LaunchKernel)(CUfunction fn, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_mem_bytes, CUstream stream,
                             void **params, void **extra);
    // Optional: events time launches under profile_timestamps (without them: a sync per launch).
    CUresult (*EventCreate)(CUevent *event, unsigned int flags);
    CUresult (*EventDestroy)(CUevent event);
    CUresult (*EventRecord)(CUevent event, CUstream stream);
    CUresult (*EventElapsedTime)(float *ms, CUevent start, CUevent end);
    // Optional: without it, timed commands get durations but no place on the host clock.
    CUresult (*EventSynchronize)(CUevent event);
    // Optional: only for messages.
    CUresult (*GetErrorName)(CUresult error, const char **name);
    CUresult (*GetErrorString)(CUresult error, const char **text);
    // Optional (driver 11.2+): a free ordered on the stream; CUDA_ERROR_NOT_SUPPORTED on devices
    // without memory pools.
    CUresult (*MemFreeAsync)(CUdeviceptr ptr, CUstream stream);
} cuda_api;

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

// ---- process state ----------------------------------------------------------------------------

// The loaded kernels of one tally_kernel_table.
typedef struct cuda_kernels {
    struct cuda_kernels *next;  // every record, for release
    int32_t num_kernels;
    CUmodule *modules;               // [num_kernels], guarded by cuda_lock
    _Atomic(CUfunction) *functions;  // [num_kernels]; NULL until loaded
} cuda_kernels;

static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
// 1 while the driver is initialized; read without the lock by the fast paths.
static _Atomic int32_t cuda_ready;
// Guarded by cuda_lock.
static int32_t cuda_failed, cuda_failure_reported, cuda_atexit_registered;
// Set by the exit handler: CUDA is released for good (no re-initialization during exit).
static _Atomic int32_t cuda_shut_down;
static char cuda_reason[512];
static void *cuda_lib;
static const char *cuda_lib_name;
// Set before cuda_ready becomes 1, read-only while it is.
static cuda_api cu;
static CUdevice cuda_device;
static CUcontext cuda_context;
static CUstream cuda_stream;
static cuda_kernels *cuda_all_kernels;

static const halide_device_interface_t cuda_interface;

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", as far as the driver can say.
static void describe(CUresult r, char *out, size_t size) {
    const char *name = NULL, *text = NULL;
    if (cu.GetErrorName && cu.GetErrorName(r, &name) != CUDA_SUCCESS) {
        name = NULL;
    }
    if (cu.GetErrorString && cu.GetErrorString(r, &text) != CUDA_SUCCESS) {
        text = NULL;
    }
    snprintf(out, size, "%s (%d)%s%s", name ? name : "CUDA error", (int)r, text ? ": " : "",
             text ? text : "");
}

static int32_t cuda_error(void *user_context, int32_t code, const char *what, CUresult r) {
    char d[256];
    describe(r, d, sizeof d);
    return tally_report_error(user_context, code, "CUDA: %s failed: %s", what, d);
}

static void set_reason(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_reason(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cuda_reason, sizeof cuda_reason, fmt, ap);
    va_end(ap);
}

static void cuda_release_locked(void);

static void cuda_atexit(void) {
    pthread_mutex_lock(&cuda_lock);
    cuda_release_locked();
    atomic_store(&cuda_shut_down, 1);
    pthread_mutex_unlock(&cuda_lock);
}

static int open_driver_locked(void) {
    if (cuda_lib) {
        return 1;
    }
    const char *override = getenv("TALLY_CUDA_LIBRARY");
    const char *candidates[2] = {"libcuda.so.1", "libcuda.so"};
    int n = 2;
    if (override && *override) {
        candidates[0] = override;
        n = 1;
    }
    char first_error[256] = "";
    for (int i = 0; i < n && !cuda_lib; i++) {
        cuda_lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (cuda_lib) {
            cuda_lib_name = candidates[i];
        } else if (i == 0) {
            const char *e = dlerror();
            snprintf(first_error, sizeof first_error, "%s", e ? e : "dlopen failed");
        }
    }
    if (!cuda_lib) {
        set_reason("%s not found (%s); is the NVIDIA driver installed?", candidates[0],
                   first_error);
        return 0;
    }
    void *table[sizeof(cuda_symbols) / sizeof(cuda_symbols[0])];
    for (size_t i = 0; i < sizeof(cuda_symbols) / sizeof(cuda_symbols[0]); i++) {
        table[i] = dlsym(cuda_lib, cuda_symbols[i].symbol);
        if (!table[i] && cuda_symbols[i].required) {
            set_reason("%s has no %s (the driver is too old)", cuda_lib_name,
                       cuda_symbols[i].symbol);
            dlclose(cuda_lib);
            cuda_lib = NULL;
            return 0;
        }
    }
    // dlsym returns object pointers; POSIX guarantees they convert to function pointers.
    _Static_assert(sizeof table == sizeof cu, "cuda_api is a table of pointers");
    memcpy(&cu, table, sizeof cu);
    return 1;
}

// The device TALLY_CUDA_DEVICE (else HL_GPU_DEVICE) names, 0 when neither is set, or -1 when
// the value is not a whole decimal index (the caller says so, naming the variable's value).
static int device_index(const char **value) {
    const char *s = getenv("TALLY_CUDA_DEVICE");
    if (!s || !*s) {
        s = getenv("HL_GPU_DEVICE");
    }
    *value = s && *s ? s : "";
    if (!**value) {
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > INT_MAX || !(s[0] >= '0' && s[0] <= '9')) {
        return -1;
    }
    return (int)v;
}

// Initializes the driver, device, context and stream. Returns 1 when CUDA is usable; otherwise
// cuda_reason says why.
static int cuda_init_locked(void) {
    if (atomic_load_explicit(&cuda_ready, memory_order_relaxed)) {
        return 1;
    }
    if (cuda_failed) {
        return 0;
    }
    if (atomic_load(&cuda_shut_down)) {
        set_reason("the process is exiting and CUDA was released");
        return 0;
    }
    cuda_failed = 1;
    if (!open_driver_locked()) {
        return 0;
    }
    char d[256];
    CUresult r = cu.Init(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        describe(r, d, sizeof d);
        set_reason("no CUDA device (cuInit: %s)", d);
        return 0;
    }
    if (r != CUDA_SUCCESS) {
        describe(r, d, sizeof d);
        set_reason("cuInit failed: %s", d);
        return 0;
    }
    int count = 0;
    r = cu.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count <= 0) {
        set_reason("no CUDA device (%s reports none)", cuda_lib_name);
        return 0;
    }
    const char *value = "";
    int index = device_index(&value);
    if (index < 0) {
        set_reason("TALLY_CUDA_DEVICE / HL_GPU_DEVICE is '%s', not a device index", value);
        return 0;
    }
    if (index >= count) {
        set_reason("no CUDA device %d (TALLY_CUDA_DEVICE / HL_GPU_DEVICE; %d present)", index,
                   count);
        return 0;
    }
    r = cu.DeviceGet(&cuda_device, index);
    if (r == CUDA_SUCCESS) {
        r = cu.DevicePrimaryCtxRetain(&cuda_context, cuda_device);
    }
    if (r != CUDA_SUCCESS) {
        describe(r, d, sizeof d);
        set_reason("cannot open the CUDA device: %s", d);
        return 0;
    }
    r = cu.CtxPushCurrent(cuda_context);
    if (r == CUDA_SUCCESS) {
        r = cu.StreamCreate(&cuda_stream, 0);
        CUcontext popped;
        cu.CtxPopCurrent(&popped);
    }
    if (r != CUDA_SUCCESS) {
        describe(r, d, sizeof d);
        set_reason("cannot create a CUDA stream: %s", d);
        cu.DevicePrimaryCtxRelease(cuda_device);
        return 0;
    }
    cuda_failed = 0;
    cuda_reason[0] = '\0';
    atomic_store_explicit(&cuda_ready, 1, memory_order_release);
    if (!cuda_atexit_registered) {
        cuda_atexit_registered = 1;
        atexit(cuda_atexit);
    }
    return 1;
}

// 0 when CUDA is usable. Otherwise reports why through halide_error (always when `routine` is
// given, else only the first time) and returns TALLY_ERROR_NO_DEVICE_INTERFACE.
static int32_t cuda_ensure(void *user_context, const char *routine) {
    if (atomic_load_explicit(&cuda_ready, memory_order_acquire)) {
        return 0;
    }
    pthread_mutex_lock(&cuda_lock);
    int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_DEVICE_INIT);
    int ok = cuda_init_locked();
    tally_profiler_one_time_end(one_time);
    char reason[sizeof cuda_reason];
    memcpy(reason, cuda_reason, sizeof reason);
    int report = !ok && (routine || !cuda_failure_reported);
    if (report && !routine) {
        cuda_failure_reported = 1;
    }
    pthread_mutex_unlock(&cuda_lock);
    if (ok) {
        return 0;
    }
    if (report) {
        return tally_report_error(user_context, TALLY_ERROR_NO_DEVICE_INTERFACE,
                                  "%s%sCUDA is not available: %s", routine ? routine : "",
                                  routine ? ": " : "", reason);
    }
    return TALLY_ERROR_NO_DEVICE_INTERFACE;
}

// Makes the context current for one operation; pair with cuda_leave.
static int32_t cuda_enter(void *user_context, int32_t code) {
    int32_t r = cuda_ensure(user_context, "CUDA");
    if (r != 0) {
        return r;
    }
    CUresult c = cu.CtxPushCurrent(cuda_context);
    return c == CUDA_SUCCESS ? 0 : cuda_error(user_context, code, "cuCtxPushCurrent", c);
}

static void cuda_leave(void) {
    CUcontext popped;
    cu.CtxPopCurrent(&popped);
}

// ---- command timing (profile_timestamps) -------------------------------------------------------
//
// A launch or a copy made while a profile_timestamps run is current is bracketed by two events
// recorded on the stream. The pairs are read at the next blocking point (a copy to the host, a
// sync, release), where the stream is idle anyway: cuEventElapsedTime gives each command's
// duration, billed to the slot that issued it (a kernel to its Func, a copy to its copy slot).
//
// Placing commands on the host clock: events have no absolute time, only differences, so the
// device clock here is the time since an anchor event. The first timed command records the
// anchor (device time 0) ahead of its own events. At each blocking point with timed commands the
// clocks are paired (pair_clocks_locked): TALLY_CUDA_CLOCK_READINGS times, read the host clock,
// record an event, cuEventSynchronize it, read the host clock again; the event completed inside
// that window, so the reading is its midpoint with half the window as deviation, and
// device_timeline.c keeps the tightest and fits the drift across pairings. A command's begin is
// then anchor time + cuEventElapsedTime(anchor, begin), mapped to the host clock; the kept event
// becomes the next anchor, so elapsed times stay short (float milliseconds). The stream is idle
// at a blocking point, so these syncs wait for nothing but the event itself.
//
// Events are pooled. Without the event entry points, a launch is followed by a stream sync
// instead (counted as a timestamp_fallback wait); without cuEventSynchronize, commands are timed
// as durations only. All of it runs with the context pushed; timing_lock guards the lists.

#define TALLY_CUDA_CLOCK_READINGS 3

typedef struct cuda_timed_command {
    CUevent begin, end;
    tally_timeline_owner owner;
} cuda_timed_command;

static pthread_mutex_t timing_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_timed_command *timed;  // commands not read yet
static int32_t num_timed, cap_timed;
static CUevent *free_events;
static int32_t num_free_events, cap_free_events;
static CUevent anchor;  // NULL: none yet (no timed command since initialization)
static double anchor_device_ns;

static int cuda_has_events(void) {
    return cu.EventCreate && cu.EventDestroy && cu.EventRecord && cu.EventElapsedTime;
}

// An event from the pool, or a new one; NULL on failure. timing_lock held.
static CUevent take_event_locked(void) {
    if (num_free_events > 0) {
        return free_events[--num_free_events];
    }
    CUevent e = NULL;
    return cu.EventCreate(&e, CU_EVENT_DEFAULT) == CUDA_SUCCESS ? e : NULL;
}

static void give_event_locked(CUevent e) {
    if (!e) {
        return;
    }
    if (num_free_events == cap_free_events) {
        int32_t cap = cap_free_events ? 2 * cap_free_events : 64;
        CUevent *grown = (CUevent *)realloc(free_events, (size_t)cap * sizeof(CUevent));
        if (!grown) {
            cu.EventDestroy(e);
            return;
        }
        free_events = grown;
        cap_free_events = cap;
    }
    free_events[num_free_events++] = e;
}

// Records the begin event of a timed command (and the anchor, the first time); *begin NULL when
// it could not (counted).
static void begin_timed_command(CUevent *begin) {
    pthread_mutex_lock(&timing_lock);
    if (!anchor) {
        anchor = take_event_locked();
        if (anchor && cu.EventRecord(anchor, cuda_stream) != CUDA_SUCCESS) {
            give_event_locked(anchor);
            anchor = NULL;
        }
        anchor_device_ns = 0;
    }
    *begin = take_event_locked();
    if (*begin && cu.EventRecord(*begin, cuda_stream) != CUDA_SUCCESS) {
        give_event_locked(*begin);
        *begin = NULL;
    }
    if (!*begin) {
        tally_timeline_count_problem(TALLY_TIMELINE_OVERFLOWED);
    }
    pthread_mutex_unlock(&timing_lock);
}

// Records the end event after a successful command and keeps the pair for the next blocking point.
static void end_timed_command(CUevent begin, int issued, const tally_timeline_owner *owner) {
    pthread_mutex_lock(&timing_lock);
    CUevent end = issued ? take_event_locked() : NULL;
    int ok = end && cu.EventRecord(end, cuda_stream) == CUDA_SUCCESS;
    if (ok && num_timed == cap_timed) {
        int32_t cap = cap_timed ? 2 * cap_timed : 64;
        cuda_timed_command *grown =
            (cuda_timed_command *)realloc(timed, (size_t)cap * sizeof(cuda_timed_command));
        ok = grown != NULL;
        if (ok) {
            timed = grown;
            cap_timed = cap;
        }
    }
    if (ok) {
        cuda_timed_command *t = &timed[num_timed++];
        t->begin = begin;
        t->end = end;
        t->owner = *owner;
        tally_timeline_set_mode(TALLY_DEVICE_API_CUDA, TALLY_TIMELINE_EVENTS);
    } else {
        if (issued) {
            tally_timeline_count_problem(TALLY_TIMELINE_OVERFLOWED);
        }
        give_event_locked(begin);
        give_event_locked(end);
    }
    pthread_mutex_unlock(&timing_lock);
}

// The device time of `e` (recorded after the anchor); 0 when it cannot be read.
static int device_time_locked(CUevent e, double *device_ns) {
    float ms = 0;
    if (!anchor || cu.EventElapsedTime(&ms, anchor, e) != CUDA_SUCCESS || ms < 0) {
        return 0;
    }
    *device_ns = anchor_device_ns + (double)ms * 1e6;
    return 1;
}

// Pairs the device and host clocks (see above) on the idle stream; returns the kept event (to
// become the anchor) and its device time, or NULL. timing_lock held.
static CUevent pair_clocks_locked(double *kept_device_ns) {
    if (!cu.EventSynchronize || !anchor) {
        return NULL;
    }
    CUevent events[TALLY_CUDA_CLOCK_READINGS];
    tally_clock_reading readings[TALLY_CUDA_CLOCK_READINGS];
    int32_t n = 0;
    for (int32_t i = 0; i < TALLY_CUDA_CLOCK_READINGS; i++) {
        CUevent e = take_event_locked();
        if (!e) {
            break;
        }
        uint64_t before = tally_now_ns();
        int ok = cu.EventRecord(e, cuda_stream) == CUDA_SUCCESS &&
                 cu.EventSynchronize(e) == CUDA_SUCCESS;
        uint64_t after = tally_now_ns();
        if (ok && device_time_locked(e, &readings[n].device_ns)) {
            readings[n].host_ns = before + (after - before) / 2;
            readings[n].deviation_ns = (after - before) / 2;
            events[n++] = e;
        } else {
            give_event_locked(e);
        }
    }
    int32_t best = tally_timeline_clock_pair(TALLY_DEVICE_API_CUDA, readings, n);
    for (int32_t i = 0; i < n; i++) {
        if (i != best) {
            give_event_locked(events[i]);
        }
    }
    if (best < 0) {
        return NULL;
    }
    *kept_device_ns = readings[best].device_ns;
    return events[best];
}

// At a blocking point (the stream idle, the context pushed): pairs the clocks, bills every timed
// command and moves the anchor to the kept reading.
static void read_timed_commands(void) {
    if (!cuda_has_events()) {
        return;
    }
    pthread_mutex_lock(&timing_lock);
    if (num_timed == 0) {
        pthread_mutex_unlock(&timing_lock);
        return;
    }
    double next_anchor_ns = 0;
    CUevent next_anchor = pair_clocks_locked(&next_anchor_ns);
    for (int32_t i = 0; i < num_timed; i++) {
        cuda_timed_command *t = &timed[i];
        float ms = 0;
        CUresult c = cu.EventElapsedTime(&ms, t->begin, t->end);
        if (c == CUDA_SUCCESS && ms >= 0) {
            double begin_ns = 0;
            uint64_t host_begin = 0;
            int placed = device_time_locked(t->begin, &begin_ns) &&
                         tally_timeline_clock_to_host(TALLY_DEVICE_API_CUDA, begin_ns, &host_begin);
            tally_timeline_add(&t->owner, (uint64_t)((double)ms * 1e6 + 0.5), placed, host_begin);
        } else {
            tally_timeline_count_problem(c == CUDA_SUCCESS ? TALLY_TIMELINE_UNMATCHED
                                                           : TALLY_TIMELINE_LOST);
        }
        give_event_locked(t->begin);
        give_event_locked(t->end);
    }
    num_timed = 0;
    if (next_anchor) {
        give_event_locked(anchor);
        anchor = next_anchor;
        anchor_device_ns = next_anchor_ns;
    }
    pthread_mutex_unlock(&timing_lock);
}

// Release: bills what is left (after the context synchronized), destroys every event and
// forgets the clock pairings (the next initialization starts a new device clock).
static void release_timing(void) {
    read_timed_commands();
    pthread_mutex_lock(&timing_lock);
    if (anchor) {
        cu.EventDestroy(anchor);
        anchor = NULL;
    }
    for (int32_t i = 0; i < num_free_events; i++) {
        cu.EventDestroy(free_events[i]);
    }
    num_free_events = 0;
    pthread_mutex_unlock(&timing_lock);
    tally_timeline_clock_forget(TALLY_DEVICE_API_CUDA);
}

// ---- stream-ordered frees ----------------------------------------------------------------------
//
// halide_device_free never waits for the device (cuMemFree may synchronize it; a free that waited
// right after a consumer's launch would bill the producer's kernel to the consumer). With
// cuMemFreeAsync the free is queued on the stream, behind the buffer's last use; without it (not
// exported, or CUDA_ERROR_NOT_SUPPORTED: no memory pools) the pointer is kept and given to
// cuMemFree at the next point where the runtime waits for the stream anyway (a copy to the host,
// a sync, release), when the stream is idle. Either way the free counts as deferred, and as
// released at that next idle point. Should the list not grow, the free is done at once and
// counted as a `free` wait. free_lock guards the list; it is a leaf.

static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static CUdeviceptr *retired;  // freed, awaiting an idle stream
static int32_t num_retired, cap_retired;
static int32_t queued_async_frees;  // cuMemFreeAsync calls since the last idle point
static _Atomic int32_t free_async_unsupported;

// The context pushed and the stream idle: frees the kept pointers; queued frees are done too.
static void stream_idle(void) {
    pthread_mutex_lock(&free_lock);
    for (int32_t i = 0; i < num_retired; i++) {
        cu.MemFree(retired[i]);
        tally_device_count_deferred_release();
    }
    num_retired = 0;
    for (; queued_async_frees > 0; queued_async_frees--) {
        tally_device_count_deferred_release();
    }
    pthread_mutex_unlock(&free_lock);
}

// Frees `ptr` without waiting for the device (context pushed). Returns the driver's result.
static CUresult free_in_stream_order(CUdeviceptr ptr) {
    if (cu.MemFreeAsync && !atomic_load_explicit(&free_async_unsupported, memory_order_relaxed)) {
        CUresult c = cu.MemFreeAsync(ptr, cuda_stream);
        if (c == CUDA_SUCCESS) {
            pthread_mutex_lock(&free_lock);
            queued_async_frees++;
            pthread_mutex_unlock(&free_lock);
            tally_device_count_deferred_free();
            return c;
        }
        if (c != CUDA_ERROR_NOT_SUPPORTED) {
            return c;
        }
        atomic_store_explicit(&free_async_unsupported, 1, memory_order_relaxed);
    }
    pthread_mutex_lock(&free_lock);
    int kept = num_retired < cap_retired;
    if (!kept) {
        int32_t cap = cap_retired ? 2 * cap_retired : 64;
        CUdeviceptr *grown = (CUdeviceptr *)realloc(retired, (size_t)cap * sizeof(CUdeviceptr));
        if (grown) {
            retired = grown;
            cap_retired = cap;
            kept = 1;
        }
    }
    if (kept) {
        retired[num_retired++] = ptr;
    }
    pthread_mutex_unlock(&free_lock);
    if (kept) {
        tally_device_count_deferred_free();
        return CUDA_SUCCESS;
    }
    uint64_t begin = tally_device_wait_begin();
    CUresult c = cu.MemFree(ptr);
    tally_device_wait_end(TALLY_DEVICE_WAIT_FREE, begin);
    return c;
}

// ---- the device interface --------------------------------------------------------------------

static int32_t cuda_device_malloc(void *user_context, halide_buffer_t *buf,
                                  const halide_device_interface_t *iface) {
    (void)iface;
    uint64_t size = tally_buffer_size_in_bytes(buf);
    int32_t r = cuda_enter(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED);
    if (r != 0) {
        return r;
    }
    CUdeviceptr p = 0;
    CUresult c = cu.MemAlloc(&p, (size_t)(size ? size : 1));
    cuda_leave();
    if (c != CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "cuMemAlloc of %llu bytes", (unsigned long long)size);
        return cuda_error(user_context, TALLY_ERROR_DEVICE_MALLOC_FAILED, what, c);
    }
    buf->device = p;
    return 0;
}

static int32_t cuda_device_free(void *user_context, halide_buffer_t *buf) {
    if (atomic_load(&cuda_shut_down)) {
        buf->device = 0;  // released with the context at exit
        return 0;
    }
    int32_t r = cuda_enter(user_context, TALLY_ERROR_DEVICE_FREE_FAILED);
    if (r != 0) {
        return r;
    }
    CUresult c = free_in_stream_order((CUdeviceptr)buf->device);
    cuda_leave();
    if (c != CUDA_SUCCESS) {
        return cuda_error(user_context, TALLY_ERROR_DEVICE_FREE_FAILED,
                          cu.MemFreeAsync ? "cuMemFreeAsync" : "cuMemFree", c);
    }
    buf->device = 0;
    return 0;
}

// Copies the buffer's span on the stream; a copy to the host also waits for it. Under
// profile_timestamps each copy is timed with events (see "command timing").
static int32_t cuda_copy(void *user_context, halide_buffer_t *buf, int to_device) {
    uint64_t size = tally_buffer_size_in_bytes(buf);
    if (!size) {
        return 0;
    }
    int32_t code = to_device ? TALLY_ERROR_COPY_TO_DEVICE_FAILED : TALLY_ERROR_COPY_TO_HOST_FAILED;
    int32_t r = cuda_enter(user_context, code);
    if (r != 0) {
        return r;
    }
    // Timed like a launch under profile_timestamps, billed to the copy slot that is current.
    tally_timeline_owner owner = tally_timeline_owner_now();
    CUevent begin = NULL;
    if (tally_timeline_owner_wants_timestamps(&owner) && cuda_has_events()) {
        begin_timed_command(&begin);
    }
    CUresult c;
    const char *what;
    if (to_device) {
        c = cu.MemcpyHtoDAsync((CUdeviceptr)buf->device, tally_buffer_begin(buf), (size_t)size,
                               cuda_stream);
        what = "cuMemcpyHtoDAsync";
        if (begin) {
            end_timed_command(begin, c == CUDA_SUCCESS, &owner);
        }
    } else {
        c = cu.MemcpyDtoHAsync(tally_buffer_begin(buf), (CUdeviceptr)buf->device, (size_t)size,
                               cuda_stream);
        what = "cuMemcpyDtoHAsync";
        if (begin) {
            end_timed_command(begin, c == CUDA_SUCCESS, &owner);
        }
        if (c == CUDA_SUCCESS) {
            uint64_t begin = tally_device_wait_begin();
            c = cu.StreamSynchronize(cuda_stream);
            tally_device_wait_end(TALLY_DEVICE_WAIT_COPY_TO_HOST, begin);
            what = "cuStreamSynchronize after a copy to the host";
            if (c == CUDA_SUCCESS) {
                read_timed_commands();
                stream_idle();
            }
        }
    }
    cuda_leave();
    return c == CUDA_SUCCESS ? 0 : cuda_error(user_context, code, what, c);
}

static int32_t cuda_copy_to_host(void *user_context, halide_buffer_t *buf) {
    return cuda_copy(user_context, buf, 0);
}

static int32_t cuda_copy_to_device(void *user_context, halide_buffer_t *buf) {
    return cuda_copy(user_context, buf, 1);
}

// Waits for the stream (`global` 0) or for the whole context (cuCtxSynchronize).
static int32_t cuda_wait(void *user_context, int global) {
    int32_t r = cuda_enter(user_context, TALLY_ERROR_DEVICE_SYNC_FAILED);
    if (r != 0) {
        return r;
    }
    uint64_t begin = tally_device_wait_begin();
    CUresult c = global ? cu.CtxSynchronize() : cu.StreamSynchronize(cuda_stream);
    tally_device_wait_end(global ? TALLY_DEVICE_WAIT_SYNC_GLOBAL : TALLY_DEVICE_WAIT_SYNC, begin);
    if (c == CUDA_SUCCESS) {
        read_timed_commands();
        stream_idle();
    }
    cuda_leave();
    return c == CUDA_SUCCESS ? 0
                             : cuda_error(user_context, TALLY_ERROR_DEVICE_SYNC_FAILED,
                                          global ? "cuCtxSynchronize" : "cuStreamSynchronize", c);
}

static int32_t cuda_device_sync(void *user_context, halide_buffer_t *buf) {
    (void)buf;
    return cuda_wait(user_context, 0);
}

static int32_t cuda_device_sync_global(void *user_context, const halide_device_interface_t *iface) {
    (void)iface;
    return cuda_wait(user_context, 1);
}

// Syncs, unloads every kernel, destroys the stream and releases the context (errors are
// ignored: at exit the driver may already be shutting down). Forgets a failed initialization
// too, so that the next use tries again.
static void cuda_release_locked(void) {
    if (atomic_load_explicit(&cuda_ready, memory_order_relaxed)) {
        CUcontext popped;
        if (cu.CtxPushCurrent(cuda_context) == CUDA_SUCCESS) {
            cu.CtxSynchronize();
            release_timing();
            stream_idle();
            for (cuda_kernels *k = cuda_all_kernels; k; k = k->next) {
                for (int32_t i = 0; i < k->num_kernels; i++) {
                    atomic_store_explicit(&k->functions[i], NULL, memory_order_release);
                    if (k->modules[i]) {
                        cu.ModuleUnload(k->modules[i]);
                        k->modules[i] = NULL;
                    }
                }
            }
            cu.StreamDestroy(cuda_stream);
            cu.CtxPopCurrent(&popped);
        }
        cu.DevicePrimaryCtxRelease(cuda_device);
        cuda_stream = NULL;
        cuda_context = NULL;
        atomic_store_explicit(&free_async_unsupported, 0, memory_order_relaxed);
        atomic_store_explicit(&cuda_ready, 0, memory_order_release);
    }
    cuda_failed = 0;
    cuda_failure_reported = 0;
    cuda_reason[0] = '\0';
}

static int32_t cuda_release(void *user_context, const halide_device_interface_t *iface) {
    (void)user_context;
    (void)iface;
    pthread_mutex_lock(&cuda_lock);
    cuda_release_locked();
    pthread_mutex_unlock(&cuda_lock);
    return 0;
}

static const halide_device_interface_t cuda_interface = TALLY_DEVICE_INTERFACE("cuda", cuda);

const halide_device_interface_t *halide_cuda_device_interface(void) {
    return cuda_ensure(NULL, NULL) == 0 ? &cuda_interface : NULL;
}

// ---- kernels ---------------------------------------------------------------------------------

// The record of a table's loaded kernels, created on first use.
static cuda_kernels *kernels_of(tally_kernel_table *table) {
    _Atomic(void *) *slot = (_Atomic(void *) *)&table->device_state[TALLY_DEVICE_API_CUDA];
    cuda_kernels *k = (cuda_kernels *)atomic_load_explicit(slot, memory_order_acquire);
    if (k) {
        return k;
    }
    k = (cuda_kernels *)calloc(1, sizeof *k);
    int32_t n = table->num_kernels > 0 ? table->num_kernels : 1;
    if (k) {
        k->num_kernels = table->num_kernels;
        k->modules = (CUmodule *)calloc((size_t)n, sizeof *k->modules);
        k->functions = (_Atomic(CUfunction) *)calloc((size_t)n, sizeof *k->functions);
    }
    if (!k || !k->modules || !k->functions) {
        if (k) {
            free(k->modules);
            free((void *)k->functions);
            free(k);
        }
        return NULL;
    }
    void *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(slot, &expected, (void *)k, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        free(k->modules);
        free((void *)k->functions);
        free(k);
        return (cuda_kernels *)expected;
    }
    pthread_mutex_lock(&cuda_lock);
    k->next = cuda_all_kernels;
    cuda_all_kernels = k;
    pthread_mutex_unlock(&cuda_lock);
    return k;
}

// The CUfunction of kernel `index` of the table, loading its module on first use (context
// already current).
static int32_t kernel_function(void *user_context, tally_kernel_table *table, int32_t index,
                               CUfunction *out) {
    const tally_kernel_source *src = &table->kernels[index];
    cuda_kernels *k = kernels_of(table);
    if (!k) {
        return halide_error_out_of_memory(user_context);
    }
    if (index >= k->num_kernels) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "halide_cuda_run: kernel table changed size (%d kernels, "
                                  "expected %d)",
                                  (int)table->num_kernels, (int)k->num_kernels);
    }
    *out = atomic_load_explicit(&k->functions[index], memory_order_acquire);
    if (*out) {
        return 0;
    }
    int32_t result = 0;
    pthread_mutex_lock(&cuda_lock);
    *out = atomic_load_explicit(&k->functions[index], memory_order_acquire);
    if (!*out) {
        char log[4096] = "";
        CUjit_option options[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *values[2] = {log, (void *)(uintptr_t)sizeof log};
        CUmodule module = NULL;
        int32_t one_time = tally_profiler_one_time_begin(TALLY_ONE_TIME_COMPILE);
        CUresult c = cu.ModuleLoadDataEx(&module, src->code, 2, options, values);
        tally_profiler_one_time_end(one_time);
        if (c != CUDA_SUCCESS) {
            char d[256];
            describe(c, d, sizeof d);
            log[sizeof log - 1] = '\0';
            result = tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                        "halide_cuda_run: loading the PTX of kernel '%s' failed: "
                                        "%s%s%s",
                                        src->name, d, log[0] ? "\n" : "", log);
        } else {
            CUfunction f = NULL;
            c = cu.ModuleGetFunction(&f, module, src->name);
            if (c != CUDA_SUCCESS) {
                char d[256];
                describe(c, d, sizeof d);
                cu.ModuleUnload(module);
                result = tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                            "halide_cuda_run: the PTX of kernel '%s' has no entry "
                                            "of that name: %s",
                                            src->name, d);
            } else {
                k->modules[index] = module;
                atomic_store_explicit(&k->functions[index], f, memory_order_release);
                *out = f;
            }
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return result;
}

#define CUDA_STACK_ARGS 64

int32_t halide_cuda_run(void *user_context, void *state, const char *entry_name, int32_t blocks_x,
                        int32_t blocks_y, int32_t blocks_z, int32_t threads_x, int32_t threads_y,
                        int32_t threads_z, int32_t shared_mem_bytes, const int64_t *arg_sizes,
                        void **args, const uint8_t *arg_is_buffer) {
    int32_t r = cuda_ensure(user_context, "halide_cuda_run");
    if (r != 0) {
        return r;
    }
    r = tally_fault_check(user_context, TALLY_FAULT_LAUNCH,
                          "halide_cuda_run: kernel %s: launch failed",
                          entry_name ? entry_name : "(null)");
    if (r != 0) {
        return r;
    }
    tally_kernel_table *table = (tally_kernel_table *)state;
    if (!table || !entry_name || !arg_sizes || !args || !arg_is_buffer) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_cuda_run: NULL %s",
                                  !table        ? "kernel table"
                                  : !entry_name ? "kernel name"
                                                : "argument array");
    }
    if (table->abi_version != TALLY_RUNTIME_ABI_VERSION) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_cuda_run: kernel table has ABI version %d, the runtime "
                                  "%d",
                                  (int)table->abi_version, TALLY_RUNTIME_ABI_VERSION);
    }
    const tally_kernel_source *src = tally_find_kernel(table, entry_name);
    if (!src || src->device_api != TALLY_DEVICE_API_CUDA) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "halide_cuda_run: the module has no CUDA kernel '%s'",
                                  entry_name);
    }
    int32_t n = 0;
    while (arg_sizes[n] != 0) {
        n++;
    }
    if (src->num_args != n) {
        return tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                  "halide_cuda_run: kernel '%s' takes %d arguments, the launch "
                                  "passes %d",
                                  entry_name, (int)src->num_args, (int)n);
    }
    if (blocks_x <= 0 || blocks_y <= 0 || blocks_z <= 0 || threads_x <= 0 || threads_y <= 0 ||
        threads_z <= 0) {
        return 0;  // an empty loop nest: nothing to run
    }

    void *stack_params[CUDA_STACK_ARGS];
    CUdeviceptr stack_ptrs[CUDA_STACK_ARGS];
    void **params = stack_params;
    CUdeviceptr *ptrs = stack_ptrs;
    if (n > CUDA_STACK_ARGS) {
        params = (void **)malloc((size_t)n * sizeof *params);
        ptrs = (CUdeviceptr *)malloc((size_t)n * sizeof *ptrs);
        if (!params || !ptrs) {
            free(params);
            free(ptrs);
            return halide_error_out_of_memory(user_context);
        }
    }
    for (int32_t i = 0; i < n && r == 0; i++) {
        if (!args[i]) {
            r = tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                   "halide_cuda_run: argument %d of kernel '%s' is NULL", (int)i,
                                   entry_name);
        } else if (!arg_is_buffer[i]) {
            params[i] = args[i];
        } else {
            const halide_buffer_t *buf = (const halide_buffer_t *)args[i];
            if (buf->device_interface != &cuda_interface || !buf->device) {
                r = tally_report_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED,
                                       "halide_cuda_run: buffer argument %d of kernel '%s' has no "
                                       "CUDA device memory (it is on %s)",
                                       (int)i, entry_name,
                                       buf->device_interface ? buf->device_interface->name
                                                             : "the host only");
            } else {
                ptrs[i] = (CUdeviceptr)buf->device + tally_buffer_host_offset(buf);
                params[i] = &ptrs[i];
            }
        }
    }
    if (r == 0) {
        r = cuda_enter(user_context, TALLY_ERROR_DEVICE_RUN_FAILED);
        if (r == 0) {
            CUfunction f = NULL;
            r = kernel_function(user_context, table, (int32_t)(src - table->kernels), &f);
            tally_timeline_owner owner = tally_timeline_owner_now();
            const int want_timestamps = r == 0 && tally_timeline_owner_wants_timestamps(&owner);
            CUevent begin = NULL;
            if (want_timestamps && cuda_has_events()) {
                begin_timed_command(&begin);
            }
            if (r == 0) {
                CUresult c =
                    cu.LaunchKernel(f, (unsigned)blocks_x, (unsigned)blocks_y, (unsigned)blocks_z,
                                    (unsigned)threads_x, (unsigned)threads_y, (unsigned)threads_z,
                                    (unsigned)(shared_mem_bytes > 0 ? shared_mem_bytes : 0),
                                    cuda_stream, params, NULL);
                if (begin) {
                    end_timed_command(begin, c == CUDA_SUCCESS, &owner);
                } else if (want_timestamps && !cuda_has_events() && c == CUDA_SUCCESS) {
                    // No events: sync mode, done by the runtime itself.
                    tally_timeline_set_mode(TALLY_DEVICE_API_CUDA, TALLY_TIMELINE_SYNC_FALLBACK);
                    tally_context *waiting = tally_profiler_wait_begin();
                    uint64_t t0 = tally_device_wait_begin();
                    c = cu.StreamSynchronize(cuda_stream);
                    tally_device_wait_end(TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK, t0);
                    tally_profiler_wait_end(waiting);
                }
                if (c != CUDA_SUCCESS) {
                    char what[512];
                    snprintf(what, sizeof what,
                             "cuLaunchKernel of '%s' on %dx%dx%d blocks of %dx%dx%d threads",
                             entry_name, (int)blocks_x, (int)blocks_y, (int)blocks_z,
                             (int)threads_x, (int)threads_y, (int)threads_z);
                    r = cuda_error(user_context, TALLY_ERROR_DEVICE_RUN_FAILED, what, c);
                }
            }
            cuda_leave();
        }
    }
    if (params != stack_params) {
        free(params);
        free(ptrs);
    }
    if (r == 0) {
        tally_profiler_count_launch();
    }
    return r;
}
