// Concurrent runs: 8 threads each run 200 instances, alternating between two pipelines, with
// parallel loops, memory events, device copies, syncs and launches inside every run. Every total
// must be exactly the sum of what the runs did: nothing lost, nothing mixed between runs.
#include "TestUtil.h"

#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 8;
constexpr int kRunsPerThread = 200;
constexpr int kTasks = 4;
const char *const kPipelines[2] = {"concurrent_a", "concurrent_b"};
const char *const kSlotNames[] = {"overhead", "outer", "inner", "input (copy to device)"};
const int32_t kSlotKinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                              TALLY_SLOT_COPY_TO_DEVICE};

// Heap bytes allocated by "outer" per run (per pipeline, so mixing would show), and by each task.
const uint64_t kOuterBytes[2] = {1000, 3000};
const uint64_t kInnerBytes = 64;

int32_t inner_task(void *uc, int32_t idx, uint8_t *closure) {
    void *inst = closure;
    void *ctx = tally_profiler_thread_begin(inst);
    tally_profiler_set_current(ctx, 2);
    tally_profiler_memory_allocate(inst, 2, TALLY_MEMORY_HEAP, kInnerBytes);
    volatile int x = 0;
    for (int i = 0; i < 200; i++) {
        x = x + i;
    }
    tally_profiler_memory_free(inst, 2, TALLY_MEMORY_HEAP, kInnerBytes);
    tally_profiler_thread_end(ctx);
    return 0;
}

void one_run(int which, halide_buffer_t *buf) {
    void *inst = tally_profiler_start(nullptr, kPipelines[which], "host-profile", 4, kSlotNames,
                                      kSlotKinds, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 1);
    tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, kOuterBytes[which]);
    ASSERT_EQ(halide_do_par_for(nullptr, inner_task, 0, kTasks, static_cast<uint8_t *>(inst)), 0);
    tally_profiler_set_current(inst, 3);
    tally_buffer_set_host_dirty(buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, buf, halide_host_device_interface()), 0);
    ASSERT_EQ(halide_device_sync_global(nullptr, halide_host_device_interface()), 0);
    tally_profiler_set_current(inst, 1);
    tally_profiler_count_launch();
    ASSERT_EQ(halide_device_sync(nullptr, buf), 0);
    tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_DEVICE, 4096);
    tally_profiler_memory_free(inst, 1, TALLY_MEMORY_DEVICE, 4096);
    tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, kOuterBytes[which]);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
}

class ProfilerConcurrency : public tally_test::ProfilerTest {};

TEST_F(ProfilerConcurrency, EightThreadsTwoPipelinesNothingLost) {
    tally_profiler_set_interval_us(100);  // sample often, to race the sampler against the runs
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([t] {
            float data[16];
            std::memset(data, 0, sizeof(data));
            halide_dimension_t dim = {0, 16, 1, 0};
            halide_buffer_t buf;
            std::memset(&buf, 0, sizeof(buf));
            buf.host = reinterpret_cast<uint8_t *>(data);
            buf.type = {halide_type_float, 32, 1};
            buf.dimensions = 1;
            buf.dim = &dim;
            for (int r = 0; r < kRunsPerThread; r++) {
                one_run((t + r) % 2, &buf);
            }
            halide_device_free(nullptr, &buf);
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    EXPECT_EQ(tally_testing_live_instances(), 0);
    ASSERT_EQ(tally_profiler_num_pipelines(), 2);
    const uint64_t runs = kThreads * kRunsPerThread / 2;
    for (int which = 0; which < 2; which++) {
        const char *name = kPipelines[which];
        tally_pipeline_stats ps = tally_test::pipeline_stats(name);
        EXPECT_EQ(ps.runs, runs) << name;
        EXPECT_EQ(ps.kernel_launches, runs);
        EXPECT_EQ(ps.injected_syncs, runs);
        EXPECT_EQ(ps.explicit_syncs, runs);
        EXPECT_EQ(ps.copies_to_device, runs);
        EXPECT_EQ(ps.copies_to_device_bytes, runs * 64);
        EXPECT_EQ(ps.copies_to_host, 0u);
        EXPECT_GE(ps.heap_peak, kOuterBytes[which]);
        EXPECT_LE(ps.heap_peak, kOuterBytes[which] + kTasks * kInnerBytes);
        EXPECT_EQ(ps.device_peak, 4096u);

        tally_slot_stats outer = tally_test::slot_stats(name, 1);
        EXPECT_EQ(outer.heap.num_allocs, runs);
        EXPECT_EQ(outer.heap.total_bytes, runs * kOuterBytes[which]);
        EXPECT_EQ(outer.heap.peak, kOuterBytes[which]);
        EXPECT_EQ(outer.heap.current, 0);
        EXPECT_EQ(outer.device.num_allocs, runs);
        EXPECT_EQ(outer.device.total_bytes, runs * 4096);
        EXPECT_EQ(outer.device.current, 0);

        tally_slot_stats inner = tally_test::slot_stats(name, 2);
        EXPECT_EQ(inner.heap.num_allocs, runs * kTasks);
        EXPECT_EQ(inner.heap.total_bytes, runs * kTasks * kInnerBytes);
        EXPECT_GE(inner.heap.peak, kInnerBytes);
        EXPECT_LE(inner.heap.peak, kTasks * kInnerBytes);
        EXPECT_EQ(inner.heap.current, 0);

        tally_slot_stats copy = tally_test::slot_stats(name, 3);
        EXPECT_EQ(copy.copies, runs);
        EXPECT_EQ(copy.copy_bytes, runs * 64);

        uint64_t sum = 0;
        for (int s = 0; s < 4; s++) {
            sum += tally_test::slot_stats(name, s).time_ns;
        }
        EXPECT_EQ(sum, ps.total_ns);
    }
}

TEST_F(ProfilerConcurrency, ConcurrentTimerRuns) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) {
        threads.emplace_back([] {
            for (int r = 0; r < 50; r++) {
                void *inst = tally_profiler_start(nullptr, "timer_many", "host-profile_by_timer", 4,
                                                  kSlotNames, kSlotKinds, nullptr,
                                                  TALLY_PROFILER_FLAG_TIMER);
                ASSERT_NE(inst, nullptr);
                tally_profiler_set_current(inst, 1);
                tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, 8);
                tally_test::spin_for_ns(200000);
                tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, 8);
                tally_profiler_end(nullptr, inst);
            }
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    tally_pipeline_stats ps = tally_test::pipeline_stats("timer_many");
    EXPECT_EQ(ps.runs, 200u);
    EXPECT_EQ(tally_test::slot_stats("timer_many", 1).heap.num_allocs, 200u);
    EXPECT_EQ(tally_testing_live_instances(), 0);
}

}  // namespace
