// The device timeline (device_timeline.c): kernel intervals from device timestamps, billed to the
// Func that launched them, and each device API's clock correlation. Layer profiler.sources
// (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_DEVICE_TIMELINE_H
#define TALLY_RUNTIME_SRC_PROFILER_DEVICE_TIMELINE_H

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// Who a launch is billed to: the calling thread's run (its pipeline record, only a key) and slot
// when it was recorded, and the tally_timeline_reset generation. pipeline NULL: no profiled run.
typedef struct tally_timeline_owner {
    const void *pipeline;
    int32_t slot;
    uint32_t generation;
    uint64_t trace_flow;  // the launch's flow id in the trace (trace.c); 0 when not recording
} tally_timeline_owner;

enum {
    // Measured with device timestamps; intervals placed on the host clock.
    TALLY_TIMELINE_TIMESTAMPS_CALIBRATED = 1,
    // Measured with device timestamps; durations only.
    TALLY_TIMELINE_TIMESTAMPS,
    // The device has no timestamps: the back end synced after each launch instead.
    TALLY_TIMELINE_SYNC_FALLBACK,
    // CUDA events around each launch, anchored to the host clock at blocking points.
    TALLY_TIMELINE_EVENTS,
};
#define TALLY_TIMELINE_NUM_APIS 4  // indexed by TALLY_DEVICE_API_*

// Timestamp records that could not be billed (expected 0 each).
enum {
    TALLY_TIMELINE_LOST = 0,    // completed, but no room to bill it, or its results unreadable
    TALLY_TIMELINE_OVERFLOWED,  // not timed: every query pool full and none could be added
    TALLY_TIMELINE_UNMATCHED,   // an end before its begin (beyond the counter's valid bits)
    TALLY_NUM_TIMELINE_PROBLEMS
};

typedef struct tally_timeline_summary {
    uint64_t kernels;  // timed device commands: kernels and staged copies
    uint64_t busy_ns;  // sum of the kernel intervals (one queue: they do not overlap)
    uint64_t span_ns;  // first kernel start to last kernel end, when calibrated
    // Host time the runtime spent waiting for the device during the pipeline's runs; busy_ns
    // minus it is the device time that overlapped host work.
    uint64_t host_wait_ns;
    uint64_t problems[TALLY_NUM_TIMELINE_PROBLEMS];  // process-wide
    int32_t mode[TALLY_TIMELINE_NUM_APIS];           // per device API; 0: unused
} tally_timeline_summary;

// The calling thread's owner now; while a trace is recorded, also records the launch (its flow).
tally_timeline_owner tally_timeline_owner_now(void);
// Whether the owner's pipeline was compiled for profile_timestamps.
int tally_timeline_owner_wants_timestamps(const tally_timeline_owner *o);
// Bills one completed kernel of `device_ns` to its owner; host_begin_ns is its start on the
// profiler's clock when `calibrated`.
void tally_timeline_add(const tally_timeline_owner *o, uint64_t device_ns, int32_t calibrated,
                        uint64_t host_begin_ns);
// A device wait of `ns` by the calling thread (device_waits.c), billed to its current run.
void tally_timeline_add_host_wait(uint64_t ns);
void tally_timeline_count_problem(int32_t problem);
void tally_timeline_set_mode(int32_t api, int32_t mode);
// Forgets everything billed so far (tally_profiler_reset); later completions of earlier launches
// are dropped.
void tally_timeline_reset(void);
// Per slot of `pipeline`: device time and kernels; and the pipeline's summary.
void tally_timeline_read(const void *pipeline, int32_t num_slots, uint64_t *slot_device_ns,
                         uint64_t *slot_kernels, tally_timeline_summary *out);
const char *tally_timeline_mode_name(int32_t mode);

// Device clock correlation, one map per device API: a back end takes several paired readings of
// its device clock and the profiler's clock, and tally_timeline_clock_pair keeps the tightest (the
// smallest deviation: the host clock's uncertainty about when the device reading was taken). The
// first kept pairing is the base of a drift fit: once a later one lies far enough away on the
// device clock, the rate (host ns per device ns) is refitted from the two. Device times map to the
// host clock from the newest pairing at that rate.
typedef struct tally_clock_reading {
    double device_ns;       // the device clock, in ns from the back end's own origin
    uint64_t host_ns;       // the profiler's clock at that device reading (best estimate)
    uint64_t deviation_ns;  // how far the true host time may lie from host_ns
} tally_clock_reading;
// Keeps the tightest of `n` readings for `api`; returns its index, or -1 when n <= 0.
int32_t tally_timeline_clock_pair(int32_t api, const tally_clock_reading *readings, int32_t n);
// The host time of `device_ns` on `api`'s clock; 0 when that API has no pairing yet.
int32_t tally_timeline_clock_to_host(int32_t api, double device_ns, uint64_t *host_ns);
// Forgets `api`'s pairings (its device was released: a new one has a new clock).
void tally_timeline_clock_forget(int32_t api);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_DEVICE_TIMELINE_H
