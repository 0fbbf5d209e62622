// The report at process exit: a child process (a plain-C program linking only the runtime) runs a
// pipeline that fails and ends its run on the error path; its stderr must still carry the report.
// Also: TALLY_PROFILE_OUTPUT (stdout, a file) and TALLY_PROFILE_JSON.
#include "Json.h"
#include "TestUtil.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TALLY_EXIT_CHILD_PATH
#error "TALLY_EXIT_CHILD_PATH must name the exit child program"
#endif

namespace {

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class ProfilerExit : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/tally_exit_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::string cmd = "rm -rf '" + dir_ + "'";
        (void)std::system(cmd.c_str());
    }
    // Runs the child with `env` prepended; returns its exit status and captures its output.
    int run_child(const std::string &env, const std::string &mode) {
        std::string cmd = "env -u TALLY_PROFILE_OUTPUT -u TALLY_PROFILE_JSON " + env + " '" +
                          std::string(TALLY_EXIT_CHILD_PATH) + "' " + mode + " >'" + path("out") +
                          "' 2>'" + path("err") + "'";
        int status = std::system(cmd.c_str());
        out_ = read_file(path("out"));
        err_ = read_file(path("err"));
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::string path(const std::string &name) const { return dir_ + "/" + name; }

    std::string dir_, out_, err_;
};

void expect_report(const std::string &text) {
    EXPECT_NE(text.find("pipeline: failing_pipeline\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  runs:             1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  heap peak:        4096 bytes\n"), std::string::npos) << text;
    size_t funcs = text.find("\n  funcs ");
    size_t to_device = text.find("\n  copies to device ");
    size_t to_host = text.find("\n  copies to host ");
    ASSERT_NE(funcs, std::string::npos);
    ASSERT_NE(to_device, std::string::npos);
    ASSERT_NE(to_host, std::string::npos);
    EXPECT_LT(funcs, to_device);
    EXPECT_LT(to_device, to_host);
    for (const char *slot : {"    overhead ", "    producer ", "    consumer ",
                             "    input (copy to device) ", "    consumer (copy to host) "}) {
        EXPECT_NE(text.find(slot), std::string::npos) << slot;
    }
}

TEST_F(ProfilerExit, ReportPrintsToStderrAfterAFailedRun) {
    EXPECT_EQ(run_child("", "fail"), 1);
    EXPECT_NE(err_.find("Error: Buffer argument input is NULL\n"), std::string::npos) << err_;
    expect_report(err_);
    EXPECT_EQ(out_, "");
}

TEST_F(ProfilerExit, ReportPrintsInTimerModeToo) {
    EXPECT_EQ(run_child("", "timer"), 0);
    expect_report(err_);
}

TEST_F(ProfilerExit, OutputToStdout) {
    EXPECT_EQ(run_child("TALLY_PROFILE_OUTPUT=stdout", "fail"), 1);
    expect_report(out_);
    EXPECT_EQ(err_.find("pipeline:"), std::string::npos);
}

TEST_F(ProfilerExit, OutputToAFileAndJson) {
    // Exact mode: every switch reads the clock, so both stages get time however little of the
    // CPUs the machine's load leaves a sampler thread.
    std::string env = "TALLY_PROFILE_MODE=exact TALLY_PROFILE_OUTPUT='" + path("report.txt") +
                      "' TALLY_PROFILE_JSON='" + path("report.json") + "'";
    EXPECT_EQ(run_child(env, "fail"), 1);
    expect_report(read_file(path("report.txt")));
    EXPECT_EQ(err_.find("pipeline:"), std::string::npos);
    tally_test::Json root;
    std::string error;
    std::string json = read_file(path("report.json"));
    ASSERT_TRUE(tally_test::JsonParser(json).parse(&root, &error)) << error << json;
    const tally_test::Json &p = root["pipelines"][0];
    EXPECT_EQ(p["name"].str, "failing_pipeline");
    EXPECT_EQ(p["runs"].number, 1);
    EXPECT_EQ(p["slots"].items.size(), 5u);
    EXPECT_EQ(p["heap_peak_bytes"].number, 4096);
    // Both stages ran (20 and 10 ms) and got time; accuracy itself is checked on the testing
    // clock (ProfilerExactTest, ProfilerReportTest).
    double sum = 0;
    for (size_t s = 0; s < 5; s++) {
        sum += p["slots"][s]["percent"].number;
    }
    EXPECT_NEAR(sum, 100.0, 0.01);
    EXPECT_GT(p["slots"][1]["percent"].number, 0.0) << json;
    EXPECT_GT(p["slots"][2]["percent"].number, 0.0) << json;
}

TEST_F(ProfilerExit, IntervalFromTheEnvironment) {
    // The run samples at the interval the environment names (asked of the runtime during the
    // run, not inferred from how many samples a loaded machine let it take).
    std::string env = "TALLY_PROFILE_MODE=sampling TALLY_PROFILE_INTERVAL_US=5000 "
                      "TALLY_PROFILE_JSON='" +
                      path("r.json") + "'";
    EXPECT_EQ(run_child(env, "interval"), 0);
    EXPECT_EQ(out_, "interval_us=5000\n");
    tally_test::Json root;
    ASSERT_TRUE(tally_test::JsonParser(read_file(path("r.json"))).parse(&root, nullptr));
    EXPECT_GE(root["pipelines"][0]["samples"].number, 1);  // the run's end takes one at least
    EXPECT_EQ(run_child("TALLY_PROFILE_MODE=sampling", "interval"), 0);
    EXPECT_EQ(out_, "interval_us=1000\n");  // the default
}

// The mode of runs started without a mode flag: TALLY_PROFILE_MODE, else the default (exact);
// the header and the JSON name it. A timer-flagged run (profile_by_timer) keeps the timer.
TEST_F(ProfilerExit, ModeFromTheEnvironment) {
    static_assert(TALLY_PROFILER_DEFAULT_MODE == TALLY_PROFILER_FLAG_EXACT,
                  "the expectations below assume the exact default");
    EXPECT_EQ(run_child("TALLY_PROFILE_MODE=sampling", "ok"), 0);
    EXPECT_NE(err_.find("\n  mode:             sampling (sampler thread)\n"), std::string::npos)
        << err_;
    EXPECT_NE(err_.find("+-95%"), std::string::npos) << err_;
    EXPECT_EQ(run_child("", "ok"), 0);
    EXPECT_NE(err_.find("\n  mode:             exact ("), std::string::npos) << err_;
    EXPECT_EQ(err_.find("+-95%"), std::string::npos) << err_;
    EXPECT_EQ(run_child("TALLY_PROFILE_MODE=exact", "timer"), 0);
    EXPECT_NE(err_.find("\n  mode:             sampling (timer signal)\n"), std::string::npos)
        << err_;
    EXPECT_EQ(
        run_child("TALLY_PROFILE_MODE=bogus TALLY_PROFILE_JSON='" + path("m.json") + "'", "ok"), 0);
    EXPECT_NE(err_.find("tally: warning: TALLY_PROFILE_MODE=bogus: expected exact, sampling or "
                        "timer; using exact, the default\n"),
              std::string::npos)
        << err_;
    tally_test::Json root;
    ASSERT_TRUE(tally_test::JsonParser(read_file(path("m.json"))).parse(&root, nullptr));
    EXPECT_EQ(root["pipelines"][0]["mode"].str, "exact");
}

TEST_F(ProfilerExit, ThreadCountFromTheEnvironment) {
    EXPECT_EQ(run_child("TALLY_NUM_THREADS=1", "threads 1"), 0);
    EXPECT_EQ(out_, "max_concurrency=1\n");
    // Each task waits for a second one to run beside it (the child gives up after 10 s, a
    // deadlock guard): with three threads that happens whatever the machine's load.
    EXPECT_EQ(run_child("TALLY_NUM_THREADS=3", "threads 2"), 0);
    int n = 0;
    ASSERT_EQ(std::sscanf(out_.c_str(), "max_concurrency=%d", &n), 1);
    EXPECT_GE(n, 2);
    EXPECT_LE(n, 3);
    EXPECT_EQ(err_, "");  // no profiled run: no report
}

// The cores are counted once, when the runtime is loaded, not by the first parallel loop (40 us
// of a first run on a 2-vCPU guest); the pool's default size is still that count.
TEST_F(ProfilerExit, CoresCountedAtLoadNotByTheFirstLoop) {
    ASSERT_EQ(run_child("-u TALLY_NUM_THREADS -u HL_NUM_THREADS", "first_loop"), 0) << err_;
    long before = -1, after = -1, threads = -1, cores = -1;
    ASSERT_EQ(std::sscanf(out_.c_str(),
                          "core_counts_before=%ld\ncore_counts_after=%ld\nthreads=%ld\ncores=%ld",
                          &before, &after, &threads, &cores),
              4)
        << out_;
    EXPECT_EQ(before, 1);
    EXPECT_EQ(after, 1);
    EXPECT_EQ(threads, std::min(cores, 256L));
    EXPECT_EQ(err_, "");
}

// ---- the environment rule (core/env.c), a variable each -----------------------------------------
// The child's "env" mode prints what the runtime settled. A bad value is said once, as
// "tally: warning: NAME=VALUE: expected ...; using ...", and the fallback is what is used; a good
// value is used and says nothing.

/** The value the child printed for `key` ("" if none). */
std::string settled(const std::string &out, const std::string &key) {
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        if (line.compare(0, key.size() + 1, key + "=") == 0) {
            return line.substr(key.size() + 1);
        }
    }
    return "";
}

/** How many times `text` occurs in `s`. */
size_t count_of(const std::string &s, const std::string &text) {
    size_t n = 0;
    for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) {
        n++;
    }
    return n;
}

class Environment : public ProfilerExit {
protected:
    /** Runs the child's env mode with `assignments`; the warnings it printed, without the report
     * (the report starts at "pipeline:"). */
    std::string run_env(const std::string &assignments) {
        EXPECT_EQ(run_child(assignments, "env"), 0) << err_;
        return err_.substr(0, err_.find("pipeline:"));
    }
    /** A bad `value` for `name` warns once, with the whole message, and `key` settles to
     * `fallback`. */
    void expect_rejected(const std::string &name, const std::string &value,
                         const std::string &expected, const std::string &instead,
                         const std::string &key, const std::string &fallback) {
        SCOPED_TRACE(name + "=" + value);
        const std::string warnings = run_env(name + "='" + value + "'");
        EXPECT_EQ(warnings, "tally: warning: " + name + "=" + value + ": expected " + expected +
                                "; using " + instead + "\n");
        if (!key.empty()) {
            EXPECT_EQ(settled(out_, key), fallback) << out_;
        }
    }
    /** A good `value` for `name` settles `key` to `want`, silently. */
    void expect_taken(const std::string &name, const std::string &value, const std::string &key,
                      const std::string &want) {
        SCOPED_TRACE(name + "=" + value);
        EXPECT_EQ(run_env(name + "='" + value + "'"), "");
        EXPECT_EQ(settled(out_, key), want) << out_;
    }
    std::string cores() {
        run_env("");
        return settled(out_, "cores");
    }
};

TEST_F(Environment, ProfileMode) {
    expect_taken("TALLY_PROFILE_MODE", "sampling", "mode", "sampling");
    expect_rejected("TALLY_PROFILE_MODE", "Exact", "exact, sampling or timer", "exact, the default",
                    "mode", "exact");
}

TEST_F(Environment, ProfileIntervalUs) {
    expect_taken("TALLY_PROFILE_INTERVAL_US", "250", "interval_us", "250");
    for (const char *bad : {"5", "1000001", "1ms", " 250", "+250", "-1"}) {
        expect_rejected("TALLY_PROFILE_INTERVAL_US", bad, "a whole number from 10 to 1000000",
                        "1000, the default", "interval_us", "1000");
    }
}

TEST_F(Environment, NumThreadsAndHalidesName) {
    const std::string n = cores();
    ASSERT_FALSE(n.empty());
    const std::string instead = "the number of cores (" + n + ")";
    expect_taken("TALLY_NUM_THREADS", "3", "threads", "3");
    for (const char *bad : {"-3", "0", "257", "two", "4 "}) {
        expect_rejected("TALLY_NUM_THREADS", bad, "a whole number from 1 to 256", instead,
                        "threads", n);
    }
    expect_taken("HL_NUM_THREADS", "5", "threads", "5");
    expect_rejected("HL_NUM_THREADS", "many", "a whole number from 1 to 256", instead, "threads",
                    n);
    // Tally's own name wins over Halide's.
    EXPECT_EQ(run_env("TALLY_NUM_THREADS=2 HL_NUM_THREADS=7"), "");
    EXPECT_EQ(settled(out_, "threads"), "2");
}

TEST_F(Environment, MallocCacheBytes) {
    run_env("");
    const std::string fallback = settled(out_, "malloc_cache_limit");
    ASSERT_FALSE(fallback.empty());
    expect_taken("TALLY_MALLOC_CACHE_BYTES", "4096", "malloc_cache_limit", "4096");
    expect_taken("TALLY_MALLOC_CACHE_BYTES", "0", "malloc_cache_limit", "0");
    expect_rejected(
        "TALLY_MALLOC_CACHE_BYTES", "1G", "a whole number from 0 to 9223372036854775807",
        fallback + " (a quarter of memory, at most 1 GiB)", "malloc_cache_limit", fallback);
}

TEST_F(Environment, ProfileClock) {
    expect_taken("TALLY_PROFILE_CLOCK", "monotonic", "clock", "clock_gettime");
    run_env("");
    const std::string fallback = settled(out_, "clock");
    expect_rejected("TALLY_PROFILE_CLOCK", "rdtsc", "tsc or monotonic",
                    "tsc, the default (where the kernel trusts it)", "clock", fallback);
}

TEST_F(Environment, Fault) {
    EXPECT_EQ(run_child("TALLY_FAULT=malloc", "env"), 0);
    EXPECT_EQ(settled(out_, "malloc"), "failed");
    EXPECT_EQ(settled(out_, "faults"), "1");
    expect_rejected("TALLY_FAULT", "malloc:0",
                    "<op>[:<n>] with op one of malloc, device_malloc, copy_to_host, "
                    "copy_to_device, launch, sync and n >= 1",
                    "no fault injection", "malloc", "ok");
    EXPECT_EQ(settled(out_, "faults"), "0");
}

TEST_F(Environment, TraceEvents) {
    const std::string trace = "TALLY_PROFILE_TRACE='" + path("t.json") + "' ";
    EXPECT_EQ(run_env(trace + "TALLY_PROFILE_TRACE_EVENTS=lots"),
              "tally: warning: TALLY_PROFILE_TRACE_EVENTS=lots: expected a whole number from 1 "
              "to 67108864; using 262144, the default\n");
    tally_test::Json root;
    ASSERT_TRUE(tally_test::JsonParser(read_file(path("t.json"))).parse(&root, nullptr));
    EXPECT_EQ(run_env(trace + "TALLY_PROFILE_TRACE_EVENTS=1024"), "");
}

TEST_F(Environment, ContinuousPprof) {
    const std::string pprof = "TALLY_PROFILE_PPROF='" + path("p") + "' ";
    EXPECT_EQ(run_env(pprof + "TALLY_PROFILE_PPROF_EVERY=soon"),
              "tally: warning: TALLY_PROFILE_PPROF_EVERY=soon: expected a number above 0 and at "
              "most 1e+06; using no continuous profiling\n");
    EXPECT_EQ(run_env("TALLY_PROFILE_PPROF_EVERY=1"),
              "tally: warning: TALLY_PROFILE_PPROF_EVERY=1: expected TALLY_PROFILE_PPROF=<path> "
              "beside it, to name the files; using no continuous profiling\n");
    EXPECT_EQ(run_env(pprof + "TALLY_PROFILE_PPROF_EVERY=100 TALLY_PROFILE_PPROF_KEEP=none"),
              "tally: warning: TALLY_PROFILE_PPROF_KEEP=none: expected a whole number from 1 to "
              "1000000; using 8, the default\n");
    EXPECT_EQ(run_env(pprof + "TALLY_PROFILE_PPROF_EVERY=100 TALLY_PROFILE_PPROF_KEEP=3"), "");
}

// ---- a report that cannot be written ------------------------------------------------------------

// At exit, an unwritable TALLY_PROFILE_JSON is said, naming the path and the reason; the text
// report is still printed.
TEST_F(ProfilerExit, UnwritableJsonIsSaidAtExit) {
    EXPECT_EQ(run_child("TALLY_PROFILE_JSON=/nonexistent/dir/x.json", "ok"), 0);
    EXPECT_NE(err_.find("tally profiler: cannot write the report to /nonexistent/dir/x.json: No "
                        "such file or directory"),
              std::string::npos)
        << err_;
    EXPECT_NE(err_.find("pipeline: failing_pipeline\n"), std::string::npos) << err_;
}

// tally_profiler_write_exit_outputs writes the report and the JSON now and returns the failure's
// code; at exit nothing is written again (no run finished since).
TEST_F(ProfilerExit, WriteExitOutputsReturnsTheFailure) {
    EXPECT_EQ(run_child("TALLY_PROFILE_JSON=/nonexistent/dir/x.json", "written"), 1);
    EXPECT_EQ(out_, "write_exit_outputs=ERROR_IO\n");
    EXPECT_EQ(count_of(err_, "cannot write the report to /nonexistent/dir/x.json: "), 1u) << err_;
    EXPECT_EQ(count_of(err_, "pipeline: failing_pipeline\n"), 1u) << err_;

    EXPECT_EQ(run_child("TALLY_PROFILE_JSON='" + path("ok.json") + "'", "written"), 0);
    EXPECT_EQ(out_, "write_exit_outputs=SUCCESS\n");
    EXPECT_EQ(count_of(err_, "pipeline: failing_pipeline\n"), 1u) << err_;
    tally_test::Json root;
    ASSERT_TRUE(tally_test::JsonParser(read_file(path("ok.json"))).parse(&root, nullptr));
    EXPECT_EQ(root["pipelines"][0]["runs"].number, 1);

    // An export that cannot be written fails it too.
    EXPECT_EQ(run_child("TALLY_PROFILE_PPROF=/nonexistent/dir/p.pb.gz", "written"), 1);
    EXPECT_EQ(out_, "write_exit_outputs=ERROR_IO\n") << err_;
}

TEST_F(ProfilerExit, NothingPrintedWhenNoPipelineRan) {
    EXPECT_EQ(run_child("TALLY_PROFILE_JSON='" + path("none.json") + "'", "none"), 0);
    EXPECT_EQ(err_, "");
    EXPECT_EQ(access(path("none.json").c_str(), F_OK), -1);
}

}  // namespace
