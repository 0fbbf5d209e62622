// The profiler's real clock (no testing clock here): whatever it reads, the invariant TSC
// calibrated against CLOCK_MONOTONIC or clock_gettime itself, each reading must fall between two
// CLOCK_MONOTONIC readings taken around it, up to the calibration's stated error, and never go
// backwards on a thread. Preemption between the three reads only widens the bracket, so a loaded
// machine makes the check easier, not flaky: it fails only for a wrong conversion (a rate the
// calibration should have rejected, a time base off by more than its error).

#include "TestUtil.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <time.h>

namespace {

uint64_t monotonic_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

TEST(Clock, ReadingsStayWithinMonotonicBracketsAndNeverGoBack) {
    tally_testing_set_clock(nullptr);
    uint64_t before = monotonic_ns();
    std::string name = tally_profiler_clock_name();  // calibrates the TSC (about 2 ms)
    ASSERT_TRUE(name == "tsc" || name == "clock_gettime") << name;
    // The calibration takes its pairs from brackets up to 20 us wide and checks the conversion
    // 1 ms after its base, so a rate can be off by a few percent on a loaded machine (shares do
    // not care; absolute times do): allow 3 % of the time since `before`, plus 30 us. What this
    // catches is a conversion gone wrong, not the calibration's noise.
    uint64_t prev = 0;
    int reads = 0;
    for (uint64_t start = monotonic_ns(); monotonic_ns() - start < 30000000u; reads++) {
        uint64_t lo = monotonic_ns();
        uint64_t t = tally_testing_now_ns();
        uint64_t hi = monotonic_ns();
        uint64_t slack = 30000u + (hi - before) / 33u;
        ASSERT_GE(t + slack, lo) << name << " read " << reads << ": " << (lo - t) << " ns early";
        ASSERT_LE(t, hi + slack) << name << " read " << reads << ": " << (t - hi) << " ns late";
        ASSERT_GE(t, prev) << name << " went back " << (prev - t) << " ns at read " << reads;
        prev = t;
    }
    EXPECT_GT(reads, 0);
}

}  // namespace
