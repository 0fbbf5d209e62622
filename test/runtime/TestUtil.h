// Helpers shared by the runtime tests: clocks, CPU-burning waits, message capture, a fixture that
// leaves the profiler clean, and a fake clock for deterministic profiler runs.
#ifndef TALLY_TEST_RUNTIME_TESTUTIL_H
#define TALLY_TEST_RUNTIME_TESTUTIL_H

#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

namespace tally_test {

inline uint64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// Burns CPU (real arithmetic, no sleeping) until `ns` of wall time have passed; returns the wall
// time actually spent.
/** Yields until `done()` or until `ns` have passed since `start_ns` (monotonic_ns); returns
 * done(). For tests that need another thread to have reached a point: however loaded the
 * machine, that thread runs within the bound, and a broken one costs the bound once. */
template <typename Done>
bool wait_until(Done done, uint64_t start_ns, uint64_t ns = 20000000000ull) {
    while (!done()) {
        if (monotonic_ns() - start_ns > ns) {
            return false;
        }
        std::this_thread::yield();
    }
    return true;
}

inline uint64_t spin_for_ns(uint64_t ns) {
    uint64_t start = monotonic_ns();
    volatile double x = 1.0;
    uint64_t now = start;
    while (now - start < ns) {
        for (int i = 0; i < 200; i++) {
            x = x * 1.0000001 + 1e-9;
        }
        now = monotonic_ns();
    }
    return now - start;
}

// Records everything sent to halide_error and halide_print while alive.
class MessageCapture {
public:
    MessageCapture() {
        instance() = this;
        prev_error_ = tally_set_error_handler(&MessageCapture::on_error);
        prev_print_ = tally_set_print_handler(&MessageCapture::on_print);
    }
    ~MessageCapture() {
        tally_set_error_handler(prev_error_);
        tally_set_print_handler(prev_print_);
        instance() = nullptr;
    }
    std::vector<std::string> errors() {
        std::lock_guard<std::mutex> lock(mutex_);
        return errors_;
    }
    std::string printed() {
        std::lock_guard<std::mutex> lock(mutex_);
        return printed_;
    }
    std::vector<void *> contexts() {
        std::lock_guard<std::mutex> lock(mutex_);
        return contexts_;
    }

private:
    static MessageCapture *&instance() {
        static MessageCapture *current = nullptr;
        return current;
    }
    static void on_error(void *uc, const char *msg) {
        MessageCapture *self = instance();
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->errors_.push_back(msg);
        self->contexts_.push_back(uc);
    }
    static void on_print(void *uc, const char *msg) {
        MessageCapture *self = instance();
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->printed_ += msg;
    }
    std::mutex mutex_;
    std::vector<std::string> errors_;
    std::vector<void *> contexts_;
    std::string printed_;
    tally_message_handler_t prev_error_;
    tally_message_handler_t prev_print_;
};

// A clock the test moves by hand (tally_testing_set_clock).
inline std::atomic<uint64_t> &fake_time_ns() {
    static std::atomic<uint64_t> t{1000000000};
    return t;
}
inline uint64_t fake_clock() {
    return fake_time_ns().load();
}

// Profiler tests start and end with an empty registry, the real clock, the default interval. They
// test the sampling rule unless they choose another mode: runs without a mode flag sample from
// the sampler thread (ProfilerExactTest.cpp sets exact mode).
class ProfilerTest : public ::testing::Test {
protected:
    void SetUp() override {
        tally_testing_set_clock(nullptr);
        tally_profiler_set_interval_us(1000);
        tally_profiler_reset();
        tally_profiler_set_default_mode(TALLY_PROFILER_FLAG_SAMPLING);
    }
    void TearDown() override {
        tally_testing_set_clock(nullptr);
        tally_profiler_set_interval_us(1000);
        tally_profiler_reset();
        tally_profiler_set_default_mode(0);
    }
};

inline tally_pipeline_stats pipeline_stats(const char *name) {
    tally_pipeline_stats s{};
    EXPECT_EQ(tally_profiler_get_pipeline_stats(name, &s), 0) << name;
    return s;
}

inline tally_slot_stats slot_stats(const char *name, int32_t slot) {
    tally_slot_stats s{};
    EXPECT_EQ(tally_profiler_get_slot_stats(name, slot, &s), 0) << name << " slot " << slot;
    return s;
}

inline std::string report_text(int32_t json) {
    int32_t n = tally_profiler_report_to_buffer(nullptr, 0, json);
    EXPECT_GE(n, 0);
    std::string s(size_t(n > 0 ? n : 0) + 1, '\0');
    EXPECT_EQ(tally_profiler_report_to_buffer(&s[0], s.size(), json), n);
    s.resize(size_t(n > 0 ? n : 0));
    return s;
}

}  // namespace tally_test

#endif  // TALLY_TEST_RUNTIME_TESTUTIL_H
