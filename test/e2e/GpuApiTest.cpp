// End-to-end tests every GPU API passes the same way, run on each API Tally has a runtime device
// for here: Vulkan (lavapipe on machines without a GPU) and OpenCL (PoCL). Each test is
// instantiated per API (`..._vulkan`, `..._opencl`) and skips, saying why, when the API's device
// interface is NULL.
//
// - GpuRun: the GPU apps (apps/gpu_gpu_cpu, apps/blur_gpu, apps/bounce) equal their C++
//   references (integers exactly, floats within float_tolerance) for host-<api>, -profile and
//   -profile_timestamps, each size run twice into sentinel-filled outputs.
// - GpuRetarget: one pipeline as Halide 21 printed it for CUDA, OpenCL and Vulkan
//   (test/e2e/inputs/halide21/), unedited, runs on each API (the others' texts retargeted, with a
//   note in the report's target), equal to a reference computed here and bit for bit to each
//   other.
// - GpuSemantics: the kernel language against the host back end on the same IR (Euclidean
//   division, casts, math, vectors); on OpenCL also 8-, 16- and 64-bit integers and float64,
//   which C computes in wider types and the back end wraps back.
// - GpuShared: work-group shared memory with a barrier.
// - GpuProfile: blur_gpu and bounce report both copy directions with the expected counts; the
//   header counts launches and injected syncs (one per launch, one per copy to the device).
// - OpenCL only: Halide 14's own gpu_gpu_cpu for OpenCL (its kernels Halide's OpenCL C) runs
//   unedited, plain, with Halide's profiler calls and profiled by Tally, equal to the same
//   statement before Halide's offload compiled by Tally; contended atomic updates count every
//   update.
//
// The Vulkan instances also run once more under the Khronos validation layer (CMake), which fails
// on any validation message.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "GpuApps.h"
#include "tally/Error.h"
#include "tally_runtime_testing.h"

namespace tally_e2e {
namespace {

/** A GPU API with a runtime device here. */
struct GpuApi {
    const char *name;     // in targets and test names: "vulkan"
    const char *display;  // in notes and messages: "Vulkan"
    tally::DeviceAPI device_api;
    const halide_device_interface_t *(*interface)();
    /** "host-<name><variant>". */
    std::string target(const std::string &variant) const {
        return "host-" + std::string(name) + variant;
    }
};

const GpuApi vulkan_api = {"vulkan", "Vulkan", tally::DeviceAPI::Vulkan,
                           halide_vulkan_device_interface};
const GpuApi opencl_api = {"opencl", "OpenCL", tally::DeviceAPI::OpenCL,
                           halide_opencl_device_interface};

std::vector<const GpuApi *> all_apis() {
    return {&vulkan_api, &opencl_api};
}

const std::vector<std::string> variants = {"", "-profile", "-profile_timestamps"};

/** A variant as part of a test name: "plain", "profile", "profile_timestamps". */
std::string test_name(const std::string &variant) {
    return variant.empty() ? "plain" : variant.substr(1);
}

#define REQUIRE_DEVICE(api)                                                                        \
    do {                                                                                           \
        if (!(api).interface()) {                                                                  \
            std::printf("no %s device (halide_%s_device_interface() returned NULL); skipping\n",   \
                        (api).display, (api).name);                                                \
            GTEST_SKIP() << "no " << (api).display << " device";                                   \
        }                                                                                          \
    } while (0)

std::string api_name(const ::testing::TestParamInfo<const GpuApi *> &info) {
    return info.param->name;
}

// --- running on the device -------------------------------------------------------------------

class GpuRun
    : public ::testing::TestWithParam<std::tuple<const GpuApi *, std::string, std::string>> {};

// Results equal the references, each size run twice with fresh inputs into sentinel outputs.
TEST_P(GpuRun, MatchesReference) {
    const GpuApi &api = *std::get<0>(GetParam());
    REQUIRE_DEVICE(api);
    const std::string app = std::get<1>(GetParam());
    const std::string target = api.target(std::get<2>(GetParam()));
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

INSTANTIATE_TEST_SUITE_P(Apps, GpuRun,
                         ::testing::Combine(::testing::ValuesIn(all_apis()),
                                            ::testing::ValuesIn(gpu_apps),
                                            ::testing::ValuesIn(variants)),
                         [](const ::testing::TestParamInfo<GpuRun::ParamType> &info) {
                             return std::string(std::get<0>(info.param)->name) + "_" +
                                    std::get<1>(info.param) + "_" +
                                    test_name(std::get<2>(info.param));
                         });

// Halide 21's gpu_tile pipeline (test/e2e/inputs/halide21/README.md) as printed for three GPU
// APIs, run on each API with no edit to the text: the statements written for another API are
// retargeted (retarget-gpu-api), the API's own runs as written. All three compute
//   gblur_x = (in(x-1, y) + in(x, y) + in(x+1, y)) / 3, gblur_y likewise in y, out = 2 gblur_y
// and, being one computation, agree with each other bit for bit.
class GpuRetarget : public ::testing::TestWithParam<std::tuple<const GpuApi *, std::string>> {};

TEST_P(GpuRetarget, HalideGpuStatementsRunUnedited) {
    const GpuApi &api = *std::get<0>(GetParam());
    REQUIRE_DEVICE(api);
    const std::string target = api.target(std::get<1>(GetParam()));
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
    const std::pair<const char *, const char *> texts[] = {
        {"cuda", "CUDA"}, {"opencl", "OpenCL"}, {"vulkan", "Vulkan"}};
    for (const auto &[written, written_name] : texts) {
        SCOPED_TRACE(written);
        const bool own = std::string(written) == api.name;
        const tally::Module text =
            tally::parse_module_file(std::string(TALLY_E2E_INPUTS_DIR) + "/halide21/gpu_tile." +
                                     written + ".conceptual.stmt");
        EXPECT_EQ(text.dialect, tally::Dialect::Halide21);
        const tally::Module m = tally::lower(text, tally::Target::parse(target));
        const std::string note = std::string("GPU code written for ") + written_name + " runs on " +
                                 api.display + ", the target's GPU API";
        if (own) {
            EXPECT_TRUE(m.notes.empty());
        } else {
            ASSERT_EQ(m.notes.size(), 1u);
            EXPECT_EQ(m.notes[0], note);
        }
        ASSERT_EQ(m.kernels.size(), 1u);
        EXPECT_EQ(m.kernels[0].device_api, api.device_api);
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
            const bool noted = report.find("(" + note + ")") != std::string::npos;
            EXPECT_EQ(noted, !own) << report;
            tally_profiler_reset();
        }
    }
    EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(got[0].data(), got[2].data(), got[0].size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Targets, GpuRetarget,
                         ::testing::Combine(::testing::ValuesIn(all_apis()),
                                            ::testing::ValuesIn(variants)),
                         [](const ::testing::TestParamInfo<GpuRetarget::ParamType> &info) {
                             return std::string(std::get<0>(info.param)->name) + "_" +
                                    test_name(std::get<1>(info.param));
                         });

class GpuSemantics : public ::testing::TestWithParam<const GpuApi *> {};
class GpuShared : public ::testing::TestWithParam<const GpuApi *> {};
class GpuProfile : public ::testing::TestWithParam<const GpuApi *> {};

// The kernel language's semantics against the host back end's, on the same IR: Euclidean
// division and modulo with negative and zero divisors (and INT_MIN / -1), unsigned division by
// zero, float modulo, min/max, select, casts, shifts, bitwise ops, math calls, and a 3-lane
// vector (ramp, broadcast) scalarized by the back end. Integers must be equal; floats within
// float_tolerance (Vulkan allows a few ulps for division and sqrt).
TEST_P(GpuSemantics, KernelsComputeWhatTheHostComputes) {
    const GpuApi &api = *GetParam();
    REQUIRE_DEVICE(api);
    const char *text = R"(
module name=sem, target=host
external func sem (a: buffer<int32, 1>, b: buffer<int32, 1>, f: buffer<float32, 1>, oi: buffer<int32, 1>, of: buffer<float32, 1>, ou: buffer<uint32, 1>, n: int32) {
  produce oi {
    gpu_block<Default_GPU> (blk, 0, (n + 31) / 32) {
      gpu_thread<Default_GPU> (thr, 0, 32) {
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
    auto gpu = compile_with(m, api.target(""));
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
TEST_P(GpuShared, TileWithBarrierReversesEachBlock) {
    const GpuApi &api = *GetParam();
    REQUIRE_DEVICE(api);
    tally::Module m = tally::parse_module(R"(
module name=shared_rev, target=host
external func shared_rev (in: buffer<int32, 1>, out: buffer<int32, 1>) {
  produce out {
    gpu_block<Default_GPU> (blk, 0, 4) {
      allocate tile[int32 * 64] in GPUShared
      allocate bias[int32 * 1]
      gpu_thread<Default_GPU> (t0, 0, 64) {
        tile[t0] = (int32)in[blk * 64 + t0] * 2
        if (t0 == 0) {
          bias[0] = blk * 1000
        }
      }
      gpu_thread_barrier(2)
      gpu_thread<Default_GPU> (t1, 0, 64) {
        out[blk * 64 + t1] = tile[63 - t1] + bias[0]
      }
      free bias
      free tile
    }
  }
}
)",
                                          "shared_rev.stmt");
    auto jit = compile_with(m, api.target(""));
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

// blur_gpu and bounce: correct under host-<api>-profile, both copy directions reported with
// their counts, and the header counts one injected sync per launch and per copy to the device.
TEST_P(GpuProfile, BlurAndBounceReportBothCopyDirections) {
    const GpuApi &api = *GetParam();
    REQUIRE_DEVICE(api);
    const int runs = 3;
    tally_profiler_reset();

    auto blur = compile_with(parse_app("blur_gpu"), api.target("-profile"));
    BlurGpu b(64, 48, 7);
    for (int r = 0; r < runs; r++) {
        ASSERT_EQ(b.run(*blur), 0);
        EXPECT_TRUE(b.check());
    }
    auto bounce = compile_with(parse_app("bounce"), api.target("-profile"));
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

// OpenCL C computes integers narrower than 32 bits as int and the back end wraps each result
// back to its width; 64-bit integers and float64 are its own. The same IR on the host back end
// must give the same integers (overflowing products and sums, Euclidean division and modulo with
// negative divisors, shifts, bitwise not) and close doubles.
TEST(OpenCLSemantics, NarrowAndWideIntegersAndDoublesComputeWhatTheHostComputes) {
    REQUIRE_DEVICE(opencl_api);
    const char *text = R"(
module name=widths, target=host
external func widths (a: buffer<uint8, 1>, s: buffer<int16, 1>, w: buffer<int64, 1>, d: buffer<float64, 1>, o8: buffer<uint8, 1>, o16: buffer<int16, 1>, o64: buffer<int64, 1>, od: buffer<float64, 1>, n: int32) {
  produce o8 {
    gpu_block<Default_GPU> (blk, 0, (n + 31) / 32) {
      gpu_thread<Default_GPU> (thr, 0, 32) {
        let i = blk * 32 + thr
        if (i < n) {
          let x = (uint8)a[i]
          let y = (int16)s[i]
          let z = (int64)w[i]
          let g = (float64)d[i]
          o8[i * 4] = x + (uint8)200
          o8[i * 4 + 1] = x * (uint8)3
          o8[i * 4 + 2] = (x / (uint8)7) + (x % (uint8)5)
          o8[i * 4 + 3] = (uint8)shift_left(x, (uint8)3)
          o16[i * 4] = y * (int16)300
          o16[i * 4 + 1] = y / (int16)-7
          o16[i * 4 + 2] = y % (int16)13
          o16[i * 4 + 3] = min(y, (int16)100) - (int16)bitwise_not(y)
          o64[i * 3] = z * (int64)1000003
          o64[i * 3 + 1] = z / (int64)-9
          o64[i * 3 + 2] = (z % (int64)11) + int64(y)
          od[i * 2] = (g * 0.1) + float64(z)
          od[i * 2 + 1] = (float64)floor_f64(g * 3.0)
        }
      }
    }
  }
}
)";
    tally::Module m = tally::parse_module(text, "widths.stmt");
    tally::Module host = m;
    for (tally::LoweredFunc &fn : host.functions) {
        fn.body = GpuLoopsToSerial().mutate(fn.body);
    }
    auto gpu = compile_with(m, opencl_api.target(""));
    auto cpu = compile_with(host, "host");

    const int n = 200;
    Buffer<uint8_t> a({n});
    Buffer<int16_t> s({n});
    Buffer<int64_t> w({n});
    Buffer<double> d({n});
    Rng rng(11);
    for (int i = 0; i < n; i++) {
        a[size_t(i)] = uint8_t(rng.below(256));
        s[size_t(i)] = int16_t(int32_t(rng.below(65536)) - 32768);
        w[size_t(i)] = (int64_t(rng.next()) << 20) - (int64_t(1) << 40);
        d[size_t(i)] = rng.uniform(-100.0f, 100.0f);
    }
    s[0] = INT16_MIN;
    w[1] = INT64_MIN;
    int32_t count = n;
    struct Out {
        Buffer<uint8_t> o8{{4 * n}};
        Buffer<int16_t> o16{{4 * n}};
        Buffer<int64_t> o64{{3 * n}};
        Buffer<double> od{{2 * n}};
    } out_gpu, out_cpu;
    ASSERT_EQ(gpu->call({a, s, w, d, out_gpu.o8, out_gpu.o16, out_gpu.o64, out_gpu.od, count}), 0);
    ASSERT_EQ(cpu->call({a, s, w, d, out_cpu.o8, out_cpu.o16, out_cpu.o64, out_cpu.od, count}), 0);
    EXPECT_TRUE(same_integers(out_gpu.o8.to_vector(), out_cpu.o8.to_vector()));
    EXPECT_TRUE(same_integers(out_gpu.o16.to_vector(), out_cpu.o16.to_vector()));
    EXPECT_TRUE(same_integers(out_gpu.o64.to_vector(), out_cpu.o64.to_vector()));
    std::vector<double> gd = out_gpu.od.to_vector(), cd = out_cpu.od.to_vector();
    for (size_t i = 0; i < gd.size(); i++) {
        EXPECT_NEAR(gd[i], cd[i], 1e-9 * std::max(1.0, std::fabs(cd[i]))) << i;
    }
    // The wrap is real: 255 + 200 wraps to 199 in uint8, not 455.
    a[0] = 255;
    a.set_host_dirty();
    ASSERT_EQ(gpu->call({a, s, w, d, out_gpu.o8, out_gpu.o16, out_gpu.o64, out_gpu.od, count}), 0);
    EXPECT_EQ(out_gpu.o8[0], 199);
}

// Halide 14's own gpu_gpu_cpu for OpenCL (test/corpus/halide14/), as Halide printed it after its
// offload: its kernels are OpenCL C that Halide wrote, kept in the text, and its host code calls
// halide_opencl_initialize_kernels and halide_opencl_run with the module's state. It runs here
// unedited, plain, with Halide's own profiler calls (the -profile text), and profiled by Tally
// (host-opencl-profile: a sync after each launch, copy slots). Its output must equal two
// computations whose kernels Tally wrote from the statement before Halide's offload: on OpenCL,
// and retargeted to Vulkan.
TEST(OpenCLHalideText, Halide14GpuGpuCpuRunsUnedited) {
    REQUIRE_DEVICE(opencl_api);
    const std::string corpus = TALLY_CORPUS_DIR;
    const int w = 48, h = 40;
    Buffer<float> input({w + 2, h + 2}, {-1, -1});
    Rng rng(3);
    for (size_t i = 0; i < input.size(); i++) {
        input.data()[i] = rng.uniform(-1, 1);
    }
    auto run = [&](const std::string &file, const std::string &target) {
        SCOPED_TRACE(file + " for " + target);
        tally_profiler_reset();
        auto jit = tally::compile_jit(tally::lower(tally::parse_module_file(corpus + "/" + file),
                                                   tally::Target::parse(target)));
        Buffer<float> out({w, h});
        std::vector<float> first;
        for (int r = 0; r < 2; r++) {
            fill_sentinel(out, 0xff);
            input.set_host_dirty();
            EXPECT_EQ(jit->call({input, out}), 0);
            if (r == 0) {
                first = out.to_vector();
            } else {
                EXPECT_EQ(std::memcmp(first.data(), out.data(), first.size() * sizeof(float)), 0);
            }
        }
        return first;
    };
    const std::vector<float> halide = run("gpu_gpu_cpu.opencl.stmt", "host-opencl");
    tally_pipeline_stats ps;
    const std::vector<float> halide_profiled =
        run("gpu_gpu_cpu.opencl-profile.stmt", "host-opencl");
    std::map<std::string, tally_slot_stats> s = slots_of("C");
    for (const char *f : {"A", "B", "C"}) {
        EXPECT_TRUE(s.count(f)) << "Halide's profiler calls name " << f;
    }
    const std::vector<float> tally_profiled = run("gpu_gpu_cpu.opencl.stmt", "host-opencl-profile");
    ASSERT_EQ(tally_profiler_get_pipeline_stats("C", &ps), 0);
    EXPECT_EQ(ps.kernel_launches, 4u);      // A and B, two runs
    EXPECT_EQ(ps.injected_syncs, 4u + 2u);  // one per launch, one per copy to the device
    s = slots_of("C");
    EXPECT_EQ(s["input (copy to device)"].copies, 2u);
    EXPECT_EQ(s["B (copy to host)"].copies, 2u);
    const std::vector<float> tally_opencl =
        run("preoffload/gpu_gpu_cpu.opencl.stmt", "host-opencl");
    const std::vector<float> tally_vulkan =
        halide_vulkan_device_interface() ? run("preoffload/gpu_gpu_cpu.opencl.stmt", "host-vulkan")
                                         : tally_opencl;
    EXPECT_EQ(std::memcmp(halide.data(), halide_profiled.data(), halide.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(halide.data(), tally_profiled.data(), halide.size() * sizeof(float)), 0);
    EXPECT_TRUE(close_floats(halide, tally_opencl));
    EXPECT_TRUE(close_floats(halide, tally_vulkan));
    // Not a constant image: the stages did compute something from the input.
    EXPECT_NE(*std::min_element(halide.begin(), halide.end()),
              *std::max_element(halide.begin(), halide.end()));
}

// Atomic updates on OpenCL with every work item contending for a few elements: integer
// read-modify-writes (OpenCL's atomic functions) and a float sum (a compare-and-swap loop) count
// every update. 8 work groups of 16 items: 32 increments per bin, 128 halves summed exactly.
TEST(OpenCLAtomics, ContendedUpdatesAreAllCounted) {
    REQUIRE_DEVICE(opencl_api);
    tally::Module m = tally::parse_module(R"(
module name=atomics, target=host
external func atomics (hist: buffer<int32, 1>, fsum: buffer<float32, 1>, umax: buffer<uint32, 1>) {
  produce hist {
    gpu_block<Default_GPU> (blk, 0, 8) {
      gpu_thread<Default_GPU> (thr, 0, 16) {
        atomic (hist) {
          hist[thr % 4] = hist[thr % 4] + 1
        }
        atomic (hist) {
          hist[4] = min(hist[4], (blk * -3) - thr)
        }
        atomic (umax) {
          umax[0] = max(umax[0], uint32(blk * 16 + thr))
        }
        atomic (fsum) {
          fsum[0] = fsum[0] + 0.5f
        }
      }
    }
  }
}
)",
                                          "atomics.stmt");
    for (const char *variant : {"", "-profile"}) {
        SCOPED_TRACE(variant);
        auto jit = compile_with(m, opencl_api.target(variant));
        for (int run = 0; run < 3; run++) {
            Buffer<int32_t> hist({5});
            Buffer<float> fsum({1});
            Buffer<uint32_t> umax({1});
            std::memset(hist.data(), 0, 5 * sizeof(int32_t));
            fsum[0] = 1.0f;
            umax[0] = 3;
            hist.set_host_dirty();
            fsum.set_host_dirty();
            umax.set_host_dirty();
            ASSERT_EQ(jit->call({hist, fsum, umax}), 0);
            for (int b = 0; b < 4; b++) {
                EXPECT_EQ(hist[size_t(b)], 32) << "bin " << b;
            }
            EXPECT_EQ(hist[4], 7 * -3 - 15);
            EXPECT_EQ(umax[0], 127u);
            EXPECT_EQ(fsum[0], 65.0f);
        }
    }
}

// Vulkan stores 8- and 16-bit integers narrow (8- and 16-bit storage buffers) and computes them as
// int or uint, each result brought back into its type's range; scalars of those types arrive in
// bytes of the push-constant words. The same IR on the host back end must give the same
// integers: wrapping sums and products, Euclidean division and modulo with negative divisors,
// shifts, bitwise not, signed and unsigned reinterprets, and narrow scalar arguments.
TEST(VulkanSemantics, NarrowIntegersComputeWhatTheHostComputes) {
    REQUIRE_DEVICE(vulkan_api);
    const char *text = R"(
module name=narrow, target=host
external func narrow (a: buffer<uint8, 1>, s: buffer<int16, 1>, b: buffer<int8, 1>, u: buffer<uint16, 1>, o8: buffer<uint8, 1>, o16: buffer<int16, 1>, oi8: buffer<int8, 1>, ou16: buffer<uint16, 1>, n: int32, k: uint8, m: int16) {
  produce o8 {
    gpu_block<Default_GPU> (blk, 0, (n + 31) / 32) {
      gpu_thread<Default_GPU> (thr, 0, 32) {
        let i = blk * 32 + thr
        if (i < n) {
          let x = (uint8)a[i]
          let y = (int16)s[i]
          let c = (int8)b[i]
          let v = (uint16)u[i]
          o8[i * 4] = x + k
          o8[i * 4 + 1] = x * (uint8)3
          o8[i * 4 + 2] = (x / (uint8)7) + (x % (uint8)5)
          o8[i * 4 + 3] = reinterpret<uint8>(c) + (uint8)shift_left(x, (uint8)3)
          o16[i * 4] = y * m
          o16[i * 4 + 1] = y / (int16)-7
          o16[i * 4 + 2] = y % (int16)13
          o16[i * 4 + 3] = min(y, (int16)100) - (int16)bitwise_not(y)
          oi8[i * 2] = c * (int8)5 - reinterpret<int8>(x)
          oi8[i * 2 + 1] = c / (int8)-3
          ou16[i * 2] = v * (uint16)7 + uint16(x)
          ou16[i * 2 + 1] = reinterpret<uint16>(y) + (uint16)shift_right(v, (uint16)4)
        }
      }
    }
  }
}
)";
    tally::Module m = tally::parse_module(text, "narrow.stmt");
    tally::Module host = m;
    for (tally::LoweredFunc &fn : host.functions) {
        fn.body = GpuLoopsToSerial().mutate(fn.body);
    }
    auto gpu = compile_with(m, vulkan_api.target(""));
    auto cpu = compile_with(host, "host");

    const int n = 200;
    Buffer<uint8_t> a({n});
    Buffer<int16_t> s({n});
    Buffer<int8_t> b({n});
    Buffer<uint16_t> u({n});
    Rng rng(13);
    for (int i = 0; i < n; i++) {
        a[size_t(i)] = uint8_t(rng.below(256));
        s[size_t(i)] = int16_t(int32_t(rng.below(65536)) - 32768);
        b[size_t(i)] = int8_t(int32_t(rng.below(256)) - 128);
        u[size_t(i)] = uint16_t(rng.below(65536));
    }
    s[0] = INT16_MIN;
    b[1] = INT8_MIN;
    a[2] = 255;
    int32_t count = n;
    uint8_t k = 200;
    int16_t mul = -300;
    struct Out {
        Buffer<uint8_t> o8{{4 * n}};
        Buffer<int16_t> o16{{4 * n}};
        Buffer<int8_t> oi8{{2 * n}};
        Buffer<uint16_t> ou16{{2 * n}};
    } out_gpu, out_cpu;
    ASSERT_EQ(
        gpu->call({a, s, b, u, out_gpu.o8, out_gpu.o16, out_gpu.oi8, out_gpu.ou16, count, k, mul}),
        0);
    ASSERT_EQ(
        cpu->call({a, s, b, u, out_cpu.o8, out_cpu.o16, out_cpu.oi8, out_cpu.ou16, count, k, mul}),
        0);
    EXPECT_TRUE(same_integers(out_gpu.o8.to_vector(), out_cpu.o8.to_vector()));
    EXPECT_TRUE(same_integers(out_gpu.o16.to_vector(), out_cpu.o16.to_vector()));
    EXPECT_TRUE(same_integers(out_gpu.oi8.to_vector(), out_cpu.oi8.to_vector()));
    EXPECT_TRUE(same_integers(out_gpu.ou16.to_vector(), out_cpu.ou16.to_vector()));
    // The wrap is real: 255 + 200 is 199 in uint8, not 455.
    EXPECT_EQ(out_gpu.o8[8], 199);
}

// Atomic updates on Vulkan with every invocation contending for a few elements: GLSL's atomic
// functions (add, min, max) and a compare-and-swap loop (an update that is no read-modify-write
// function) count every update. 8 work groups of 16 invocations: 32 increments per bin.
TEST(VulkanAtomics, ContendedUpdatesAreAllCounted) {
    REQUIRE_DEVICE(vulkan_api);
    tally::Module m = tally::parse_module(R"(
module name=vk_atomics, target=host
external func vk_atomics (hist: buffer<int32, 1>, umax: buffer<uint32, 1>, odd: buffer<int32, 1>) {
  produce hist {
    gpu_block<Default_GPU> (blk, 0, 8) {
      gpu_thread<Default_GPU> (thr, 0, 16) {
        atomic (hist) {
          hist[thr % 4] = hist[thr % 4] + 1
        }
        atomic (hist) {
          hist[4] = min(hist[4], (blk * -3) - thr)
        }
        atomic (umax) {
          umax[0] = max(umax[0], uint32(blk * 16 + thr))
        }
        atomic (odd) {
          odd[0] = (odd[0] * 3) % 1000003
        }
      }
    }
  }
}
)",
                                          "vk_atomics.stmt");
    for (const char *variant : {"", "-profile"}) {
        SCOPED_TRACE(variant);
        auto jit = compile_with(m, vulkan_api.target(variant));
        for (int run = 0; run < 3; run++) {
            Buffer<int32_t> hist({5});
            Buffer<uint32_t> umax({1});
            Buffer<int32_t> odd({1});
            std::memset(hist.data(), 0, 5 * sizeof(int32_t));
            umax[0] = 3;
            odd[0] = 1;
            hist.set_host_dirty();
            umax.set_host_dirty();
            odd.set_host_dirty();
            ASSERT_EQ(jit->call({hist, umax, odd}), 0);
            for (int bin = 0; bin < 4; bin++) {
                EXPECT_EQ(hist[size_t(bin)], 32) << "bin " << bin;
            }
            EXPECT_EQ(hist[4], 7 * -3 - 15);
            EXPECT_EQ(umax[0], 127u);
            // 128 multiplications by 3 modulo 1000003, in any order: 3^128 mod 1000003.
            int64_t want = 1;
            for (int i = 0; i < 128; i++) {
                want = want * 3 % 1000003;
            }
            EXPECT_EQ(odd[0], want);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Apis, GpuSemantics, ::testing::ValuesIn(all_apis()), api_name);
INSTANTIATE_TEST_SUITE_P(Apis, GpuShared, ::testing::ValuesIn(all_apis()), api_name);
INSTANTIATE_TEST_SUITE_P(Apis, GpuProfile, ::testing::ValuesIn(all_apis()), api_name);

}  // namespace
}  // namespace tally_e2e
