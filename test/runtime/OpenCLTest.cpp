// Tests of the OpenCL device interface (runtime/src/device/opencl/) through the runtime's C ABI
// alone, against a real OpenCL implementation (PoCL's CPU device here; no mocks): buffers and
// copies, launches of hand-written OpenCL C kernels from a hand-built tally_kernel_table, the
// launch checks and their messages, profile_timestamps and the clock pairing, the device-wait
// ledger (syncs, frees), release and re-initialization, fault injection; and Halide's module
// state (halide_opencl_initialize_kernels: the kernel table made from a module's OpenCL C source,
// checked without a device, then launched from).
//
// The implementation is loaded once per process and chosen by the environment at each
// initialization, so the suites that need another environment from the start run in their own
// process, each test its own ctest entry (test/runtime/CMakeLists.txt); run by hand, a suite whose
// environment is not set up skips and says what it needs:
//   OpenCLNoLibrary      TALLY_OPENCL_LIBRARY=/nonexistent/libOpenCL.so.1: no ICD loader
//   OpenCLNoPlatform     OCL_ICD_VENDORS=/nonexistent: a loader that finds no platform
//   OpenCLPlatformName   HL_OCL_PLATFORM_NAME=NoSuchPlatform
//   OpenCLNoGpu          HL_OCL_PLATFORM_NAME=Portable, HL_OCL_DEVICE_TYPE=gpu (PoCL: CPU only)
//   OpenCLBadIndex       HL_GPU_DEVICE=x
// OpenCLTest (the rest) skips where no OpenCL device is found, unless
// TALLY_OPENCL_REQUIRE_DEVICE is set (ctest sets it where PoCL is installed): then it fails.
// No assertion depends on how fast the machine is.

#include "Json.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace {

std::string env(const char *name) {
    const char *v = std::getenv(name);
    return v ? v : "";
}

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

// Sets an environment variable for the scope of the object (and restores it).
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
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    const char *name_;
    bool had_ = false;
    std::string old_;
};

// ---- buffers -----------------------------------------------------------------------------------

// A host buffer of T with up to two dimensions: extents, strides and mins as given.
template <typename T>
struct Buffer {
    std::vector<T> data;
    halide_dimension_t dims[2]{};
    halide_buffer_t buf{};

    // Dense 1-D.
    explicit Buffer(int32_t n, T fill = T(), int32_t min = 0)
        : Buffer({n}, {1}, {min}, size_t(n > 0 ? n : 1), 0, fill) {}
    // Any layout over `elements` elements, buf.host at element `host_index` of them.
    Buffer(std::vector<int32_t> extents, std::vector<int32_t> strides, std::vector<int32_t> mins,
           size_t elements, size_t host_index, T fill = T())
        : data(elements, fill) {
        for (size_t d = 0; d < extents.size(); d++) {
            dims[d].min = mins[d];
            dims[d].extent = extents[d];
            dims[d].stride = strides[d];
        }
        buf.host = reinterpret_cast<uint8_t *>(data.data() + host_index);
        buf.type.code = std::is_floating_point<T>::value ? halide_type_float
                        : std::is_signed<T>::value       ? halide_type_int
                                                         : halide_type_uint;
        buf.type.bits = uint8_t(sizeof(T) * 8);
        buf.type.lanes = 1;
        buf.dimensions = int32_t(extents.size());
        buf.dim = dims;
    }
    ~Buffer() {
        if (buf.device_interface) {
            halide_device_free(nullptr, &buf);
        }
    }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
};

// ---- kernels -----------------------------------------------------------------------------------

// The kernels of the tests, in OpenCL C. Buffers first, then scalars (a bool as uchar).
const char *const kAffineSource = R"CL(
__kernel void affine(__global int *out, __global const float *in, int offset, float scale,
                     uchar negate, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    int v = (int)(in[i] * scale) + offset;
    out[i] = negate ? -v : v;
}
)CL";

// Burns `iters` steps per element; the same hash chain as spin_reference.
const char *const kSpinSource = R"CL(
__kernel void spin(__global uint *out, int iters, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    uint h = out[i] + (uint)i;
    for (int k = 0; k < iters; k++) {
        h = h * 1664525u + 1013904223u;
        h ^= h >> 13;
    }
    out[i] = h;
}
)CL";

// Halide's form: one more argument than the launch passes, last, a __local pointer.
const char *const kReverseGroupsSource = R"CL(
__kernel void reverse_groups(__global int *out, __global const int *in,
                             __local int *__shared) {
    int l = get_local_id(0), n = get_local_size(0), g = get_global_id(0);
    __shared[l] = in[g];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[g] = __shared[n - 1 - l] + 1000 * (int)get_group_id(0);
}
)CL";

// Element x of a strided buffer (the kernel gets the element buf->host points at).
const char *const kFillStridedSource = R"CL(
__kernel void fill_strided(__global int *out, int stride, int value) {
    int x = get_global_id(0);
    out[x * stride] = value + x;
}
)CL";

// Does not compile: the build log names the undeclared identifier.
const char *const kBrokenSource = R"CL(
__kernel void broken(__global int *out) {
    out[0] = undefined_thing_here;
}
)CL";

// Takes two arguments; its table entry says three.
const char *const kTwoArgsSource = R"CL(
__kernel void two_args(__global int *out, int value) {
    out[get_global_id(0)] = value;
}
)CL";

const int32_t kSpinIters = 20000;

uint32_t spin_reference(uint32_t start, int32_t i) {
    uint32_t h = start + uint32_t(i);
    for (int32_t k = 0; k < kSpinIters; k++) {
        h = h * 1664525u + 1013904223u;
        h ^= h >> 13;
    }
    return h;
}

// A module's kernel table built by hand, as the compiler would embed it.
struct KernelModule {
    struct Spec {
        const char *name;
        const char *source;
        int32_t num_args, num_buffers;
    };
    std::vector<tally_kernel_source> sources;
    tally_kernel_table table{};

    KernelModule() {
        static const Spec specs[] = {
            {"affine", kAffineSource, 6, 2},
            {"spin", kSpinSource, 3, 1},
            {"reverse_groups", kReverseGroupsSource, 2, 2},
            {"fill_strided", kFillStridedSource, 3, 1},
            {"broken", kBrokenSource, 1, 1},
            {"two_args", kTwoArgsSource, 3, 1},
        };
        for (const Spec &s : specs) {
            tally_kernel_source k{};
            k.name = s.name;
            k.code = reinterpret_cast<const uint8_t *>(s.source);
            k.code_size = strlen(s.source) + 1;
            k.device_api = TALLY_DEVICE_API_OPENCL;
            k.num_args = s.num_args;
            k.num_buffers = s.num_buffers;
            sources.push_back(k);
        }
        table.abi_version = TALLY_RUNTIME_ABI_VERSION;
        table.num_kernels = int32_t(sources.size());
        table.kernels = sources.data();
    }
    KernelModule(const KernelModule &) = delete;
    KernelModule &operator=(const KernelModule &) = delete;
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
    return halide_opencl_run(nullptr, table, name, blocks[0], blocks[1], blocks[2], threads[0],
                             threads[1], threads[2], shared_mem, sizes.data(), values.data(),
                             is_buffer.data());
}

// Launches spin over all of b, 64 work items per group.
int32_t spin(tally_kernel_table *table, Buffer<uint32_t> &b) {
    int32_t n = int32_t(b.data.size()), iters = kSpinIters;
    const int32_t blocks[3] = {(n + 63) / 64, 1, 1};
    const int32_t threads[3] = {64, 1, 1};
    return run(table, "spin", blocks, threads, {buffer_arg(b), scalar_arg(iters), scalar_arg(n)});
}

// Launches affine: out[i] = +-(int(in[i] * scale) + offset).
int32_t affine(tally_kernel_table *table, Buffer<int32_t> &out, Buffer<float> &in, int32_t offset,
               float scale, bool negate, int32_t blocks_x = -1) {
    int32_t n = int32_t(out.data.size());
    uint8_t neg = negate ? 1 : 0;
    const int32_t blocks[3] = {blocks_x >= 0 ? blocks_x : (n + 15) / 16, 1, 1};
    const int32_t threads[3] = {16, 1, 1};
    return run(table, "affine", blocks, threads,
               {buffer_arg(out), buffer_arg(in), scalar_arg(offset), scalar_arg(scale),
                scalar_arg(neg), scalar_arg(n)});
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

// The JSON report's "device_timeline" object of `pipeline`.
tally_test::Json device_timeline_of(const std::string &pipeline) {
    std::string text = tally_test::report_text(1);
    tally_test::Json root;
    std::string error;
    EXPECT_TRUE(tally_test::JsonParser(text).parse(&root, &error)) << error;
    for (const tally_test::Json &p : root["pipelines"].items) {
        if (p["name"].str == pipeline) {
            return p["device_timeline"];
        }
    }
    ADD_FAILURE() << "no pipeline " << pipeline;
    return tally_test::Json();
}

const tally_test::Json &row_named(const tally_test::Json &rows, const std::string &name) {
    for (const tally_test::Json &f : rows.items) {
        if (f["name"].str == name) {
            return f;
        }
    }
    static tally_test::Json none;
    ADD_FAILURE() << "no row " << name;
    return none;
}

// ---- the device --------------------------------------------------------------------------------

class OpenCLTest : public ::testing::Test {
protected:
    void SetUp() override {
        tally_test::MessageCapture capture;
        iface = halide_opencl_device_interface();
        if (!iface) {
            // The reason is reported once per process: remember it for later tests.
            static std::string reason;
            if (reason.empty()) {
                reason = joined(capture.errors());
            }
            if (!env("TALLY_OPENCL_REQUIRE_DEVICE").empty()) {
                FAIL() << "no OpenCL device, though TALLY_OPENCL_REQUIRE_DEVICE is set: " << reason;
            }
            GTEST_SKIP() << "no OpenCL device: " << reason;
        }
        table = &module.table;
    }
    void TearDown() override {
        if (iface) {
            EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);
        }
    }

    // Uploads b (host dirty first).
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

    // Releases OpenCL and initializes it again (the environment is read again).
    void reinitialize() {
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);
        iface = halide_opencl_device_interface();
        ASSERT_NE(iface, nullptr);
    }

    const halide_device_interface_t *iface = nullptr;
    KernelModule module;
    tally_kernel_table *table = nullptr;
};

TEST_F(OpenCLTest, InterfaceIsNamedOpenclAndStable) {
    EXPECT_STREQ(iface->name, "opencl");
    EXPECT_EQ(halide_opencl_device_interface(), iface);
}

// The data goes to the device and back: scribbling on the host in between is undone by the copy
// back. The buffer's span is what travels, whatever its min (here 5) or layout (a 2-D buffer with
// padded rows and nonzero mins: the padding is part of the span and comes back too).
TEST_F(OpenCLTest, CopiesRoundTripOneAndTwoDimensionalBuffers) {
    Buffer<int32_t> a(100, 0, /*min=*/5);
    for (size_t i = 0; i < a.data.size(); i++) {
        a.data[i] = int32_t(i * 7 + 1);
    }
    upload(a);
    std::vector<int32_t> sent = a.data;
    std::fill(a.data.begin(), a.data.end(), -1);
    download(a);
    EXPECT_EQ(a.data, sent);

    // 7 x 5, rows of 8 elements (one of padding), mins (2, 3).
    Buffer<float> b({7, 5}, {1, 8}, {2, 3}, 8 * 4 + 7, 0);
    for (size_t i = 0; i < b.data.size(); i++) {
        b.data[i] = float(i) * 0.5f - 3.0f;
    }
    EXPECT_EQ(tally_buffer_size_in_bytes(&b.buf), uint64_t(8 * 4 + 7) * sizeof(float));
    upload(b);
    std::vector<float> sent_b = b.data;
    std::fill(b.data.begin(), b.data.end(), 99.0f);
    download(b);
    EXPECT_EQ(b.data, sent_b);
}

// A copy to the device returns before the device has the data, yet the host may change its
// buffer at once: what arrives is what the buffer held at the call.
TEST_F(OpenCLTest, CopyToDeviceIsSafeWhenTheHostChangesTheDataRightAfter) {
    Buffer<int32_t> a(1 << 16);
    for (size_t i = 0; i < a.data.size(); i++) {
        a.data[i] = int32_t(i);
    }
    upload(a);
    std::fill(a.data.begin(), a.data.end(), -5);  // before any sync
    download(a);
    for (size_t i = 0; i < a.data.size(); i++) {
        ASSERT_EQ(a.data[i], int32_t(i)) << "element " << i;
    }
}

// Two buffers and an int, a float and a bool (uchar) scalar reach the kernel by value, in order.
TEST_F(OpenCLTest, KernelWithBuffersAndScalarsGivesTheRightOutput) {
    const int32_t n = 100;
    Buffer<float> in(n);
    for (int32_t i = 0; i < n; i++) {
        in.data[i] = float(i) * 1.5f;
    }
    Buffer<int32_t> out(n, -1);
    upload(in);
    upload(out);
    ASSERT_EQ(affine(table, out, in, 7, 2.0f, false), 0);
    download(out);
    for (int32_t i = 0; i < n; i++) {
        ASSERT_EQ(out.data[i], int32_t(float(i) * 1.5f * 2.0f) + 7) << i;
    }
    ASSERT_EQ(affine(table, out, in, -3, 0.5f, true), 0);
    download(out);
    for (int32_t i = 0; i < n; i++) {
        ASSERT_EQ(out.data[i], -(int32_t(float(i) * 1.5f * 0.5f) - 3)) << i;
    }
}

// A kernel whose source takes one argument more than the launch passes, a __local pointer last
// (Halide's form), gets the launch's shared memory there: each work group reverses its slice
// through local memory.
TEST_F(OpenCLTest, TrailingLocalArgumentGetsTheSharedMemory) {
    const int32_t groups = 4, size = 32, n = groups * size;
    Buffer<int32_t> in(n), out(n, -1);
    for (int32_t i = 0; i < n; i++) {
        in.data[i] = i;
    }
    upload(in);
    upload(out);
    const int32_t blocks[3] = {groups, 1, 1}, threads[3] = {size, 1, 1};
    ASSERT_EQ(run(table, "reverse_groups", blocks, threads, {buffer_arg(out), buffer_arg(in)},
                  size * int32_t(sizeof(int32_t))),
              0);
    download(out);
    for (int32_t g = 0; g < groups; g++) {
        for (int32_t l = 0; l < size; l++) {
            ASSERT_EQ(out.data[g * size + l], g * size + (size - 1 - l) + 1000 * g)
                << "group " << g << " item " << l;
        }
    }
}

// An empty grid (any extent 0) launches nothing, successfully: the output stays as it was.
TEST_F(OpenCLTest, EmptyGridLaunchesNothing) {
    Buffer<float> in(16, 1.0f);
    Buffer<int32_t> out(16, 42);
    upload(in);
    upload(out);
    tally_test::MessageCapture capture;
    EXPECT_EQ(affine(table, out, in, 1, 1.0f, false, /*blocks_x=*/0), 0);
    int32_t n = 16, iters = 1;
    const int32_t blocks[3] = {1, 1, 1}, no_threads[3] = {16, 0, 1};
    Buffer<uint32_t> u(16, 3);
    upload(u);
    EXPECT_EQ(
        run(table, "spin", blocks, no_threads, {buffer_arg(u), scalar_arg(iters), scalar_arg(n)}),
        0);
    download(out);
    download(u);
    EXPECT_EQ(out.data, std::vector<int32_t>(16, 42));
    EXPECT_EQ(u.data, std::vector<uint32_t>(16, 3));
    EXPECT_TRUE(capture.errors().empty()) << joined(capture.errors());
}

// Source that does not compile: the launch fails with DEVICE_RUN_FAILED, and the message names
// the kernel and carries the build log's error.
TEST_F(OpenCLTest, BuildFailureReportsTheBuildLog) {
    tally_test::MessageCapture capture;
    Buffer<int32_t> out(4);
    upload(out);
    const int32_t blocks[3] = {1, 1, 1}, threads[3] = {4, 1, 1};
    EXPECT_EQ(run(table, "broken", blocks, threads, {buffer_arg(out)}),
              TALLY_ERROR_DEVICE_RUN_FAILED);
    ASSERT_FALSE(capture.errors().empty());
    const std::string m = capture.errors().back();
    EXPECT_NE(m.find("halide_opencl_run: kernel 'broken'"), std::string::npos) << m;
    EXPECT_NE(m.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << m;
    EXPECT_NE(m.find("undefined_thing_here"), std::string::npos) << m;
    EXPECT_NE(m.find("undeclared identifier"), std::string::npos) << m;
    // Another kernel of the same table still builds and runs.
    Buffer<uint32_t> u(64, 1);
    upload(u);
    EXPECT_EQ(spin(table, u), 0);
    download(u);
    EXPECT_EQ(u.data[5], spin_reference(1, 5));
}

// The kernel's own argument count (CL_KERNEL_NUM_ARGS) must be the launch's or one more: else
// the launch fails before anything is queued, naming both counts.
TEST_F(OpenCLTest, ArgumentCountMismatchNamesBothCounts) {
    tally_test::MessageCapture capture;
    Buffer<int32_t> out(8, 5);
    upload(out);
    int32_t a = 1, b = 2;
    const int32_t blocks[3] = {1, 1, 1}, threads[3] = {8, 1, 1};
    EXPECT_EQ(
        run(table, "two_args", blocks, threads, {buffer_arg(out), scalar_arg(a), scalar_arg(b)}),
        TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "kernel 'two_args': its OpenCL C source takes 2 "
                                           "arguments, the launch passes 3"))
        << joined(capture.errors());
    download(out);
    EXPECT_EQ(out.data, std::vector<int32_t>(8, 5)) << "nothing ran";
}

// A work group the device cannot take fails with a message naming the limit, before anything is
// queued: too many work items in one dimension, or in all.
TEST_F(OpenCLTest, TooLargeWorkGroupIsRejectedClearly) {
    tally_test::MessageCapture capture;
    Buffer<uint32_t> u(64, 1);
    upload(u);
    int32_t n = 64, iters = 1;
    const int32_t blocks[3] = {1, 1, 1};
    const int32_t wide[3] = {1 << 20, 1, 1};
    EXPECT_EQ(run(table, "spin", blocks, wide, {buffer_arg(u), scalar_arg(iters), scalar_arg(n)}),
              TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "kernel 'spin': a work group of 1048576x1x1 threads is "
                                           "too large for OpenCL device"))
        << joined(capture.errors());
    EXPECT_TRUE(contains(capture.errors(), "CL_DEVICE_MAX_WORK_ITEM_SIZES"))
        << joined(capture.errors());
    const int32_t square[3] = {1024, 1024, 1};
    EXPECT_EQ(run(table, "spin", blocks, square, {buffer_arg(u), scalar_arg(iters), scalar_arg(n)}),
              TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "a work group of 1024x1024x1 = 1048576 threads is too "
                                           "large"))
        << joined(capture.errors());
    download(u);
    EXPECT_EQ(u.data, std::vector<uint32_t>(64, 1)) << "nothing ran";
}

// A buffer with a negative stride: the kernel gets the element buf->host points at, a sub-buffer
// of the allocation, when that lies at a multiple of the device's base address alignment (4096
// bytes in: any device's); elsewhere the launch fails, saying why.
TEST_F(OpenCLTest, NegativeStrideBuffersPassTheHostElement) {
    const int32_t n = 1025;  // buf->host is element 1024 of the span: 4096 bytes in
    Buffer<int32_t> b({n}, {-1}, {0}, size_t(n), size_t(n - 1), -1);
    upload(b);
    int32_t stride = -1, value = 100;
    const int32_t blocks[3] = {41, 1, 1}, threads[3] = {25, 1, 1};
    ASSERT_EQ(run(table, "fill_strided", blocks, threads,
                  {buffer_arg(b), scalar_arg(stride), scalar_arg(value)}),
              0);
    download(b);
    for (int32_t x = 0; x < n; x++) {
        ASSERT_EQ(b.data[size_t(n - 1 - x)], value + x) << "x = " << x;
    }

    tally_test::MessageCapture capture;
    Buffer<int32_t> c({2}, {-1}, {0}, 2, 1, -1);  // 4 bytes in
    upload(c);
    const int32_t one[3] = {1, 1, 1}, two[3] = {2, 1, 1};
    EXPECT_EQ(run(table, "fill_strided", one, two,
                  {buffer_arg(c), scalar_arg(stride), scalar_arg(value)}),
              TALLY_ERROR_DEVICE_RUN_FAILED);
    EXPECT_TRUE(contains(capture.errors(), "the buffer's host pointer lies 4 bytes into its span"))
        << joined(capture.errors());
    EXPECT_TRUE(contains(capture.errors(), "CL_DEVICE_MEM_BASE_ADDR_ALIGN"))
        << joined(capture.errors());
}

// Launches from several threads at once on one kernel (its arguments are set under a lock): every
// result is right.
TEST_F(OpenCLTest, ConcurrentLaunchesFromSeveralThreads) {
    const int kThreads = 4, kLaunches = 20;
    std::vector<std::unique_ptr<Buffer<int32_t>>> outs;
    std::vector<std::unique_ptr<Buffer<float>>> ins;
    for (int t = 0; t < kThreads; t++) {
        outs.emplace_back(new Buffer<int32_t>(256, 0));
        ins.emplace_back(new Buffer<float>(256, float(t)));
        upload(*outs.back());
        upload(*ins.back());
    }
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
            for (int k = 0; k < kLaunches; k++) {
                if (affine(table, *outs[t], *ins[t], t * 100 + k, 1.0f, false) != 0) {
                    failures++;
                }
            }
        });
    }
    for (std::thread &th : threads) {
        th.join();
    }
    EXPECT_EQ(failures.load(), 0);
    for (int t = 0; t < kThreads; t++) {
        download(*outs[t]);
        EXPECT_EQ(outs[t]->data[17], t + t * 100 + kLaunches - 1) << "thread " << t;
    }
}

// halide_device_sync_global waits for the queue, counted in the device-wait ledger as a
// sync_global wait (and in the profiler as a sync); a second one, with nothing queued since,
// blocks on nothing and is not counted as a wait.
TEST_F(OpenCLTest, SyncGlobalIsCountedAsADeviceWait) {
    Buffer<uint32_t> u(4096, 2);
    upload(u);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    tally_device_wait_stats before = wait_stats();
    ASSERT_EQ(spin(table, u), 0);
    tally_device_wait_stats launched = wait_stats();
    EXPECT_EQ(total_waits(launched), total_waits(before)) << "a launch waited";
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    tally_device_wait_stats synced = wait_stats();
    EXPECT_EQ(synced.waits[TALLY_DEVICE_WAIT_SYNC_GLOBAL],
              before.waits[TALLY_DEVICE_WAIT_SYNC_GLOBAL] + 1);
    EXPECT_EQ(total_waits(synced), total_waits(before) + 1);
    ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    EXPECT_EQ(total_waits(wait_stats()), total_waits(synced)) << "an idle queue was waited for";
    // A buffer sync waits too, counted as a sync.
    ASSERT_EQ(spin(table, u), 0);
    ASSERT_EQ(halide_device_sync(nullptr, &u.buf), 0);
    EXPECT_EQ(wait_stats().waits[TALLY_DEVICE_WAIT_SYNC], synced.waits[TALLY_DEVICE_WAIT_SYNC] + 1);
    download(u);
    EXPECT_EQ(u.data[9], spin_reference(spin_reference(2, 9), 9));
}

// halide_device_free never waits. With nothing queued (after a copy to the host) the memory is
// freed at once: no deferred free. Right after a launch that uses it, the free is deferred behind
// that work (counted), and counted as released at the next point where the queue is seen idle
// (here the copy of another buffer to the host); no wait is counted for either free.
TEST_F(OpenCLTest, FreesAreImmediateWhenIdleAndDeferredBehindQueuedWork) {
    Buffer<uint32_t> a(256, 1), b(1 << 14, 1), c(64, 3);
    upload(a);
    download(a);
    tally_device_wait_stats before = wait_stats();
    ASSERT_EQ(halide_device_free(nullptr, &a.buf), 0);
    EXPECT_EQ(a.buf.device, 0u);
    tally_device_wait_stats freed = wait_stats();
    EXPECT_EQ(freed.deferred_frees, before.deferred_frees) << "an idle free was deferred";
    EXPECT_EQ(total_waits(freed), total_waits(before));

    upload(b);
    upload(c);
    ASSERT_EQ(spin(table, b), 0);
    ASSERT_EQ(halide_device_free(nullptr, &b.buf), 0);
    EXPECT_EQ(b.buf.device, 0u);
    tally_device_wait_stats deferred = wait_stats();
    EXPECT_EQ(deferred.deferred_frees, freed.deferred_frees + 1);
    EXPECT_EQ(deferred.deferred_frees_released, freed.deferred_frees_released);
    EXPECT_EQ(total_waits(deferred), total_waits(freed)) << "the free waited";

    download(c);
    EXPECT_EQ(c.data, std::vector<uint32_t>(64, 3));
    tally_device_wait_stats idle = wait_stats();
    EXPECT_EQ(idle.deferred_frees_released, freed.deferred_frees_released + 1);
    EXPECT_EQ(idle.waits[TALLY_DEVICE_WAIT_FREE], before.waits[TALLY_DEVICE_WAIT_FREE]);
    EXPECT_EQ(idle.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST],
              deferred.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST] + 1);
}

// A two-Func run under profile_timestamps, as generated code would drive it: A launches spin
// twice, B launches affine three times, nothing syncs, and the copy of B's output to the host is
// the only blocking point (in its own slot). Returns the host time from A's first launch until
// the copy returned.
uint64_t run_two_funcs(tally_kernel_table *table, const halide_device_interface_t *iface,
                       const char *pipeline) {
    const char *names[] = {"overhead", "A", "B", "B (copy to host)"};
    const int32_t kinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                             TALLY_SLOT_COPY_TO_HOST};
    Buffer<uint32_t> a(4096, 1);
    Buffer<float> in(256, 2.0f);
    Buffer<int32_t> out(256, 0);
    for (halide_buffer_t *b : {&a.buf, &in.buf, &out.buf}) {
        tally_buffer_set_host_dirty(b, true);
        EXPECT_EQ(halide_copy_to_device(nullptr, b, iface), 0);
    }
    EXPECT_EQ(halide_device_sync_global(nullptr, iface), 0);
    void *inst = tally_profiler_start(
        nullptr, pipeline, "host-opencl-profile_timestamps", 4, names, kinds, nullptr,
        TALLY_PROFILER_FLAG_TIMESTAMPS | TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_OPENCL));
    EXPECT_NE(inst, nullptr);
    uint64_t t0 = tally_test::monotonic_ns();
    tally_profiler_set_current(inst, 1);
    for (int i = 0; i < 2; i++) {
        EXPECT_EQ(spin(table, a), 0);
    }
    tally_profiler_set_current(inst, 2);
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(affine(table, out, in, i, 1.0f, false), 0);
    }
    tally_profiler_set_current(inst, 3);
    tally_buffer_set_device_dirty(&out.buf, true);
    EXPECT_EQ(halide_copy_to_host(nullptr, &out.buf), 0);
    uint64_t elapsed = tally_test::monotonic_ns() - t0;
    tally_profiler_set_current(inst, 0);
    tally_profiler_end(nullptr, inst);
    EXPECT_EQ(out.data[255], 2 + 2);
    return elapsed;
}

// Each kernel is billed, from its event's profiling timestamps, to the Func that launched it, not
// to the slot where its time surfaced; the copy to the host is timed in its copy slot. No sync
// was injected or done (the only wait is the copy's). The device intervals lie inside the host
// interval that contained them, their sum is the device busy time, every record was billed, and
// the commands were placed on the host clock (the device clock was paired with it: readings).
TEST_F(OpenCLTest, TimestampsBillEachKernelToTheFuncThatLaunchedIt) {
    tally_profiler_reset();
    // Built before the run: the run's launches find their kernels ready.
    {
        Buffer<uint32_t> warm(64, 1);
        Buffer<float> in(16, 1.0f);
        Buffer<int32_t> out(16);
        upload(warm);
        upload(in);
        upload(out);
        ASSERT_EQ(spin(table, warm), 0);
        ASSERT_EQ(affine(table, out, in, 0, 1.0f, false), 0);
        ASSERT_EQ(halide_device_sync_global(nullptr, iface), 0);
    }
    tally_device_wait_stats before = wait_stats();
    uint64_t host_ns = run_two_funcs(table, iface, "ocl_ts");
    tally_device_wait_stats after = wait_stats();
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST],
              before.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST] + 1);
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK],
              before.waits[TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK]);

    tally_test::Json t = device_timeline_of("ocl_ts");
    const tally_test::Json &a = row_named(t["funcs"], "A"), &b = row_named(t["funcs"], "B");
    EXPECT_EQ(a["kernels"].number, 2);
    EXPECT_EQ(b["kernels"].number, 3);
    EXPECT_EQ(row_named(t["funcs"], "overhead")["kernels"].number, 0);
    EXPECT_GT(a["device_ns"].number, 0);
    EXPECT_GT(b["device_ns"].number, 0);
    ASSERT_EQ(t["device_copies"].items.size(), 1u);
    const tally_test::Json &copy = row_named(t["device_copies"], "B (copy to host)");
    EXPECT_EQ(copy["copies"].number, 1);
    EXPECT_EQ(t["device_busy_ns"].number,
              a["device_ns"].number + b["device_ns"].number + copy["device_ns"].number);
    EXPECT_LE(t["device_busy_ns"].number, double(host_ns));
    EXPECT_GT(t["device_span_ns"].number, 0) << "the commands were not placed on the host clock";
    EXPECT_EQ(t["records_lost"].number + t["records_overflowed"].number +
                  t["records_unmatched"].number,
              0);
    // The mode is named under the API's key.
    std::string modes;
    for (const auto &m : t["modes"].members) {
        modes += m.first + ": " + m.second.str + "; ";
    }
    EXPECT_NE(modes.find("device timestamps, clock calibrated"), std::string::npos) << modes;

    tally_pipeline_stats ps{};
    ASSERT_EQ(tally_profiler_get_pipeline_stats("ocl_ts", &ps), 0);
    EXPECT_EQ(ps.kernel_launches, 5u);
    EXPECT_EQ(ps.injected_syncs, 0u);

    tally_testing_device_clock c{};
    ASSERT_EQ(tally_testing_get_device_clock(TALLY_DEVICE_API_OPENCL, &c), 0);
    EXPECT_GE(c.pairings, 2) << "paired at initialization and at the copy to the host";
    EXPECT_GE(c.readings, c.pairings);
    EXPECT_GT(c.device_ns, 0);
    EXPECT_GT(c.host_ns, 0u);
    EXPECT_GT(c.rate, 0);
    tally_profiler_reset();
}

// A profile_timestamps run whose kernels may still be queued when it ends, never waited for by
// the program: at exit, before the report, the back end waits for its queue and bills them, so
// the report's kernel count equals the launches. Checked in a child process (re-executed, so its
// OpenCL is its own) that exits right after the run; the parent reads the child's JSON report.
TEST_F(OpenCLTest, ExitReportBillsKernelsStillQueuedAtRunEnd) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // The child re-runs this test from the start: the path reaches it through the environment.
    const char *inherited = getenv("TALLY_TEST_EXIT_REPORT_JSON");
    const std::string json_path = inherited ? std::string(inherited)
                                            : ::testing::TempDir() + "tally_ocl_exit_report_" +
                                                  std::to_string(getpid()) + ".json";
    ScopedEnv path_for_child("TALLY_TEST_EXIT_REPORT_JSON", json_path.c_str());
    std::remove(json_path.c_str());
    const int launches = 3;
    auto child = [&] {
        setenv("TALLY_PROFILE_JSON", json_path.c_str(), 1);
        setenv("TALLY_PROFILE_OUTPUT", "/dev/null", 1);
        tally_profiler_reset();
        Buffer<uint32_t> b(1 << 15, 1);
        tally_buffer_set_host_dirty(&b.buf, true);
        if (halide_copy_to_device(nullptr, &b.buf, iface) != 0 || spin(table, b) != 0 ||
            halide_device_sync_global(nullptr, iface) != 0) {
            std::_Exit(3);  // built and warm before the run
        }
        const char *names[] = {"overhead", "f"};
        void *inst = tally_profiler_start(
            nullptr, "ocl_exit", "host-opencl-profile_timestamps", 2, names, nullptr, nullptr,
            TALLY_PROFILER_FLAG_TIMESTAMPS |
                TALLY_PROFILER_FLAG_DEVICE_API(TALLY_DEVICE_API_OPENCL));
        tally_profiler_set_current(inst, 1);
        for (int i = 0; i < launches; i++) {
            if (spin(table, b) != 0) {
                std::_Exit(4);
            }
        }
        tally_profiler_set_current(inst, 0);
        tally_profiler_end(nullptr, inst);
        b.buf.device_interface = nullptr;  // left to the exit (no free, no wait)
        std::exit(0);
    };
    EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
    FILE *in = std::fopen(json_path.c_str(), "r");
    ASSERT_NE(in, nullptr) << "the child wrote no JSON report to " << json_path;
    std::string text;
    char chunk[4096];
    for (size_t got; (got = std::fread(chunk, 1, sizeof chunk, in)) > 0;) {
        text.append(chunk, got);
    }
    std::fclose(in);
    std::remove(json_path.c_str());
    tally_test::Json root;
    std::string error;
    ASSERT_TRUE(tally_test::JsonParser(text).parse(&root, &error)) << error;
    const tally_test::Json *timeline = nullptr;
    for (const tally_test::Json &p : root["pipelines"].items) {
        if (p["name"].str == "ocl_exit") {
            timeline = &p["device_timeline"];
        }
    }
    ASSERT_NE(timeline, nullptr) << text;
    EXPECT_EQ(row_named((*timeline)["funcs"], "f")["kernels"].number, launches) << text;
    EXPECT_EQ((*timeline)["kernels"].number, launches);
    EXPECT_EQ((*timeline)["records_lost"].number, 0);
}

// A queue without profiling (TALLY_OPENCL_NO_TIMESTAMPS) cannot time commands: profile_timestamps
// falls back to a sync after each launch, counted as such, and the report says so.
TEST_F(OpenCLTest, WithoutProfilingProfileTimestampsFallsBackToSyncs) {
    {
        ScopedEnv no_timestamps("TALLY_OPENCL_NO_TIMESTAMPS", "1");
        reinitialize();
    }
    tally_profiler_reset();
    tally_device_wait_stats before = wait_stats();
    run_two_funcs(table, iface, "ocl_ts_fallback");
    tally_device_wait_stats after = wait_stats();
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK],
              before.waits[TALLY_DEVICE_WAIT_TIMESTAMP_FALLBACK] + 5);
    tally_test::Json t = device_timeline_of("ocl_ts_fallback");
    std::string modes;
    for (const auto &m : t["modes"].members) {
        modes += m.second.str + "; ";
    }
    EXPECT_NE(modes.find("fell back to a sync"), std::string::npos) << modes;
    EXPECT_EQ(t["kernels"].number, 0);
    tally_profiler_reset();
    reinitialize();  // profiling again for the next tests
}

// The fault injections of the shared paths apply to OpenCL as to every device API: a device
// allocation, a copy, a launch and a sync fail with their codes, touching nothing.
TEST_F(OpenCLTest, InjectedFaultsFailWithTheirCodes) {
    tally_test::MessageCapture capture;
    Buffer<uint32_t> u(64, 4);
    ASSERT_EQ(tally_testing_set_fault("device_malloc"), 0);
    EXPECT_EQ(halide_device_malloc(nullptr, &u.buf, iface), TALLY_ERROR_DEVICE_MALLOC_FAILED);
    EXPECT_EQ(u.buf.device, 0u);
    upload(u);
    ASSERT_EQ(tally_testing_set_fault("launch"), 0);
    EXPECT_EQ(spin(table, u), TALLY_ERROR_DEVICE_RUN_FAILED);
    ASSERT_EQ(tally_testing_set_fault("sync"), 0);
    EXPECT_EQ(halide_device_sync_global(nullptr, iface), TALLY_ERROR_DEVICE_SYNC_FAILED);
    ASSERT_EQ(tally_testing_set_fault("copy_to_host"), 0);
    tally_buffer_set_device_dirty(&u.buf, true);
    EXPECT_EQ(halide_copy_to_host(nullptr, &u.buf), TALLY_ERROR_COPY_TO_HOST_FAILED);
    ASSERT_EQ(tally_testing_set_fault(""), 0);
    EXPECT_TRUE(contains(capture.errors(), "(injected fault)")) << joined(capture.errors());
    ASSERT_EQ(halide_copy_to_host(nullptr, &u.buf), 0);
    EXPECT_EQ(u.data, std::vector<uint32_t>(64, 4)) << "the failed launch ran";
}

// Release finishes the queue and drops every kernel, program, the queue and the context; the
// next use starts again: the interface comes back, kernels build again, and a buffer allocated
// before the release can still be freed.
TEST_F(OpenCLTest, ReleaseThenReuse) {
    Buffer<uint32_t> old_buf(64, 1), u(64, 1);
    upload(old_buf);
    ASSERT_EQ(spin(table, old_buf), 0);
    tally_device_wait_stats before = wait_stats();
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    EXPECT_EQ(wait_stats().waits[TALLY_DEVICE_WAIT_RELEASE],
              before.waits[TALLY_DEVICE_WAIT_RELEASE] + 1)
        << "release waited for the queued launch";
    EXPECT_EQ(halide_device_free(nullptr, &old_buf.buf), 0);
    EXPECT_EQ(old_buf.buf.device, 0u);

    ASSERT_EQ(halide_opencl_device_interface(), iface);
    upload(u);
    ASSERT_EQ(spin(table, u), 0);
    download(u);
    EXPECT_EQ(u.data[3], spin_reference(1, 3));
    // Twice in a row is fine too.
    ASSERT_EQ(halide_device_free(nullptr, &u.buf), 0);
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    ASSERT_EQ(halide_device_release(nullptr, iface), 0);
    ASSERT_EQ(halide_opencl_device_interface(), iface);
}

// The device is chosen by the environment at each initialization: a device index that does not
// exist makes OpenCL unusable, saying so; types naming every kind, or index 0, find the device.
TEST_F(OpenCLTest, DeviceSelectionFollowsTheEnvironment) {
    {
        ScopedEnv index("HL_GPU_DEVICE", "999");
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);
        tally_test::MessageCapture capture;
        EXPECT_EQ(halide_opencl_device_interface(), nullptr);
        EXPECT_TRUE(contains(capture.errors(), "no OpenCL device 999")) << joined(capture.errors());
        EXPECT_TRUE(contains(capture.errors(), "HL_GPU_DEVICE")) << joined(capture.errors());
    }
    {
        ScopedEnv index("HL_GPU_DEVICE", "0");
        ScopedEnv types("HL_OCL_DEVICE_TYPE", "cpu,gpu,acc");
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);
        EXPECT_EQ(halide_opencl_device_interface(), iface);
    }
    reinitialize();
}

// HL_OCL_DEVICE_TYPE and TALLY_OPENCL_NO_TIMESTAMPS follow the environment rule (core/env.c): a
// type that is not cpu, gpu or acc is said, naming the value, and every type is used (before,
// "fpga" silently meant every type and "cpugpu" meant both); a bad switch is said and stays off.
TEST_F(OpenCLTest, DeviceTypeAndSwitchFollowTheEnvironmentRule) {
    struct Case {
        const char *name, *value, *warning;
    };
    const Case cases[] = {
        {"HL_OCL_DEVICE_TYPE", "fpga",
         "tally: warning: HL_OCL_DEVICE_TYPE=fpga: expected cpu, gpu or acc, or a list of them; "
         "using every device type\n"},
        {"HL_OCL_DEVICE_TYPE", "cpugpu",
         "tally: warning: HL_OCL_DEVICE_TYPE=cpugpu: expected cpu, gpu or acc, or a list of them; "
         "using every device type\n"},
        {"HL_OCL_DEVICE_TYPE", "gpu | cpu", ""},
        {"TALLY_OPENCL_NO_TIMESTAMPS", "2",
         "tally: warning: TALLY_OPENCL_NO_TIMESTAMPS=2: expected 1, true, yes, on, 0, false, no "
         "or off; using off\n"},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(std::string(c.name) + "=" + c.value);
        ScopedEnv set(c.name, c.value);
        ASSERT_EQ(halide_device_release(nullptr, iface), 0);
        tally_test::MessageCapture capture;
        EXPECT_EQ(halide_opencl_device_interface(), iface);  // PoCL's CPU device
        EXPECT_EQ(capture.printed(), c.warning);
        EXPECT_TRUE(capture.errors().empty()) << joined(capture.errors());
    }
    reinitialize();
}

// ---- Halide's module state (halide_opencl_initialize_kernels) ---------------------------------

// A module's OpenCL C as Halide's OpenCL back end writes it: helpers, the placeholder kernel
// Halide always emits, a kernel with an attribute between `void` and its name, and one whose last
// argument is the __local pointer for shared memory (declared int16, as Halide declares it). Some
// spellings contain `__kernel void NAME(` without being kernels: `__kernel` inside an identifier
// (my__kernel_offset) or at the start of one (__kernel_bias), a `__kernel` or a `void` that is
// part of a longer word, and whole definitions in comments.
const char kHalideModuleSource[] = R"CL(/*OpenCL C x86-64-linux-opencl*/
#pragma OPENCL FP_CONTRACT ON
#define halide_unused(x)
#define __kernel_bias 3
inline int my__kernel_offset(int v) { return v + __kernel_bias; }
// my__kernel void not_a_kernel(int x) { }
// Nor are these: __kernelvoid fused(int x) { } __kernel voidish(int x) { }
// __kernel void line_commented(int x) { }
/* __kernel void block_commented(int x) { }
   __kernel void block_commented_too(int x) { } */
__kernel void _at_least_one_kernel(int x) { }
__kernel void __attribute__((reqd_work_group_size(8, 1, 1))) scale_add(
 __global int *restrict _out,
 __global const int *restrict _in,
 const int _scale)
{
 int i = get_global_id(0);
 _out[i] = my__kernel_offset(_in[i] * _scale);
}
__kernel void reverse_local(
 __global int *restrict _out,
 __global const int *restrict _in,
 __local int16* __shared)
{
 __local int *s = (__local int *)__shared;
 int l = get_local_id(0), n = get_local_size(0), g = get_global_id(0);
 s[l] = _in[g];
 barrier(CLK_LOCAL_MEM_FENCE);
 _out[g] = s[n - 1 - l] + 1000 * (int)get_group_id(0);
}
)CL";

const int32_t kHalideModuleSize = int32_t(sizeof kHalideModuleSource);  // its NUL included

// The kernel names of a table, in its order.
std::vector<std::string> kernel_names(const tally_kernel_table *t) {
    std::vector<std::string> names;
    for (int32_t i = 0; i < t->num_kernels; i++) {
        names.push_back(t->kernels[i].name ? t->kernels[i].name : "(null)");
    }
    return names;
}

// One entry per `__kernel void NAME(` of the source, in order, each the whole source for OpenCL
// with its argument counts left to the compiled kernel; the identifiers and comments that merely
// contain `__kernel` are not kernels. Needs no device.
TEST(OpenCLModuleState, TableListsExactlyTheSourcesKernels) {
    tally_test::MessageCapture capture;
    void *state = nullptr;
    ASSERT_EQ(
        halide_opencl_initialize_kernels(nullptr, &state, kHalideModuleSource, kHalideModuleSize),
        0)
        << joined(capture.errors());
    ASSERT_NE(state, nullptr);
    const tally_kernel_table *t = static_cast<const tally_kernel_table *>(state);
    EXPECT_EQ(t->abi_version, TALLY_RUNTIME_ABI_VERSION);
    EXPECT_EQ(kernel_names(t),
              (std::vector<std::string>{"_at_least_one_kernel", "scale_add", "reverse_local"}));
    for (int32_t i = 0; i < t->num_kernels; i++) {
        const tally_kernel_source &k = t->kernels[i];
        SCOPED_TRACE(k.name);
        EXPECT_EQ(k.device_api, TALLY_DEVICE_API_OPENCL);
        EXPECT_EQ(k.num_args, -1);
        EXPECT_EQ(k.num_buffers, -1);
        EXPECT_EQ(reinterpret_cast<const char *>(k.code), kHalideModuleSource);
        EXPECT_EQ(k.code_size, uint64_t(kHalideModuleSize));
    }
    for (void *s : t->device_state) {
        EXPECT_EQ(s, nullptr) << "nothing built before the first launch";
    }
    for (const char *not_kernel : {"not_a_kernel", "my__kernel_offset", "fused", "ish",
                                   "line_commented", "block_commented", "block_commented_too"}) {
        EXPECT_EQ(tally_find_kernel(t, not_kernel), nullptr) << not_kernel;
    }
    EXPECT_TRUE(capture.errors().empty()) << joined(capture.errors());
    halide_opencl_finalize_kernels(nullptr, state);
}

// Later runs of a module find its state set: initialization then changes nothing and succeeds
// without reading the source, even when handed another one (Halide passes the same one each run)
// or one it would reject.
TEST(OpenCLModuleState, SecondInitializationChangesNothing) {
    tally_test::MessageCapture capture;
    void *state = nullptr;
    ASSERT_EQ(
        halide_opencl_initialize_kernels(nullptr, &state, kHalideModuleSource, kHalideModuleSize),
        0);
    void *const first = state;
    const std::vector<std::string> names = kernel_names(static_cast<tally_kernel_table *>(first));
    EXPECT_EQ(
        halide_opencl_initialize_kernels(nullptr, &state, kHalideModuleSource, kHalideModuleSize),
        0);
    EXPECT_EQ(halide_opencl_initialize_kernels(nullptr, &state, kTwoArgsSource,
                                               int32_t(strlen(kTwoArgsSource) + 1)),
              0);
    const char no_kernels[] = "int x;";
    EXPECT_EQ(halide_opencl_initialize_kernels(nullptr, &state, no_kernels, sizeof no_kernels), 0);
    EXPECT_EQ(state, first);
    EXPECT_EQ(kernel_names(static_cast<tally_kernel_table *>(state)), names);
    EXPECT_TRUE(capture.errors().empty()) << joined(capture.errors());
}

// A NULL state pointer or source, a size below 1 and a source that defines no kernel fail with
// TALLY_ERROR_BAD_ARGUMENT, each reported once under the routine's name; the state stays NULL.
TEST(OpenCLModuleState, BadArgumentsAreRejectedNamingTheRoutine) {
    const char *const no_kernels[] = {
        "int x;",
        "// my__kernel void not_a_kernel(int x) { }\n#define __kernel_bias 3\n",
        "__kernel int not_void(int x) { return x; }",
    };
    struct Case {
        bool null_state;
        const char *src;
        int32_t size;
        const char *why;
    };
    std::vector<Case> cases = {
        {true, kHalideModuleSource, kHalideModuleSize, "no state pointer"},
        {false, nullptr, 10, "no source"},
        {false, kHalideModuleSource, 0, "an empty source"},
        {false, kHalideModuleSource, -1, "an empty source"},
    };
    for (const char *src : no_kernels) {
        cases.push_back({false, src, int32_t(strlen(src) + 1), "defines no kernel"});
    }
    for (const Case &c : cases) {
        SCOPED_TRACE(std::string(c.why) + ": " + (c.src ? c.src : "(null)"));
        tally_test::MessageCapture capture;
        void *state = nullptr;
        EXPECT_EQ(halide_opencl_initialize_kernels(nullptr, c.null_state ? nullptr : &state, c.src,
                                                   c.size),
                  TALLY_ERROR_BAD_ARGUMENT);
        EXPECT_EQ(state, nullptr);
        ASSERT_EQ(capture.errors().size(), 1u) << joined(capture.errors());
        const std::string m = capture.errors()[0];
        EXPECT_NE(m.find("halide_opencl_initialize_kernels: "), std::string::npos) << m;
        EXPECT_NE(m.find(c.why), std::string::npos) << m;
    }
}

// Concurrent first runs of one module (several threads, one state pointer, all released at once)
// agree on one table: each finds the state its own call left set to the same table. Repeated to
// give the race many chances.
TEST(OpenCLModuleState, ConcurrentFirstInitializationsAgreeOnOneTable) {
    const int kThreads = 8, kRounds = 50;
    for (int round = 0; round < kRounds; round++) {
        void *state = nullptr;
        std::atomic<int> ready{0};
        std::atomic<bool> go{false};
        std::vector<void *> seen(kThreads, nullptr);
        std::vector<int32_t> results(kThreads, -1);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; t++) {
            threads.emplace_back([&, t] {
                ready++;
                while (!go.load()) {
                    std::this_thread::yield();
                }
                results[size_t(t)] = halide_opencl_initialize_kernels(
                    nullptr, &state, kHalideModuleSource, kHalideModuleSize);
                seen[size_t(t)] = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
            });
        }
        while (ready.load() < kThreads) {
            std::this_thread::yield();
        }
        go = true;
        for (std::thread &th : threads) {
            th.join();
        }
        ASSERT_NE(state, nullptr) << "round " << round;
        for (int t = 0; t < kThreads; t++) {
            ASSERT_EQ(results[size_t(t)], 0) << "round " << round << " thread " << t;
            ASSERT_EQ(seen[size_t(t)], state) << "round " << round << " thread " << t;
        }
        EXPECT_EQ(kernel_names(static_cast<tally_kernel_table *>(state)).size(), 3u);
    }
}

// The state is what halide_opencl_run takes: a table made by concurrent first runs launches the
// source's kernels (the one with reqd_work_group_size on work groups of that size, the one with
// Halide's trailing __local argument given the launch's shared memory) with the right output,
// before and after finalize (which gives nothing back). The argument counts come from the
// compiled kernel: a launch passing neither its count nor one fewer fails naming both, and runs
// nothing; a name the table lacks (the comment's) is not found.
TEST_F(OpenCLTest, HalideModuleStateLaunchesTheSourcesKernels) {
    void *state = nullptr;
    {
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; t++) {
            threads.emplace_back([&] {
                EXPECT_EQ(halide_opencl_initialize_kernels(nullptr, &state, kHalideModuleSource,
                                                           kHalideModuleSize),
                          0);
            });
        }
        for (std::thread &th : threads) {
            th.join();
        }
    }
    ASSERT_NE(state, nullptr);
    tally_kernel_table *t = static_cast<tally_kernel_table *>(state);

    const int32_t groups = 4, size = 8, n = groups * size;
    Buffer<int32_t> in(n), out(n, -1);
    for (int32_t i = 0; i < n; i++) {
        in.data[size_t(i)] = i - 5;
    }
    upload(in);
    upload(out);
    const int32_t blocks[3] = {groups, 1, 1}, threads[3] = {size, 1, 1};
    auto scale_add = [&](int32_t scale) {
        return run(t, "scale_add", blocks, threads,
                   {buffer_arg(out), buffer_arg(in), scalar_arg(scale)});
    };
    auto expect_scaled = [&](int32_t scale) {
        download(out);
        for (int32_t i = 0; i < n; i++) {
            ASSERT_EQ(out.data[size_t(i)], (i - 5) * scale + 3) << "scale " << scale << ", " << i;
        }
    };
    ASSERT_EQ(scale_add(7), 0);
    expect_scaled(7);

    ASSERT_EQ(run(t, "reverse_local", blocks, threads, {buffer_arg(out), buffer_arg(in)},
                  size * int32_t(sizeof(int32_t))),
              0);
    download(out);
    for (int32_t g = 0; g < groups; g++) {
        for (int32_t l = 0; l < size; l++) {
            ASSERT_EQ(out.data[size_t(g * size + l)], g * size + (size - 1 - l) - 5 + 1000 * g)
                << "group " << g << " item " << l;
        }
    }

    {
        tally_test::MessageCapture capture;
        int32_t scale = 2, extra = 9;
        EXPECT_EQ(run(t, "scale_add", blocks, threads,
                      {buffer_arg(out), buffer_arg(in), scalar_arg(scale), scalar_arg(extra)}),
                  TALLY_ERROR_DEVICE_RUN_FAILED);
        EXPECT_EQ(run(t, "scale_add", blocks, threads, {buffer_arg(out)}),
                  TALLY_ERROR_DEVICE_RUN_FAILED);
        ASSERT_EQ(capture.errors().size(), 2u) << joined(capture.errors());
        EXPECT_NE(capture.errors()[0].find("halide_opencl_run: kernel 'scale_add': its OpenCL C "
                                           "source takes 3 arguments, the launch passes 4"),
                  std::string::npos)
            << capture.errors()[0];
        EXPECT_NE(capture.errors()[1].find("takes 3 arguments, the launch passes 1"),
                  std::string::npos)
            << capture.errors()[1];
        EXPECT_EQ(run(t, "not_a_kernel", blocks, threads, {buffer_arg(out)}),
                  TALLY_ERROR_DEVICE_RUN_FAILED);
        EXPECT_TRUE(contains(capture.errors(), "no OpenCL kernel 'not_a_kernel' in the module's "
                                               "kernel table (3 kernels)"))
            << joined(capture.errors());
        download(out);
        for (int32_t g = 0; g < groups; g++) {
            ASSERT_EQ(out.data[size_t(g * size)], g * size + (size - 1) - 5 + 1000 * g)
                << "a rejected launch ran";
        }
    }

    halide_opencl_finalize_kernels(nullptr, state);
    ASSERT_EQ(scale_add(-3), 0);
    expect_scaled(-3);
}

// ---- OpenCL unusable -------------------------------------------------------------------------

/** What every unusable-OpenCL suite checks: a NULL interface that says why once, a launch that
 * fails with TALLY_ERROR_NO_DEVICE_INTERFACE naming the routine and the reason each time, and
 * buffer calls on the NULL interface that fail cleanly. */
void expect_unusable(const std::string &reason, const std::string &warning = "") {
    tally_test::MessageCapture capture;
    EXPECT_EQ(halide_opencl_device_interface(), nullptr);
    EXPECT_EQ(capture.printed(), warning);
    EXPECT_TRUE(contains(capture.errors(), reason)) << joined(capture.errors());
    size_t reported = capture.errors().size();
    EXPECT_EQ(halide_opencl_device_interface(), nullptr);
    EXPECT_EQ(capture.errors().size(), reported) << "reported twice: " << joined(capture.errors());

    KernelModule module;
    Buffer<uint32_t> u(8);
    for (int i = 0; i < 2; i++) {
        EXPECT_EQ(spin(&module.table, u), TALLY_ERROR_NO_DEVICE_INTERFACE);
        ASSERT_EQ(capture.errors().size(), reported + size_t(i) + 1);
        const std::string m = capture.errors().back();
        EXPECT_NE(m.find("halide_opencl_run: OpenCL is not available: "), std::string::npos) << m;
        EXPECT_NE(m.find(reason), std::string::npos) << m;
    }
    EXPECT_EQ(halide_device_malloc(nullptr, &u.buf, halide_opencl_device_interface()),
              TALLY_ERROR_NO_DEVICE_INTERFACE);
    tally_buffer_set_host_dirty(&u.buf, true);
    EXPECT_EQ(halide_copy_to_device(nullptr, &u.buf, halide_opencl_device_interface()),
              TALLY_ERROR_NO_DEVICE_INTERFACE);
    EXPECT_EQ(u.buf.device, 0u);
    EXPECT_EQ(u.buf.device_interface, nullptr);
    EXPECT_EQ(halide_device_sync_global(nullptr, halide_opencl_device_interface()),
              TALLY_ERROR_NO_DEVICE_INTERFACE);
}

// A suite that runs only in the environment its ctest entry gives it.
#define TALLY_OPENCL_ENV_SUITE(Suite, var, value, needs_opencl)                                    \
    class Suite : public ::testing::Test {                                                         \
    protected:                                                                                     \
        void SetUp() override {                                                                    \
            if (env(var) != (value)) {                                                             \
                GTEST_SKIP() << "run through ctest (runtime.opencl." #Suite ".*): needs " var      \
                                "=" value;                                                         \
            }                                                                                      \
            if ((needs_opencl) && env("TALLY_OPENCL_REQUIRE_DEVICE").empty()) {                    \
                GTEST_SKIP() << "needs PoCL (TALLY_OPENCL_REQUIRE_DEVICE)";                        \
            }                                                                                      \
        }                                                                                          \
    }

TALLY_OPENCL_ENV_SUITE(OpenCLNoLibrary, "TALLY_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1",
                       false);
TALLY_OPENCL_ENV_SUITE(OpenCLNoPlatform, "OCL_ICD_VENDORS", "/nonexistent", true);
TALLY_OPENCL_ENV_SUITE(OpenCLPlatformName, "HL_OCL_PLATFORM_NAME", "NoSuchPlatform", true);
TALLY_OPENCL_ENV_SUITE(OpenCLNoGpu, "HL_OCL_DEVICE_TYPE", "gpu", true);
TALLY_OPENCL_ENV_SUITE(OpenCLBadIndex, "HL_GPU_DEVICE", "x", true);

TEST_F(OpenCLNoLibrary, InterfaceIsNullAndLaunchesFailNamingTheLibrary) {
    expect_unusable("/nonexistent/libOpenCL.so.1 not found: ");
}

TEST_F(OpenCLNoPlatform, InterfaceIsNullAndLaunchesFailSayingNoPlatform) {
    expect_unusable("no OpenCL platform (clGetPlatformIDs: ");
}

TEST_F(OpenCLPlatformName, InterfaceIsNullAndLaunchesFailNamingTheWantedName) {
    expect_unusable("no OpenCL platform whose name contains 'NoSuchPlatform' "
                    "(HL_OCL_PLATFORM_NAME; the platforms are ");
}

TEST_F(OpenCLNoGpu, InterfaceIsNullAndLaunchesFailNamingTheType) {
    expect_unusable("no OpenCL device of type gpu on platform 'Portable Computing Language'");
}

TEST_F(OpenCLBadIndex, InterfaceIsNullAndLaunchesFailNamingTheValue) {
    expect_unusable("HL_GPU_DEVICE=x is not a device index",
                    "tally: warning: HL_GPU_DEVICE=x: expected a whole number from 0 to "
                    "2147483647; using no OpenCL device: OpenCL is not available\n");
}

}  // namespace
