// The report's warnings (runtime/src/profiler/warnings.c): each rule on stats structs built by
// hand, once just over its threshold and once just under, with the numbers its message must carry;
// then one scripted run under the testing clock whose report (text and JSON) carries its warnings.
#include "Json.h"
#include "TestUtil.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

// A pipeline of 10 runs with 1000 samples (no few-samples warning), 100 ms in all, and slots
// "overhead", "T", "out", "T (copy to device)", "T (copy to host)", "out (copy to host)".
struct Numbers {
    tally_pipeline_stats p{};
    std::vector<tally_slot_stats> slots;

    Numbers() {
        const char *names[] = {
            "overhead", "T", "out", "T (copy to device)", "T (copy to host)", "out (copy to host)"};
        const int32_t kinds[] = {TALLY_SLOT_FUNC,         TALLY_SLOT_FUNC,
                                 TALLY_SLOT_FUNC,         TALLY_SLOT_COPY_TO_DEVICE,
                                 TALLY_SLOT_COPY_TO_HOST, TALLY_SLOT_COPY_TO_HOST};
        // The copies' Funcs, as the pipeline tells the runtime (names say nothing to it).
        const int32_t parents[] = {-1, -1, -1, 1, 1, 2};
        p.name = "pipe";
        p.target = "host-vulkan-profile";
        p.num_slots = 6;
        p.runs = 10;
        p.total_ns = 100000000;
        p.samples = 1000;
        p.average_threads = 1.0;
        slots.resize(6);
        for (int32_t s = 0; s < 6; s++) {
            slots[size_t(s)].name = names[s];
            slots[size_t(s)].slot = s;
            slots[size_t(s)].kind = kinds[s];
            slots[size_t(s)].parent = parents[s];
        }
        slots[1].time_ns = 60000000;
        slots[2].time_ns = 40000000;
    }
    std::vector<tally_warning> check() const {
        int32_t n = tally_profiler_check_warnings(&p, slots.data(), nullptr, 0);
        EXPECT_GE(n, 0);
        std::vector<tally_warning> w(size_t(n > 0 ? n : 0));
        EXPECT_EQ(tally_profiler_check_warnings(&p, slots.data(), w.data(), n), n);
        return w;
    }
};

TEST(Warnings, NoneOnOrdinaryNumbers) {
    EXPECT_TRUE(Numbers().check().empty());
}

TEST(Warnings, BufferBounce) {
    Numbers n;
    n.slots[3].copies = 20;  // T to the device twice per run
    n.slots[4].copies = 10;  // and back once
    n.slots[5].copies = 10;  // out comes back once: one way only, no bounce
    std::vector<tally_warning> w = n.check();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_BUFFER_BOUNCE);
    EXPECT_EQ(w[0].slot, 1);
    EXPECT_EQ(w[0].value, 3.0);
    EXPECT_STREQ(w[0].message, "buffer T bounces between host and device: 3.0 copies per run "
                               "(2.0 to device, 1.0 to host; warned at 3)");
    n.slots[3].copies = 10;  // there and back once per run: the ordinary round trip
    EXPECT_TRUE(n.check().empty());
}

TEST(Warnings, SyncsPerLaunch) {
    Numbers n;
    n.p.kernel_launches = 240;
    n.p.injected_syncs = 240;
    n.p.explicit_syncs = 240;
    std::vector<tally_warning> w = n.check();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_SYNCS_PER_LAUNCH);
    EXPECT_EQ(w[0].slot, -1);
    EXPECT_STREQ(w[0].message, "more than one sync per launch: 240 explicit syncs for 240 "
                               "launches (1.00 per launch, plus the profiler's one), so the "
                               "device cannot run ahead");
    n.p.explicit_syncs = 239;
    EXPECT_TRUE(n.check().empty());
}

TEST(Warnings, CopyTime) {
    Numbers n;
    n.slots[1].time_ns = 50000000;
    n.slots[3].time_ns = 40000000;
    n.slots[4].time_ns = 10000000;
    n.slots[2].time_ns = 0;
    std::vector<tally_warning> w = n.check();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_COPY_TIME);
    EXPECT_EQ(w[0].value, 50.0);
    EXPECT_STREQ(w[0].message, "copies take 50.0% of the time (50.000 of 100.000 ms; warned at "
                               "50%)");
    n.slots[4].time_ns = 9999999;
    EXPECT_TRUE(n.check().empty());
}

TEST(Warnings, HostWaitsForTheDevice) {
    Numbers n;
    n.p.kernel_launches = 10;
    n.p.injected_syncs = 10;
    n.p.average_threads = 0.25;
    std::vector<tally_warning> w = n.check();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_SYNC_WAIT);
    EXPECT_STREQ(w[0].message, "the host mostly waits for the device: 0.25 threads working on "
                               "average over 1000 samples (warned under 0.50)");
    n.p.average_threads = 0.5;
    EXPECT_TRUE(n.check().empty());
    n.p.average_threads = 0.25;  // without launches there is no device to wait for
    n.p.kernel_launches = 0;
    n.p.injected_syncs = 0;
    EXPECT_TRUE(n.check().empty());
}

TEST(Warnings, PeakMemoryDwarfsTheRest) {
    Numbers n;
    n.slots[1].heap.peak = 8u << 20;
    n.slots[1].device.peak = 2u << 20;
    n.slots[2].heap.peak = 1u << 20;  // 10 MiB against 1 MiB
    std::vector<tally_warning> w = n.check();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_PEAK_MEMORY);
    EXPECT_EQ(w[0].slot, 1);
    EXPECT_EQ(w[0].value, 10.0);
    EXPECT_STREQ(w[0].message, "T's peak memory (10485760 bytes) is 10.0x that of all other "
                               "Funcs together (1048576 bytes; warned at 10x)");
    n.slots[2].heap.peak += 1;  // just under 10x
    EXPECT_TRUE(n.check().empty());
    // Nothing else holds memory: an infinite ratio, said in words (the JSON writes it as null).
    Numbers alone;
    alone.slots[1].heap.peak = 2u << 20;
    w = alone.check();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_PEAK_MEMORY);
    EXPECT_TRUE(std::isinf(w[0].value));
    EXPECT_STREQ(w[0].message, "T's peak memory (2097152 bytes) is all there is: the other Funcs "
                               "together peak at 0 bytes (warned at 10x)");
    // Small peaks are not worth a warning, whatever the ratio.
    Numbers small;
    small.slots[1].heap.peak = (1u << 20) - 1;
    EXPECT_TRUE(small.check().empty());
}

TEST(Warnings, FewSamples) {
    Numbers n;
    n.p.samples = 25;
    std::vector<tally_warning> w = n.check();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_FEW_SAMPLES);
    EXPECT_EQ(w[0].value, 25.0);
    EXPECT_STREQ(w[0].message, "only 25 samples (warned under 100): a time share is uncertain "
                               "by up to 10 percentage points; run longer or lower "
                               "TALLY_PROFILE_INTERVAL_US");
    n.p.samples = 100;
    EXPECT_TRUE(n.check().empty());
    // Exact mode times every switch: its shares rest on no samples, so none is too few.
    n.p.samples = 0;
    n.p.flags = TALLY_PROFILER_FLAG_EXACT;
    EXPECT_TRUE(n.check().empty());
}

TEST(Warnings, HostWaitsForTheDeviceInExactMode) {
    Numbers n;
    n.p.flags = TALLY_PROFILER_FLAG_EXACT;
    n.p.samples = 0;
    n.p.kernel_launches = 10;
    n.p.injected_syncs = 10;
    n.p.average_threads = 0.25;
    std::vector<tally_warning> w = n.check();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_SYNC_WAIT);
    EXPECT_STREQ(w[0].message, "the host mostly waits for the device: 0.25 threads working on "
                               "average, timed exactly (warned under 0.50)");
}

TEST(Warnings, OrderCountAndArguments) {
    Numbers n;
    n.p.samples = 5;
    n.p.kernel_launches = 1;
    n.p.explicit_syncs = 2;
    n.p.average_threads = 0.0;
    // Found in the order of tally_warning_kind_t; the count is returned even when out is short.
    tally_warning w[1];
    EXPECT_EQ(tally_profiler_check_warnings(&n.p, n.slots.data(), w, 1), 3);
    EXPECT_EQ(w[0].kind, TALLY_WARNING_SYNCS_PER_LAUNCH);
    std::vector<tally_warning> all = n.check();
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[1].kind, TALLY_WARNING_SYNC_WAIT);
    EXPECT_EQ(all[2].kind, TALLY_WARNING_FEW_SAMPLES);
    n.p.runs = 0;
    EXPECT_EQ(tally_profiler_check_warnings(&n.p, n.slots.data(), nullptr, 0), 0);
    EXPECT_EQ(tally_profiler_check_warnings(nullptr, n.slots.data(), nullptr, 0),
              TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(tally_profiler_check_warnings(&n.p, n.slots.data(), nullptr, 2),
              TALLY_ERROR_BAD_ARGUMENT);
}

// A scripted run under the testing clock: the report shows its warnings after the sections, and
// the JSON lists them with their numbers.
class WarningsInTheReport : public tally_test::ProfilerTest {};

TEST_F(WarningsInTheReport, TextAndJson) {
    tally_profiler_set_interval_us(1000000);
    tally_testing_set_clock(tally_test::fake_clock);
    const char *const names[] = {"overhead", "big", "small"};
    void *inst =
        tally_profiler_start(nullptr, "mem", "host-profile", 3, names, nullptr, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 1);
    tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, 64u << 20);
    tally_profiler_memory_allocate(inst, 2, TALLY_MEMORY_HEAP, 1u << 20);
    tally_test::fake_time_ns() += 3000000;
    tally_testing_sample_now();
    tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, 64u << 20);
    tally_profiler_memory_free(inst, 2, TALLY_MEMORY_HEAP, 1u << 20);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);

    std::string text = tally_test::report_text(0);
    EXPECT_NE(text.find("\n  warnings:\n"
                        "    big's peak memory (67108864 bytes) is 64.0x that of all other Funcs "
                        "together (1048576 bytes; warned at 10x)\n"
                        "    only 1 samples (warned under 100): a time share is uncertain by up "
                        "to 50 percentage points; run longer or lower TALLY_PROFILE_INTERVAL_US\n"),
              std::string::npos)
        << text;

    tally_test::Json root;
    std::string error;
    ASSERT_TRUE(tally_test::JsonParser(tally_test::report_text(1)).parse(&root, &error)) << error;
    const tally_test::Json &w = root["pipelines"][0]["warnings"];
    ASSERT_EQ(w.items.size(), 2u);
    EXPECT_EQ(w[0]["kind"].str, "peak_memory");
    EXPECT_EQ(w[0]["slot"].number, 1);
    EXPECT_EQ(w[0]["value"].number, 64);
    EXPECT_EQ(w[0]["threshold"].number, 10);
    EXPECT_EQ(w[1]["kind"].str, "few_samples");
    EXPECT_EQ(w[1]["value"].number, 1);
}

}  // namespace
