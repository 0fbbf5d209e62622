// Halide 21's -profile IR, as Halide 21 printed it (test/e2e/inputs/halide21/), compiled by Tally
// and run on Tally's runtime: Halide's own probes (its per-instance profiler ABI) report through
// Tally's profiler. Each pipeline is called once as a bounds query (an input with no host memory)
// and then `kRuns` times, on a testing clock that the pipeline advances itself, once per iteration
// of each innermost loop (TickPerIteration). The report must name the pipeline's slots in
// Halide's order, Halide's special slots included, count the runs and not the bounds query, and
// bill every tick and nothing else. Where every tick lands in one known slot (blur3x3, its tasks
// run in order on the caller), every Func that loops gets time and the exact and sampling modes
// bill each slot the same, run after run. No assertion depends on real time.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "E2EUtil.h"
#include "tally/IRMutator.h"
#include "tally/IRVisitor.h"
#include "tally_runtime_testing.h"

#ifndef TALLY_HALIDE21_DIR
#error "TALLY_HALIDE21_DIR must name test/e2e/inputs/halide21"
#endif

namespace {
constexpr uint64_t kTickNs = 1000;
std::atomic<uint64_t> g_clock_ns{1000000000};
std::atomic<uint64_t> g_ticks{0};
uint64_t tick_clock() {
    return g_clock_ns.load();
}
}  // namespace

/** Called by the JIT-compiled pipelines once per innermost loop iteration (TickPerIteration),
 * found in this executable's exported symbols. */
extern "C" __attribute__((visibility("default"))) int32_t tally_e2e_halide21_tick() {
    g_ticks++;
    g_clock_ns += kTickNs;
    tally_testing_sample_now();
    return 0;
}

namespace tally_e2e {
namespace {

/** Puts a call to tally_e2e_halide21_tick() at the start of the body of every innermost loop. */
class TickPerIteration : public tally::IRMutator {
public:
    using tally::IRMutator::visit;
    int loops = 0;

private:
    tally::Stmt visit(const tally::For *op) override {
        tally::Stmt s = tally::IRMutator::visit(op);
        class HasLoop : public tally::IRVisitor {
        public:
            using tally::IRVisitor::visit;
            bool found = false;
            void visit(const tally::For *) override { found = true; }
        } inner;
        op->body.accept(&inner);
        if (inner.found) {
            return s;
        }
        const tally::For *f = s.as<tally::For>();
        tally::Expr tick =
            tally::Call::make(tally::Int(32), "tally_e2e_halide21_tick", {}, tally::Call::Extern);
        loops++;
        return tally::For::make(f->name, f->min, f->extent, f->for_type, f->device_api,
                                tally::Block::make(tally::Evaluate::make(tick), f->body));
    }
};

struct Case {
    const char *file;                  // in test/e2e/inputs/halide21
    const char *pipeline;              // the name Halide's probes give the run
    std::vector<std::string> slots;    // Halide's func table, in id order
    std::vector<std::string> looping;  // Funcs whose loops must be billed
    /** Every task runs on the caller in order (tally_set_num_threads(1)), so each tick is
     * billed to one known slot. async_fork's producers run on threads of their own (Halide's
     * async tasks need them), so which of two concurrent slots a tick lands in varies; its
     * totals do not. */
    bool serial_ticks;
};

const Case kCases[] = {
    {"blur3x3.profile.lowered.stmt",
     "blur_out",
     {"overhead", "waiting for parallel tasks to finish", "halide_malloc", "halide_free", "blur_y",
      "blur_x", "sharpen", "blur_out"},
     {"blur_y", "blur_x", "sharpen", "blur_out"},
     true},
    {"async_fork.profile.lowered.stmt",
     "async_out",
     {"overhead", "waiting for parallel tasks to finish", "halide_malloc", "halide_free",
      "async_out", "prod_a", "prod_b"},
     {},
     false},
};

constexpr int kRuns = 3;

/** Per-slot times of `kRuns` runs after a bounds query, in `mode`; checks what every mode must
 * show. Both pipelines take a 2-D input and a 2-D output of the same type. */
template <typename T>
std::vector<uint64_t> run_case(const Case &c, tally::JITModule &jit, int32_t mode) {
    SCOPED_TRACE(std::string(c.file) + " in " + tally_profiler_mode_name(mode));
    EXPECT_EQ(tally_profiler_set_default_mode(mode), 0);
    tally_profiler_reset();
    tally_testing_set_clock(tick_clock);
    g_ticks = 0;
    const int w = 64, h = 40;
    Buffer<T> out({w, h});
    // The bounds query, as a Halide caller makes it: an input with no memory, whose shape the
    // pipeline fills in with the region it reads. It computes nothing and is no run.
    halide_buffer_t query = *out.raw();
    halide_dimension_t query_dims[2] = {};
    query.dim = query_dims;
    query.host = nullptr;
    void *query_args[] = {&query, out.raw()};
    EXPECT_EQ(jit.run(query_args), 0);
    EXPECT_EQ(g_ticks.load(), 0u) << "the bounds query computed something";
    EXPECT_GE(query.dim[0].extent, w);
    EXPECT_GE(query.dim[1].extent, h);
    tally_pipeline_stats before{};
    if (tally_profiler_get_pipeline_stats(c.pipeline, &before) == 0) {
        EXPECT_EQ(before.runs, 0u) << "the bounds query counted as a run";
    }
    // The input the query asked for.
    Buffer<T> in({query.dim[0].extent, query.dim[1].extent});
    in.raw()->dim[0].min = query.dim[0].min;
    in.raw()->dim[1].min = query.dim[1].min;
    Rng rng(7);
    for (size_t i = 0; i < in.size(); i++) {
        in[i] = T(rng.below(4096));
    }
    void *args[] = {in.raw(), out.raw()};
    for (int r = 0; r < kRuns; r++) {
        EXPECT_EQ(jit.run(args), 0);
    }
    tally_testing_set_clock(nullptr);

    tally_pipeline_stats ps{};
    EXPECT_EQ(tally_profiler_get_pipeline_stats(c.pipeline, &ps), 0);
    EXPECT_EQ(ps.runs, uint64_t(kRuns));
    EXPECT_EQ(ps.num_slots, int32_t(c.slots.size()));
    EXPECT_GT(g_ticks.load(), 0u);
    EXPECT_EQ(ps.total_ns, g_ticks.load() * kTickNs) << "time passed outside the ticks";
    std::vector<uint64_t> times;
    uint64_t sum = 0;
    for (size_t s = 0; s < c.slots.size(); s++) {
        tally_slot_stats st{};
        EXPECT_EQ(tally_profiler_get_slot_stats(c.pipeline, int32_t(s), &st), 0);
        EXPECT_EQ(st.name, c.slots[s]);
        EXPECT_EQ(st.kind, TALLY_SLOT_FUNC) << c.slots[s];
        if (c.serial_ticks) {
            EXPECT_EQ(st.time_ns % kTickNs, 0u) << c.slots[s] << ": a tick was split";
        }
        times.push_back(st.time_ns);
        sum += st.time_ns;
    }
    EXPECT_EQ(sum, ps.total_ns);
    for (const std::string &f : c.looping) {
        for (size_t s = 0; s < c.slots.size(); s++) {
            if (c.slots[s] == f) {
                EXPECT_GT(times[s], 0u) << f << " looped but was billed nothing";
            }
        }
    }
    // The report lists every slot under Halide's names.
    int32_t n = tally_profiler_report_to_buffer(nullptr, 0, 0);
    std::string text(size_t(n > 0 ? n : 0) + 1, '\0');
    tally_profiler_report_to_buffer(text.data(), text.size(), 0);
    for (const std::string &s : c.slots) {
        EXPECT_NE(text.find(s), std::string::npos) << s << " missing from\n" << text;
    }
    return times;
}

TEST(ProfileHalide21, HalidesProbesReportThroughTallysProfiler) {
    const int32_t saved_mode = tally_profiler_get_default_mode();
    tally_set_num_threads(1);  // tasks run in order on the caller: the same ticks every time
    for (const Case &c : kCases) {
        SCOPED_TRACE(c.file);
        tally::Module m = tally::parse_module_file(std::string(TALLY_HALIDE21_DIR) + "/" + c.file);
        TickPerIteration ticks;
        for (tally::LoweredFunc &f : m.functions) {
            f.body = ticks.mutate(f.body);
        }
        ASSERT_GT(ticks.loops, 0);
        // "host": Halide's probes are the only ones (Tally's own skip Halide-instrumented IR).
        auto jit = compile_module(m, "host");
        const bool blur = std::string(c.pipeline) == "blur_out";
        auto run = [&](int32_t mode) {
            return blur ? run_case<uint16_t>(c, *jit, mode) : run_case<float>(c, *jit, mode);
        };
        std::vector<uint64_t> exact = run(TALLY_PROFILER_FLAG_EXACT);
        std::vector<uint64_t> sampled = run(TALLY_PROFILER_FLAG_SAMPLING);
        if (c.serial_ticks) {
            EXPECT_EQ(exact, sampled) << "the two modes billed the same ticks differently";
            EXPECT_EQ(run(TALLY_PROFILER_FLAG_EXACT), exact) << "not deterministic";
        }
    }
    tally_set_num_threads(0);
    ASSERT_EQ(tally_profiler_set_default_mode(saved_mode), 0);
    tally_profiler_reset();
}

}  // namespace
}  // namespace tally_e2e
