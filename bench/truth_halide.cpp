// truth_bench's benchmarks against constructed truth and against Halide's own profilers:
// BM_Constructed and BM_HalideCost. Their method is in the header comment of truth_bench.cpp.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "HalideLibrary.h"
#include "Stats.h"
#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string corpus_dir(int version) {
    return version == 14 ? TALLY_HALIDE14_CONFORMANCE_DIR : TALLY_HALIDE21_CONFORMANCE_DIR;
}

/** That version's corpus library, loaded once (nullptr where it is not built). */
const halide_bench::Library *halide_library(int version, std::string *error) {
    static std::map<int, std::unique_ptr<halide_bench::Library>> libs;
    auto &lib = libs[version];
    if (!lib) {
        lib = std::make_unique<halide_bench::Library>(
            version, version == 14 ? TALLY_HALIDE14_CORPUS_LIBRARY : TALLY_HALIDE21_CORPUS_LIBRARY);
    }
    if (!lib->error().empty()) {
        *error = lib->error();
        return nullptr;
    }
    return lib.get();
}

/** Two processes spinning on the CPUs while alive (as truth_bench.cpp's CpuHog). */
class Hog {
public:
    explicit Hog(int n) {
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
    ~Hog() {
        for (pid_t pid : pids_) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }

private:
    std::vector<pid_t> pids_;
};

/** One corpus pipeline, as Tally compiles the text Halide printed (unprofiled and -profile)
 * and, where a library is given, as Halide compiled it (NAME and NAME_profile), with one set of
 * buffers and scalars shared by all: its arguments are the corpus manifest's, the buffers'
 * extents and the scalars' values the benchmark's. */
class CorpusPipeline {
public:
    CorpusPipeline(int version, const std::string &name,
                   const std::map<std::string, std::vector<int>> &extents,
                   const std::map<std::string, int32_t> &scalars, const halide_bench::Library *lib)
        : name_(name) {
        const std::string dir = corpus_dir(version) + "/" + name;
        std::ifstream mf(dir + "/manifest.json");
        nlohmann::json manifest = nlohmann::json::parse(mf);
        for (const nlohmann::json &f : manifest["funcs"]) {
            stages_.push_back(f.get<std::string>());
        }
        tally::Module m = tally::parse_module_file(dir + "/" + name + ".host.stmt");
        host_ = tally::compile_jit(tally::lower(m, tally::Target::parse("host")));
        profiled_ = tally::compile_jit(tally::lower(m, tally::Target::parse("host-profile")));
        for (const nlohmann::json &a : manifest["args"]) {
            const std::string arg = a["name"], kind = a["kind"];
            if (kind == "scalar") {
                ints_.push_back(std::make_unique<int32_t>(scalars.at(arg)));
                tally_args_.emplace_back(*ints_.back());
                halide_args_.push_back(ints_.back().get());
                continue;
            }
            const std::string type = a["type"];
            std::vector<int> e = extents.at(arg);
            if (type == "float32") {
                floats_.push_back(std::make_unique<tally::Buffer<float>>(e));
                float v = 0.25f;
                for (float &x : *floats_.back()) {
                    x = v;
                    v = v > 1.5f ? -1.5f : v + 0.125f;
                }
                tally_args_.emplace_back(*floats_.back());
                halide_args_.push_back(floats_.back()->raw());
            } else if (type == "int32") {
                int32s_.push_back(std::make_unique<tally::Buffer<int32_t>>(e));
                for (int32_t &x : *int32s_.back()) {
                    x = 1;
                }
                tally_args_.emplace_back(*int32s_.back());
                halide_args_.push_back(int32s_.back()->raw());
            } else {
                throw std::runtime_error(name + ": argument " + arg + " of type " + type);
            }
        }
        if (lib) {
            halide_ = lib->argv(name);
            halide_profiled_ = lib->argv(name + "_profile");
            if (!halide_ || !halide_profiled_) {
                throw std::runtime_error("the Halide " + std::to_string(lib->version()) +
                                         " library has no " + name + "_argv or " + name +
                                         "_profile_argv (rebuild halide" +
                                         std::to_string(lib->version()) + "_corpus)");
            }
        }
    }

    const std::vector<std::string> &stages() const { return stages_; }
    const std::string &name() const { return name_; }

    void run_tally(bool profiled) const {
        check((profiled ? profiled_ : host_)->call(name_, tally_args_), "Tally");
    }
    void run_halide(bool profiled) {
        check((profiled ? halide_profiled_ : halide_)(halide_args_.data()), "Halide");
    }

private:
    void check(int rc, const char *who) const {
        if (rc != 0) {
            throw std::runtime_error(std::string(who) + "'s " + name_ + " failed with " +
                                     std::to_string(rc));
        }
    }

    std::string name_;
    std::vector<std::string> stages_;
    std::unique_ptr<tally::JITModule> host_, profiled_;
    std::vector<std::unique_ptr<int32_t>> ints_;
    std::vector<std::unique_ptr<tally::Buffer<float>>> floats_;
    std::vector<std::unique_ptr<tally::Buffer<int32_t>>> int32s_;
    std::vector<tally::ArgumentValue> tally_args_;
    std::vector<void *> halide_args_;
    halide_bench::Library::Argv halide_ = nullptr, halide_profiled_ = nullptr;
};

/** The ns Tally's registry billed to each of `stages` (and to all slots) in runs of `mode`. */
std::vector<double> tally_billed(const std::vector<std::string> &stages, int32_t mode,
                                 double *total) {
    std::vector<double> ns(stages.size(), 0.0);
    *total = 0;
    for (int32_t i = 0; i < tally_profiler_num_pipelines(); i++) {
        tally_pipeline_stats ps{};
        if (tally_profiler_get_pipeline_stats_by_index(i, &ps) != 0 || ps.flags != mode) {
            continue;
        }
        for (int32_t s = 0; s < ps.num_slots; s++) {
            tally_slot_stats ss{};
            tally_profiler_get_slot_stats_by_index(i, s, &ss);
            *total += double(ss.time_ns);
            for (size_t k = 0; k < stages.size(); k++) {
                ns[k] += stages[k] == ss.name ? double(ss.time_ns) : 0.0;
            }
        }
    }
    return ns;
}

/** Each of `ns` as a percentage of their sum. */
std::vector<double> shares(const std::vector<double> &ns) {
    double sum = 0;
    for (double v : ns) {
        sum += v;
    }
    std::vector<double> s;
    for (double v : ns) {
        s.push_back(sum > 0 ? 100.0 * v / sum : 0.0);
    }
    return s;
}

double max_error_pp(const std::vector<double> &got, const std::vector<double> &truth) {
    double e = 0;
    for (size_t k = 0; k < truth.size(); k++) {
        e = std::max(e, std::fabs(got[k] - truth[k]));
    }
    return e;
}

/** A truth pipeline with each stage's ns per element set (tools/corpus: every stage of both
 * has one call of tally_truth_work per output element, so a stage's time is elements * ns). */
struct Construction {
    const char *pipeline;
    std::vector<std::string> scalars;
    std::vector<int32_t> ns;
};

const Construction kConstructions[] = {
    // Three stages in a row at 10 / 30 / 60 %.
    {"truth_chain", {"ns1", "ns2", "ns3"}, {1000, 3000, 6000}},
    // ti inside to's loop (two slot switches per element) at 30 %, to 10 %, tr after them 60 %.
    {"truth_inner", {"ns_inner", "ns_outer", "ns_root"}, {1500, 500, 3000}},
};

struct ConstructedScenario {
    double run_ms;  // the set time of one run
    int runs;       // consecutive runs per profile
    int profiles;   // profiles per repetition (the median error is reported)
};

const ConstructedScenario kConstructedScenarios[] = {
    {60.0, 21, 1},  // long runs, accumulated
    {60.0, 1, 7},   // one long run
    {2.0, 10, 7},   // ~2 ms runs in blocks of 10
    {0.5, 1, 21},   // a single ~0.5 ms run
};

/** The profilers judged: Tally in both modes, and each Halide whose library is built. */
enum Side { TallyExact, TallySampling, Halide21, Halide14, kSides };
const char *const kSideNames[kSides] = {"exact", "sampling", "halide21", "halide14"};

void BM_Constructed(benchmark::State &state) {
    const Construction &c = kConstructions[state.range(0)];
    const ConstructedScenario &sc = kConstructedScenarios[state.range(1)];
    const bool hog = state.range(2) != 0;
    int32_t ns_sum = 0;
    for (int32_t v : c.ns) {
        ns_sum += v;
    }
    const int elements = std::max(1, int(std::lround(sc.run_ms * 1e6 / ns_sum)));
    std::map<std::string, int32_t> scalars;
    for (size_t k = 0; k < c.scalars.size(); k++) {
        scalars[c.scalars[k]] = c.ns[k];
    }
    const std::vector<double> truth = shares(std::vector<double>(c.ns.begin(), c.ns.end()));
    const double set_ms = double(elements) * ns_sum / 1e6;

    // Tally runs the text Halide 21 printed; each Halide its own objects of the same pipeline.
    std::unique_ptr<CorpusPipeline> pipelines[kSides];
    std::string missing;
    try {
        for (int side = 0; side < kSides; side++) {
            const int version = side == Halide14 ? 14 : 21;
            const halide_bench::Library *lib = nullptr;
            if (side >= Halide21) {
                std::string why;
                lib = halide_library(version, &why);
                if (!lib) {
                    missing += (missing.empty() ? "" : "; ") + why;
                    continue;
                }
            }
            std::map<std::string, std::vector<int>> extents;
            const std::string dir = corpus_dir(version) + "/" + c.pipeline;
            std::ifstream mf(dir + "/manifest.json");
            const nlohmann::json manifest = nlohmann::json::parse(mf);
            for (const nlohmann::json &a : manifest["args"]) {
                if (a["kind"] != "scalar") {
                    extents[a["name"]] = {elements};
                }
            }
            pipelines[side] =
                std::make_unique<CorpusPipeline>(version, c.pipeline, extents, scalars, lib);
        }
    } catch (const std::exception &e) {
        state.SkipWithError(e.what());
        return;
    }
    if (!missing.empty()) {
        state.SetLabel("not measured: " + missing);
    }

    for (auto _ : state) {
        std::unique_ptr<Hog> hogs;
        if (hog) {
            hogs = std::make_unique<Hog>(2);
        }
        std::vector<double> errors[kSides], unbilled[kSides];
        std::vector<double> tally_run_ms, halide_run_ms;
        Clock::time_point start = Clock::now();
        try {
            // Warm-up: every side's code and buffers once, unjudged.
            for (int side = 0; side < kSides; side++) {
                if (pipelines[side]) {
                    side < Halide21 ? pipelines[side]->run_tally(true)
                                    : pipelines[side]->run_halide(true);
                }
            }
            for (int p = 0; p < sc.profiles; p++) {
                // The construction check: an unprofiled run of Tally's and of Halide 21's code
                // against the set time.
                Clock::time_point t0 = Clock::now();
                pipelines[TallyExact]->run_tally(false);
                tally_run_ms.push_back(ms_since(t0));
                if (pipelines[Halide21]) {
                    t0 = Clock::now();
                    pipelines[Halide21]->run_halide(false);
                    halide_run_ms.push_back(ms_since(t0));
                }
                // Each side's profile: `runs` consecutive runs, the sides in an order that
                // rotates from profile to profile.
                for (int j = 0; j < kSides; j++) {
                    const int side = (p + j) % kSides;
                    CorpusPipeline *pl = pipelines[side].get();
                    if (!pl) {
                        continue;
                    }
                    std::vector<double> ns;
                    double total = 0;
                    if (side < Halide21) {
                        const int32_t mode = side == TallyExact ? TALLY_PROFILER_FLAG_EXACT
                                                                : TALLY_PROFILER_FLAG_SAMPLING;
                        tally_profiler_reset();
                        tally_profiler_set_default_mode(mode);
                        for (int r = 0; r < sc.runs; r++) {
                            pl->run_tally(true);
                        }
                        ns = tally_billed(pl->stages(), mode, &total);
                    } else {
                        std::string why;
                        const halide_bench::Library *lib =
                            halide_library(side == Halide14 ? 14 : 21, &why);
                        lib->reset_profiler();
                        for (int r = 0; r < sc.runs; r++) {
                            pl->run_halide(true);
                        }
                        halide_bench::Profile prof = lib->profile(pl->name() + "_profile");
                        for (const std::string &s : pl->stages()) {
                            ns.push_back(prof.of(s));
                        }
                        for (double v : prof.ns) {
                            total += v;
                        }
                    }
                    double stages_ns = 0;
                    for (double v : ns) {
                        stages_ns += v;
                    }
                    errors[side].push_back(max_error_pp(shares(ns), truth));
                    if (std::getenv("TRUTH_BENCH_VERBOSE")) {
                        std::fprintf(stderr, "  %s profile %d %-9s", c.pipeline, p,
                                     kSideNames[side]);
                        for (double v : shares(ns)) {
                            std::fprintf(stderr, " %7.3f%%", v);
                        }
                        std::fprintf(stderr, "  (stages %.3f ms of %.3f ms billed)\n",
                                     stages_ns / 1e6 / sc.runs, total / 1e6 / sc.runs);
                    }
                    unbilled[side].push_back(total > 0 ? 100.0 * (total - stages_ns) / total
                                                       : 100.0);
                }
            }
        } catch (const std::exception &e) {
            tally_profiler_set_default_mode(0);
            state.SkipWithError(e.what());
            return;
        }
        tally_profiler_set_default_mode(0);
        tally_profiler_reset();
        state.SetIterationTime(ms_since(start) / 1e3);
        for (int side = 0; side < kSides; side++) {
            if (!errors[side].empty()) {
                state.counters[std::string(kSideNames[side]) + "_pp"] = median(errors[side]);
                state.counters[std::string(kSideNames[side]) + "_other_pct"] =
                    median(unbilled[side]);
            }
        }
        state.counters["set_ms"] = set_ms;
        state.counters["construction_pct"] = 100.0 * (median(tally_run_ms) - set_ms) / set_ms;
        if (!halide_run_ms.empty()) {
            state.counters["halide_construction_pct"] =
                100.0 * (median(halide_run_ms) - set_ms) / set_ms;
        }
    }
}

constexpr int kCostWidth = 2048;
constexpr int kCostRounds = 101;

/** float_chain as Halide `version` lowered it: Tally's unprofiled and exact-mode runs of that
 * text against Halide's float_chain and float_chain_profile objects, 2 threads each, all four
 * interleaved in one process. */
void BM_HalideCost(benchmark::State &state) {
    const int version = int(state.range(0));
    std::string why;
    const halide_bench::Library *lib = halide_library(version, &why);
    if (!lib) {
        state.SkipWithError(why.c_str());
        return;
    }
    tally_set_num_threads(2);
    lib->set_num_threads(2);
    std::unique_ptr<CorpusPipeline> p;
    const std::map<std::string, int32_t> no_scalars;
    try {
        // The height whose unprofiled Tally run takes ~40 ms.
        int h = 256;
        for (int step = 0; step < 4; step++) {
            p = std::make_unique<CorpusPipeline>(
                version, "float_chain",
                std::map<std::string, std::vector<int>>{{"in", {kCostWidth, h}},
                                                        {"s3$0", {kCostWidth, h}}},
                no_scalars, lib);
            std::vector<double> t;
            for (int i = 0; i < 5; i++) {
                Clock::time_point t0 = Clock::now();
                p->run_tally(false);
                t.push_back(ms_since(t0));
            }
            const double ms = *std::min_element(t.begin(), t.end());
            h = std::clamp(int(std::lround(h * 40.0 / std::max(ms, 1e-3))), 8, 16384);
        }
        p = std::make_unique<CorpusPipeline>(
            version, "float_chain",
            std::map<std::string, std::vector<int>>{{"in", {kCostWidth, h}},
                                                    {"s3$0", {kCostWidth, h}}},
            no_scalars, lib);
        tally_profiler_set_default_mode(TALLY_PROFILER_FLAG_EXACT);
        for (auto _ : state) {
            std::vector<double> t[4];
            for (int round = -1; round < kCostRounds; round++) {
                for (int k = 0; k < 4; k++) {
                    const int v = (std::max(round, 0) + k) % 4;
                    Clock::time_point t0 = Clock::now();
                    if (v < 2) {
                        p->run_tally(v == 1);
                    } else {
                        p->run_halide(v == 3);
                    }
                    if (round >= 0) {
                        t[v].push_back(ms_since(t0));
                    }
                }
            }
            tally_profiler_reset();
            lib->reset_profiler();
            state.SetIterationTime(median(t[0]) / 1e3);
            state.counters["tally_ms"] = median(t[0]);
            state.counters["halide_ms"] = median(t[2]);
            state.counters["tally_ratio"] = median(t[1]) / median(t[0]);
            state.counters["halide_ratio"] = median(t[3]) / median(t[2]);
            std::pair<double, double> ci = bootstrap_interval(t[1], t[0]);
            state.counters["tally_ratio_lo"] = ci.first;
            state.counters["tally_ratio_hi"] = ci.second;
            ci = bootstrap_interval(t[3], t[2]);
            state.counters["halide_ratio_lo"] = ci.first;
            state.counters["halide_ratio_hi"] = ci.second;
            state.counters["rows"] = h;
        }
    } catch (const std::exception &e) {
        state.SkipWithError(e.what());
    }
    tally_profiler_set_default_mode(0);
    tally_set_num_threads(0);
}

void constructed_args(benchmark::internal::Benchmark *b) {
    for (int pipeline = 0; pipeline < 2; pipeline++) {
        for (int scenario = 0; scenario < 4; scenario++) {
            b->Args({pipeline, scenario, 0});
        }
    }
    for (int scenario = 0; scenario < 4; scenario++) {
        b->Args({0, scenario, 1});
    }
    b->ArgNames({"pipeline", "scenario", "hog"});
}

BENCHMARK(BM_Constructed)
    ->Apply(constructed_args)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HalideCost)
    ->Arg(21)
    ->Arg(14)
    ->ArgName("halide")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
