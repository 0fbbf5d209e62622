// The profiler's clock (clock.c): the inline read every timestamp comes from, its TSC calibration
// and the test clock that overrides it. Layer core (runtime/layers.txt): the device back ends and
// the trace export read it too. Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_CORE_CLOCK_H
#define TALLY_RUNTIME_SRC_CORE_CLOCK_H

#include "tally_runtime_testing.h"

#include <stdatomic.h>
#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// The clock's state (clock.c). Exact mode reads the clock on every slot switch, so the read is
// inline: the test clock hook, then the calibrated TSC conversion
// ns = base_ns + ((tsc - base_tsc) * mult) >> 32, published by `use_tsc` (release).
typedef struct tally_tsc_conversion {
    uint64_t base_tsc;
    uint64_t base_ns;
    uint64_t mult;  // ns per tick, 32.32 fixed point
} tally_tsc_conversion;
extern _Atomic(tally_testing_clock_t) tally_test_clock __attribute__((visibility("hidden")));
extern tally_tsc_conversion tally_tsc __attribute__((visibility("hidden")));
extern _Atomic int32_t tally_use_tsc __attribute__((visibility("hidden")));

// A TSC reading in ns on CLOCK_MONOTONIC's time base, by the calibrated conversion. Signed from
// the calibration's base: a reading a few ticks before it (another CPU's counter, a hair behind)
// converts to a time a few ns before the base, not to one 2^64 ticks later.
static inline uint64_t tally_tsc_ticks_to_ns(uint64_t ticks) {
    // mult (ns per tick, 32.32, at most 10 << 32 by the calibration's plausibility check) fits
    // int64: a signed 64 x 64 -> 128 multiply is one imul, as fast as the unsigned mul.
    int64_t d = (int64_t)(ticks - tally_tsc.base_tsc);
    return tally_tsc.base_ns + (uint64_t)(int64_t)(((__int128)d * (int64_t)tally_tsc.mult) >> 32);
}

// CLOCK_MONOTONIC in ns (what tally_now_ns reads without a calibrated TSC).
uint64_t tally_monotonic_ns(void);

// The clock every profiler timestamp comes from, in ns on CLOCK_MONOTONIC's time base: the
// invariant TSC once tally_clock_init has calibrated it, else clock_gettime; a test clock
// (tally_testing_set_clock) overrides both. Async-signal-safe.
static inline uint64_t tally_now_ns(void) {
    tally_testing_clock_t clock = atomic_load_explicit(&tally_test_clock, memory_order_relaxed);
    if (clock) {
        return clock();
    }
#if defined(__x86_64__) || defined(__i386__)
    if (atomic_load_explicit(&tally_use_tsc, memory_order_acquire)) {
        return tally_tsc_ticks_to_ns(__builtin_ia32_rdtsc());
    }
#endif
    return tally_monotonic_ns();
}
// Calibrates the TSC (once per process; ~1 ms). Called when a profiled run starts.
void tally_clock_init(void);
// What tally_now_ns reads: "tsc", "clock_gettime" or "test clock".
const char *tally_clock_name(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_CORE_CLOCK_H
