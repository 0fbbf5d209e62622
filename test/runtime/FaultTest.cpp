// Fault injection (runtime/src/core/fault.c): TALLY_FAULT=<op>[:<n>], or tally_testing_set_fault
// in-process, makes the n-th operation of a kind fail. For each operation: the right negative
// code, a message naming the entry point that failed and "(injected fault)", the buffer's state
// left as it was (nothing allocated, copied or marked), exactly one failure (the next call works),
// and no leak (the AddressSanitizer job runs this binary with detect_leaks=1). Then a simulated
// profiled run whose second allocation fails: its memory accounting returns to 0, and, in a child
// process armed through the environment, the report still prints at exit.
//
// Fault injection is process-wide state: every test disarms it on entry and exit.
#include "Json.h"
#include "TestUtil.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using tally_test::MessageCapture;

bool contains(const std::string &s, const std::string &part) {
    return s.find(part) != std::string::npos;
}

// The one error message that names the injected fault, or "" if there is not exactly one.
std::string injected_message(MessageCapture &capture) {
    std::string found;
    int n = 0;
    for (const std::string &e : capture.errors()) {
        if (contains(e, "(injected fault)")) {
            found = e;
            n++;
        }
    }
    return n == 1 ? found : std::string();
}

// A 2-D uint8 buffer of 16x4 elements over its own host memory.
struct HostBuffer {
    std::vector<uint8_t> data = std::vector<uint8_t>(64, 7);
    halide_dimension_t dims[2] = {{0, 16, 1, 0}, {0, 4, 16, 0}};
    halide_buffer_t buf{};
    HostBuffer() {
        buf.host = data.data();
        buf.type = halide_type_t{halide_type_uint, 8, 1};
        buf.dimensions = 2;
        buf.dim = dims;
    }
    ~HostBuffer() { (void)halide_device_free(nullptr, &buf); }
};

class Fault : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_EQ(tally_testing_set_fault(nullptr), 0); }
    void TearDown() override { ASSERT_EQ(tally_testing_set_fault(nullptr), 0); }
};

TEST_F(Fault, MallocReturnsNullOnceAndNamesHalideMalloc) {
    MessageCapture capture;
    int64_t before = tally_testing_faults_injected();
    ASSERT_EQ(tally_testing_set_fault("malloc"), 0);
    EXPECT_EQ(halide_malloc(nullptr, 100), nullptr);
    EXPECT_EQ(injected_message(capture),
              "halide_malloc: out of memory allocating 100 bytes (injected fault)");
    EXPECT_EQ(tally_testing_faults_injected(), before + 1);
    // Only the first one fails.
    void *p = halide_malloc(nullptr, 100);
    EXPECT_NE(p, nullptr);
    halide_free(nullptr, p);
    EXPECT_EQ(tally_testing_faults_injected(), before + 1);
}

TEST_F(Fault, TheNthCallFailsAndOnlyIt) {
    MessageCapture capture;
    ASSERT_EQ(tally_testing_set_fault("malloc:3"), 0);
    std::vector<void *> ptrs;
    for (int i = 1; i <= 5; i++) {
        void *p = halide_malloc(nullptr, size_t(i));
        EXPECT_EQ(p == nullptr, i == 3) << "call " << i;
        ptrs.push_back(p);
    }
    for (void *p : ptrs) {
        halide_free(nullptr, p);
    }
    EXPECT_EQ(injected_message(capture),
              "halide_malloc: out of memory allocating 3 bytes (injected fault)");
}

TEST_F(Fault, OtherOperationsAreNotCounted) {
    MessageCapture capture;
    ASSERT_EQ(tally_testing_set_fault("sync:2"), 0);
    // Mallocs and copies do not advance the sync count.
    for (int i = 0; i < 3; i++) {
        void *p = halide_malloc(nullptr, 8);
        ASSERT_NE(p, nullptr);
        halide_free(nullptr, p);
    }
    const halide_device_interface_t *host = halide_host_device_interface();
    EXPECT_EQ(halide_device_sync_global(nullptr, host), 0);
    EXPECT_EQ(halide_device_sync_global(nullptr, host), TALLY_ERROR_DEVICE_SYNC_FAILED);
    EXPECT_EQ(halide_device_sync_global(nullptr, host), 0);
    EXPECT_EQ(injected_message(capture),
              "halide_device_sync_global: host: device sync failed (injected fault)");
}

TEST_F(Fault, DeviceMallocFailsWithoutAllocating) {
    MessageCapture capture;
    HostBuffer b;
    ASSERT_EQ(tally_testing_set_fault("device_malloc"), 0);
    EXPECT_EQ(halide_device_malloc(nullptr, &b.buf, halide_host_device_interface()),
              TALLY_ERROR_DEVICE_MALLOC_FAILED);
    EXPECT_EQ(injected_message(capture), "halide_device_malloc: host: device allocation of 64 "
                                         "bytes failed (injected fault)");
    EXPECT_EQ(b.buf.device, 0u);
    EXPECT_EQ(b.buf.device_interface, nullptr);
    // The next one works.
    EXPECT_EQ(halide_device_malloc(nullptr, &b.buf, halide_host_device_interface()), 0);
    EXPECT_NE(b.buf.device, 0u);
}

TEST_F(Fault, DeviceAndHostMallocFreesTheHostItAllocated) {
    MessageCapture capture;
    HostBuffer b;
    b.buf.host = nullptr;
    ASSERT_EQ(tally_testing_set_fault("device_malloc"), 0);
    EXPECT_EQ(halide_device_and_host_malloc(nullptr, &b.buf, halide_host_device_interface()),
              TALLY_ERROR_DEVICE_MALLOC_FAILED);
    // The host allocation made first was released (LeakSanitizer would see it otherwise).
    EXPECT_EQ(b.buf.host, nullptr);
    EXPECT_EQ(b.buf.device, 0u);
    EXPECT_NE(injected_message(capture), "");
}

TEST_F(Fault, MallocInsideTheHostDeviceInterfaceIsADeviceMallocFailure) {
    MessageCapture capture;
    HostBuffer b;
    ASSERT_EQ(tally_testing_set_fault("malloc"), 0);
    EXPECT_EQ(halide_device_malloc(nullptr, &b.buf, halide_host_device_interface()),
              TALLY_ERROR_DEVICE_MALLOC_FAILED);
    EXPECT_EQ(injected_message(capture),
              "halide_malloc: out of memory allocating 64 bytes (injected fault)");
    EXPECT_EQ(b.buf.device, 0u);
}

TEST_F(Fault, CopyToDeviceFailsAndKeepsHostDirty) {
    MessageCapture capture;
    HostBuffer b;
    tally_buffer_set_host_dirty(&b.buf, true);
    ASSERT_EQ(tally_testing_set_fault("copy_to_device"), 0);
    EXPECT_EQ(halide_copy_to_device(nullptr, &b.buf, halide_host_device_interface()),
              TALLY_ERROR_COPY_TO_DEVICE_FAILED);
    EXPECT_EQ(injected_message(capture),
              "halide_copy_to_device: host: copy to device failed (injected fault)");
    EXPECT_TRUE(tally_buffer_get_host_dirty(&b.buf));
    // Retrying copies and clears the bit.
    EXPECT_EQ(halide_copy_to_device(nullptr, &b.buf, halide_host_device_interface()), 0);
    EXPECT_FALSE(tally_buffer_get_host_dirty(&b.buf));
    EXPECT_EQ(std::memcmp(reinterpret_cast<void *>(uintptr_t(b.buf.device)), b.data.data(), 64), 0);
}

TEST_F(Fault, CopyToHostFailsAndKeepsDeviceDirty) {
    MessageCapture capture;
    HostBuffer b;
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, halide_host_device_interface()), 0);
    std::memset(reinterpret_cast<void *>(uintptr_t(b.buf.device)), 9, 64);
    tally_buffer_set_device_dirty(&b.buf, true);
    ASSERT_EQ(tally_testing_set_fault("copy_to_host"), 0);
    EXPECT_EQ(halide_copy_to_host(nullptr, &b.buf), TALLY_ERROR_COPY_TO_HOST_FAILED);
    EXPECT_EQ(injected_message(capture),
              "halide_copy_to_host: host: copy to host failed (injected fault)");
    EXPECT_TRUE(tally_buffer_get_device_dirty(&b.buf));
    EXPECT_EQ(b.data[0], 7);  // nothing copied
    EXPECT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    EXPECT_FALSE(tally_buffer_get_device_dirty(&b.buf));
    EXPECT_EQ(b.data[63], 9);
}

TEST_F(Fault, CopiesWithNothingToDoAreNotCounted) {
    HostBuffer b;
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, halide_host_device_interface()), 0);
    ASSERT_EQ(tally_testing_set_fault("copy_to_host"), 0);
    // Not device-dirty: no copy, nothing counted.
    EXPECT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    tally_buffer_set_device_dirty(&b.buf, true);
    MessageCapture capture;
    EXPECT_EQ(halide_copy_to_host(nullptr, &b.buf), TALLY_ERROR_COPY_TO_HOST_FAILED);
    EXPECT_NE(injected_message(capture), "");
}

TEST_F(Fault, DeviceSyncFails) {
    MessageCapture capture;
    HostBuffer b;
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, halide_host_device_interface()), 0);
    ASSERT_EQ(tally_testing_set_fault("sync"), 0);
    EXPECT_EQ(halide_device_sync(nullptr, &b.buf), TALLY_ERROR_DEVICE_SYNC_FAILED);
    EXPECT_EQ(injected_message(capture),
              "halide_device_sync: host: device sync failed (injected fault)");
    EXPECT_EQ(halide_device_sync(nullptr, &b.buf), 0);
}

// The launch fault applies to the GPU back ends' run entry points (the host interface has no
// launches). It must be reported by the launch, and never by a sync.
void expect_launch_fault(const halide_device_interface_t *iface,
                         int32_t (*run)(void *, void *, const char *, int32_t, int32_t, int32_t,
                                        int32_t, int32_t, int32_t, int32_t, const int64_t *,
                                        void **, const uint8_t *),
                         const std::string &routine) {
    MessageCapture capture;
    ASSERT_EQ(tally_testing_set_fault("launch"), 0);
    EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);  // a sync is not a launch
    int64_t sizes[] = {0};
    void *args[] = {nullptr};
    uint8_t is_buffer[] = {0};
    // No kernel table: only the injected fault can make this particular error.
    EXPECT_EQ(run(nullptr, nullptr, "kern", 1, 1, 1, 1, 1, 1, 0, sizes, args, is_buffer),
              TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_EQ(injected_message(capture), routine + ": kernel kern: launch failed (injected fault)");
    EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);
}

TEST_F(Fault, LaunchFailsInVulkanRun) {
    const halide_device_interface_t *vk = halide_vulkan_device_interface();
    if (!vk) {
        GTEST_SKIP() << "no Vulkan device (halide_vulkan_device_interface() is NULL)";
    }
    expect_launch_fault(vk, halide_vulkan_run, "halide_vulkan_run");
}

TEST_F(Fault, LaunchFailsInCudaRun) {
    const halide_device_interface_t *cuda = halide_cuda_device_interface();
    if (!cuda) {
        GTEST_SKIP() << "no CUDA device (halide_cuda_device_interface() is NULL)";
    }
    expect_launch_fault(cuda, halide_cuda_run, "halide_cuda_run");
}

TEST_F(Fault, BadSpecsAreRejectedAndDisarm) {
    for (const char *spec : {"mallocc", "malloc:", "malloc:0", "malloc:-1", "malloc:2x", ":3",
                             "launch:1:2", "MALLOC"}) {
        MessageCapture capture;
        EXPECT_EQ(tally_testing_set_fault(spec), TALLY_ERROR_BAD_ARGUMENT) << spec;
        ASSERT_EQ(capture.errors().size(), 1u) << spec;
        EXPECT_TRUE(contains(capture.errors()[0], spec)) << capture.errors()[0];
        void *p = halide_malloc(nullptr, 1);  // disarmed
        EXPECT_NE(p, nullptr) << spec;
        halide_free(nullptr, p);
    }
}

TEST_F(Fault, ExactlyOneFailureAcrossThreads) {
    ASSERT_EQ(tally_testing_set_fault("malloc:500"), 0);
    MessageCapture capture;
    struct Task {
        static int32_t run(void *, int32_t, uint8_t *closure) {
            auto *failures = reinterpret_cast<std::atomic<int> *>(closure);
            for (int i = 0; i < 100; i++) {
                void *p = halide_malloc(nullptr, 16);
                if (!p) {
                    failures->fetch_add(1);
                }
                halide_free(nullptr, p);
            }
            return 0;
        }
    };
    std::atomic<int> failures{0};
    ASSERT_EQ(halide_do_par_for(nullptr, Task::run, 0, 16, reinterpret_cast<uint8_t *>(&failures)),
              0);
    EXPECT_EQ(failures.load(), 1);
    EXPECT_NE(injected_message(capture), "");
}

// ---- a simulated profiled pipeline ----------------------------------------------------------

const char *const kSlots[] = {"overhead", "first", "second", "third"};

// What generated code does for three stages that each allocate 1000 * slot bytes: allocate, count
// the allocation, work, and on every exit (errors included) free what is live, count the frees
// and end the run. Returns the pipeline's result.
int32_t simulated_pipeline(const char *name) {
    void *inst =
        tally_profiler_start(nullptr, name, "host-profile", 4, kSlots, nullptr, nullptr, 0);
    if (!inst) {
        return -1;
    }
    int32_t result = 0;
    void *live[4] = {nullptr, nullptr, nullptr, nullptr};
    for (int32_t slot = 1; slot <= 3 && result == 0; slot++) {
        tally_profiler_set_current(inst, slot);
        live[slot] = halide_malloc(nullptr, size_t(1000 * slot));
        if (!live[slot]) {
            result = halide_error_out_of_memory(nullptr);
            break;
        }
        tally_profiler_memory_allocate(inst, slot, TALLY_MEMORY_HEAP, uint64_t(1000 * slot));
        std::memset(live[slot], slot, size_t(1000 * slot));
    }
    for (int32_t slot = 3; slot >= 1; slot--) {
        if (live[slot]) {
            tally_profiler_memory_free(inst, slot, TALLY_MEMORY_HEAP, uint64_t(1000 * slot));
            halide_free(nullptr, live[slot]);
        }
    }
    tally_profiler_end(nullptr, inst);
    return result;
}

class FaultProfiled : public tally_test::ProfilerTest {
protected:
    void SetUp() override {
        tally_test::ProfilerTest::SetUp();
        ASSERT_EQ(tally_testing_set_fault(nullptr), 0);
    }
    void TearDown() override {
        ASSERT_EQ(tally_testing_set_fault(nullptr), 0);
        tally_test::ProfilerTest::TearDown();
    }
};

TEST_F(FaultProfiled, FailedRunLeavesMemoryAccountingAtZero) {
    MessageCapture capture;
    ASSERT_EQ(tally_testing_set_fault("malloc:2"), 0);
    EXPECT_EQ(simulated_pipeline("faulty"), TALLY_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(injected_message(capture),
              "halide_malloc: out of memory allocating 2000 bytes (injected fault)");
    EXPECT_EQ(tally_testing_live_instances(), 0);
    // A second run works and adds to the same totals.
    EXPECT_EQ(simulated_pipeline("faulty"), 0);

    tally_pipeline_stats ps = tally_test::pipeline_stats("faulty");
    EXPECT_EQ(ps.runs, 2u);
    EXPECT_EQ(ps.heap_peak, 6000u);
    const uint64_t allocs[] = {0, 2, 1, 1};
    for (int32_t s = 0; s < 4; s++) {
        tally_slot_stats ss = tally_test::slot_stats("faulty", s);
        SCOPED_TRACE(ss.name);
        EXPECT_EQ(ss.heap.current, 0);
        EXPECT_EQ(ss.heap.num_allocs, allocs[s]);
        EXPECT_EQ(ss.heap.total_bytes, allocs[s] * 1000u * uint64_t(s));
    }
}

// ---- the report at exit, in a child process armed through the environment -------------------

// The child: started as `TALLY_FAULT_TEST_CHILD=1 runtime_fault_tests`, the binary runs the
// simulated pipeline once before main (so GoogleTest never runs), armed by TALLY_FAULT from the
// environment, and exits (running the at-exit report) with 1 if the run failed.
struct ChildMode {
    ChildMode() {
        if (!std::getenv("TALLY_FAULT_TEST_CHILD")) {
            return;
        }
        int32_t r = simulated_pipeline("child_pipeline");
        std::printf("child result %d\n", int(r));
        std::fflush(stdout);
        std::exit(r == 0 ? 0 : 1);
    }
} child_mode;

std::string self_path() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) {
        return std::string();
    }
    buf[n] = '\0';
    return buf;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class FaultExit : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/tally_fault_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::string cmd = "rm -rf '" + dir_ + "'";
        (void)std::system(cmd.c_str());
    }
    // Runs the child with TALLY_FAULT=fault; returns its exit status and captures its output.
    int run_child(const std::string &fault) {
        std::string cmd = "env -u TALLY_PROFILE_OUTPUT TALLY_FAULT_TEST_CHILD=1 TALLY_FAULT='" +
                          fault + "' TALLY_PROFILE_JSON='" + dir_ + "/report.json' '" +
                          self_path() + "' >'" + dir_ + "/out' 2>'" + dir_ + "/err'";
        int status = std::system(cmd.c_str());
        out_ = read_file(dir_ + "/out");
        err_ = read_file(dir_ + "/err");
        json_ = read_file(dir_ + "/report.json");
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::string dir_, out_, err_, json_;
};

TEST_F(FaultExit, ReportPrintsAfterAnInjectedMallocFailure) {
    ASSERT_EQ(run_child("malloc:2"), 1) << out_ << err_;
    EXPECT_TRUE(contains(out_, "child result -11")) << out_;
    EXPECT_TRUE(contains(
        err_, "Error: halide_malloc: out of memory allocating 2000 bytes (injected fault)\n"))
        << err_;
    EXPECT_TRUE(contains(err_, "pipeline: child_pipeline\n")) << err_;
    EXPECT_TRUE(contains(err_, "  runs:             1\n")) << err_;
    EXPECT_TRUE(contains(err_, "  heap peak:        1000 bytes\n")) << err_;
    // Every slot listed, and no memory left current.
    for (const char *slot : {"    overhead ", "    first ", "    second ", "    third "}) {
        EXPECT_TRUE(contains(err_, slot)) << slot << "\n" << err_;
    }
    tally_test::Json root;
    std::string error;
    ASSERT_TRUE(tally_test::JsonParser(json_).parse(&root, &error)) << error << json_;
    const tally_test::Json &p = root["pipelines"][0];
    EXPECT_EQ(p["name"].str, "child_pipeline");
    ASSERT_EQ(p["slots"].items.size(), 4u) << json_;
    for (size_t s = 0; s < 4; s++) {
        EXPECT_EQ(p["slots"][s]["heap"]["current"].number, 0) << json_;
        EXPECT_EQ(p["slots"][s]["heap"]["allocs"].number, s == 1 ? 1 : 0) << json_;
    }
}

TEST_F(FaultExit, NoFaultMeansACleanRun) {
    ASSERT_EQ(run_child(""), 0) << out_ << err_;
    EXPECT_TRUE(contains(err_, "pipeline: child_pipeline\n")) << err_;
    EXPECT_FALSE(contains(err_, "injected fault")) << err_;
}

TEST_F(FaultExit, BadEnvironmentSpecIsReportedAndIgnored) {
    ASSERT_EQ(run_child("malloc:zero"), 0) << out_ << err_;
    EXPECT_TRUE(contains(err_, "tally: warning: TALLY_FAULT=malloc:zero: expected <op>[:<n>] with "
                               "op one of malloc, device_malloc, copy_to_host, copy_to_device, "
                               "launch, sync and n >= 1; using no fault injection\n"))
        << err_;
    EXPECT_TRUE(contains(err_, "pipeline: child_pipeline\n")) << err_;
}

}  // namespace
