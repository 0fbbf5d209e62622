// End-to-end tests of what is Vulkan's own: the GPU apps (apps/gpu_gpu_cpu, apps/blur_gpu,
// apps/bounce) lowered for `host-vulkan` and `host-vulkan-profile`, their kernels compiled to
// SPIR-V by the Vulkan back end (src/codegen/CodeGen_Vulkan.cpp) and run through the runtime's
// Vulkan device interface (lavapipe on machines without a GPU). What every GPU API does alike
// (the apps against their references, Halide 21's statements retargeted, the kernel language
// against the host, shared memory, copy slots) is GpuApiTest.cpp's.
//
// - VulkanCodegen (no device needed): every kernel of every app, for both targets, is written to
//   <build>/test/e2e/vulkan_spirv/ and passes `spirv-val --target-env vulkan1.1`; the
//   CompiledKernel counts match the kernel's arguments; unsupported types and nodes are
//   CompileErrors that name them.
// - VulkanScalars: scalar arguments of mixed sizes (float, int, two bools) reach the shader at
//   the offsets the runtime packs them at.
// - VulkanAttribution: on gpu_gpu_cpu, with the profiler's clock moving only inside device waits
//   and the queue held until the host waits (deterministic), the sync after each launch bills
//   the wait for A's and B's kernels to A and B; lowered with inject_device_sync = false, A and B
//   are billed nothing and the one wait per run lands on `B (copy to host)`. The real-time
//   comparison with fenced truth is bench/apps_bench.cpp's BM_VulkanTimestamps.
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
#include "GpuApps.h"
#include "codegen/DeviceKernels.h"
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
external func narrow (out: buffer<float16, 1>) {
  gpu_block<Vulkan> (b, 0, 4) {
    out[b] = (float16)7
  }
}
)");
    EXPECT_NE(e.find("float16"), std::string::npos) << e;
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
