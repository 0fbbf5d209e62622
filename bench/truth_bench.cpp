// How truthful the profiler's shares are, and what profiling costs, in exact and sampling mode,
// beside Halide 21's and Halide 14's own profilers.
//
// Against truth constructed in advance (bench/truth_halide.cpp): the corpora's truth pipelines
// (tools/corpus/corpus_generator.cpp), whose every element calls tally_truth_work(v, ns, first)
// (test/conformance/extern_stages.c): it returns once the calling thread's deadline, chained from
// the run's first element and advanced by ns, has passed, so a stage of N elements takes N * ns of
// wall time whatever the caches, the code between the calls or the stages around it do. What the
// machine takes from the thread (a preemption, an interrupt: a gap of over 1 us between two of its
// clock reads, in a call or between two calls) cannot be set in advance: it pushes the deadline
// back by its length and is counted as time lost by the calls of that ns, each stage having its
// own ns. A stage's truth is N * ns plus its calls' lost time, read for each profile from the copy
// of the work its code calls (Tally's JIT: the benchmark's; Halide's objects: their library's).
// Quiet, the lost time is 0.5 - 2 % of a run; under the hog most of it, and the kernel's own
// figure for the thread's time waiting for a CPU (its schedstat run delay) says how far the lost
// time is that. `truth_chain`: t1 -> t2 -> t3,
// serial, set to 10 / 30 / 60 %; `truth_inner`: ti computed inside to's loop (two slot switches
// per element) 30 %, to 10 %, then tr 60 %; `truth_par`: tpre 20 %, tpar, whose two halves run as
// two parallel tasks with uneven work (light half 25 %, heavy half 50 % of the run: the stage's
// wall time is 50 %, its threads' times add to 75 %), then tpost 30 %. N is chosen so that a run
// takes the scenario's time.
// In one process: Tally's JIT of the text Halide 21 printed, profiled in exact and in sampling
// mode, Halide 21's and Halide 14's own -profile objects of the same pipeline
// (libhalide21_corpus.so, libhalide14_corpus.so: NAME_profile), and Halide 14's -profile_by_timer
// objects (libhalide14_corpus_by_timer.so: NAME_profile_by_timer, with that profiler's runtime, a
// SIGPROF timer); Halide's profilers are read through halide_profiler_get_state
// (bench/HalideLibrary.h). A profile is `runs` consecutive
// profiled runs of one profiler (its figures reset before them), the profilers in an order that
// rotates from profile to profile; a share is a stage's billed time over the three stages'; the
// error is the largest |share - set share| over the stages, in percentage points.
//
//   BM_Constructed/<pipeline>/<scenario>/<hog>
//     pipeline 0: truth_chain; 1: truth_inner; 2: truth_par. scenario 0: ~60 ms runs, 21
//     accumulated; 1: one ~60 ms run (median over 7 profiles); 2: ~2 ms runs in blocks of 10 (7
//     blocks); 3: a single ~0.5 ms run (21 profiles). hog 1: two processes spinning on the CPUs.
//     Counters: exact_pp, sampling_pp, halide21_pp, halide14_pp, halide14_timer_pp (the errors:
//     medians over the profiles); *_other_pct (the share of all billed time that went to no stage:
//     overhead and the runtime's own rows); set_ms (a run's set time); construction_pct (how far
//     the construction holds: Tally's unprofiled run less its calls' lost time, median, over the
//     set time, less 100 %), halide_construction_pct (the same for Halide 21's code); lost_pct
//     (the time lost in Tally's exact profiles over their set time) and run_delay_pct (the
//     calling thread's run delay in the same profiles over the set time: for serial pipelines
//     the part of the lost time that was preemption); halide21_primed_pp (Halide 21
//     after one unjudged profiled run right before its reset: its sampler keeps no time while no
//     instance runs, so the first sample of a run bills everything since the last sample of the
//     previous profiled run, whatever ran between, to the Func current then; primed, that gap
//     is one reset long). A profiler whose library is not built has no column; the label says
//     why.
//   BM_ConstructedGpu/<api>: truth_gpu on Vulkan (lavapipe, one shader thread) and on OpenCL
//     (PoCL, one work-group thread): ga and gb on the device, gc on the host, 128 x 128, each
//     an update stepping every element ka, kb, kc times (about 20 / 40 / 60 ms, calibrated on
//     each side's own code: Tally's LLVM folds 8 of the host stage's steps into one fused
//     multiply-add, Halide's does not). Truth: the time a
//     stage's steps add to a run (the median over rounds of the round's plain run less its run
//     with that stage's steps at 0), each side for its own code: Tally's JIT of the API's
//     conceptual statement (its own offload) and Halide 21's truth_gpu_<api> objects. 25
//     rounds, every variant once per round in a rotating order: plain, the three emptied
//     variants, Tally's -profile in exact and sampling mode and -profile_timestamps (a device
//     stage's share from its kernels' device time), Halide 21's -profile. Then each profiled
//     build alone, 25 runs back to back after an unjudged run. Counters: exact_pp, sampling_pp,
//     timestamps_pp, halide21_pp (interleaved), *_b2b_pp (back to back), the max error over the
//     three stages' shares of their sum; truth_ci_pp, halide_truth_ci_pp (how far the truth's
//     shares are known: the largest half-width of a 90 % bootstrap interval over the rounds);
//     *_ratio (profiled over plain median wall time, interleaved; *_lo, *_hi: 90 % bootstrap
//     interval), *_paired_ratio (the median of the rounds' profiled over plain runs; *_lo, *_hi
//     likewise); truth_*_ms, halide_truth_*_ms; tally_ms, halide_ms (plain runs).
//   BM_HalideCost/<halide>: float_chain as Halide 21 (14) lowered it, 2048 x rows (~40 ms
//     unprofiled with Tally), 2 threads on each side: Tally's unprofiled and exact-mode runs of
//     Halide's text and Halide's own float_chain and float_chain_profile objects, interleaved
//     for 101 rounds in one process. tally_ratio, halide_ratio = median profiled run over median
//     unprofiled run of the same side (*_lo, *_hi: 90 % bootstrap interval); tally_paired_ratio,
//     halide_paired_ratio = the median over rounds of a round's profiled run over its unprofiled
//     run (*_lo, *_hi as above); tally_ms, halide_ms: the unprofiled medians.
//
// Against stages timed alone (a second view, with a floor of its own; below):
//
// Pipelines: `float_chain` as Halide 14 lowered it
// (test/conformance/halide14/float_chain/float_chain.host.stmt: three pointwise float32 stages
// s1 -> s2 -> s3, each compute_root, rows parallel, x vectorized by 8) and the `blur` app (blur_x
// -> blur_y).
// Tally compiles each for `host-profile` (its own instrumentation: one slot per Func, worker
// contexts per parallel task) and, for the truths, once per stage and once per prefix for `host`
// with the other `produce`s emptied: each stage run alone as its own pipeline (the stage-alone
// truth, which the accuracy targets name), and the pipeline's first k stages (the in-situ truth:
// stage k's time = prefix k less prefix k - 1, reading what its producers just wrote), with the
// same schedule, on the same warm buffers; see judge() below. A share is a stage's time over the
// sum of the stages' times; a profile's error is the largest, over the stages, of |reported share -
// true share|, in percentage points. Both truths and the profiles they judge are measured in the
// same rounds, under the same conditions (threads, CPU hog). Each profile's first run in the
// process is a warm-up whose numbers are dropped (warm code and buffers: the error of a cold first
// run is another question).
//
// The accumulation check: the profiled builds that BM_Truth judges also carry a call to
// truth_bench_mark() (below, this program's, reading CLOCK_MONOTONIC) at the start and at the end
// of every stage's `produce`, so each profiled run also times its stages' spans itself, apart
// from the profiler. Exact mode reads a clock at the same points, so `*_run_pp` (each mode
// against these spans) checks that a profile adds up what it reads, not that its shares are
// true (the constructed truth, BM_Constructed, judges that); `floor_pp` compares the spans with
// the stage-alone truth (the error a perfect profiler would have against this truth in the same
// runs: the floor the truth allows).
// Both pipelines' stages are compute_root, so every `produce` runs on the calling thread.
//
// Image heights are calibrated at start-up so that a 2-thread (or 1-thread) run takes the
// scenario's time: ~60 ms (long), ~2 ms, ~0.5 ms; width 2048.
//
//   BM_Truth/<pipeline>/<scenario>/<threads>[/hog]
//     scenario 0: long runs, the profile accumulated over 21 runs;
//              1: one long run (median error over 7 single-run profiles);
//              2: ~2 ms runs in blocks of 10 (median over 7 blocks);
//              3: a single ~0.5 ms run (median over 21 single-run profiles).
//     hog: two processes spinning on the CPUs throughout (truth and profiles alike).
//     Counters: exact_pp, sampling_pp (the errors), exact_insitu_pp, sampling_insitu_pp (against
//     the in-situ truth), truth_gap_pp (the two truths' difference), exact_run_pp,
//     sampling_run_pp (the accumulation check), floor_pp (the marked spans against the
//     truth, in the exact profiles' runs), run_ms (the fastest of 7
//     unprofiled runs: the run's size without interference from other load), exact_overhead_pct /
//     sampling_overhead_pct (share billed to `overhead`).
//   BM_WallRatio/<pipeline>: long runs with 2 threads, unprofiled / exact / sampling interleaved
//     in one process, for as many rounds as fill about 12 s (151 at least): exact_paired_ratio =
//     the median over rounds of the round's exact run over its unprofiled run (exact_paired_
//     ratio_lo, _hi: its 90 % bootstrap interval; a drift of the machine's speed moves both runs
//     of a round, so it cancels), exact_ratio, sampling_ratio = median profiled run over median
//     unprofiled run (exact_ratio_lo, _hi: its 90 % bootstrap interval, rounds resampled whole);
//     *_min_ratio = fastest over fastest (the runs least disturbed by other load); *_cpu_ratio =
//     the same as the ratio in process CPU time (all threads, the sampler's included); rounds;
//     rows = the image height (tasks per stage).
//   BM_SwitchCost/<mode>: ns of the calling thread's CPU time per tally_profiler_set_current
//     between two slots of a live run (mode 0 exact, 1 sampling with the sampler thread at
//     1 kHz), and per worker begin + set_current + end (a parallel task's profiler calls, the
//     task setting its loop's slot) on one thread (task_ns) and on two at once
//     (task_2threads_ns); what profiling adds to a halide_do_par_for task on 1 and 2 pool
//     threads as inject-profiling's code runs it (pool_task_ns, pool_task_2threads_ns: the pool
//     opens the task's context, the task makes no call), and with the task making those calls
//     itself (pool_task_calls_ns); one bare rdtsc (rdtsc_ns).
//
// bench/run_benchmarks.py adds 5 repetitions and reports the median of each counter.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <vector>

#include "Stats.h"
#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/IRMutator.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"

#ifndef TALLY_CONFORMANCE_DIR
#error "TALLY_CONFORMANCE_DIR must name test/conformance/halide14"
#endif
#ifndef TALLY_APPS_DIR
#error "TALLY_APPS_DIR must name apps/"
#endif

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWidth = 2048;
constexpr double kLongMs = 60.0, kShortMs = 2.0, kTinyMs = 0.5;
// Runs of ~30 ms with 2 threads spread 18-35 ms here (memory bandwidth shared with the host's
// other guests): 151 rounds put the ratio of medians within about +-1 % (90 % bootstrap). Shorter
// runs (blur: ~9 ms) get more rounds, up to kWallSeconds of runs.
constexpr int kWallRounds = 151, kWallMaxRounds = 1001;
constexpr double kWallSeconds = 12.0;
// At most 16384 rows (128 MiB per float buffer): halide_malloc keeps freed blocks of that size,
// so every run finds its intermediates warm. Beyond it (measured with 65536 rows) each run maps
// fresh pages, and a stage alone that only reads an intermediate no stage wrote touches the zero
// page instead of faulting: the stage-alone truth is then wrong by ~18 pp for both modes alike.
constexpr int kMaxHeight = 1 << 14;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double process_cpu_ms() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

double thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

/** Replaces every `produce` but those of `keep` with a no-op: the pipeline runs only those. */
class KeepStages : public tally::IRMutator {
public:
    explicit KeepStages(std::vector<std::string> keep) : keep_(std::move(keep)) {}
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::ProducerConsumer *op) override {
        if (op->is_producer && std::find(keep_.begin(), keep_.end(), op->name) == keep_.end()) {
            return tally::Evaluate::make(tally::make_zero(tally::Int(32)));
        }
        return tally::IRMutator::visit(op);
    }

private:
    std::vector<std::string> keep_;
};

constexpr int kMaxStages = 8;
// The accumulation check's spans: ns each stage's `produce` has taken, over all runs of the marked
// builds so far, and the start of the span in progress. Only the calling thread runs `produce`s
// (the stages are compute_root), so plain variables do.
uint64_t g_marked_ns[kMaxStages], g_mark_start[kMaxStages];

uint64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

}  // namespace

/** Called by the marked builds' generated code (resolved in this process by the JIT): edge 0 at
 * the start of stage `stage`'s `produce`, 1 at its end. */
extern "C" __attribute__((visibility("default"))) int32_t truth_bench_mark(int32_t stage,
                                                                           int32_t edge) {
    if (stage < 0 || stage >= kMaxStages) {
        return 0;
    }
    uint64_t now = monotonic_ns();
    if (edge == 0) {
        g_mark_start[stage] = now;
    } else {
        g_marked_ns[stage] += now - g_mark_start[stage];
    }
    return 0;
}

namespace {

/** Brackets the body of each `produce` of `stages` with truth_bench_mark(k, 0) and (k, 1). */
class MarkStages : public tally::IRMutator {
public:
    explicit MarkStages(std::vector<std::string> stages) : stages_(std::move(stages)) {}
    using tally::IRMutator::visit;
    tally::Stmt visit(const tally::ProducerConsumer *op) override {
        tally::Stmt s = tally::IRMutator::visit(op);
        auto it = std::find(stages_.begin(), stages_.end(), op->name);
        if (!op->is_producer || it == stages_.end()) {
            return s;
        }
        const int k = int(it - stages_.begin());
        auto mark = [k](int edge) {
            return tally::Evaluate::make(tally::Call::make(
                tally::Int(32), "truth_bench_mark",
                {tally::make_const(tally::Int(32), k), tally::make_const(tally::Int(32), edge)},
                tally::Call::Extern));
        };
        const auto *pc = s.as<tally::ProducerConsumer>();
        return tally::ProducerConsumer::make(op->name, true,
                                             tally::Block::make({mark(0), pc->body, mark(1)}));
    }

private:
    std::vector<std::string> stages_;
};

std::unique_ptr<tally::JITModule> compile(tally::Module m, const std::string &target) {
    return tally::compile_jit(tally::lower(m, tally::Target::parse(target)));
}

/** One pipeline at one size: its profiled build, its stage-alone builds, its buffers. */
class Pipeline {
public:
    virtual ~Pipeline() = default;
    virtual const std::vector<std::string> &stages() const = 0;
    virtual int run(const tally::JITModule &jit) = 0;
    virtual void resize(int height) = 0;
    virtual int height() const = 0;

    void build(const tally::Module &m) {
        host = compile(m, "host");
        profiled = compile(m, "host-profile");
        tally::Module marked_module = m;
        for (tally::LoweredFunc &f : marked_module.functions) {
            f.body = MarkStages(stages()).mutate(f.body);
        }
        marked = compile(marked_module, "host-profile");
        alone.clear();
        prefix.clear();
        std::vector<std::string> first;
        for (const std::string &s : stages()) {
            alone.push_back(compile(keep(m, {s}), "host"));
            first.push_back(s);
            prefix.push_back(compile(keep(m, first), "host"));
        }
        empty = compile(keep(m, {}), "host");
    }

    static tally::Module keep(const tally::Module &m, const std::vector<std::string> &stages) {
        tally::Module kept = m;
        for (tally::LoweredFunc &f : kept.functions) {
            f.body = KeepStages(stages).mutate(f.body);
        }
        return kept;
    }

    // `stages()` run in this order: prefix[k] runs the first k + 1 of them. `marked` is
    // `profiled` timing its stages' spans itself (truth_bench_mark).
    std::unique_ptr<tally::JITModule> host, profiled, marked, empty;
    std::vector<std::unique_ptr<tally::JITModule>> alone, prefix;
};

/** float_chain as Halide 14 lowered it: in (float32) -> s1 -> s2 -> s3 (the output). */
class FloatChain : public Pipeline {
public:
    FloatChain() {
        build(tally::parse_module_file(std::string(TALLY_CONFORMANCE_DIR) +
                                       "/float_chain/float_chain.host.stmt"));
    }
    const std::vector<std::string> &stages() const override { return stages_; }
    void resize(int h) override {
        in = std::make_unique<tally::Buffer<float>>(std::vector<int32_t>{kWidth, h});
        out = std::make_unique<tally::Buffer<float>>(std::vector<int32_t>{kWidth, h});
        uint64_t s = 12345;
        for (float &v : *in) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v = -2.0f + 4.0f * float(s >> 40) / 16777216.0f;
        }
        h_ = h;
    }
    int height() const override { return h_; }
    int run(const tally::JITModule &jit) override {
        // By name: in a stage-alone build the other stages' closures are called by no one, so
        // they would look like entry points too.
        return jit.call("float_chain", {*in, *out});
    }

private:
    std::vector<std::string> stages_{"s1$0", "s2$0", "s3$0"};
    std::unique_ptr<tally::Buffer<float>> in, out;
    int h_ = 0;
};

/** The blur app: input (uint16, (w+2) x (h+2)) -> blur_x -> blur_y (the output). */
class Blur : public Pipeline {
public:
    Blur() { build(tally::parse_module_file(std::string(TALLY_APPS_DIR) + "/blur/blur.stmt")); }
    const std::vector<std::string> &stages() const override { return stages_; }
    void resize(int h) override {
        in = std::make_unique<tally::Buffer<uint16_t>>(std::vector<int32_t>{kWidth + 2, h + 2});
        out = std::make_unique<tally::Buffer<uint16_t>>(std::vector<int32_t>{kWidth, h});
        uint64_t s = 777;
        for (uint16_t &v : *in) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v = uint16_t(s >> 48);
        }
        h_ = h;
    }
    int height() const override { return h_; }
    int run(const tally::JITModule &jit) override {
        return jit.call("blur", {*in, *out, int32_t(kWidth), int32_t(h_)});
    }

private:
    std::vector<std::string> stages_{"blur_x", "blur_y"};
    std::unique_ptr<tally::Buffer<uint16_t>> in, out;
    int h_ = 0;
};

std::unique_ptr<Pipeline> make_pipeline(int which) {
    if (which == 0) {
        return std::make_unique<FloatChain>();
    }
    return std::make_unique<Blur>();
}

/** Unprofiled run times in ms over `n` runs after one warm-up. */
std::vector<double> run_times_ms(Pipeline &p, int n) {
    std::vector<double> t;
    p.run(*p.host);
    for (int i = 0; i < n; i++) {
        Clock::time_point t0 = Clock::now();
        p.run(*p.host);
        t.push_back(ms_since(t0));
    }
    return t;
}

/** Sets the image height so that an unprofiled run takes about `target_ms` (judged by the
 * fastest of 7 runs: the least disturbed by other load). */
void calibrate(Pipeline &p, double target_ms) {
    int h = 64;
    for (int step = 0; step < 6; step++) {
        p.resize(h);
        std::vector<double> t = run_times_ms(p, 7);
        double ms = *std::min_element(t.begin(), t.end());
        int next = int(std::lround(double(h) * target_ms / std::max(ms, 1e-3)));
        next = std::max(8, std::min(next, kMaxHeight));
        if (std::abs(next - h) <= h / 20) {
            break;
        }
        h = next;
    }
    p.resize(h);
}

/** Two processes spinning on the CPUs while alive. fork() from a multi-threaded process: the
 * children only spin (no locks, no allocation) until they are killed. */
class CpuHog {
public:
    explicit CpuHog(int n) {
        for (int i = 0; i < n; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                volatile uint64_t x = 0;
                for (;;) {
                    x = x + 1;
                }
            }
            if (pid > 0) {
                pids_.push_back(pid);
            }
        }
    }
    ~CpuHog() {
        for (pid_t pid : pids_) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }

private:
    std::vector<pid_t> pids_;
};

/** What the registry holds for the profiled pipeline's runs in `mode`: each stage's time and
 * the time of all slots (overhead and copies included), in ns. */
struct Billed {
    std::vector<double> stage_ns;
    double total_ns = 0;
    std::vector<double> marked_ns;  // the marked produce spans (truth_bench_mark), per stage
};

Billed billed(const Pipeline &p, int32_t mode) {
    Billed b;
    b.stage_ns.assign(p.stages().size(), 0.0);
    for (int32_t i = 0; i < tally_profiler_num_pipelines(); i++) {
        tally_pipeline_stats ps{};
        if (tally_profiler_get_pipeline_stats_by_index(i, &ps) != 0 || ps.flags != mode) {
            continue;
        }
        for (int32_t s = 0; s < ps.num_slots; s++) {
            tally_slot_stats ss{};
            tally_profiler_get_slot_stats_by_index(i, s, &ss);
            b.total_ns += double(ss.time_ns);
            for (size_t k = 0; k < p.stages().size(); k++) {
                if (p.stages()[k] == ss.name) {
                    b.stage_ns[k] += double(ss.time_ns);
                }
            }
        }
    }
    return b;
}

/** The shares (percent of all billed time, as the report's) of the runs between two readings. */
std::vector<double> shares_between(const Billed &before, const Billed &after) {
    std::vector<double> share(after.stage_ns.size());
    const double total = after.total_ns - before.total_ns;
    for (size_t k = 0; k < share.size(); k++) {
        share[k] = total > 0 ? 100.0 * (after.stage_ns[k] - before.stage_ns[k]) / total : 0.0;
    }
    return share;
}

double max_error_pp(const std::vector<double> &got, const std::vector<double> &truth) {
    double e = 0;
    for (size_t k = 0; k < truth.size(); k++) {
        e = std::max(e, std::fabs(got[k] - truth[k]));
    }
    return e;
}

struct Scenario {
    double run_ms;  // calibration target
    int runs;       // profiled runs per profile
    int profiles;   // profiles per repetition (the median error is reported)
    int truth_rounds;
};

const Scenario kScenarios[] = {
    {kLongMs, 21, 1, 9},
    {kLongMs, 1, 7, 9},
    {kShortMs, 10, 7, 31},
    {kTinyMs, 1, 21, 61},
};

/** Pipelines per (pipeline, scenario, threads), calibrated once and kept. */
Pipeline &pipeline_for(int which, int scenario, int threads) {
    static std::unique_ptr<Pipeline> cache[2][4][3];
    std::unique_ptr<Pipeline> &p = cache[which][scenario][threads];
    if (!p) {
        p = make_pipeline(which);
        calibrate(*p, kScenarios[scenario].run_ms);
    }
    return *p;
}

/** Shares (percent) from stage times: each over their sum (negative differences count 0). */
std::vector<double> to_shares(std::vector<double> ms) {
    double sum = 0;
    for (double &v : ms) {
        v = std::max(0.0, v);
        sum += v;
    }
    for (double &v : ms) {
        v = sum > 0 ? 100.0 * v / sum : 0.0;
    }
    return ms;
}

/** One repetition of a scenario: two truths and both modes' profiles, measured in the same
 * rounds. Each round runs, in an order that rotates from round to round, every stage alone,
 * every prefix of the pipeline (its first k stages), the pipeline with no stage, and (while
 * their profiles still need runs) one profiled run in exact mode and one in sampling mode; so
 * the truths and the profiles they judge see the same machine, drift and load included.
 *
 * The stage-alone truth: a stage's time = the median of its alone runs less the median run of
 * the pipeline with no stage (the fixed costs every alone run pays once, which a profile bills
 * to `overhead`). Alone, a stage reads its producers' buffers cold: whatever the previous runs
 * left in the caches, not what its producers just wrote. The in-situ truth: a stage's time =
 * median run of the prefix ending with it less that of the prefix before it, so it reads what
 * its producers just wrote, as in the pipeline. Either truth's share = a stage's time over the
 * sum of the stages' times. Where the two truths disagree (`truth_gap_pp`), no profile can be
 * judged more closely than that against either.
 *
 * A profile is `runs` consecutive profiled runs of its mode; its shares are the differences of
 * the registry's totals across them (percent of all billed time, as the report's); its error =
 * max over the stages of |share - true share|. Round -1 warms everything up and is dropped. */
struct Judged {
    std::vector<double> exact_pp, sampling_pp, exact_insitu_pp, sampling_insitu_pp;
    std::vector<double> exact_overhead, sampling_overhead;
    std::vector<double> exact_run_pp, sampling_run_pp;  // the accumulation check
    std::vector<double> floor_pp;  // that clock against the truth, in the exact profiles' runs
    double truth_gap_pp = 0;
};

Judged judge(Pipeline &p, const Scenario &sc) {
    const size_t n = p.alone.size();
    const int profiled_runs = sc.runs * sc.profiles;
    const int rounds = std::max(sc.truth_rounds, profiled_runs);
    const int32_t modes[2] = {TALLY_PROFILER_FLAG_EXACT, TALLY_PROFILER_FLAG_SAMPLING};
    // Variants: alone 0..n-1, prefix n..2n-1, empty 2n, exact 2n+1, sampling 2n+2.
    const size_t timed = 2 * n + 1, variants = 2 * n + 3;
    std::vector<std::vector<double>> t(timed);
    std::vector<std::vector<std::vector<double>>> profile_shares(2), marked_shares(2);
    std::vector<std::vector<double>> overhead(2);
    Billed mark[2];
    // Each mode's marked spans: the stages' marked ns over all of that mode's runs so far.
    std::vector<double> marked_sum[2] = {std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
    tally_profiler_reset();
    for (int r = -1; r < rounds; r++) {
        if (r == 0) {
            tally_profiler_reset();  // the warm-up round's profiled runs are dropped
        }
        for (size_t j = 0; j < variants; j++) {
            const size_t v = (size_t(std::max(r, 0)) + j) % variants;
            if (v >= timed) {
                const int m = int(v - timed);
                if (r >= profiled_runs) {
                    continue;
                }
                if (r >= 0 && r % sc.runs == 0) {
                    mark[m] = billed(p, modes[m]);  // the profile starts
                    mark[m].marked_ns = marked_sum[m];
                }
                tally_profiler_set_default_mode(modes[m]);
                uint64_t marked_before[kMaxStages];
                std::copy(g_marked_ns, g_marked_ns + kMaxStages, marked_before);
                p.run(*p.marked);
                for (size_t k = 0; k < n; k++) {
                    marked_sum[m][k] += double(g_marked_ns[k] - marked_before[k]);
                }
                if (r >= 0 && r % sc.runs == sc.runs - 1) {
                    Billed now = billed(p, modes[m]);
                    now.marked_ns = marked_sum[m];
                    profile_shares[m].push_back(shares_between(mark[m], now));
                    // The shares an error-free profiler would report for the same runs: each
                    // stage's marked time over the same total the profile's shares are of.
                    const double billed_total = now.total_ns - mark[m].total_ns;
                    std::vector<double> marked(n, 0.0);
                    for (size_t k = 0; k < n && billed_total > 0; k++) {
                        marked[k] =
                            100.0 * (now.marked_ns[k] - mark[m].marked_ns[k]) / billed_total;
                    }
                    marked_shares[m].push_back(marked);
                    double stages = 0;
                    for (size_t k = 0; k < n; k++) {
                        stages += now.stage_ns[k] - mark[m].stage_ns[k];
                    }
                    const double total = now.total_ns - mark[m].total_ns;
                    overhead[m].push_back(total > 0 ? 100.0 * (total - stages) / total : 0.0);
                }
                continue;
            }
            const tally::JITModule &jit = v < n       ? *p.alone[v]
                                          : v < 2 * n ? *p.prefix[v - n]
                                                      : *p.empty;
            Clock::time_point t0 = Clock::now();
            p.run(jit);
            if (r >= 0) {
                t[v].push_back(ms_since(t0));
            }
        }
    }
    tally_profiler_set_default_mode(0);
    tally_profiler_reset();

    const double fixed = median(t[2 * n]);
    std::vector<double> alone_ms(n), insitu_ms(n);
    double before = fixed;
    for (size_t k = 0; k < n; k++) {
        alone_ms[k] = median(t[k]) - fixed;
        const double upto = median(t[n + k]);
        insitu_ms[k] = upto - before;
        before = upto;
    }
    const std::vector<double> truth = to_shares(alone_ms), insitu = to_shares(insitu_ms);
    Judged j;
    j.truth_gap_pp = max_error_pp(insitu, truth);
    for (int m = 0; m < 2; m++) {
        for (size_t i = 0; i < profile_shares[m].size(); i++) {
            (m == 0 ? j.exact_pp : j.sampling_pp)
                .push_back(max_error_pp(profile_shares[m][i], truth));
            (m == 0 ? j.exact_insitu_pp : j.sampling_insitu_pp)
                .push_back(max_error_pp(profile_shares[m][i], insitu));
            (m == 0 ? j.exact_overhead : j.sampling_overhead).push_back(overhead[m][i]);
            (m == 0 ? j.exact_run_pp : j.sampling_run_pp)
                .push_back(max_error_pp(profile_shares[m][i], marked_shares[m][i]));
            if (m == 0) {
                j.floor_pp.push_back(max_error_pp(marked_shares[m][i], truth));
            }
        }
    }
    if (std::getenv("TRUTH_BENCH_VERBOSE")) {
        for (size_t k = 0; k < n; k++) {
            std::fprintf(
                stderr,
                "  %-8s truth %6.2f%% (%.3f ms)  in situ %6.2f%% (%.3f ms)  first profile: "
                "exact %6.2f%% (its marked spans %6.2f%%)  sampling %6.2f%% (%6.2f%%)\n",
                p.stages()[k].c_str(), truth[k], alone_ms[k], insitu[k], insitu_ms[k],
                profile_shares[0].empty() ? 0.0 : profile_shares[0][0][k],
                marked_shares[0].empty() ? 0.0 : marked_shares[0][0][k],
                profile_shares[1].empty() ? 0.0 : profile_shares[1][0][k],
                marked_shares[1].empty() ? 0.0 : marked_shares[1][0][k]);
        }
    }
    return j;
}

void BM_Truth(benchmark::State &state) {
    const int which = int(state.range(0)), scenario = int(state.range(1));
    const int threads = int(state.range(2));
    const bool hog = state.range(3) != 0;
    const Scenario &sc = kScenarios[scenario];
    tally_set_num_threads(threads);
    Pipeline &p = pipeline_for(which, scenario, threads);
    for (auto _ : state) {
        std::unique_ptr<CpuHog> hogs;
        if (hog) {
            hogs = std::make_unique<CpuHog>(2);
        }
        Clock::time_point t0 = Clock::now();
        Judged j = judge(p, sc);
        std::vector<double> runs = run_times_ms(p, 7);
        double run_ms = *std::min_element(runs.begin(), runs.end());
        state.SetIterationTime(ms_since(t0) / 1e3);
        state.counters["exact_pp"] = median(j.exact_pp);
        state.counters["sampling_pp"] = median(j.sampling_pp);
        state.counters["exact_insitu_pp"] = median(j.exact_insitu_pp);
        state.counters["sampling_insitu_pp"] = median(j.sampling_insitu_pp);
        state.counters["truth_gap_pp"] = j.truth_gap_pp;
        state.counters["exact_run_pp"] = median(j.exact_run_pp);
        state.counters["sampling_run_pp"] = median(j.sampling_run_pp);
        state.counters["floor_pp"] = median(j.floor_pp);
        state.counters["exact_overhead_pct"] = median(j.exact_overhead);
        state.counters["sampling_overhead_pct"] = median(j.sampling_overhead);
        state.counters["run_ms"] = run_ms;
    }
    tally_set_num_threads(0);
}

void BM_WallRatio(benchmark::State &state) {
    const int which = int(state.range(0));
    tally_set_num_threads(2);
    Pipeline &p = pipeline_for(which, 0, 2);
    const int32_t modes[2] = {TALLY_PROFILER_FLAG_EXACT, TALLY_PROFILER_FLAG_SAMPLING};
    for (auto _ : state) {
        std::vector<double> t[3], cpu[3];
        const Clock::time_point warm_up = Clock::now();
        int rounds = kWallRounds;
        for (int round = -1; round < rounds; round++) {
            if (round == 0) {  // the warm-up round's runs size the rest
                const double round_ms = ms_since(warm_up);
                rounds = std::clamp(int(kWallSeconds * 1e3 / std::max(round_ms, 1e-3)), kWallRounds,
                                    kWallMaxRounds);
            }
            for (int k = 0; k < 3; k++) {
                int v = (std::max(round, 0) + k) % 3;
                if (v > 0) {
                    tally_profiler_set_default_mode(modes[v - 1]);
                }
                double c0 = process_cpu_ms();
                Clock::time_point t0 = Clock::now();
                p.run(v == 0 ? *p.host : *p.profiled);
                if (round >= 0) {
                    t[v].push_back(ms_since(t0));
                    cpu[v].push_back(process_cpu_ms() - c0);
                }
            }
        }
        tally_profiler_reset();
        double host = median(t[0]);
        auto fastest = [](const std::vector<double> &v) {
            return *std::min_element(v.begin(), v.end());
        };
        state.SetIterationTime(host / 1e3);
        state.counters["host_ms"] = host;
        state.counters["exact_ratio"] = median(t[1]) / host;
        std::pair<double, double> ci = bootstrap_interval(t[1], t[0]);
        state.counters["exact_ratio_lo"] = ci.first;
        state.counters["exact_ratio_hi"] = ci.second;
        const PairedQuotient paired = paired_quotient(t[1], t[0]);
        state.counters["exact_paired_ratio"] = paired.median;
        state.counters["exact_paired_ratio_lo"] = paired.lo;
        state.counters["exact_paired_ratio_hi"] = paired.hi;
        state.counters["sampling_ratio"] = median(t[2]) / host;
        state.counters["exact_min_ratio"] = fastest(t[1]) / fastest(t[0]);
        state.counters["sampling_min_ratio"] = fastest(t[2]) / fastest(t[0]);
        state.counters["exact_cpu_ratio"] = median(cpu[1]) / median(cpu[0]);
        state.counters["sampling_cpu_ratio"] = median(cpu[2]) / median(cpu[0]);
        state.counters["rows"] = p.height();
        state.counters["rounds"] = rounds;
    }
    tally_profiler_set_default_mode(0);
    tally_set_num_threads(0);
}

// Parallel-loop tasks for BM_SwitchCost: a bare one, and one making the generated code's calls.
int bare_task(void *, int, uint8_t *) {
    benchmark::ClobberMemory();
    return 0;
}

int pool_task(void *, int, uint8_t *closure) {
    void *c = tally_profiler_thread_begin(closure);
    tally_profiler_set_current(c, 1);
    tally_profiler_thread_end(c);
    return 0;
}

void BM_SwitchCost(benchmark::State &state) {
    const int32_t mode =
        state.range(0) == 0 ? TALLY_PROFILER_FLAG_EXACT : TALLY_PROFILER_FLAG_SAMPLING;
    const char *const names[] = {"overhead", "a", "b"};
    tally_profiler_reset();
    void *inst = tally_profiler_start(nullptr, "switch_cost", "host-profile", 3, names, nullptr,
                                      nullptr, mode);
    constexpr int kSwitches = 1 << 22, kTasks = 1 << 20;
    for (auto _ : state) {
        // Thread CPU time, not wall time: on a shared machine the loop is preempted, and the
        // time other processes hold the CPU is no cost of a switch.
        double t0 = thread_cpu_ns();
        for (int i = 0; i < kSwitches; i += 2) {
            tally_profiler_set_current(inst, 1);
            tally_profiler_set_current(inst, 2);
        }
        double switch_ns = (thread_cpu_ns() - t0) / kSwitches;
#if defined(__x86_64__)
        // The clock read a switch makes, alone: the floor of a switch's cost on this machine.
        uint64_t sink = 0;
        t0 = thread_cpu_ns();
        for (int i = 0; i < kSwitches; i++) {
            sink += __builtin_ia32_rdtsc();
        }
        benchmark::DoNotOptimize(sink);
        state.counters["rdtsc_ns"] = (thread_cpu_ns() - t0) / kSwitches;
#endif
        // Tasks as the generated code makes them: a parallel loop inside `produce a`; each task
        // claims a worker context and sets the loop's slot.
        tally_profiler_set_current(inst, 1);
        t0 = thread_cpu_ns();
        for (int i = 0; i < kTasks; i++) {
            void *c = tally_profiler_thread_begin(inst);
            tally_profiler_set_current(c, 1);
            tally_profiler_thread_end(c);
        }
        double task_ns = (thread_cpu_ns() - t0) / kTasks;
        // The same on two threads at once (a parallel loop's workers): contention on the run's
        // shared state, if any.
        double cpu2[2] = {0, 0};
        std::vector<std::thread> workers;
        for (int w = 0; w < 2; w++) {
            workers.emplace_back([&, w] {
                double c0 = thread_cpu_ns();
                for (int i = 0; i < kTasks / 4; i++) {
                    void *c = tally_profiler_thread_begin(inst);
                    tally_profiler_set_current(c, 1);
                    tally_profiler_thread_end(c);
                }
                cpu2[w] = (thread_cpu_ns() - c0) / (kTasks / 4);
            });
        }
        for (std::thread &w : workers) {
            w.join();
        }
        state.counters["task_2threads_ns"] = 0.5 * (cpu2[0] + cpu2[1]);
        // Tasks run by the thread pool (halide_do_par_for), on 1 and on 2 threads, as the
        // process CPU time of the loop over that of the same loop with bare tasks in a run that
        // opens no contexts for them: what profiling adds per task. As inject-profiling's code runs
        // them (the run started with TALLY_PROFILER_FLAG_POOL_CONTEXTS, the pool opens each task's
        // context; the task itself, switching no slot, makes no call) and, on one thread, as tasks
        // that make the calls themselves (pool_task_calls_ns: a task's context lingers for the
        // thread's next task).
        void *pooled =
            tally_profiler_start(nullptr, "switch_cost_pool", "host-profile", 3, names, nullptr,
                                 nullptr, mode | TALLY_PROFILER_FLAG_POOL_CONTEXTS);
        tally_profiler_set_current(pooled, 1);
        for (int threads : {1, 2}) {
            tally_set_num_threads(threads);
            double bare = 1e300, profiled = 1e300, calls = 1e300;
            for (int rep = 0; rep < 5; rep++) {
                for (int with : {0, 1, 2}) {
                    if (with == 2 && threads == 2) {
                        continue;
                    }
                    // The loop runs in the run whose context is current (set_current makes it
                    // so): the pooled run, else the first (bare tasks: no call at all).
                    tally_profiler_set_current(with == 1 ? pooled : inst, 1);
                    double c0 = process_cpu_ms();
                    halide_do_par_for(nullptr, with == 2 ? pool_task : bare_task, 0, kTasks,
                                      reinterpret_cast<uint8_t *>(inst));
                    double ms = process_cpu_ms() - c0;
                    double &best = with == 0 ? bare : with == 1 ? profiled : calls;
                    best = std::min(best, ms);
                }
            }
            state.counters[threads == 1 ? "pool_task_ns" : "pool_task_2threads_ns"] =
                (profiled - bare) * 1e6 / kTasks;
            if (threads == 1) {
                state.counters["pool_task_calls_ns"] = (calls - bare) * 1e6 / kTasks;
            }
        }
        tally_profiler_set_current(pooled, 1);
        tally_profiler_end(nullptr, pooled);
        tally_set_num_threads(0);
        state.SetIterationTime(switch_ns * 1e-9);
        state.counters["switch_ns"] = switch_ns;
        state.counters["task_ns"] = task_ns;
    }
    tally_profiler_end(nullptr, inst);
    tally_profiler_reset();
}

void truth_args(benchmark::internal::Benchmark *b) {
    for (int scenario = 0; scenario < 4; scenario++) {
        for (int threads : {1, 2}) {
            b->Args({0, scenario, threads, 0});
        }
    }
    for (int scenario = 0; scenario < 4; scenario++) {
        b->Args({0, scenario, 2, 1});
    }
    for (int scenario = 0; scenario < 4; scenario++) {
        b->Args({1, scenario, 2, 0});
    }
    b->ArgNames({"pipeline", "scenario", "threads", "hog"});
}

BENCHMARK(BM_Truth)
    ->Apply(truth_args)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WallRatio)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("pipeline")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SwitchCost)->Arg(0)->Arg(1)->ArgName("mode")->Iterations(1)->UseManualTime();

}  // namespace

// Google Benchmark's main, then an exit that runs no library's destructors: the one of Halide 14's
// -profile_by_timer runtime (libhalide14_corpus_by_timer.so), halide_profiler_shutdown, waits for
// a SIGPROF that only a running pipeline's timer sends, so at exit it never returns.
int main(int argc, char **argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    std::fflush(nullptr);
    _exit(0);
}
