// What the files of the CUDA back end share: the driver API as cuda.h declares it, the state,
// and each file's functions. Layer device.backends (runtime/layers.txt); the files call one way,
// in the order listed there: cuda_driver.c (loading the driver, the device, context and stream),
// cuda_timing.c, cuda_memory.c, cuda_kernels.c, and cuda_device.c over all of them (the
// interface, the back-end operations, initialization on first use and release). Not installed,
// not seen by generated code. C11.
//
// The CUDA driver API is loaded at run time with dlopen, so that machines without a driver
// build, link and run everything else. No header of the CUDA toolkit is needed: the few driver
// types and constants are declared here with the values and ABI of cuda.h.
//
// Ordering: every operation runs with the context pushed (tally_cuda_push / tally_cuda_pop), on
// the one stream. Copies to the device and launches are asynchronous (cuMemcpyHtoDAsync from
// pageable memory returns once the driver has staged the data, so the host buffer may change at
// once); a copy to the host waits for the stream. device_sync waits for the stream,
// device_sync_global for the whole context (cuCtxSynchronize), which is also where asynchronous
// kernel faults surface. Each point where the stream is known idle (a copy to the host, a sync,
// release) reads the timed commands (cuda_timing.c) and releases the deferred frees
// (cuda_memory.c).
//
// Memory: buf->device is a CUdeviceptr to an allocation mirroring the buffer's span
// (tally_buffer_begin .. + tally_buffer_size_in_bytes), as for the host interface. A kernel
// receives the address of the element buf->host points at, inside that span.
#ifndef TALLY_RUNTIME_SRC_DEVICE_CUDA_CUDA_INTERNAL_H
#define TALLY_RUNTIME_SRC_DEVICE_CUDA_CUDA_INTERNAL_H

#include "device/backend.h"
#include "profiler/device_timeline.h"
#include "tally_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

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

// ---- state -----------------------------------------------------------------------------------

// The loaded kernels of one tally_kernel_table (cuda_kernels.c).
typedef struct cuda_kernels {
    struct cuda_kernels *next;  // every record, for release
    int32_t num_kernels;
    CUmodule *modules;               // [num_kernels], guarded by tally_cuda_lock
    _Atomic(CUfunction) *functions;  // [num_kernels]; NULL until loaded
} cuda_kernels;

// Guards initialization, release and the loading of kernels.
extern pthread_mutex_t tally_cuda_lock;
// 1 while the driver is initialized; read without the lock by the fast paths.
extern _Atomic int32_t tally_cuda_ready;
// Set by the exit handler: CUDA is released for good (no re-initialization during exit).
extern _Atomic int32_t tally_cuda_shut_down;
// The driver's entry points: set before tally_cuda_ready becomes 1, read-only while it is.
extern cuda_api tally_cu;

// The back end's state (cuda_driver.c defines it). The handles are set before tally_cuda_ready
// becomes 1 and read-only while it is; the rest is guarded by tally_cuda_lock.
typedef struct tally_cuda_state {
    void *lib;  // the driver library; kept open once loaded
    const char *lib_name;
    CUdevice device;
    CUcontext context;
    CUstream stream;
    cuda_kernels *all_kernels;
    // Initialization failure: whether it failed, its reason, whether the reason was reported yet.
    int32_t failed, failure_reported;
    char reason[512];
    int32_t atexit_registered;
} tally_cuda_state;
extern tally_cuda_state tally_cuda;

// ---- cuda_driver.c: the driver, the device, the context and the stream -----------------------

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", as far as the driver can say.
void tally_cuda_describe(CUresult r, char *out, size_t size);
// Reports "CUDA: <what> failed: <description>" with `code`; returns `code`.
int32_t tally_cuda_error(void *user_context, int32_t code, const char *what, CUresult r);
// Loads the driver (once), initializes it, picks the device and creates the stream. Returns 1
// when CUDA is usable (tally_cuda_ready set); otherwise tally_cuda.reason says why.
int tally_cuda_init_locked(void);
// Makes the context current (CUDA initialized), reporting a failure with `code`; pair with
// tally_cuda_pop.
int32_t tally_cuda_push(void *user_context, int32_t code);
void tally_cuda_pop(void);

// ---- cuda_timing.c: command timing (profile_timestamps) ------------------------------------

// Whether the driver has the event entry points that time commands.
int tally_cuda_has_events(void);
// Records the begin event of a timed command (*begin NULL when it could not: counted), and its
// end after the command was issued (`issued`: it was), keeping the pair for the next blocking
// point. The context pushed.
void tally_cuda_begin_timed(CUevent *begin);
void tally_cuda_end_timed(CUevent begin, int issued, const tally_timeline_owner *owner);
// At a blocking point (the stream idle, the context pushed): pairs the clocks and bills every
// timed command.
void tally_cuda_read_timed(void);
// Release (the context synchronized and pushed): bills what is left, destroys every event and
// forgets the clock pairings.
void tally_cuda_timing_release(void);

// ---- cuda_memory.c: allocations, copies, waits, stream-ordered frees -----------------------

// The interface's operations, CUDA initialized.
int32_t tally_cuda_device_malloc(void *user_context, halide_buffer_t *buf);
int32_t tally_cuda_copy(void *user_context, halide_buffer_t *buf, int to_device);
// Waits for the stream (`global` 0) or the whole context, counted under `reason`; failures are
// reported with `code`. Then reads the timed commands and releases the deferred frees.
int32_t tally_cuda_synchronize(void *user_context, int global, int32_t reason, int32_t code);
// The back-end operations wait, defer_free and free_now (backend.h).
int32_t tally_cuda_wait(void *user_context, const halide_buffer_t *buf, int32_t reason,
                        int32_t code, const char *routine);
int32_t tally_cuda_defer_free(void *user_context, halide_buffer_t *buf);
int32_t tally_cuda_free_now(void *user_context, halide_buffer_t *buf);
// The context pushed and the stream idle: frees the kept pointers; counts the queued frees done.
void tally_cuda_stream_idle(void);
// Release: forgets what the device taught (whether cuMemFreeAsync works).
void tally_cuda_memory_release(void);

// ---- cuda_kernels.c: PTX modules and launches ----------------------------------------------

// The back-end operations kernel_ready, compile and launch (backend.h).
int tally_cuda_kernel_ready(const tally_device_launch *l);
int32_t tally_cuda_compile(void *user_context, const tally_device_launch *l);
int32_t tally_cuda_launch(void *user_context, const tally_device_launch *l, int timed);
// Release (the context pushed, tally_cuda_lock held): unloads every module.
void tally_cuda_kernels_release_locked(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_DEVICE_CUDA_CUDA_INTERNAL_H
