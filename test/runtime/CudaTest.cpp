// The CUDA device interface (runtime/src/device/cuda/) without a GPU.
//
// The interface loads the driver once per process, so each suite runs in its own process with
// the environment ctest gives it (test/runtime/CMakeLists.txt); run by hand, a suite whose
// environment is not set up skips and says what it needs.
//   CudaNoDriver     TALLY_CUDA_LIBRARY=/nonexistent/libcuda.so.1: no driver library at all
//   CudaNoDevice     TALLY_CUDA_LIBRARY=<fake driver>, FAKE_CUDA_DEVICES=0: a driver, no device
//   CudaFakeDriver   TALLY_CUDA_LIBRARY=<fake driver>: allocation, copies, launches, caching,
//                    syncs, release and error paths against cuda_fake_driver.c
//   CudaThisMachine  no override: on a machine without libcuda, the same as CudaNoDriver

#include "Json.h"
#include "TestUtil.h"
#include "cuda_fake_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool contains(const std::vector<std::string> &messages, const std::string &what) {
    for (const std::string &m : messages) {
        if (m.find(what) != std::string::npos) {
            return true;
        }
    }
    return false;
}

std::string joined(const std::vector<std::string> &messages) {
    std::string s;
    for (const std::string &m : messages) {
        s += "[" + m + "] ";
    }
    return s;
}

std::string env(const char *name) {
    const char *v = std::getenv(name);
    return v ? v : "";
}

/** A dense 1-D int32 buffer over `data`. */
struct IntBuffer {
    std::vector<int32_t> data;
    halide_dimension_t dim{0, 0, 1, 0};
    halide_buffer_t buf{};
    explicit IntBuffer(int n, int32_t fill = 0) : data(n, fill) {
        dim.extent = n;
        buf.host = reinterpret_cast<uint8_t *>(data.data());
        buf.type = {halide_type_int, 32, 1};
        buf.dimensions = 1;
        buf.dim = &dim;
    }
};

/** One PTX "module" per kernel, as the compiler embeds them (the fake only reads the entry). */
struct Table {
    std::vector<std::string> names, ptx;
    std::vector<tally_kernel_source> sources;
    tally_kernel_table table{};
    /** (name, number of arguments) per kernel. */
    explicit Table(const std::vector<std::pair<std::string, int>> &kernels) {
        for (const auto &k : kernels) {
            names.push_back(k.first);
            ptx.push_back(".version 6.3\n.target sm_75\n.address_size 64\n.visible .entry " +
                          k.first + "(\n)\n{\n}\n");
        }
        for (size_t i = 0; i < kernels.size(); i++) {
            tally_kernel_source s{};
            s.name = names[i].c_str();
            s.code = reinterpret_cast<const uint8_t *>(ptx[i].c_str());
            s.code_size = ptx[i].size();
            s.device_api = TALLY_DEVICE_API_CUDA;
            s.num_args = kernels[i].second;
            s.num_buffers = 1;
            sources.push_back(s);
        }
        table.abi_version = TALLY_RUNTIME_ABI_VERSION;
        table.num_kernels = int32_t(sources.size());
        table.kernels = sources.data();
    }
    Table(const Table &) = delete;
    Table &operator=(const Table &) = delete;
};

/** Launches `fill(out, value, n)` on `blocks` x 32 threads. */
int32_t run_fill(Table &t, const char *name, halide_buffer_t *out, int32_t value, int32_t n,
                 int32_t blocks) {
    int64_t sizes[] = {8, 4, 4, 0};
    void *args[] = {out, &value, &n, nullptr};
    uint8_t is_buffer[] = {1, 0, 0, 0};
    return halide_cuda_run(nullptr, &t.table, name, blocks, 1, 1, 32, 1, 1, 0, sizes, args,
                           is_buffer);
}

/** What every suite checks when CUDA is unusable: a NULL interface that says why once, a launch
 * that fails with TALLY_ERROR_NO_DEVICE_INTERFACE and the reason, and buffer calls on the NULL
 * interface that fail cleanly. */
void expect_unusable(const std::string &reason, const std::string &warning = "") {
    tally_test::MessageCapture capture;
    EXPECT_EQ(halide_cuda_device_interface(), nullptr);
    EXPECT_EQ(capture.printed(), warning);
    EXPECT_TRUE(contains(capture.errors(), reason)) << joined(capture.errors());
    size_t reported = capture.errors().size();
    // The interface says why only once.
    EXPECT_EQ(halide_cuda_device_interface(), nullptr);
    EXPECT_EQ(capture.errors().size(), reported) << joined(capture.errors());

    Table t({{"fill", 3}});
    IntBuffer b(8);
    EXPECT_EQ(run_fill(t, "fill", &b.buf, 1, 8, 1), TALLY_ERROR_NO_DEVICE_INTERFACE);
    ASSERT_GT(capture.errors().size(), reported);
    EXPECT_NE(capture.errors().back().find("halide_cuda_run"), std::string::npos)
        << capture.errors().back();
    EXPECT_NE(capture.errors().back().find(reason), std::string::npos) << capture.errors().back();
    // Each launch reports again: the pipeline's failure names its cause.
    EXPECT_EQ(run_fill(t, "fill", &b.buf, 1, 8, 1), TALLY_ERROR_NO_DEVICE_INTERFACE);

    EXPECT_EQ(halide_device_malloc(nullptr, &b.buf, halide_cuda_device_interface()),
              TALLY_ERROR_NO_DEVICE_INTERFACE);
    tally_buffer_set_host_dirty(&b.buf, true);
    EXPECT_EQ(halide_copy_to_device(nullptr, &b.buf, halide_cuda_device_interface()),
              TALLY_ERROR_NO_DEVICE_INTERFACE);
    EXPECT_EQ(b.buf.device, 0u);
    EXPECT_EQ(b.buf.device_interface, nullptr);
    EXPECT_EQ(halide_device_sync_global(nullptr, halide_cuda_device_interface()),
              TALLY_ERROR_NO_DEVICE_INTERFACE);
}

// ---- no driver --------------------------------------------------------------------------------

class CudaNoDriver : public ::testing::Test {
protected:
    void SetUp() override {
        if (env("TALLY_CUDA_LIBRARY").find("/nonexistent/") == std::string::npos) {
            GTEST_SKIP() << "run through ctest (runtime.cuda.no_driver): needs "
                            "TALLY_CUDA_LIBRARY=/nonexistent/libcuda.so.1";
        }
    }
};

TEST_F(CudaNoDriver, InterfaceIsNullAndLaunchesFailNamingLibcuda) {
    expect_unusable("libcuda.so.1 not found");
}

// ---- a driver without a device ----------------------------------------------------------------

class CudaNoDevice : public ::testing::Test {
protected:
    void SetUp() override {
        if (env("TALLY_CUDA_LIBRARY") != TALLY_CUDA_FAKE_DRIVER ||
            env("FAKE_CUDA_DEVICES") != "0") {
            GTEST_SKIP() << "run through ctest (runtime.cuda.no_device): needs "
                            "TALLY_CUDA_LIBRARY=" TALLY_CUDA_FAKE_DRIVER " FAKE_CUDA_DEVICES=0";
        }
    }
};

TEST_F(CudaNoDevice, InterfaceIsNullAndLaunchesFailNamingTheMissingDevice) {
    expect_unusable("no CUDA device");
}

// ---- a device index that is not a number ------------------------------------------------------

class CudaBadDeviceIndex : public ::testing::Test {
protected:
    void SetUp() override {
        if (env("TALLY_CUDA_LIBRARY") != TALLY_CUDA_FAKE_DRIVER ||
            env("TALLY_CUDA_DEVICE") != "1x") {
            GTEST_SKIP() << "run through ctest (runtime.cuda.bad_device): needs "
                            "TALLY_CUDA_LIBRARY=" TALLY_CUDA_FAKE_DRIVER " TALLY_CUDA_DEVICE=1x";
        }
    }
};

// "1x" is not read as device 1 (nor "abc" as device 0): CUDA is unusable, and says why.
TEST_F(CudaBadDeviceIndex, InterfaceIsNullAndLaunchesFailNamingTheValue) {
    expect_unusable("TALLY_CUDA_DEVICE=1x is not a device index",
                    "tally: warning: TALLY_CUDA_DEVICE=1x: expected a whole number from 0 to "
                    "2147483647; using no CUDA device: CUDA is not available\n");
}

// ---- the fake driver ----------------------------------------------------------------------------

class CudaFakeDriver : public ::testing::Test {
protected:
    const fake_cuda_stats *stats = nullptr;
    const halide_device_interface_t *iface = nullptr;

    void SetUp() override {
        if (env("TALLY_CUDA_LIBRARY") != TALLY_CUDA_FAKE_DRIVER ||
            !env("FAKE_CUDA_DEVICES").empty()) {
            GTEST_SKIP() << "run through ctest (runtime.cuda.fake_driver): needs "
                            "TALLY_CUDA_LIBRARY=" TALLY_CUDA_FAKE_DRIVER;
        }
        // The same path gives the same handle the runtime opened.
        void *lib = dlopen(TALLY_CUDA_FAKE_DRIVER, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(lib, nullptr) << dlerror();
        auto get = reinterpret_cast<fake_cuda_get_stats_fn>(dlsym(lib, "fake_cuda_get_stats"));
        ASSERT_NE(get, nullptr);
        stats = get();
        iface = halide_cuda_device_interface();
        ASSERT_NE(iface, nullptr);
    }
    void TearDown() override {
        if (stats) {
            EXPECT_EQ(stats->ctx_depth, 0) << "context pushes and pops do not balance";
        }
    }
};

TEST_F(CudaFakeDriver, InterfaceIsNamedCuda) {
    EXPECT_STREQ(iface->name, "cuda");
    EXPECT_EQ(halide_cuda_device_interface(), iface);
}

TEST_F(CudaFakeDriver, CopiesLaunchesAndCopiesBack) {
    Table t({{"fill", 3}});
    IntBuffer b(100, -1);
    tally_buffer_set_host_dirty(&b.buf, true);
    int allocs = stats->allocs, to_dev = stats->copies_to_device;
    ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, iface), 0);
    EXPECT_EQ(stats->allocs, allocs + 1);
    EXPECT_EQ(stats->copies_to_device, to_dev + 1);
    EXPECT_EQ(b.buf.device_interface, iface);
    EXPECT_FALSE(tally_buffer_get_host_dirty(&b.buf));

    int launches = stats->launches;
    ASSERT_EQ(run_fill(t, "fill", &b.buf, 1000, 90, 4), 0);
    EXPECT_EQ(stats->launches, launches + 1);
    EXPECT_STREQ(stats->last_kernel, "fill");
    EXPECT_EQ(stats->grid[0], 4u);
    EXPECT_EQ(stats->grid[1], 1u);
    EXPECT_EQ(stats->block[0], 32u);
    EXPECT_EQ(stats->last_pointer_arg, b.buf.device);
    // The host copy is untouched until the copy back.
    EXPECT_EQ(b.data[0], -1);
    tally_buffer_set_device_dirty(&b.buf, true);
    int syncs = stats->stream_syncs;
    ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    EXPECT_GT(stats->stream_syncs, syncs) << "a copy to the host must wait for the stream";
    for (int i = 0; i < 100; i++) {
        EXPECT_EQ(b.data[i], i < 90 ? 1000 + i : -1) << "element " << i;
    }
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    EXPECT_EQ(b.buf.device, 0u);
}

TEST_F(CudaFakeDriver, LoadsEachKernelOnceAndCachesItInTheTable) {
    Table t({{"other", 3}, {"fill", 3}});
    IntBuffer b(32);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    int loads = stats->module_loads;
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(run_fill(t, "fill", &b.buf, i, 32, 1), 0);
    }
    EXPECT_EQ(stats->module_loads, loads + 1);
    EXPECT_NE(std::string(stats->last_ptx).find(".entry fill"), std::string::npos);
    EXPECT_NE(t.table.device_state[TALLY_DEVICE_API_CUDA], nullptr);
    EXPECT_EQ(t.table.device_state[TALLY_DEVICE_API_VULKAN], nullptr);
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
}

TEST_F(CudaFakeDriver, PassesTheElementHostPointsAtWithNegativeStrides) {
    // Ten elements stored backwards: coordinate 0 is the last element of the span.
    std::vector<int32_t> data(10, 7);
    halide_dimension_t dim{0, 10, -1, 0};
    halide_buffer_t buf{};
    buf.host = reinterpret_cast<uint8_t *>(&data[9]);
    buf.type = {halide_type_int, 32, 1};
    buf.dimensions = 1;
    buf.dim = &dim;
    tally_buffer_set_host_dirty(&buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &buf, iface), 0);
    Table t({{"fill", 3}});
    ASSERT_EQ(run_fill(t, "fill", &buf, 42, 1, 1), 0);
    EXPECT_EQ(stats->last_pointer_arg, buf.device + 9 * sizeof(int32_t));
    tally_buffer_set_device_dirty(&buf, true);
    ASSERT_EQ(halide_copy_to_host(nullptr, &buf), 0);
    EXPECT_EQ(data[9], 42);
    EXPECT_EQ(data[0], 7);
    ASSERT_EQ(halide_device_free(nullptr, &buf), 0);
}

TEST_F(CudaFakeDriver, CountsLaunchesAndSyncsInTheProfiler) {
    tally_profiler_reset();
    const char *slots[] = {"overhead", "fill"};
    void *inst =
        tally_profiler_start(nullptr, "cuda_fake_pipeline", "host-cuda-profile", 2, slots, nullptr,
                             nullptr, TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_CUDA));
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 1);
    Table t({{"fill", 3}});
    IntBuffer b(64);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    int ctx_syncs = stats->ctx_syncs;
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(run_fill(t, "fill", &b.buf, i, 64, 2), 0);
        ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    }
    EXPECT_EQ(stats->ctx_syncs, ctx_syncs + 3) << "device_sync_global syncs the whole context";
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    tally_profiler_end(nullptr, inst);
    tally_pipeline_stats p{};
    ASSERT_EQ(tally_profiler_get_pipeline_stats("cuda_fake_pipeline", &p), 0);
    EXPECT_EQ(p.kernel_launches, 3u);
    EXPECT_EQ(p.injected_syncs, 3u);
    tally_profiler_reset();
}

/** An entry point of the fake driver that only tests use. */
template <typename Fn>
Fn fake_entry(const char *name) {
    void *lib = dlopen(TALLY_CUDA_FAKE_DRIVER, RTLD_NOW | RTLD_LOCAL);
    return lib ? reinterpret_cast<Fn>(dlsym(lib, name)) : nullptr;
}

/** The report of every pipeline so far, as JSON. */
tally_test::Json report_json() {
    std::vector<char> buf(1 << 16);
    EXPECT_GT(tally_profiler_report_to_buffer(buf.data(), buf.size(), 1), 0);
    tally_test::Json root;
    std::string error;
    EXPECT_TRUE(tally_test::JsonParser(std::string(buf.data())).parse(&root, &error)) << error;
    return root;
}

/** The pipeline named `name` in a report. */
const tally_test::Json *find_pipeline(const tally_test::Json &root, const std::string &name) {
    for (const tally_test::Json &p : root["pipelines"].items) {
        if (p["name"].str == name) {
            return &p;
        }
    }
    return nullptr;
}

// profile_timestamps against the fake's exact device clock: each launch is bracketed by two
// events and billed, at the copy to the host (the only blocking point: no other sync), to the Func
// that launched it: A 2 x 5 ms, B 3 x 2 ms, exactly; the copy is timed too (two more events); the
// clocks are paired there by three event syncs (the anchor recorded before the first timed
// command); events are pooled (a second run creates none); the host wait stays in the copy slot.
TEST_F(CudaFakeDriver, EventsBillEachKernelToTheFuncThatLaunchedIt) {
    auto set_kernel_ns = fake_entry<fake_cuda_set_kernel_ns_fn>("fake_cuda_set_kernel_ns");
    ASSERT_NE(set_kernel_ns, nullptr);
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);  // no anchor yet
    iface = halide_cuda_device_interface();
    ASSERT_NE(iface, nullptr);
    tally_profiler_reset();
    const char *slots[] = {"overhead", "A", "B", "B (copy to host)"};
    const int32_t kinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                             TALLY_SLOT_COPY_TO_HOST};
    Table t({{"fill", 3}});
    IntBuffer b(64);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    int created_first_run = 0;
    for (int run = 0; run < 2; run++) {
        int stream_syncs = stats->stream_syncs, ctx_syncs = stats->ctx_syncs;
        int created = stats->events_created, recorded = stats->events_recorded;
        int event_syncs = stats->event_syncs;
        void *inst = tally_profiler_start(
            nullptr, "cuda_ts", "host-cuda-profile_timestamps", 4, slots, kinds, nullptr,
            TALLY_PROFILER_FLAG_TIMESTAMPS | TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_CUDA));
        ASSERT_NE(inst, nullptr);
        tally_profiler_set_current(inst, 1);
        set_kernel_ns(5000000);
        for (int i = 0; i < 2; i++) {
            ASSERT_EQ(run_fill(t, "fill", &b.buf, i, 64, 2), 0);
        }
        tally_profiler_set_current(inst, 2);
        set_kernel_ns(2000000);
        for (int i = 0; i < 3; i++) {
            ASSERT_EQ(run_fill(t, "fill", &b.buf, i, 64, 2), 0);
        }
        tally_profiler_set_current(inst, 3);
        tally_buffer_set_device_dirty(&b.buf, true);
        ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
        tally_profiler_set_current(inst, 0);
        tally_profiler_end(nullptr, inst);
        EXPECT_EQ(stats->stream_syncs, stream_syncs + 1) << "only the copy to the host waits";
        EXPECT_EQ(stats->ctx_syncs, ctx_syncs);
        // Two events per launch and per copy, three clock readings at the blocking point, and in
        // the first run the anchor.
        EXPECT_EQ(stats->events_recorded, recorded + 2 * 5 + 2 + 3 + (run == 0 ? 1 : 0));
        EXPECT_EQ(stats->event_syncs, event_syncs + 3);
        if (run == 0) {
            created_first_run = stats->events_created - created;
            EXPECT_GE(created_first_run, 2);
        } else {
            EXPECT_EQ(stats->events_created, created) << "events come from the pool";
        }
    }

    tally_test::Json root = report_json();
    const tally_test::Json &timeline = root["pipelines"][0]["device_timeline"];
    ASSERT_EQ(timeline["funcs"].items.size(), 3u);
    const tally_test::Json &a = timeline["funcs"][1], &bf = timeline["funcs"][2];
    EXPECT_EQ(a["name"].str, "A");
    EXPECT_EQ(a["kernels"].number, 4);
    EXPECT_EQ(a["device_ns"].number, 4 * 5e6);
    EXPECT_EQ(bf["kernels"].number, 6);
    EXPECT_EQ(bf["device_ns"].number, 6 * 2e6);
    EXPECT_EQ(timeline["device_busy_ns"].number, 4 * 5e6 + 6 * 2e6);  // the copies take 0 here
    ASSERT_EQ(timeline["device_copies"].items.size(), 1u);
    EXPECT_EQ(timeline["device_copies"][0]["name"].str, "B (copy to host)");
    EXPECT_EQ(timeline["device_copies"][0]["copies"].number, 2);
    EXPECT_EQ(timeline["overlap_ns"].number,
              std::max(0.0, timeline["device_busy_ns"].number - timeline["host_wait_ns"].number));
    EXPECT_EQ(timeline["records_lost"].number + timeline["records_overflowed"].number +
                  timeline["records_unmatched"].number,
              0);
    EXPECT_NE(timeline["modes"]["cuda"].str.find("CUDA events"), std::string::npos);
    tally_profiler_reset();
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    set_kernel_ns(1000000);
}

// A scripted host clock for the clock-pairing tests: it moves only when the test (or the fake's
// cuEventSynchronize hook) moves it. The true relation of the clocks is host = origin + device *
// (1 + drift): the tests advance both clocks together, and each event sync is a window of
// `sync_widths[k]` device ns during which the host waits.
namespace scripted {
uint64_t host_ns;
double drift;
std::vector<uint64_t> sync_widths;
size_t next_sync;
std::vector<uint64_t> sync_entered;  // the host clock when each sync began
fake_cuda_advance_clock_fn advance_device;

uint64_t clock() {
    return host_ns;
}
/** Both clocks move by `device_ns` of device time. */
void advance(uint64_t device_ns) {
    advance_device(device_ns);
    host_ns += uint64_t(double(device_ns) * (1 + drift) + 0.5);
}
void on_event_sync() {
    sync_entered.push_back(host_ns);
    advance(next_sync < sync_widths.size() ? sync_widths[next_sync++] : 0);
}
}  // namespace scripted

class CudaFakeDriverScriptedClock : public CudaFakeDriver {
protected:
    fake_cuda_set_event_sync_hook_fn set_hook = nullptr;
    void SetUp() override {
        CudaFakeDriver::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        set_hook = fake_entry<fake_cuda_set_event_sync_hook_fn>("fake_cuda_set_event_sync_hook");
        scripted::advance_device =
            fake_entry<fake_cuda_advance_clock_fn>("fake_cuda_advance_clock");
        ASSERT_NE(set_hook, nullptr);
        ASSERT_NE(scripted::advance_device, nullptr);
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);  // a new device clock, no pairings
        iface = halide_cuda_device_interface();
        ASSERT_NE(iface, nullptr);
        tally_profiler_reset();
        scripted::host_ns = 1000000000000ull;
        scripted::drift = 0;
        scripted::sync_widths.clear();
        scripted::sync_entered.clear();
        scripted::next_sync = 0;
        tally_testing_set_clock(scripted::clock);
        set_hook(scripted::on_event_sync);
    }
    void TearDown() override {
        if (set_hook) {
            set_hook(nullptr);
        }
        tally_testing_set_clock(nullptr);
        tally_profiler_reset();
        CudaFakeDriver::TearDown();
    }
    /** Launches `fill` on the stream for `kernel_ns` of device time; the host clock follows. */
    void launch(Table &t, halide_buffer_t *b, uint64_t kernel_ns) {
        auto set_kernel_ns = fake_entry<fake_cuda_set_kernel_ns_fn>("fake_cuda_set_kernel_ns");
        set_kernel_ns(kernel_ns);
        ASSERT_EQ(run_fill(t, "fill", b, 1, b->dim[0].extent, 2), 0);
        scripted::host_ns += uint64_t(double(kernel_ns) * (1 + scripted::drift) + 0.5);
        set_kernel_ns(1000000);
    }
};

// Copies under profile_timestamps are timed with events like kernels: on the fake, a copy of
// 200 bytes at 1250 ns per byte takes 250 us of device time, exactly, and is billed to its copy
// slot (not to the Func, not to overhead); the kernel between them stays A's. The run's device
// span (first begin to last end on the host clock) is the copies and the kernel back to back.
TEST_F(CudaFakeDriverScriptedClock, CopiesAreTimedAndBilledToTheirCopySlots) {
    auto set_copy_rate =
        fake_entry<fake_cuda_set_copy_ns_per_byte_fn>("fake_cuda_set_copy_ns_per_byte");
    ASSERT_NE(set_copy_rate, nullptr);
    set_copy_rate(1250);
    const char *slots[] = {"overhead", "A", "A (copy to device)", "A (copy to host)"};
    const int32_t kinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_COPY_TO_DEVICE,
                             TALLY_SLOT_COPY_TO_HOST};
    Table t({{"fill", 3}});
    IntBuffer b(50, 3);
    int stream_syncs = stats->stream_syncs;
    void *inst = tally_profiler_start(
        nullptr, "cuda_copies", "host-cuda-profile_timestamps", 4, slots, kinds, nullptr,
        TALLY_PROFILER_FLAG_TIMESTAMPS | TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_CUDA));
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 2);
    tally_buffer_set_host_dirty(&b.buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, iface), 0);
    scripted::host_ns += 250000;
    tally_profiler_set_current(inst, 1);
    launch(t, &b.buf, 3000000);
    tally_profiler_set_current(inst, 3);
    tally_buffer_set_device_dirty(&b.buf, true);
    ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    tally_profiler_set_current(inst, 0);
    tally_profiler_end(nullptr, inst);
    set_copy_rate(0);
    EXPECT_EQ(stats->stream_syncs, stream_syncs + 1) << "only the copy to the host waits";
    EXPECT_EQ(b.data[5], 1 + 5);
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);

    tally_test::Json root = report_json();
    const tally_test::Json *p = find_pipeline(root, "cuda_copies");
    ASSERT_NE(p, nullptr);
    const tally_test::Json &timeline = (*p)["device_timeline"];
    const tally_test::Json &copies = timeline["device_copies"];
    ASSERT_EQ(copies.items.size(), 2u);
    EXPECT_EQ(copies[0]["name"].str, "A (copy to device)");
    EXPECT_EQ(copies[0]["device_ns"].number, 250000);
    EXPECT_EQ(copies[0]["copies"].number, 1);
    EXPECT_EQ(copies[1]["name"].str, "A (copy to host)");
    EXPECT_EQ(copies[1]["device_ns"].number, 250000);
    EXPECT_EQ(copies[1]["copies"].number, 1);
    EXPECT_EQ(timeline["funcs"][1]["name"].str, "A");
    EXPECT_EQ(timeline["funcs"][1]["device_ns"].number, 3e6);
    EXPECT_EQ(timeline["funcs"][1]["kernels"].number, 1);
    EXPECT_EQ(timeline["funcs"][0]["device_ns"].number, 0) << "nothing billed to overhead";
    EXPECT_EQ(timeline["device_busy_ns"].number, 3e6 + 2 * 250000);
    EXPECT_EQ(timeline["kernels"].number, 3);
    EXPECT_EQ(timeline["device_span_ns"].number, 3e6 + 2 * 250000);
    EXPECT_EQ(timeline["records_lost"].number + timeline["records_overflowed"].number +
                  timeline["records_unmatched"].number,
              0);
}

// Clock pairing: at each blocking point with timed work the runtime takes three readings
// (host clock, event, cuEventSynchronize, host clock) and keeps the tightest window, wherever it
// falls (the middle one here, the last one next). The kept reading is the window's midpoint, half
// the window its deviation. The host clock runs 500 ppm fast against the device: the second
// pairing, 1.2 s of device time after the first, fits that rate, and a kernel 1.2 s before the
// newest pairing is placed where it truly ran (without the fit it would be 600 us off).
TEST_F(CudaFakeDriverScriptedClock, PairsTheTightestReadingAndFitsTheDrift) {
    scripted::drift = 5e-4;
    const char *slots[] = {"overhead", "A", "B", "B (copy to host)"};
    const int32_t kinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                             TALLY_SLOT_COPY_TO_HOST};
    Table t({{"fill", 3}});
    IntBuffer b(64);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    auto run = [&](const char *name, uint64_t a_ns, uint64_t b_ns) {
        void *inst = tally_profiler_start(
            nullptr, name, "host-cuda-profile_timestamps", 4, slots, kinds, nullptr,
            TALLY_PROFILER_FLAG_TIMESTAMPS | TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_CUDA));
        ASSERT_NE(inst, nullptr);
        tally_profiler_set_current(inst, 1);
        launch(t, &b.buf, a_ns);
        tally_profiler_set_current(inst, 2);
        launch(t, &b.buf, b_ns);
        tally_profiler_set_current(inst, 3);
        tally_buffer_set_device_dirty(&b.buf, true);
        ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
        tally_profiler_set_current(inst, 0);
        tally_profiler_end(nullptr, inst);
    };

    // First pairing: windows of 8, 2 and 6 us.
    scripted::sync_widths = {8000, 2000, 6000, 6000, 4000, 2000};
    run("first", 1000000, 1000000);
    ASSERT_EQ(scripted::sync_entered.size(), 3u);
    tally_testing_device_clock c{};
    ASSERT_EQ(tally_testing_get_device_clock(TALLY_DEVICE_API_CUDA, &c), 0);
    EXPECT_EQ(c.pairings, 1);
    EXPECT_EQ(c.readings, 3);
    const uint64_t window = 2001;  // 2 us of device time on a clock 500 ppm fast
    EXPECT_EQ(c.deviation_ns, window / 2);
    EXPECT_EQ(c.host_ns, scripted::sync_entered[1] + window / 2);
    EXPECT_EQ(c.rate, 1.0) << "one pairing: no fit yet";

    // 1.2 s later on the device: the last of the three windows is the tightest, and the rate is
    // the clocks' true one.
    run("second", 1000000, 1200000000);
    ASSERT_EQ(scripted::sync_entered.size(), 6u);
    ASSERT_EQ(tally_testing_get_device_clock(TALLY_DEVICE_API_CUDA, &c), 0);
    EXPECT_EQ(c.pairings, 2);
    EXPECT_EQ(c.readings, 6);
    EXPECT_EQ(c.deviation_ns, window / 2);
    EXPECT_EQ(c.host_ns, scripted::sync_entered[5] + window / 2);
    // cuEventElapsedTime's float milliseconds resolve 122 ns at 1.2 s: 1e-7 of the rate.
    EXPECT_NEAR(c.rate, 1 + scripted::drift, 1e-7);

    // "second" ran A (1 ms) then B (1.2 s) back to back, then the copy (0 ns): on the host clock
    // that is 1.201 s * (1 + drift) from A's begin to the copy's end. Each end of the span is off
    // by at most its pairing's deviation.
    tally_test::Json root = report_json();
    const tally_test::Json *p = find_pipeline(root, "second");
    ASSERT_NE(p, nullptr);
    const double truth = 1201000000.0 * (1 + scripted::drift);
    const double span = (*p)["device_timeline"]["device_span_ns"].number;
    EXPECT_NEAR(span, truth, 2.0 * window)
        << "a rate of 1 would be " << 1201000000.0 - truth << " ns off";
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
}

// The timeline in sync mode (no device timestamps): each launch is a slice on the "CUDA stream"
// track from the launch to the end of the device wait that completed it, cut at the next launch
// the same wait completed, with a flow from the launch (inside the Func's slice on the host
// thread) to the slice. The scripted clock makes every number exact: the device wait hook moves
// it while the host waits.
uint64_t trace_wait_ends_at_ns = 0;

TEST_F(CudaFakeDriver, TraceShowsLaunchesOnTheStreamTrackFromTheHostsView) {
    using tally_test::fake_time_ns;
    const uint64_t t0 = 9000000000ull;
    auto at_us = [&](uint64_t us) { fake_time_ns() = t0 + us * 1000; };
    tally_profiler_reset();
    tally_testing_set_clock(tally_test::fake_clock);
    tally_testing_set_device_wait_hook([] { tally_test::fake_time_ns() = trace_wait_ends_at_ns; });
    ASSERT_EQ(tally_profiler_trace_record(nullptr, 1, 0), 0);
    const char *slots[] = {"overhead", "A"};
    Table t({{"fill", 3}});
    IntBuffer b(64);
    at_us(0);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    void *inst = tally_profiler_start(
        nullptr, "cuda_trace", "host-cuda-profile", 2, slots, nullptr, nullptr,
        TALLY_PROFILER_FLAG_EXACT | TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_CUDA));
    ASSERT_NE(inst, nullptr);
    at_us(10);
    tally_profiler_set_current(inst, 1);
    at_us(12);
    ASSERT_EQ(run_fill(t, "fill", &b.buf, 1, 64, 2), 0);  // launch 1 at 12 us
    at_us(15);
    trace_wait_ends_at_ns = t0 + 40000;
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);  // waits until 40 us
    at_us(50);
    ASSERT_EQ(run_fill(t, "fill", &b.buf, 2, 64, 2), 0);  // launch 2 at 50 us
    at_us(55);
    ASSERT_EQ(run_fill(t, "fill", &b.buf, 3, 64, 2), 0);  // launch 3 at 55 us
    at_us(60);
    trace_wait_ends_at_ns = t0 + 100000;
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);  // waits until 100 us
    at_us(110);
    tally_profiler_set_current(inst, 0);
    at_us(120);
    ASSERT_EQ(tally_profiler_end(nullptr, inst), 0);
    tally_testing_set_device_wait_hook(nullptr);
    tally_profiler_trace_record(nullptr, 0, 0);

    std::string path = ::testing::TempDir() + "tally_cuda_trace.json";
    ASSERT_EQ(tally_profiler_write_trace(nullptr, path.c_str()), 0);
    std::FILE *f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    std::string text;
    char chunk[4096];
    for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) {
        text.append(chunk, n);
    }
    std::fclose(f);
    std::remove(path.c_str());
    tally_test::Json trace;
    std::string error;
    ASSERT_TRUE(tally_test::JsonParser(text).parse(&trace, &error)) << error;

    std::vector<std::string> host, device, flows;
    int device_tid = -1, host_tid = -1;
    std::string device_name;
    for (const tally_test::Json &e : trace["traceEvents"].items) {
        const std::string &ph = e["ph"].str;
        char line[160];
        if (ph == "X") {
            std::snprintf(line, sizeof line, "%s %s %.3f+%.3f", e["name"].str.c_str(),
                          e["cat"].str.c_str(), e["ts"].number - double(t0 / 1000),
                          e["dur"].number);
            bool on_device = e["tid"].number > 100;
            (on_device ? device_tid : host_tid) = int(e["tid"].number);
            (on_device ? device : host).push_back(line);
        } else if (ph == "s" || ph == "f") {
            std::snprintf(line, sizeof line, "%s %d %.3f id %d %s %s", ph.c_str(),
                          int(e["tid"].number), e["ts"].number - double(t0 / 1000),
                          int(e["id"].number), e["cat"].str.c_str(), e["name"].str.c_str());
            flows.push_back(line);
        } else if (ph == "M" && e["name"].str == "thread_name" && e["tid"].number > 100) {
            device_name = e["args"]["name"].str;
        }
    }
    // The host thread: A from 10 us to 110 us, waits included (the first launch loads the kernel
    // in no time on this clock).
    const std::vector<std::string> want_host = {
        "overhead func 0.000+10.000", "A func 10.000+2.000",
        "kernel compilation (one-time) one-time 12.000+0.000", "A func 12.000+98.000",
        "overhead func 110.000+10.000"};
    EXPECT_EQ(host, want_host) << text;
    EXPECT_EQ(device_name, "CUDA stream");
    const std::vector<std::string> want_device = {"A device (host view) 12.000+28.000",
                                                  "A device (host view) 50.000+5.000",
                                                  "A device (host view) 55.000+45.000"};
    EXPECT_EQ(device, want_device) << text;
    const std::string h = std::to_string(host_tid), d = std::to_string(device_tid);
    const std::vector<std::string> want_flows = {
        "s " + h + " 12.000 id 1 launch launch", "s " + h + " 50.000 id 2 launch launch",
        "s " + h + " 55.000 id 3 launch launch", "f " + d + " 26.000 id 1 launch launch",
        "f " + d + " 52.500 id 2 launch launch", "f " + d + " 77.500 id 3 launch launch"};
    EXPECT_EQ(flows, want_flows) << text;

    tally_testing_set_clock(nullptr);
    tally_profiler_reset();
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
}

uint64_t total_waits(const tally_device_wait_stats &w) {
    uint64_t n = 0;
    for (uint64_t c : w.waits) {
        n += c;
    }
    return n;
}

// halide_device_free never waits for the device: freed right after a launch that uses it (work
// queued on the stream), a buffer goes to cuMemFreeAsync (stream order) or, on a device without
// memory pools, is kept until the next point where the stream is idle anyway (here the copy of
// another buffer to the host). Either way no cuMemFree runs while work is queued, no wait is
// counted, and the ledger counts the free deferred, then released at that idle point.
TEST_F(CudaFakeDriver, FreeAfterALaunchIsStreamOrderedAndNeverWaits) {
    for (bool pools : {true, false}) {
        SCOPED_TRACE(pools ? "memory pools" : "no memory pools");
        if (pools) {
            unsetenv("FAKE_CUDA_NO_MEMPOOLS");
        } else {
            setenv("FAKE_CUDA_NO_MEMPOOLS", "1", 1);
        }
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);  // forget what the last one learnt
        iface = halide_cuda_device_interface();
        ASSERT_NE(iface, nullptr);
        Table t({{"fill", 3}});
        IntBuffer a(64, -1), b(64, -1);
        tally_buffer_set_host_dirty(&a.buf, true);
        ASSERT_EQ(halide_copy_to_device(nullptr, &a.buf, iface), 0);
        tally_buffer_set_host_dirty(&b.buf, true);
        ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, iface), 0);
        ASSERT_EQ(run_fill(t, "fill", &a.buf, 7, 64, 2), 0);
        ASSERT_EQ(run_fill(t, "fill", &b.buf, 9, 64, 2), 0);

        tally_device_wait_stats before{}, freed{}, idle{};
        tally_device_get_wait_stats(&before);
        int frees = stats->frees, blocking = stats->blocking_frees, async = stats->async_frees;
        ASSERT_EQ(halide_device_free(nullptr, &a.buf), 0);
        EXPECT_EQ(a.buf.device, 0u);
        tally_device_get_wait_stats(&freed);
        EXPECT_EQ(total_waits(freed), total_waits(before)) << "the free waited";
        EXPECT_EQ(stats->blocking_frees, blocking) << "cuMemFree ran with work queued";
        EXPECT_EQ(freed.deferred_frees, before.deferred_frees + 1);
        EXPECT_EQ(freed.deferred_frees_released, before.deferred_frees_released);
        EXPECT_EQ(stats->async_frees, async + (pools ? 1 : 0));
        EXPECT_EQ(stats->frees, frees + (pools ? 1 : 0));

        tally_buffer_set_device_dirty(&b.buf, true);
        ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
        EXPECT_EQ(b.data[63], 9 + 63);
        tally_device_get_wait_stats(&idle);
        EXPECT_EQ(idle.deferred_frees_released, before.deferred_frees_released + 1);
        EXPECT_EQ(stats->frees, frees + 1);
        EXPECT_EQ(stats->blocking_frees, blocking);
        EXPECT_EQ(idle.waits[TALLY_DEVICE_WAIT_FREE], before.waits[TALLY_DEVICE_WAIT_FREE]);
        ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    }
    unsetenv("FAKE_CUDA_NO_MEMPOOLS");
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    iface = halide_cuda_device_interface();
}

TEST_F(CudaFakeDriver, ReportsUnknownKernelsAndBuffersNotOnTheDevice) {
    tally_test::MessageCapture capture;
    Table t({{"fill", 3}});
    IntBuffer b(8);
    EXPECT_EQ(run_fill(t, "nope", &b.buf, 0, 8, 1), TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "no CUDA kernel 'nope'")) << joined(capture.errors());
    // The buffer was never given device memory.
    EXPECT_EQ(run_fill(t, "fill", &b.buf, 0, 8, 1), TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "has no CUDA device memory"))
        << joined(capture.errors());
    // On the host interface instead.
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, halide_host_device_interface()), 0);
    EXPECT_EQ(run_fill(t, "fill", &b.buf, 0, 8, 1), TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "(it is on host)")) << joined(capture.errors());
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    // Wrong argument count, NULL table.
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    int64_t sizes[] = {8, 0};
    void *args[] = {&b.buf, nullptr};
    uint8_t is_buffer[] = {1, 0};
    EXPECT_EQ(
        halide_cuda_run(nullptr, &t.table, "fill", 1, 1, 1, 1, 1, 1, 0, sizes, args, is_buffer),
        TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "takes 3 arguments, the launch passes 1"))
        << joined(capture.errors());
    EXPECT_EQ(
        halide_cuda_run(nullptr, nullptr, "fill", 1, 1, 1, 1, 1, 1, 0, sizes, args, is_buffer),
        TALLY_ERROR_BAD_ARGUMENT);
    // A NULL argument is a bad argument; a table of another ABI version cannot run here (the
    // same codes as on every device API).
    int32_t value = 0, n = 8;
    int64_t fill_sizes[] = {8, 4, 4, 0};
    void *null_arg[] = {&b.buf, nullptr, &n, nullptr};
    uint8_t fill_is_buffer[] = {1, 0, 0, 0};
    EXPECT_EQ(halide_cuda_run(nullptr, &t.table, "fill", 1, 1, 1, 32, 1, 1, 0, fill_sizes, null_arg,
                              fill_is_buffer),
              TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_TRUE(contains(capture.errors(), "kernel 'fill', argument 1 is NULL"))
        << joined(capture.errors());
    Table other_abi({{"fill", 3}});
    other_abi.table.abi_version = TALLY_RUNTIME_ABI_VERSION + 100;
    EXPECT_EQ(run_fill(other_abi, "fill", &b.buf, value, n, 1), TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "ABI version")) << joined(capture.errors());
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
}

TEST_F(CudaFakeDriver, ReportsPtxLoadFailuresWithTheJitLogAndLaunchFailures) {
    tally_test::MessageCapture capture;
    Table bad({{"fill", 3}});
    bad.ptx[0] += "// FAIL_LOAD\n";
    bad.sources[0].code = reinterpret_cast<const uint8_t *>(bad.ptx[0].c_str());
    IntBuffer b(8);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    EXPECT_EQ(run_fill(bad, "fill", &b.buf, 0, 8, 1), TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "loading the PTX of kernel 'fill' failed"))
        << joined(capture.errors());
    EXPECT_TRUE(contains(capture.errors(), "CUDA_ERROR_INVALID_PTX")) << joined(capture.errors());
    EXPECT_TRUE(contains(capture.errors(), "fake syntax error")) << joined(capture.errors());

    Table failing({{"fail_launch", 3}});
    int launches = stats->launches;
    EXPECT_EQ(run_fill(failing, "fail_launch", &b.buf, 0, 8, 1), TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "cuLaunchKernel of 'fail_launch'"))
        << joined(capture.errors());
    EXPECT_TRUE(contains(capture.errors(), "CUDA_ERROR_LAUNCH_FAILED")) << joined(capture.errors());
    EXPECT_EQ(stats->launches, launches);
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
}

TEST_F(CudaFakeDriver, EmptyGridsLaunchNothing) {
    Table t({{"fill", 3}});
    IntBuffer b(8);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    int launches = stats->launches;
    EXPECT_EQ(run_fill(t, "fill", &b.buf, 0, 8, 0), 0);
    EXPECT_EQ(stats->launches, launches);
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
}

// Runs last in this suite (gtest keeps definition order): release, then use again.
TEST_F(CudaFakeDriver, ReleaseUnloadsKernelsAndTheNextUseStartsAgain) {
    Table t({{"fill", 3}});
    IntBuffer b(8);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    ASSERT_EQ(run_fill(t, "fill", &b.buf, 5, 8, 1), 0);
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    int loads = stats->module_loads, releases = stats->ctx_releases;
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    EXPECT_EQ(stats->module_unloads, stats->module_loads) << "every loaded module is unloaded";
    EXPECT_EQ(stats->ctx_releases, releases + 1);
    EXPECT_EQ(stats->streams_destroyed, stats->streams_created);
    EXPECT_EQ(stats->live_allocs, 0);

    ASSERT_EQ(halide_cuda_device_interface(), iface);
    ASSERT_EQ(halide_device_malloc(nullptr, &b.buf, iface), 0);
    ASSERT_EQ(run_fill(t, "fill", &b.buf, 5, 8, 1), 0);
    EXPECT_EQ(stats->module_loads, loads + 1) << "the table's kernel is loaded again";
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
}

// ---- this machine -------------------------------------------------------------------------------

TEST(CudaThisMachine, WithoutADriverTheInterfaceIsNullAndLaunchesSayWhy) {
    if (!env("TALLY_CUDA_LIBRARY").empty()) {
        GTEST_SKIP() << "TALLY_CUDA_LIBRARY is set; this test checks the default search";
    }
    if (void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
        dlclose(h);
        GTEST_SKIP() << "this machine has a CUDA driver (the no-driver path is covered by "
                        "runtime.cuda.no_driver)";
    }
    expect_unusable("libcuda.so.1 not found");
}

}  // namespace
