// Tests of the Vulkan device interface (runtime/src/device/vulkan/) through the runtime's C
// ABI alone: buffers, copies and dirty bits, launches of hand-written SPIR-V kernels
// (shaders/*.comp, compiled at build time) from a hand-built tally_kernel_table, error paths,
// asynchrony, profiler counters, release and re-initialization, and the environment switches.
//
// Every test skips (with the reason) when there is no Vulkan device. The process installs print
// and error handlers that log everything; at the end it releases Vulkan and, when
// TALLY_VULKAN_EXPECT_NO_MESSAGES is set (the ctest entry that runs under the Khronos validation
// layer with TALLY_VULKAN_DEBUG=1), fails if any Vulkan debug message was printed.
//
// Environment switches tested (read by the runtime at each initialization):
//   TALLY_VULKAN_DISABLE=1         behaves as if the loader were missing: NULL interface, clean
//                                  errors, no crash;
//   TALLY_VULKAN_DEVICE=<i|name>   device selection;
//   TALLY_VULKAN_FORCE_STAGING=1   copies through staging buffers (the discrete-GPU path).
#include "tally_halide_vulkan_module.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include "Json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <time.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace {

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// ---- process-wide message log ------------------------------------------------------------------

struct MessageLog {
    std::mutex mutex;
    std::string printed;
    std::vector<std::string> errors;
};

MessageLog &message_log() {
    static MessageLog log;
    return log;
}

void log_print(void *, const char *msg) {
    {
        std::lock_guard<std::mutex> lock(message_log().mutex);
        message_log().printed += msg;
    }
    fputs(msg, stderr);
}

void log_error(void *, const char *msg) {
    std::lock_guard<std::mutex> lock(message_log().mutex);
    message_log().errors.push_back(msg);
}

size_t error_mark() {
    std::lock_guard<std::mutex> lock(message_log().mutex);
    return message_log().errors.size();
}

std::vector<std::string> errors_since(size_t mark) {
    std::lock_guard<std::mutex> lock(message_log().mutex);
    auto &e = message_log().errors;
    return std::vector<std::string>(e.begin() + long(std::min(mark, e.size())), e.end());
}

std::string joined(const std::vector<std::string> &v) {
    std::string s;
    for (const auto &m : v) {
        s += m;
        s += "\n";
    }
    return s;
}

// The interface from the last successful lookup, for the final release.
std::atomic<const halide_device_interface_t *> last_interface{nullptr};

const halide_device_interface_t *vulkan() {
    const halide_device_interface_t *iface = halide_vulkan_device_interface();
    if (iface) {
        last_interface = iface;
    }
    return iface;
}

class VulkanEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        prev_print_ = tally_set_print_handler(log_print);
        prev_error_ = tally_set_error_handler(log_error);
    }
    void TearDown() override {
        if (const halide_device_interface_t *iface = last_interface.load()) {
            EXPECT_EQ(halide_device_release(nullptr, iface), 0);
        }
        std::string printed;
        {
            std::lock_guard<std::mutex> lock(message_log().mutex);
            printed = message_log().printed;
        }
        EXPECT_EQ(printed.find("Validation Error"), std::string::npos) << printed;
        if (getenv("TALLY_VULKAN_EXPECT_NO_MESSAGES")) {
            // The debug messenger prints "Vulkan <kind> <level>: ..." for every message; only
            // the loader's notes (kind "loader", e.g. that VK_INSTANCE_LAYERS added a layer) are
            // allowed.
            EXPECT_EQ(printed.find("Vulkan validation"), std::string::npos) << printed;
            EXPECT_EQ(printed.find("Vulkan general"), std::string::npos) << printed;
            EXPECT_EQ(printed.find("Vulkan performance"), std::string::npos) << printed;
        }
        tally_set_print_handler(prev_print_);
        tally_set_error_handler(prev_error_);
    }

private:
    tally_message_handler_t prev_print_ = nullptr;
    tally_message_handler_t prev_error_ = nullptr;
};

::testing::Environment *const vulkan_environment =
    ::testing::AddGlobalTestEnvironment(new VulkanEnvironment);

// ---- kernels -----------------------------------------------------------------------------------

std::vector<uint32_t> load_spirv(const std::string &name) {
    std::string path = std::string(TALLY_VK_SHADER_DIR) + "/" + name + ".spv";
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) {
        return {};
    }
    std::streamsize size = in.tellg();
    in.seekg(0);
    std::vector<uint32_t> words(size_t(size + 3) / 4);
    in.read(reinterpret_cast<char *>(words.data()), size);
    return size % 4 == 0 ? words : std::vector<uint32_t>{};
}

// A module's kernel table built by hand, as the compiler would embed it.
struct KernelModule {
    struct Spec {
        const char *name;
        int32_t num_args, num_buffers;
    };
    std::vector<std::vector<uint32_t>> code;
    std::vector<tally_kernel_source> sources;
    tally_kernel_table table{};

    bool load() {
        static const Spec specs[] = {{"add_scalar", 3, 1},
                                     {"scale_copy", 4, 2},
                                     {"pack_args", 4, 1},
                                     {"grid", 4, 1},
                                     {"slow", 3, 1}};
        for (const Spec &s : specs) {
            code.push_back(load_spirv(s.name));
            if (code.back().empty()) {
                return false;
            }
        }
        for (size_t i = 0; i < code.size(); i++) {
            tally_kernel_source k{};
            k.name = specs[i].name;
            k.code = reinterpret_cast<const uint8_t *>(code[i].data());
            k.code_size = code[i].size() * 4;
            k.device_api = TALLY_DEVICE_API_VULKAN;
            k.num_args = specs[i].num_args;
            k.num_buffers = specs[i].num_buffers;
            sources.push_back(k);
        }
        // A CUDA kernel, to check that a Vulkan launch refuses it.
        tally_kernel_source cuda{};
        cuda.name = "cuda_only";
        cuda.code = reinterpret_cast<const uint8_t *>("// PTX\n");
        cuda.code_size = 8;
        cuda.device_api = TALLY_DEVICE_API_CUDA;
        sources.push_back(cuda);
        table.abi_version = TALLY_RUNTIME_ABI_VERSION;
        table.num_kernels = int32_t(sources.size());
        table.kernels = sources.data();
        return true;
    }
};

// A dense 1-D host buffer of T.
template <typename T>
struct Buffer {
    std::vector<T> data;
    halide_dimension_t dim{};
    halide_buffer_t buf{};

    // An empty buffer still gets a (one-element) host allocation: its host pointer is not NULL.
    explicit Buffer(int32_t n, T fill = T()) : data(size_t(n > 0 ? n : 1), fill) {
        dim.min = 0;
        dim.extent = n;
        dim.stride = 1;
        buf.host = reinterpret_cast<uint8_t *>(data.data());
        buf.type.code = std::is_floating_point<T>::value ? halide_type_float : halide_type_int;
        buf.type.bits = uint8_t(sizeof(T) * 8);
        buf.type.lanes = 1;
        buf.dimensions = 1;
        buf.dim = &dim;
    }
    ~Buffer() {
        if (buf.device_interface) {
            halide_device_free(nullptr, &buf);
        }
    }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
};

// One launch argument.
struct Arg {
    int64_t size;
    void *value;
    uint8_t is_buffer;
};

template <typename T>
Arg buffer_arg(Buffer<T> &b) {
    return Arg{int64_t(sizeof(halide_buffer_t *)), &b.buf, 1};
}

template <typename T>
Arg scalar_arg(T &v) {
    return Arg{int64_t(sizeof(T)), &v, 0};
}

int32_t run(tally_kernel_table *table, const char *name, const int32_t blocks[3],
            const int32_t threads[3], std::vector<Arg> args, int32_t shared_mem = 0) {
    std::vector<int64_t> sizes;
    std::vector<void *> values;
    std::vector<uint8_t> is_buffer;
    for (const Arg &a : args) {
        sizes.push_back(a.size);
        values.push_back(a.value);
        is_buffer.push_back(a.is_buffer);
    }
    sizes.push_back(0);
    values.push_back(nullptr);
    is_buffer.push_back(0);
    return halide_vulkan_run(nullptr, table, name, blocks[0], blocks[1], blocks[2], threads[0],
                             threads[1], threads[2], shared_mem, sizes.data(), values.data(),
                             is_buffer.data());
}

// Launches add_scalar (buf[i] += k) over all of buf, 64 threads per group.
int32_t add_scalar(tally_kernel_table *table, Buffer<int32_t> &b, int32_t k) {
    int32_t n = int32_t(b.data.size());
    const int32_t blocks[3] = {(n + 63) / 64, 1, 1};
    const int32_t threads[3] = {64, 1, 1};
    return run(table, "add_scalar", blocks, threads, {buffer_arg(b), scalar_arg(k), scalar_arg(n)});
}

// Iterations of each invocation of the slow kernel (below llvmpipe's cap of 65535 per loop).
const int32_t kSlowIters = 60000;

// The slow kernel's hash chain, computed on the host.
uint32_t slow_reference(uint32_t start, int32_t i) {
    uint32_t h = start + uint32_t(i);
    for (int32_t k = 0; k < kSlowIters; k++) {
        h = h * 1664525u + 1013904223u;
        h ^= h >> 13;
    }
    return h;
}

// Launches the slow kernel over all of b: kSlowIters steps per element.
int32_t slow(tally_kernel_table *table, Buffer<uint32_t> &b) {
    int32_t n = int32_t(b.data.size());
    int32_t iters = kSlowIters;
    const int32_t blocks[3] = {(n + 63) / 64, 1, 1};
    const int32_t threads[3] = {64, 1, 1};
    return run(table, "slow", blocks, threads, {buffer_arg(b), scalar_arg(iters), scalar_arg(n)});
}

// Sets the environment variable for the scope of the object (and restores it).
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        const char *old = getenv(name);
        had_ = old != nullptr;
        if (had_) {
            old_ = old;
        }
        setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (had_) {
            setenv(name_, old_.c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }

private:
    const char *name_;
    bool had_ = false;
    std::string old_;
};

class VulkanTest : public ::testing::Test {
protected:
    void SetUp() override {
        size_t mark = error_mark();
        iface = vulkan();
        if (!iface) {
            // The reason is reported once per process: remember it for later skips.
            static std::string reason;
            if (reason.empty()) {
                reason = joined(errors_since(mark));
            }
            GTEST_SKIP() << "no Vulkan device: " << reason;
        }
        ASSERT_TRUE(module.load()) << "missing SPIR-V under " << TALLY_VK_SHADER_DIR;
        table = &module.table;
    }
    void TearDown() override {
        if (iface) {
            EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);
        }
    }

    // Uploads b (host dirty first) and checks the dirty bits.
    template <typename T>
    void upload(Buffer<T> &b) {
        tally_buffer_set_host_dirty(&b.buf, true);
        ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, iface), 0);
        EXPECT_FALSE(tally_buffer_get_host_dirty(&b.buf));
        EXPECT_EQ(b.buf.device_interface, iface);
        EXPECT_NE(b.buf.device, 0u);
    }

    // Marks b written by the device and copies it back.
    template <typename T>
    void download(Buffer<T> &b) {
        tally_buffer_set_device_dirty(&b.buf, true);
        ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
        EXPECT_FALSE(tally_buffer_get_device_dirty(&b.buf));
    }

    // Number of elements for which the slow kernel takes about target_ns here.
    int32_t calibrate_slow(uint64_t target_ns) {
        int32_t n = 1024;
        for (;;) {
            Buffer<uint32_t> b(n, 1);
            upload(b);
            uint64_t t0 = now_ns();
            EXPECT_EQ(slow(table, b), 0);
            EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);
            uint64_t t = now_ns() - t0;
            // The first launch also compiles the pipeline: only trust a repeated measurement.
            if (n > 1024 && (t >= target_ns / 8 || n >= (1 << 21))) {
                double want = double(n) * double(target_ns) / double(t > 0 ? t : 1);
                return int32_t(std::max(64.0, std::min(want, double(1 << 22))));
            }
            n *= 4;
        }
    }

    const halide_device_interface_t *iface = nullptr;
    KernelModule module;
    tally_kernel_table *table = nullptr;
};

const int32_t kOneBlock[3] = {1, 1, 1};
const int32_t kOneThread[3] = {1, 1, 1};

// ---- tests -------------------------------------------------------------------------------------

TEST_F(VulkanTest, InterfaceIsNamedVulkanAndStable) {
    EXPECT_STREQ(iface->name, "vulkan");
    EXPECT_EQ(vulkan(), iface);
    EXPECT_EQ(iface->impl, nullptr);
}

TEST_F(VulkanTest, AddScalarRoundTrip) {
    Buffer<int32_t> b(1000);
    for (int32_t i = 0; i < 1000; i++) {
        b.data[size_t(i)] = i;
    }
    upload(b);
    ASSERT_EQ(add_scalar(table, b, 7), 0);
    download(b);
    for (int32_t i = 0; i < 1000; i++) {
        ASSERT_EQ(b.data[size_t(i)], i + 7) << "at " << i;
    }
}

TEST_F(VulkanTest, DirtyBitsDecideWhetherCopiesHappen) {
    Buffer<int32_t> b(64, 10);
    upload(b);
    ASSERT_EQ(add_scalar(table, b, 1), 0);  // device: 11
    // Device not marked dirty: copy_to_host copies nothing.
    ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    EXPECT_EQ(b.data[0], 10);
    // Host changed but not marked dirty: copy_to_device copies nothing.
    std::fill(b.data.begin(), b.data.end(), 100);
    ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, iface), 0);
    download(b);
    EXPECT_EQ(b.data[0], 11);
    EXPECT_EQ(b.data[63], 11);
    // Both dirty is an error.
    tally_buffer_set_host_dirty(&b.buf, true);
    tally_buffer_set_device_dirty(&b.buf, true);
    size_t mark = error_mark();
    EXPECT_EQ(halide_copy_to_host(nullptr, &b.buf), TALLY_ERROR_HOST_AND_DEVICE_DIRTY);
    EXPECT_EQ(errors_since(mark).size(), 1u);
    tally_buffer_set_device_dirty(&b.buf, false);
    std::fill(b.data.begin(), b.data.end(), 100);
    upload(b);
    std::fill(b.data.begin(), b.data.end(), 0);
    download(b);
    EXPECT_EQ(b.data[5], 100);
}

TEST_F(VulkanTest, KernelsInSequenceSeeEachOthersResults) {
    const int32_t n = 777;
    Buffer<int32_t> a(n);
    Buffer<float> out(n, -1.0f);
    for (int32_t i = 0; i < n; i++) {
        a.data[size_t(i)] = i;
    }
    upload(a);
    upload(out);
    // No syncs in between: queue order and the barriers make each launch see the previous one.
    ASSERT_EQ(add_scalar(table, a, 5), 0);
    float scale = 0.5f;
    int32_t count = n;
    const int32_t blocks[3] = {(n + 31) / 32, 1, 1};
    const int32_t threads[3] = {32, 1, 1};
    ASSERT_EQ(run(table, "scale_copy", blocks, threads,
                  {buffer_arg(a), buffer_arg(out), scalar_arg(scale), scalar_arg(count)}),
              0);
    ASSERT_EQ(add_scalar(table, a, 1), 0);
    download(out);
    download(a);
    for (int32_t i = 0; i < n; i++) {
        ASSERT_EQ(out.data[size_t(i)], float(i + 5) * 0.5f) << "at " << i;
        ASSERT_EQ(a.data[size_t(i)], i + 6) << "at " << i;
    }
}

TEST_F(VulkanTest, TwoAndThreeDimensionalGridsAndWorkGroups) {
    struct Case {
        int32_t blocks[3], threads[3];
    };
    const Case cases[] = {{{3, 2, 1}, {8, 4, 1}}, {{2, 3, 2}, {4, 2, 3}}, {{5, 1, 1}, {1, 1, 1}}};
    for (const Case &c : cases) {
        int32_t nx = c.blocks[0] * c.threads[0], ny = c.blocks[1] * c.threads[1],
                nz = c.blocks[2] * c.threads[2];
        Buffer<int32_t> b(nx * ny * nz, -1);
        upload(b);
        ASSERT_EQ(run(table, "grid", c.blocks, c.threads,
                      {buffer_arg(b), scalar_arg(nx), scalar_arg(ny), scalar_arg(nz)}),
                  0);
        download(b);
        for (int32_t z = 0; z < nz; z++) {
            for (int32_t y = 0; y < ny; y++) {
                for (int32_t x = 0; x < nx; x++) {
                    ASSERT_EQ(b.data[size_t(x + nx * (y + ny * z))], x + 1000 * y + 1000000 * z)
                        << "grid " << nx << "x" << ny << "x" << nz << " at " << x << "," << y << ","
                        << z;
                }
            }
        }
    }
}

TEST_F(VulkanTest, ScalarsArePackedAlignedToTheirSize) {
    Buffer<int32_t> b(8, 0);
    upload(b);
    int32_t a = -5;
    int64_t big = int64_t(0x123456789abcdef0ull);
    float c = 3.5f;
    const int32_t threads[3] = {2, 3, 4};
    // int32 at 0, int64 at 8 (aligned), float at 16.
    ASSERT_EQ(run(table, "pack_args", kOneBlock, threads,
                  {buffer_arg(b), scalar_arg(a), scalar_arg(big), scalar_arg(c)}),
              0);
    download(b);
    EXPECT_EQ(b.data[0], -5);
    EXPECT_EQ(uint32_t(b.data[1]), 0x12345678u);
    EXPECT_EQ(uint32_t(b.data[2]), 0x9abcdef0u);
    float got;
    memcpy(&got, &b.data[3], 4);
    EXPECT_EQ(got, 3.5f);
    // The work-group size comes from specialization constants 0, 1, 2.
    EXPECT_EQ(b.data[4], 2);
    EXPECT_EQ(b.data[5], 3);
    EXPECT_EQ(b.data[6], 4);
}

TEST_F(VulkanTest, LaunchErrorsNameWhatFailed) {
    Buffer<int32_t> on_device(16);
    upload(on_device);
    Buffer<int32_t> host_only(16);
    Buffer<int32_t> on_host_interface(16);
    tally_buffer_set_host_dirty(&on_host_interface.buf, true);
    ASSERT_EQ(
        halide_copy_to_device(nullptr, &on_host_interface.buf, halide_host_device_interface()), 0);
    int32_t k = 1, n = 16;
    const int32_t threads[3] = {16, 1, 1};
    struct Case {
        const char *what;
        std::vector<Arg> args;
        const char *kernel;
        int32_t shared;
        const int32_t *threads;
        const char *expect;
        void *table_override;
    };
    tally_kernel_table wrong_abi = *table;
    wrong_abi.abi_version = TALLY_RUNTIME_ABI_VERSION + 100;
    wrong_abi.device_state[TALLY_DEVICE_API_VULKAN] = nullptr;
    const int32_t huge_threads[3] = {100000, 1, 1};
    const Case cases[] = {
        {"unknown kernel",
         {buffer_arg(on_device), scalar_arg(k), scalar_arg(n)},
         "no_such_kernel",
         0,
         threads,
         "no_such_kernel",
         nullptr},
        {"wrong API",
         {buffer_arg(on_device), scalar_arg(k), scalar_arg(n)},
         "cuda_only",
         0,
         threads,
         "CUDA",
         nullptr},
        {"buffer with only host memory",
         {buffer_arg(host_only), scalar_arg(k), scalar_arg(n)},
         "add_scalar",
         0,
         threads,
         "no Vulkan device memory",
         nullptr},
        {"buffer on the host interface",
         {buffer_arg(on_host_interface), scalar_arg(k), scalar_arg(n)},
         "add_scalar",
         0,
         threads,
         "(it is on host)",
         nullptr},
        {"shared memory",
         {buffer_arg(on_device), scalar_arg(k), scalar_arg(n)},
         "add_scalar",
         256,
         threads,
         "shared memory",
         nullptr},
        {"argument count",
         {buffer_arg(on_device), scalar_arg(k)},
         "add_scalar",
         0,
         threads,
         "takes 3 arguments",
         nullptr},
        {"too many threads",
         {buffer_arg(on_device), scalar_arg(k), scalar_arg(n)},
         "add_scalar",
         0,
         huge_threads,
         "add_scalar",
         nullptr},
        {"ABI version",
         {buffer_arg(on_device), scalar_arg(k), scalar_arg(n)},
         "add_scalar",
         0,
         threads,
         "ABI version",
         &wrong_abi},
    };
    for (const Case &c : cases) {
        size_t mark = error_mark();
        tally_kernel_table *t =
            c.table_override ? static_cast<tally_kernel_table *>(c.table_override) : table;
        int32_t r = run(t, c.kernel, kOneBlock, c.threads, c.args, c.shared);
        EXPECT_EQ(r, TALLY_ERROR_DEVICE_RUN_FAILED) << c.what;
        std::vector<std::string> errors = errors_since(mark);
        ASSERT_EQ(errors.size(), 1u) << c.what << ": " << joined(errors);
        EXPECT_NE(errors[0].find("halide_vulkan_run"), std::string::npos) << errors[0];
        EXPECT_NE(errors[0].find(c.expect), std::string::npos) << c.what << ": " << errors[0];
    }
    size_t mark = error_mark();
    EXPECT_EQ(halide_vulkan_run(nullptr, nullptr, "add_scalar", 1, 1, 1, 1, 1, 1, 0, nullptr,
                                nullptr, nullptr),
              TALLY_ERROR_BAD_ARGUMENT);
    EXPECT_EQ(errors_since(mark).size(), 1u);
    // Nothing failed on the device: the buffer still works.
    ASSERT_EQ(add_scalar(table, on_device, 3), 0);
    download(on_device);
    EXPECT_EQ(on_device.data[15], 3);
}

// An empty loop nest (a block or thread extent below 1) launches nothing, as on every device API:
// no error, no launch counted, the buffer untouched.
TEST_F(VulkanTest, EmptyGridsLaunchNothing) {
    const char *names[] = {"overhead", "f"};
    const int32_t kinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC};
    Buffer<int32_t> b(16, 7);
    upload(b);
    void *inst = tally_profiler_start(nullptr, "vk_empty_grid", "host-vulkan-profile", 2, names,
                                      kinds, nullptr, 0);
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 1);
    int32_t k = 1, n = 16;
    const int32_t empty[][3] = {{0, 1, 1}, {1, 1, -1}};
    const int32_t one[3] = {1, 1, 1};
    size_t mark = error_mark();
    for (const int32_t *e : empty) {
        EXPECT_EQ(run(table, "add_scalar", e, one, {buffer_arg(b), scalar_arg(k), scalar_arg(n)}),
                  0);
        EXPECT_EQ(run(table, "add_scalar", one, e, {buffer_arg(b), scalar_arg(k), scalar_arg(n)}),
                  0);
    }
    EXPECT_EQ(errors_since(mark).size(), 0u) << joined(errors_since(mark));
    tally_profiler_end(nullptr, inst);
    download(b);
    EXPECT_EQ(b.data[0], 7);
    tally_pipeline_stats s{};
    ASSERT_EQ(tally_profiler_get_pipeline_stats("vk_empty_grid", &s), 0);
    EXPECT_EQ(s.kernel_launches, 0u);
    tally_profiler_reset();
}

TEST_F(VulkanTest, CopiesOnBuffersWithoutVulkanMemoryFail) {
    Buffer<int32_t> b(4);
    upload(b);
    // A buffer whose device memory belongs to another interface cannot be copied by this one.
    Buffer<int32_t> other(4);
    tally_buffer_set_host_dirty(&other.buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &other.buf, halide_host_device_interface()), 0);
    size_t mark = error_mark();
    EXPECT_EQ(iface->copy_to_host(nullptr, &other.buf), TALLY_ERROR_COPY_TO_HOST_FAILED);
    std::vector<std::string> errors = errors_since(mark);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("no Vulkan device memory"), std::string::npos) << errors[0];
    // halide_copy_to_device moves a buffer between interfaces.
    tally_buffer_set_host_dirty(&other.buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &other.buf, iface), 0);
    EXPECT_EQ(other.buf.device_interface, iface);
}

TEST_F(VulkanTest, EmptyBufferAllocatesAndCopiesNothing) {
    Buffer<int32_t> b(0);
    upload(b);
    download(b);
    EXPECT_EQ(halide_device_free(nullptr, &b.buf), 0);
    EXPECT_EQ(b.buf.device, 0u);
    EXPECT_EQ(b.buf.device_interface, nullptr);
}

tally_device_wait_stats wait_stats() {
    tally_device_wait_stats w{};
    tally_device_get_wait_stats(&w);
    return w;
}

uint64_t total_waits(const tally_device_wait_stats &w) {
    uint64_t n = 0;
    for (uint64_t c : w.waits) {
        n += c;
    }
    return n;
}

// The host gate in front of the Vulkan queue (tally_testing_vulkan_hold), closed for the scope of
// the object: work submitted meanwhile cannot start until open() or the destructor. A watchdog
// opens it after kWatchdog and remembers that it had to, so a runtime that waits for held work
// where it must not fails the test (fired()) instead of hanging it. The bound is not a timing
// assertion: correct code opens the gate itself long before.
class HeldQueue {
public:
    static constexpr std::chrono::seconds kWatchdog{30};
    HeldQueue() {
        EXPECT_EQ(tally_testing_vulkan_hold(1), 0);
        watchdog_ = std::thread([this] {
            std::unique_lock<std::mutex> lock(mutex_);
            if (!cv_.wait_for(lock, kWatchdog, [this] { return opened_; })) {
                fired_ = true;
                opened_ = true;
                EXPECT_EQ(tally_testing_vulkan_hold(0), 0);
            }
        });
    }
    ~HeldQueue() {
        open();
        watchdog_.join();
    }
    void open() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!opened_) {
            opened_ = true;
            EXPECT_EQ(tally_testing_vulkan_hold(0), 0);
        }
        cv_.notify_all();
    }
    bool fired() {
        std::lock_guard<std::mutex> lock(mutex_);
        return fired_;
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool opened_ = false, fired_ = false;
    std::thread watchdog_;
};

// The host gate in mode 2 for the object's scope: work submitted meanwhile does not start until
// the host waits for it (each runtime wait on held work first lets everything queued so far run),
// so a kernel launched in the scope is still pending until then, whatever the device's speed and
// the machine's load. No watchdog is needed: every wait opens the gate.
class HeldUntilWaited {
public:
    HeldUntilWaited() { EXPECT_EQ(tally_testing_vulkan_hold(2), 0); }
    ~HeldUntilWaited() { EXPECT_EQ(tally_testing_vulkan_hold(0), 0); }
    HeldUntilWaited(const HeldUntilWaited &) = delete;
    HeldUntilWaited &operator=(const HeldUntilWaited &) = delete;
};

// A launch returns before its kernel has run: with the queue held, nothing queued can start,
// yet both launches return without a device wait of any kind, and freeing the buffer of the
// second is deferred (the runtime's own fence query finds its submission pending). Once the
// queue opens, the copy to the host is the one wait and sees b's kernel's write.
TEST_F(VulkanTest, LaunchIsAsynchronous) {
    Buffer<int32_t> b(256, 1), c(256, 1);
    upload(b);
    upload(c);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    tally_device_wait_stats before = wait_stats();
    {
        HeldQueue held;
        ASSERT_EQ(add_scalar(table, b, 1), 0);
        ASSERT_EQ(add_scalar(table, c, 1), 0);
        ASSERT_FALSE(held.fired()) << "a launch waited for its kernel";
        tally_device_wait_stats launched = wait_stats();
        EXPECT_EQ(total_waits(launched), total_waits(before)) << "a launch waited";
        ASSERT_EQ(halide_device_free(nullptr, &c.buf), 0);
        tally_device_wait_stats freed = wait_stats();
        EXPECT_EQ(freed.deferred_frees, before.deferred_frees + 1)
            << "the held kernel counted as complete";
        EXPECT_EQ(freed.deferred_frees_released, before.deferred_frees_released);
        EXPECT_EQ(total_waits(freed), total_waits(before));
        held.open();
        download(b);
        EXPECT_FALSE(held.fired());
    }
    EXPECT_EQ(b.data[0], 2);
    EXPECT_EQ(b.data[255], 2);
    tally_device_wait_stats after = wait_stats();
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST],
              before.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST] + 1);
    EXPECT_EQ(total_waits(after), total_waits(before) + 1);
    // c's memory goes once the queue has passed its kernel: certainly after a sync.
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    EXPECT_EQ(wait_stats().deferred_frees_released, before.deferred_frees_released + 1);
}

TEST_F(VulkanTest, CopyToHostAndDeviceSyncWaitForTheKernel) {
    int32_t n = calibrate_slow(100 * 1000 * 1000ull);
    Buffer<uint32_t> b(n, 1);
    upload(b);
    ASSERT_EQ(slow(table, b), 0);
    ASSERT_EQ(halide_device_sync(nullptr, &b.buf), 0);
    // device_sync waited: reading the mapped result now gives the kernel's values.
    download(b);
    EXPECT_EQ(b.data[0], slow_reference(1, 0));
    EXPECT_EQ(b.data[size_t(n - 1)], slow_reference(1, n - 1));
    Buffer<uint32_t> c(n, 2);
    upload(c);
    ASSERT_EQ(slow(table, c), 0);
    download(c);  // blocks until the kernel finished
    EXPECT_EQ(c.data[0], slow_reference(2, 0));
    EXPECT_EQ(c.data[size_t(n - 1)], slow_reference(2, n - 1));
}

TEST_F(VulkanTest, ProfilerCountsLaunchesSyncsAndCopies) {
    tally_profiler_reset();
    const char *names[] = {"overhead", "f", "f (copy to device)", "f (copy to host)"};
    const int32_t kinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_COPY_TO_DEVICE,
                             TALLY_SLOT_COPY_TO_HOST};
    Buffer<int32_t> b(1000, 1);
    void *inst =
        tally_profiler_start(nullptr, "vk_counters", "host-vulkan-profile", 4, names, kinds,
                             nullptr, TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_VULKAN));
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 2);
    tally_buffer_set_host_dirty(&b.buf, true);
    ASSERT_EQ(halide_copy_to_device(nullptr, &b.buf, iface), 0);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    tally_profiler_set_current(inst, 1);
    ASSERT_EQ(add_scalar(table, b, 1), 0);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    ASSERT_EQ(add_scalar(table, b, 1), 0);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    ASSERT_EQ(halide_device_sync(nullptr, &b.buf), 0);
    tally_buffer_set_device_dirty(&b.buf, true);
    tally_profiler_set_current(inst, 3);
    ASSERT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    tally_profiler_set_current(inst, 0);
    // A failed launch is not counted.
    size_t mark = error_mark();
    EXPECT_NE(run(table, "no_such_kernel", kOneBlock, kOneThread, {}), 0);
    EXPECT_EQ(errors_since(mark).size(), 1u);
    tally_profiler_end(nullptr, inst);
    EXPECT_EQ(b.data[999], 3);

    tally_pipeline_stats s{};
    ASSERT_EQ(tally_profiler_get_pipeline_stats("vk_counters", &s), 0);
    EXPECT_EQ(s.kernel_launches, 2u);
    EXPECT_EQ(s.injected_syncs, 3u);
    EXPECT_EQ(s.explicit_syncs, 1u);
    EXPECT_EQ(s.copies_to_device, 1u);
    EXPECT_EQ(s.copies_to_device_bytes, 4000u);
    EXPECT_EQ(s.copies_to_host, 1u);
    EXPECT_EQ(s.copies_to_host_bytes, 4000u);
    tally_slot_stats to_device{}, to_host{};
    ASSERT_EQ(tally_profiler_get_slot_stats("vk_counters", 2, &to_device), 0);
    ASSERT_EQ(tally_profiler_get_slot_stats("vk_counters", 3, &to_host), 0);
    EXPECT_EQ(to_device.copies, 1u);
    EXPECT_EQ(to_device.copy_bytes, 4000u);
    EXPECT_EQ(to_host.copies, 1u);
    EXPECT_EQ(to_host.copy_bytes, 4000u);
    tally_profiler_reset();
}

// The profiler's clock for WaitingForAKernelCountsZeroThreads: moved by hand; it also tells the
// test when the waiting thread has entered its device wait (the runtime reads the clock there,
// after marking the thread waiting, before blocking).
std::atomic<uint64_t> g_clock_ns{1000000000};
std::atomic<bool> g_watch_clock{false}, g_waiter_in_wait{false};
std::thread::id g_waiter;

uint64_t watched_clock() {
    if (g_watch_clock.load() && std::this_thread::get_id() == g_waiter) {
        g_waiter_in_wait.store(true);
    }
    return g_clock_ns.load();
}

// While the thread that launched a kernel waits for it, the kernel's time is billed to its Func
// and the thread counts as not working. Made deterministic: the queue is held, so the sync
// must block; once the waiting thread is inside the wait, another thread moves the profiler's
// clock by 10 x 1 ms, sampling after each step, then opens the queue. The whole run is those
// 10 ms, all billed to f with zero working threads.
TEST_F(VulkanTest, WaitingForAKernelCountsZeroThreads) {
    tally_profiler_reset();
    // The sampler thread keeps ticking; with the clock still, its ticks bill nothing.
    tally_testing_set_clock(watched_clock);
    g_waiter = std::this_thread::get_id();
    g_waiter_in_wait.store(false);
    const char *names[] = {"overhead", "f"};
    Buffer<int32_t> b(256, 1);
    upload(b);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    void *inst =
        tally_profiler_start(nullptr, "vk_wait", "host-vulkan-profile", 2, names, nullptr, nullptr,
                             TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_VULKAN));
    ASSERT_NE(inst, nullptr);
    tally_profiler_set_current(inst, 1);
    bool gate_fired = false;
    {
        HeldQueue held;
        ASSERT_EQ(add_scalar(table, b, 1), 0);
        std::thread sampler([&] {
            while (!g_waiter_in_wait.load() && !held.fired()) {
                std::this_thread::yield();
            }
            for (int i = 0; i < 10; i++) {
                g_clock_ns += 1000000;
                tally_testing_sample_now();
            }
            held.open();
        });
        g_watch_clock.store(true);
        EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);
        g_watch_clock.store(false);
        sampler.join();
        gate_fired = held.fired();
    }
    tally_profiler_set_current(inst, 0);
    tally_profiler_end(nullptr, inst);
    tally_testing_set_clock(nullptr);
    EXPECT_FALSE(gate_fired) << "the sync never reached its device wait";
    tally_slot_stats f{}, overhead{};
    ASSERT_EQ(tally_profiler_get_slot_stats("vk_wait", 1, &f), 0);
    ASSERT_EQ(tally_profiler_get_slot_stats("vk_wait", 0, &overhead), 0);
    tally_pipeline_stats s{};
    ASSERT_EQ(tally_profiler_get_pipeline_stats("vk_wait", &s), 0);
    printf("f billed %.1f ms of %.1f ms, %llu samples, %.2f threads\n", double(f.time_ns) / 1e6,
           double(s.total_ns) / 1e6, (unsigned long long)f.samples, f.average_threads);
    EXPECT_EQ(s.total_ns, 10000000u);
    EXPECT_EQ(f.time_ns, s.total_ns);
    EXPECT_EQ(overhead.time_ns, 0u);
    if (s.flags & TALLY_PROFILER_FLAG_EXACT) {
        EXPECT_EQ(f.samples, 0u);  // exact mode (TALLY_PROFILE_MODE=exact) takes no samples
    } else {
        EXPECT_GE(f.samples, 1u);
    }
    EXPECT_EQ(f.average_threads, 0.0) << "a thread blocked in a device wait counted as working";
    EXPECT_EQ(s.average_threads, 0.0);
    download(b);
    EXPECT_EQ(b.data[7], 2);
    tally_profiler_reset();
}

// No hidden syncs: freeing a buffer that a queued kernel still writes does not wait for the
// kernel (no wait of any kind is counted, and free returns while the kernel is still pending:
// the queue is held until the host waits); the memory is released once the queue has passed the
// kernel: here at the next sync, which is the only wait counted.
TEST_F(VulkanTest, FreeDuringAKernelDoesNotWaitAndReleasesAfterIt) {
    Buffer<uint32_t> b(4096, 1);
    Buffer<int32_t> other(256, 2);
    upload(b);
    upload(other);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    tally_device_wait_stats before = wait_stats();
    tally_device_wait_stats synced{};
    {
        HeldUntilWaited held;
        ASSERT_EQ(slow(table, b), 0);
        ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
        EXPECT_EQ(b.buf.device, 0u);
        tally_device_wait_stats freed = wait_stats();
        EXPECT_EQ(total_waits(freed), total_waits(before)) << "the free waited";
        EXPECT_EQ(freed.deferred_frees, before.deferred_frees + 1)
            << "the held kernel counted as complete: its buffer must be retired";
        EXPECT_EQ(freed.deferred_frees_released, before.deferred_frees_released);
        // Later work on the queue is unaffected, and the sync that follows releases the memory.
        ASSERT_EQ(add_scalar(table, other, 1), 0);
        ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
        synced = wait_stats();
    }
    EXPECT_EQ(synced.deferred_frees_released, before.deferred_frees + 1);
    EXPECT_EQ(synced.waits[TALLY_DEVICE_WAIT_SYNC_GLOBAL],
              before.waits[TALLY_DEVICE_WAIT_SYNC_GLOBAL] + 1);
    EXPECT_EQ(total_waits(synced), total_waits(before) + 1);
    EXPECT_EQ(synced.waits[TALLY_DEVICE_WAIT_FREE], before.waits[TALLY_DEVICE_WAIT_FREE]);
    download(other);
    EXPECT_EQ(other.data[255], 3);
}

// A buffer that no queued work uses is destroyed at once (nothing retired), and freeing one
// retired just before a release leaves nothing behind: the release waits for the device once
// (counted as such) and destroys the retired memory (the validation run checks that every object
// is destroyed exactly once).
TEST_F(VulkanTest, IdleBuffersFreeAtOnceAndReleaseDrainsRetiredOnes) {
    Buffer<int32_t> idle(256, 0), busy(256, 0);
    upload(idle);
    upload(busy);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    tally_device_wait_stats before = wait_stats();
    ASSERT_EQ(halide_device_free(nullptr, &idle.buf), 0);
    tally_device_wait_stats after_idle = wait_stats();
    EXPECT_EQ(after_idle.deferred_frees, before.deferred_frees);
    EXPECT_EQ(total_waits(after_idle), total_waits(before));

    Buffer<uint32_t> b(4096, 1);
    upload(b);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    before = wait_stats();
    // The queue held until the host waits: the kernel is still pending when its buffer is freed
    // and when the release starts; the release opens the gate and waits.
    ASSERT_EQ(tally_testing_vulkan_hold(2), 0);
    ASSERT_EQ(slow(table, b), 0);
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    tally_device_wait_stats released = wait_stats();
    EXPECT_EQ(released.deferred_frees, before.deferred_frees + 1);
    EXPECT_EQ(released.deferred_frees_released, released.deferred_frees);
    EXPECT_EQ(released.waits[TALLY_DEVICE_WAIT_RELEASE],
              before.waits[TALLY_DEVICE_WAIT_RELEASE] + 1);
    EXPECT_EQ(total_waits(released), total_waits(before) + 1);
    // `busy` lost its memory with the release; freeing it only frees the record.
    EXPECT_EQ(halide_device_free(nullptr, &busy.buf), 0);
    iface = vulkan();  // initializes again for TearDown's sync
    ASSERT_NE(iface, nullptr);
}

// The report lists the ledger once a device was used: every reason, and the deferred frees.
TEST_F(VulkanTest, ReportListsTheRuntimesDeviceWaits) {
    tally_profiler_reset();
    const char *names[] = {"overhead", "f"};
    void *inst =
        tally_profiler_start(nullptr, "vk_waits", "host-vulkan-profile", 2, names, nullptr, nullptr,
                             TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_VULKAN));
    ASSERT_NE(inst, nullptr);
    Buffer<int32_t> b(64, 0);
    upload(b);
    ASSERT_EQ(add_scalar(table, b, 1), 0);
    download(b);
    tally_profiler_end(nullptr, inst);
    std::vector<char> text(1 << 16), json(1 << 16);
    ASSERT_GT(tally_profiler_report_to_buffer(text.data(), text.size(), 0), 0);
    ASSERT_GT(tally_profiler_report_to_buffer(json.data(), json.size(), 1), 0);
    std::string t(text.data()), j(json.data());
    EXPECT_NE(t.find("device waits by the runtime"), std::string::npos) << t;
    for (int32_t r = 0; r < TALLY_NUM_DEVICE_WAIT_REASONS; r++) {
        EXPECT_NE(t.find(std::string("    ") + tally_device_wait_reason_name(r)), std::string::npos)
            << tally_device_wait_reason_name(r);
        EXPECT_NE(j.find(std::string("\"") + tally_device_wait_reason_name(r) + "\": {\"count\": "),
                  std::string::npos)
            << j;
    }
    EXPECT_NE(t.find("deferred frees:"), std::string::npos);
    EXPECT_NE(j.find("\"deferred_frees\": "), std::string::npos);
    EXPECT_STREQ(tally_device_wait_reason_name(TALLY_NUM_DEVICE_WAIT_REASONS), "unknown");
    tally_profiler_reset();
}

// ---- profile_timestamps ------------------------------------------------------------------------

// The JSON report's "device_timeline" object of `pipeline`.
tally_test::Json device_timeline_of(const std::string &pipeline) {
    std::vector<char> buf(1 << 18);
    int32_t n = tally_profiler_report_to_buffer(buf.data(), buf.size(), 1);
    EXPECT_GT(n, 0);
    tally_test::Json root;
    std::string error;
    EXPECT_TRUE(tally_test::JsonParser(std::string(buf.data())).parse(&root, &error)) << error;
    for (const tally_test::Json &p : root["pipelines"].items) {
        if (p["name"].str == pipeline) {
            return p["device_timeline"];
        }
    }
    ADD_FAILURE() << "no pipeline " << pipeline;
    return tally_test::Json();
}

const tally_test::Json &func_named(const tally_test::Json &timeline, const std::string &name) {
    for (const tally_test::Json &f : timeline["funcs"].items) {
        if (f["name"].str == name) {
            return f;
        }
    }
    static tally_test::Json none;
    ADD_FAILURE() << "no func " << name;
    return none;
}

// A two-Func run under profile_timestamps, as generated code would drive it: A launches the slow
// kernel `a_launches` times, B launches add_scalar `b_launches` times, nothing syncs, and the copy
// of B's buffer to the host is the only blocking point (in its own slot). Returns the host time
// from A's first launch until the copy returned.
uint64_t run_two_funcs(tally_kernel_table *table, const halide_device_interface_t *iface,
                       const char *pipeline, int32_t n, int a_launches, int b_launches) {
    const char *names[] = {"overhead", "A", "B", "B (copy to host)"};
    const int32_t kinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                             TALLY_SLOT_COPY_TO_HOST};
    Buffer<uint32_t> a(n, 1);
    Buffer<int32_t> b(256, 0);
    tally_buffer_set_host_dirty(&a.buf, true);
    EXPECT_EQ(halide_copy_to_device(nullptr, &a.buf, iface), 0);
    tally_buffer_set_host_dirty(&b.buf, true);
    EXPECT_EQ(halide_copy_to_device(nullptr, &b.buf, iface), 0);
    EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);
    // The flags, not the target string, put the run in timestamps mode: the target here is a
    // label that names neither (the runtime used to look for "profile_timestamps" in it).
    void *inst = tally_profiler_start(nullptr, pipeline, "x86-64-linux", 4, names, kinds, nullptr,
                                      TALLY_PROFILER_FLAG_TIMESTAMPS |
                                          TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_VULKAN));
    EXPECT_NE(inst, nullptr);
    uint64_t t0 = now_ns();
    tally_profiler_set_current(inst, 1);
    for (int i = 0; i < a_launches; i++) {
        EXPECT_EQ(slow(table, a), 0);
    }
    tally_profiler_set_current(inst, 2);
    for (int i = 0; i < b_launches; i++) {
        EXPECT_EQ(add_scalar(table, b, 1), 0);
    }
    tally_profiler_set_current(inst, 3);
    tally_buffer_set_device_dirty(&b.buf, true);
    EXPECT_EQ(halide_copy_to_host(nullptr, &b.buf), 0);
    uint64_t elapsed = now_ns() - t0;
    tally_profiler_set_current(inst, 0);
    tally_profiler_end(nullptr, inst);
    EXPECT_EQ(b.data[255], b_launches);
    return elapsed;
}

// Each kernel is billed to the Func that launched it, not to the slot where its time surfaced:
// the kernel counts per Func equal the launches, the copy slot gets none, and no sync was
// injected or done (the only wait is the copy's). The device intervals lie inside the host
// interval that contained them (a physical bound, whatever the load), their sum is the device
// busy time, the host-wait figure is the copy's wait and the overlap the busy time outside it,
// and every record was billed (none lost, overflowed or unmatched).
TEST_F(VulkanTest, TimestampsBillEachKernelToTheFuncThatLaunchedIt) {
    int32_t n = calibrate_slow(50 * 1000 * 1000ull);
    tally_profiler_reset();
    tally_device_wait_stats before = wait_stats();
    uint64_t host_ns = 0;
    {
        HeldUntilWaited held;  // the kernels are pending when B is copied to the host
        host_ns = run_two_funcs(table, iface, "vk_ts", n, 2, 3);
    }
    tally_device_wait_stats after = wait_stats();
    EXPECT_EQ(total_waits(after), total_waits(before) + 1);
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST],
              before.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST] + 1);

    tally_test::Json t = device_timeline_of("vk_ts");
    const tally_test::Json &a = func_named(t, "A"), &b = func_named(t, "B");
    EXPECT_EQ(a["kernels"].number, 2);
    EXPECT_EQ(b["kernels"].number, 3);
    EXPECT_EQ(func_named(t, "overhead")["kernels"].number, 0);
    EXPECT_EQ(t["kernels"].number, 5);
    EXPECT_GT(a["device_ns"].number, 0);
    EXPECT_GT(b["device_ns"].number, 0);
    EXPECT_EQ(t["device_busy_ns"].number, a["device_ns"].number + b["device_ns"].number);
    // The run's only device wait was the copy's: the host-wait figure is that wait, and the
    // overlap is the device time outside it.
    EXPECT_EQ(t["host_wait_ns"].number, double(after.wait_ns[TALLY_DEVICE_WAIT_COPY_TO_HOST] -
                                               before.wait_ns[TALLY_DEVICE_WAIT_COPY_TO_HOST]));
    EXPECT_EQ(t["overlap_ns"].number,
              std::max(0.0, t["device_busy_ns"].number - t["host_wait_ns"].number));
    EXPECT_LE(t["device_busy_ns"].number, double(host_ns));
    EXPECT_EQ(t["records_lost"].number, 0);
    EXPECT_EQ(t["records_overflowed"].number, 0);
    EXPECT_EQ(t["records_unmatched"].number, 0);
    EXPECT_NE(t["modes"]["vulkan"].str.find("device timestamps"), std::string::npos);
    tally_pipeline_stats ps{};
    ASSERT_EQ(tally_profiler_get_pipeline_stats("vk_ts", &ps), 0);
    EXPECT_EQ(ps.kernel_launches, 5u);
    EXPECT_EQ(ps.injected_syncs, 0u);
    std::vector<char> text(1 << 16);
    ASSERT_GT(tally_profiler_report_to_buffer(text.data(), text.size(), 0), 0);
    printf("%s", text.data());
    EXPECT_NE(std::string(text.data()).find("device busy:"), std::string::npos);
    tally_profiler_reset();
}

// A profile_timestamps run whose kernels are still queued when it ends (held, so by
// construction) and are never waited for by the program: the at-exit report first waits for the
// device (one exit_report wait) and bills them, so the report's kernel count equals the launches.
// Checked in a child process (re-executed, so its Vulkan is its own) that exits with the work
// still held; the parent reads the child's JSON report.
TEST_F(VulkanTest, ExitReportBillsKernelsStillRunningAtRunEnd) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // The child re-runs this test from the start: the path reaches it through the environment.
    const char *inherited = getenv("TALLY_TEST_EXIT_REPORT_JSON");
    const std::string json_path = inherited ? std::string(inherited)
                                            : ::testing::TempDir() + "tally_vk_exit_report_" +
                                                  std::to_string(getpid()) + ".json";
    ScopedEnv path_for_child("TALLY_TEST_EXIT_REPORT_JSON", json_path.c_str());
    std::remove(json_path.c_str());
    const int launches = 3;
    auto child = [&] {
        setenv("TALLY_PROFILE_JSON", json_path.c_str(), 1);
        setenv("TALLY_PROFILE_OUTPUT", "/dev/null", 1);
        tally_profiler_reset();
        Buffer<int32_t> b(256, 0);
        upload(b);
        if (halide_device_sync_global(nullptr, iface) != 0 || tally_testing_vulkan_hold(1) != 0) {
            std::_Exit(3);
        }
        const char *names[] = {"overhead", "f"};
        void *inst = tally_profiler_start(
            nullptr, "vk_exit", "host-profile_timestamps-vulkan", 2, names, nullptr, nullptr,
            TALLY_PROFILER_FLAG_TIMESTAMPS |
                TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_VULKAN));
        tally_profiler_set_current(inst, 1);
        for (int i = 0; i < launches; i++) {
            if (add_scalar(table, b, 1) != 0) {
                std::_Exit(4);
            }
        }
        tally_profiler_set_current(inst, 0);
        tally_profiler_end(nullptr, inst);
        std::exit(0);
    };
    EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
    std::ifstream in(json_path);
    ASSERT_TRUE(in.good()) << "the child wrote no JSON report to " << json_path;
    std::stringstream text;
    text << in.rdbuf();
    std::remove(json_path.c_str());
    tally_test::Json root;
    std::string error;
    ASSERT_TRUE(tally_test::JsonParser(text.str()).parse(&root, &error)) << error;
    const tally_test::Json *timeline = nullptr;
    for (const tally_test::Json &p : root["pipelines"].items) {
        if (p["name"].str == "vk_exit") {
            timeline = &p["device_timeline"];
        }
    }
    ASSERT_NE(timeline, nullptr) << text.str();
    EXPECT_EQ(func_named(*timeline, "f")["kernels"].number, launches) << text.str();
    EXPECT_EQ((*timeline)["kernels"].number, launches);
    EXPECT_EQ((*timeline)["records_lost"].number, 0);
    EXPECT_NE(text.str().find("\"exit_report\": {\"count\": 1"), std::string::npos) << text.str();
}

// More timed launches than one query pool holds, without a blocking point in between: pairs are
// reused as submissions complete (the throttle bounds those in flight), and every one is billed.
TEST_F(VulkanTest, TimestampQueryPairsAreReusedAcrossManyLaunches) {
    tally_profiler_reset();
    run_two_funcs(table, iface, "vk_ts_many", 64, 0, 1200);
    tally_test::Json t = device_timeline_of("vk_ts_many");
    EXPECT_EQ(func_named(t, "B")["kernels"].number, 1200);
    EXPECT_EQ(t["records_lost"].number + t["records_overflowed"].number +
                  t["records_unmatched"].number,
              0);
    tally_profiler_reset();
}

// Staged copies (device memory not mapped) are device commands: timed like kernels and billed to
// their copy slot, listed apart from the Funcs.
TEST_F(VulkanTest, StagedCopiesAreTimedInTheirCopySlot) {
    ScopedEnv staging("TALLY_VULKAN_FORCE_STAGING", "1");
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    iface = vulkan();
    ASSERT_NE(iface, nullptr);
    tally_profiler_reset();
    run_two_funcs(table, iface, "vk_ts_staged", 64, 1, 2);
    tally_test::Json t = device_timeline_of("vk_ts_staged");
    ASSERT_EQ(t["device_copies"].items.size(), 1u);
    const tally_test::Json &copy = t["device_copies"][0];
    EXPECT_EQ(copy["name"].str, "B (copy to host)");
    EXPECT_EQ(copy["copies"].number, 1);
    EXPECT_GT(copy["device_ns"].number, 0);
    EXPECT_EQ(func_named(t, "A")["kernels"].number, 1);
    EXPECT_EQ(func_named(t, "B")["kernels"].number, 2);
    EXPECT_EQ(t["device_busy_ns"].number, func_named(t, "A")["device_ns"].number +
                                              func_named(t, "B")["device_ns"].number +
                                              copy["device_ns"].number);
    tally_profiler_reset();
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);  // the next test maps memory again
}

// Scripted calibrated readings (tally_testing_set_vulkan_calibration): each pairing consumes
// five; ticks, CLOCK_MONOTONIC and maxDeviation.
namespace calibration {
struct Reading {
    uint64_t ticks, host_ns, deviation_ns;
};
std::vector<Reading> script;
size_t next;
int read(uint64_t *ticks, uint64_t *host_ns, uint64_t *deviation_ns) {
    if (next >= script.size()) {
        return 1;
    }
    *ticks = script[next].ticks;
    *host_ns = script[next].host_ns;
    *deviation_ns = script[next].deviation_ns;
    next++;
    return 0;
}
}  // namespace calibration

// Clock pairing with VK_EXT_calibrated_timestamps: at initialization and at the end of each
// profile_timestamps run the back end takes five readings and keeps the one with the smallest
// maxDeviation, wherever it falls (each reading's host time is off by its deviation, as far as
// the extension allows). The host clock runs 200 ppm fast against the device: the end-of-run
// pairing, 2 s of device time later, refits that rate.
TEST_F(VulkanTest, CalibrationKeepsTheTightestReadingAndRefitsTheDrift) {
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    calibration::script.clear();
    calibration::next = 0;
    const uint64_t ticks0 = 1000000000000ull, host0 = 5000000000000ull;
    const uint64_t first_deviations[5] = {900, 300, 100, 700, 500};
    for (uint64_t k = 0; k < 5; k++) {
        // A reading taken k us after the first, its host time late by its deviation.
        calibration::script.push_back({ticks0 + 1000 * k, 0, first_deviations[k]});
    }
    // The first pairing's host times need the device's period: taken as 1 ns per tick here and
    // checked below against what the back end reports.
    for (uint64_t k = 0; k < 5; k++) {
        calibration::script[k].host_ns = host0 + 1000 * k + first_deviations[k];
    }
    tally_testing_set_vulkan_calibration(calibration::read);
    iface = vulkan();
    ASSERT_NE(iface, nullptr);
    tally_testing_device_clock c{};
    ASSERT_EQ(tally_testing_get_device_clock(TALLY_DEVICE_API_VULKAN, &c), 0);
    EXPECT_EQ(c.pairings, 1);
    EXPECT_EQ(c.readings, 5);
    EXPECT_EQ(c.deviation_ns, 100u);
    EXPECT_EQ(c.host_ns, host0 + 2000 + 100);
    ASSERT_GT(c.device_ns, 0);
    const double period = c.device_ns / double(ticks0 + 2000);  // ns per tick
    const double first_device_ns = c.device_ns;

    // The second pairing: 2 s of device time later, on a host clock 200 ppm fast.
    const double drift = 2e-4;
    const uint64_t span_ticks = uint64_t(2e9 / period);
    const uint64_t second_deviations[5] = {400, 200, 600, 50, 800};
    for (uint64_t k = 0; k < 5; k++) {
        uint64_t ticks = ticks0 + 2000 + span_ticks + 1000 * k;
        double device_ns = double(ticks) * period;
        double true_host = double(host0 + 2000) + (device_ns - first_device_ns) * (1 + drift);
        calibration::script.push_back(
            {ticks, uint64_t(true_host + 0.5) + second_deviations[k], second_deviations[k]});
    }
    const char *names[] = {"overhead"};
    void *inst = tally_profiler_start(
        nullptr, "vk_calibration", "host-profile_timestamps-vulkan", 1, names, nullptr, nullptr,
        TALLY_PROFILER_FLAG_TIMESTAMPS | TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_VULKAN));
    ASSERT_NE(inst, nullptr);
    tally_profiler_end(nullptr, inst);
    EXPECT_EQ(calibration::next, 10u) << "the run's end pairs the clocks again";
    ASSERT_EQ(tally_testing_get_device_clock(TALLY_DEVICE_API_VULKAN, &c), 0);
    EXPECT_EQ(c.pairings, 2);
    EXPECT_EQ(c.readings, 10);
    EXPECT_EQ(c.deviation_ns, 50u);
    EXPECT_EQ(c.host_ns, calibration::script[8].host_ns);
    // Off by the two kept readings' deviations (100 and 50 ns) over 2 s at most.
    EXPECT_NEAR(c.rate, 1 + drift, 1e-7);

    tally_testing_set_vulkan_calibration(nullptr);
    tally_profiler_reset();
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);  // the next test pairs the real clocks
    ASSERT_EQ(tally_testing_get_device_clock(TALLY_DEVICE_API_VULKAN, &c), 0);
    EXPECT_EQ(c.pairings, 0) << "a released device's pairings are forgotten";
}

// A device without timestamps falls back to sync mode: one wait after each launch, counted as
// such; the report names the fallback and times no kernel.
TEST_F(VulkanTest, WithoutTimestampsProfileTimestampsFallsBackToSyncs) {
    ScopedEnv no_timestamps("TALLY_VULKAN_NO_TIMESTAMPS", "1");
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    iface = vulkan();
    ASSERT_NE(iface, nullptr);
    tally_profiler_reset();
    tally_device_wait_stats before = wait_stats();
    run_two_funcs(table, iface, "vk_ts_fallback", 64, 1, 2);
    tally_device_wait_stats after = wait_stats();
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK],
              before.waits[TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK] + 3);
    tally_test::Json t = device_timeline_of("vk_ts_fallback");
    EXPECT_NE(t["modes"]["vulkan"].str.find("fell back to a sync"), std::string::npos)
        << t["modes"]["vulkan"].str;
    EXPECT_EQ(t["kernels"].number, 0);
    tally_profiler_reset();
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);  // the next test initializes again
}

TEST_F(VulkanTest, ManyLaunchesWithoutSyncing) {
    Buffer<int32_t> b(128, 0);
    upload(b);
    // More launches than the runtime keeps in flight: the oldest are waited for and reclaimed.
    for (int i = 0; i < 600; i++) {
        ASSERT_EQ(add_scalar(table, b, 1), 0) << "launch " << i;
    }
    download(b);
    EXPECT_EQ(b.data[0], 600);
    EXPECT_EQ(b.data[127], 600);
}

TEST_F(VulkanTest, ConcurrentLaunchesFromSeveralThreads) {
    const int kThreads = 4, kLaunches = 40;
    std::vector<std::unique_ptr<Buffer<int32_t>>> bufs;
    for (int t = 0; t < kThreads; t++) {
        bufs.emplace_back(new Buffer<int32_t>(300, t * 1000));
        upload(*bufs.back());
    }
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kLaunches; i++) {
                if (add_scalar(table, *bufs[size_t(t)], 1) != 0) {
                    failures++;
                }
            }
            tally_buffer_set_device_dirty(&bufs[size_t(t)]->buf, true);
            if (halide_copy_to_host(nullptr, &bufs[size_t(t)]->buf) != 0) {
                failures++;
            }
        });
    }
    for (auto &th : threads) {
        th.join();
    }
    EXPECT_EQ(failures.load(), 0);
    for (int t = 0; t < kThreads; t++) {
        EXPECT_EQ(bufs[size_t(t)]->data[0], t * 1000 + kLaunches);
        EXPECT_EQ(bufs[size_t(t)]->data[299], t * 1000 + kLaunches);
    }
}

TEST_F(VulkanTest, StagingCopiesWhenMemoryIsNotMapped) {
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    {
        ScopedEnv staging("TALLY_VULKAN_FORCE_STAGING", "1");
        ASSERT_EQ(vulkan(), iface);
        const int32_t n = 500;
        Buffer<int32_t> a(n);
        Buffer<float> out(n, -1.0f);
        for (int32_t i = 0; i < n; i++) {
            a.data[size_t(i)] = i;
        }
        upload(a);
        upload(out);
        ASSERT_EQ(add_scalar(table, a, 2), 0);
        float scale = 2.0f;
        int32_t count = n;
        const int32_t blocks[3] = {(n + 63) / 64, 1, 1};
        const int32_t threads[3] = {64, 1, 1};
        ASSERT_EQ(run(table, "scale_copy", blocks, threads,
                      {buffer_arg(a), buffer_arg(out), scalar_arg(scale), scalar_arg(count)}),
                  0);
        // Re-upload while the kernels may still run: the copy is ordered after them.
        for (int32_t i = 0; i < n; i++) {
            a.data[size_t(i)] = -i;
        }
        upload(a);
        ASSERT_EQ(add_scalar(table, a, 1), 0);
        download(out);
        download(a);
        for (int32_t i = 0; i < n; i++) {
            ASSERT_EQ(out.data[size_t(i)], float(i + 2) * 2.0f) << "at " << i;
            ASSERT_EQ(a.data[size_t(i)], 1 - i) << "at " << i;
        }
        ASSERT_EQ(halide_device_free(nullptr, &a.buf), 0);
        ASSERT_EQ(halide_device_free(nullptr, &out.buf), 0);
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    }
    ASSERT_EQ(vulkan(), iface);
}

TEST_F(VulkanTest, ReleaseAndReinitialize) {
    Buffer<int32_t> before(32, 5);
    upload(before);
    ASSERT_EQ(add_scalar(table, before, 1), 0);
    // Release waits for the work, destroys everything; the buffer's memory goes with it.
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    // A second release is harmless.
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    size_t mark = error_mark();
    tally_buffer_set_device_dirty(&before.buf, true);
    EXPECT_EQ(halide_copy_to_host(nullptr, &before.buf), TALLY_ERROR_COPY_TO_HOST_FAILED);
    std::vector<std::string> errors = errors_since(mark);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("halide_device_release"), std::string::npos) << errors[0];
    tally_buffer_set_device_dirty(&before.buf, false);
    EXPECT_EQ(halide_device_free(nullptr, &before.buf), 0);
    EXPECT_EQ(before.buf.device, 0u);

    // The next use initializes again; the same kernel table rebuilds its pipelines.
    ASSERT_EQ(vulkan(), iface);
    Buffer<int32_t> after(32, 5);
    upload(after);
    ASSERT_EQ(add_scalar(table, after, 2), 0);
    download(after);
    EXPECT_EQ(after.data[31], 7);
}

TEST_F(VulkanTest, DisabledVulkanGivesNullInterfaceAndCleanErrors) {
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    {
        ScopedEnv disable("TALLY_VULKAN_DISABLE", "1");
        size_t mark = error_mark();
        EXPECT_EQ(halide_vulkan_device_interface(), nullptr);
        std::vector<std::string> errors = errors_since(mark);
        ASSERT_EQ(errors.size(), 1u) << joined(errors);
        EXPECT_NE(errors[0].find("TALLY_VULKAN_DISABLE"), std::string::npos) << errors[0];
        // Reported once.
        EXPECT_EQ(halide_vulkan_device_interface(), nullptr);
        EXPECT_EQ(errors_since(mark).size(), 1u);

        // Every call that fails returns an error with a message, and nothing crashes.
        int32_t k = 1, n = 4;
        Buffer<int32_t> b(4);
        mark = error_mark();
        EXPECT_EQ(run(table, "add_scalar", kOneBlock, kOneThread,
                      {buffer_arg(b), scalar_arg(k), scalar_arg(n)}),
                  TALLY_ERROR_NO_DEVICE_INTERFACE);
        errors = errors_since(mark);
        ASSERT_EQ(errors.size(), 1u);
        EXPECT_NE(errors[0].find("halide_vulkan_run"), std::string::npos) << errors[0];
        EXPECT_NE(errors[0].find("TALLY_VULKAN_DISABLE"), std::string::npos) << errors[0];
        mark = error_mark();
        EXPECT_EQ(halide_device_malloc(nullptr, &b.buf, iface), TALLY_ERROR_NO_DEVICE_INTERFACE);
        EXPECT_EQ(errors_since(mark).size(), 1u);
        EXPECT_EQ(b.buf.device, 0u);
        EXPECT_EQ(b.buf.device_interface, nullptr);
        EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);
        // Release forgets the failure, so the next attempt (after the switch is gone) succeeds.
        EXPECT_EQ(halide_device_release(nullptr, iface), 0);
    }
    ASSERT_EQ(vulkan(), iface);
}

std::string printed_since(size_t mark) {
    std::lock_guard<std::mutex> lock(message_log().mutex);
    return message_log().printed.substr(std::min(mark, message_log().printed.size()));
}

size_t printed_mark() {
    std::lock_guard<std::mutex> lock(message_log().mutex);
    return message_log().printed.size();
}

/** The lines of `text` that are Tally's warnings (a validation run prints the loader's too). */
std::string warnings_in(const std::string &text) {
    std::istringstream in(text);
    std::string out;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("tally: warning: ", 0) == 0) {
            out += line + "\n";
        }
    }
    return out;
}

// The on/off switches and TALLY_VULKAN_DEBUG follow the environment rule (core/env.c): a value
// that is not one the variable takes is said once per initialization, naming the variable and
// the value, and the switch stays off (before, "maybe" turned each switch on). A word the rule
// takes ("yes") is taken.
TEST_F(VulkanTest, SwitchesFollowTheEnvironmentRule) {
    for (const char *name :
         {"TALLY_VULKAN_DISABLE", "TALLY_VULKAN_FORCE_STAGING", "TALLY_VULKAN_NO_TIMESTAMPS"}) {
        SCOPED_TRACE(name);
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);
        ScopedEnv bad(name, "maybe");
        const size_t mark = printed_mark();
        ASSERT_EQ(vulkan(), iface);  // not disabled
        EXPECT_EQ(warnings_in(printed_since(mark)),
                  std::string("tally: warning: ") + name +
                      "=maybe: expected 1, true, yes, on, 0, false, no or "
                      "off; using off\n");
    }
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    {
        ScopedEnv bad("TALLY_VULKAN_DEBUG", "loud");
        const size_t mark = printed_mark();
        ASSERT_EQ(vulkan(), iface);
        EXPECT_EQ(warnings_in(printed_since(mark)),
                  "tally: warning: TALLY_VULKAN_DEBUG=loud: expected a whole number from 0 to 2; "
                  "using 0 (no messages)\n");
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    }
    {
        ScopedEnv disable("TALLY_VULKAN_DISABLE", "yes");
        EXPECT_EQ(halide_vulkan_device_interface(), nullptr);
        EXPECT_EQ(halide_device_release(nullptr, iface), 0);
    }
    ASSERT_EQ(vulkan(), iface);
}

TEST_F(VulkanTest, DeviceSelectionByIndexOrName) {
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    {
        ScopedEnv select("TALLY_VULKAN_DEVICE", "no-such-vulkan-device");
        size_t mark = error_mark();
        EXPECT_EQ(halide_vulkan_device_interface(), nullptr);
        std::vector<std::string> errors = errors_since(mark);
        ASSERT_EQ(errors.size(), 1u) << joined(errors);
        EXPECT_NE(errors[0].find("TALLY_VULKAN_DEVICE=no-such-vulkan-device"), std::string::npos)
            << errors[0];
        EXPECT_EQ(halide_device_release(nullptr, iface), 0);
    }
    {
        ScopedEnv select("TALLY_VULKAN_DEVICE", "0");
        EXPECT_EQ(vulkan(), iface);
        Buffer<int32_t> b(8, 1);
        upload(b);
        ASSERT_EQ(add_scalar(table, b, 1), 0);
        download(b);
        EXPECT_EQ(b.data[7], 2);
        ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
        EXPECT_EQ(halide_device_release(nullptr, iface), 0);
    }
    ASSERT_EQ(vulkan(), iface);
}

// ---- Halide's own kernels (halide_vulkan_initialize_kernels) -----------------------------------

// Halide 21's Vulkan module around one kernel, as its CodeGen_Vulkan_Dev::encode_module and
// encode_header write it: the module's table (kernel count; the kernel module's size, the entry
// name's length in words and the name), then the kernel module: its binding header (length in
// words, one descriptor set, the entry name, uniform and storage buffer counts, the
// specialization constants, the shared allocations, the work-group size's constant ids) and the
// SPIR-V.
struct HalideKernel {
    std::string entry = "halide_entry";
    uint32_t uniform_buffers = 1, storage_buffers = 2;
    // halide_layout.comp's: the work group's x size (id 1) and the shared tile's length (id 2).
    std::vector<std::pair<std::string, uint32_t>> constants = {{"x_size", 1}, {"tile_n", 2}};
    uint32_t tile_id = 2;                    // the shared tile sized at launch (0: fixed)
    uint32_t local_size_ids[3] = {1, 0, 0};  // y and z fixed at 1 in the SPIR-V
};

void push_name(std::vector<uint32_t> *w, const std::string &name) {
    const size_t words = name.size() / 4 + 1;  // at least one NUL
    std::vector<uint32_t> chars(words, 0);
    memcpy(chars.data(), name.data(), name.size());
    w->push_back(uint32_t(words));
    w->insert(w->end(), chars.begin(), chars.end());
}

std::vector<uint8_t> halide_module(const HalideKernel &k, const std::vector<uint32_t> &spirv) {
    std::vector<uint32_t> header = {1};  // one descriptor set
    push_name(&header, k.entry);
    header.push_back(k.uniform_buffers);
    header.push_back(k.storage_buffers);
    header.push_back(uint32_t(k.constants.size()));
    for (const auto &c : k.constants) {
        push_name(&header, c.first);
        header.push_back(c.second);
        header.push_back(4);
    }
    header.push_back(1);  // one shared allocation: int tile[...]
    push_name(&header, "k1_tile");
    header.push_back(k.tile_id);
    header.push_back(4);
    header.push_back(8);
    header.insert(header.end(), k.local_size_ids, k.local_size_ids + 3);
    header.insert(header.begin(), uint32_t(header.size() + 1));
    std::vector<uint32_t> kernel_module = header;
    kernel_module.insert(kernel_module.end(), spirv.begin(), spirv.end());
    std::vector<uint32_t> words = {1, uint32_t(kernel_module.size() * 4)};
    push_name(&words, k.entry);
    words.insert(words.end(), kernel_module.begin(), kernel_module.end());
    std::vector<uint8_t> bytes(words.size() * 4);
    memcpy(bytes.data(), words.data(), bytes.size());
    return bytes;
}

int32_t initialize(void **state, const std::vector<uint8_t> &module) {
    return halide_vulkan_initialize_kernels(
        nullptr, state, reinterpret_cast<const char *>(module.data()), int32_t(module.size()));
}

// The table holds one entry per kernel module, of Halide's layout, with its storage buffer count
// from the binding header and its code the kernel module inside the given bytes. Needs no device.
TEST(VulkanModuleState, TableListsTheModulesKernelsInHalidesLayout) {
    const std::vector<uint32_t> spirv = load_spirv("halide_layout");
    ASSERT_FALSE(spirv.empty()) << "missing SPIR-V under " << TALLY_VK_SHADER_DIR;
    const std::vector<uint8_t> module = halide_module(HalideKernel(), spirv);
    void *state = nullptr;
    size_t mark = error_mark();
    ASSERT_EQ(initialize(&state, module), 0) << joined(errors_since(mark));
    const tally_kernel_table *t = static_cast<const tally_kernel_table *>(state);
    ASSERT_EQ(t->num_kernels, 1);
    const tally_kernel_source &k = t->kernels[0];
    EXPECT_STREQ(k.name, "halide_entry");
    EXPECT_EQ(k.device_api, TALLY_DEVICE_API_VULKAN);
    EXPECT_EQ(k.layout, TALLY_KERNEL_LAYOUT_HALIDE_VULKAN);
    EXPECT_EQ(k.num_args, -1);
    EXPECT_EQ(k.num_buffers, 2);
    const size_t table_bytes = 4 + 8 + 4 * (strlen("halide_entry") / 4 + 1);
    EXPECT_EQ(k.code, module.data() + table_bytes);
    EXPECT_EQ(k.code_size, uint64_t(module.size() - table_bytes));
    // A later run finds its state set and changes nothing.
    EXPECT_EQ(initialize(&state, {1, 2, 3}), 0);
    EXPECT_EQ(state, static_cast<const void *>(t));
    halide_vulkan_finalize_kernels(nullptr, state);
}

// What is not Halide's module is rejected when the module is initialized, naming what is wrong;
// the state stays NULL.
TEST(VulkanModuleState, ModulesThatAreNotHalidesAreRejectedSayingWhy) {
    const std::vector<uint32_t> spirv = load_spirv("halide_layout");
    ASSERT_FALSE(spirv.empty());
    const std::vector<uint8_t> good = halide_module(HalideKernel(), spirv);
    std::vector<std::pair<std::vector<uint8_t>, std::string>> cases;
    cases.push_back({std::vector<uint8_t>(good.begin(), good.begin() + 2),
                     "the module ends inside the kernel count"});
    std::vector<uint8_t> zero = good;
    zero[0] = 0;
    cases.push_back({zero, "a kernel count of 0"});
    cases.push_back({std::vector<uint8_t>(good.begin(), good.end() - 4),
                     "its table gives 1 kernel modules of"});
    std::vector<uint8_t> no_spirv = good;
    const size_t table_bytes = 4 + 8 + 4 * (strlen("halide_entry") / 4 + 1);
    const uint32_t header_words = tally_hvk_word(&good[table_bytes]);
    no_spirv[table_bytes + 4 * header_words] ^= 0xff;  // the SPIR-V magic number
    cases.push_back({no_spirv, "is not followed by SPIR-V"});
    std::vector<uint8_t> two_sets = good;
    two_sets[table_bytes + 4] = 2;
    cases.push_back({two_sets, "2 descriptor sets"});
    for (const auto &c : cases) {
        SCOPED_TRACE(c.second);
        void *state = nullptr;
        size_t mark = error_mark();
        EXPECT_EQ(initialize(&state, c.first), TALLY_ERROR_BAD_ARGUMENT);
        EXPECT_EQ(state, nullptr);
        std::vector<std::string> errors = errors_since(mark);
        ASSERT_EQ(errors.size(), 1u) << joined(errors);
        EXPECT_NE(errors[0].find("halide_vulkan_initialize_kernels: "), std::string::npos)
            << errors[0];
        EXPECT_NE(errors[0].find(c.second), std::string::npos) << errors[0];
    }
}

// Halide's kernels run as Halide's runtime runs them: the scalars packed in order into the
// uniform buffer (an int64 then two int32), the buffers bound after it, the work-group size and
// the shared tile's length specialized per launch (two sizes: two pipelines, each right).
TEST_F(VulkanTest, HalideKernelsTakeTheirArgumentsAsHalidesRuntimeGivesThem) {
    const std::vector<uint8_t> module = halide_module(HalideKernel(), load_spirv("halide_layout"));
    void *state = nullptr;
    ASSERT_EQ(initialize(&state, module), 0);
    tally_kernel_table *t = static_cast<tally_kernel_table *>(state);
    int64_t big = int64_t(7) << 32 | 0x1234;
    int32_t scale = 3, offset = -2;
    for (int32_t n : {8, 4}) {
        SCOPED_TRACE(n);
        const int32_t groups = 3, total = groups * n;
        Buffer<int32_t> in(total), out(total, -1);
        for (int32_t i = 0; i < total; i++) {
            in.data[size_t(i)] = 10 * i;
        }
        upload(in);
        upload(out);
        const int32_t blocks[3] = {groups, 1, 1}, threads[3] = {n, 1, 1};
        size_t mark = error_mark();
        // Halide's order: buffers, then scalars by size, largest first; the shared bytes the
        // tile's n ints.
        ASSERT_EQ(run(t, "halide_entry", blocks, threads,
                      {buffer_arg(out), buffer_arg(in), scalar_arg(big), scalar_arg(scale),
                       scalar_arg(offset)},
                      n * 4),
                  0)
            << joined(errors_since(mark));
        download(out);
        for (int32_t g = 0; g < total; g++) {
            const int32_t first = g / n * n, mirrored = first + n - 1 - (g - first);
            ASSERT_EQ(out.data[size_t(g)], 10 * mirrored * scale + offset + 7) << "at " << g;
        }
    }
}

// A launch that does not fit the kernel's binding header fails naming what differs, and runs
// nothing: scalars for a kernel whose header has no uniform buffer for them, and a buffer count
// other than the header's.
TEST_F(VulkanTest, HalideKernelLaunchesThatDoNotFitItsHeaderFail) {
    HalideKernel no_uniform;
    no_uniform.uniform_buffers = 0;
    const std::vector<uint8_t> module = halide_module(no_uniform, load_spirv("halide_layout"));
    void *state = nullptr;
    ASSERT_EQ(initialize(&state, module), 0);
    tally_kernel_table *t = static_cast<tally_kernel_table *>(state);
    Buffer<int32_t> in(8), out(8, -1);
    upload(in);
    upload(out);
    int32_t scale = 1;
    const int32_t threads[3] = {8, 1, 1};
    size_t mark = error_mark();
    EXPECT_EQ(run(t, "halide_entry", kOneBlock, threads,
                  {buffer_arg(out), buffer_arg(in), scalar_arg(scale)}, 32),
              TALLY_ERROR_DEVICE_RUN_FAILED);
    std::vector<std::string> errors = errors_since(mark);
    ASSERT_EQ(errors.size(), 1u) << joined(errors);
    EXPECT_NE(errors[0].find("4 bytes of scalar arguments"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("0 uniform buffers"), std::string::npos) << errors[0];
    mark = error_mark();
    EXPECT_EQ(run(t, "halide_entry", kOneBlock, threads, {buffer_arg(out)}, 32),
              TALLY_ERROR_DEVICE_RUN_FAILED);
    errors = errors_since(mark);
    ASSERT_EQ(errors.size(), 1u) << joined(errors);
    EXPECT_NE(errors[0].find("takes 2 buffers, the launch passes 1"), std::string::npos)
        << errors[0];
    download(out);
    EXPECT_EQ(out.data[0], -1);
}

}  // namespace
