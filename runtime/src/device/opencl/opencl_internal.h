// What the files of the OpenCL back end share: the API table, the state, and each file's
// functions. Layer device.backends (runtime/layers.txt); the files call one way, in the order
// listed there: opencl_driver.c (loading the ICD loader, choosing the platform and device, the
// context and the one queue; the state and the queue's order bookkeeping), opencl_timing.c,
// opencl_memory.c, opencl_kernels.c, and opencl_device.c over all of them (the interface, the
// back-end operations, initialization on first use and release). Not installed, not seen by
// generated code. C11.
//
// The ICD loader is opened at run time with dlopen ($TALLY_OPENCL_LIBRARY if set, else
// libOpenCL.so.1, else libOpenCL.so), so that machines without OpenCL build, link and run
// everything else; libOpenCL is never linked. The Khronos headers give the types, and each entry
// point's type is taken from its declaration (__typeof__), at OpenCL 1.2 (the ICD loader may be
// newer). A build without the headers compiles only the stubs of opencl_device.c
// (TALLY_HAVE_OPENCL_HEADERS 0). Environment (read at each initialization), as Halide reads it:
//   HL_OCL_PLATFORM_NAME  a substring of the platform's name; default: any platform
//   HL_OCL_DEVICE_TYPE    contains "cpu", "gpu" and/or "acc" (any combination); default: all
//   HL_GPU_DEVICE         the index among the chosen platform's devices of that type; default 0
//   TALLY_OPENCL_NO_TIMESTAMPS  non-empty and not "0": a queue without profiling (for tests:
//                         profile_timestamps then falls back to a sync per launch)
//
// Ordering: one in-order queue (CL_QUEUE_PROFILING_ENABLE) carries every command. Copies to the
// device and launches are asynchronous; a copy to the device first copies the host data into a
// staging allocation, so the host buffer may change as soon as the call returns (the staging copy
// is freed once its write has completed, seen at the next point where the runtime looks). A copy
// to the host is a blocking read; device_sync, device_sync_global and the back end's wait are
// clFinish. Each of those is a point where everything queued before it has completed: the timed
// commands are read there (opencl_timing.c) and the staging copies and deferred frees reclaimed
// (opencl_memory.c). The driver counts enqueued commands so that the back end knows when the
// queue is idle without asking the device (tally_ocl_known_idle): a free then frees at once, and
// a sync on an idle queue is not counted as a wait.
//
// Memory: buf->device is a cl_mem mirroring the buffer's span (tally_buffer_begin ..
// + tally_buffer_size_in_bytes), as for the host interface. A kernel receives the element
// buf->host points at: the cl_mem itself when that is the span's start, else a sub-buffer
// starting there (possible only at a multiple of CL_DEVICE_MEM_BASE_ADDR_ALIGN).
//
// The kernel ABI (tally_kernel_source of device_api TALLY_DEVICE_API_OPENCL): NUL-terminated
// OpenCL C source defining `__kernel void <name>(...)`; the buffers first, as __global pointers,
// then the scalars by value (a bool as one byte: uchar), in the order of the launch's arrays; a
// kernel may take one more argument, last: a __local pointer given the launch's shared memory
// (Halide's OpenCL kernels end with `__local int16* __shared`). Entries with the same code
// pointer share one program.
#ifndef TALLY_RUNTIME_SRC_DEVICE_OPENCL_OPENCL_INTERNAL_H
#define TALLY_RUNTIME_SRC_DEVICE_OPENCL_OPENCL_INTERNAL_H

#include "tally_runtime.h"

#if defined(__has_include)
#if __has_include(<CL/cl.h>)
#define TALLY_HAVE_OPENCL_HEADERS 1
#endif
#endif
#ifndef TALLY_HAVE_OPENCL_HEADERS
#define TALLY_HAVE_OPENCL_HEADERS 0
#endif

#if TALLY_HAVE_OPENCL_HEADERS

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "device/backend.h"
#include "profiler/device_timeline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// ---- the API ---------------------------------------------------------------------------------

// The entry points every use needs (OpenCL 1.2), each field typed as cl.h declares the function.
#define TALLY_OCL_FUNCS(X)                                                                         \
    X(clGetPlatformIDs)                                                                            \
    X(clGetPlatformInfo)                                                                           \
    X(clGetDeviceIDs)                                                                              \
    X(clGetDeviceInfo)                                                                             \
    X(clCreateContext)                                                                             \
    X(clReleaseContext)                                                                            \
    X(clCreateCommandQueue)                                                                        \
    X(clReleaseCommandQueue)                                                                       \
    X(clCreateBuffer)                                                                              \
    X(clCreateSubBuffer)                                                                           \
    X(clReleaseMemObject)                                                                          \
    X(clEnqueueWriteBuffer)                                                                        \
    X(clEnqueueReadBuffer)                                                                         \
    X(clEnqueueNDRangeKernel)                                                                      \
    X(clEnqueueMarkerWithWaitList)                                                                 \
    X(clFlush)                                                                                     \
    X(clFinish)                                                                                    \
    X(clWaitForEvents)                                                                             \
    X(clGetEventInfo)                                                                              \
    X(clGetEventProfilingInfo)                                                                     \
    X(clRetainEvent)                                                                               \
    X(clReleaseEvent)                                                                              \
    X(clCreateProgramWithSource)                                                                   \
    X(clBuildProgram)                                                                              \
    X(clGetProgramBuildInfo)                                                                       \
    X(clRetainProgram)                                                                             \
    X(clReleaseProgram)                                                                            \
    X(clCreateKernel)                                                                              \
    X(clReleaseKernel)                                                                             \
    X(clSetKernelArg)                                                                              \
    X(clGetKernelInfo)                                                                             \
    X(clGetKernelWorkGroupInfo)

// OpenCL 2.1's clGetDeviceAndHostTimer, which the 1.2 headers do not declare.
typedef cl_int(CL_API_CALL *tally_ocl_device_and_host_timer_fn)(cl_device_id device,
                                                                cl_ulong *device_timestamp,
                                                                cl_ulong *host_timestamp);

#define TALLY_OCL_FIELD(name) __typeof__(name) *name;
typedef struct opencl_api {
    TALLY_OCL_FUNCS(TALLY_OCL_FIELD)
    // Optional (OpenCL 2.1): a device clock reading without a queue round trip.
    tally_ocl_device_and_host_timer_fn clGetDeviceAndHostTimer;
} opencl_api;
#undef TALLY_OCL_FIELD

// ---- state -----------------------------------------------------------------------------------

// The built kernels of one tally_kernel_table (opencl_kernels.c).
typedef struct opencl_kernels {
    struct opencl_kernels *next;  // every record, for release
    int32_t num_kernels;
    cl_program *programs;           // [num_kernels], one reference each; under tally_ocl_lock
    _Atomic(cl_kernel) *kernels;    // [num_kernels]; NULL until built
    cl_uint *num_args;              // [num_kernels]: CL_KERNEL_NUM_ARGS, set before kernels[i]
    size_t *work_group_size;        // [num_kernels]: CL_KERNEL_WORK_GROUP_SIZE, likewise
    pthread_mutex_t *launch_locks;  // [num_kernels]: a cl_kernel's arguments are not thread-safe
} opencl_kernels;

// Guards initialization, release and the building of kernels.
extern pthread_mutex_t tally_ocl_lock;
// 1 while OpenCL is initialized; read without the lock by the fast paths.
extern _Atomic int32_t tally_ocl_ready;
// Set by the exit handler: OpenCL is released for good (no re-initialization during exit).
extern _Atomic int32_t tally_ocl_shut_down;
// The entry points: set when the library is loaded (once), read-only after.
extern opencl_api tally_cl;

// The back end's state (opencl_driver.c defines it). The handles and device limits are set
// before tally_ocl_ready becomes 1 and read-only while it is; the rest is guarded by
// tally_ocl_lock.
typedef struct tally_opencl_state {
    void *lib;  // the ICD loader; kept open once loaded
    char lib_name[256];
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    char platform_name[128], device_name[128];
    uint64_t base_align_bytes;      // CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes
    size_t max_work_group_size;     // CL_DEVICE_MAX_WORK_GROUP_SIZE
    size_t max_work_item_sizes[3];  // CL_DEVICE_MAX_WORK_ITEM_SIZES, first three dimensions
    uint64_t local_mem_bytes;       // CL_DEVICE_LOCAL_MEM_SIZE
    int32_t profiling;              // the queue has CL_QUEUE_PROFILING_ENABLE
    opencl_kernels *all_kernels;
    // Initialization failure: whether it failed, its reason, whether the reason was reported yet.
    int32_t failed, failure_reported;
    char reason[512];
    int32_t atexit_registered;
} tally_opencl_state;
extern tally_opencl_state tally_ocl;

// ---- opencl_driver.c: the library, the platform and device, the context and queue ----------

// "CL_OUT_OF_RESOURCES", or "an OpenCL error" for codes it does not know.
const char *tally_ocl_error_name(cl_int err);
// Reports "<routine>: <what> failed: <name> (<err>)" with `code`; returns `code`.
int32_t tally_ocl_fail(void *user_context, int32_t code, const char *routine, const char *what,
                       cl_int err);
// Loads the library (once), chooses the platform and device by the environment, creates the
// context and the queue. Returns 1 when OpenCL is usable (the caller sets tally_ocl_ready);
// otherwise tally_ocl.reason says why. tally_ocl_lock held.
int tally_ocl_init_locked(void);
// Releases the queue and the context (tally_ocl_lock held, the queue finished).
void tally_ocl_destroy_locked(void);

// The queue's order bookkeeping. Every command counts once, after its enqueue returned
// (tally_ocl_count_enqueued). Before a blocking operation take tally_ocl_idle_mark(); once it has
// returned, everything counted before the mark has completed: tally_ocl_now_idle(mark + the
// commands the operation enqueued itself and waited for). The queue is known idle when nothing
// was counted since (tally_ocl_known_idle): exact for every command whose enqueue returned.
void tally_ocl_count_enqueued(void);
uint64_t tally_ocl_idle_mark(void);
void tally_ocl_now_idle(uint64_t mark);
int tally_ocl_known_idle(void);

// ---- opencl_timing.c: command timing (profile_timestamps) ----------------------------------

// Whether commands can be timed now: the queue has profiling and its events give timestamps.
int tally_ocl_can_time(void);
// After initialization (the queue empty, tally_ocl_lock held): checks that events carry
// profiling timestamps, and pairs the device and host clocks.
void tally_ocl_timing_init_locked(void);
// Keeps the event of a timed command (taking the caller's reference) until it has completed,
// then bills its CL_PROFILING_COMMAND_START..END to `owner`.
void tally_ocl_keep_timed(cl_event event, const tally_timeline_owner *owner);
// Bills every timed command that has completed, without waiting. `blocking_point`: the queue
// has just been seen idle, so the clocks are paired again first (a marker round trip each).
void tally_ocl_read_timed(int blocking_point);
// Release (the queue finished): bills what is left, drops every event, forgets the pairing.
void tally_ocl_timing_release(void);

// ---- opencl_memory.c: allocations, copies, waits, frees --------------------------------------

// The interface's operations (OpenCL initialized; `routine` names the caller in messages).
int32_t tally_ocl_device_malloc(void *user_context, halide_buffer_t *buf, const char *routine);
int32_t tally_ocl_copy(void *user_context, halide_buffer_t *buf, int to_device,
                       const char *routine);
// clFinish, counted in the device-wait ledger under `reason` unless the queue was known idle;
// failures are reported with `code`. Then reads the timed commands and reclaims.
int32_t tally_ocl_finish(void *user_context, int32_t reason, int32_t code, const char *routine);
// The back-end operations wait, defer_free and free_now (backend.h).
int32_t tally_ocl_wait(void *user_context, const halide_buffer_t *buf, int32_t reason, int32_t code,
                       const char *routine);
int32_t tally_ocl_defer_free(void *user_context, halide_buffer_t *buf);
int32_t tally_ocl_free_now(void *user_context, halide_buffer_t *buf);
// Frees the staging copies and counts the deferred frees whose commands have completed, without
// waiting.
void tally_ocl_reclaim(void);
// A point where the queue was seen idle: reads the timed commands (pairing the clocks) and
// reclaims.
void tally_ocl_queue_idle(void);
// Release (the queue finished): reclaims everything.
void tally_ocl_memory_release(void);

// ---- opencl_kernels.c: programs, kernels, launches -----------------------------------------

// The back-end operations kernel_ready, compile and launch (backend.h).
int tally_ocl_kernel_ready(const tally_device_launch *l);
int32_t tally_ocl_compile(void *user_context, const tally_device_launch *l);
int32_t tally_ocl_launch(void *user_context, const tally_device_launch *l, int timed);
// Release (tally_ocl_lock held, the queue finished): releases every kernel and program of every
// table; the records stay, so a table launches again after a new initialization.
void tally_ocl_kernels_release_locked(void);

#pragma GCC visibility pop

#endif  // TALLY_HAVE_OPENCL_HEADERS

#endif  // TALLY_RUNTIME_SRC_DEVICE_OPENCL_OPENCL_INTERNAL_H
