// End-to-end fault injection: JIT-compiled, profiled pipelines whose runtime calls fail on
// purpose (TALLY_FAULT / tally_testing_set_fault, runtime/src/core/fault.c).
//
// - apps/memory (host-profile), second halide_malloc failing: the run returns
//   TALLY_ERROR_OUT_OF_MEMORY, the message names halide_malloc and "(injected fault)", the
//   profiler counts the run and ends it, and the next run works and is correct; its memory
//   columns come back to 0 (the error exit's frees are settled at the run's end).
// - The same with TALLY_FAULT=malloc:2 from the environment in a child process (this binary run
//   again): the exit code is the failure, and the report still prints at exit.
// - apps/gpu_gpu_cpu (host-vulkan-profile, host-opencl-profile), launch failing: the run returns
//   TALLY_ERROR_DEVICE_RUN_FAILED and the error names halide_<api>_run and the kernel, never the
//   sync injected after it; a failing sync, by contrast, is reported as the sync, and on OpenCL a
//   failing copy to the device or to the host as that copy. After each, the run has freed its
//   device allocations (the API's live-allocation count) and launched only what it counted, and
//   the next run is right (against apps/gpu_gpu_cpu's reference). Skipped, with the reason, when
//   the API's device interface is NULL.
// - OpenCL only: Halide 14's own OpenCL text with one kernel broken fails to build, reported with
//   the build log, and the text unbroken then runs right; rounds of every failure followed by good
//   runs leave no allocation live and every deferred free released after halide_device_release.
//
// Every GPU case ends with a good run that waited for all its work: exiting while lavapipe or
// PoCL still has a kernel in flight can crash inside their LLVM.
//
// Fault injection and the profiler are process-wide: every test disarms and resets both.

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "E2EUtil.h"
#include "GpuApps.h"
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

// A failed run leaves no memory "current" in the profiler's totals (docs/reliability.md findings 4
// and 5, fixed): the allocations it made (here horiz, 3404 bytes) were freed by its destructors on
// the error exit, which the run's end settles, and the row_prefix whose halide_malloc failed (152
// bytes) was never counted.
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
//
// `TALLY_FAULT_E2E_CHILD=opencl` runs apps/gpu_gpu_cpu once on OpenCL instead, frees its buffers'
// device copies and prints the run's result and the OpenCL allocations left ("live N").
int opencl_child();

struct ChildMode {
    ChildMode() {
        const char *mode = std::getenv("TALLY_FAULT_E2E_CHILD");
        if (!mode) {
            return;
        }
        if (std::string(mode) == "opencl") {
            std::exit(opencl_child());
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

// ---- GPU: each failure is reported as what failed -------------------------------------------

/** A GPU API the cases run on: apps/gpu_gpu_cpu lowered for `target`, its interface (NULL: the
 * case skips, saying so) and its count of live device allocations. */
struct GpuFaultApi {
    const char *name;    // as the interface names itself in messages: "vulkan"
    const char *title;   // as people write it: "Vulkan"
    const char *target;  // profiled: a sync injected after each launch
    const halide_device_interface_t *(*interface)();
    int32_t (*live_buffers)();
};

const GpuFaultApi vulkan_api = {"vulkan", "Vulkan", "host-vulkan-profile",
                                halide_vulkan_device_interface, tally_testing_vulkan_live_buffers};
const GpuFaultApi opencl_api = {"opencl", "OpenCL", "host-opencl-profile",
                                halide_opencl_device_interface, tally_testing_opencl_live_buffers};

#define REQUIRE_GPU(api)                                                                           \
    do {                                                                                           \
        if (!(api).interface()) {                                                                  \
            const std::string why_ = std::string("no ") + (api).title + " device (halide_" +       \
                                     (api).name + "_device_interface() returned NULL)";            \
            std::printf("skipped: %s\n", why_.c_str());                                            \
            GTEST_SKIP() << why_;                                                                  \
        }                                                                                          \
    } while (0)

/** gpu_gpu_cpu(input, C, width, height, reps) on 64x32 floats, checked against the reference. */
GpuGpuCpu gpu_app() {
    return GpuGpuCpu(64, 32, 4, 3);
}

/** After a failed run: once the caller frees its own buffers' device copies, no device
 * allocation is left that was not there before the run (`before`). The run's own (A, B) must have
 * been freed on the error path: the pass registers halide_device_free_as_destructor for each, as
 * Halide's lowering does. */
void expect_no_device_buffer_left(const GpuFaultApi &api, GpuGpuCpu *app, int32_t before) {
    EXPECT_EQ(app->input.device_free(), 0);
    EXPECT_EQ(app->C.device_free(), 0);
    EXPECT_EQ(api.live_buffers(), before) << api.title << " device allocations left behind";
}

/** The pipeline's launch and run counts. */
tally_pipeline_stats gpu_app_stats() {
    tally_pipeline_stats ps{};
    EXPECT_EQ(tally_profiler_get_pipeline_stats("gpu_gpu_cpu", &ps), 0);
    return ps;
}

/** The next run, with no fault armed, succeeds with the right output, and launches both kernels.
 * It also waits for all the run's work (the copy of B to the host that C reads): a process that
 * exits while lavapipe or PoCL still compiles or runs a kernel can crash inside their LLVM, whose
 * lazily made statics exit() may destroy before the runtime's at-exit teardown (registered
 * earlier) waits for the device. */
void expect_next_run_right(const tally::JITModule &jit, GpuGpuCpu *app, ErrorCapture *capture) {
    const uint64_t launches = gpu_app_stats().kernel_launches;
    fill_sentinel(app->C, 0xff);
    EXPECT_EQ(app->run(jit), 0) << capture->all();
    EXPECT_TRUE(app->check());
    EXPECT_EQ(gpu_app_stats().kernel_launches, launches + 2);
}

/** A failing launch (the first, A's) fails the run with TALLY_ERROR_DEVICE_RUN_FAILED, reported
 * once by halide_<api>_run naming the kernel, and never as the sync injected after it; nothing
 * was launched, and the run freed what it allocated. */
void launch_failure_is_reported_as_the_launch(const GpuFaultApi &api) {
    auto jit = compile_app("gpu_gpu_cpu", api.target);
    GpuGpuCpu app = gpu_app();
    ErrorCapture capture;
    const int32_t live_before = api.live_buffers();
    const int64_t faults_before = tally_testing_faults_injected();
    ASSERT_EQ(tally_testing_set_fault("launch"), 0);
    EXPECT_EQ(app.run(*jit), TALLY_ERROR_DEVICE_RUN_FAILED) << capture.all();
    EXPECT_EQ(tally_testing_faults_injected(), faults_before + 1);
    std::vector<std::string> injected = capture.injected();
    ASSERT_EQ(injected.size(), 1u) << capture.all();
    EXPECT_TRUE(contains(injected[0], std::string("halide_") + api.name + "_run: kernel "))
        << injected[0];
    EXPECT_TRUE(contains(injected[0], "launch failed (injected fault)")) << injected[0];
    for (const std::string &e : capture.messages()) {
        EXPECT_FALSE(contains(e, "sync")) << "a launch failure reported as a sync: " << e;
    }
    tally_pipeline_stats ps = gpu_app_stats();
    EXPECT_EQ(ps.runs, 1u);
    EXPECT_EQ(ps.kernel_launches, 0u);
    expect_no_memory_left("gpu_gpu_cpu");
    expect_no_device_buffer_left(api, &app, live_before);

    expect_next_run_right(*jit, &app, &capture);
}

/** A failing sync (#2, the one injected after A's launch; #1 follows the copy of `input` to the
 * device) fails the run with TALLY_ERROR_DEVICE_SYNC_FAILED, reported as the sync; A was
 * launched (counted), B never was. */
void sync_failure_is_reported_as_the_sync(const GpuFaultApi &api) {
    auto jit = compile_app("gpu_gpu_cpu", api.target);
    GpuGpuCpu app = gpu_app();
    ErrorCapture capture;
    const int32_t live_before = api.live_buffers();
    ASSERT_EQ(tally_testing_set_fault("sync:2"), 0);
    EXPECT_EQ(app.run(*jit), TALLY_ERROR_DEVICE_SYNC_FAILED) << capture.all();
    std::vector<std::string> injected = capture.injected();
    ASSERT_EQ(injected.size(), 1u) << capture.all();
    EXPECT_EQ(injected[0], std::string("halide_device_sync_global: ") + api.name +
                               ": device sync failed (injected fault)");
    EXPECT_EQ(gpu_app_stats().kernel_launches, 1u);  // A was launched; its sync failed
    expect_no_memory_left("gpu_gpu_cpu");
    expect_no_device_buffer_left(api, &app, live_before);

    // The next run also waits for A, which the failed sync left in flight.
    expect_next_run_right(*jit, &app, &capture);
}

/** A failing copy of `input` to the device (the first copy) or of B to the host (C reads it on
 * the CPU) fails the run with its copy's code, reported as that copy; the copy is not counted,
 * and the launches are those issued before it (none, or A and B). */
void copy_failure_is_reported_as_the_copy(const GpuFaultApi &api, bool to_device) {
    auto jit = compile_app("gpu_gpu_cpu", api.target);
    GpuGpuCpu app = gpu_app();
    ErrorCapture capture;
    const int32_t live_before = api.live_buffers();
    ASSERT_EQ(tally_testing_set_fault(to_device ? "copy_to_device" : "copy_to_host"), 0);
    EXPECT_EQ(app.run(*jit),
              to_device ? TALLY_ERROR_COPY_TO_DEVICE_FAILED : TALLY_ERROR_COPY_TO_HOST_FAILED)
        << capture.all();
    std::vector<std::string> injected = capture.injected();
    ASSERT_EQ(injected.size(), 1u) << capture.all();
    EXPECT_EQ(injected[0], to_device ? std::string("halide_copy_to_device: ") + api.name +
                                           ": copy to device failed (injected fault)"
                                     : std::string("halide_copy_to_host: ") + api.name +
                                           ": copy to host failed (injected fault)");
    tally_pipeline_stats ps = gpu_app_stats();
    EXPECT_EQ(ps.runs, 1u);
    EXPECT_EQ(ps.kernel_launches, to_device ? 0u : 2u);
    EXPECT_EQ(to_device ? ps.copies_to_device : ps.copies_to_host, 0u);
    expect_no_memory_left("gpu_gpu_cpu");
    expect_no_device_buffer_left(api, &app, live_before);

    expect_next_run_right(*jit, &app, &capture);
    ps = gpu_app_stats();
    EXPECT_EQ(ps.copies_to_device, to_device ? 1u : 2u);
    EXPECT_EQ(ps.copies_to_host, 1u);
}

TEST_F(FaultE2E, VulkanLaunchFailureIsReportedAsTheLaunch) {
    REQUIRE_GPU(vulkan_api);
    launch_failure_is_reported_as_the_launch(vulkan_api);
}

TEST_F(FaultE2E, VulkanSyncFailureIsReportedAsTheSync) {
    REQUIRE_GPU(vulkan_api);
    sync_failure_is_reported_as_the_sync(vulkan_api);
}

/** A failing device allocation (the first: `input`'s, on its copy to the device) fails the run
 * with TALLY_ERROR_DEVICE_MALLOC_FAILED, reported as the allocation; nothing was copied or
 * launched, and nothing is left allocated. */
void allocation_failure_is_reported_as_the_allocation(const GpuFaultApi &api) {
    auto jit = compile_app("gpu_gpu_cpu", api.target);
    GpuGpuCpu app = gpu_app();
    ErrorCapture capture;
    const int32_t live_before = api.live_buffers();
    ASSERT_EQ(tally_testing_set_fault("device_malloc"), 0);
    EXPECT_EQ(app.run(*jit), TALLY_ERROR_DEVICE_MALLOC_FAILED) << capture.all();
    std::vector<std::string> injected = capture.injected();
    ASSERT_EQ(injected.size(), 1u) << capture.all();
    EXPECT_EQ(injected[0], std::string("halide_device_malloc: ") + api.name +
                               ": device allocation of 8192 bytes failed (injected fault)");
    tally_pipeline_stats ps = gpu_app_stats();
    EXPECT_EQ(ps.runs, 1u);
    EXPECT_EQ(ps.kernel_launches, 0u);
    EXPECT_EQ(ps.copies_to_device, 0u);
    expect_no_memory_left("gpu_gpu_cpu");
    expect_no_device_buffer_left(api, &app, live_before);

    expect_next_run_right(*jit, &app, &capture);
}

TEST_F(FaultE2E, OpenCLAllocationFailureIsReportedAsTheAllocation) {
    REQUIRE_GPU(opencl_api);
    allocation_failure_is_reported_as_the_allocation(opencl_api);
}

TEST_F(FaultE2E, OpenCLLaunchFailureIsReportedAsTheLaunch) {
    REQUIRE_GPU(opencl_api);
    launch_failure_is_reported_as_the_launch(opencl_api);
}

TEST_F(FaultE2E, OpenCLSyncFailureIsReportedAsTheSync) {
    REQUIRE_GPU(opencl_api);
    sync_failure_is_reported_as_the_sync(opencl_api);
}

TEST_F(FaultE2E, OpenCLCopyToDeviceFailureIsReportedAsTheCopy) {
    REQUIRE_GPU(opencl_api);
    copy_failure_is_reported_as_the_copy(opencl_api, true);
}

TEST_F(FaultE2E, OpenCLCopyToHostFailureIsReportedAsTheCopy) {
    REQUIRE_GPU(opencl_api);
    copy_failure_is_reported_as_the_copy(opencl_api, false);
}

// Halide 14's own gpu_gpu_cpu for OpenCL (test/corpus/halide14/: its kernels are OpenCL C that
// Halide wrote, kept in the text), with one kernel broken (an undeclared identifier): the first
// launch fails to build the module's program and fails the run with
// TALLY_ERROR_DEVICE_RUN_FAILED, reported once, naming the kernel and carrying the build log;
// nothing was launched and the run freed what it allocated. The text unbroken then runs on the
// same input, its output that of Tally's own kernels for the statement before Halide's offload.
TEST_F(FaultE2E, OpenCLKernelBuildFailureReportsTheBuildLog) {
    REQUIRE_GPU(opencl_api);
    const std::string corpus = TALLY_CORPUS_DIR;
    const std::string text = read_file(corpus + "/gpu_gpu_cpu.opencl.stmt");
    const std::string line = "float _13 = _input[_12];";
    const size_t at = text.find(line);
    ASSERT_NE(at, std::string::npos);
    std::string broken = text;
    broken.replace(at, line.size(), "float _13 = _input[_12] + undefined_in_fault_test;");
    const tally::Target target = tally::Target::parse("host-opencl-profile");
    auto broken_jit = tally::compile_jit(tally::lower(tally::parse_module(broken), target));
    auto jit = tally::compile_jit(tally::lower(tally::parse_module(text), target));
    auto tally_jit = tally::compile_jit(tally::lower(
        tally::parse_module_file(corpus + "/preoffload/gpu_gpu_cpu.opencl.stmt"), target));

    const int w = 48, h = 40;
    Buffer<float> input({w + 2, h + 2}, {-1, -1}), out({w, h});
    Rng rng(5);
    for (size_t i = 0; i < input.size(); i++) {
        input[i] = rng.uniform(-1.0f, 1.0f);
    }
    ErrorCapture capture;
    const int32_t live_before = tally_testing_opencl_live_buffers();
    input.set_host_dirty();
    EXPECT_EQ(broken_jit->call({input, out}), TALLY_ERROR_DEVICE_RUN_FAILED);
    std::vector<std::string> errors = capture.messages();
    ASSERT_EQ(errors.size(), 1u) << capture.all();
    for (const char *part :
         {"halide_opencl_run: kernel '_kernel_A_s0_y_yo___block_id_y': building its OpenCL C "
          "source for '",
          "CL_BUILD_PROGRAM_FAILURE", "build log:", "undefined_in_fault_test"}) {
        EXPECT_TRUE(contains(errors[0], part)) << part << "\n" << errors[0];
    }
    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats("C", &ps), 0);
    EXPECT_EQ(ps.runs, 1u);
    EXPECT_EQ(ps.kernel_launches, 0u);
    expect_no_memory_left("C");
    EXPECT_EQ(input.device_free(), 0);
    EXPECT_EQ(tally_testing_opencl_live_buffers(), live_before);

    input.set_host_dirty();
    ASSERT_EQ(tally_jit->call({input, out}), 0) << capture.all();
    const std::vector<float> want = out.to_vector();
    fill_sentinel(out, 0xff);
    input.set_host_dirty();
    EXPECT_EQ(jit->call({input, out}), 0) << capture.all();
    EXPECT_TRUE(close_floats(out.to_vector(), want));
    EXPECT_NE(*std::min_element(want.begin(), want.end()),
              *std::max_element(want.begin(), want.end()));
    ASSERT_EQ(tally_profiler_get_pipeline_stats("C", &ps), 0);
    EXPECT_EQ(ps.kernel_launches, 4u);  // A and B, by each good run
    EXPECT_EQ(capture.messages().size(), 1u) << capture.all();
}

// Rounds of every kind of failure, each followed by a good run, leak nothing: once the caller
// frees its input's device copy, no OpenCL allocation is left; the frees the failed syncs had to
// defer (A's, behind its launch) were all released by the time halide_device_release returns;
// the profiler counted each launch issued and no other. A good run after the release (OpenCL
// initialized again) is right.
TEST_F(FaultE2E, OpenCLRepeatedFailuresLeakNothing) {
    REQUIRE_GPU(opencl_api);
    auto jit = compile_app("gpu_gpu_cpu", opencl_api.target);
    GpuGpuCpu app = gpu_app();
    ErrorCapture capture;
    const int32_t live_before = tally_testing_opencl_live_buffers();
    tally_device_wait_stats before{};
    tally_device_get_wait_stats(&before);
    struct Failure {
        const char *fault;
        int32_t code;
        uint64_t launches;
    };
    const Failure failures[] = {
        {"launch", TALLY_ERROR_DEVICE_RUN_FAILED, 0},
        {"sync:2", TALLY_ERROR_DEVICE_SYNC_FAILED, 1},
        {"copy_to_device", TALLY_ERROR_COPY_TO_DEVICE_FAILED, 0},
        {"copy_to_host", TALLY_ERROR_COPY_TO_HOST_FAILED, 2},
        {"device_malloc", TALLY_ERROR_DEVICE_MALLOC_FAILED, 0},
    };
    const int rounds = 3;
    uint64_t launches = 0, runs = 0;
    for (int round = 0; round < rounds; round++) {
        for (const Failure &f : failures) {
            SCOPED_TRACE(std::string(f.fault) + ", round " + std::to_string(round));
            ASSERT_EQ(tally_testing_set_fault(f.fault), 0);
            EXPECT_EQ(app.run(*jit), f.code) << capture.all();
            launches += f.launches;
            EXPECT_EQ(gpu_app_stats().kernel_launches, launches);
            expect_next_run_right(*jit, &app, &capture);
            launches += 2;
            runs += 2;
        }
    }
    EXPECT_EQ(capture.injected().size(), size_t(rounds) * std::size(failures)) << capture.all();
    tally_pipeline_stats ps = gpu_app_stats();
    EXPECT_EQ(ps.runs, runs);
    EXPECT_EQ(ps.kernel_launches, launches);
    expect_no_memory_left("gpu_gpu_cpu");
    EXPECT_EQ(tally_testing_opencl_live_buffers(), live_before + 1) << "input's device copy";
    EXPECT_EQ(app.input.device_free(), 0);
    EXPECT_EQ(tally_testing_opencl_live_buffers(), live_before);

    ASSERT_EQ(halide_device_release(nullptr, halide_opencl_device_interface()), 0);
    tally_device_wait_stats after{};
    tally_device_get_wait_stats(&after);
    EXPECT_GE(after.deferred_frees - before.deferred_frees, uint64_t(rounds))
        << "each failed sync left A's launch in flight when the run freed A";
    EXPECT_EQ(after.deferred_frees_released - before.deferred_frees_released,
              after.deferred_frees - before.deferred_frees);

    expect_next_run_right(*jit, &app, &capture);
    EXPECT_EQ(app.input.device_free(), 0);
    EXPECT_EQ(tally_testing_opencl_live_buffers(), live_before);
}

int opencl_child() {
    auto jit = compile_app("gpu_gpu_cpu", "host-opencl-profile");
    GpuGpuCpu app = gpu_app();
    const int rc = app.run(*jit);
    (void)app.input.device_free();
    (void)app.C.device_free();
    std::printf("child result %s\nlive %d\n", tally_error_code_name(rc),
                (int)tally_testing_opencl_live_buffers());
    std::fflush(stdout);
    jit.reset();
    return rc == 0 ? 0 : 1;
}

// Each OpenCL failure in a process of its own, armed by the environment as a user would
// (TALLY_FAULT), and OpenCL with no platform at all (OCL_ICD_VENDORS naming an empty place): the
// run fails with the failure's own code, the message names what failed, the report still prints
// at exit with the run counted, and no device allocation is left.
TEST_F(FaultE2E, OpenCLFailuresInAProcessStillPrintTheReport) {
    REQUIRE_GPU(opencl_api);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ASSERT_GT(n, 0);
    exe[n] = '\0';
    char tmpl[] = "/tmp/tally_e2e_fault_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    struct Case {
        const char *env, *code, *message;
    };
    const Case cases[] = {
        {"TALLY_FAULT=device_malloc", "ERROR_DEVICE_MALLOC_FAILED",
         "halide_device_malloc: opencl: device allocation of 8192 bytes failed (injected fault)"},
        {"TALLY_FAULT=copy_to_device", "ERROR_COPY_TO_DEVICE_FAILED",
         "halide_copy_to_device: opencl: copy to device failed (injected fault)"},
        {"TALLY_FAULT=launch", "ERROR_DEVICE_RUN_FAILED", "launch failed (injected fault)"},
        {"TALLY_FAULT=sync:2", "ERROR_DEVICE_SYNC_FAILED",
         "halide_device_sync_global: opencl: device sync failed (injected fault)"},
        {"TALLY_FAULT=copy_to_host", "ERROR_COPY_TO_HOST_FAILED",
         "halide_copy_to_host: opencl: copy to host failed (injected fault)"},
        {"OCL_ICD_VENDORS=/nonexistent", "ERROR_NO_DEVICE_INTERFACE",
         "OpenCL is not available: no OpenCL platform"},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.env);
        const std::string cmd = std::string("env -u TALLY_PROFILE_OUTPUT -u TALLY_PROFILE_JSON ") +
                                "TALLY_FAULT_E2E_CHILD=opencl " + c.env + " '" + exe + "' >'" +
                                dir + "/out' 2>'" + dir + "/err'";
        const int status = std::system(cmd.c_str());
        const std::string out = read_file(dir + "/out"), err = read_file(dir + "/err");
        ASSERT_TRUE(WIFEXITED(status)) << err;
        EXPECT_EQ(WEXITSTATUS(status), 1) << out << err;
        EXPECT_TRUE(contains(out, std::string("child result ") + c.code + "\n")) << out;
        EXPECT_TRUE(contains(out, "live 0\n")) << out;
        EXPECT_TRUE(contains(err, c.message)) << err;
        const size_t report = err.find("pipeline: gpu_gpu_cpu\n");
        ASSERT_NE(report, std::string::npos) << err;
        EXPECT_TRUE(contains(err.substr(report), "  runs:             1\n")) << err;
        EXPECT_TRUE(contains(err.substr(report), "copies to host")) << err;
    }
    (void)std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace
}  // namespace tally_e2e
