// The clock every profiler timestamp comes from: CLOCK_MONOTONIC, unless a test replaced it
// (tally_testing_set_clock) to make sampled times deterministic.

#include "internal.h"

#include <time.h>

static _Atomic(tally_testing_clock_t) test_clock;

uint64_t tally_now_ns(void) {
    tally_testing_clock_t clock = atomic_load_explicit(&test_clock, memory_order_relaxed);
    if (clock) {
        return clock();
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tally_testing_set_clock(tally_testing_clock_t clock) {
    atomic_store(&test_clock, clock);
}

uint64_t tally_testing_now_ns(void) {
    return tally_now_ns();
}
