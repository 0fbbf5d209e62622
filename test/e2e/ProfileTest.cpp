// End-to-end profiling tests: the apps compiled for `host-profile` by the JIT, run N times, and
// the profiler's numbers read back through the runtime API (tally_profiler_get_*_stats and
// tally_profiler_report_to_buffer).
//
// - Every app: the report's three sections come in the order funcs, copies to device, copies to
//   host; every expected slot (overhead, then each Func in walk order) is listed; runs == N.
// - memory: per-Func heap allocation counts and bytes equal loop iterations x runs exactly, the
//   serial-loop scratch's peak is one allocation, the pipeline's heap peak is at least what is
//   live at once, and nothing is left allocated.
// - skewed: the heavy stage gets the largest share, and every stage's sampled share agrees within
//   5 percentage points with its share measured by timing variants of the pipeline that contain
//   only that stage (host build, no profiling).
//
// The profiler is process-wide state: every test starts with tally_profiler_reset(). The timing
// test is registered RUN_SERIAL so that ctest -j does not run other tests beside it.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>

#include "E2EUtil.h"
#include "conv_chain/reference.h"
#include "memory/reference.h"
#include "skewed/reference.h"
#include "tally/IRMutator.h"

namespace tally_e2e {
namespace {

/** An app with inputs of a given size, ready to run: owns its buffers and argument array. */
struct AppInstance {
    std::string name;
    std::vector<std::string> slots;  // expected slot names, in slot order
    std::vector<std::unique_ptr<Image<float>>> f32;
    std::vector<std::unique_ptr<Image<uint16_t>>> u16;
    std::vector<std::unique_ptr<Image<int32_t>>> i32;
    std::vector<std::unique_ptr<Image<uint32_t>>> u32;
    int32_t scalars[2] = {0, 0};
    std::vector<void *> args;

    template <typename T>
    Image<T> *add(std::vector<std::unique_ptr<Image<T>>> &v, std::vector<int> extents,
                  std::function<T(Rng &)> gen, Rng &rng) {
        v.push_back(std::make_unique<Image<T>>(extents));
        Image<T> *img = v.back().get();
        for (size_t i = 0; i < img->size(); i++) {
            (*img)[i] = gen(rng);
        }
        args.push_back(img->raw());
        return img;
    }
    void add_scalars(int a, int b) {
        scalars[0] = a;
        scalars[1] = b;
        args.push_back(&scalars[0]);
        args.push_back(&scalars[1]);
    }
};

std::unique_ptr<AppInstance> make_instance(const std::string &name, int a, int b) {
    auto app = std::make_unique<AppInstance>();
    app->name = name;
    Rng rng(42);
    auto u16 = [](Rng &r) { return uint16_t(r.next()); };
    auto i32 = [](Rng &r) { return int32_t(r.below(1000)); };
    auto u32 = [](Rng &r) { return r.next() | 1u; };
    auto f32 = [](Rng &r) { return r.uniform(-1.0f, 1.0f); };
    auto zero_u16 = [](Rng &) { return uint16_t(0); };
    auto zero_i32 = [](Rng &) { return int32_t(0); };
    auto zero_u32 = [](Rng &) { return uint32_t(0); };
    auto zero_f32 = [](Rng &) { return 0.0f; };
    if (name == "blur") {
        app->slots = {"overhead", "blur_x", "blur_y"};
        app->add<uint16_t>(app->u16, {a + 2, b + 2}, u16, rng);
        app->add<uint16_t>(app->u16, {a, b}, zero_u16, rng);
    } else if (name == "conv_chain") {
        using namespace tally_apps;
        app->slots = {"overhead", "conv1", "conv2", "output"};
        app->add<float>(app->f32, {a + 6, b + 6, conv_chain_c0}, f32, rng);
        app->add<float>(app->f32, {3, 3, conv_chain_c0, conv_chain_c1}, f32, rng);
        app->add<float>(app->f32, {conv_chain_c1}, f32, rng);
        app->add<float>(app->f32, {3, 3, conv_chain_c1, conv_chain_c2}, f32, rng);
        app->add<float>(app->f32, {conv_chain_c2}, f32, rng);
        app->add<float>(app->f32, {3, 3, conv_chain_c2, conv_chain_c3}, f32, rng);
        app->add<float>(app->f32, {conv_chain_c3}, f32, rng);
        app->add<float>(app->f32, {a, b, conv_chain_c3}, zero_f32, rng);
    } else if (name == "memory") {
        app->slots = {"overhead", "horiz", "row_prefix", "row_box", "output", "col_prefix"};
        app->add<int32_t>(app->i32, {a, b}, i32, rng);
        app->add<int32_t>(app->i32, {a, b}, zero_i32, rng);
    } else if (name == "skewed") {
        app->slots = {"overhead", "pre", "heavy", "post"};
        app->add<uint32_t>(app->u32, {a}, u32, rng);
        app->add<uint32_t>(app->u32, {a}, zero_u32, rng);
    }
    app->add_scalars(a, b);
    return app;
}

std::string report_text() {
    int32_t n = tally_profiler_report_to_buffer(nullptr, 0, 0);
    EXPECT_GE(n, 0);
    std::string s(size_t(std::max(n, 0)) + 1, '\0');
    EXPECT_EQ(tally_profiler_report_to_buffer(&s[0], s.size(), 0), n);
    s.resize(size_t(std::max(n, 0)));
    return s;
}

std::vector<std::string> lines_of(const std::string &text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string l;
    while (std::getline(in, l)) {
        out.push_back(l);
    }
    return out;
}

bool starts_with(const std::string &s, const std::string &p) {
    return s.compare(0, p.size(), p) == 0;
}

/** The report block of one pipeline: from its "pipeline: NAME" line to the next pipeline. */
std::vector<std::string> pipeline_block(const std::string &report, const std::string &name) {
    std::vector<std::string> all = lines_of(report), out;
    bool in = false;
    for (const std::string &l : all) {
        if (starts_with(l, "pipeline: ")) {
            in = l == "pipeline: " + name;
        }
        if (in) {
            out.push_back(l);
        }
    }
    return out;
}

/** Index of the section title line ("  funcs ... time ms ..."), or -1. */
int section_line(const std::vector<std::string> &block, const std::string &title) {
    for (size_t i = 0; i < block.size(); i++) {
        if (starts_with(block[i], "  " + title + " ") &&
            block[i].find("time ms") != std::string::npos) {
            return int(i);
        }
    }
    return -1;
}

class Profile : public ::testing::TestWithParam<std::string> {};

// Sections in order, every slot listed in its section and in the stats API, runs == N.
TEST_P(Profile, ReportShowsSectionsSlotsAndRuns) {
    const std::string name = GetParam();
    const int runs = 3;
    auto app = name == "skewed" ? make_instance(name, 2000, 20) : make_instance(name, 64, 48);
    auto jit = compile_app(name, "host-profile");
    tally_profiler_reset();
    for (int r = 0; r < runs; r++) {
        ASSERT_EQ(jit->run(app->args.data()), 0);
    }

    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats(name.c_str(), &ps), 0);
    EXPECT_EQ(ps.runs, uint64_t(runs));
    EXPECT_STREQ(ps.target, "host-profile");
    ASSERT_EQ(ps.num_slots, int32_t(app->slots.size()));
    EXPECT_GT(ps.total_ns, 0u);
    EXPECT_EQ(ps.kernel_launches, 0u);
    EXPECT_EQ(ps.copies_to_device + ps.copies_to_host, 0u);
    for (int32_t s = 0; s < ps.num_slots; s++) {
        tally_slot_stats ss;
        ASSERT_EQ(tally_profiler_get_slot_stats(name.c_str(), s, &ss), 0);
        EXPECT_EQ(ss.name, app->slots[s]);
        EXPECT_EQ(ss.kind, TALLY_SLOT_FUNC);
    }

    std::string report = report_text();
    std::vector<std::string> block = pipeline_block(report, name);
    ASSERT_FALSE(block.empty()) << report;
    int funcs = section_line(block, "funcs");
    int to_device = section_line(block, "copies to device");
    int to_host = section_line(block, "copies to host");
    ASSERT_GE(funcs, 0) << report;
    ASSERT_GT(to_device, funcs) << report;
    ASSERT_GT(to_host, to_device) << report;
    // The funcs section lists exactly the expected slots, in slot order.
    std::vector<std::string> listed;
    for (int i = funcs + 1; i < to_device; i++) {
        std::istringstream in(block[i]);
        std::string first;
        in >> first;
        listed.push_back(first);
    }
    EXPECT_EQ(listed, app->slots) << report;
    // No copies on the host: both copy sections say so.
    EXPECT_EQ(to_host - to_device, 2) << report;
    EXPECT_EQ(block[to_device + 1], "    (none)") << report;
    ASSERT_GT(int(block.size()), to_host + 1) << report;
    EXPECT_EQ(block[to_host + 1], "    (none)") << report;
    bool runs_line = false;
    for (const std::string &l : block) {
        runs_line = runs_line || l == "  runs:             " + std::to_string(runs);
    }
    EXPECT_TRUE(runs_line) << report;
}

INSTANTIATE_TEST_SUITE_P(Apps, Profile, ::testing::Values("blur", "conv_chain", "memory", "skewed"),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                             return info.param;
                         });

// memory: allocations counted per Func, exactly.
TEST(ProfileMemory, AllocationCountsAndPeaks) {
    const int width = 37, height = 23, runs = 4;
    const int strips = (width + 7) / 8;
    auto app = make_instance("memory", width, height);
    auto jit = compile_app("memory", "host-profile");
    tally_profiler_reset();
    for (int r = 0; r < runs; r++) {
        ASSERT_EQ(jit->run(app->args.data()), 0);
    }
    std::vector<int32_t> want(size_t(width) * height);
    tally_apps::memory_reference(app->i32[0]->ptr(), want.data(), width, height);
    EXPECT_EQ(app->i32[1]->data, want);

    tally_pipeline_stats ps;
    ASSERT_EQ(tally_profiler_get_pipeline_stats("memory", &ps), 0);
    EXPECT_EQ(ps.runs, uint64_t(runs));
    const uint64_t horiz_bytes = uint64_t(width) * height * 4;
    const uint64_t prefix_bytes = uint64_t(width + 1) * 4;
    const uint64_t box_bytes = uint64_t(width) * 2 * 4;
    const uint64_t col_bytes = uint64_t(height + 1) * 8 * 4;
    // While output runs, horiz and one col_prefix are live at once.
    EXPECT_GE(ps.heap_peak, horiz_bytes + col_bytes);
    EXPECT_EQ(ps.device_peak, 0u);

    struct Expect {
        const char *slot;
        uint64_t allocs, bytes_each;
    };
    const Expect expected[] = {
        {"overhead", 0, 0},
        {"horiz", uint64_t(runs), horiz_bytes},
        {"row_prefix", uint64_t(height) * runs, prefix_bytes},
        {"row_box", uint64_t(height) * runs, box_bytes},
        {"output", 0, 0},
        {"col_prefix", uint64_t(strips) * runs, col_bytes},
    };
    ASSERT_EQ(ps.num_slots, 6);
    for (int32_t s = 0; s < 6; s++) {
        tally_slot_stats ss;
        ASSERT_EQ(tally_profiler_get_slot_stats("memory", s, &ss), 0);
        SCOPED_TRACE(ss.name);
        EXPECT_STREQ(ss.name, expected[s].slot);
        EXPECT_EQ(ss.heap.num_allocs, expected[s].allocs);
        EXPECT_EQ(ss.heap.total_bytes, expected[s].allocs * expected[s].bytes_each);
        EXPECT_EQ(ss.heap.current, 0);
        EXPECT_EQ(ss.device.num_allocs, 0u);
        if (expected[s].allocs == 0) {
            EXPECT_EQ(ss.heap.peak, 0u);
        } else {
            // At least one allocation at a time; more only where a parallel loop allocates.
            EXPECT_GE(ss.heap.peak, expected[s].bytes_each);
        }
    }
    tally_slot_stats col, horiz;
    ASSERT_EQ(tally_profiler_get_slot_stats("memory", 5, &col), 0);
    ASSERT_EQ(tally_profiler_get_slot_stats("memory", 1, &horiz), 0);
    EXPECT_EQ(col.heap.peak, col_bytes);  // serial loop: one strip's scratch at a time
    EXPECT_EQ(horiz.heap.peak, horiz_bytes);
}

/** Replaces every `produce` other than `keep` with a no-op: a pipeline that runs one stage. */
class KeepOnlyProducer : public tally::IRMutator {
public:
    explicit KeepOnlyProducer(std::string keep) : keep(std::move(keep)) {}
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::ProducerConsumer *op) override {
        if (op->is_producer && op->name != keep) {
            return tally::Evaluate::make(tally::make_zero(tally::Int(32)));
        }
        return tally::IRMutator::visit(op);
    }

private:
    std::string keep;
};

double seconds_for_run(const tally::JITModule &jit, void **args) {
    auto t0 = std::chrono::steady_clock::now();
    int rc = jit.run(args);
    auto t1 = std::chrono::steady_clock::now();
    EXPECT_EQ(rc, 0);
    return std::chrono::duration<double>(t1 - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// skewed: sampled shares against stage-alone timing.
//
// The truth is measured in the same process just before the profile: variants of the pipeline
// that keep one stage (host build, no profiler), each timed over interleaved rounds (median).
// Both sides are wall time on a machine other processes share, so a burst of outside load can
// skew one side only; the comparison is therefore tried up to three times and must hold once.
// A systematic misattribution (time billed to the wrong slot) fails every attempt.
struct Attribution {
    int reps = 0;
    double total_ms = 0;
    uint64_t samples = 0;
    int32_t mode = 0;
    double overhead_pct = 0;
    std::vector<double> alone_ms, timed_pct, sampled_pct;
};

TEST(ProfileSkewed, HeavyStageShareMatchesStageTiming) {
    const std::vector<std::string> stages = {"pre", "heavy", "post"};
    const int n = 4096, runs = 5, truth_rounds = 5, calibration_reps = 64, attempts = 3;
    const double target_run_s = 0.12, tolerance_points = 5.0;

    auto full_host = compile_app("skewed", "host");
    std::vector<std::unique_ptr<tally::JITModule>> alone;
    for (const std::string &s : stages) {
        tally::Module m = parse_app("skewed");
        for (tally::LoweredFunc &f : m.functions) {
            f.body = KeepOnlyProducer(s).mutate(f.body);
        }
        alone.push_back(compile_module(m, "host"));
    }
    auto profiled = compile_app("skewed", "host-profile");
    auto app = make_instance("skewed", n, calibration_reps);

    auto measure = [&]() {
        Attribution a;
        // Calibrate the round count so that one run takes about target_run_s (the fastest of
        // three runs of a few milliseconds each, scaled).
        app->scalars[1] = calibration_reps;
        double t_cal = 1e9;
        for (int r = 0; r < 3; r++) {
            t_cal = std::min(t_cal, seconds_for_run(*full_host, app->args.data()));
        }
        a.reps = int(std::ceil(calibration_reps * target_run_s / std::max(t_cal, 1e-6)));
        a.reps = std::max(calibration_reps, std::min(a.reps, 1 << 20));
        app->scalars[1] = a.reps;

        std::vector<std::vector<double>> times(stages.size());
        for (int r = 0; r < truth_rounds; r++) {
            for (size_t k = 0; k < stages.size(); k++) {
                times[k].push_back(seconds_for_run(*alone[k], app->args.data()));
            }
        }
        double truth_total = 0;
        for (size_t k = 0; k < stages.size(); k++) {
            a.alone_ms.push_back(1e3 * median(times[k]));
            truth_total += a.alone_ms[k];
        }
        for (size_t k = 0; k < stages.size(); k++) {
            a.timed_pct.push_back(100.0 * a.alone_ms[k] / truth_total);
        }

        EXPECT_EQ(profiled->run(app->args.data()), 0);  // warm up, then forget it
        tally_profiler_reset();
        for (int r = 0; r < runs; r++) {
            EXPECT_EQ(profiled->run(app->args.data()), 0);
        }
        std::vector<uint32_t> want(n);
        tally_apps::skewed_reference(app->u32[0]->ptr(), want.data(), n, a.reps);
        EXPECT_EQ(app->u32[1]->data, want);

        tally_pipeline_stats ps;
        EXPECT_EQ(tally_profiler_get_pipeline_stats("skewed", &ps), 0);
        EXPECT_EQ(ps.runs, uint64_t(runs));
        a.total_ms = double(ps.total_ns) / 1e6;
        a.samples = ps.samples;
        a.mode = ps.flags;
        for (size_t k = 0; k <= stages.size(); k++) {
            tally_slot_stats ss;
            EXPECT_EQ(tally_profiler_get_slot_stats("skewed", int32_t(k), &ss), 0);
            if (k == 0) {
                EXPECT_STREQ(ss.name, "overhead");
                a.overhead_pct = ss.percent;
            } else {
                EXPECT_EQ(ss.name, stages[k - 1]);
                a.sampled_pct.push_back(ss.percent);
            }
        }
        std::printf("skewed: n=%d reps=%d, %d profiled runs, %.1f ms total, %llu samples\n", n,
                    a.reps, runs, a.total_ms, (unsigned long long)a.samples);
        std::printf("  %-8s %10s %10s %12s\n", "stage", "timed %", "sampled %", "alone ms");
        for (size_t k = 0; k < stages.size(); k++) {
            std::printf("  %-8s %10.2f %10.2f %12.3f\n", stages[k].c_str(), a.timed_pct[k],
                        a.sampled_pct[k], a.alone_ms[k]);
        }
        std::printf("  %-8s %10s %10.2f\n", "overhead", "-", a.overhead_pct);
        return a;
    };
    auto agrees = [&](const Attribution &a) {
        for (size_t k = 0; k < stages.size(); k++) {
            if (std::fabs(a.sampled_pct[k] - a.timed_pct[k]) > tolerance_points) {
                return false;
            }
        }
        return true;
    };

    Attribution a;
    for (int attempt = 1; attempt <= attempts; attempt++) {
        a = measure();
        if (::testing::Test::HasFailure()) {
            return;
        }
        if (agrees(a)) {
            break;
        }
        std::printf("attempt %d of %d: shares differ by more than %.1f points\n", attempt, attempts,
                    tolerance_points);
    }
    RecordProperty("heavy_timed_pct", std::to_string(a.timed_pct[1]));
    RecordProperty("heavy_sampled_pct", std::to_string(a.sampled_pct[1]));

    // The app's premise: heavy does about five times the work of each other stage.
    EXPECT_GT(a.alone_ms[1] / a.alone_ms[0], 3.0);
    EXPECT_LT(a.alone_ms[1] / a.alone_ms[0], 8.0);
    EXPECT_GT(a.alone_ms[1] / a.alone_ms[2], 3.0);
    EXPECT_LT(a.alone_ms[1] / a.alone_ms[2], 8.0);
    if (a.mode & TALLY_PROFILER_FLAG_EXACT) {
        EXPECT_EQ(a.samples, 0u);  // exact mode (TALLY_PROFILE_MODE=exact) takes no samples
    } else {
        // About 1 kHz: at least half the samples the wall time allows.
        EXPECT_GE(double(a.samples), 0.5 * a.total_ms * 1000.0 / tally_profiler_get_interval_us())
            << "total " << a.total_ms << " ms";
    }
    // The heavy stage gets the largest share, and every share agrees with the timing.
    EXPECT_GT(a.sampled_pct[1], a.sampled_pct[0]);
    EXPECT_GT(a.sampled_pct[1], a.sampled_pct[2]);
    EXPECT_GT(a.sampled_pct[1], a.overhead_pct);
    for (size_t k = 0; k < stages.size(); k++) {
        EXPECT_NEAR(a.sampled_pct[k], a.timed_pct[k], tolerance_points) << stages[k];
    }
}

}  // namespace
}  // namespace tally_e2e
