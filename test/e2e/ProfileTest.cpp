// End-to-end profiling tests: the apps compiled for `host-profile` by the JIT, run N times, and
// the profiler's numbers read back through the runtime API (tally_profiler_get_*_stats and
// tally_profiler_report_to_buffer).
//
// - Every app: the report's three sections come in the order funcs, copies to device, copies to
//   host; every expected slot (overhead, then each Func in walk order) is listed; runs == N.
// - memory: per-Func heap allocation counts and bytes equal loop iterations x runs exactly, the
//   serial-loop scratch's peak is one allocation, the pipeline's heap peak is at least what is
//   live at once, and nothing is left allocated.
// - skewed: in each profiling mode (exact, sampling, timer), every stage is billed exactly its
//   share of the work (heavy 5/7), on a testing clock that the pipeline itself advances once per
//   round of work: no assertion depends on real time or on the machine's load.
//
// The profiler is process-wide state: every test starts with tally_profiler_reset().

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>

#include "E2EUtil.h"
#include "conv_chain/reference.h"
#include "memory/reference.h"
#include "skewed/reference.h"
#include "tally/IRMutator.h"
#include "tally_runtime_testing.h"

namespace tally_e2e {
namespace {

/** An app with inputs of a given size, ready to run: owns its buffers and argument array. */
struct AppInstance {
    std::string name;
    std::vector<std::string> slots;  // expected slot names, in slot order
    std::vector<std::unique_ptr<Buffer<float>>> f32;
    std::vector<std::unique_ptr<Buffer<uint16_t>>> u16;
    std::vector<std::unique_ptr<Buffer<int32_t>>> i32;
    std::vector<std::unique_ptr<Buffer<uint32_t>>> u32;
    std::vector<tally::ArgumentValue> args;

    template <typename T>
    Buffer<T> *add(std::vector<std::unique_ptr<Buffer<T>>> &v, std::vector<int> extents,
                   std::function<T(Rng &)> gen, Rng &rng) {
        v.push_back(std::make_unique<Buffer<T>>(extents));
        Buffer<T> *img = v.back().get();
        for (size_t i = 0; i < img->size(); i++) {
            (*img)[i] = gen(rng);
        }
        args.push_back(*img);
        return img;
    }
    void add_scalars(int32_t a, int32_t b) {
        args.push_back(a);
        args.push_back(b);
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
        ASSERT_EQ(jit->call(app->args), 0);
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
        ASSERT_EQ(jit->call(app->args), 0);
    }
    std::vector<int32_t> want(size_t(width) * height);
    tally_apps::memory_reference(app->i32[0]->data(), want.data(), width, height);
    EXPECT_EQ(app->i32[1]->to_vector(), want);

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

/** Puts a call to tally_e2e_skewed_round() at the start of every xorshift round (the bodies
 * of the `<stage>.s1.k` loops): the pipeline reports each unit of its work as it does it. */
class CallPerRound : public tally::IRMutator {
public:
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::For *op) override {
        tally::Stmt s = tally::IRMutator::visit(op);
        const std::string suffix = ".s1.k";
        if (op->name.size() < suffix.size() ||
            op->name.compare(op->name.size() - suffix.size(), suffix.size(), suffix) != 0) {
            return s;
        }
        const tally::For *f = s.as<tally::For>();
        tally::Expr tick =
            tally::Call::make(tally::Int(32), "tally_e2e_skewed_round", {}, tally::Call::Extern);
        loops++;
        return tally::For::make(f->name, f->min, f->extent, f->for_type, f->device_api,
                                tally::Block::make(tally::Evaluate::make(tick), f->body));
    }
    int loops = 0;
};

}  // namespace
}  // namespace tally_e2e

// The profiler's clock for ProfileSkewed: it moves only when the pipeline reports a round of work
// (at the round's start), kRoundNs per round, and the round is sampled right there on the
// pipeline's own thread, so the Func current while the clock moved is the one billed, in every
// mode. Host work outside the
// rounds (allocations, the profiler's own calls, the machine's load) takes no time on it.
namespace {
constexpr uint64_t kRoundNs = 1000;
std::atomic<uint64_t> g_round_clock_ns{1000000000};
std::atomic<uint64_t> g_rounds{0};
uint64_t round_clock() {
    return g_round_clock_ns.load();
}
}  // namespace

/** Called by the JIT-compiled skewed pipeline (CallPerRound), found in this executable's
 * exported symbols. */
extern "C" __attribute__((visibility("default"))) int32_t tally_e2e_skewed_round() {
    g_rounds++;
    g_round_clock_ns += kRoundNs;
    tally_testing_sample_now();
    return 0;
}

namespace tally_e2e {
namespace {

// skewed: each stage is billed exactly its share of the work, in every profiling mode. The
// pipeline reports each xorshift round it does (CallPerRound) and the profiler's clock advances
// by a fixed step per round (round_clock), so the true share of each stage is its round count
// over all rounds: pre and post n * reps each, heavy 5 * n * reps (5/7 of the time). Nothing
// here depends on real time or on the machine's load; the real-time accuracy of the shares
// against timed stages is bench/truth_bench.cpp's BM_Truth (exact_pp, sampling_pp).
TEST(ProfileSkewed, HeavyStageShareMatchesStageTiming) {
    const int n = 512, reps = 6, runs = 3;
    const uint64_t stage_rounds = uint64_t(n) * reps;  // pre and post; heavy does 5 times this
    const std::vector<std::string> stages = {"pre", "heavy", "post"};
    const std::vector<uint64_t> rounds = {stage_rounds, 5 * stage_rounds, stage_rounds};

    tally::Module m = parse_app("skewed");
    CallPerRound per_round;
    for (tally::LoweredFunc &f : m.functions) {
        f.body = per_round.mutate(f.body);
    }
    ASSERT_EQ(per_round.loops, 3);
    auto profiled = compile_module(m, "host-profile");
    auto app = make_instance("skewed", n, reps);
    std::vector<uint32_t> want(n);
    tally_apps::skewed_reference(app->u32[0]->data(), want.data(), n, reps);

    const int32_t saved_mode = tally_profiler_get_default_mode();
    for (int32_t mode :
         {TALLY_PROFILER_FLAG_EXACT, TALLY_PROFILER_FLAG_SAMPLING, TALLY_PROFILER_FLAG_TIMER}) {
        SCOPED_TRACE(tally_profiler_mode_name(mode));
        ASSERT_EQ(tally_profiler_set_default_mode(mode), 0);
        tally_profiler_reset();
        tally_testing_set_clock(round_clock);
        g_rounds = 0;
        for (int r = 0; r < runs; r++) {
            EXPECT_EQ(profiled->call(app->args), 0);
        }
        tally_testing_set_clock(nullptr);
        EXPECT_EQ(app->u32[1]->to_vector(), want);
        const uint64_t all_rounds = runs * (rounds[0] + rounds[1] + rounds[2]);
        EXPECT_EQ(g_rounds.load(), all_rounds) << "the pipeline did not report every round";

        tally_pipeline_stats ps{};
        ASSERT_EQ(tally_profiler_get_pipeline_stats("skewed", &ps), 0);
        EXPECT_EQ(ps.runs, uint64_t(runs));
        EXPECT_EQ(ps.flags & TALLY_PROFILER_MODE_FLAGS, uint32_t(mode));
        EXPECT_EQ(ps.total_ns, all_rounds * kRoundNs);
        tally_slot_stats overhead{};
        ASSERT_EQ(tally_profiler_get_slot_stats("skewed", 0, &overhead), 0);
        EXPECT_STREQ(overhead.name, "overhead");
        EXPECT_EQ(overhead.time_ns, 0u);
        EXPECT_EQ(overhead.samples, 0u);
        for (size_t k = 0; k < stages.size(); k++) {
            tally_slot_stats ss{};
            ASSERT_EQ(tally_profiler_get_slot_stats("skewed", int32_t(k + 1), &ss), 0);
            EXPECT_EQ(ss.name, stages[k]);
            EXPECT_EQ(ss.time_ns, runs * rounds[k] * kRoundNs) << stages[k];
            EXPECT_NEAR(ss.percent, 100.0 * double(rounds[k]) / double(7 * stage_rounds), 1e-9)
                << stages[k];
            // Every round is one sample in the sampling modes (taken by the pipeline's call or,
            // if it got there first, by the sampler): none lost, none counted twice.
            EXPECT_EQ(ss.samples, mode == TALLY_PROFILER_FLAG_EXACT ? 0 : runs * rounds[k])
                << stages[k];
        }
    }
    ASSERT_EQ(tally_profiler_set_default_mode(saved_mode), 0);
    tally_profiler_reset();
}

}  // namespace
}  // namespace tally_e2e
