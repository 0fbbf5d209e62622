// Profiler run semantics with a hand-moved clock: the sampling rule (main thread, waiting, worker
// splitting, nesting), device counters, copy slots, start/end edge cases and failures.
#include "TestUtil.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace {

using tally_test::fake_clock;
using tally_test::fake_time_ns;

const char *const kSlotNames[] = {"overhead", "a", "b", "input (copy to device)",
                                  "b (copy to host)"};
const int32_t kSlotKinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                              TALLY_SLOT_COPY_TO_DEVICE, TALLY_SLOT_COPY_TO_HOST};

class ProfilerRun : public tally_test::ProfilerTest {
protected:
    void SetUp() override {
        ProfilerTest::SetUp();
        // Keep the sampler thread out of the way; the test samples by hand.
        tally_profiler_set_interval_us(1000000);
        tally_testing_set_clock(fake_clock);
    }
    void advance_ms(uint64_t ms) { fake_time_ns() += ms * 1000000; }
    void *start(const char *name, int32_t flags = 0) {
        return tally_profiler_start(nullptr, name, "host-profile", 5, kSlotNames, kSlotKinds,
                                    nullptr, flags);
    }
};

TEST_F(ProfilerRun, MainThreadTicksBillTheCurrentSlot) {
    void *inst = start("main_ticks");
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 1);
    advance_ms(3);
    tally_testing_sample_now();
    tally_testing_sample_now();  // nothing elapsed: no sample
    tally_profiler_set_current(inst, 2);
    advance_ms(5);
    tally_testing_sample_now();
    advance_ms(2);  // billed by the final sample at end, to b
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    tally_pipeline_stats ps = tally_test::pipeline_stats("main_ticks");
    EXPECT_EQ(ps.total_ns, 10000000u);
    EXPECT_EQ(ps.samples, 3u);
    EXPECT_DOUBLE_EQ(ps.average_threads, 1.0);
    EXPECT_EQ(tally_test::slot_stats("main_ticks", 1).time_ns, 3000000u);
    EXPECT_EQ(tally_test::slot_stats("main_ticks", 2).time_ns, 7000000u);
    EXPECT_EQ(tally_test::slot_stats("main_ticks", 2).samples, 2u);
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("main_ticks", 1).percent, 30.0);
}

TEST_F(ProfilerRun, TimerModeRunsWithTheSameRule) {
    void *inst = start("timer_rule", TALLY_PROFILER_FLAG_TIMER);
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 2);
    advance_ms(4);
    tally_testing_sample_now();
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    EXPECT_EQ(tally_test::slot_stats("timer_rule", 2).time_ns, 4000000u);
}

// A device whose global sync takes 4 ms of (fake) time, sampled while it waits.
int32_t slow_sync_global(void *, const halide_device_interface_t *) {
    tally_test::fake_time_ns() += 4000000;
    tally_testing_sample_now();
    return 0;
}

TEST_F(ProfilerRun, DeviceWaitsCountZeroThreads) {
    halide_device_interface_t slow = *halide_host_device_interface();
    slow.name = "slow";
    slow.device_sync_global = slow_sync_global;
    void *inst = start("waits");
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 2);
    advance_ms(4);
    tally_testing_sample_now();  // b working: 1 thread
    tally_profiler_count_launch();
    ASSERT_EQ(halide_device_sync_global(nullptr, &slow), 0);  // b waiting: 0 threads
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    tally_slot_stats b = tally_test::slot_stats("waits", 2);
    EXPECT_EQ(b.time_ns, 8000000u);
    EXPECT_EQ(b.samples, 2u);
    EXPECT_DOUBLE_EQ(b.average_threads, 0.5);
    tally_pipeline_stats ps = tally_test::pipeline_stats("waits");
    EXPECT_EQ(ps.kernel_launches, 1u);
    EXPECT_EQ(ps.injected_syncs, 1u);
    EXPECT_DOUBLE_EQ(ps.average_threads, 0.5);
}

TEST_F(ProfilerRun, ActiveWorkersSplitTheTick) {
    void *inst = start("workers");
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 0);
    std::mutex m;
    std::condition_variable cv;
    int ready = 0;
    bool done = false;
    auto worker = [&](int slot) {
        void *ctx = tally_profiler_thread_begin(inst);
        ASSERT_NE(ctx, nullptr);
        ASSERT_NE(ctx, inst);
        tally_profiler_set_current(ctx, slot);
        std::unique_lock<std::mutex> lock(m);
        ready++;
        cv.notify_all();
        cv.wait(lock, [&] { return done; });
        lock.unlock();
        tally_profiler_thread_end(ctx);
    };
    std::thread t1(worker, 1), t2(worker, 2);
    {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return ready == 2; });
    }
    advance_ms(6);
    tally_testing_sample_now();  // two workers: 3 ms each, 2 threads
    {
        std::lock_guard<std::mutex> lock(m);
        done = true;
    }
    cv.notify_all();
    t1.join();
    t2.join();
    advance_ms(1);  // no workers: main's slot (overhead)
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    EXPECT_EQ(tally_test::slot_stats("workers", 1).time_ns, 3000000u);
    EXPECT_EQ(tally_test::slot_stats("workers", 2).time_ns, 3000000u);
    EXPECT_DOUBLE_EQ(tally_test::slot_stats("workers", 1).average_threads, 2.0);
    EXPECT_EQ(tally_test::slot_stats("workers", 0).time_ns, 1000000u);
    tally_pipeline_stats ps = tally_test::pipeline_stats("workers");
    EXPECT_EQ(ps.samples, 2u);
    EXPECT_DOUBLE_EQ(ps.average_threads, 1.5);
}

TEST_F(ProfilerRun, NestedTasksOnOneThreadCountOnce) {
    void *inst = start("nested");
    ASSERT_NE(inst, nullptr);
    void *outer = tally_profiler_thread_begin(inst);
    tally_profiler_set_current(outer, 1);
    void *inner = tally_profiler_thread_begin(inst);
    EXPECT_NE(inner, outer);
    tally_profiler_set_current(inner, 2);
    advance_ms(2);
    tally_testing_sample_now();  // only the inner context works
    tally_profiler_thread_end(inner);
    advance_ms(3);
    tally_testing_sample_now();  // the outer one again
    tally_profiler_thread_end(outer);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    EXPECT_EQ(tally_test::slot_stats("nested", 2).time_ns, 2000000u);
    EXPECT_EQ(tally_test::slot_stats("nested", 1).time_ns, 3000000u);
    EXPECT_DOUBLE_EQ(tally_test::pipeline_stats("nested").average_threads, 1.0);
}

TEST_F(ProfilerRun, WorkerPoolOverflowFallsBackToAllocatedContexts) {
    void *inst = start("overflow");
    ASSERT_NE(inst, nullptr);
    std::vector<void *> contexts;
    // More contexts than the preallocated pool (nested on one thread, so only the last counts).
    for (int i = 0; i < 100; i++) {
        void *ctx = tally_profiler_thread_begin(inst);
        ASSERT_NE(ctx, nullptr);
        tally_profiler_set_current(ctx, 1 + i % 2);
        contexts.push_back(ctx);
    }
    advance_ms(1);
    tally_testing_sample_now();
    for (int i = 99; i >= 0; i--) {
        tally_profiler_thread_end(contexts[i]);
    }
    // Reuse after release: no new allocation needed, still works.
    void *again = tally_profiler_thread_begin(inst);
    ASSERT_NE(again, nullptr);
    tally_profiler_thread_end(again);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    EXPECT_EQ(tally_test::slot_stats("overflow", 2).time_ns, 1000000u);  // i = 99 -> slot 2
}

TEST_F(ProfilerRun, CopiesAndSyncsAreCountedPerRunAndSlot) {
    float data[32] = {0};
    halide_dimension_t dim = {0, 32, 1, 0};
    halide_buffer_t buf;
    std::memset(&buf, 0, sizeof(buf));
    buf.host = reinterpret_cast<uint8_t *>(data);
    buf.type = {halide_type_float, 32, 1};
    buf.dimensions = 1;
    buf.dim = &dim;
    const halide_device_interface_t *host = halide_host_device_interface();

    // Outside any run: nothing is counted anywhere, nothing crashes.
    tally_profiler_count_launch();
    tally_buffer_set_host_dirty(&buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &buf, host), 0);

    void *inst = start("copies");
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 3);
    tally_buffer_set_host_dirty(&buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &buf, host), 0);
    ASSERT_EQ(halide_copy_to_device(nullptr, &buf, host), 0);  // not dirty: no copy
    ASSERT_EQ(halide_device_sync_global(nullptr, host), 0);
    tally_profiler_set_current(inst, 2);
    tally_profiler_count_launch();
    tally_profiler_count_launch();
    tally_buffer_set_device_dirty(&buf, true);
    tally_profiler_set_current(inst, 4);
    ASSERT_EQ(halide_copy_to_host(nullptr, &buf), 0);
    ASSERT_EQ(halide_copy_to_host(nullptr, &buf), 0);  // not dirty: no copy
    ASSERT_EQ(halide_device_sync(nullptr, &buf), 0);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    ASSERT_EQ(halide_device_free(nullptr, &buf), 0);

    tally_pipeline_stats ps = tally_test::pipeline_stats("copies");
    EXPECT_EQ(ps.kernel_launches, 2u);
    EXPECT_EQ(ps.injected_syncs, 1u);
    EXPECT_EQ(ps.explicit_syncs, 1u);
    EXPECT_EQ(ps.copies_to_device, 1u);
    EXPECT_EQ(ps.copies_to_device_bytes, 128u);
    EXPECT_EQ(ps.copies_to_host, 1u);
    EXPECT_EQ(ps.copies_to_host_bytes, 128u);
    EXPECT_EQ(tally_test::slot_stats("copies", 3).copies, 1u);
    EXPECT_EQ(tally_test::slot_stats("copies", 4).copy_bytes, 128u);
    EXPECT_EQ(tally_test::slot_stats("copies", 2).copies, 0u);
}

TEST_F(ProfilerRun, EndOfNullIsANoOp) {
    EXPECT_EQ(tally_profiler_end(nullptr, nullptr), 0);
}

TEST_F(ProfilerRun, HotCallsAcceptNull) {
    tally_profiler_set_current(nullptr, 3);
    EXPECT_EQ(tally_profiler_thread_begin(nullptr), nullptr);
    tally_profiler_thread_end(nullptr);
}

TEST_F(ProfilerRun, BadStartArgumentsAreReported) {
    tally_test::MessageCapture capture;
    EXPECT_EQ(tally_profiler_start(nullptr, nullptr, "host", 1, kSlotNames, nullptr, nullptr, 0),
              nullptr);
    EXPECT_EQ(tally_profiler_start(nullptr, "p", "host", 0, kSlotNames, nullptr, nullptr, 0),
              nullptr);
    EXPECT_EQ(tally_profiler_start(nullptr, "p", "host", 2, nullptr, nullptr, nullptr, 0), nullptr);
    const char *const with_null[] = {"overhead", nullptr};
    EXPECT_EQ(tally_profiler_start(nullptr, "p", "host", 2, with_null, nullptr, nullptr, 0),
              nullptr);
    const int32_t bad_kind[] = {0, 7};
    EXPECT_EQ(tally_profiler_start(nullptr, "p", "host", 2, kSlotNames, bad_kind, nullptr, 0),
              nullptr);
    EXPECT_EQ(tally_profiler_start(nullptr, "p", "host", 2, kSlotNames, nullptr, nullptr, 0x20),
              nullptr);
    EXPECT_EQ(capture.errors().size(), 6u);
    EXPECT_EQ(tally_profiler_num_pipelines(), 0);
}

TEST_F(ProfilerRun, SamplerThreadStartFailureIsAnErrorNotACrash) {
    tally_test::MessageCapture capture;
    tally_profiler_shutdown();
    tally_testing_fail_thread_starts(1);
    int uc = 0;
    EXPECT_EQ(
        tally_profiler_start(&uc, "no_sampler", "host", 5, kSlotNames, kSlotKinds, nullptr, 0),
        nullptr);
    auto errors = capture.errors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("cannot start the sampler thread"), std::string::npos);
    EXPECT_EQ(capture.contexts()[0], &uc);
    // The failed start left nothing behind, and the next start works.
    EXPECT_EQ(tally_testing_live_instances(), 0);
    void *inst = start("no_sampler");
    ASSERT_NE(inst, nullptr);
    EXPECT_EQ(tally_profiler_end(nullptr, inst), 0);
    EXPECT_EQ(tally_test::pipeline_stats("no_sampler").runs, 1u);
}

TEST_F(ProfilerRun, ResetWhileARunIsInFlight) {
    void *inst = start("orphan");
    ASSERT_NE(inst, nullptr);
    tally_profiler_reset();
    EXPECT_EQ(tally_profiler_num_pipelines(), 0);
    advance_ms(1);
    EXPECT_EQ(tally_profiler_end(nullptr, inst), 0);
    EXPECT_EQ(tally_profiler_num_pipelines(), 0);
    tally_pipeline_stats ps;
    EXPECT_EQ(tally_profiler_get_pipeline_stats("orphan", &ps), TALLY_ERROR_NOT_FOUND);
}

TEST_F(ProfilerRun, SameNameDifferentSlotsAreSeparatePipelines) {
    void *a = start("shape");
    const char *const other[] = {"overhead", "z"};
    void *b = tally_profiler_start(nullptr, "shape", "host", 2, other, nullptr, nullptr, 0);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    tally_profiler_end(nullptr, b);
    tally_profiler_end(nullptr, a);
    EXPECT_EQ(tally_profiler_num_pipelines(), 2);
    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats_by_index(1, &ps), 0);
    EXPECT_EQ(ps.num_slots, 2);
    EXPECT_EQ(tally_profiler_get_pipeline_stats_by_index(2, &ps), TALLY_ERROR_NOT_FOUND);
    tally_slot_stats ss;
    EXPECT_EQ(tally_profiler_get_slot_stats_by_index(1, 1, &ss), 0);
    EXPECT_STREQ(ss.name, "z");
    EXPECT_EQ(tally_profiler_get_slot_stats("shape", 9, &ss), TALLY_ERROR_NOT_FOUND);
}

TEST_F(ProfilerRun, NestedPipelinesRestoreTheCurrentContext) {
    float data[4] = {0};
    halide_dimension_t dim = {0, 4, 1, 0};
    halide_buffer_t buf;
    std::memset(&buf, 0, sizeof(buf));
    buf.host = reinterpret_cast<uint8_t *>(data);
    buf.type = {halide_type_float, 32, 1};
    buf.dimensions = 1;
    buf.dim = &dim;
    void *outer = start("outer_pipe");
    void *inner = start("inner_pipe");  // e.g. an extern stage running another pipeline
    tally_profiler_count_launch();
    tally_profiler_end(nullptr, inner);
    tally_profiler_count_launch();  // the outer run is current again
    tally_profiler_end(nullptr, outer);
    EXPECT_EQ(tally_test::pipeline_stats("inner_pipe").kernel_launches, 1u);
    EXPECT_EQ(tally_test::pipeline_stats("outer_pipe").kernel_launches, 1u);
    tally_profiler_count_launch();  // no run: ignored
}

TEST(ProfilerSampler, IdlesWhenNoRunIsLive) {
    tally_testing_set_clock(nullptr);
    tally_profiler_set_interval_us(100);  // a busy sampler would show quickly
    const char *const names[] = {"overhead"};
    void *inst = tally_profiler_start(nullptr, "idle_check", "host", 1, names, nullptr, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    tally_profiler_end(nullptr, inst);
    timespec settle = {0, 5000000};
    nanosleep(&settle, nullptr);
    uint64_t before = tally_testing_sampler_cpu_ns();
    timespec nap = {0, 100000000};
    nanosleep(&nap, nullptr);
    uint64_t used = tally_testing_sampler_cpu_ns() - before;
    // Blocked on its condition variable: no ticks (at 10 kHz it would spend milliseconds).
    EXPECT_LT(used, 300000u);
    tally_profiler_set_interval_us(1000);
    tally_profiler_reset();
}

TEST(ProfilerInterval, SetAndClamp) {
    uint32_t saved = tally_profiler_get_interval_us();
    tally_profiler_set_interval_us(250);
    EXPECT_EQ(tally_profiler_get_interval_us(), 250u);
    tally_profiler_set_interval_us(1);
    EXPECT_EQ(tally_profiler_get_interval_us(), 10u);
    tally_profiler_set_interval_us(saved);
}

}  // namespace
