// Memory accounting is exact for a scripted sequence: out-of-order frees, allocations on pool
// worker threads, frees from a different thread (and current slot) than the allocation, two runs.
#include "TestUtil.h"

namespace {

const char *const kSlotNames[] = {"overhead", "f", "g", "h"};
enum { F = 1, G = 2, H = 3 };

struct Closure {
    void *inst;
};

int32_t alloc_task(void *uc, int32_t idx, uint8_t *closure) {
    void *inst = reinterpret_cast<Closure *>(closure)->inst;
    void *ctx = tally_profiler_thread_begin(inst);
    tally_profiler_set_current(ctx, H);
    tally_profiler_memory_allocate(inst, H, TALLY_MEMORY_HEAP, 1024);
    tally_profiler_thread_end(ctx);
    return 0;
}

int32_t free_task(void *uc, int32_t idx, uint8_t *closure) {
    void *inst = reinterpret_cast<Closure *>(closure)->inst;
    void *ctx = tally_profiler_thread_begin(inst);
    // Running as G, freeing what H (and, in task 0, F and G's device memory) allocated.
    tally_profiler_set_current(ctx, G);
    tally_profiler_memory_free(ctx, H, TALLY_MEMORY_HEAP, 1024);
    if (idx == 0) {
        tally_profiler_memory_free(inst, F, TALLY_MEMORY_HEAP, 2000);
        tally_profiler_memory_free(inst, G, TALLY_MEMORY_DEVICE, 4096);
    }
    tally_profiler_thread_end(ctx);
    return 0;
}

class ProfilerMemory : public tally_test::ProfilerTest {};

TEST_F(ProfilerMemory, ScriptedSequenceIsExact) {
    tally_set_num_threads(4);
    void *inst =
        tally_profiler_start(nullptr, "memory", "host-profile", 4, kSlotNames, nullptr, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    Closure c{inst};
    tally_profiler_set_current(inst, F);
    tally_profiler_memory_allocate(inst, F, TALLY_MEMORY_HEAP, 1000);  // run heap 1000
    tally_profiler_set_current(inst, G);
    tally_profiler_memory_allocate(inst, G, TALLY_MEMORY_HEAP, 500);  // 1500
    tally_profiler_set_current(inst, F);
    tally_profiler_memory_allocate(inst, F, TALLY_MEMORY_HEAP, 2000);  // 3500: f peaks at 3000
    tally_profiler_memory_free(inst, F, TALLY_MEMORY_HEAP, 1000);      // 2500 (first alloc first)
    tally_profiler_set_current(inst, G);
    tally_profiler_memory_allocate(inst, G, TALLY_MEMORY_DEVICE, 4096);
    tally_profiler_memory_free(inst, G, TALLY_MEMORY_HEAP, 500);  // 2000: g before f's second
    tally_profiler_set_current(inst, H);
    tally_profiler_memory_allocate(inst, H, TALLY_MEMORY_HEAP, 300);  // 2300
    // 8 tasks on pool threads allocate 1024 each: h peaks at 300 + 8192, the run at 2300 + 8192.
    ASSERT_EQ(halide_do_par_for(nullptr, alloc_task, 0, 8, reinterpret_cast<uint8_t *>(&c)), 0);
    // Other tasks free them, plus f's 2000 heap and g's device memory.
    ASSERT_EQ(halide_do_par_for(nullptr, free_task, 0, 8, reinterpret_cast<uint8_t *>(&c)), 0);
    tally_profiler_memory_free(inst, H, TALLY_MEMORY_HEAP, 300);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);

    tally_pipeline_stats ps = tally_test::pipeline_stats("memory");
    EXPECT_EQ(ps.heap_peak, 2300u + 8192u);
    EXPECT_EQ(ps.device_peak, 4096u);

    tally_slot_stats f = tally_test::slot_stats("memory", F);
    EXPECT_EQ(f.heap.current, 0);
    EXPECT_EQ(f.heap.peak, 3000u);
    EXPECT_EQ(f.heap.num_allocs, 2u);
    EXPECT_EQ(f.heap.total_bytes, 3000u);
    EXPECT_EQ(f.device.num_allocs, 0u);

    tally_slot_stats g = tally_test::slot_stats("memory", G);
    EXPECT_EQ(g.heap.current, 0);
    EXPECT_EQ(g.heap.peak, 500u);
    EXPECT_EQ(g.heap.num_allocs, 1u);
    EXPECT_EQ(g.heap.total_bytes, 500u);
    EXPECT_EQ(g.device.current, 0);
    EXPECT_EQ(g.device.peak, 4096u);
    EXPECT_EQ(g.device.num_allocs, 1u);
    EXPECT_EQ(g.device.total_bytes, 4096u);

    tally_slot_stats h = tally_test::slot_stats("memory", H);
    EXPECT_EQ(h.heap.current, 0);
    EXPECT_EQ(h.heap.peak, 300u + 8192u);
    EXPECT_EQ(h.heap.num_allocs, 9u);
    EXPECT_EQ(h.heap.total_bytes, 300u + 8192u);

    // A second, smaller run: peaks are per-run maxima, counts and bytes add up.
    inst =
        tally_profiler_start(nullptr, "memory", "host-profile", 4, kSlotNames, nullptr, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    tally_profiler_memory_allocate(inst, F, TALLY_MEMORY_HEAP, 100);
    tally_profiler_memory_allocate(inst, F, TALLY_MEMORY_HEAP, 100);
    tally_profiler_memory_free(inst, F, TALLY_MEMORY_HEAP, 100);
    // Leak 100 bytes: current shows it after the run.
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    ps = tally_test::pipeline_stats("memory");
    EXPECT_EQ(ps.runs, 2u);
    EXPECT_EQ(ps.heap_peak, 2300u + 8192u);
    f = tally_test::slot_stats("memory", F);
    EXPECT_EQ(f.heap.current, 100);
    EXPECT_EQ(f.heap.peak, 3000u);
    EXPECT_EQ(f.heap.num_allocs, 4u);
    EXPECT_EQ(f.heap.total_bytes, 3200u);
    tally_set_num_threads(0);
}

TEST_F(ProfilerMemory, BadSlotIsReportedOnceAndIgnored) {
    tally_test::MessageCapture capture;
    void *inst =
        tally_profiler_start(nullptr, "memory_bad", "host", 4, kSlotNames, nullptr, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    tally_profiler_memory_allocate(inst, 9, TALLY_MEMORY_HEAP, 10);
    tally_profiler_memory_allocate(inst, 1, 5, 10);
    tally_profiler_memory_free(inst, -1, TALLY_MEMORY_HEAP, 10);
    tally_profiler_end(nullptr, inst);
    auto errors = capture.errors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("out of range for pipeline memory_bad"), std::string::npos);
    EXPECT_EQ(tally_test::pipeline_stats("memory_bad").heap_peak, 0u);
    // NULL instances are no-ops.
    tally_profiler_memory_allocate(nullptr, 1, TALLY_MEMORY_HEAP, 10);
    tally_profiler_memory_free(nullptr, 1, TALLY_MEMORY_HEAP, 10);
}

// Sizes past 2^62 (no address space holds them; the report fuzzer drew them) are counted without
// a signed overflow: under UBSan (the asan job) this test fails if one comes back.
TEST_F(ProfilerMemory, HugeSizesDoNotOverflow) {
    void *inst =
        tally_profiler_start(nullptr, "memory_huge", "host", 4, kSlotNames, nullptr, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    const uint64_t huge = (uint64_t(1) << 62) + 12345;
    for (int i = 0; i < 3; i++) {
        tally_profiler_memory_allocate(inst, F, TALLY_MEMORY_HEAP, huge);
    }
    for (int i = 0; i < 3; i++) {
        tally_profiler_memory_free(inst, F, TALLY_MEMORY_HEAP, huge);
    }
    tally_profiler_end(nullptr, inst);
    tally_slot_stats f = tally_test::slot_stats("memory_huge", F);
    EXPECT_EQ(f.heap.num_allocs, 3u);
    EXPECT_EQ(f.heap.total_bytes, 3 * huge);  // modulo 2^64, as uint64_t arithmetic
    EXPECT_EQ(f.heap.current, 0);
    EXPECT_GE(f.heap.peak, huge);
}

// Runs that leak past 2^63 bytes between them: the pipeline's "current" sums the runs' own
// modulo 2^64 (fuzz_report, finding 15: a signed overflow in the merge at each run's end).
TEST_F(ProfilerMemory, HugeLeaksAcrossRunsDoNotOverflow) {
    const uint64_t huge = (uint64_t(1) << 62) + 12345;
    for (int run = 0; run < 3; run++) {
        void *inst = tally_profiler_start(nullptr, "memory_huge_runs", "host", 4, kSlotNames,
                                          nullptr, nullptr, 0);
        ASSERT_NE(inst, nullptr);
        tally_profiler_memory_allocate(inst, F, TALLY_MEMORY_HEAP, huge);
        tally_profiler_end(nullptr, inst);
    }
    tally_slot_stats f = tally_test::slot_stats("memory_huge_runs", F);
    EXPECT_EQ(f.heap.num_allocs, 3u);
    EXPECT_EQ(uint64_t(f.heap.current), 3 * huge);  // modulo 2^64
}

}  // namespace
