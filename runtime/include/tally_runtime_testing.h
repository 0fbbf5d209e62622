/** \file
 * Testing seams of the Tally runtime. Not for generated code: tests, benchmarks and bindings use
 * them to make profiler runs deterministic and to inject failures. Valid C11 and C++.
 */
#ifndef TALLY_RUNTIME_INCLUDE_TALLY_RUNTIME_TESTING_H
#define TALLY_RUNTIME_INCLUDE_TALLY_RUNTIME_TESTING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A replacement for the profiler's clock (nanoseconds, monotonic). It must be async-signal-safe
 * (the timer mode calls it from a signal handler). */
typedef uint64_t (*tally_testing_clock_t)(void);

/** Replaces the clock every profiler timestamp comes from; NULL restores CLOCK_MONOTONIC. Only
 * call it while no profiled run is in flight. */
void tally_testing_set_clock(tally_testing_clock_t clock);

/** The profiler's current clock value, in nanoseconds. */
uint64_t tally_testing_now_ns(void);

/** Takes one sample of every live run right now, on the calling thread, as a sampler tick would
 * (both modes). A tick whose elapsed time is 0 bills nothing and counts no sample. */
void tally_testing_sample_now(void);

/** Makes the next `count` runtime thread creations (sampler thread, pool workers) fail, as if
 * pthread_create had returned EAGAIN. */
void tally_testing_fail_thread_starts(int32_t count);

/** Turns the steering of woken pool workers on (1) or off (0) and returns what it was; the
 * environment variable TALLY_NO_WORKER_STEERING sets it once per process otherwise
 * (runtime/src/parallel/placement.c). */
int32_t tally_testing_set_worker_steering(int32_t on);

/** How many times this process has counted its online cores for the thread pool's default size:
 * once, when the runtime is loaded, so that no parallel loop pays for it (a file read under /sys);
 * runtime/src/parallel/thread_pool.c. */
int64_t tally_testing_core_counts(void);

/** CPU time consumed so far by the sampler thread in nanoseconds (0 if it is not running). */
uint64_t tally_testing_sampler_cpu_ns(void);

/** Number of live profiled runs registered with the sampler thread and with the timer. */
int32_t tally_testing_live_instances(void);

/** Arms fault injection as the TALLY_FAULT environment variable would (which it replaces):
 * "<op>[:<n>]" makes the n-th operation of kind op from now on fail (n defaults to 1), op one of
 * malloc, device_malloc, copy_to_host, copy_to_device, launch, sync; NULL or "" disarms. Returns 0,
 * or TALLY_ERROR_BAD_ARGUMENT (reported; injection stays disarmed). See runtime/src/core/fault.c.
 */
int32_t tally_testing_set_fault(const char *spec);

/** Number of faults injected since the process started (by TALLY_FAULT or the call above). */
int64_t tally_testing_faults_injected(void);

/** Vulkan back end: a host gate in front of the queue, so tests order host calls against device
 * work by construction. mode 1: every later submission waits on the device for a host-set event
 * before running, until the gate is opened (mode 0), so work queued meanwhile has neither started
 * nor completed; a wait for held work (a sync, a copy to the host) blocks until another thread
 * opens it. mode 2: the same, but each runtime device wait on held work first lets everything
 * queued so far run (what is submitted later is held again): no work completes before the host
 * waits for it. A release opens the gate. Returns 0, or a negative error code (reported): no
 * Vulkan, a bad mode. */
int32_t tally_testing_vulkan_hold(int32_t mode);

/** Vulkan back end: how many device allocations are live (made by halide_device_malloc and not
 * yet freed; a free deferred until the queue has passed the buffer's last use counts as freed).
 * 0 without Vulkan. Tests check with it that error paths free what the run allocated. */
int32_t tally_testing_vulkan_live_buffers(void);

/** OpenCL back end: how many device allocations are live (made by halide_device_malloc and not
 * yet freed; a free deferred behind queued work counts as freed), as for Vulkan above. 0 without
 * OpenCL. */
int32_t tally_testing_opencl_live_buffers(void);

/** Called on the waiting thread each time a device back end is about to block the host on its
 * queue (the start of every wait the device-wait ledger counts), after the thread was marked
 * waiting for the profiler; it may move the testing clock and call tally_testing_sample_now, and
 * must not call into a device back end. NULL removes it. */
typedef void (*tally_testing_device_wait_hook_t)(void);
void tally_testing_set_device_wait_hook(tally_testing_device_wait_hook_t hook);

/** A device API's clock correlation (runtime/src/profiler/device_timeline.c): the pairings of
 * device and host clock kept so far (0: none yet) and the readings they were picked from; the
 * newest pairing (device clock in ns from the back end's origin, the host clock, its deviation);
 * the fitted rate (host ns per device ns; 1 until pairings far enough apart; 0 without a pairing).
 */
typedef struct tally_testing_device_clock {
    int32_t pairings, readings;
    double device_ns;
    uint64_t host_ns, deviation_ns;
    double rate;
} tally_testing_device_clock;

/** Reads the clock correlation of `device_api` (TALLY_DEVICE_API_*). Returns 0, or
 * TALLY_ERROR_BAD_ARGUMENT. */
int32_t tally_testing_get_device_clock(int32_t device_api, tally_testing_device_clock *out);

/** Vulkan back end: replaces vkGetCalibratedTimestampsEXT's readings (for tests that script
 * them): each call fills the device counter (ticks), the CLOCK_MONOTONIC reading and the
 * maximum deviation, and returns 0 (nonzero: the reading failed). NULL restores the driver. Takes
 * effect at the next pairing (device initialization, the end of a profile_timestamps run). */
typedef int (*tally_testing_vulkan_calibration_t)(uint64_t *device_ticks, uint64_t *host_ns,
                                                  uint64_t *max_deviation_ns);
void tally_testing_set_vulkan_calibration(tally_testing_vulkan_calibration_t reader);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TALLY_RUNTIME_INCLUDE_TALLY_RUNTIME_TESTING_H
