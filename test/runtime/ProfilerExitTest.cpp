// The report at process exit: a child process (a plain-C program linking only the runtime) runs a
// pipeline that fails and ends its run on the error path; its stderr must still carry the report.
// Also: TALLY_PROFILE_OUTPUT (stdout, a file) and TALLY_PROFILE_JSON.
#include "Json.h"
#include "TestUtil.h"

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
    EXPECT_NE(err_.find("TALLY_PROFILE_MODE=bogus: expected exact, sampling or timer"),
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

TEST_F(ProfilerExit, NothingPrintedWhenNoPipelineRan) {
    EXPECT_EQ(run_child("TALLY_PROFILE_JSON='" + path("none.json") + "'", "none"), 0);
    EXPECT_EQ(err_, "");
    EXPECT_EQ(access(path("none.json").c_str(), F_OK), -1);
}

}  // namespace
