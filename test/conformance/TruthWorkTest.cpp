// The truth pipelines' work (truth_work.h): a call waits its ns of the thread's chained deadline,
// and time the thread loses between its clock reads is pushed onto the deadline and counted to
// the call's ns, which is what makes a stage's truth its set time plus its lost time.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "truth_work.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

void sleep_us(int us) {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
}

TEST(TruthWork, ACallWaitsItsNs) {
    Clock::time_point t0 = Clock::now();
    EXPECT_EQ(tally_truth_work(41, 200000, 1), 42);
    EXPECT_GE(ns_since(t0), 200000);
}

TEST(TruthWork, TimeLostBetweenCallsIsCountedToTheNextCallsNsAndNotCaughtUp) {
    tally_truth_reset_lost();
    tally_truth_work(0, 1000, 1);
    sleep_us(2000);
    Clock::time_point t0 = Clock::now();
    tally_truth_work(0, 100000, 0);
    // The sleep is lost time: the call still runs for its ns (less at most one gap's worth of
    // the previous call's overshoot), rather than returning at once to catch up.
    EXPECT_GE(ns_since(t0), 100000 - TALLY_TRUTH_GAP_NS);
    EXPECT_GE(tally_truth_lost_ns(100000), 2000000);
    EXPECT_EQ(tally_truth_lost_ns(777), 0);
    EXPECT_EQ(tally_truth_lost_unkeyed_ns(), 0);
}

TEST(TruthWork, AGapBeforeACallAfterAJoinIsTheStageBeforesLoss) {
    tally_truth_reset_lost();
    tally_truth_work(0, 300, TALLY_TRUTH_RESTART);
    tally_truth_work(0, 400, TALLY_TRUTH_CONTINUE);
    sleep_us(2000);
    tally_truth_work(0, 500, TALLY_TRUTH_AFTER_JOIN);
    EXPECT_GE(tally_truth_lost_ns(400), 2000000);
    EXPECT_LT(tally_truth_lost_ns(500), 2000000);
    // Without the mark the gap is the next call's.
    sleep_us(2000);
    tally_truth_work(0, 600, TALLY_TRUTH_CONTINUE);
    EXPECT_GE(tally_truth_lost_ns(600), 2000000);
}

TEST(TruthWork, AChainsFirstCallCountsNoGap) {
    tally_truth_reset_lost();
    tally_truth_work(0, 10, 1);
    sleep_us(50000);
    tally_truth_work(0, 10, 1);
    // Only the two calls' own waits could have lost time: far less than the 50 ms between them.
    EXPECT_LT(tally_truth_lost_ns(10), 50000000);
}

TEST(TruthWork, EachThreadHasItsOwnChain) {
    tally_truth_reset_lost();
    tally_truth_work(0, 3000, 1);
    sleep_us(50000);
    std::thread other([] {
        // A thread's first call starts its own chain, whatever `first` says: the 50 ms since this
        // thread's last return are not the other thread's loss.
        tally_truth_work(0, 5000, 0);
        sleep_us(3000);
        tally_truth_work(0, 5000, 0);
    });
    other.join();
    EXPECT_GE(tally_truth_lost_ns(5000), 3000000);
    EXPECT_LT(tally_truth_lost_ns(5000), 50000000);
    // Only this thread's one wait so far could have lost time to it.
    EXPECT_LT(tally_truth_lost_ns(3000), 50000000);
    tally_truth_work(0, 3000, 0);
    EXPECT_GE(tally_truth_lost_ns(3000), 50000000 + 3000000);
}

TEST(TruthWork, AForkedTaskOnAPoolThreadStartsItsOwnChainAndCountsNoGap) {
    tally_truth_reset_lost();
    std::thread pool_thread([] {
        tally_truth_work(0, 7000, TALLY_TRUTH_FORK);
        sleep_us(3000);
        tally_truth_work(0, 7000, TALLY_TRUTH_CONTINUE);
        // The next run's task: a fresh chain again, the 50 ms since are no one's.
        sleep_us(50000);
        tally_truth_work(0, 7000, TALLY_TRUTH_FORK);
    });
    pool_thread.join();
    // What a pool thread loses is the calling thread's only through its wait at the join.
    EXPECT_EQ(tally_truth_lost_ns(7000), 0);
}

TEST(TruthWork, AForkedTaskTheCallingThreadTakesIsTheRunsTimeUntilTheJoin) {
    // A call runs its ns of time that is no gap, so calls that are not billed whole lose at most
    // their wall time less their ns (whatever the load): the bound the checks below use.
    const int64_t slack = 2 * TALLY_TRUTH_GAP_NS;
    tally_truth_reset_lost();
    Clock::time_point t0 = Clock::now();
    tally_truth_work(0, 8000, TALLY_TRUTH_RESTART);
    tally_truth_work(0, 8000, TALLY_TRUTH_CONTINUE);
    const int64_t run_wall = ns_since(t0);
    sleep_us(2000);
    // The calling thread takes the other task: its chain goes on, and the task's calls cost the
    // run their ns and their gaps (the one before the task included).
    tally_truth_work(0, 9000, TALLY_TRUTH_FORK);
    tally_truth_work(0, 9000, TALLY_TRUTH_CONTINUE);
    const int64_t taken = tally_truth_lost_ns(9000);
    EXPECT_GE(taken, 2000000 + 2 * 9000);
    EXPECT_LE(tally_truth_lost_ns(8000), run_wall - 2 * 8000 + slack);
    // The join ends the task: a gap before it is still the task's, the calls after it are not.
    sleep_us(2000);
    EXPECT_GE(tally_truth_lost_ns(9000), taken);
    Clock::time_point t1 = Clock::now();
    tally_truth_work(0, 10000, TALLY_TRUTH_AFTER_JOIN);
    tally_truth_work(0, 10000, TALLY_TRUTH_CONTINUE);
    const int64_t after_wall = ns_since(t1);
    EXPECT_GE(tally_truth_lost_ns(9000), taken + 2000000);
    EXPECT_LE(tally_truth_lost_ns(10000), after_wall - 2 * 10000 + slack);
}

TEST(TruthWork, ATableFullOfNsCountsTheRestUnkeyedAndAResetForgetsAll) {
    tally_truth_reset_lost();
    auto ns_of = [](int k) { return int32_t(100 * (k + 1)); };
    for (int k = 0; k <= TALLY_TRUTH_KEYS; k++) {
        tally_truth_work(0, ns_of(k), 1);
        sleep_us(100);
        tally_truth_work(0, ns_of(k), 0);
    }
    for (int k = 0; k < TALLY_TRUTH_KEYS; k++) {
        EXPECT_GE(tally_truth_lost_ns(ns_of(k)), 100000) << k;
    }
    EXPECT_EQ(tally_truth_lost_ns(ns_of(TALLY_TRUTH_KEYS)), 0);
    EXPECT_GE(tally_truth_lost_unkeyed_ns(), 100000);
    tally_truth_reset_lost();
    for (int k = 0; k <= TALLY_TRUTH_KEYS; k++) {
        EXPECT_EQ(tally_truth_lost_ns(ns_of(k)), 0) << k;
    }
    EXPECT_EQ(tally_truth_lost_unkeyed_ns(), 0);
}

}  // namespace
