// Sampled shares against truth measured in the same test: three stages that burn CPU for 10, 30
// and 60 ms, in the sampler-thread mode and the timer-signal mode. Every share must be within 3
// percentage points of the measured truth.
#include "TestUtil.h"

#include <cstdio>

namespace {

using tally_test::monotonic_ns;
using tally_test::spin_for_ns;

const char *const kSlotNames[] = {"overhead", "stage_10ms", "stage_30ms", "stage_60ms"};
// Several runs per mode: a sampler tick delayed by a busy machine misbills at most that delay,
// and over 5 x 100 ms even a 10 ms stall at a stage boundary stays within the tolerance.
constexpr int kRuns = 5;

// Runs the three stages kRuns times as runs of `pipeline`; returns the measured wall time of each
// slot (overhead = everything outside the stages).
void run_stages(const char *pipeline, int32_t flags, uint64_t truth[4]) {
    const uint64_t durations_ms[3] = {10, 30, 60};
    for (int run = 0; run < kRuns; run++) {
        void *inst =
            tally_profiler_start(nullptr, pipeline, "host-profile", 4, kSlotNames, nullptr, flags);
        ASSERT_NE(inst, nullptr);
        uint64_t start = monotonic_ns();
        uint64_t mark = start;
        for (int s = 0; s < 3; s++) {
            tally_profiler_set_current(inst, s + 1);
            spin_for_ns(durations_ms[s] * 1000000);
            uint64_t now = monotonic_ns();
            truth[s + 1] += now - mark;
            mark = now;
        }
        tally_profiler_set_current(inst, 0);
        ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    }
}

void check_shares(const char *pipeline, const uint64_t truth[4]) {
    tally_pipeline_stats ps = tally_test::pipeline_stats(pipeline);
    EXPECT_EQ(ps.runs, uint64_t(kRuns));
    uint64_t truth_total = truth[1] + truth[2] + truth[3];
    // The runtime's wall time brackets the stages tightly.
    EXPECT_GE(ps.total_ns, truth_total);
    EXPECT_LT(ps.total_ns, truth_total + 5000000ull * kRuns);
    // ~1 sample per ms; allow for a loaded machine.
    EXPECT_GT(ps.samples, uint64_t(kRuns * 100 / 4));
    uint64_t sum = 0;
    for (int s = 0; s < 4; s++) {
        tally_slot_stats ss = tally_test::slot_stats(pipeline, s);
        sum += ss.time_ns;
        double want =
            100.0 * double(s == 0 ? ps.total_ns - truth_total : truth[s]) / double(ps.total_ns);
        std::printf("  %-11s truth %6.2f%%  reported %6.2f%%  (%llu samples)\n", kSlotNames[s],
                    want, ss.percent, (unsigned long long)ss.samples);
        EXPECT_NEAR(ss.percent, want, 3.0) << kSlotNames[s];
        if (s > 0) {
            EXPECT_NEAR(ss.average_threads, 1.0, 1e-9);
        }
    }
    // Rescaling makes the slot times add up to the wall time exactly.
    EXPECT_EQ(sum, ps.total_ns);
}

class ProfilerAccuracy : public tally_test::ProfilerTest {};

TEST_F(ProfilerAccuracy, SamplerThreadSharesWithin3Points) {
    uint64_t truth[4] = {0, 0, 0, 0};
    run_stages("accuracy_thread", 0, truth);
    check_shares("accuracy_thread", truth);
}

TEST_F(ProfilerAccuracy, TimerSignalSharesWithin3Points) {
    uint64_t truth[4] = {0, 0, 0, 0};
    run_stages("accuracy_timer", TALLY_PROFILER_FLAG_TIMER, truth);
    check_shares("accuracy_timer", truth);
    EXPECT_EQ(tally_test::pipeline_stats("accuracy_timer").flags, TALLY_PROFILER_FLAG_TIMER);
}

}  // namespace
