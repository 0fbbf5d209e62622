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
#include <functional>
#include <iterator>
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
#include "truth_work.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string corpus_dir(int version) {
    return version == 14 ? TALLY_HALIDE14_CONFORMANCE_DIR : TALLY_HALIDE21_CONFORMANCE_DIR;
}

/** That version's corpus library, loaded once (nullptr where it is not built); `by_timer`: its
 * sibling holding the -profile_by_timer objects with that profiler's runtime
 * (libhalide<V>_corpus_by_timer.so, tools/corpus/build_library.sh). */
const halide_bench::Library *halide_library(int version, std::string *error,
                                            bool by_timer = false) {
    static std::map<std::pair<int, bool>, std::unique_ptr<halide_bench::Library>> libs;
    auto &lib = libs[{version, by_timer}];
    if (!lib) {
        std::string path =
            version == 14 ? TALLY_HALIDE14_CORPUS_LIBRARY : TALLY_HALIDE21_CORPUS_LIBRARY;
        if (by_timer) {
            path = path.substr(0, path.size() - 3) + "_by_timer.so";
        }
        lib = std::make_unique<halide_bench::Library>(version, path);
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

/** Which of a corpus pipeline's texts and objects a CorpusPipeline runs: the host schedule
 * (Tally: NAME.host.stmt on `host`; Halide: NAME, NAME_profile) or the GPU schedule on Vulkan or
 * OpenCL (Tally: NAME.<api>.conceptual.stmt, offloaded by Tally, on `host-<api>`; Halide:
 * NAME_<api>, NAME_<api>_profile). */
enum class Form { Host, Vulkan, OpenCL };

/** "vulkan", "opencl"; "" for the host. */
const char *form_api(Form form) {
    return form == Form::Vulkan ? "vulkan" : form == Form::OpenCL ? "opencl" : "";
}

/** One corpus pipeline, as Tally compiles the text Halide printed (unprofiled, -profile and, on a
 * GPU, -profile_timestamps) and, where a library is given, as Halide compiled it, with one set of
 * buffers and scalars shared by all: its arguments are the corpus manifest's, the buffers'
 * extents and the scalars' values the benchmark's (set_scalar changes one between runs). A
 * buffer a GPU pipeline copied to the device keeps that runtime's device copy: Tally and Halide
 * never share a CorpusPipeline's buffers on a GPU. */
class CorpusPipeline {
public:
    CorpusPipeline(int version, const std::string &name,
                   const std::map<std::string, std::vector<int>> &extents,
                   const std::map<std::string, int32_t> &scalars, const halide_bench::Library *lib,
                   Form form = Form::Host, const std::string &profiled_suffix = "_profile")
        : name_(name) {
        const std::string dir = corpus_dir(version) + "/" + name;
        std::ifstream mf(dir + "/manifest.json");
        nlohmann::json manifest = nlohmann::json::parse(mf);
        for (const nlohmann::json &f : manifest["funcs"]) {
            stages_.push_back(f.get<std::string>());
        }
        const std::string api = form_api(form);
        const bool gpu = !api.empty();
        tally::Module m = tally::parse_module_file(
            dir + "/" + name + (gpu ? "." + api + ".conceptual.stmt" : ".host.stmt"));
        const std::string target = gpu ? "host-" + api : "host";
        auto compile = [&](const std::string &t) {
            return tally::compile_jit(tally::lower(m, tally::Target::parse(t)));
        };
        host_ = compile(target);
        profiled_ = compile(target + "-profile");
        if (gpu) {
            timestamps_ = compile(target + "-profile_timestamps");
        }
        // Tally's arguments in its function's order: a conceptual statement's function is named
        // after its output and takes its arguments in the order the text uses them.
        std::map<std::string, tally::ArgumentValue> named;
        for (const nlohmann::json &a : manifest["args"]) {
            const std::string arg = a["name"], kind = a["kind"];
            if (kind == "scalar") {
                ints_.push_back(std::make_unique<int32_t>(scalars.at(arg)));
                scalar_[arg] = {ints_.back().get(), 0};
                named.emplace(arg, *ints_.back());
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
                named.emplace(arg, *floats_.back());
                halide_args_.push_back(floats_.back()->raw());
            } else if (type == "int32") {
                int32s_.push_back(std::make_unique<tally::Buffer<int32_t>>(e));
                for (int32_t &x : *int32s_.back()) {
                    x = 1;
                }
                named.emplace(arg, *int32s_.back());
                halide_args_.push_back(int32s_.back()->raw());
            } else {
                throw std::runtime_error(name + ": argument " + arg + " of type " + type);
            }
        }
        function_ = host_->binder().function();
        for (const tally::ArgumentSpec &spec : host_->binder().arguments()) {
            auto it = named.find(spec.arg.name);
            if (it == named.end()) {
                throw std::runtime_error(name + ": Tally's " + function_ + " takes " +
                                         spec.arg.name + ", which the manifest does not list");
            }
            if (scalar_.count(spec.arg.name)) {
                scalar_[spec.arg.name].second = tally_args_.size();
            }
            tally_args_.push_back(it->second);
        }
        if (lib) {
            const std::string fn = gpu ? name + "_" + api : name;
            // A library of -profile_by_timer objects holds no unprofiled one (run_halide(false)
            // then throws).
            halide_ = lib->argv(fn);
            halide_profiled_ = lib->argv(fn + profiled_suffix);
            if ((!halide_ && profiled_suffix == "_profile") || !halide_profiled_) {
                throw std::runtime_error("the Halide " + std::to_string(lib->version()) +
                                         " library has no " + fn + "_argv or " + fn +
                                         profiled_suffix + "_argv (rebuild halide" +
                                         std::to_string(lib->version()) + "_corpus)");
            }
        }
    }

    const std::vector<std::string> &stages() const { return stages_; }
    const std::string &name() const { return name_; }
    /** The pipeline's name in Tally's report: its function's (a conceptual statement's is its
     * output's). */
    const std::string &tally_function() const { return function_; }

    /** Sets a scalar argument for the runs that follow, Tally's and Halide's. */
    void set_scalar(const std::string &arg, int32_t value) {
        const std::pair<int32_t *, size_t> &at = scalar_.at(arg);
        *at.first = value;  // Halide's argv points at it; Tally's argument holds a copy
        tally_args_[at.second] = tally::ArgumentValue(value);
    }

    void run_tally(bool profiled) const {
        check((profiled ? profiled_ : host_)->call(function_, tally_args_), "Tally");
    }
    /** A GPU form's -profile_timestamps build. */
    void run_tally_timestamps() const { check(timestamps_->call(function_, tally_args_), "Tally"); }
    void run_halide(bool profiled) {
        if (!profiled && !halide_) {
            throw std::runtime_error(name_ + ": no unprofiled Halide object in this library");
        }
        check((profiled ? halide_profiled_ : halide_)(halide_args_.data()), "Halide");
    }

private:
    void check(int rc, const char *who) const {
        if (rc != 0) {
            throw std::runtime_error(std::string(who) + "'s " + name_ + " failed with " +
                                     std::to_string(rc));
        }
    }

    std::string name_, function_;  // the pipeline's name; Tally's function
    std::vector<std::string> stages_;
    std::unique_ptr<tally::JITModule> host_, profiled_, timestamps_;
    std::vector<std::unique_ptr<int32_t>> ints_;
    std::map<std::string, std::pair<int32_t *, size_t>> scalar_;  // value, index in tally_args_
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

/** The lost-time figures (truth_work.h) of one copy of tally_truth_work: the benchmark's own,
 * which Tally's JIT calls, or the one linked into a Halide library (-Bsymbolic: its pipelines
 * call their own copy). */
struct LostTime {
    void (*reset)() = tally_truth_reset_lost;
    int64_t (*lost)(int32_t) = tally_truth_lost_ns;
    int64_t (*unkeyed)() = tally_truth_lost_unkeyed_ns;

    static LostTime of(const halide_bench::Library &lib) {
        LostTime t;
        t.reset = reinterpret_cast<void (*)()>(lib.symbol("tally_truth_reset_lost"));
        t.lost = reinterpret_cast<int64_t (*)(int32_t)>(lib.symbol("tally_truth_lost_ns"));
        t.unkeyed = reinterpret_cast<int64_t (*)()>(lib.symbol("tally_truth_lost_unkeyed_ns"));
        if (!t.reset || !t.lost || !t.unkeyed) {
            throw std::runtime_error("the Halide " + std::to_string(lib.version()) +
                                     " library has no tally_truth_lost_ns (rebuild halide" +
                                     std::to_string(lib.version()) + "_corpus)");
        }
        return t;
    }

    /** The time lost since the reset by the calls of each of `keys` (a stage's ns). */
    std::vector<double> of_keys(const std::vector<int32_t> &keys) const {
        if (unkeyed() != 0) {
            throw std::runtime_error("tally_truth_work saw more than TALLY_TRUTH_KEYS ns values");
        }
        std::vector<double> l;
        for (int32_t k : keys) {
            l.push_back(double(lost(k)));
        }
        return l;
    }
};

/** The calling thread's time spent runnable but waiting for a CPU, from the kernel's scheduler
 * statistics (the second field of /proc/thread-self/schedstat), in ns; -1 where unreadable. */
double run_delay_ns() {
    std::ifstream f("/proc/thread-self/schedstat");
    double on_cpu = 0, delay = -1;
    f >> on_cpu >> delay;
    return f ? delay : -1;
}

double sum(const std::vector<double> &v) {
    double s = 0;
    for (double x : v) {
        s += x;
    }
    return s;
}

/** A truth pipeline with each stage's ns per element set (tools/corpus: every stage of both
 * has one call of tally_truth_work per output element, so a stage's time is elements * ns). */
struct Construction {
    const char *pipeline;
    std::vector<std::string> scalars;
    std::vector<int32_t> ns;
    /** A stage's set time per element of the run, in units of its ns: 1 for a serial stage; 0.5
     * for truth_par's parallel stage, whose wall time is its heavy half's. */
    std::vector<double> weight = {1, 1, 1};
    /** The ns of a parallel stage's forked task (truth_par's light half), 0 for none: what its
     * calls lost is the stage's too (truth_work.h: the calling thread took the task itself). */
    std::vector<int32_t> forked_ns = {0, 0, 0};
};

const Construction kConstructions[] = {
    // Three stages in a row at 10 / 30 / 60 %.
    {"truth_chain", {"ns1", "ns2", "ns3"}, {1000, 3000, 6000}},
    // ti inside to's loop (two slot switches per element) at 30 %, to 10 %, tr after them 60 %.
    {"truth_inner", {"ns_inner", "ns_outer", "ns_root"}, {1500, 500, 3000}},
    // A serial stage at 20 %, a parallel one whose two halves take 25 % and 50 % of the run on
    // two threads at once (wall 50 %; its threads' times add to 75 %), a serial one at 30 %.
    {"truth_par", {"ns_pre", "ns_par", "ns_post"}, {1000, 5000, 1500}, {1, 0.5, 1}, {0, 2500, 0}},
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

/** The profilers judged: Tally in both modes, and each Halide whose library is built (Halide 14
 * twice: its -profile, a sampler thread, and its -profile_by_timer, a SIGPROF timer). */
enum Side { TallyExact, TallySampling, Halide21, Halide14, Halide14Timer, kSides };
const char *const kSideNames[kSides] = {"exact", "sampling", "halide21", "halide14",
                                        "halide14_timer"};

int side_version(int side) {
    return side >= Halide14 ? 14 : 21;
}

const char *side_suffix(int side) {
    return side == Halide14Timer ? "_profile_by_timer" : "_profile";
}

void BM_Constructed(benchmark::State &state) {
    const Construction &c = kConstructions[state.range(0)];
    const ConstructedScenario &sc = kConstructedScenarios[state.range(1)];
    const bool hog = state.range(2) != 0;
    // Each stage's set time per element of the run, and the run's (an even number of elements:
    // truth_par's halves are equal).
    std::vector<double> stage_ns;
    double ns_sum = 0;
    for (size_t k = 0; k < c.ns.size(); k++) {
        stage_ns.push_back(c.ns[k] * c.weight[k]);
        ns_sum += stage_ns.back();
    }
    const int elements = 2 * std::max(1, int(std::lround(sc.run_ms * 1e6 / ns_sum / 2)));
    std::map<std::string, int32_t> scalars;
    for (size_t k = 0; k < c.scalars.size(); k++) {
        scalars[c.scalars[k]] = c.ns[k];
    }
    const double set_ms = double(elements) * ns_sum / 1e6;
    // A profile's truth: each stage's set time over its runs plus the time its calls lost (a
    // stage's calls are those with its ns; truth_par's parallel stage is its heavy half's, and
    // its light half's where the calling thread ran that too).
    auto truth_of = [&](const LostTime &lt, int runs, double *lost_ns) {
        std::vector<double> lost = lt.of_keys(c.ns);
        const std::vector<double> forked = lt.of_keys(c.forked_ns);
        std::vector<double> t;
        for (size_t k = 0; k < stage_ns.size(); k++) {
            if (c.forked_ns[k] != 0) {
                lost[k] += forked[k];
            }
            t.push_back(double(elements) * stage_ns[k] * runs + lost[k]);
        }
        if (lost_ns) {
            *lost_ns = sum(lost);
        }
        return shares(t);
    };

    // Tally runs the text Halide 21 printed; each Halide its own objects of the same pipeline.
    std::unique_ptr<CorpusPipeline> pipelines[kSides];
    LostTime lost_time[kSides];  // Tally's sides: the benchmark's own copy
    std::string missing;
    try {
        for (int side = 0; side < kSides; side++) {
            const int version = side_version(side);
            const halide_bench::Library *lib = nullptr;
            if (side >= Halide21) {
                std::string why;
                lib = halide_library(version, &why, side == Halide14Timer);
                if (!lib) {
                    missing += (missing.empty() ? "" : "; ") + why;
                    continue;
                }
                lost_time[side] = LostTime::of(*lib);
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
            pipelines[side] = std::make_unique<CorpusPipeline>(
                version, c.pipeline, extents, scalars, lib, Form::Host, side_suffix(side));
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
        std::vector<double> errors[kSides], unbilled[kSides], primed;
        std::vector<double> tally_run_ms, halide_run_ms, lost_pct, run_delay_pct;
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
                // against the set time and the time its calls lost.
                double lost_ns = 0;
                lost_time[TallyExact].reset();
                Clock::time_point t0 = Clock::now();
                pipelines[TallyExact]->run_tally(false);
                tally_run_ms.push_back(ms_since(t0));
                truth_of(lost_time[TallyExact], 1, &lost_ns);
                tally_run_ms.back() -= lost_ns / 1e6;
                if (pipelines[Halide21]) {
                    lost_time[Halide21].reset();
                    t0 = Clock::now();
                    pipelines[Halide21]->run_halide(false);
                    halide_run_ms.push_back(ms_since(t0));
                    truth_of(lost_time[Halide21], 1, &lost_ns);
                    halide_run_ms.back() -= lost_ns / 1e6;
                }
                // Each side's profile: `runs` consecutive runs, the sides in an order that
                // rotates from profile to profile.
                for (int j = 0; j < kSides; j++) {
                    const int side = (p + j) % kSides;
                    CorpusPipeline *pl = pipelines[side].get();
                    if (!pl) {
                        continue;
                    }
                    std::vector<double> ns, truth;
                    double total = 0;
                    if (side < Halide21) {
                        const int32_t mode = side == TallyExact ? TALLY_PROFILER_FLAG_EXACT
                                                                : TALLY_PROFILER_FLAG_SAMPLING;
                        tally_profiler_reset();
                        tally_profiler_set_default_mode(mode);
                        lost_time[side].reset();
                        const double delay0 = run_delay_ns();
                        for (int r = 0; r < sc.runs; r++) {
                            pl->run_tally(true);
                        }
                        const double delay = run_delay_ns() - delay0;
                        ns = tally_billed(pl->stages(), mode, &total);
                        double lost_ns = 0;
                        truth = truth_of(lost_time[side], sc.runs, &lost_ns);
                        if (side == TallyExact) {
                            lost_pct.push_back(100.0 * lost_ns / (set_ms * 1e6 * sc.runs));
                            run_delay_pct.push_back(100.0 * delay / (set_ms * 1e6 * sc.runs));
                        }
                    } else {
                        std::string why;
                        const halide_bench::Library *lib =
                            halide_library(side_version(side), &why, side == Halide14Timer);
                        // primed: one unjudged profiled run right before the reset, so that
                        // Halide 21's sampler has no gap since its last sample to bill to the
                        // first Func it samples (halide_profiler_sample keeps no time while no
                        // instance runs; Halide 14's does).
                        auto profile = [&](bool primed, std::vector<double> *billed,
                                           std::vector<double> *truth_shares) {
                            if (primed) {
                                pl->run_halide(true);
                            }
                            lib->reset_profiler();
                            lost_time[side].reset();
                            for (int r = 0; r < sc.runs; r++) {
                                pl->run_halide(true);
                            }
                            *truth_shares = truth_of(lost_time[side], sc.runs, nullptr);
                            halide_bench::Profile prof =
                                lib->profile(pl->name() + side_suffix(side));
                            double sum = 0;
                            for (const std::string &s : pl->stages()) {
                                billed->push_back(prof.of(s));
                            }
                            for (double v : prof.ns) {
                                sum += v;
                            }
                            return sum;
                        };
                        total = profile(false, &ns, &truth);
                        if (side == Halide21) {
                            std::vector<double> p_ns, p_truth;
                            profile(true, &p_ns, &p_truth);
                            primed.push_back(max_error_pp(shares(p_ns), p_truth));
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
                        for (size_t k = 0; k < ns.size(); k++) {
                            std::fprintf(stderr, " %7.3f%% (%7.3f%%)", shares(ns)[k], truth[k]);
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
        if (!primed.empty()) {
            state.counters["halide21_primed_pp"] = median(primed);
        }
        state.counters["set_ms"] = set_ms;
        state.counters["lost_pct"] = median(lost_pct);
        if (run_delay_ns() >= 0) {
            state.counters["run_delay_pct"] = median(run_delay_pct);
        }
        state.counters["construction_pct"] = 100.0 * (median(tally_run_ms) - set_ms) / set_ms;
        if (!halide_run_ms.empty()) {
            state.counters["halide_construction_pct"] =
                100.0 * (median(halide_run_ms) - set_ms) / set_ms;
        }
    }
}

// ---- BM_ConstructedGpu/<api>: truth_gpu on Vulkan or OpenCL, Tally's three GPU modes beside
// Halide 21's ----

constexpr int kGpuTruthSize = 128;   // truth_gpu's in and gc: 128 x 128
constexpr int kGpuTruthRounds = 25;  // interleaved rounds of every variant
constexpr int kGpuCalibrationSteps = 256;
const char *const kGpuSteps[3] = {"ka", "kb", "kc"};  // ga's, gb's and gc's step counts
const double kGpuStageMs[3] = {20.0, 40.0, 60.0};     // the stages' times aimed at

enum GpuSide { GpuExact, GpuSampling, GpuTimestamps, GpuHalide21, kGpuSides };
const char *const kGpuSideNames[kGpuSides] = {"exact", "sampling", "timestamps", "halide21"};

/** Per stage, the ns Tally's report (JSON) billed to it in the runs of `pipeline` whose entry
 * `pick` selects: a device stage's kernel time from the device timeline where the entry has one
 * (profile_timestamps), else the stage's slot. */
std::vector<double> tally_report_billed(const nlohmann::json &report, const std::string &pipeline,
                                        const std::vector<std::string> &stages,
                                        const std::function<bool(const nlohmann::json &)> &pick) {
    std::vector<double> ns(stages.size(), 0.0);
    for (const nlohmann::json &p : report["pipelines"]) {
        if (p["name"] != pipeline || !pick(p)) {
            continue;
        }
        for (size_t k = 0; k < stages.size(); k++) {
            double device = -1;
            if (p.contains("device_timeline")) {
                for (const nlohmann::json &f : p["device_timeline"]["funcs"]) {
                    if (f["name"] == stages[k] && f["kernels"].get<uint64_t>() > 0) {
                        device = f["device_ns"].get<double>();
                    }
                }
            }
            for (const nlohmann::json &slot : p["slots"]) {
                if (slot["name"] == stages[k]) {
                    ns[k] += device >= 0 ? device : slot["time_ns"].get<double>();
                }
            }
        }
    }
    return ns;
}

nlohmann::json tally_report() {
    std::vector<char> buf(1 << 22);
    tally_profiler_report_to_buffer(buf.data(), buf.size(), 1);
    return nlohmann::json::parse(buf.data());
}

/** truth_gpu (tools/corpus): ga and gb on the device, gc on the host after them, each stage's
 * work set by its step count. Its truth is measured, not read from a profiler: the time a
 * stage's steps add to a run, the median wall time of the whole pipeline less that of the same
 * with the stage's steps at 0 (its launches, copies and allocation stay), for each side's own
 * code (Tally's kernels and Halide's differ). A run returns once gc is computed on the host
 * from ga and gb copied back, so its wall time holds its device work. Every variant of both
 * sides runs in each round, in an order that rotates: the plain pipeline, the three with one
 * stage emptied, and the profiled builds (Tally's -profile in exact and in sampling mode, its
 * -profile_timestamps, Halide 21's -profile). */
void BM_ConstructedGpu(benchmark::State &state, Form form) {
    // The device's kernels on one thread, as apps_bench runs them: the device is one of the two
    // cores, the host the other (lavapipe's shaders: LP_NUM_THREADS; PoCL's work groups:
    // POCL_MAX_PTHREAD_COUNT; Tally's runtime and Halide's load the same driver). Nothing in
    // truth_bench opens a device before this.
    const bool vulkan = form == Form::Vulkan;
    setenv(vulkan ? "LP_NUM_THREADS" : "POCL_MAX_PTHREAD_COUNT", "1", /*overwrite=*/0);
    if (!(vulkan ? halide_vulkan_device_interface() : halide_opencl_device_interface())) {
        state.SkipWithError(vulkan ? "no Vulkan device (halide_vulkan_device_interface() "
                                     "returned NULL)"
                                   : "no OpenCL device (halide_opencl_device_interface() "
                                     "returned NULL)");
        return;
    }
    std::string why;
    const halide_bench::Library *lib = halide_library(21, &why);
    if (!lib) {
        state.SetLabel("Halide 21 not measured: " + why);
    }
    const std::map<std::string, std::vector<int>> extents = {
        {"in", {kGpuTruthSize, kGpuTruthSize}}, {"gc", {kGpuTruthSize, kGpuTruthSize}}};
    const std::map<std::string, int32_t> zero = {{"ka", 0}, {"kb", 0}, {"kc", 0}};
    std::unique_ptr<CorpusPipeline> tally, halide;
    int32_t tally_steps[3] = {0, 0, 0}, halide_steps[3] = {0, 0, 0};
    try {
        tally = std::make_unique<CorpusPipeline>(21, "truth_gpu", extents, zero, nullptr, form);
        if (lib) {
            halide = std::make_unique<CorpusPipeline>(21, "truth_gpu", extents, zero, lib, form);
        }
        // Steps per stage for the times aimed at, from each side's own code.
        for (CorpusPipeline *p : {tally.get(), halide.get()}) {
            if (!p) {
                continue;
            }
            auto once = [&] { p == tally.get() ? p->run_tally(false) : p->run_halide(false); };
            auto timed = [&] {
                std::vector<double> t;
                for (int i = 0; i < 5; i++) {
                    Clock::time_point t0 = Clock::now();
                    once();
                    t.push_back(ms_since(t0));
                }
                return median(t);
            };
            once();  // the device's set-up and the kernels' builds, not timed
            const double base = timed();
            int32_t *steps = p == tally.get() ? tally_steps : halide_steps;
            for (int k = 0; k < 3; k++) {
                // Twice: from a few steps, then from about the steps aimed at (a step's cost
                // is not constant: Tally's host code does 8 at once).
                int32_t n = kGpuCalibrationSteps;
                for (int pass = 0; pass < 2; pass++) {
                    p->set_scalar(kGpuSteps[k], n);
                    const double per_step = std::max((timed() - base) / n, 1e-6);
                    n = int32_t(std::clamp(std::lround(kGpuStageMs[k] / per_step), 1L, 1L << 24));
                }
                p->set_scalar(kGpuSteps[k], 0);
                steps[k] = n;
            }
            for (int k = 0; k < 3; k++) {
                p->set_scalar(kGpuSteps[k], steps[k]);
            }
        }
    } catch (const std::exception &e) {
        state.SkipWithError(e.what());
        return;
    }
    const std::vector<std::string> &stages = tally->stages();
    if (std::getenv("TRUTH_BENCH_VERBOSE")) {
        std::fprintf(stderr, "  steps: Tally %d %d %d, Halide %d %d %d\n", tally_steps[0],
                     tally_steps[1], tally_steps[2], halide_steps[0], halide_steps[1],
                     halide_steps[2]);
    }

    for (auto _ : state) {
        Clock::time_point start = Clock::now();
        // Variants: 0 plain, 1-3 plain without stage k's steps, 4 exact, 5 sampling,
        // 6 timestamps (Tally); 7 plain, 8-10 without stage k, 11 -profile (Halide).
        const int variants = halide ? 12 : 7;
        std::vector<double> t[12];
        auto run = [&](int v) {
            CorpusPipeline &p = v < 7 ? *tally : *halide;
            const int w = v < 7 ? v : v - 7;
            const int32_t *steps = v < 7 ? tally_steps : halide_steps;
            if (w >= 1 && w <= 3) {
                p.set_scalar(kGpuSteps[w - 1], 0);
            }
            if (v == 4 || v == 5) {
                tally_profiler_set_default_mode(v == 4 ? TALLY_PROFILER_FLAG_EXACT
                                                       : TALLY_PROFILER_FLAG_SAMPLING);
            }
            Clock::time_point t0 = Clock::now();
            if (v == 6) {
                p.run_tally_timestamps();
            } else if (v < 7) {
                p.run_tally(v >= 4);
            } else {
                p.run_halide(v == 11);
            }
            const double ms = ms_since(t0);
            if (w >= 1 && w <= 3) {
                p.set_scalar(kGpuSteps[w - 1], steps[w - 1]);
            }
            return ms;
        };
        try {
            for (int round = -1; round < kGpuTruthRounds; round++) {
                if (round == 0) {
                    // The warm-up round (device set-up, kernel builds) is not judged.
                    tally_profiler_reset();
                    if (lib) {
                        lib->reset_profiler();
                    }
                }
                for (int j = 0; j < variants; j++) {
                    const int v = (std::max(round, 0) + j) % variants;
                    const double ms = run(v);
                    if (round >= 0) {
                        t[v].push_back(ms);
                    }
                }
            }
        } catch (const std::exception &e) {
            tally_profiler_set_default_mode(0);
            state.SkipWithError(e.what());
            return;
        }
        if (std::getenv("TRUTH_BENCH_VERBOSE")) {
            for (int v = 0; v < variants; v++) {
                std::vector<double> sorted = t[v];
                std::sort(sorted.begin(), sorted.end());
                std::fprintf(stderr, "  variant %2d: median %8.3f ms, min %8.3f, max %8.3f\n", v,
                             median(t[v]), sorted.front(), sorted.back());
            }
        }
        // Truth per side: each stage's steps' time, ms per run.
        // The median over the rounds of the round's plain run less its run without the stage's
        // steps (neighbours in one round share the machine's state). *spread gets how far the
        // truth itself is known: the largest half-width over the stages of a 90 % bootstrap
        // interval of the stage's truth share (rounds resampled, 2,000 times), in pp.
        auto truth_of = [&](int plain, double *spread) {
            std::vector<std::vector<double>> d(3);
            for (size_t r = 0; r < t[plain].size(); r++) {
                for (int k = 0; k < 3; k++) {
                    d[k].push_back(t[plain][r] - t[plain + 1 + k][r]);
                }
            }
            auto truth_ms = [](const std::vector<std::vector<double>> &diffs) {
                std::vector<double> ms;
                for (const std::vector<double> &v : diffs) {
                    ms.push_back(std::max(0.0, median(v)));
                }
                return ms;
            };
            std::mt19937 rng(20261206);
            std::uniform_int_distribution<size_t> pick(0, d[0].size() - 1);
            std::vector<std::vector<double>> share_samples(3), resampled(3, d[0]);
            for (int i = 0; i < 2000; i++) {
                for (size_t r = 0; r < d[0].size(); r++) {
                    const size_t j = pick(rng);
                    for (int k = 0; k < 3; k++) {
                        resampled[k][r] = d[k][j];
                    }
                }
                const std::vector<double> sh = shares(truth_ms(resampled));
                for (int k = 0; k < 3; k++) {
                    share_samples[k].push_back(sh[k]);
                }
            }
            *spread = 0;
            for (std::vector<double> &v : share_samples) {
                std::sort(v.begin(), v.end());
                *spread =
                    std::max(*spread, 0.5 * (v[v.size() - 1 - v.size() / 20] - v[v.size() / 20]));
            }
            return truth_ms(d);
        };
        double tally_spread = 0, halide_spread = 0;
        const std::vector<double> tally_truth = truth_of(0, &tally_spread);
        // What one side's profiler billed each stage since its last reset.
        auto billed_by = [&](int side) {
            std::vector<double> ns;
            if (side == GpuHalide21) {
                halide_bench::Profile prof =
                    lib->profile(std::string("truth_gpu_") + form_api(form) + "_profile");
                for (const std::string &st : stages) {
                    ns.push_back(prof.of(st));
                }
                return ns;
            }
            auto target_has = [](const nlohmann::json &p, const char *what) {
                return p["target"].get<std::string>().find(what) != std::string::npos;
            };
            return tally_report_billed(
                tally_report(), tally->tally_function(), stages, [&](const nlohmann::json &p) {
                    return side == GpuTimestamps
                               ? target_has(p, "timestamps")
                               : !target_has(p, "timestamps") &&
                                     p["mode"] == (side == GpuExact ? "exact" : "sampling");
                });
        };
        std::vector<double> billed[kGpuSides], back_to_back[kGpuSides];
        for (int side = 0; side < (halide ? kGpuSides : GpuHalide21); side++) {
            billed[side] = billed_by(side);
        }
        // Back to back: each profiled build alone, kGpuTruthRounds runs in a row, after one
        // unjudged run and a reset. Halide 21's sampler bills the time since its last sample to
        // the Func current at its next one, also across runs (halide_profiler_sample keeps no
        // time while no instance runs): between interleaved runs, that is the other variants'
        // runs. Back to back, each run follows its own kind.
        try {
            for (int side = 0; side < (halide ? kGpuSides : GpuHalide21); side++) {
                const int v = side == GpuHalide21 ? 11 : 4 + side;
                auto reset = [&] {
                    side == GpuHalide21 ? lib->reset_profiler() : tally_profiler_reset();
                };
                reset();
                run(v);
                reset();
                for (int r = 0; r < kGpuTruthRounds; r++) {
                    run(v);
                }
                back_to_back[side] = billed_by(side);
                reset();
            }
        } catch (const std::exception &e) {
            tally_profiler_set_default_mode(0);
            state.SkipWithError(e.what());
            return;
        }
        tally_profiler_set_default_mode(0);
        const std::vector<double> halide_truth =
            halide ? truth_of(7, &halide_spread) : std::vector<double>();
        state.SetIterationTime(ms_since(start) / 1e3);
        for (int side = 0; side < kGpuSides; side++) {
            if (billed[side].empty()) {
                continue;
            }
            const std::vector<double> want =
                shares(side == GpuHalide21 ? halide_truth : tally_truth);
            const std::string key = kGpuSideNames[side];
            state.counters[key + "_pp"] = max_error_pp(shares(billed[side]), want);
            state.counters[key + "_b2b_pp"] = max_error_pp(shares(back_to_back[side]), want);
            if (std::getenv("TRUTH_BENCH_VERBOSE")) {
                for (int b2b = 0; b2b < 2; b2b++) {
                    const std::vector<double> got = shares(b2b ? back_to_back[side] : billed[side]);
                    std::fprintf(stderr, "  truth_gpu %-10s %-12s", kGpuSideNames[side],
                                 b2b ? "back-to-back" : "interleaved");
                    const std::vector<double> &ns = b2b ? back_to_back[side] : billed[side];
                    const std::vector<double> &truth_ms =
                        side == GpuHalide21 ? halide_truth : tally_truth;
                    for (size_t k = 0; k < got.size(); k++) {
                        std::fprintf(stderr,
                                     "  %s %6.2f%% (truth %6.2f%%; %.2f ms/run, truth %.2f)",
                                     stages[k].c_str(), got[k], want[k],
                                     ns[k] / 1e6 / kGpuTruthRounds, truth_ms[k]);
                    }
                    std::fprintf(stderr, "\n");
                }
            }
        }
        // Profiled over plain wall time, with 90 % bootstrap intervals: the ratio of the medians,
        // and the median of the rounds' ratios.
        auto ratio = [&](const std::string &key, int profiled, int plain) {
            state.counters[key + "_ratio"] = median(t[profiled]) / median(t[plain]);
            const std::pair<double, double> ci = bootstrap_interval(t[profiled], t[plain]);
            state.counters[key + "_ratio_lo"] = ci.first;
            state.counters[key + "_ratio_hi"] = ci.second;
            const PairedQuotient paired = paired_quotient(t[profiled], t[plain]);
            state.counters[key + "_paired_ratio"] = paired.median;
            state.counters[key + "_paired_ratio_lo"] = paired.lo;
            state.counters[key + "_paired_ratio_hi"] = paired.hi;
        };
        state.counters["tally_ms"] = median(t[0]);
        state.counters["truth_ci_pp"] = tally_spread;
        ratio("exact", 4, 0);
        ratio("sampling", 5, 0);
        ratio("timestamps", 6, 0);
        for (int k = 0; k < 3; k++) {
            state.counters["truth_" + stages[k] + "_ms"] = tally_truth[k];
            if (halide) {
                state.counters["halide_truth_" + stages[k] + "_ms"] = halide_truth[k];
            }
        }
        if (halide) {
            state.counters["halide_ms"] = median(t[7]);
            state.counters["halide_truth_ci_pp"] = halide_spread;
            ratio("halide21", 11, 7);
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
            const PairedQuotient tally_paired = paired_quotient(t[1], t[0]),
                                 halide_paired = paired_quotient(t[3], t[2]);
            state.counters["tally_paired_ratio"] = tally_paired.median;
            state.counters["tally_paired_ratio_lo"] = tally_paired.lo;
            state.counters["tally_paired_ratio_hi"] = tally_paired.hi;
            state.counters["halide_paired_ratio"] = halide_paired.median;
            state.counters["halide_paired_ratio_lo"] = halide_paired.lo;
            state.counters["halide_paired_ratio_hi"] = halide_paired.hi;
            state.counters["rows"] = h;
        }
    } catch (const std::exception &e) {
        state.SkipWithError(e.what());
    }
    tally_profiler_set_default_mode(0);
    tally_set_num_threads(0);
}

void constructed_args(benchmark::internal::Benchmark *b) {
    for (int pipeline = 0; pipeline < int(std::size(kConstructions)); pipeline++) {
        for (int scenario = 0; scenario < 4; scenario++) {
            b->Args({pipeline, scenario, 0});
        }
    }
    for (int pipeline = 0; pipeline < int(std::size(kConstructions)); pipeline++) {
        for (int scenario = 0; scenario < 4; scenario++) {
            b->Args({pipeline, scenario, 1});
        }
    }
    b->ArgNames({"pipeline", "scenario", "hog"});
}

BENCHMARK(BM_Constructed)
    ->Apply(constructed_args)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ConstructedGpu, vulkan, Form::Vulkan)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ConstructedGpu, opencl, Form::OpenCL)
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
