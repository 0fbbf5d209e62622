// End-to-end fault injection: JIT-compiled, profiled pipelines whose runtime calls fail on
// purpose (TALLY_FAULT / tally_testing_set_fault, runtime/src/core/fault.c).
//
// - apps/memory (host-profile), second halide_malloc failing: the run returns
//   TALLY_ERROR_OUT_OF_MEMORY, the message names halide_malloc and "(injected fault)", the
//   profiler counts the run and ends it, and the next run works and is correct. (That its memory
//   columns come back to 0 is a known bug, checked by a disabled test below.)
// - The same with TALLY_FAULT=malloc:2 from the environment in a child process (this binary run
//   again): the exit code is the failure, and the report still prints at exit.
// - apps/gpu_gpu_cpu (host-vulkan-profile), launch failing: the run returns
//   TALLY_ERROR_DEVICE_RUN_FAILED and the error names halide_vulkan_run and the kernel, never the
//   sync injected after it; a failing sync, by contrast, is reported as the sync. Skipped, with
//   the reason, when halide_vulkan_device_interface() is NULL.
//
// Fault injection and the profiler are process-wide: every test disarms and resets both.

#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "E2EUtil.h"
#include "memory/reference.h"
#include "tally_runtime_testing.h"

namespace tally_e2e {
namespace {

bool contains(const std::string &s, const std::string &part) {
    return s.find(part) != std::string::npos;
}

/** Records halide_error messages while alive. */
class ErrorCapture {
public:
    ErrorCapture() {
        current() = this;
        prev = tally_set_error_handler(&ErrorCapture::on_error);
    }
    ~ErrorCapture() {
        tally_set_error_handler(prev);
        current() = nullptr;
    }
    std::vector<std::string> messages() {
        std::lock_guard<std::mutex> lock(mutex);
        return errors;
    }
    std::string all() {
        std::string s;
        for (const std::string &e : messages()) {
            s += e + "\n";
        }
        return s;
    }
    /** The messages that mention an injected fault. */
    std::vector<std::string> injected() {
        std::vector<std::string> out;
        for (const std::string &e : messages()) {
            if (contains(e, "(injected fault)")) {
                out.push_back(e);
            }
        }
        return out;
    }

private:
    static ErrorCapture *&current() {
        static ErrorCapture *c = nullptr;
        return c;
    }
    static void on_error(void *, const char *msg) {
        ErrorCapture *self = current();
        std::lock_guard<std::mutex> lock(self->mutex);
        self->errors.push_back(msg);
    }
    std::mutex mutex;
    std::vector<std::string> errors;
    tally_message_handler_t prev;
};

class FaultE2E : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(tally_testing_set_fault(nullptr), 0);
        tally_profiler_reset();
    }
    void TearDown() override {
        ASSERT_EQ(tally_testing_set_fault(nullptr), 0);
        tally_profiler_reset();
    }
};

/** apps/memory's buffers: width x height int32 input (values < 1000) and output. */
struct MemoryApp {
    Buffer<int32_t> input, output;
    int32_t width, height;
    MemoryApp(int w, int h) : input({w, h}), output({w, h}), width(w), height(h) {
        Rng rng(7);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = int32_t(rng.below(1000));
        }
    }
    int run(const tally::JITModule &jit) { return jit.call({input, output, width, height}); }
    bool correct() {
        std::vector<int32_t> want(input.size());
        tally_apps::memory_reference(input.data(), want.data(), width, height);
        return output.to_vector() == want;
    }
};

/** Every slot of `pipeline` has no heap or device memory left current. */
void expect_no_memory_left(const char *pipeline) {
    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats(pipeline, &ps), 0);
    for (int32_t s = 0; s < ps.num_slots; s++) {
        tally_slot_stats ss;
        ASSERT_EQ(tally_profiler_get_slot_stats(pipeline, s, &ss), 0);
        EXPECT_EQ(ss.heap.current, 0) << pipeline << " slot " << ss.name;
        EXPECT_EQ(ss.device.current, 0) << pipeline << " slot " << ss.name;
    }
}

TEST_F(FaultE2E, MemoryAppSecondMallocFailsWithOutOfMemory) {
    const int width = 37, height = 23;
    auto jit = compile_app("memory", "host-profile");
    MemoryApp app(width, height);
    ErrorCapture capture;
    // halide_malloc #1 is horiz; #2 is the first row_prefix any row's task allocates.
    ASSERT_EQ(tally_testing_set_fault("malloc:2"), 0);
    int64_t before = tally_testing_faults_injected();
    EXPECT_EQ(app.run(*jit), TALLY_ERROR_OUT_OF_MEMORY) << capture.all();
    EXPECT_EQ(tally_testing_faults_injected(), before + 1);
    std::vector<std::string> injected = capture.injected();
    ASSERT_EQ(injected.size(), 1u) << capture.all();
    EXPECT_EQ(injected[0], "halide_malloc: out of memory allocating " +
                               std::to_string((width + 1) * 4) + " bytes (injected fault)");
    // The failed run is counted and ended (no run left live).
    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats("memory", &ps), 0);
    EXPECT_EQ(ps.runs, 1u);
    EXPECT_EQ(tally_testing_live_instances(), 0);

    // The fault fired once: the next run works.
    EXPECT_EQ(app.run(*jit), 0) << capture.all();
    EXPECT_TRUE(app.correct());
    ASSERT_EQ(tally_profiler_get_pipeline_stats("memory", &ps), 0);
    EXPECT_EQ(ps.runs, 2u);
}

// Known bug, disabled until passes/InjectProfiling.cpp is fixed (docs/reliability.md, "Open
// findings"): the profiler is told of a heap allocation before halide_malloc runs, and of its free
// only on the normal path, so after a run that fails the allocations it made stay "current" in the
// totals forever (here horiz, 3404 bytes, and the row_prefix whose malloc failed, 152 bytes) even
// though the destructors freed them. Device allocations have the same free-side gap.
TEST_F(FaultE2E, FailedRunLeavesNoMemoryCurrentInTheProfiler) {
    auto jit = compile_app("memory", "host-profile");
    MemoryApp app(37, 23);
    ErrorCapture capture;
    ASSERT_EQ(tally_testing_set_fault("malloc:2"), 0);
    ASSERT_EQ(app.run(*jit), TALLY_ERROR_OUT_OF_MEMORY) << capture.all();
    expect_no_memory_left("memory");
    // Only allocations that happened are counted: horiz once, not the failed row_prefix.
    tally_slot_stats horiz;
    ASSERT_EQ(tally_profiler_get_slot_stats("memory", 1, &horiz), 0);
    EXPECT_EQ(horiz.heap.num_allocs, 1u);
}

// The child half of the next test: compiles and runs apps/memory once under whatever TALLY_FAULT
// says and exits (running the at-exit report) with 1 if the run failed. Started as
// `TALLY_FAULT_E2E_CHILD=1 e2e_fault`, the binary does this before main, so GoogleTest never runs.
struct ChildMode {
    ChildMode() {
        if (!std::getenv("TALLY_FAULT_E2E_CHILD")) {
            return;
        }
        auto jit = compile_app("memory", "host-profile");
        MemoryApp app(37, 23);
        int rc = app.run(*jit);
        std::printf("child result %d\n", rc);
        std::fflush(stdout);
        jit.reset();
        std::exit(rc == 0 ? 0 : 1);
    }
} child_mode;

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST_F(FaultE2E, ReportPrintsAtExitAfterAFailedRun) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ASSERT_GT(n, 0);
    exe[n] = '\0';
    char tmpl[] = "/tmp/tally_e2e_fault_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    std::string cmd = "env -u TALLY_PROFILE_OUTPUT -u TALLY_PROFILE_JSON TALLY_FAULT_E2E_CHILD=1 "
                      "TALLY_FAULT=malloc:2 '" +
                      std::string(exe) + "' >'" + dir + "/out' 2>'" + dir + "/err'";
    int status = std::system(cmd.c_str());
    std::string out = read_file(dir + "/out"), err = read_file(dir + "/err");
    (void)std::system(("rm -rf '" + dir + "'").c_str());
    ASSERT_TRUE(WIFEXITED(status)) << err;
    EXPECT_EQ(WEXITSTATUS(status), 1) << out << err;
    EXPECT_TRUE(contains(out, "child result -11")) << out;
    EXPECT_TRUE(
        contains(err, "Error: halide_malloc: out of memory allocating 152 bytes (injected fault)"))
        << err;
    // The report, after the failed run: one run, every Func listed.
    size_t report = err.find("pipeline: memory\n");
    ASSERT_NE(report, std::string::npos) << err;
    EXPECT_TRUE(contains(err.substr(report), "  runs:             1\n")) << err;
    for (const char *slot : {"    overhead ", "    horiz ", "    row_prefix ", "    row_box ",
                             "    output ", "    col_prefix "}) {
        EXPECT_TRUE(contains(err.substr(report), slot)) << slot << "\n" << err;
    }
}

// ---- GPU: a failed launch is reported as the launch ------------------------------------------

const halide_device_interface_t *vulkan_or_skip(std::string *why) {
    const halide_device_interface_t *vk = halide_vulkan_device_interface();
    if (!vk) {
        *why = "no Vulkan device (halide_vulkan_device_interface() returned NULL)";
    }
    return vk;
}

#define REQUIRE_VULKAN()                                                                           \
    do {                                                                                           \
        std::string why_;                                                                          \
        if (!vulkan_or_skip(&why_)) {                                                              \
            std::printf("skipped: %s\n", why_.c_str());                                            \
            GTEST_SKIP() << why_;                                                                  \
        }                                                                                          \
    } while (0)

/** gpu_gpu_cpu(input, C, width, height, reps) on 64x32 floats. */
struct GpuApp {
    Buffer<float> input, C;
    int32_t width = 64, height = 32, reps = 4;
    GpuApp() : input({64, 32}), C({64, 32}) {
        Rng rng(3);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = rng.uniform(-1.0f, 1.0f);
        }
    }
    // tally::Buffer frees the device copies the pipeline leaves on `input` and `C` (as Halide
    // does, it leaves them to the caller).
    int run(const tally::JITModule &jit) { return jit.call({input, C, width, height, reps}); }
};

/** After a failed run: once the caller frees its own buffers' device copies, no device
 * allocation is left that was not there before the run (`before`). The run's own (A, B) must have
 * been freed on the error path: the pass registers halide_device_free_as_destructor for each, as
 * Halide's lowering does. */
void expect_no_device_buffer_left(GpuApp *app, int32_t before) {
    (void)app->input.device_free();
    (void)app->C.device_free();
    EXPECT_EQ(tally_testing_vulkan_live_buffers(), before);
}

TEST_F(FaultE2E, VulkanLaunchFailureIsReportedAsTheLaunch) {
    REQUIRE_VULKAN();
    auto jit = compile_app("gpu_gpu_cpu", "host-vulkan-profile");
    GpuApp app;
    ErrorCapture capture;
    const int32_t live_before = tally_testing_vulkan_live_buffers();
    ASSERT_EQ(tally_testing_set_fault("launch"), 0);
    EXPECT_EQ(app.run(*jit), TALLY_ERROR_DEVICE_RUN_FAILED) << capture.all();
    std::vector<std::string> injected = capture.injected();
    ASSERT_EQ(injected.size(), 1u) << capture.all();
    EXPECT_TRUE(contains(injected[0], "halide_vulkan_run: kernel ")) << injected[0];
    EXPECT_TRUE(contains(injected[0], "launch failed (injected fault)")) << injected[0];
    for (const std::string &e : capture.messages()) {
        EXPECT_FALSE(contains(e, "sync")) << "a launch failure reported as a sync: " << e;
    }
    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats("gpu_gpu_cpu", &ps), 0);
    EXPECT_EQ(ps.runs, 1u);
    EXPECT_EQ(ps.kernel_launches, 0u);
    expect_no_memory_left("gpu_gpu_cpu");
    expect_no_device_buffer_left(&app, live_before);

    // Next run: no fault left, correct result.
    EXPECT_EQ(app.run(*jit), 0) << capture.all();
}

TEST_F(FaultE2E, VulkanSyncFailureIsReportedAsTheSync) {
    REQUIRE_VULKAN();
    auto jit = compile_app("gpu_gpu_cpu", "host-vulkan-profile");
    GpuApp app;
    ErrorCapture capture;
    const int32_t live_before = tally_testing_vulkan_live_buffers();
    // Sync #1 follows the copy of `input` to the device; #2 is the one injected after A's launch.
    ASSERT_EQ(tally_testing_set_fault("sync:2"), 0);
    EXPECT_EQ(app.run(*jit), TALLY_ERROR_DEVICE_SYNC_FAILED) << capture.all();
    std::vector<std::string> injected = capture.injected();
    ASSERT_EQ(injected.size(), 1u) << capture.all();
    EXPECT_EQ(injected[0],
              "halide_device_sync_global: vulkan: device sync failed (injected fault)");
    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats("gpu_gpu_cpu", &ps), 0);
    EXPECT_EQ(ps.kernel_launches, 1u);  // A was launched; its sync failed
    expect_no_memory_left("gpu_gpu_cpu");
    expect_no_device_buffer_left(&app, live_before);

    // Next run: no fault left, correct result. It also waits for A, which the failed sync left
    // running: lavapipe compiles a kernel's code on its queue thread, and a process that exits
    // while it does can crash inside Mesa's LLVM, whose lazily made statics exit() may destroy
    // before the runtime's at-exit teardown (registered earlier) waits for the device.
    EXPECT_EQ(app.run(*jit), 0) << capture.all();
}

}  // namespace
}  // namespace tally_e2e
