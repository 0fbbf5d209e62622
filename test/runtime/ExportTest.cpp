// The profile exports (runtime/src/export_*.c) on a scripted run under a hand-moved clock: the
// folded stacks byte for byte (the stack rule of tally_runtime.h: a copy slot under its Func, a
// copy of an input under the pipeline), the pprof file's gzip wrapper and string table, the
// error paths, and the at-exit files TALLY_PROFILE_PPROF and TALLY_PROFILE_FOLDED name. That
// `go tool pprof` reads the profile and finds the report's numbers in it is test/export's job.
#include "TestUtil.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#ifndef TALLY_EXIT_CHILD_PATH
#error "TALLY_EXIT_CHILD_PATH must name the exit child program"
#endif

namespace {

using tally_test::fake_clock;
using tally_test::fake_time_ns;

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

void advance_ms(uint64_t ms) {
    fake_time_ns() += ms * 1000000;
    tally_testing_sample_now();
}

// One 9 ms run of "blur": overhead 1 ms, blur_x 3 ms (a 4 KiB heap allocation), the copy of the
// input 1 ms, a;b 1 ms, blur_y 2 ms, its copy back 1 ms; plus one 2 ms run of "empty" spent in
// overhead.
void scripted_runs() {
    const char *const names[] = {
        "overhead", "blur_x", "blur_y", "input (copy to device)", "blur_y (copy to host)",
        "a;b\nc"};
    const int32_t kinds[] = {TALLY_SLOT_FUNC,           TALLY_SLOT_FUNC,         TALLY_SLOT_FUNC,
                             TALLY_SLOT_COPY_TO_DEVICE, TALLY_SLOT_COPY_TO_HOST, TALLY_SLOT_FUNC};
    void *inst = tally_profiler_start(nullptr, "blur", "host-profile", 6, names, kinds, 0);
    ASSERT_NE(inst, nullptr);
    advance_ms(1);
    tally_profiler_set_current(inst, 1);
    tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, 4096);
    advance_ms(3);
    tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, 4096);
    tally_profiler_set_current(inst, 3);
    advance_ms(1);
    tally_profiler_set_current(inst, 5);
    advance_ms(1);
    tally_profiler_set_current(inst, 2);
    advance_ms(2);
    tally_profiler_set_current(inst, 4);
    advance_ms(1);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);

    const char *const empty_names[] = {"overhead", "unused"};
    void *other = tally_profiler_start(nullptr, "empty", "host-profile", 2, empty_names, nullptr,
                                       TALLY_PROFILER_FLAG_TIMER);
    ASSERT_NE(other, nullptr);
    advance_ms(2);
    ASSERT_EQ(tally_profiler_end(nullptr, other), 0);
}

class ProfileExport : public tally_test::ProfilerTest {
protected:
    void SetUp() override {
        ProfilerTest::SetUp();
        tally_profiler_set_interval_us(1000000);
        tally_testing_set_clock(fake_clock);
        char tmpl[] = "/tmp/tally_export_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::string cmd = "rm -rf '" + dir_ + "'";
        (void)std::system(cmd.c_str());
        ProfilerTest::TearDown();
    }
    std::string path(const std::string &name) const { return dir_ + "/" + name; }
    std::string dir_;
};

// Each slot with time, root first, in registration and slot order; the unused slot and nothing
// else is left out; ';' and the line break inside a name are escaped.
TEST_F(ProfileExport, FoldedStacksMatchGolden) {
    scripted_runs();
    ASSERT_EQ(tally_profiler_write_folded(nullptr, path("out.folded").c_str()), 0);
    EXPECT_EQ(read_file(path("out.folded")), "blur;overhead 1000000\n"
                                             "blur;blur_x 3000000\n"
                                             "blur;blur_y 2000000\n"
                                             "blur;input (copy to device) 1000000\n"
                                             "blur;blur_y;copy to host 1000000\n"
                                             "blur;a:b c 1000000\n"
                                             "empty;overhead 2000000\n");
    EXPECT_FALSE(exists(path("out.folded.tmp." + std::to_string(getpid()))));
}

TEST_F(ProfileExport, EmptyRegistryGivesEmptyFiles) {
    ASSERT_EQ(tally_profiler_write_folded(nullptr, path("out.folded").c_str()), 0);
    EXPECT_EQ(read_file(path("out.folded")), "");
    ASSERT_EQ(tally_profiler_write_pprof(nullptr, path("out.pb.gz").c_str()), 0);
    EXPECT_TRUE(exists(path("out.pb.gz")));
}

// The file is gzip and inflates to a protobuf whose first string-table entry (field 6) is "".
TEST_F(ProfileExport, PprofIsGzippedProfileProto) {
    scripted_runs();
    ASSERT_EQ(tally_profiler_write_pprof(nullptr, path("out.pb.gz").c_str()), 0);
    std::string gz = read_file(path("out.pb.gz"));
    ASSERT_GE(gz.size(), 18u);
    EXPECT_EQ(uint8_t(gz[0]), 0x1f);
    EXPECT_EQ(uint8_t(gz[1]), 0x8b);

    z_stream z{};
    ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
    std::string raw(1 << 20, '\0');
    z.next_in = reinterpret_cast<Bytef *>(&gz[0]);
    z.avail_in = uInt(gz.size());
    z.next_out = reinterpret_cast<Bytef *>(&raw[0]);
    z.avail_out = uInt(raw.size());
    ASSERT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
    raw.resize(raw.size() - z.avail_out);
    inflateEnd(&z);

    // Key 0x32 = field 6, length-delimited; length 0.
    EXPECT_NE(raw.find(std::string("\x32\x00", 2)), std::string::npos);
    for (const char *s : {"time", "nanoseconds", "alloc_space", "blur_x", "copy to host",
                          "host-profile", "sampler", "timer", "a;b\nc"}) {
        EXPECT_NE(raw.find(s), std::string::npos) << s;
    }
}

TEST_F(ProfileExport, BadPathsAreReportedErrors) {
    scripted_runs();
    tally_test::MessageCapture capture;
    EXPECT_EQ(tally_profiler_write_pprof(nullptr, nullptr), TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(tally_profiler_write_folded(nullptr, ""), TALLY_ERROR_BAD_ARGUMENT);
    std::string missing = path("no/such/dir/p.pb.gz");
    EXPECT_EQ(tally_profiler_write_pprof(nullptr, missing.c_str()), TALLY_ERROR_IO);
    EXPECT_EQ(tally_profiler_write_folded(nullptr, missing.c_str()), TALLY_ERROR_IO);
    std::vector<std::string> errors = capture.errors();
    ASSERT_EQ(errors.size(), 4u);
    EXPECT_NE(errors[2].find("cannot write the pprof profile to " + missing), std::string::npos)
        << errors[2];
    EXPECT_NE(errors[3].find("cannot write the folded stacks to " + missing), std::string::npos)
        << errors[3];
}

// At exit: both files when a run finished, neither when none did.
TEST_F(ProfileExport, EnvironmentNamesTheFilesWrittenAtExit) {
    for (const char *mode : {"ok", "none"}) {
        std::string env = "TALLY_PROFILE_OUTPUT='" + path("report.txt") +
                          "' TALLY_PROFILE_PPROF='" + path(std::string(mode) + ".pb.gz") +
                          "' TALLY_PROFILE_FOLDED='" + path(std::string(mode) + ".folded") + "'";
        std::string cmd = "env " + env + " '" + std::string(TALLY_EXIT_CHILD_PATH) + "' " + mode;
        int status = std::system(cmd.c_str());
        ASSERT_TRUE(WIFEXITED(status));
        EXPECT_EQ(WEXITSTATUS(status), 0);
    }
    EXPECT_TRUE(exists(path("ok.pb.gz")));
    std::string folded = read_file(path("ok.folded"));
    EXPECT_NE(folded.find("failing_pipeline;producer "), std::string::npos) << folded;
    EXPECT_FALSE(exists(path("none.pb.gz")));
    EXPECT_FALSE(exists(path("none.folded")));
}

// tally_profiler_format_text over the numbers the stats API returns prints the report itself
// (what tally-report show relies on: the layout has one home).
TEST_F(ProfileExport, FormatTextOfTheStatsIsTheReport) {
    scripted_runs();
    std::vector<tally_pipeline_stats> pipelines(2);
    std::vector<std::vector<tally_slot_stats>> slots(2);
    std::vector<const tally_slot_stats *> slot_ptrs;
    for (int32_t i = 0; i < 2; i++) {
        ASSERT_EQ(tally_profiler_get_pipeline_stats_by_index(i, &pipelines[size_t(i)]), 0);
        slots[size_t(i)].resize(size_t(pipelines[size_t(i)].num_slots));
        for (int32_t s = 0; s < pipelines[size_t(i)].num_slots; s++) {
            ASSERT_EQ(tally_profiler_get_slot_stats_by_index(i, s, &slots[size_t(i)][size_t(s)]),
                      0);
        }
        slot_ptrs.push_back(slots[size_t(i)].data());
    }
    int32_t n = tally_profiler_format_text(2, pipelines.data(), slot_ptrs.data(), nullptr, 0);
    ASSERT_GT(n, 0);
    std::string text(size_t(n) + 1, '\0');
    EXPECT_EQ(
        tally_profiler_format_text(2, pipelines.data(), slot_ptrs.data(), &text[0], text.size()),
        n);
    text.resize(size_t(n));
    EXPECT_EQ(text, tally_test::report_text(0));

    // Bad numbers are refused, not printed.
    slots[0][1].kind = 7;
    EXPECT_EQ(tally_profiler_format_text(2, pipelines.data(), slot_ptrs.data(), nullptr, 0),
              TALLY_ERROR_BAD_ARGUMENT);
    slots[0][1].kind = TALLY_SLOT_FUNC;
    pipelines[1].name = nullptr;
    EXPECT_EQ(tally_profiler_format_text(2, pipelines.data(), slot_ptrs.data(), nullptr, 0),
              TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(tally_profiler_format_text(0, nullptr, nullptr, nullptr, 0), 0);
}

}  // namespace
