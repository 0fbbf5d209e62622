// The apps in apps/ end to end: JIT-compiled pipelines, timed on real images. Every benchmark
// runs one iteration per repetition and repeats its runs internally, interleaving the variants it
// compares (round r starts with variant r mod n: A B, B A, A B, ... for two) so that a change in
// the machine's load hits all of them alike, after one untimed warm-up round. The benchmark's
// time (manual time) is the median run of the first variant named in the counters, the `*_ms`
// counters are median runs, the ratios are of those medians. bench/run_benchmarks.py adds 5
// repetitions and reports the median of each figure over them (each column on its own, so a
// ratio need not equal the quotient of the two medians shown next to it). Pipelines are compiled
// once per process and kept for the repetitions. On a loaded 2-core machine the GPU benchmarks
// take most of the program's time: about 40 s a repetition on Vulkan and 30 s on OpenCL. The CPU
// time column is the benchmark thread's only (pipelines run on a thread pool, compile_jit on a
// helper thread): ignore it.
//
//   BM_ProfilingOverhead     blur 4096x4096: `host` vs `host-profile`, both compiled in this
//                            process, 31 runs each. host_ms, profile_ms: median runs;
//                            ratio = profile_ms / host_ms (the target: <= 1.02);
//                            pair_ratio = the median of the per-pair ratios (each profiled run
//                            over the host run of the same round: less sensitive to load drift);
//                            cpu_ratio = the same as ratio in process CPU time (all threads,
//                            the sampler's included: robust against other processes taking the
//                            CPUs); sampler_cpu_ms = the sampler thread's CPU per profiled run;
//                            host_iqr_pct = the interquartile range of the host runs over their
//                            median, in percent: the run-to-run noise to judge the ratios by.
//   BM_BlurVsReference       blur 4096x4096 for `host` (Tally) against the plain C++ reference
//                            (apps/blur/reference.cpp, -O3, one thread, no -march) and, when
//                            built with Halide 14 (libhalide14-0-dev), Halide's JIT blur with
//                            the app's schedule (apps_bench_halide.cpp: blur_x at the root, rows
//                            parallel, x vectorized by 8, 32-bit sums); 7 runs each. tally_ms,
//                            reference_ms, halide_ms: median runs; vs_reference = tally_ms /
//                            reference_ms, vs_halide = tally_ms / halide_ms (below 1: Tally is
//                            faster). The outputs are checked equal.
//   BM_JitCompile/<app>/<target>
//                            parse (from the text in memory) + lower + compile_jit of one app:
//                            parse_ms, lower_ms, jit_ms; the time is their sum. CPU apps for
//                            `host`, the Vulkan apps for `host-vulkan` (compiling needs no
//                            device: kernels go from GLSL to SPIR-V through shaderc).
//   BM_VulkanSync/<app>, BM_OpenCLSync/<app>
//                            the GPU apps on one API's device, Vulkan's (lavapipe on machines
//                            without a GPU) or OpenCL's (PoCL, a CPU device, here), the same code
//                            for both: `host-<api>` (plain; <api> is vulkan or opencl) vs
//                            `host-<api>-profile` (profile: one injected halide_device_sync_global
//                            per launch and per copy to the device) vs `host-<api>-profile`
//                            lowered with inject_device_sync = false (nosync); 15 runs each.
//                            ratio = profile_ms / plain_ms (profiling with its syncs), sync_ratio
//                            = profile_ms / nosync_ms (the syncs alone). blur_gpu 1024x768,
//                            gpu_gpu_cpu 128x128 with reps = 1000. Skipped, with the reason as the
//                            error message, when the API has no device
//                            (halide_<api>_device_interface() returns NULL); outputs are checked
//                            against the references.
//   BM_VulkanTimestamps/<pipeline>, BM_OpenCLTimestamps/<pipeline>
//                            profile_timestamps and sync mode against fenced truth, on one API's
//                            device (the same code for both; skipped as above without it; on
//                            OpenCL the device timestamps are its event profiling times).
//                            gpu_gpu_cpu (A -> B on the device, C on the host) and overlap (the
//                            same with a host stage P between B's launch and C, which can overlap
//                            A and B: ~6 % of a run on lavapipe, ~1 % on PoCL, whose kernels
//                            take longer), 128x128, reps = 8000 on Vulkan, 2000 on OpenCL (runs of
//                            ~100 ms on each: PoCL runs these kernels ~5x slower than lavapipe);
//                            15 interleaved fenced runs each of the plain pipeline, -profile,
//                            -profile_timestamps and the variants keeping only A, only B, or no
//                            stage (an emptied device stage keeps its launch and its buffers'
//                            copies, its kernel shrunk to one work group; an emptied host stage
//                            does nothing). truth_a_pct, truth_b_pct = (stage alone - none) x G /
//                            (G - 1) / plain, a kernel's time without the copies (G = the
//                            kernel's work groups, 64 in gpu_gpu_cpu: the emptied kernel keeps
//                            one); timestamps_a_pct, timestamps_b_pct = the Func's device time
//                            from device timestamps over the profiled run's wall time;
//                            sync_a_pct, sync_b_pct = the slot's share in sync mode; *_pp =
//                            distance in percentage points to the truth's time over that mode's
//                            own run (timestamps_ms, sync_ms: sync mode serialises what overlap
//                            overlaps, so the same kernel time is a smaller share of its longer
//                            run); timestamps_ratio, sync_ratio = profiled / plain wall time
//                            (fenced medians); nosync_ab_pct, nosync_copy_b_pct = the shares of
//                            A + B and of B's copy to the host under -profile lowered without
//                            syncs (where the kernels surface). Spreads: *_iqr_pct = the
//                            interquartile range of a variant's runs in percent of its median;
//                            timestamps_pair_ratio, timestamps_pair_iqr_pct = the median and IQR
//                            of the per-round ratio profile_timestamps / plain. blur_gpu
//                            (1024x768; A = blur_x, B = output, both on the device, copies both
//                            ways; runs of ~22 ms on lavapipe, ~1 ms on PoCL, that spread more, so
//                            90 of each) is measured the same way.
//
// The profiler's report goes to /dev/null at exit unless TALLY_PROFILE_OUTPUT is set.
//
// lavapipe runs its shaders on LP_NUM_THREADS threads (default: one per CPU). Set to 1 here
// (unless the environment says otherwise), the device is one of the two cores and the host the
// other, as a GPU and a CPU are: with a thread per core, a device stage and a host stage meant to
// overlap share both cores instead, each kernel's device interval stretches by whatever host
// work runs beside it, and no overlap shows in the wall time (overlap: plain 96 ms = sync 96 ms,
// A's timestamps 51.6 % against 45.1 % alone; with one thread plain 89 ms against 97 ms for
// sync, A within 1 pp). PoCL runs its kernels on POCL_MAX_PTHREAD_COUNT worker threads (default:
// one per CPU): set to 1 here the same way (unless the environment says otherwise), so that on
// both APIs the device is one core.
//
// PoCL builds an OpenCL program on its first launch (~0.6 s; kept in ~/.cache/pocl for the next
// process) and compiles a kernel again for each new work-group size on its first use (50-70 ms):
// each variant's warm-up run absorbs both, and the profiled runs read for shares come after the
// interleaved ones. Halide 14's blur is a module loaded with dlopen(RTLD_LOCAL)
// (apps_bench_halide.h): linked into the program, its libLLVM-14 sat in the global symbol scope,
// and PoCL's own LLVM crashed there building a program it had not cached.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <time.h>
#include <vector>

#include "SharedHeap.h"
#include "Stats.h"
#include "blur/reference.h"
#include "blur_gpu/reference.h"
#include "gpu_gpu_cpu/reference.h"
#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/IRMutator.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#ifdef TALLY_BENCH_HALIDE
#include "apps_bench_halide.h"
#endif

#ifndef TALLY_APPS_DIR
#error "TALLY_APPS_DIR must name the apps/ source folder"
#endif

namespace {

// Sizes. blur at 4096x4096 takes tens of ms per run on two cores; the GPU apps run on CPU
// devices here (lavapipe for Vulkan, PoCL for OpenCL), so they stay small: a few to a few tens of
// ms per run.
constexpr int kBlurSize = 4096;
constexpr int kOverheadRuns = 31;
constexpr int kCompareRuns = 7;
constexpr int kGpuRuns = 15;
constexpr int kBlurGpuWidth = 1024, kBlurGpuHeight = 768;
constexpr int kGgcSize = 128, kGgcReps = 1000;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/** The interquartile range as a percentage of the median: how much runs of one variant differ
 * from each other, to compare with the differences between variants. */
double iqr_pct(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return 100.0 * (v[(3 * n) / 4] - v[n / 4]) / median(v);
}

/** The benchmarks' buffers are the library's (tally/Buffer.h): dense, extents[0] fastest, mins 0;
 * each frees its device copy when it goes away. Pipelines are called through the argument
 * binder (JITModule::call), as every caller calls them. */
using tally::Buffer;

/** 64-bit LCG, high bits out: the same inputs on every run of the benchmark. */
class Rng {
public:
    explicit Rng(uint64_t seed) : state(seed * 6364136223846793005ull + 1442695040888963407ull) {}
    uint32_t next() {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return uint32_t(state >> 32);
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 8) / 16777216.0f; }

private:
    uint64_t state;
};

std::string app_stmt_path(const std::string &app) {
    return std::string(TALLY_APPS_DIR) + "/" + app + "/" + app + ".stmt";
}

std::string read_text(const std::string &path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::unique_ptr<tally::JITModule> compile_app(const std::string &app, const std::string &target,
                                              bool inject_sync = true) {
    tally::LowerOptions opts;
    opts.profiling.inject_device_sync = inject_sync;
    tally::Module m = tally::parse_module_file(app_stmt_path(app));
    return tally::compile_jit(tally::lower(m, tally::Target::parse(target), opts));
}

double process_cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

/** Per-variant run times: wall and process CPU (all threads: the pipeline's thread pool, the
 * sampler, the GPU device's threads: lavapipe's, PoCL's), in ms. */
struct Times {
    std::vector<double> wall, cpu;
};

/** Runs the variants interleaved, `runs` rounds after one untimed warm-up round; round r starts
 * with variant r mod n (A B, B A, ... for two) so that neither holds a fixed place in the order.
 * A variant returns its pipeline's result; the first non-zero one is kept in *rc and ends the
 * measurement. `after_run(v)` is called after each timed run of variant v. */
std::vector<Times> interleave(const std::vector<std::function<int()>> &variants, int runs, int *rc,
                              const std::function<void(size_t)> &after_run = nullptr) {
    const size_t n = variants.size();
    std::vector<Times> times(n);
    *rc = 0;
    for (int round = -1; round < runs; round++) {
        for (size_t k = 0; k < n; k++) {
            size_t v = (size_t(std::max(round, 0)) + k) % n;
            double c0 = process_cpu_ms();
            Clock::time_point t0 = Clock::now();
            int r = variants[v]();
            double ms = ms_since(t0), cpu = process_cpu_ms() - c0;
            if (r != 0) {
                *rc = r;
                return times;
            }
            if (round >= 0) {
                times[v].wall.push_back(ms);
                times[v].cpu.push_back(cpu);
                if (after_run) {
                    after_run(v);
                }
            }
        }
    }
    return times;
}

std::string error_text(const char *what, int rc) {
    return std::string(what) + " returned " + std::to_string(rc);
}

/** make(), or nullptr after skipping the benchmark with the message of what it threw (a
 * CompileError from Tally, an error from Halide). */
template <typename F>
auto setup(benchmark::State &state, F make) -> decltype(&make()) {
    try {
        return &make();
    } catch (const std::exception &e) {
        state.SkipWithError((std::string("setup failed: ") + e.what()).c_str());
        return nullptr;
    }
}

// --- blur on the host ----------------------------------------------------------------------------

/** blur's input and outputs at kBlurSize, and its pipelines, made on first use. */
struct BlurState {
    int32_t width = kBlurSize, height = kBlurSize;
    Buffer<uint16_t> input{{kBlurSize + 2, kBlurSize + 2}};
    Buffer<uint16_t> out_host{{kBlurSize, kBlurSize}}, out_profile{{kBlurSize, kBlurSize}};
    Buffer<uint16_t> out_reference{{kBlurSize, kBlurSize}};
    std::unique_ptr<tally::JITModule> host, profile;
    BlurState() {
        Rng rng(42);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = uint16_t(rng.next());
        }
        host = compile_app("blur", "host");
        profile = compile_app("blur", "host-profile");
    }
    int run(const tally::JITModule &jit, Buffer<uint16_t> &out) {
        return jit.call({input, out, width, height});
    }
};

std::unique_ptr<BlurState> g_blur;

BlurState &blur_state() {
    if (!g_blur) {
        g_blur = std::make_unique<BlurState>();
    }
    return *g_blur;
}

void BM_ProfilingOverhead(benchmark::State &state) {
    BlurState *bp = setup(state, blur_state);
    if (!bp) {
        return;
    }
    BlurState &b = *bp;
    for (auto _ : state) {
        int rc;
        // The sampler thread's CPU during each profiled run.
        std::vector<double> sampler_ms;
        uint64_t sampler0 = 0;
        auto t = interleave({[&] { return b.run(*b.host, b.out_host); },
                             [&] {
                                 sampler0 = tally_testing_sampler_cpu_ns();
                                 return b.run(*b.profile, b.out_profile);
                             }},
                            kOverheadRuns, &rc, [&](size_t v) {
                                if (v == 1) {
                                    sampler_ms.push_back(
                                        double(tally_testing_sampler_cpu_ns() - sampler0) / 1e6);
                                }
                            });
        if (rc) {
            state.SkipWithError(error_text("blur", rc).c_str());
            return;
        }
        std::vector<double> pairs;
        for (size_t i = 0; i < t[0].wall.size(); i++) {
            pairs.push_back(t[1].wall[i] / t[0].wall[i]);
        }
        double host_ms = median(t[0].wall), profile_ms = median(t[1].wall);
        state.SetIterationTime(profile_ms / 1e3);
        state.counters["host_ms"] = host_ms;
        state.counters["profile_ms"] = profile_ms;
        state.counters["ratio"] = profile_ms / host_ms;
        state.counters["pair_ratio"] = median(pairs);
        state.counters["cpu_ratio"] = median(t[1].cpu) / median(t[0].cpu);
        state.counters["sampler_cpu_ms"] = median(sampler_ms);
        state.counters["host_iqr_pct"] = iqr_pct(t[0].wall);
    }
    if (b.out_host.to_vector() != b.out_profile.to_vector()) {
        state.SkipWithError("host and host-profile outputs differ");
    }
}
BENCHMARK(BM_ProfilingOverhead)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

#ifdef TALLY_BENCH_HALIDE
std::unique_ptr<Buffer<uint16_t>> g_out_halide;
std::unique_ptr<apps_bench_halide::Blur> g_halide;
#endif

#ifdef TALLY_BENCH_HALIDE
apps_bench_halide::Blur &halide_blur() {
    if (!g_halide) {
        BlurState &b = blur_state();
        g_out_halide =
            std::make_unique<Buffer<uint16_t>>(std::vector<int32_t>{kBlurSize, kBlurSize});
        g_halide = std::make_unique<apps_bench_halide::Blur>(
            TALLY_BENCH_HALIDE_MODULE, b.input.data(), g_out_halide->data(), b.width, b.height);
    }
    return *g_halide;
}
#endif

void BM_BlurVsReference(benchmark::State &state) {
    BlurState *bp = setup(state, blur_state);
    if (!bp) {
        return;
    }
    BlurState &b = *bp;
    std::vector<std::function<int()>> variants = {
        [&] { return b.run(*b.host, b.out_host); },
        [&] {
            tally_apps::blur_reference(b.input.data(), b.out_reference.data(), b.width, b.height);
            return 0;
        }};
#ifdef TALLY_BENCH_HALIDE
    apps_bench_halide::Blur *halide = setup(state, halide_blur);
    if (!halide) {
        return;
    }
    variants.push_back([halide] {
        halide->run();
        return 0;
    });
#endif
    for (auto _ : state) {
        int rc;
        auto t = interleave(variants, kCompareRuns, &rc);
        if (rc) {
            state.SkipWithError(error_text("blur", rc).c_str());
            return;
        }
        double tally_ms = median(t[0].wall), reference_ms = median(t[1].wall);
        state.SetIterationTime(tally_ms / 1e3);
        state.counters["tally_ms"] = tally_ms;
        state.counters["reference_ms"] = reference_ms;
        state.counters["vs_reference"] = tally_ms / reference_ms;
#ifdef TALLY_BENCH_HALIDE
        double halide_ms = median(t[2].wall);
        state.counters["halide_ms"] = halide_ms;
        state.counters["vs_halide"] = tally_ms / halide_ms;
#endif
    }
    if (b.out_host.to_vector() != b.out_reference.to_vector()) {
        state.SkipWithError("Tally's blur differs from the reference");
    }
#ifdef TALLY_BENCH_HALIDE
    if (g_out_halide->to_vector() != b.out_reference.to_vector()) {
        state.SkipWithError("Halide's blur differs from the reference");
    }
    state.SetLabel("Halide " TALLY_BENCH_HALIDE_VERSION " JIT");
#else
    state.SetLabel("no Halide comparison: Halide 14 not found at configure time");
#endif
}
BENCHMARK(BM_BlurVsReference)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// --- JIT compile time ---------------------------------------------------------------------------

void BM_JitCompile(benchmark::State &state, const std::string &app, const std::string &target) {
    const std::string path = app_stmt_path(app);
    const std::string text = read_text(path);
    for (auto _ : state) {
        try {
            Clock::time_point t0 = Clock::now();
            tally::Module m = tally::parse_module(text, path);
            double parse_ms = ms_since(t0);
            t0 = Clock::now();
            tally::Module lowered = tally::lower(m, tally::Target::parse(target));
            double lower_ms = ms_since(t0);
            t0 = Clock::now();
            std::unique_ptr<tally::JITModule> jit = tally::compile_jit(lowered);
            double jit_ms = ms_since(t0);
            benchmark::DoNotOptimize(
                jit->symbol(tally::entry_symbols(jit->module(), jit->entry()).function));
            state.SetIterationTime((parse_ms + lower_ms + jit_ms) / 1e3);
            state.counters["parse_ms"] = parse_ms;
            state.counters["lower_ms"] = lower_ms;
            state.counters["jit_ms"] = jit_ms;
        } catch (const std::exception &e) {
            state.SkipWithError(e.what());
            return;
        }
    }
}

// --- GPU: the cost of the injected syncs -------------------------------------------------------

/** A GPU API the device benchmarks run on. Each benchmark is one function run once per API:
 * only the targets and the device differ. */
struct GpuApi {
    const char *name;    // "Vulkan", "OpenCL": in the benchmarks' names and messages
    const char *target;  // the plain target; "-profile" and "-profile_timestamps" are appended
    const halide_device_interface_t *(*device_interface)();
    const char *interface_name;  // device_interface's name, for the message when it has no device
    // gpu_gpu_cpu's reps in BM_<name>Timestamps: runs of about 100 ms on this API's device here
    // (lavapipe or PoCL on one thread), long against the machine's noise. PoCL runs these
    // kernels about 5x slower than lavapipe (8000 reps: ~480 ms a run against ~90 ms).
    int timestamps_reps;
};

const GpuApi kVulkan{"Vulkan", "host-vulkan", halide_vulkan_device_interface,
                     "halide_vulkan_device_interface", 8 * kGgcReps};
const GpuApi kOpenCL{"OpenCL", "host-opencl", halide_opencl_device_interface,
                     "halide_opencl_device_interface", 2 * kGgcReps};

/** The API's device interface, or nullptr after skipping the benchmark, saying that the API has
 * no device. */
const halide_device_interface_t *gpu_device(benchmark::State &state, const GpuApi &api) {
    const halide_device_interface_t *device = api.device_interface();
    if (!device) {
        state.SkipWithError((std::string("no ") + api.name + " device (" + api.interface_name +
                             "() returned NULL); skipped")
                                .c_str());
    }
    return device;
}

/** One GPU app compiled three ways for one API, with its buffers (its own: a buffer's device
 * copy belongs to one API). */
struct GpuApp {
    std::unique_ptr<tally::JITModule> plain, profile, nosync;
    std::function<int(const tally::JITModule &)> run;
    std::function<bool()> check;  // the last output against the reference
};

struct BlurGpuData {
    Buffer<uint32_t> input{{kBlurGpuWidth + 2, kBlurGpuHeight + 2}};
    Buffer<uint32_t> output{{kBlurGpuWidth, kBlurGpuHeight}};
    int32_t width = kBlurGpuWidth, height = kBlurGpuHeight;
    BlurGpuData() {
        Rng rng(7);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = rng.next() >> 2;  // below 2^30: sums of three do not wrap
        }
    }
    /** One run; the input counts as just written, so every run copies it to the device. */
    int run(const tally::JITModule &jit) {
        input.set_host_dirty();
        return jit.call({input, output, width, height});
    }
};

struct GgcData {
    Buffer<float> input{{kGgcSize, kGgcSize}}, C{{kGgcSize, kGgcSize}};
    int32_t width = kGgcSize, height = kGgcSize, reps = kGgcReps;
    GgcData() {
        Rng rng(11);
        for (size_t i = 0; i < input.size(); i++) {
            input[i] = rng.uniform(-1.0f, 1.0f);
        }
    }
    /** One run; the input counts as just written, so every run copies it to the device. */
    int run(const tally::JITModule &jit) {
        input.set_host_dirty();
        return jit.call({input, C, width, height, reps});
    }
};

std::map<std::string, std::unique_ptr<GpuApp>> g_gpu_apps;  // by "<API name>/<app>"

GpuApp &gpu_app(const GpuApi &api, const std::string &app) {
    std::unique_ptr<GpuApp> &slot = g_gpu_apps[std::string(api.name) + "/" + app];
    if (slot) {
        return *slot;
    }
    auto v = std::make_unique<GpuApp>();
    v->plain = compile_app(app, api.target);
    v->profile = compile_app(app, std::string(api.target) + "-profile");
    v->nosync = compile_app(app, std::string(api.target) + "-profile", /*inject_sync=*/false);
    if (app == "blur_gpu") {
        auto d = std::make_shared<BlurGpuData>();
        v->run = [d](const tally::JITModule &jit) { return d->run(jit); };
        v->check = [d] {
            std::vector<uint32_t> want(d->output.size());
            tally_apps::blur_gpu_reference(d->input.data(), want.data(), d->width, d->height);
            return want == d->output.to_vector();
        };
    } else {
        auto d = std::make_shared<GgcData>();
        v->run = [d](const tally::JITModule &jit) { return d->run(jit); };
        v->check = [d] {
            std::vector<float> want(d->C.size());
            tally_apps::gpu_gpu_cpu_reference(d->input.data(), want.data(), d->width, d->height,
                                              d->reps);
            for (size_t i = 0; i < want.size(); i++) {
                double tol = 1e-4 * std::max(1.0, double(std::abs(want[i])));
                if (!(std::abs(double(d->C[i]) - double(want[i])) <= tol)) {
                    return false;
                }
            }
            return true;
        };
    }
    slot = std::move(v);  // only once complete: a compile that throws leaves no half-made app
    return *slot;
}

void BM_GpuSync(benchmark::State &state, const GpuApi &api, const std::string &app) {
    if (!gpu_device(state, api)) {
        return;
    }
    GpuApp *vp = setup(state, [&]() -> GpuApp & { return gpu_app(api, app); });
    if (!vp) {
        return;
    }
    GpuApp &v = *vp;
    for (auto _ : state) {
        int rc;
        auto t = interleave({[&] { return v.run(*v.plain); }, [&] { return v.run(*v.profile); },
                             [&] { return v.run(*v.nosync); }},
                            kGpuRuns, &rc);
        if (rc) {
            state.SkipWithError(error_text(app.c_str(), rc).c_str());
            return;
        }
        double plain_ms = median(t[0].wall), profile_ms = median(t[1].wall),
               nosync_ms = median(t[2].wall);
        state.SetIterationTime(profile_ms / 1e3);
        state.counters["plain_ms"] = plain_ms;
        state.counters["profile_ms"] = profile_ms;
        state.counters["nosync_ms"] = nosync_ms;
        state.counters["ratio"] = profile_ms / plain_ms;
        state.counters["sync_ratio"] = profile_ms / nosync_ms;
    }
    if (!v.check()) {
        state.SkipWithError((app + ": output differs from the reference").c_str());
    }
}

// --- GPU: profile_timestamps against fenced truth and sync mode ---------------------------------

// gpu_gpu_cpu as it is, and with an extra host stage P between B's launch and C (C working on the
// previous frame, in a real pipeline): P's host work can overlap A and B on the device.
// blur_gpu as it is (blur_x then output, both on the device; copies both ways).
std::string timestamps_pipeline_text(const std::string &name) {
    std::ifstream in(app_stmt_path(name == "blur_gpu" ? "blur_gpu" : "gpu_gpu_cpu"));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (name == "overlap") {
        const std::string stage = R"(  allocate P[float32 * width * height]
  produce P {
    for (P.s0.y, 0, height) {
      for (P.s0.x, 0, width) {
        allocate P_acc[float32 * 1]
        P_acc[0] = (float32)input[P.s0.y * width + P.s0.x]
        for (P.s1.k, 0, reps / 2) {
          P_acc[0] = P_acc[0] * 0.9f + 0.05f
        }
        P[P.s0.y * width + P.s0.x] = P_acc[0]
        free P_acc
      }
    }
  }
  free P
)";
        text.insert(text.find("  produce C {"), stage);
    }
    return text;
}

/** Shrinks each kernel to its first work group (every GPU block loop's extent becomes 1): it
 * still launches and still reads and writes its buffers, so lowering keeps their copies, but it
 * does 1/blocks of its work. (Guarding the work off instead leaves the cost of running every
 * work group's invocations, about half of blur_gpu's kernels on lavapipe.) */
class ShrinkKernel : public tally::IRMutator {
public:
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::For *op) override {
        if (op->for_type != tally::ForType::GPUBlock) {
            return tally::IRMutator::visit(op);
        }
        return tally::For::make(op->name, op->min, tally::make_one(tally::Int(32)), op->for_type,
                                op->device_api, mutate(op->body));
    }
};

/** Whether a statement launches a device kernel (has a GPU block loop). */
bool launches_kernel(const tally::Stmt &s) {
    struct Finder : public tally::IRMutator {
        using tally::IRMutator::visit;
        bool found = false;
        tally::Stmt visit(const tally::For *op) override {
            found = found || op->for_type == tally::ForType::GPUBlock;
            return tally::IRMutator::visit(op);
        }
    } f;
    f.mutate(s);
    return f.found;
}

/** Keeps the stage `keep` ("": none) and empties every other: a host stage's `produce` becomes a
 * no-op; a device stage's kernel shrinks to one work group (ShrinkKernel) and keeps its buffers'
 * copies. So a stage's truth, the run keeping it less the run keeping none, is its kernel's time
 * alone (less one work group's). Removing a device stage's whole `produce` also removed the
 * copies lowering puts in it (blur_gpu's input to the device, its output back), and each stage's
 * truth counted a copy: the two summed to 107 % of the run. */
class KeepOnlyStage : public tally::IRMutator {
public:
    explicit KeepOnlyStage(std::string keep) : keep(std::move(keep)) {}
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::ProducerConsumer *op) override {
        if (op->is_producer && op->name != keep) {
            if (launches_kernel(op->body)) {
                return tally::ProducerConsumer::make(op->name, true,
                                                     ShrinkKernel().mutate(op->body));
            }
            return tally::Evaluate::make(tally::make_zero(tally::Int(32)));
        }
        return tally::IRMutator::visit(op);
    }

private:
    std::string keep;
};

std::unique_ptr<tally::JITModule> compile_text(const std::string &text, const std::string &target,
                                               const std::string &keep = "*",
                                               bool inject_sync = true) {
    tally::Module m = tally::parse_module(text);
    if (keep != "*") {
        for (tally::LoweredFunc &f : m.functions) {
            f.body = KeepOnlyStage(keep).mutate(f.body);
        }
    }
    tally::LowerOptions opts;
    opts.profiling.inject_device_sync = inject_sync;
    return tally::compile_jit(tally::lower(m, tally::Target::parse(target), opts));
}

// The device time billed to Func `func` in the JSON report's device_timeline of `pipeline`.
double device_ms_of(const std::string &json, const std::string &func) {
    size_t at = json.find("\"device_timeline\"");
    at = at == std::string::npos ? at : json.find("\"name\": \"" + func + "\", \"host_ns\"", at);
    if (at == std::string::npos) {
        return -1;
    }
    at = json.find("\"device_ns\": ", at);
    return std::strtod(json.c_str() + at + 13, nullptr) / 1e6;
}

std::string report_json() {
    std::vector<char> buf(1 << 20);
    tally_profiler_report_to_buffer(buf.data(), buf.size(), 1);
    return buf.data();
}

double slot_percent(const char *pipeline, const std::string &name) {
    tally_pipeline_stats ps{};
    if (tally_profiler_get_pipeline_stats(pipeline, &ps) != 0) {
        return -1;
    }
    for (int32_t s = 0; s < ps.num_slots; s++) {
        tally_slot_stats ss{};
        if (tally_profiler_get_slot_stats(pipeline, s, &ss) == 0 && name == ss.name) {
            return ss.percent;
        }
    }
    return -1;
}

struct TimestampsSetup {
    std::unique_ptr<tally::JITModule> plain, sync, nosync, timestamps, only_a, only_b, none;
    std::string pipeline, a, b;  // the pipeline's name and its two device stages
    // Work groups of A's and B's kernels at the benchmark's sizes, as the apps' IR computes them
    // (16x16 tiles). An emptied kernel keeps one of them (ShrinkKernel), so a stage alone less
    // none is its kernel's time times (groups - 1) / groups: gpu_gpu_cpu's 64 groups put its
    // truths 1.6 % (0.7 pp) low uncorrected.
    double groups_a = 1, groups_b = 1;
    std::function<int(const tally::JITModule &)> run;
};
std::map<std::string, std::unique_ptr<TimestampsSetup>> g_timestamps_setups;  // by "<API>/<name>"

TimestampsSetup &timestamps_setup(const GpuApi &api, const std::string &name) {
    std::unique_ptr<TimestampsSetup> &slot =
        g_timestamps_setups[std::string(api.name) + "/" + name];
    if (slot) {
        return *slot;
    }
    std::string text = timestamps_pipeline_text(name);
    const std::string target = api.target;
    auto v = std::make_unique<TimestampsSetup>();
    const bool blur = name == "blur_gpu";
    v->pipeline = blur ? "blur_gpu" : "gpu_gpu_cpu";
    v->a = blur ? "blur_x" : "A";
    v->b = blur ? "output" : "B";
    const double tiles_x = ((blur ? kBlurGpuWidth : kGgcSize) + 15) / 16;
    v->groups_a = tiles_x * (blur ? (kBlurGpuHeight + 17) / 16 : tiles_x);
    v->groups_b = tiles_x * (blur ? (kBlurGpuHeight + 15) / 16 : tiles_x);
    v->plain = compile_text(text, target);
    v->sync = compile_text(text, target + "-profile");
    v->nosync = compile_text(text, target + "-profile", "*", false);
    v->timestamps = compile_text(text, target + "-profile_timestamps");
    v->only_a = compile_text(text, target, v->a);
    v->only_b = compile_text(text, target, v->b);
    v->none = compile_text(text, target, "");
    if (blur) {
        auto d = std::make_shared<BlurGpuData>();
        v->run = [d](const tally::JITModule &jit) { return d->run(jit); };
    } else {
        auto d = std::make_shared<GgcData>();
        d->reps = api.timestamps_reps;
        v->run = [d](const tally::JITModule &jit) { return d->run(jit); };
    }
    slot = std::move(v);  // only once complete: a compile that throws leaves no half-made setup
    return *slot;
}

// A and B device shares under profile_timestamps (device ms / run wall time) and under profile
// (the slot's share) against the truth (each stage alone, fenced: truth_*_pct over the plain
// pipeline's fenced run; each mode's *_pp against the same time over that mode's own fenced run,
// timestamps_ms and sync_ms), all in percent; wall time of profile_timestamps and profile over the
// unprofiled pipeline. Also the sampled shares of profile lowered without syncs (nosync_ab_pct: A +
// B, nosync_copy_b_pct: the copy of B to the host, where their kernels surface): on Vulkan, the
// real-time side of ctest's e2e.VulkanAttribution, which checks the same attribution
// deterministically (with a Vulkan-only testing hook; OpenCL has no such test). Spreads: the
// interquartile range of each variant's runs (plain_iqr_pct, timestamps_iqr_pct, sync_iqr_pct, in
// percent of the median) and the median and IQR of the per-round ratio profile_timestamps / plain
// (timestamps_pair_ratio, timestamps_pair_iqr_pct): neighbours in one round share the machine's
// load. For blur_gpu, A and B are blur_x and output. The same code for every API.
void BM_GpuTimestamps(benchmark::State &state, const GpuApi &api, const std::string &name) {
    const halide_device_interface_t *device = gpu_device(state, api);
    if (!device) {
        return;
    }
    TimestampsSetup *slot =
        setup(state, [&]() -> TimestampsSetup & { return timestamps_setup(api, name); });
    if (!slot) {
        return;
    }
    TimestampsSetup &v = *slot;
    const char *pipeline = v.pipeline.c_str();
    auto run = [&](const tally::JITModule &jit) { return v.run(jit); };
    // blur_gpu runs take ~22 ms on lavapipe (one thread), gpu_gpu_cpu's ~90 ms, and spread more
    // (interquartile range 15-37 % of the median against 2-8 %): six times the runs.
    const int runs = name == "blur_gpu" ? 6 * kGpuRuns : kGpuRuns;
    auto fenced = [&](const tally::JITModule &jit) {
        int r = run(jit);
        return r ? r : halide_device_sync_global(nullptr, device);
    };
    for (auto _ : state) {
        int rc;
        auto t =
            interleave({[&] { return fenced(*v.plain); }, [&] { return fenced(*v.sync); },
                        [&] { return fenced(*v.timestamps); }, [&] { return fenced(*v.only_a); },
                        [&] { return fenced(*v.only_b); }, [&] { return fenced(*v.none); }},
                       runs, &rc);
        if (rc) {
            state.SkipWithError(error_text(name.c_str(), rc).c_str());
            return;
        }
        double plain = median(t[0].wall), sync = median(t[1].wall), ts = median(t[2].wall);
        double none = median(t[5].wall);
        // A stage's truth in ms per run; its truth as a share of a run is that time over the
        // run's own wall time. Sync mode serialises what the plain pipeline overlaps (overlap:
        // its runs are ~7 % longer), so its shares are of a longer run: the same kernel time is
        // a smaller share there, and comparing it with the share of the plain run would bill
        // the syncs' cost to its attribution.
        double truth_a_ms = std::max(0.0, median(t[3].wall) - none) * v.groups_a / (v.groups_a - 1);
        double truth_b_ms = std::max(0.0, median(t[4].wall) - none) * v.groups_b / (v.groups_b - 1);
        double truth_a = 100.0 * truth_a_ms / plain, truth_b = 100.0 * truth_b_ms / plain;
        tally_profiler_reset();
        for (int r = 0; r < runs && rc == 0; r++) {
            rc = run(*v.sync);
        }
        double sync_a = slot_percent(pipeline, v.a), sync_b = slot_percent(pipeline, v.b);
        // Sampled, without syncs: A and B are billed their launches only, and their kernels
        // surface in the blocking copy of B to the host.
        tally_profiler_reset();
        for (int r = 0; r < runs && rc == 0; r++) {
            rc = run(*v.nosync);
        }
        double nosync_ab = slot_percent(pipeline, v.a) + slot_percent(pipeline, v.b);
        double nosync_copy_b = slot_percent(pipeline, (v.b + " (copy to host)").c_str());
        tally_profiler_reset();
        for (int r = 0; r < runs && rc == 0; r++) {
            rc = run(*v.timestamps);
        }
        tally_pipeline_stats ps{};
        tally_profiler_get_pipeline_stats(pipeline, &ps);
        std::string json = report_json();
        double total_ms = double(ps.total_ns) / 1e6;
        double ts_a = 100.0 * device_ms_of(json, v.a) / total_ms;
        double ts_b = 100.0 * device_ms_of(json, v.b) / total_ms;
        tally_profiler_reset();
        if (rc) {
            state.SkipWithError(error_text(name.c_str(), rc).c_str());
            return;
        }
        state.SetIterationTime(ts / 1e3);
        state.counters["plain_ms"] = plain;
        state.counters["sync_ms"] = sync;
        state.counters["timestamps_ms"] = ts;
        state.counters["timestamps_ratio"] = ts / plain;
        state.counters["sync_ratio"] = sync / plain;
        state.counters["truth_a_pct"] = truth_a;
        state.counters["truth_b_pct"] = truth_b;
        state.counters["timestamps_a_pct"] = ts_a;
        state.counters["timestamps_b_pct"] = ts_b;
        state.counters["sync_a_pct"] = sync_a;
        state.counters["sync_b_pct"] = sync_b;
        state.counters["timestamps_a_pp"] = std::abs(ts_a - 100.0 * truth_a_ms / ts);
        state.counters["timestamps_b_pp"] = std::abs(ts_b - 100.0 * truth_b_ms / ts);
        state.counters["sync_a_pp"] = std::abs(sync_a - 100.0 * truth_a_ms / sync);
        state.counters["sync_b_pp"] = std::abs(sync_b - 100.0 * truth_b_ms / sync);
        state.counters["nosync_ab_pct"] = nosync_ab;
        state.counters["nosync_copy_b_pct"] = nosync_copy_b;
        std::vector<double> pairs;
        for (size_t r = 0; r < t[0].wall.size(); r++) {
            pairs.push_back(t[2].wall[r] / t[0].wall[r]);
        }
        state.counters["plain_iqr_pct"] = iqr_pct(t[0].wall);
        state.counters["sync_iqr_pct"] = iqr_pct(t[1].wall);
        state.counters["timestamps_iqr_pct"] = iqr_pct(t[2].wall);
        state.counters["timestamps_pair_ratio"] = median(pairs);
        state.counters["timestamps_pair_iqr_pct"] = iqr_pct(pairs);
    }
}

void register_dynamic_benchmarks() {
    for (const char *app : {"blur", "conv_chain", "memory", "skewed"}) {
        benchmark::RegisterBenchmark((std::string("BM_JitCompile/") + app + "/host").c_str(),
                                     BM_JitCompile, std::string(app), std::string("host"))
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }
    for (const char *app : {"blur_gpu", "bounce", "gpu_gpu_cpu"}) {
        benchmark::RegisterBenchmark((std::string("BM_JitCompile/") + app + "/host-vulkan").c_str(),
                                     BM_JitCompile, std::string(app), std::string("host-vulkan"))
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }
    // The same benchmarks once per API, OpenCL's right after Vulkan's: BM_VulkanSync/<app> for
    // each app, then BM_OpenCLSync/<app>; likewise BM_<API>Timestamps/<pipeline>.
    for (const GpuApi *api : {&kVulkan, &kOpenCL}) {
        for (const char *app : {"blur_gpu", "gpu_gpu_cpu"}) {
            benchmark::RegisterBenchmark((std::string("BM_") + api->name + "Sync/" + app).c_str(),
                                         BM_GpuSync, *api, std::string(app))
                ->Iterations(1)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond);
        }
    }
    for (const GpuApi *api : {&kVulkan, &kOpenCL}) {
        for (const char *name : {"gpu_gpu_cpu", "overlap", "blur_gpu"}) {
            benchmark::RegisterBenchmark(
                (std::string("BM_") + api->name + "Timestamps/" + name).c_str(), BM_GpuTimestamps,
                *api, std::string(name))
                ->Iterations(1)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond);
        }
    }
}

}  // namespace

int main(int argc, char **argv) {
    keep_freed_memory_in_process();  // the references and Halide's JIT share the heap
    // The profiled runs would print a report at exit; nobody reads it here.
    setenv("TALLY_PROFILE_OUTPUT", "/dev/null", /*overwrite=*/0);
    // One device thread for each API (see the header comment), before anything opens a device.
    setenv("LP_NUM_THREADS", "1", /*overwrite=*/0);
    setenv("POCL_MAX_PTHREAD_COUNT", "1", /*overwrite=*/0);
    register_dynamic_benchmarks();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    // Device buffers and JIT code go before the runtime's exit handlers run.
    g_gpu_apps.clear();
    g_timestamps_setups.clear();
#ifdef TALLY_BENCH_HALIDE
    g_halide.reset();
    g_out_halide.reset();
#endif
    g_blur.reset();
    return 0;
}
