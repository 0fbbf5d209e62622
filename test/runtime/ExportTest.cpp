// The profile exports (runtime/src/export/export_*.c) on a scripted run under a hand-moved clock:
// the folded stacks byte for byte (the stack rule of tally_runtime.h: a copy slot under its Func, a
// copy of an input under the pipeline), the pprof file's gzip wrapper and string table, the
// error paths, and the at-exit files TALLY_PROFILE_PPROF and TALLY_PROFILE_FOLDED name. That
// `go tool pprof` reads the profile and finds the report's numbers in it is test/export's job.
#include "TestUtil.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
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

// A reader of just enough of profile.proto to check numbers: per sample, the leaf function's
// name and the values (the encoder's correctness against pprof itself is test/export's job).
struct ProtoReader {
    const std::string &data;
    size_t pos, end;
    bool varint(uint64_t *v) {
        *v = 0;
        for (int shift = 0; pos < end && shift < 64; shift += 7) {
            uint8_t b = uint8_t(data[pos++]);
            *v |= uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80)) {
                return true;
            }
        }
        return false;
    }
    // Next field: its number, and either its varint value or its bytes [*begin, *stop).
    bool field(uint32_t *number, uint64_t *value, size_t *begin, size_t *stop) {
        uint64_t key;
        if (pos >= end || !varint(&key)) {
            return false;
        }
        *number = uint32_t(key >> 3);
        if ((key & 7) == 0) {
            return varint(value);
        }
        if ((key & 7) != 2 || !varint(value) || pos + *value > end) {
            return false;
        }
        *begin = pos;
        *stop = pos + size_t(*value);
        pos = *stop;
        return true;
    }
};

std::string gunzip(const std::string &gz) {
    z_stream z{};
    EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
    std::string raw(1 << 20, '\0');
    z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(gz.data()));
    z.avail_in = uInt(gz.size());
    z.next_out = reinterpret_cast<Bytef *>(&raw[0]);
    z.avail_out = uInt(raw.size());
    EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
    raw.resize(raw.size() - z.avail_out);
    inflateEnd(&z);
    return raw;
}

// leaf function name -> values of its sample (one sample per leaf in these tests).
std::map<std::string, std::vector<uint64_t>> decode_pprof(const std::string &path) {
    std::string raw = gunzip(read_file(path));
    std::vector<std::string> strings;
    std::map<uint64_t, uint64_t> location_function, function_name;
    std::vector<std::pair<uint64_t, std::vector<uint64_t>>> samples;  // leaf location, values
    ProtoReader top{raw, 0, raw.size()};
    uint32_t number;
    uint64_t value;
    size_t b = 0, e = 0;
    while (top.field(&number, &value, &b, &e)) {
        ProtoReader sub{raw, b, e};
        uint32_t n2;
        uint64_t v2;
        size_t b2 = 0, e2 = 0;
        if (number == 6) {
            strings.push_back(raw.substr(b, e - b));
        } else if (number == 2) {
            uint64_t leaf = 0;
            std::vector<uint64_t> values;
            while (sub.field(&n2, &v2, &b2, &e2)) {
                ProtoReader packed{raw, b2, e2};
                uint64_t x;
                if (n2 == 1 && packed.varint(&x)) {
                    leaf = x;
                } else if (n2 == 2) {
                    while (packed.pos < packed.end && packed.varint(&x)) {
                        values.push_back(x);
                    }
                }
            }
            samples.emplace_back(leaf, values);
        } else if (number == 4 || number == 5) {
            uint64_t id = 0, target = 0;
            while (sub.field(&n2, &v2, &b2, &e2)) {
                if (n2 == 1) {
                    id = v2;
                } else if (number == 5 && n2 == 2) {
                    target = v2;
                } else if (number == 4 && n2 == 4) {
                    ProtoReader line{raw, b2, e2};
                    uint32_t n3;
                    uint64_t v3;
                    size_t b3 = 0, e3 = 0;
                    while (line.field(&n3, &v3, &b3, &e3)) {
                        if (n3 == 1) {
                            target = v3;
                        }
                    }
                }
            }
            (number == 4 ? location_function : function_name)[id] = target;
        }
    }
    std::map<std::string, std::vector<uint64_t>> out;
    for (const auto &[leaf, values] : samples) {
        out[strings.at(size_t(function_name.at(location_function.at(leaf))))] = values;
    }
    return out;
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
    // The input's copy belongs to no Func (its stack is its own name); blur_y's is blur_y's.
    const int32_t parents[] = {-1, -1, -1, -1, 2, -1};
    void *inst = tally_profiler_start(nullptr, "blur", "host-profile", 6, names, kinds, parents, 0);
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
                                       nullptr, TALLY_PROFILER_FLAG_TIMER);
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
                          "host-profile", "sampling", "timer", "a;b\nc"}) {
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

// Windows: each holds what happened since the previous one; a window without runs is empty; a
// reset starts the counts again.
TEST_F(ProfileExport, PprofWindowsHoldDifferences) {
    scripted_runs();
    ASSERT_EQ(tally_profiler_write_pprof_window(nullptr, path("w0").c_str()), 0);
    scripted_runs();
    scripted_runs();
    ASSERT_EQ(tally_profiler_write_pprof_window(nullptr, path("w1").c_str()), 0);
    ASSERT_EQ(tally_profiler_write_pprof_window(nullptr, path("w2").c_str()), 0);
    tally_profiler_reset();
    scripted_runs();
    ASSERT_EQ(tally_profiler_write_pprof_window(nullptr, path("w3").c_str()), 0);

    auto w0 = decode_pprof(path("w0"));
    // time, samples, heap allocs, heap bytes, device allocs and bytes, copies, copy bytes
    EXPECT_EQ(w0["blur_x"], (std::vector<uint64_t>{3000000, 1, 1, 4096, 0, 0, 0, 0}));
    EXPECT_EQ(w0["copy to host"], (std::vector<uint64_t>{1000000, 1, 0, 0, 0, 0, 0, 0}));
    auto w1 = decode_pprof(path("w1"));
    EXPECT_EQ(w1["blur_x"], (std::vector<uint64_t>{6000000, 2, 2, 8192, 0, 0, 0, 0}));
    EXPECT_EQ(w1.size(), w0.size());
    EXPECT_TRUE(decode_pprof(path("w2")).empty());
    EXPECT_EQ(decode_pprof(path("w3")), w0);
    // The cumulative profile is unaffected by windows.
    ASSERT_EQ(tally_profiler_write_pprof(nullptr, path("all").c_str()), 0);
    EXPECT_EQ(decode_pprof(path("all")), w0);
}

// TALLY_PROFILE_PPROF_EVERY in a real process: however many windows the timing made, together
// they hold exactly the cumulative profile written at exit, sampled; with a small KEEP only the
// newest windows remain. Bad settings are reported and leave it off.
TEST_F(ProfileExport, ContinuousWindowsAddUpToTheProfile) {
    auto run = [&](const std::string &env) {
        std::string cmd = "env TALLY_PROFILE_OUTPUT='" + path("report.txt") + "' " + env + " '" +
                          std::string(TALLY_EXIT_CHILD_PATH) + "' ok 2>'" + path("err") + "'";
        int status = std::system(cmd.c_str());
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    };
    run("TALLY_PROFILE_PPROF='" + path("p") + "' TALLY_PROFILE_PPROF_EVERY=0.004 " +
        "TALLY_PROFILE_PPROF_KEEP=100000");
    std::map<std::string, std::vector<uint64_t>> sum;
    int windows = 0;
    for (; exists(path("p." + std::to_string(windows))); windows++) {
        for (const auto &[name, values] : decode_pprof(path("p." + std::to_string(windows)))) {
            std::vector<uint64_t> &s = sum[name];
            s.resize(values.size());
            for (size_t i = 0; i < values.size(); i++) {
                s[i] += values[i];
            }
        }
    }
    EXPECT_GE(windows, 1);  // at least the last one, written at exit
    // Continuous mode samples at a low rate, whatever the default mode.
    const std::string report = read_file(path("report.txt"));
    EXPECT_NE(report.find("\n  mode:             sampling (sampler thread)\n"), std::string::npos)
        << report;
    auto all = decode_pprof(path("p"));
    ASSERT_FALSE(all.empty());
    for (auto &[name, values] : all) {
        // Peaks are not summed; the others are.
        EXPECT_EQ(sum[name], values) << name << " over " << windows << " windows";
    }

    run("TALLY_PROFILE_PPROF='" + path("k") + "' TALLY_PROFILE_PPROF_EVERY=0.002 " +
        "TALLY_PROFILE_PPROF_KEEP=2");
    int last = -1, kept = 0;
    for (int i = 0; i < 100000; i++) {
        if (exists(path("k." + std::to_string(i)))) {
            last = i;
            kept++;
        }
    }
    EXPECT_GE(last, 0);
    EXPECT_LE(kept, 2);
    EXPECT_TRUE(exists(path("k." + std::to_string(last))));

    run("TALLY_PROFILE_PPROF='" + path("b") + "' TALLY_PROFILE_PPROF_EVERY=soon");
    EXPECT_NE(read_file(path("err"))
                  .find("tally: warning: TALLY_PROFILE_PPROF_EVERY=soon: expected a number "
                        "above 0 and at most 1e+06; using no continuous profiling\n"),
              std::string::npos)
        << read_file(path("err"));
    EXPECT_FALSE(exists(path("b.0")));
    EXPECT_TRUE(exists(path("b")));  // the at-exit profile is still written
}

}  // namespace
