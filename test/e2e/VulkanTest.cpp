// End-to-end Vulkan tests: the GPU apps (apps/gpu_gpu_cpu, apps/blur_gpu, apps/bounce) lowered for
// `host-vulkan` and `host-vulkan-profile`, their kernels compiled to SPIR-V by the Vulkan back end
// (src/codegen/CodeGen_Vulkan.cpp) and run through the runtime's Vulkan device interface
// (lavapipe on machines without a GPU).
//
// - VulkanCodegen (no device needed): every kernel of every app, for both targets, is written to
//   <build>/test/e2e/vulkan_spirv/ and passes `spirv-val --target-env vulkan1.1`; the
//   CompiledKernel counts match the kernel's arguments; unsupported types and nodes are
//   CompileErrors that name them.
// - VulkanRun: results equal the C++ references (integers exactly, floats within
//   float_tolerance) for host-vulkan, -profile and -profile_timestamps, each size run twice into
//   sentinel-filled outputs; scalar arguments of mixed sizes (float, int, two bools) reach the
//   shader at the offsets the runtime packs them at.
// - VulkanProfile: blur_gpu and bounce report both copy directions with the expected counts;
//   the header counts launches and injected syncs (one per launch, one per copy to the device).
// - VulkanSemantics / VulkanShared: the kernel language against the host back end on the same IR
//   (Euclidean division, casts, math, vectors), and work-group shared memory with a barrier.
// - VulkanAttribution: on gpu_gpu_cpu, with the profiler's clock moving only inside device waits
//   and the queue held until the host waits (deterministic), the sync after each launch bills
//   the wait for A's and B's kernels to A and B; lowered with inject_device_sync = false, A and B
//   are billed nothing and the one wait per run lands on `B (copy to host)`. The real-time
//   comparison with fenced truth is bench/apps_bench.cpp's BM_VulkanTimestamps.
// - VulkanRetarget: one pipeline as Halide 21 printed it for CUDA, OpenCL and Vulkan
//   (test/e2e/inputs/halide21/), unedited, runs on Vulkan for host-vulkan and its profile twins
//   (CUDA and OpenCL retargeted, with a note in the report's target), equal to a reference
//   computed here and bit for bit to each other.
// - VulkanNoHiddenSyncs: gpu_gpu_cpu with A freed right after B's launch (as Halide lowers it),
//   under profile_timestamps, the queue held and the clock moving only in device waits: the free
//   does not wait (device-wait ledger: one wait per run, at the copy to the host; one deferred
//   free per run), so B is billed none of A's and B's kernels (all of it in `B (copy to host)`).
//
// Every device test skips, printing why, when halide_vulkan_device_interface() is NULL. CMake also
// runs the whole binary a second time with VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation, and
// that run fails on any validation message in its output.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "E2EUtil.h"
#include "blur_gpu/reference.h"
#include "bounce/reference.h"
#include "codegen/DeviceKernels.h"
#include "gpu_gpu_cpu/reference.h"
#include "tally/Error.h"
#include "tally/IRMutator.h"
#include "tally_runtime_testing.h"

#ifndef TALLY_SPIRV_VAL
#define TALLY_SPIRV_VAL ""
#endif
#ifndef TALLY_VULKAN_SPIRV_DIR
#error "TALLY_VULKAN_SPIRV_DIR must name a folder for the generated SPIR-V"
#endif

namespace tally_e2e {
namespace {

/** Floats agree when |got - want| <= 1e-4 * max(1, |want|). The GPU may contract a multiply-add
 * into an FMA (Vulkan allows it) where the reference rounds twice; the apps' iterations are
 * contractions, so those differences stay within a few hundred ulps. */
constexpr double float_tolerance = 1e-4;

const std::vector<std::string> gpu_apps = {"gpu_gpu_cpu", "blur_gpu", "bounce"};

/** The Vulkan device, or nullptr after printing why the test is skipped. */
const halide_device_interface_t *vulkan_or_skip_reason(std::string *why) {
    const halide_device_interface_t *vk = halide_vulkan_device_interface();
    if (!vk) {
        *why = "no Vulkan device (halide_vulkan_device_interface() returned NULL); skipping";
    }
    return vk;
}

#define REQUIRE_VULKAN()                                                                           \
    do {                                                                                           \
        std::string why_;                                                                          \
        if (!vulkan_or_skip_reason(&why_)) {                                                       \
            std::printf("%s\n", why_.c_str());                                                     \
            GTEST_SKIP() << why_;                                                                  \
        }                                                                                          \
    } while (0)

template <typename T>
void fill_sentinel(Buffer<T> &img, uint8_t byte) {
    std::memset(img.data(), byte, img.size() * sizeof(T));
}

template <typename T>
::testing::AssertionResult same_integers(const std::vector<T> &got, const std::vector<T> &want) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "sizes differ";
    }
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); i++) {
        if (got[i] != want[i]) {
            if (bad < 5) {
                first << " [" << i << "] got " << int64_t(got[i]) << " want " << int64_t(want[i])
                      << ";";
            }
            bad++;
        }
    }
    if (bad) {
        return ::testing::AssertionFailure()
               << bad << " of " << got.size() << " elements differ:" << first.str();
    }
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult close_floats(const std::vector<float> &got,
                                        const std::vector<float> &want) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "sizes differ";
    }
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); i++) {
        double tol = float_tolerance * std::max(1.0, std::fabs(double(want[i])));
        if (!(std::fabs(double(got[i]) - double(want[i])) <= tol)) {
            if (bad < 5) {
                first << " [" << i << "] got " << got[i] << " want " << want[i] << ";";
            }
            bad++;
        }
    }
    if (bad) {
        return ::testing::AssertionFailure()
               << bad << " of " << got.size() << " elements differ:" << first.str();
    }
    return ::testing::AssertionSuccess();
}

std::unique_ptr<tally::JITModule> compile_with(const tally::Module &m, const std::string &target,
                                               bool inject_sync = true) {
    tally::LowerOptions opts;
    opts.profiling.inject_device_sync = inject_sync;
    return tally::compile_jit(tally::lower(m, tally::Target::parse(target), opts));
}

// --- the apps, ready to run ------------------------------------------------------------------

/** gpu_gpu_cpu(input, C, width, height, reps). */
struct GpuGpuCpu {
    Buffer<float> input, C;
    int32_t width, height, reps;
    GpuGpuCpu(int w, int h, int r, uint64_t seed)
        : input({w, h}), C({w, h}), width(w), height(h), reps(r) {
        Rng rng(seed);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = rng.uniform(-1.0f, 1.0f);
        }
    }
    /** Runs the pipeline; the input counts as just written (its host copy newer than any device
     * copy, Halide's convention), so every run copies it to the device. */
    int run(const tally::JITModule &jit) {
        input.set_host_dirty();
        return jit.call({input, C, width, height, reps});
    }
    ::testing::AssertionResult check() {
        std::vector<float> want(C.size());
        tally_apps::gpu_gpu_cpu_reference(input.data(), want.data(), width, height, reps);
        return close_floats(C.to_vector(), want);
    }
};

/** blur_gpu(input, output, width, height). */
struct BlurGpu {
    Buffer<uint32_t> input, output;
    int32_t width, height;
    BlurGpu(int w, int h, uint64_t seed)
        : input({w + 2, h + 2}), output({w, h}), width(w), height(h) {
        Rng rng(seed);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = rng.next() >> 2;  // below 2^30: sums of three do not wrap
        }
    }
    int run(const tally::JITModule &jit) {
        input.set_host_dirty();
        return jit.call({input, output, width, height});
    }
    ::testing::AssertionResult check() {
        std::vector<uint32_t> want(output.size());
        tally_apps::blur_gpu_reference(input.data(), want.data(), width, height);
        return same_integers(output.to_vector(), want);
    }
};

/** bounce(input, output, n). */
struct Bounce {
    Buffer<int32_t> input, output;
    int32_t n;
    Bounce(int count, uint64_t seed) : input({count}), output({count}), n(count) {
        Rng rng(seed);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = int32_t(rng.below(2000000)) - 1000000;  // negatives exercise Euclid
        }
    }
    int run(const tally::JITModule &jit) {
        input.set_host_dirty();
        return jit.call({input, output, n});
    }
    ::testing::AssertionResult check() {
        std::vector<int32_t> want(output.size());
        tally_apps::bounce_reference(input.data(), want.data(), n);
        return same_integers(output.to_vector(), want);
    }
};

// --- the report --------------------------------------------------------------------------------

std::string report_text() {
    int32_t n = tally_profiler_report_to_buffer(nullptr, 0, 0);
    EXPECT_GE(n, 0);
    std::string s(size_t(std::max(n, 0)) + 1, '\0');
    EXPECT_EQ(tally_profiler_report_to_buffer(&s[0], s.size(), 0), n);
    s.resize(size_t(std::max(n, 0)));
    return s;
}

/** The value after `label` on the report line that starts with "  <label>", or -1. */
int64_t header_value(const std::string &report, const std::string &label) {
    std::istringstream in(report);
    std::string l;
    while (std::getline(in, l)) {
        if (l.compare(0, label.size() + 2, "  " + label) == 0) {
            return std::atoll(l.c_str() + label.size() + 2);
        }
    }
    return -1;
}

/** Slot stats of a pipeline by name: name -> stats. */
std::map<std::string, tally_slot_stats> slots_of(const std::string &pipeline) {
    std::map<std::string, tally_slot_stats> out;
    tally_pipeline_stats ps;
    if (tally_profiler_get_pipeline_stats(pipeline.c_str(), &ps) != 0) {
        return out;
    }
    for (int32_t s = 0; s < ps.num_slots; s++) {
        tally_slot_stats ss;
        if (tally_profiler_get_slot_stats(pipeline.c_str(), s, &ss) == 0) {
            out[ss.name] = ss;
        }
    }
    return out;
}

// --- codegen: SPIR-V validity, counts, diagnostics (no device needed) ---------------------------

class VulkanCodegen : public ::testing::TestWithParam<std::string> {};

// Every kernel of every GPU app, for both targets, passes spirv-val for Vulkan 1.1.
TEST_P(VulkanCodegen, EveryKernelPassesSpirvVal) {
    const std::string app = GetParam();
    for (const char *target : {"host-vulkan", "host-vulkan-profile"}) {
        SCOPED_TRACE(target);
        tally::Module lowered = tally::lower(parse_app(app), tally::Target::parse(target));
        ASSERT_FALSE(lowered.kernels.empty());
        // The host side embeds them (no device needed to compile).
        EXPECT_NO_THROW(tally::compile_jit(lowered));
        std::vector<tally::CompiledKernel> compiled = tally::compile_kernels(lowered);
        ASSERT_EQ(compiled.size(), lowered.kernels.size());
        for (size_t i = 0; i < compiled.size(); i++) {
            const tally::CompiledKernel &c = compiled[i];
            const tally::Kernel &k = lowered.kernels[i];
            SCOPED_TRACE(c.name);
            EXPECT_EQ(c.name, k.name);
            EXPECT_EQ(c.device_api, tally::DeviceAPI::Vulkan);
            EXPECT_EQ(c.num_args, int(k.args.size()));
            int buffers = 0;
            for (const tally::Argument &a : k.args) {
                buffers += a.is_buffer() ? 1 : 0;
            }
            EXPECT_EQ(c.num_buffers, buffers);
            ASSERT_GE(c.code.size(), 20u);
            ASSERT_EQ(c.code.size() % 4, 0u);
            uint32_t magic;
            std::memcpy(&magic, c.code.data(), 4);
            EXPECT_EQ(magic, 0x07230203u);

            std::string path = std::string(TALLY_VULKAN_SPIRV_DIR) + "/" + app + "." + target +
                               "." + c.name + ".spv";
            {
                std::ofstream out(path, std::ios::binary);
                out << c.code;
                ASSERT_TRUE(bool(out)) << "cannot write " << path;
            }
            if (std::string(TALLY_SPIRV_VAL).empty()) {
                std::printf("spirv-val not found at configure time: %s not validated\n",
                            path.c_str());
                continue;
            }
            std::string cmd =
                std::string(TALLY_SPIRV_VAL) + " --target-env vulkan1.1 '" + path + "' 2>&1";
            FILE *p = popen(cmd.c_str(), "r");
            ASSERT_NE(p, nullptr);
            std::string output;
            char buf[512];
            while (std::fgets(buf, sizeof(buf), p)) {
                output += buf;
            }
            int rc = pclose(p);
            EXPECT_EQ(rc, 0) << cmd << "\n" << output;
            std::printf("spirv-val ok: %s (%zu bytes)\n", path.c_str(), c.code.size());
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Apps, VulkanCodegen, ::testing::ValuesIn(gpu_apps),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                             return info.param;
                         });

/** Lowers `text` for host-vulkan and compiles its kernels; returns the CompileError message, or
 * "" if it compiled. */
std::string kernel_compile_error(const std::string &text) {
    tally::Module m = tally::parse_module(text, "test.stmt");
    tally::Module lowered = tally::lower(m, tally::Target::parse("host-vulkan"));
    try {
        tally::compile_kernels(lowered);
    } catch (const tally::CompileError &e) {
        return e.what();
    }
    return "";
}

// Types and nodes the back end cannot compile are user errors that name them.
TEST(VulkanCodegenErrors, UnsupportedTypesAndNodesAreNamed) {
    std::string e = kernel_compile_error(R"(
module name=narrow, target=host-vulkan
external func narrow (out: buffer<uint16, 1>) {
  gpu_block<Vulkan> (b, 0, 4) {
    out[b] = (uint16)7
  }
}
)");
    EXPECT_NE(e.find("uint16"), std::string::npos) << e;
    EXPECT_NE(e.find("narrow_b"), std::string::npos) << e;  // the kernel's name

    e = kernel_compile_error(R"(
module name=wide, target=host-vulkan
external func wide (out: buffer<float64, 1>) {
  gpu_block<Vulkan> (b, 0, 4) {
    out[b] = 1.5
  }
}
)");
    EXPECT_NE(e.find("float64"), std::string::npos) << e;

    e = kernel_compile_error(R"(
module name=asserting, target=host-vulkan
external func asserting (out: buffer<int32, 1>) {
  gpu_block<Vulkan> (b, 0, 4) {
    assert(b < 4, -1)
    out[b] = b
  }
}
)");
    EXPECT_NE(e.find("assert"), std::string::npos) << e;

    e = kernel_compile_error(R"(
module name=calling, target=host-vulkan
external func calling (out: buffer<int32, 1>) {
  gpu_block<Vulkan> (b, 0, 4) {
    out[b] = my_extern_function(b)
  }
}
)");
    EXPECT_NE(e.find("my_extern_function"), std::string::npos) << e;

    e = kernel_compile_error(R"(
module name=dynamic, target=host-vulkan
external func dynamic (out: buffer<int32, 1>, n: int32) {
  gpu_block<Vulkan> (b, 0, 4) {
    allocate scratch[int32 * n]
    scratch[0] = b
    out[b] = scratch[0]
    free scratch
  }
}
)");
    EXPECT_NE(e.find("scratch"), std::string::npos) << e;
    EXPECT_NE(e.find("constant size"), std::string::npos) << e;
}

// --- running on the device -------------------------------------------------------------------

class VulkanRun : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// Results equal the references, each size run twice with fresh inputs into sentinel outputs.
TEST_P(VulkanRun, MatchesReference) {
    REQUIRE_VULKAN();
    const std::string app = std::get<0>(GetParam()), target = std::get<1>(GetParam());
    auto jit = compile_with(parse_app(app), target);
    uint64_t seed = 1;
    if (app == "gpu_gpu_cpu") {
        for (auto wh : {std::make_pair(1, 1), std::make_pair(37, 21), std::make_pair(128, 96)}) {
            for (int run = 0; run < 2; run++) {
                GpuGpuCpu a(wh.first, wh.second, 50 + run, seed++);
                fill_sentinel(a.C, 0xff);
                ASSERT_EQ(a.run(*jit), 0);
                EXPECT_TRUE(a.check()) << wh.first << "x" << wh.second;
            }
        }
    } else if (app == "blur_gpu") {
        for (auto wh : {std::make_pair(1, 1), std::make_pair(13, 7), std::make_pair(101, 37)}) {
            for (int run = 0; run < 2; run++) {
                BlurGpu a(wh.first, wh.second, seed++);
                fill_sentinel(a.output, 0xab);
                ASSERT_EQ(a.run(*jit), 0);
                EXPECT_TRUE(a.check()) << wh.first << "x" << wh.second;
            }
        }
    } else {
        for (int n : {1, 63, 64, 1000}) {
            for (int run = 0; run < 2; run++) {
                Bounce a(n, seed++);
                fill_sentinel(a.output, 0xab);
                ASSERT_EQ(a.run(*jit), 0);
                EXPECT_TRUE(a.check()) << "n = " << n;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Apps, VulkanRun,
    ::testing::Combine(::testing::ValuesIn(gpu_apps),
                       ::testing::Values(std::string("host-vulkan"),
                                         std::string("host-vulkan-profile"),
                                         std::string("host-vulkan-profile_timestamps"))),
    [](const ::testing::TestParamInfo<VulkanRun::ParamType> &info) {
        std::string t = std::get<1>(info.param);
        std::replace(t.begin(), t.end(), '-', '_');
        return std::get<0>(info.param) + "_" + t;
    });

// Halide 21's gpu_tile pipeline (test/e2e/inputs/halide21/README.md) as printed for three GPU
// APIs, run on Vulkan with no edit to the text: the CUDA and OpenCL statements are retargeted
// (retarget-gpu-api), the Vulkan one runs as written. All three compute
//   gblur_x = (in(x-1, y) + in(x, y) + in(x+1, y)) / 3, gblur_y likewise in y, out = 2 gblur_y
// and, being one computation, agree with each other bit for bit.
class VulkanRetarget : public ::testing::TestWithParam<std::string> {};

TEST_P(VulkanRetarget, HalideGpuStatementsRunOnVulkanUnedited) {
    REQUIRE_VULKAN();
    const std::string target = GetParam();
    const int w = 45, h = 37;
    Buffer<float> input({w + 2, h + 2}, {-1, -1});
    Rng rng(7);
    for (size_t i = 0; i < input.size(); i++) {
        input.data()[i] = rng.uniform(-1, 1);
    }
    auto in = [&](int x, int y) { return input.data()[(x + 1) + (y + 1) * (w + 2)]; };
    std::vector<float> want(size_t(w) * h);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            auto bx = [&](int yy) { return (in(x - 1, yy) + in(x, yy) + in(x + 1, yy)) / 3.0f; };
            want[x + y * w] = (bx(y - 1) + bx(y) + bx(y + 1)) / 3.0f * 2.0f;
        }
    }
    std::vector<std::vector<float>> got;
    for (const char *api : {"cuda", "opencl", "vulkan"}) {
        SCOPED_TRACE(api);
        const tally::Module text = tally::parse_module_file(
            std::string(TALLY_E2E_INPUTS_DIR) + "/halide21/gpu_tile." + api + ".conceptual.stmt");
        EXPECT_EQ(text.dialect, tally::Dialect::Halide21);
        const tally::Module m = tally::lower(text, tally::Target::parse(target));
        if (std::string(api) == "vulkan") {
            EXPECT_TRUE(m.notes.empty());
        } else {
            ASSERT_EQ(m.notes.size(), 1u);
            EXPECT_EQ(m.notes[0], std::string("GPU code written for ") +
                                      (api[0] == 'c' ? "CUDA" : "OpenCL") +
                                      " runs on Vulkan, the target's GPU API");
        }
        ASSERT_EQ(m.kernels.size(), 1u);
        EXPECT_EQ(m.kernels[0].device_api, tally::DeviceAPI::Vulkan);
        auto jit = tally::compile_jit(m);
        const bool profiling = tally::Target::parse(target).profiling();
        if (profiling) {
            tally_profiler_reset();
        }
        Buffer<float> out({w, h});
        fill_sentinel(out, 0xff);
        ASSERT_EQ(jit->call({input, out}), 0);
        EXPECT_TRUE(close_floats(out.to_vector(), want));
        got.push_back(out.to_vector());
        if (profiling) {
            const std::string report = report_text();
            const bool noted = report.find(std::string("(GPU code written for ") +
                                           (api[0] == 'c' ? "CUDA" : "OpenCL") +
                                           " runs on Vulkan") != std::string::npos;
            EXPECT_EQ(noted, std::string(api) != "vulkan") << report;
            tally_profiler_reset();
        }
    }
    EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(got[0].data(), got[2].data(), got[0].size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Targets, VulkanRetarget,
                         ::testing::Values(std::string("host-vulkan"),
                                           std::string("host-vulkan-profile"),
                                           std::string("host-vulkan-profile_timestamps")),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                             std::string t = info.param;
                             std::replace(t.begin(), t.end(), '-', '_');
                             return t;
                         });

// Scalars of mixed sizes reach the shader where the runtime packs them: k at byte 0, n at 4,
// two bools at 8 and 9 (one word), off at 12.
TEST(VulkanScalars, MixedSizesArePackedLikeTheRuntime) {
    REQUIRE_VULKAN();
    tally::Module m = tally::parse_module(R"(
module name=scalars, target=host-vulkan
external func scalars (out: buffer<float32, 1>, k: float32, n: int32, f1: bool, f2: bool, off: int32) {
  produce out {
    gpu_block<Vulkan> (out.s0.b, 0, 4) {
      gpu_thread<Vulkan> (out.s0.t, 0, 8) {
        let i = out.s0.b * 8 + out.s0.t
        out[i] = select((uint1)f1, float32(n) * (float32)k, -1.0f) + select((uint1)f2, float32(off + i), 0.5f)
      }
    }
  }
}
)",
                                          "scalars.stmt");
    tally::Module lowered = tally::lower(m, tally::Target::parse("host-vulkan"));
    ASSERT_EQ(lowered.kernels.size(), 1u);
    std::vector<std::string> order;
    for (const tally::Argument &a : lowered.kernels[0].args) {
        order.push_back(a.name);
    }
    // The packing below assumes this order (buffers, then scalars in order of first use).
    ASSERT_EQ(order, (std::vector<std::string>{"out", "f1", "n", "k", "f2", "off"}));
    auto jit = tally::compile_jit(lowered);
    Buffer<float> out({32});
    float k = 1.5f;
    int32_t n = 6, off = 1000;
    for (int f1 = 0; f1 < 2; f1++) {
        for (int f2 = 0; f2 < 2; f2++) {
            fill_sentinel(out, 0xff);
            ASSERT_EQ(jit->call({out, k, n, f1 != 0, f2 != 0, off}), 0);
            for (int i = 0; i < 32; i++) {
                float want = (f1 ? float(n) * k : -1.0f) + (f2 ? float(off + i) : 0.5f);
                EXPECT_EQ(out[size_t(i)], want) << "i " << i << " f1 " << f1 << " f2 " << f2;
            }
        }
    }
}

/** Turns GPU loops into serial host loops: the same computation for the host back end. */
class GpuLoopsToSerial : public tally::IRMutator {
public:
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::For *op) override {
        tally::Stmt body = mutate(op->body);
        if (op->for_type == tally::ForType::GPUBlock || op->for_type == tally::ForType::GPUThread) {
            return tally::For::make(op->name, op->min, op->extent, tally::ForType::Serial,
                                    tally::DeviceAPI::None, body);
        }
        return tally::For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
    }
};

// The kernel language's semantics against the host back end's, on the same IR: Euclidean
// division and modulo with negative and zero divisors (and INT_MIN / -1), unsigned division by
// zero, float modulo, min/max, select, casts, shifts, bitwise ops, math calls, and a 3-lane
// vector (ramp, broadcast) scalarized by the back end. Integers must be equal; floats within
// float_tolerance (Vulkan allows a few ulps for division and sqrt).
TEST(VulkanSemantics, KernelsComputeWhatTheHostComputes) {
    REQUIRE_VULKAN();
    const char *text = R"(
module name=sem, target=host-vulkan
external func sem (a: buffer<int32, 1>, b: buffer<int32, 1>, f: buffer<float32, 1>, oi: buffer<int32, 1>, of: buffer<float32, 1>, ou: buffer<uint32, 1>, n: int32) {
  produce oi {
    gpu_block<Vulkan> (blk, 0, (n + 31) / 32) {
      gpu_thread<Vulkan> (thr, 0, 32) {
        let i = blk * 32 + thr
        if (i < n) {
          let x = (int32)a[i]
          let y = (int32)b[i]
          let g = (float32)f[i]
          oi[i * 8] = x / y
          oi[i * 8 + 1] = x % y
          oi[i * 8 + 2] = min(x, y) - max(x, y) * 3
          oi[i * 8 + 3] = select((x < y) && !(x == 0), x, y)
          oi[i * 8 + 4] = int32(g * 100.0f) + int32(uint1(y))
          oi[ramp(i * 8 + 5, 1, 3)] = ramp(x, y, 3) / x3(7) + ramp(y, 1, 3) % x3(4)
          of[i * 4] = float32(x) / float32(select(y == 0, 1, y))
          of[i * 4 + 1] = g % 1.5f
          of[i * 4 + 2] = (float32)sqrt_f32((float32)abs(g)) + (float32)floor_f32(g * 3.0f)
          of[i * 4 + 3] = max(g, -2.0f) * float32(uint32(y) % (uint32)5)
          ou[i * 4] = uint32(x) / uint32(y)
          ou[i * 4 + 1] = uint32(x) % uint32(y)
          ou[i * 4 + 2] = (uint32)shift_right(uint32(x), (uint32)3) + (uint32)shift_left(uint32(y), (uint32)2)
          ou[i * 4 + 3] = (uint32)bitwise_xor(uint32(x), (uint32)bitwise_and(uint32(y), (uint32)255))
        }
      }
    }
  }
}
)";
    tally::Module m = tally::parse_module(text, "sem.stmt");
    tally::Module host = m;
    for (tally::LoweredFunc &fn : host.functions) {
        fn.body = GpuLoopsToSerial().mutate(fn.body);
    }
    auto gpu = compile_with(m, "host-vulkan");
    auto cpu = compile_with(host, "host");

    const int n = 300;
    Buffer<int32_t> a({n}), b({n});
    Buffer<float> f({n});
    Rng rng(5);
    for (int i = 0; i < n; i++) {
        a[size_t(i)] = int32_t(rng.below(2001)) - 1000;
        b[size_t(i)] = int32_t(rng.below(21)) - 10;  // zeros and negative divisors included
        f[size_t(i)] = rng.uniform(-10.0f, 10.0f);
    }
    a[0] = INT32_MIN;
    b[0] = -1;
    a[1] = INT32_MIN;
    b[1] = 7;
    int32_t count = n;
    struct Out {
        Buffer<int32_t> oi{{8 * n}};
        Buffer<float> of{{4 * n}};
        Buffer<uint32_t> ou{{4 * n}};
    } out_gpu, out_cpu;
    ASSERT_EQ(gpu->call({a, b, f, out_gpu.oi, out_gpu.of, out_gpu.ou, count}), 0);
    ASSERT_EQ(cpu->call({a, b, f, out_cpu.oi, out_cpu.of, out_cpu.ou, count}), 0);
    EXPECT_TRUE(same_integers(out_gpu.oi.to_vector(), out_cpu.oi.to_vector()));
    EXPECT_TRUE(same_integers(out_gpu.ou.to_vector(), out_cpu.ou.to_vector()));
    EXPECT_TRUE(close_floats(out_gpu.of.to_vector(), out_cpu.of.to_vector()));
    // Spot checks of the host side itself (IR.h): floor division, non-negative remainder.
    for (int i = 0; i < n; i++) {
        int32_t x = a[size_t(i)], y = b[size_t(i)];
        if (y > 0 && x != INT32_MIN) {
            int32_t q = out_cpu.oi[size_t(8 * i)], r = out_cpu.oi[size_t(8 * i + 1)];
            EXPECT_TRUE(r >= 0 && r < y && q * y + r == x) << x << " / " << y;
        }
        if (y == 0) {
            EXPECT_EQ(out_cpu.oi[size_t(8 * i)], 0);
            EXPECT_EQ(out_cpu.ou[size_t(4 * i)], 0u);
        }
    }
}

// Work-group shared memory and barriers: each block stages 64 values in a GPUShared tile, waits at
// gpu_thread_barrier, and writes them back reversed, so every thread reads another thread's write.
// A block-level allocation without a memory type is shared too (it spans the thread loops).
TEST(VulkanShared, TileWithBarrierReversesEachBlock) {
    REQUIRE_VULKAN();
    tally::Module m = tally::parse_module(R"(
module name=shared_rev, target=host-vulkan
external func shared_rev (in: buffer<int32, 1>, out: buffer<int32, 1>) {
  produce out {
    gpu_block<Vulkan> (blk, 0, 4) {
      allocate tile[int32 * 64] in GPUShared
      allocate bias[int32 * 1]
      gpu_thread<Vulkan> (t0, 0, 64) {
        tile[t0] = (int32)in[blk * 64 + t0] * 2
        if (t0 == 0) {
          bias[0] = blk * 1000
        }
      }
      gpu_thread_barrier(2)
      gpu_thread<Vulkan> (t1, 0, 64) {
        out[blk * 64 + t1] = tile[63 - t1] + bias[0]
      }
      free bias
      free tile
    }
  }
}
)",
                                          "shared_rev.stmt");
    auto jit = compile_with(m, "host-vulkan");
    Buffer<int32_t> in({256}), out({256});
    for (int i = 0; i < 256; i++) {
        in[size_t(i)] = 3 * i - 100;
    }
    fill_sentinel(out, 0xab);
    ASSERT_EQ(jit->call({in, out}), 0);
    for (int b = 0; b < 4; b++) {
        for (int t = 0; t < 64; t++) {
            EXPECT_EQ(out[size_t(b * 64 + t)], in[size_t(b * 64 + 63 - t)] * 2 + b * 1000)
                << "block " << b << " thread " << t;
        }
    }
}

// --- profiling ---------------------------------------------------------------------------------

// blur_gpu and bounce: correct under host-vulkan-profile, both copy directions reported with
// their counts, and the header counts one injected sync per launch and per copy to the device.
TEST(VulkanProfile, BlurAndBounceReportBothCopyDirections) {
    REQUIRE_VULKAN();
    const int runs = 3;
    tally_profiler_reset();

    auto blur = compile_with(parse_app("blur_gpu"), "host-vulkan-profile");
    BlurGpu b(64, 48, 7);
    for (int r = 0; r < runs; r++) {
        ASSERT_EQ(b.run(*blur), 0);
        EXPECT_TRUE(b.check());
    }
    auto bounce = compile_with(parse_app("bounce"), "host-vulkan-profile");
    Bounce c(4096, 9);
    for (int r = 0; r < runs; r++) {
        ASSERT_EQ(c.run(*bounce), 0);
        EXPECT_TRUE(c.check());
    }
    std::string report = report_text();
    std::printf("%s\n", report.c_str());

    // blur_gpu: two launches per run; the input goes to the device, the output comes back.
    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats("blur_gpu", &ps), 0);
    EXPECT_EQ(ps.runs, uint64_t(runs));
    EXPECT_EQ(ps.kernel_launches, uint64_t(2 * runs));
    EXPECT_EQ(ps.copies_to_device, uint64_t(runs));  // the input, dirty before each run
    EXPECT_EQ(ps.copies_to_device_bytes, uint64_t(runs) * 66 * 50 * 4);
    EXPECT_EQ(ps.copies_to_host, uint64_t(runs));
    EXPECT_EQ(ps.copies_to_host_bytes, uint64_t(runs) * 64 * 48 * 4);
    std::map<std::string, tally_slot_stats> s = slots_of("blur_gpu");
    for (const char *slot :
         {"overhead", "blur_x", "output", "input (copy to device)", "output (copy to host)"}) {
        EXPECT_TRUE(s.count(slot)) << "no slot " << slot << "\n" << report;
    }
    EXPECT_EQ(s["input (copy to device)"].kind, TALLY_SLOT_COPY_TO_DEVICE);
    EXPECT_EQ(s["output (copy to host)"].kind, TALLY_SLOT_COPY_TO_HOST);
    EXPECT_EQ(s["output (copy to host)"].copies, uint64_t(runs));
    EXPECT_EQ(s["input (copy to device)"].copies, uint64_t(runs));
    // The output is written whole on the device: its copy to the device only allocates.
    EXPECT_EQ(s["output (copy to device)"].copies, 0u);
    EXPECT_EQ(ps.injected_syncs, ps.kernel_launches + uint64_t(2 * runs));

    // bounce: T goes to the device twice and to the host once per run; three launches.
    ASSERT_EQ(tally_profiler_get_pipeline_stats("bounce", &ps), 0);
    EXPECT_EQ(ps.kernel_launches, uint64_t(3 * runs));
    s = slots_of("bounce");
    for (const char *slot : {"overhead", "T", "output", "T (copy to device)", "T (copy to host)",
                             "output (copy to host)"}) {
        EXPECT_TRUE(s.count(slot)) << "no slot " << slot << "\n" << report;
    }
    EXPECT_EQ(s["T (copy to device)"].copies, uint64_t(2 * runs));
    EXPECT_EQ(s["T (copy to device)"].copy_bytes, uint64_t(2 * runs) * 4096 * 4);
    EXPECT_EQ(s["T (copy to host)"].copies, uint64_t(runs));
    EXPECT_EQ(s["output (copy to host)"].copies, uint64_t(runs));
    // One injected sync per launch and per copy_to_device call (T twice, output once).
    EXPECT_EQ(ps.injected_syncs, ps.kernel_launches + uint64_t(3 * runs));
    EXPECT_EQ(ps.explicit_syncs, 0u);
}

uint64_t total_waits(const tally_device_wait_stats &w) {
    uint64_t n = 0;
    for (uint64_t c : w.waits) {
        n += c;
    }
    return n;
}

// The profiler's clock for VulkanAttribution: it moves only inside the runtime's device waits,
// kWaitNs per wait, sampled there (the waiting thread counts as not working). Host work takes no
// time on it, so each slot's billed time is exactly kWaitNs times the device waits made while it
// was current.
constexpr uint64_t kWaitNs = 10000000;
std::atomic<uint64_t> g_wait_clock_ns{1000000000};

uint64_t wait_clock() {
    return g_wait_clock_ns.load();
}

void advance_in_wait() {
    g_wait_clock_ns += kWaitNs;
    tally_testing_sample_now();
}

/** For its scope: the wait clock and the Vulkan queue held until the host waits
 * (tally_testing_vulkan_hold mode 2), so no kernel completes before the pipeline waits for it and
 * every wait is on pending work, whatever the device's speed and the machine's load. The sampler
 * thread keeps ticking: a tick bills only the clock's advance since the last one, which is all
 * billed inside the wait that made it, so its ticks add nothing. */
class WaitsAreTheOnlyTime {
public:
    WaitsAreTheOnlyTime() {
        EXPECT_EQ(halide_device_sync_global(nullptr, halide_vulkan_device_interface()), 0);
        tally_testing_set_clock(wait_clock);
        tally_testing_set_device_wait_hook(advance_in_wait);
        EXPECT_EQ(tally_testing_vulkan_hold(2), 0);
    }
    ~WaitsAreTheOnlyTime() {
        EXPECT_EQ(tally_testing_vulkan_hold(0), 0);
        EXPECT_EQ(halide_device_sync_global(nullptr, halide_vulkan_device_interface()), 0);
        tally_testing_set_device_wait_hook(nullptr);
        tally_testing_set_clock(nullptr);
    }
};

// gpu_gpu_cpu (A and B on the GPU, C on the host): with one sync per launch the report bills the
// time spent waiting for each kernel to the Func that launched it; without, A and B are billed
// nothing and the wait for both kernels surfaces in `B (copy to host)`, the blocking copy C
// needs. Deterministic: the profiler's clock moves only inside device waits (WaitsAreTheOnlyTime),
// so the billed times are exact multiples of the waits, which the device-wait ledger counts. The
// real-time version (sync-mode shares against fenced truth) is bench/apps_bench.cpp's
// BM_VulkanTimestamps (sync_a_pp, sync_b_pp).
TEST(VulkanAttribution, GpuGpuCpuSharesWithAndWithoutSyncs) {
    REQUIRE_VULKAN();
    const int width = 64, height = 64, reps = 8, runs = 3;
    tally::Module app = parse_app("gpu_gpu_cpu");
    auto profiled = compile_with(app, "host-vulkan-profile");
    auto unsynced = compile_with(app, "host-vulkan-profile", false);
    GpuGpuCpu inst(width, height, reps, 11);
    EXPECT_EQ(inst.run(*profiled), 0);  // compile the kernels outside the measured runs
    EXPECT_EQ(inst.run(*unsynced), 0);

    struct Observed {
        tally_pipeline_stats ps{};
        std::map<std::string, tally_slot_stats> slots;
        tally_device_wait_stats before{}, after{};
        std::string report;
        uint64_t waits() const { return total_waits(after) - total_waits(before); }
        uint64_t waits_for(int32_t reason) const {
            return after.waits[reason] - before.waits[reason];
        }
        uint64_t ns(const std::string &slot) { return slots[slot].time_ns; }
    };
    auto observe = [&](const tally::JITModule &jit) {
        Observed o;
        tally_profiler_reset();
        {
            WaitsAreTheOnlyTime clock;
            tally_device_get_wait_stats(&o.before);
            for (int r = 0; r < runs; r++) {
                EXPECT_EQ(inst.run(jit), 0);
            }
            tally_device_get_wait_stats(&o.after);
        }
        EXPECT_TRUE(inst.check());
        EXPECT_EQ(tally_profiler_get_pipeline_stats("gpu_gpu_cpu", &o.ps), 0);
        o.slots = slots_of("gpu_gpu_cpu");
        o.report = report_text();
        return o;
    };
    Observed synced = observe(*profiled);
    Observed nosync = observe(*unsynced);
    std::printf("--- report with syncs ---\n%s\n--- report without syncs ---\n%s\n",
                synced.report.c_str(), nosync.report.c_str());

    // With syncs: one injected sync per launch and per copy to the device; the syncs after A's
    // and B's launches each wait for their kernel (held until then), billed to A and to B. A copy
    // to the device through mapped memory queues nothing; a staged one (discrete GPUs) is queued
    // work that its sync waits for, billed to the copy's slot. Nothing else waits: B's data is
    // complete when C copies it to the host.
    EXPECT_EQ(synced.ps.kernel_launches, uint64_t(2 * runs));
    EXPECT_EQ(synced.ps.injected_syncs, synced.ps.kernel_launches + uint64_t(runs));
    EXPECT_EQ(header_value(synced.report, "kernel launches:"), int64_t(2 * runs));
    EXPECT_EQ(header_value(synced.report, "injected syncs:"), int64_t(3 * runs));
    EXPECT_EQ(synced.ns("A"), runs * kWaitNs) << synced.report;
    EXPECT_EQ(synced.ns("B"), runs * kWaitNs) << synced.report;
    EXPECT_EQ(synced.ns("C"), 0u);
    EXPECT_EQ(synced.ns("B (copy to host)"), 0u) << "B's copy waited for a kernel after its sync";
    EXPECT_EQ(synced.waits_for(TALLY_DEVICE_WAIT_COPY_TO_HOST), 0u);
    ASSERT_GE(synced.waits(), uint64_t(2 * runs));
    uint64_t staged_waits = synced.waits() - uint64_t(2 * runs);
    EXPECT_TRUE(staged_waits == 0 || staged_waits == uint64_t(runs)) << staged_waits;
    EXPECT_EQ(synced.ns("input (copy to device)"), staged_waits * kWaitNs);
    EXPECT_EQ(synced.waits_for(TALLY_DEVICE_WAIT_SYNC_GLOBAL), synced.waits());
    EXPECT_EQ(synced.ps.total_ns, synced.waits() * kWaitNs);
    EXPECT_NEAR(synced.slots["A"].percent, synced.slots["B"].percent, 1e-9);
    EXPECT_NE(synced.report.find("B (copy to host)"), std::string::npos) << synced.report;

    // Without syncs: no injected sync; A's and B's kernels are still pending when B is copied to
    // the host, so that one wait per run (for both kernels) is where their time lands, and A and B
    // are billed nothing.
    EXPECT_EQ(nosync.ps.kernel_launches, uint64_t(2 * runs));
    EXPECT_EQ(nosync.ps.injected_syncs, 0u);
    EXPECT_EQ(nosync.waits_for(TALLY_DEVICE_WAIT_COPY_TO_HOST), uint64_t(runs));
    EXPECT_EQ(nosync.waits(), uint64_t(runs));
    EXPECT_EQ(nosync.ns("A"), 0u) << nosync.report;
    EXPECT_EQ(nosync.ns("B"), 0u) << nosync.report;
    EXPECT_EQ(nosync.ns("B (copy to host)"), runs * kWaitNs) << nosync.report;
    EXPECT_EQ(nosync.ps.total_ns, runs * kWaitNs);
}

/** Moves `free A` from the end of gpu_gpu_cpu to the end of `produce B`, right after B's launch:
 * where Halide's lowering frees a producer's buffer once its last consumer is done with it. */
class FreeAAfterB : public tally::IRMutator {
public:
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::Free *op) override {
        return op->name == "A" ? tally::Evaluate::make(tally::make_zero(tally::Int(32)))
                               : tally::IRMutator::visit(op);
    }
    tally::Stmt visit(const tally::ProducerConsumer *op) override {
        tally::Stmt s = tally::IRMutator::visit(op);
        if (!op->is_producer || op->name != "B") {
            return s;
        }
        const tally::ProducerConsumer *b = s.as<tally::ProducerConsumer>();
        return tally::ProducerConsumer::make(b->name, true,
                                             tally::Block::make(b->body, tally::Free::make("A")));
    }
};

// No hidden syncs, per stage, on Halide-lowered-style IR: gpu_gpu_cpu with A freed right after
// B's launch, under profile_timestamps (no injected syncs). A's last use is B's kernel, so a free
// that waited would bill A's and B's device time to B (the misattribution a waiting free causes:
// A 0 %, B ~88 %). Deterministic: the queue is held until the host waits for it, so A is still in
// use by B's kernel when it is freed, whatever the device's speed and the machine's load, and the
// profiler's clock moves only inside device waits (WaitsAreTheOnlyTime). The device-wait ledger
// then shows, per run, one wait at the copy of B to the host (where the pipeline itself blocks),
// one deferred free, no wait in a free and no sync; and the billed host time shows the
// consequence: A and B get none of the kernels' wait, all of it surfaces in `B (copy to host)`
// (their device time is the timestamps' business). In real time, the kernels' time surfacing in
// the blocking copy when nothing syncs is bench/apps_bench.cpp's BM_VulkanTimestamps
// (nosync_copy_b_pct), and the device time per Func under timestamps its timestamps_*_pct.
TEST(VulkanNoHiddenSyncs, ProducerFreedAfterItsConsumersLaunchDoesNotBillTheConsumer) {
    REQUIRE_VULKAN();
    const int width = 64, height = 64, reps = 8, runs = 4;
    tally::Module app = parse_app("gpu_gpu_cpu");
    for (tally::LoweredFunc &f : app.functions) {
        f.body = FreeAAfterB().mutate(f.body);
    }
    auto timestamps = compile_with(app, "host-vulkan-profile_timestamps");
    GpuGpuCpu inst(width, height, reps, 11);
    EXPECT_EQ(inst.run(*timestamps), 0);  // compile the kernels outside the measured runs

    tally_profiler_reset();
    tally_device_wait_stats before{}, after{};
    {
        WaitsAreTheOnlyTime clock;
        tally_device_get_wait_stats(&before);
        for (int r = 0; r < runs; r++) {
            ASSERT_EQ(inst.run(*timestamps), 0);
        }
        tally_device_get_wait_stats(&after);
    }
    EXPECT_TRUE(inst.check());
    std::string report = report_text();
    std::printf("%s\n", report.c_str());

    tally_pipeline_stats ps{};
    ASSERT_EQ(tally_profiler_get_pipeline_stats("gpu_gpu_cpu", &ps), 0);
    EXPECT_EQ(ps.kernel_launches, uint64_t(2 * runs));
    EXPECT_EQ(ps.injected_syncs, 0u);
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_FREE], before.waits[TALLY_DEVICE_WAIT_FREE]);
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_SYNC_GLOBAL],
              before.waits[TALLY_DEVICE_WAIT_SYNC_GLOBAL]);
    EXPECT_EQ(after.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST],
              before.waits[TALLY_DEVICE_WAIT_COPY_TO_HOST] + uint64_t(runs));
    EXPECT_EQ(total_waits(after), total_waits(before) + uint64_t(runs));
    EXPECT_EQ(after.deferred_frees, before.deferred_frees + uint64_t(runs))
        << "A is still in use by B's kernel when it is freed";

    std::map<std::string, tally_slot_stats> s = slots_of("gpu_gpu_cpu");
    EXPECT_EQ(s["A"].time_ns, 0u) << report;
    EXPECT_EQ(s["B"].time_ns, 0u) << "B was billed a wait for the kernels\n" << report;
    EXPECT_EQ(s["C"].time_ns, 0u) << report;
    EXPECT_EQ(s["B (copy to host)"].time_ns, runs * kWaitNs) << report;
    EXPECT_EQ(ps.total_ns, runs * kWaitNs);
}

}  // namespace
}  // namespace tally_e2e
