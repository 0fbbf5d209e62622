/* The counters of the stand-in CUDA driver (cuda_fake_driver.c), read by CudaTest.cpp through
 * dlsym(handle, "fake_cuda_get_stats"). Valid C11 and C++. */
#ifndef TALLY_TEST_RUNTIME_CUDA_FAKE_DRIVER_H
#define TALLY_TEST_RUNTIME_CUDA_FAKE_DRIVER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fake_cuda_stats {
    int inits;
    int ctx_retains, ctx_releases;
    /** Pushes minus pops: 0 whenever no driver call is in progress. */
    int ctx_depth;
    int ctx_syncs, stream_syncs;
    int streams_created, streams_destroyed;
    int allocs, frees, live_allocs;
    int copies_to_device, copies_to_host;
    uint64_t bytes_to_device, bytes_to_host;
    int module_loads, module_unloads;
    int launches;
    char last_kernel[64];
    unsigned int grid[3], block[3], shared_mem_bytes;
    /** The `out` pointer the last `fill` launch received. */
    uint64_t last_pointer_arg;
    char last_ptx[256];
    int events_created, events_destroyed, events_recorded, event_syncs;
    /** cuMemFree calls while the stream had queued work (a launch or copy since the last sync),
     * and cuMemFreeAsync calls that freed. */
    int blocking_frees, async_frees;
} fake_cuda_stats;

/** Sets the duration of every later launch on the fake device clock (exported by the fake as
 * fake_cuda_set_kernel_ns; find it with dlsym). */
typedef void (*fake_cuda_set_kernel_ns_fn)(uint64_t ns);

/** fake_cuda_set_copy_ns_per_byte: the device clock advances by bytes times this per copy
 * (default 0). fake_cuda_advance_clock: advances the device clock (idle time). */
typedef void (*fake_cuda_set_copy_ns_per_byte_fn)(uint64_t ns);
typedef void (*fake_cuda_advance_clock_fn)(uint64_t ns);

/** Called by each cuEventSynchronize (fake_cuda_set_event_sync_hook; NULL removes it). */
typedef void (*fake_cuda_event_sync_hook_fn)(void);
typedef void (*fake_cuda_set_event_sync_hook_fn)(fake_cuda_event_sync_hook_fn hook);

typedef const fake_cuda_stats *(*fake_cuda_get_stats_fn)(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TALLY_TEST_RUNTIME_CUDA_FAKE_DRIVER_H
