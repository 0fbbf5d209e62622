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

/** CPU time consumed so far by the sampler thread in nanoseconds (0 if it is not running). */
uint64_t tally_testing_sampler_cpu_ns(void);

/** Number of live profiled runs registered with the sampler thread and with the timer. */
int32_t tally_testing_live_instances(void);

/** Arms fault injection as the TALLY_FAULT environment variable would (which it replaces):
 * "<op>[:<n>]" makes the n-th operation of kind op from now on fail (n defaults to 1), op one of
 * malloc, device_malloc, copy_to_host, copy_to_device, launch, sync; NULL or "" disarms. Returns 0,
 * or TALLY_ERROR_BAD_ARGUMENT (reported; injection stays disarmed). See runtime/src/fault.c. */
int32_t tally_testing_set_fault(const char *spec);

/** Number of faults injected since the process started (by TALLY_FAULT or the call above). */
int64_t tally_testing_faults_injected(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TALLY_RUNTIME_INCLUDE_TALLY_RUNTIME_TESTING_H
