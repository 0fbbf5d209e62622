// The report, byte for byte: a scripted run under a hand-moved clock makes every number
// deterministic, so the text layout and the JSON are compared against goldens; the JSON is also
// parsed back and checked value by value.
#include "Json.h"
#include "TestUtil.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace {

using tally_test::fake_clock;
using tally_test::fake_time_ns;

const char *const kSlotNames[] = {"overhead", "blur_x", "blur_y", "input (copy to device)",
                                  "blur_y (copy to host)"};
const int32_t kSlotKinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                              TALLY_SLOT_COPY_TO_DEVICE, TALLY_SLOT_COPY_TO_HOST};
// The input's copy belongs to no Func; blur_y's copy to the host is blur_y's (slot 2).
const int32_t kSlotParents[] = {-1, -1, -1, -1, 2};

void advance_ms(uint64_t ms) {
    fake_time_ns() += ms * 1000000;
}

// A device whose global sync takes 4 ms and is sampled while the main thread waits.
int32_t slow_sync_global(void *, const halide_device_interface_t *) {
    advance_ms(4);
    tally_testing_sample_now();
    return 0;
}

// One 12 ms run: blur_x 2 ms, copy in 1 ms, blur_y 2 ms working + 4 ms waiting, copy out 1 ms,
// overhead 2 ms.
void scripted_run(const halide_device_interface_t *device) {
    float data[16 * 16] = {0};
    halide_dimension_t dims[2] = {{0, 16, 1, 0}, {0, 16, 16, 0}};
    halide_buffer_t buf;
    std::memset(&buf, 0, sizeof(buf));
    buf.host = reinterpret_cast<uint8_t *>(data);
    buf.type = {halide_type_float, 32, 1};
    buf.dimensions = 2;
    buf.dim = dims;

    void *inst = tally_profiler_start(nullptr, "blur", "host-vulkan-profile", 5, kSlotNames,
                                      kSlotKinds, kSlotParents, 0);
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 1);
    tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, 4096);
    advance_ms(2);
    tally_testing_sample_now();

    tally_profiler_set_current(inst, 3);
    tally_buffer_set_host_dirty(&buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &buf, device), 0);
    tally_profiler_memory_allocate(inst, 2, TALLY_MEMORY_DEVICE, 1024);
    advance_ms(1);
    tally_testing_sample_now();

    tally_profiler_set_current(inst, 2);
    tally_profiler_count_launch();
    advance_ms(2);
    tally_testing_sample_now();
    ASSERT_EQ(halide_device_sync_global(nullptr, device), 0);
    tally_buffer_set_device_dirty(&buf, true);

    tally_profiler_set_current(inst, 4);
    ASSERT_EQ(halide_copy_to_host(nullptr, &buf), 0);
    advance_ms(1);
    tally_testing_sample_now();

    tally_profiler_set_current(inst, 0);
    tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, 4096);
    tally_profiler_memory_free(inst, 2, TALLY_MEMORY_DEVICE, 1024);
    ASSERT_EQ(halide_device_free(nullptr, &buf), 0);
    advance_ms(2);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
}

class ProfilerReport : public tally_test::ProfilerTest {
protected:
    void SetUp() override {
        ProfilerTest::SetUp();
        tally_profiler_set_interval_us(1000000);
        tally_testing_set_clock(fake_clock);
        device_ = *halide_host_device_interface();
        device_.name = "slow";
        device_.device_sync_global = slow_sync_global;
        scripted_run(&device_);
        scripted_run(&device_);
    }
    halide_device_interface_t device_;
};

const char *const kGoldenText = R"golden(pipeline: blur
  target:           host-vulkan-profile
  mode:             sampling (sampler thread)
  total time:       24.000 ms
  runs:             2
  time per run:     12.000 ms
  samples:          12
  average threads:  0.83
  heap peak:        4096 bytes
  device peak:      1024 bytes
  kernel launches:  2
  injected syncs:   2
  explicit syncs:   0
  copies to device: 2 (2048 bytes)
  copies to host:   2 (2048 bytes)

  funcs                        time ms       %   +-95%  samples  threads    heap cur   heap peak  heap allocs    heap bytes    dev peak  dev allocs     dev bytes
    overhead                     4.000    16.7    21.1        2     1.00           0           0            0             0           0           0             0
    blur_x                       4.000    16.7    21.1        2     1.00           0        4096            2          8192           0           0             0
    blur_y                      12.000    50.0    28.3        4     0.50           0           0            0             0        1024           2          2048
  copies to device             time ms       %   +-95%  samples    count         bytes
    input (copy to device)       2.000     8.3    15.6        2        2          2048
  copies to host               time ms       %   +-95%  samples    count         bytes
    blur_y (copy to host)        2.000     8.3    15.6        2        2          2048
  warnings:
    only 12 samples (warned under 100): a time share is uncertain by up to 14 percentage points; run longer or lower TALLY_PROFILE_INTERVAL_US
)golden";

const char *const kGoldenJson = R"golden({
  "abi_version": 3,
  "pipelines": [
    {
      "name": "blur",
      "target": "host-vulkan-profile",
      "mode": "sampling",
      "clock": "test clock",
      "runs": 2,
      "total_ns": 24000000,
      "total_ms": 24.000000,
      "time_per_run_ms": 12.000000,
      "samples": 12,
      "average_threads": 0.8333,
      "heap_peak_bytes": 4096,
      "device_peak_bytes": 1024,
      "kernel_launches": 2,
      "injected_syncs": 2,
      "explicit_syncs": 0,
      "copies_to_device": 2,
      "copies_to_device_bytes": 2048,
      "copies_to_host": 2,
      "copies_to_host_bytes": 2048,
      "device_init_ns": 0,
      "kernel_compile_ns": 0,
      "slots": [
        {"id": 0, "name": "overhead", "kind": "func", "parent": -1, "time_ns": 4000000, "time_ms": 4.000000, "percent": 16.6667, "samples": 2, "average_threads": 1.0000, "copies": 0, "copy_bytes": 0, "ci95_pp": 21.0862, "heap": {"current": 0, "peak": 0, "allocs": 0, "bytes": 0}, "device": {"current": 0, "peak": 0, "allocs": 0, "bytes": 0}},
        {"id": 1, "name": "blur_x", "kind": "func", "parent": -1, "time_ns": 4000000, "time_ms": 4.000000, "percent": 16.6667, "samples": 2, "average_threads": 1.0000, "copies": 0, "copy_bytes": 0, "ci95_pp": 21.0862, "heap": {"current": 0, "peak": 4096, "allocs": 2, "bytes": 8192}, "device": {"current": 0, "peak": 0, "allocs": 0, "bytes": 0}},
        {"id": 2, "name": "blur_y", "kind": "func", "parent": -1, "time_ns": 12000000, "time_ms": 12.000000, "percent": 50.0000, "samples": 4, "average_threads": 0.5000, "copies": 0, "copy_bytes": 0, "ci95_pp": 28.2902, "heap": {"current": 0, "peak": 0, "allocs": 0, "bytes": 0}, "device": {"current": 0, "peak": 1024, "allocs": 2, "bytes": 2048}},
        {"id": 3, "name": "input (copy to device)", "kind": "copy_to_device", "parent": -1, "time_ns": 2000000, "time_ms": 2.000000, "percent": 8.3333, "samples": 2, "average_threads": 1.0000, "copies": 2, "copy_bytes": 2048, "ci95_pp": 15.6380, "heap": {"current": 0, "peak": 0, "allocs": 0, "bytes": 0}, "device": {"current": 0, "peak": 0, "allocs": 0, "bytes": 0}},
        {"id": 4, "name": "blur_y (copy to host)", "kind": "copy_to_host", "parent": 2, "time_ns": 2000000, "time_ms": 2.000000, "percent": 8.3333, "samples": 2, "average_threads": 1.0000, "copies": 2, "copy_bytes": 2048, "ci95_pp": 15.6380, "heap": {"current": 0, "peak": 0, "allocs": 0, "bytes": 0}, "device": {"current": 0, "peak": 0, "allocs": 0, "bytes": 0}}
      ],
      "warnings": [
        {"kind": "few_samples", "slot": -1, "value": 12.0000, "threshold": 100.0000, "message": "only 12 samples (warned under 100): a time share is uncertain by up to 14 percentage points; run longer or lower TALLY_PROFILE_INTERVAL_US"}
      ]
    }
  ]
}
)golden";

TEST_F(ProfilerReport, TextMatchesGolden) {
    std::string text = tally_test::report_text(0);
    EXPECT_EQ(text, kGoldenText) << "actual report:\n" << text;
}

TEST_F(ProfilerReport, JsonMatchesGolden) {
    std::string json = tally_test::report_text(1);
    EXPECT_EQ(json, kGoldenJson) << "actual report:\n" << json;
}

TEST_F(ProfilerReport, JsonParsesBackToTheStats) {
    std::string text = tally_test::report_text(1);
    tally_test::Json root;
    std::string error;
    ASSERT_TRUE(tally_test::JsonParser(text).parse(&root, &error)) << error << "\n" << text;
    EXPECT_EQ(root["abi_version"].number, TALLY_RUNTIME_ABI_VERSION);
    ASSERT_EQ(root["pipelines"].items.size(), 1u);
    const tally_test::Json &p = root["pipelines"][0];
    tally_pipeline_stats ps = tally_test::pipeline_stats("blur");
    EXPECT_EQ(p["name"].str, "blur");
    EXPECT_EQ(p["target"].str, "host-vulkan-profile");
    EXPECT_EQ(p["runs"].number, double(ps.runs));
    EXPECT_EQ(p["total_ns"].number, double(ps.total_ns));
    EXPECT_EQ(p["samples"].number, double(ps.samples));
    EXPECT_EQ(p["heap_peak_bytes"].number, 4096);
    EXPECT_EQ(p["device_peak_bytes"].number, 1024);
    EXPECT_EQ(p["kernel_launches"].number, 2);
    EXPECT_EQ(p["injected_syncs"].number, 2);
    EXPECT_EQ(p["explicit_syncs"].number, 0);
    EXPECT_EQ(p["copies_to_device"].number, 2);
    EXPECT_EQ(p["copies_to_device_bytes"].number, 2048);
    EXPECT_EQ(p["copies_to_host"].number, 2);
    EXPECT_EQ(p["copies_to_host_bytes"].number, 2048);
    const tally_test::Json &slots = p["slots"];
    ASSERT_EQ(slots.items.size(), 5u);
    const char *const kinds[] = {"func", "func", "func", "copy_to_device", "copy_to_host"};
    for (int s = 0; s < 5; s++) {
        tally_slot_stats ss = tally_test::slot_stats("blur", s);
        const tally_test::Json &j = slots[s];
        EXPECT_EQ(j["id"].number, s);
        EXPECT_EQ(j["name"].str, kSlotNames[s]);
        EXPECT_EQ(j["kind"].str, kinds[s]);
        EXPECT_EQ(j["time_ns"].number, double(ss.time_ns));
        EXPECT_NEAR(j["percent"].number, ss.percent, 1e-4);
        EXPECT_EQ(j["samples"].number, double(ss.samples));
        EXPECT_NEAR(j["average_threads"].number, ss.average_threads, 1e-4);
        EXPECT_EQ(j["copies"].number, double(ss.copies));
        EXPECT_EQ(j["heap"]["peak"].number, double(ss.heap.peak));
        EXPECT_EQ(j["heap"]["allocs"].number, double(ss.heap.num_allocs));
        EXPECT_EQ(j["device"]["bytes"].number, double(ss.device.total_bytes));
    }
    EXPECT_EQ(slots[2]["average_threads"].number, 0.5);
    double ci95 = 0;
    ASSERT_EQ(tally_profiler_get_slot_ci95_by_index(0, 2, &ci95), 0);
    EXPECT_NEAR(slots[2]["ci95_pp"].number, ci95, 1e-4);
    EXPECT_NEAR(ci95, 100.0 * 1.96 * std::sqrt(0.25 / 12.0), 1e-9);  // 50 % of 12 observations
    EXPECT_EQ(slots[2]["time_ns"].number, 12e6);
}

TEST_F(ProfilerReport, StatsOfTheScriptedRuns) {
    tally_pipeline_stats ps = tally_test::pipeline_stats("blur");
    EXPECT_EQ(ps.runs, 2u);
    EXPECT_EQ(ps.total_ns, 24000000u);
    EXPECT_EQ(ps.samples, 12u);
    const uint64_t want_ms[5] = {4, 4, 12, 2, 2};
    for (int s = 0; s < 5; s++) {
        EXPECT_EQ(tally_test::slot_stats("blur", s).time_ns, want_ms[s] * 1000000) << s;
    }
}

TEST_F(ProfilerReport, BufferSemanticsAreThoseOfSnprintf) {
    int32_t n = tally_profiler_report_to_buffer(nullptr, 0, 0);
    ASSERT_GT(n, 100);
    char small[11];
    std::memset(small, 'x', sizeof(small));
    EXPECT_EQ(tally_profiler_report_to_buffer(small, sizeof(small), 0), n);
    EXPECT_EQ(std::strlen(small), 10u);
    EXPECT_EQ(std::string(small), std::string(kGoldenText).substr(0, 10));
}

// The report goes to an installed print handler (as Halide's goes through halide_print), and
// without one to stderr, not to stdout where what pipelines print goes.
TEST_F(ProfilerReport, ReportGoesToThePrintHandlerElseStderr) {
    unsetenv("TALLY_PROFILE_OUTPUT");
    {
        tally_test::MessageCapture capture;
        EXPECT_EQ(tally_profiler_report(nullptr), 0);
        EXPECT_EQ(capture.printed(), kGoldenText);
    }
    tally_set_print_handler(nullptr);
    FILE *out = std::tmpfile(), *err = std::tmpfile();
    ASSERT_TRUE(out && err);
    std::fflush(stdout);
    std::fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    int32_t rc = tally_profiler_report(nullptr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    EXPECT_EQ(rc, 0);
    auto contents = [](FILE *f) {
        std::string s;
        std::rewind(f);
        for (int c; (c = std::fgetc(f)) != EOF;) {
            s.push_back(char(c));
        }
        std::fclose(f);
        return s;
    };
    EXPECT_EQ(contents(out), "");
    EXPECT_EQ(contents(err), kGoldenText);
}

TEST_F(ProfilerReport, SeveralPipelinesAndAnEmptySection) {
    const char *const names[] = {"overhead", "only_func"};
    void *inst = tally_profiler_start(nullptr, "second", "host", 2, names, nullptr, nullptr, 0);
    advance_ms(1);
    tally_profiler_end(nullptr, inst);
    std::string text = tally_test::report_text(0);
    size_t second = text.find("\npipeline: second\n");
    ASSERT_NE(second, std::string::npos);
    EXPECT_EQ(text.compare(0, std::strlen(kGoldenText), kGoldenText), 0);
    EXPECT_NE(text.find("\n  copies to device       time ms       %   +-95%  samples    count"
                        "         bytes\n    (none)\n",
                        second),
              std::string::npos);
    EXPECT_NE(text.find("    (none)\n", second), std::string::npos);
    tally_test::Json root;
    ASSERT_TRUE(tally_test::JsonParser(tally_test::report_text(1)).parse(&root, nullptr));
    EXPECT_EQ(root["pipelines"].items.size(), 2u);
    EXPECT_EQ(root["pipelines"][1]["name"].str, "second");
}

// The same scripted runs in exact mode: the header names the mode and its clock, no row has a
// sampling interval, every nanosecond is billed where it was spent (blur_y: 2 ms working and
// 4 ms waiting on the device per run, so 0.33 threads) and the pipeline averages its working
// threads over time (8 of 12 ms per run).
class ProfilerReportExact : public tally_test::ProfilerTest {
protected:
    void SetUp() override {
        ProfilerTest::SetUp();
        tally_profiler_set_default_mode(TALLY_PROFILER_FLAG_EXACT);
        tally_testing_set_clock(fake_clock);
        device_ = *halide_host_device_interface();
        device_.name = "slow";
        device_.device_sync_global = slow_sync_global;
        scripted_run(&device_);
        scripted_run(&device_);
    }
    halide_device_interface_t device_;
};

const char *const kGoldenExactText = R"golden(pipeline: blur
  target:           host-vulkan-profile
  mode:             exact (test clock)
  total time:       24.000 ms
  runs:             2
  time per run:     12.000 ms
  samples:          0
  average threads:  0.67
  heap peak:        4096 bytes
  device peak:      1024 bytes
  kernel launches:  2
  injected syncs:   2
  explicit syncs:   0
  copies to device: 2 (2048 bytes)
  copies to host:   2 (2048 bytes)

  funcs                        time ms       %  samples  threads    heap cur   heap peak  heap allocs    heap bytes    dev peak  dev allocs     dev bytes
    overhead                     4.000    16.7        0     1.00           0           0            0             0           0           0             0
    blur_x                       4.000    16.7        0     1.00           0        4096            2          8192           0           0             0
    blur_y                      12.000    50.0        0     0.33           0           0            0             0        1024           2          2048
  copies to device             time ms       %  samples    count         bytes
    input (copy to device)       2.000     8.3        0        2          2048
  copies to host               time ms       %  samples    count         bytes
    blur_y (copy to host)        2.000     8.3        0        2          2048
)golden";

TEST_F(ProfilerReportExact, TextMatchesGolden) {
    std::string text = tally_test::report_text(0);
    EXPECT_EQ(text, kGoldenExactText) << "actual report:\n" << text;
}

TEST_F(ProfilerReportExact, JsonNamesTheModeAndHasNoInterval) {
    tally_test::Json root;
    std::string text = tally_test::report_text(1);
    ASSERT_TRUE(tally_test::JsonParser(text).parse(&root, nullptr)) << text;
    const tally_test::Json &p = root["pipelines"][0];
    EXPECT_EQ(p["mode"].str, "exact");
    EXPECT_EQ(p["clock"].str, "test clock");
    EXPECT_EQ(text.find("ci95_pp"), std::string::npos);
    EXPECT_EQ(p["slots"][2]["time_ns"].number, 12e6);
    EXPECT_NEAR(p["slots"][2]["average_threads"].number, 1.0 / 3.0, 1e-4);
    EXPECT_EQ(p["device_init_ns"].number, 0);
    EXPECT_EQ(p["kernel_compile_ns"].number, 0);
}

TEST(ProfilerReportEmpty, EmptyRegistry) {
    tally_profiler_reset();
    EXPECT_EQ(tally_test::report_text(0), "");
    tally_test::Json root;
    ASSERT_TRUE(tally_test::JsonParser(tally_test::report_text(1)).parse(&root, nullptr));
    EXPECT_EQ(root["pipelines"].kind, tally_test::Json::Array);
    EXPECT_EQ(root["pipelines"].items.size(), 0u);
}

TEST(ProfilerReportJson, EscapesNames) {
    tally_profiler_reset();
    const char *const names[] = {"overhead", "quote\"back\\slash\ttab"};
    void *inst =
        tally_profiler_start(nullptr, "odd \"name\"", "host", 2, names, nullptr, nullptr, 0);
    tally_profiler_end(nullptr, inst);
    tally_test::Json root;
    std::string error;
    ASSERT_TRUE(tally_test::JsonParser(tally_test::report_text(1)).parse(&root, &error)) << error;
    EXPECT_EQ(root["pipelines"][0]["name"].str, "odd \"name\"");
    EXPECT_EQ(root["pipelines"][0]["slots"][1]["name"].str, "quote\"back\\slash\ttab");
    tally_profiler_reset();
}

}  // namespace
