// Tally's code against Halide's own, for the same lowered IR, built once per Halide version V (14
// and 21: halide14_bench, halide21_bench): every pipeline of that version's conformance corpus
// (test/conformance/halideV/<name>/, made by tools/halideV/), Halide's AOT objects from
// libhalideV_corpus.so (built by tools/halideV where that Halide is installed) and Tally's JIT of
// the `<name>.host.stmt` Halide printed in the same compilation, in one process. A pipeline whose
// `host` conformance check is listed in the corpus's xfail.txt is skipped, with the listed reason:
// its outputs differ from Halide's, so no figure is reported for it. The truth pipelines
// (truth_*, whose stages spin for times set in advance: truth_bench) are left out.
//
// Halide's library is loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) and linked -Bsymbolic, so
// its calls into its own runtime (thread pool, halide_malloc, ...) stay inside it and the two
// runtimes never mix. Both run on the committed inputs; each pipeline's outputs are compared
// between the two after every repetition (integers exactly, floats within the manifest's
// tolerance), so a figure for code that computes something else is never reported.
//
// Per pipeline and scale, BM_VsHalideV/<name>/<scale> measures in `fresh_processes` fresh
// processes (up to `max_fresh_processes` where the first or second run's verdict is undecided): the
// benchmark runs itself (`--fresh DIR SCALE ORDER`), each child loading only that pipeline (Tally:
// a fresh compile_jit; Halide: its library just opened, its code never run), growing the shared
// heap so that neither side page-faults memory the other then reuses, timing each side's first and
// second run (the two sides' order alternating between children, each run after 2 ms of sleep so
// that the other side's pool has stopped spinning), then the steady state: the two alternately (T
// H, H T, ...) for `rounds` rounds, each side's timed run following 200 us of sleep (the other
// runtime's pool stops spinning) and one untimed run of its own (its pool is awake). Figures are
// over the children (fresh_runs says how), with the extremes: a first run of a few microseconds is
// one sample per process, which a page fault or a preemption swings, and a process that has run
// other pipelines first is in a state of its own (Halide's pool grows threads for async tasks and
// keeps them; with them its later parallel loops ran 1.5x faster or slower from one process to the
// next), so one long-lived process measured its history as much as the code. Scale 1 runs the
// committed inputs (tiny: per-call costs dominate); scale 8 multiplies every extent of 16 or more
// by 8 (the inputs tiled from the committed ones), which is where the generated code's speed shows.
// Buffers are 128-byte aligned on both sides. Before a pipeline is timed at a scale, a child runs
// Tally's code alone once there (`--probe DIR SCALE`): a pipeline that fails at that scale
// (hoist_ring, whose bound_storage(x, 64) does not hold at 8x) is reported with Tally's error and
// not run on Halide, whose Halide 21 pool never returns from an async pipeline one of whose tasks
// failed. Every child is killed after `child_timeout_s`, so a hang is an error, not a stall.
//
// Counters: ratio = the median over the processes of their median-run quotients Tally / Halide
// (below 1: Tally is faster), ratio_min and ratio_max their extremes, tally_ms and halide_ms the
// medians of the processes' median runs, pair_ratio the median of the processes' median
// per-round quotients, rounds their total; first_ratio and second_ratio = Tally's median first
// (second) run over Halide's, *_ratio_max the worst single process's quotient, *_ratio_lo and
// *_ratio_hi a 90 % bootstrap interval of the quotient (2,000 resamples of the processes; a first
// or second run above 1.10x is a miss when its whole interval is). processes = 15, or up to 60,
// 15 at a time, for a pipeline and scale whose first or second run is above 1.10x with an
// interval reaching below it (more samples only where the verdict needs them). tally_added_mib,
// halide_added_mib = what 5 runs of one side add to the peak resident set of a process of its
// own (`--memory DIR SCALE tally|halide`: the pipeline loaded, the peak reset, glibc's allocator
// as configured by default); memory_ratio = Tally's over Halide's with 1 MiB added to both.
// `--spin DIR SCALE tally|halide SECONDS` runs one side of one pipeline in a loop, for `perf
// record` (spin_child). Built only on request: `cmake --build build --target halideV_bench`.

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "SharedHeap.h"
#include "Stats.h"
#include "driver/NpyFile.h"
#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"

using namespace tally;
namespace fs = std::filesystem;

namespace {

const char *const conformance_dir = TALLY_CONFORMANCE_DIR;
const char *const halide_library = TALLY_HALIDE_CORPUS_LIBRARY;

#define TALLY_STRINGIZE2(x) #x
#define TALLY_STRINGIZE(x) TALLY_STRINGIZE2(x)
/** "14" or "21": which Halide's corpus and objects this build compares with. */
const char *const halide_version = TALLY_STRINGIZE(TALLY_HALIDE_VERSION);
const std::string program = std::string("halide") + halide_version + "_bench";

/** Scaled runs multiply every buffer extent of at least this by the scale (images, tables,
 * histograms), and leave smaller ones (filter taps, channels, tiny LUTs) as they are. */
constexpr int min_scaled_extent = 16;

using HalideArgv = int (*)(void **);
// Halide's `<name>_metadata()`: the layout is Halide 14's (tally_runtime.h), which Halide 21
// keeps for the fields read here (the version, the arguments and their names).
using HalideMetadata = const halide_filter_metadata_t *(*)();

/** What Halide's code reported last: its default error handler aborts the process, this one
 * keeps the message for the child's `error` line. */
std::string halide_error_text;
void keep_halide_error(void *, const char *msg) {
    halide_error_text = msg;
}
/** The same for Tally's runtime. */
std::string tally_error_text;
void keep_tally_error(void *, const char *msg) {
    tally_error_text = msg;
}

double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

/** Allocates 128-byte aligned storage (Halide::Runtime::Buffer's alignment, and
 * TALLY_MALLOC_ALIGNMENT): where a buffer's data starts relative to a cache line decides how many
 * vector loads and stores split lines, so both sides get their buffers equally aligned and a
 * ratio measures their code, not where malloc happened to put each side's data. */
template <typename T>
struct AlignedAllocator {
    using value_type = T;
    static constexpr std::align_val_t alignment{128};
    AlignedAllocator() = default;
    template <typename U>
    AlignedAllocator(const AlignedAllocator<U> &) {}
    T *allocate(size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), alignment)); }
    void deallocate(T *p, size_t) { ::operator delete(p, alignment); }
    bool operator==(const AlignedAllocator &) const { return true; }
    bool operator!=(const AlignedAllocator &) const { return false; }
};
using Bytes = std::vector<uint8_t, AlignedAllocator<uint8_t>>;

/** A dense buffer of the manifest's shape, Halide order (dimension 0 innermost). */
struct Buffer {
    Bytes data;
    std::vector<halide_dimension_t> dims;
    halide_buffer_t buf{};

    Buffer(const Type &t, const std::vector<int> &extents, const std::vector<int> &mins) {
        int64_t stride = 1;
        for (size_t d = 0; d < extents.size(); d++) {
            dims.push_back({mins[d], extents[d], int32_t(stride), 0});
            stride *= extents[d];
        }
        data.assign(size_t(stride) * t.bytes(), 0);
        buf.host = data.data();
        buf.type = {uint8_t(t.is_float()  ? halide_type_float
                            : t.is_uint() ? halide_type_uint
                                          : halide_type_int),
                    uint8_t(t.bits()), 1};
        buf.dimensions = int32_t(dims.size());
        buf.dim = dims.data();
    }
};

/** A scalar argument's bytes, from the manifest's text. */
std::vector<uint8_t> scalar_bytes(const Type &t, const std::string &text) {
    std::vector<uint8_t> b(8, 0);
    if (t.is_bool()) {
        b[0] = text == "true" || text == "1";
    } else if (t.is_float() && t.bits() == 16) {
        _Float16 h = _Float16(std::stof(text));
        std::memcpy(b.data(), &h, 2);
    } else if (t.is_float() && t.bits() == 32) {
        float f = std::stof(text);
        std::memcpy(b.data(), &f, 4);
    } else if (t.is_float()) {
        double d = std::stod(text);
        std::memcpy(b.data(), &d, 8);
    } else if (t.is_uint()) {
        uint64_t u = std::stoull(text);
        std::memcpy(b.data(), &u, 8);  // little-endian: the low bytes are the narrow value
    } else {
        int64_t i = std::stoll(text);
        std::memcpy(b.data(), &i, 8);
    }
    return b;
}

/** One pipeline of the corpus, loaded on both sides, with its inputs and two sets of
 * outputs (one per side). */
class Pipeline {
public:
    std::string name;
    std::string error;  // non-empty when the pipeline cannot be benchmarked
    double rtol = 0, atol = 0;
    double tally_first_ms = 0, tally_second_ms = 0, halide_first_ms = 0, halide_second_ms = 0;
    double jit_ms = 0;

    /** Loads the pipeline on both sides; `time_first_runs` then times each side's first two
     * runs (false: no side has run when it returns). */
    Pipeline(const fs::path &dir, void *lib, int scale, bool tally_first,
             bool time_first_runs = true)
        : name(dir.filename().string()) {
        try {
            load(dir, lib, scale);
        } catch (const CompileError &e) {
            error = std::string("Tally: ") + e.what();
            return;
        } catch (const std::exception &e) {
            error = e.what();
            return;
        }
        if (!time_first_runs) {
            return;
        }
        // The first and second runs after loading, in alternating order across pipelines. The
        // two sides share one heap, so whichever ran first at a new size would page-fault the
        // fresh memory its intermediates take and leave it, warm, to the other: the heap is
        // grown (and its pages touched) first, so that neither side's first run pays for the
        // other's.
        // Each side's run starts after the other's pool has gone to sleep (see BM_VsHalide's
        // turns): a pool still spinning after its run takes a core from the other side's first
        // run, and a pipeline that hands work between threads (async_store) then waits for
        // preempted threads.
        grow_heap();
        auto quiet = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
        for (int run = 0; run < 2 && error.empty(); run++) {
            double t = 0, h = 0;
            if (tally_first) {
                quiet();
                t = run_tally();
                quiet();
                h = run_halide();
            } else {
                quiet();
                h = run_halide();
                quiet();
                t = run_tally();
            }
            (run == 0 ? tally_first_ms : tally_second_ms) = t;
            (run == 0 ? halide_first_ms : halide_second_ms) = h;
        }
        check_outputs();
    }

    /** One run of Tally's code; ms, or -1 (and `error`) when it fails. */
    double run_tally() {
        double t0 = now_ms();
        int rc = tally_argv(tally_args.data());
        double t = now_ms() - t0;
        if (rc != 0 && error.empty()) {
            error = "Tally's run failed with " + std::to_string(rc) + ": " + tally_error_text;
        }
        return t;
    }
    double run_halide() {
        double t0 = now_ms();
        int rc = halide_argv(halide_args.data());
        double t = now_ms() - t0;
        if (rc != 0 && error.empty()) {
            error = "Halide's run failed with " + std::to_string(rc) + ": " + halide_error_text;
        }
        return t;
    }

    /** Compares the two sides' outputs; sets `error` on the first difference. */
    void check_outputs() {
        for (const auto &[arg, pair] : outputs) {
            const Type &t = pair.type;
            const Bytes &a = pair.tally->data, &b = pair.halide->data;
            if (!t.is_float()) {
                if (a != b) {
                    error = "output " + arg + " differs between Tally and Halide";
                }
                continue;
            }
            size_t n = a.size() / t.bytes();
            for (size_t i = 0; i < n && error.empty(); i++) {
                double x = element(t, a.data(), i), y = element(t, b.data(), i);
                bool same = (std::isnan(x) && std::isnan(y)) || x == y ||
                            std::fabs(x - y) <= atol + rtol * std::fabs(y);
                if (!same) {
                    error = "output " + arg + " differs between Tally and Halide at element " +
                            std::to_string(i) + ": " + std::to_string(x) + " vs " +
                            std::to_string(y);
                }
            }
        }
    }

private:
    struct OutputPair {
        Type type;
        Buffer *tally, *halide;
    };

    std::unique_ptr<JITModule> jit;
    // Both sides are called the same way: through their `_argv` function's address (Tally's
    // looked up once in the JIT, Halide's with dlsym).
    HalideArgv tally_argv = nullptr, halide_argv = nullptr;
    std::vector<std::unique_ptr<Buffer>> buffers;
    std::vector<std::vector<uint8_t>> scalars;
    std::vector<void *> tally_args, halide_args;
    std::map<std::string, OutputPair> outputs;

    /** Fills `out` (of extents `to`) with copies of `in` (of extents `from`), repeated along
     * every dimension, so a scaled input holds only values the committed one holds. */
    static void tile(const std::vector<uint8_t> &in, const std::vector<int> &from, int bytes,
                     Bytes *out, const std::vector<int> &to) {
        size_t n = out->size() / bytes;
        std::vector<int> at(to.size(), 0);
        for (size_t i = 0; i < n; i++) {
            size_t src = 0, stride = 1;
            for (size_t d = 0; d < to.size(); d++) {
                src += size_t(at[d] % from[d]) * stride;
                stride *= from[d];
            }
            std::memcpy(out->data() + i * bytes, in.data() + src * bytes, bytes);
            for (size_t d = 0; d < to.size() && ++at[d] == to[d]; d++) {
                at[d] = 0;
            }
        }
    }

    /** Grows the shared heap by 16 times the bytes of the pipeline's arguments (at most 256
     * MiB), in 1 MiB blocks below glibc's mmap threshold (SharedHeap.h), touched and freed (the
     * trim threshold keeps them): later allocations of either side up to that much reuse pages
     * already faulted in. */
    void grow_heap() const {
        size_t bytes = 0;
        for (const auto &b : buffers) {
            bytes += b->data.size();
        }
        constexpr size_t block = size_t(1) << 20;
        size_t n = std::min<size_t>(256, (16 * bytes + block - 1) / block);
        std::vector<void *> blocks;
        for (size_t i = 0; i < n; i++) {
            void *p = std::malloc(block);
            if (!p) {
                break;
            }
            // Not 0: malloc and a memset to 0 may become calloc, which skips fresh pages.
            std::memset(p, 1, block);
            benchmark::DoNotOptimize(p);  // the stores and the block must stay
            blocks.push_back(p);
        }
        benchmark::ClobberMemory();
        for (void *p : blocks) {
            std::free(p);
        }
    }

    static double element(const Type &t, const uint8_t *p, size_t i) {
        if (t.bits() == 16) {
            _Float16 h;
            std::memcpy(&h, p + 2 * i, 2);
            return double(h);
        }
        if (t.bits() == 32) {
            float f;
            std::memcpy(&f, p + 4 * i, 4);
            return f;
        }
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        return d;
    }

    void load(const fs::path &dir, void *lib, int scale) {
        std::ifstream mf(dir / "manifest.json");
        nlohmann::json manifest = nlohmann::json::parse(mf);
        rtol = manifest["tolerance"].value("rtol", 0.0);
        atol = manifest["tolerance"].value("atol", 0.0);

        auto start = now_ms();
        Module m = parse_module_file((dir / (name + ".host.stmt")).string());
        // The buffers the pipeline embeds (Halide's object has their data; the text does not).
        for (const nlohmann::json &c :
             manifest.value("buffer_constants", nlohmann::json::array())) {
            std::string mins;
            for (int v : c["mins"]) {
                mins += (mins.empty() ? "" : ",") + std::to_string(v);
            }
            npy::define_buffer_constant(m, std::string(c["name"]) + "=" +
                                               (dir / std::string(c["file"])).string() + "@" +
                                               mins);
        }
        CompileOptions options;
        options.extern_libraries = {TALLY_CONFORMANCE_EXTERNS};  // the extern stages' functions
        jit = compile_jit(lower(m, m.target), options);
        jit_ms = now_ms() - start;
        tally_argv = reinterpret_cast<HalideArgv>(
            jit->symbol(entry_symbols(jit->module(), jit->entry()).argv));
        if (!tally_argv) {
            throw std::runtime_error("Tally's JIT has no " + jit->entry().name + "_argv");
        }

        // A C symbol, or Halide's C++-mangled one for a pipeline built with
        // c_plus_plus_name_mangling (C++ extern stages need it): `_Z<len>name` and its
        // parameters.
        auto lookup = [&](const std::string &sym, const std::string &params) {
            void *p = dlsym(lib, sym.c_str());
            return p ? p : dlsym(lib, ("_Z" + std::to_string(sym.size()) + sym + params).c_str());
        };
        halide_argv = reinterpret_cast<HalideArgv>(lookup(name + "_argv", "PPv"));
        auto meta = reinterpret_cast<HalideMetadata>(lookup(name + "_metadata", "v"));
        if (!halide_argv || !meta) {
            throw std::runtime_error("the Halide library has no " + name + "_argv");
        }

        // Arguments in the order of Tally's entry function; Halide's metadata must agree.
        const LoweredFunc &entry = jit->entry();
        const halide_filter_metadata_t *md = meta();
        if (md->num_arguments != int(entry.args.size())) {
            throw std::runtime_error("Halide's and Tally's argument counts differ");
        }
        scalars.reserve(entry.args.size());
        for (size_t i = 0; i < entry.args.size(); i++) {
            const Argument &a = entry.args[i];
            if (a.name != md->arguments[i].name) {
                throw std::runtime_error("argument " + std::to_string(i) + " is " + a.name +
                                         " for Tally and " + md->arguments[i].name + " for Halide");
            }
            const nlohmann::json *spec = nullptr;
            for (const nlohmann::json &s : manifest["args"]) {
                if (s["name"] == a.name) {
                    spec = &s;
                }
            }
            if (!spec) {
                throw std::runtime_error("the manifest has no argument " + a.name);
            }
            std::string kind = (*spec)["kind"];
            Type t = parse_type_name((*spec)["type"]);
            if (kind == "scalar") {
                scalars.push_back(scalar_bytes(t, (*spec)["value"]));
                tally_args.push_back(scalars.back().data());
                halide_args.push_back(scalars.back().data());
                continue;
            }
            std::vector<int> extents = (*spec)["extents"], mins = (*spec)["mins"];
            std::vector<int> scaled = extents;
            for (int &e : scaled) {
                e = e >= min_scaled_extent ? e * scale : e;
            }
            auto mine = std::make_unique<Buffer>(t, scaled, mins);
            auto theirs = std::make_unique<Buffer>(t, scaled, mins);
            if (kind == "input") {
                std::vector<uint8_t> data;
                npy::read((dir / std::string((*spec)["file"])).string(), t, &data);
                if (data.size() != Buffer(t, extents, mins).data.size()) {
                    throw std::runtime_error("input " + a.name + " has the wrong size");
                }
                tile(data, extents, t.bytes(), &mine->data, scaled);
                theirs->data = mine->data;
                mine->buf.host = mine->data.data();
                theirs->buf.host = theirs->data.data();
            } else {
                outputs[a.name] = {t, mine.get(), theirs.get()};
            }
            // Both _argv conventions take a buffer as the halide_buffer_t * itself.
            tally_args.push_back(&mine->buf);
            halide_args.push_back(&theirs->buf);
            buffers.push_back(std::move(mine));
            buffers.push_back(std::move(theirs));
        }
    }
};

void *halide_handle() {
    static void *lib = [] {
        void *h = dlopen(halide_library, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        if (!h) {
            std::fprintf(stderr, "%s: dlopen %s: %s\n", program.c_str(), halide_library, dlerror());
        }
        return h;
    }();
    return lib;
}

/** Fresh processes per pipeline and scale. A first or second run is one sample per process,
 * and on a 2-core VM whose thread wake-ups take 0.1-1.4 ms those of 0.1-0.3 ms runs spread so
 * widely that the quotient of 9 processes' medians put pipelines 1.15x one repetition and 1.0x
 * the next; 15 narrow that, and fresh_runs says how far (bootstrap_interval). */
constexpr int fresh_processes = 15;
/** Where a first or second run's quotient is above the goal (1.10x) and its interval reaches below
 * it (not separable), up to this many processes in all, 15 at a time, until it is separable: more
 * samples only where the verdict needs them. */
constexpr int max_fresh_processes = 60;
constexpr double fresh_goal = 1.10;

/** Each side's steady-state run times over interleaved rounds (T H, H T, ...), and the median of
 * the per-round quotients. */
struct Steady {
    double tally_ms = 0, halide_ms = 0, pair = 0;
    int rounds = 0;
};

Steady steady_rounds(Pipeline &p) {
    // A side's timed run starts with the other runtime's thread pool asleep and its own awake:
    // both pools' workers spin a while after their work (Tally's 40 us), and on two cores a pool
    // still spinning takes a core from the other side's run, so back-to-back T H runs measured
    // which pool spun longer as much as which code was faster (a run of a few microseconds lies
    // wholly inside the other's spin). So each turn sleeps 200 us, makes one untimed run that
    // wakes this side's workers, and times the next.
    auto turn = [&p](double (Pipeline::*run)()) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        (p.*run)();
        return (p.*run)();
    };
    // As many rounds as take about 0.15 s for both sides, 5 to 201.
    double per_round = std::max(1e-3, 2 * (p.tally_second_ms + p.halide_second_ms) + 0.4);
    int rounds = std::clamp(int(150 / per_round), 5, 201);
    std::vector<double> t(rounds), h(rounds), ratio(rounds);
    for (int r = 0; r < rounds; r++) {
        if (r % 2 == 0) {
            t[r] = turn(&Pipeline::run_tally);
            h[r] = turn(&Pipeline::run_halide);
        } else {
            h[r] = turn(&Pipeline::run_halide);
            t[r] = turn(&Pipeline::run_tally);
        }
        ratio[r] = t[r] / h[r];
    }
    return {median(t), median(h), median(ratio), rounds};
}

/** A child's job (`--fresh DIR SCALE ORDER`): load one pipeline in this fresh process, time each
 * side's first two runs (Tally first when ORDER is 1), then the steady state over interleaved
 * rounds, compare the outputs, and print
 * `first T H second T H steady T H PAIR ROUNDS` in ms, or `error MESSAGE`. */
void discard_print(void *, const char *) {}

/** What pipelines print (print_when, tracing) is not what is timed, and Halide's goes to stdout,
 * where a child reports: both sides discard it. Halide's errors are kept (keep_halide_error). */
void install_handlers(void *lib) {
    using PrintFn = void (*)(void *, const char *);
    using SetPrint = PrintFn (*)(PrintFn);
    if (auto set_print = reinterpret_cast<SetPrint>(dlsym(lib, "halide_set_custom_print"))) {
        set_print(discard_print);
    }
    tally_set_print_handler(discard_print);
    tally_set_error_handler(keep_tally_error);
    if (auto set_error = reinterpret_cast<SetPrint>(dlsym(lib, "halide_set_error_handler"))) {
        set_error(keep_halide_error);
    }
}

/** `--probe DIR SCALE`: loads one pipeline and runs Tally's code once at that scale; prints
 * `ok`, or `error MESSAGE` when it fails there. A pipeline whose constraints do not hold at a
 * scale (hoist_ring's bound_storage(x, 64) at 8x the width) fails that way, and Halide's code is
 * then not run at all: Halide 21's thread pool does not return from an async pipeline one of
 * whose tasks failed (the producer waits for a ring-buffer slot its failed consumer never
 * frees). */
int probe_child(const char *dir, int scale) {
    void *lib = halide_handle();
    if (!lib) {
        std::printf("error cannot load the Halide %s corpus library\n", halide_version);
        return 1;
    }
    install_handlers(lib);
    Pipeline p(dir, lib, scale, true, /*time_first_runs=*/false);
    if (p.error.empty()) {
        p.run_tally();
    }
    std::printf(p.error.empty() ? "ok\n" : "error %s\n", p.error.c_str());
    return 0;
}

int fresh_child(const char *dir, int scale, bool tally_first) {
    void *lib = halide_handle();
    if (!lib) {
        std::printf("error cannot load the Halide %s corpus library\n", halide_version);
        return 1;
    }
    install_handlers(lib);
    Pipeline p(dir, lib, scale, tally_first);
    Steady st;
    if (p.error.empty()) {
        st = steady_rounds(p);
        p.check_outputs();
    }
    if (!p.error.empty()) {
        std::printf("error %s\n", p.error.c_str());
        return 1;
    }
    std::printf("first %.6f %.6f second %.6f %.6f steady %.6f %.6f %.6f %d\n", p.tally_first_ms,
                p.halide_first_ms, p.tally_second_ms, p.halide_second_ms, st.tally_ms, st.halide_ms,
                st.pair, st.rounds);
    return 0;
}

/** `--spin DIR SCALE SIDE SECONDS`: loads one pipeline as a child does, then runs one side
 * (`tally` or `halide`) back to back for SECONDS, and prints its runs and their mean, for a
 * profiler to look at: `TALLY_PERF_MAP=1 perf record ... --spin ...` names the JIT's functions. */
int spin_child(const char *dir, int scale, const std::string &side, double seconds) {
    void *lib = halide_handle();
    if (!lib || (side != "tally" && side != "halide")) {
        std::fprintf(stderr,
                     "%s: --spin needs the corpus library and a side "
                     "(tally or halide)\n",
                     program.c_str());
        return 1;
    }
    install_handlers(lib);
    Pipeline p(dir, lib, scale, true);
    if (!p.error.empty()) {
        std::fprintf(stderr, "%s: %s\n", program.c_str(), p.error.c_str());
        return 1;
    }
    long runs = 0;
    const double start = now_ms();
    while (now_ms() - start < seconds * 1e3 && p.error.empty()) {
        for (int i = 0; i < 100; i++) {
            side == "tally" ? p.run_tally() : p.run_halide();
        }
        runs += 100;
    }
    std::printf("%ld runs of %s, %.3f us each\n", runs, side.c_str(),
                (now_ms() - start) * 1e3 / double(runs));
    return p.error.empty() ? 0 : 1;
}

/** A `kB` field of /proc/self/status (`VmRSS:`, `VmHWM:`), or -1. */
long status_kib(const char *field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(field, 0) == 0) {
            return std::atol(line.c_str() + std::strlen(field));
        }
    }
    return -1;
}

/** Runs of each side in `--memory` children. */
constexpr int memory_runs = 5;

/** `--memory DIR SCALE SIDE`: the memory one side's runs add to a process, as a user's process
 * has it (glibc's allocator as configured by default: main() does not keep freed memory for this
 * child). Loads the pipeline (both sides' buffers and Tally's JIT: the same for either side),
 * resets the peak resident set (clear_refs 5), runs SIDE `memory_runs` times, and prints
 * `memory LOADED PEAK` in KiB: the resident set before the runs and its peak during them. */
int memory_child(const char *dir, int scale, const std::string &side) {
    void *lib = halide_handle();
    if (!lib || (side != "tally" && side != "halide")) {
        std::printf("error --memory needs the corpus library and a side (tally or halide)\n");
        return 1;
    }
    install_handlers(lib);
    Pipeline p(dir, lib, scale, true, /*time_first_runs=*/false);
    if (p.error.empty() && !(std::ofstream("/proc/self/clear_refs") << "5")) {
        p.error = "cannot reset the peak resident set (/proc/self/clear_refs)";
    }
    const long loaded = status_kib("VmRSS:");
    for (int i = 0; i < memory_runs && p.error.empty(); i++) {
        side == "tally" ? p.run_tally() : p.run_halide();
    }
    const long peak = status_kib("VmHWM:");
    if (!p.error.empty() || loaded < 0 || peak < 0) {
        std::printf("error %s\n",
                    p.error.empty() ? "no VmRSS/VmHWM in /proc/self/status" : p.error.c_str());
        return 1;
    }
    std::printf("memory %ld %ld\n", loaded, peak);
    return 0;
}

/** A child process's limit: one that runs longer (a pipeline that does not return) is killed,
 * and its benchmark reports the error instead of holding up the others. The longest child, a
 * fresh process of the slowest pipeline at scale 8, takes a few seconds. */
constexpr int child_timeout_s = 120;

/** This program run as a child with `args` (already quoted), under `timeout`; its first line of
 * output in `line`. Returns whether it exited with status 0 and printed a line; `line` says what
 * happened otherwise. */
bool run_child(const std::string &args, std::string *line) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        *line = "cannot find this program (/proc/self/exe)";
        return false;
    }
    self[n] = '\0';
    std::string cmd =
        "timeout -s KILL " + std::to_string(child_timeout_s) + " '" + self + "' " + args;
    FILE *child = popen(cmd.c_str(), "r");
    char buf[1024] = "";
    bool got = child && std::fgets(buf, sizeof(buf), child) != nullptr;
    int status = child ? pclose(child) : -1;
    *line = got ? buf : "no output";
    if (!line->empty() && line->back() == '\n') {
        line->pop_back();
    }
    if (status != 0 && WIFEXITED(status) && WEXITSTATUS(status) == 137) {
        *line = "killed after " + std::to_string(child_timeout_s) + " s (" + args + ")";
    }
    return got && status == 0;
}

/** The KiB one side's runs add to its process's peak resident set (memory_child), or -1 and
 * `error`. */
double memory_added_kib(const fs::path &dir, int scale, const char *side, std::string *error) {
    std::string line;
    bool ok =
        run_child("--memory '" + dir.string() + "' " + std::to_string(scale) + " " + side, &line);
    long loaded = 0, peak = 0;
    if (!ok || std::sscanf(line.c_str(), "memory %ld %ld", &loaded, &peak) != 2) {
        *error = "memory child failed: " + line;
        return -1;
    }
    return double(std::max(0L, peak - loaded));
}

/** Tally / Halide over the fresh processes. The first and second runs: the quotient of each
 * side's median run (one sample per process, each side's noise its own: the median of per-process
 * quotients compounds both sides' and swung 0.9x-1.8x between suite runs at 7 processes), and the
 * worst per-process quotient, and a 90 % bootstrap interval of the quotient. The steady state: the
 * median of the processes' quotients of median runs (each already a median over rounds), and their
 * extremes. */
struct FreshRuns {
    std::string error;
    double first = 0, first_max = 0, second = 0, second_max = 0;
    double first_lo = 0, first_hi = 0, second_lo = 0, second_hi = 0;  // bootstrap_interval
    double steady = 0, steady_min = 0, steady_max = 0, pair = 0;
    double tally_ms = 0, halide_ms = 0;
    int rounds = 0;
    int processes = 0;
};

FreshRuns fresh_runs(const fs::path &dir, int scale) {
    FreshRuns r;
    std::vector<double> first, second, steady, pair, tally, halide;
    std::vector<double> tally_first, halide_first, tally_second, halide_second;
    auto summarize = [&]() {
        r.first = median(tally_first) / median(halide_first);
        r.second = median(tally_second) / median(halide_second);
        std::tie(r.first_lo, r.first_hi) = bootstrap_interval(tally_first, halide_first);
        std::tie(r.second_lo, r.second_hi) = bootstrap_interval(tally_second, halide_second);
    };
    auto undecided = [&]() {
        return (r.first > fresh_goal && r.first_lo <= fresh_goal) ||
               (r.second > fresh_goal && r.second_lo <= fresh_goal);
    };
    int want = fresh_processes;
    for (int i = 0; i < want && r.error.empty(); i++) {
        std::string line;
        bool ok = run_child("--fresh '" + dir.string() + "' " + std::to_string(scale) + " " +
                                std::to_string(i % 2),
                            &line);
        double tf, hf, ts, hs, tm, hm, pr;
        int rounds;
        if (ok && std::sscanf(line.c_str(), "first %lf %lf second %lf %lf steady %lf %lf %lf %d",
                              &tf, &hf, &ts, &hs, &tm, &hm, &pr, &rounds) == 8) {
            first.push_back(tf / hf);
            second.push_back(ts / hs);
            tally_first.push_back(tf);
            halide_first.push_back(hf);
            tally_second.push_back(ts);
            halide_second.push_back(hs);
            steady.push_back(tm / hm);
            pair.push_back(pr);
            tally.push_back(tm);
            halide.push_back(hm);
            r.rounds += rounds;
        } else {
            r.error = "child process failed: " + line;
        }
        if (i + 1 == want && r.error.empty() && want < max_fresh_processes) {
            summarize();
            if (undecided()) {
                want += fresh_processes;
            }
        }
    }
    r.processes = int(tally_first.size());
    if (r.error.empty()) {
        summarize();
        r.steady = median(steady);
        r.pair = median(pair);
        r.tally_ms = median(tally);
        r.halide_ms = median(halide);
        r.first_max = *std::max_element(first.begin(), first.end());
        r.second_max = *std::max_element(second.begin(), second.end());
        r.steady_min = *std::min_element(steady.begin(), steady.end());
        r.steady_max = *std::max_element(steady.begin(), steady.end());
    }
    return r;
}

void BM_VsHalide(benchmark::State &state, fs::path dir) {
    if (!halide_handle()) {
        state.SkipWithError(
            ("cannot load the Halide " + std::string(halide_version) + " corpus library").c_str());
        return;
    }
    // Tally's code alone first: a pipeline that fails at this scale is not timed (probe_child).
    std::string probe;
    if (!run_child("--probe '" + dir.string() + "' " + std::to_string(state.range(0)), &probe) ||
        probe != "ok") {
        state.SkipWithError(("not run at this scale: " + probe).c_str());
        return;
    }
    for (auto _ : state) {
        FreshRuns fresh = fresh_runs(dir, int(state.range(0)));
        if (!fresh.error.empty()) {
            state.SkipWithError(fresh.error.c_str());
            return;
        }
        state.SetIterationTime(fresh.tally_ms / 1e3);
        state.counters["tally_ms"] = fresh.tally_ms;
        state.counters["halide_ms"] = fresh.halide_ms;
        state.counters["ratio"] = fresh.steady;
        state.counters["ratio_min"] = fresh.steady_min;
        state.counters["ratio_max"] = fresh.steady_max;
        state.counters["pair_ratio"] = fresh.pair;
        state.counters["first_ratio"] = fresh.first;
        state.counters["first_ratio_max"] = fresh.first_max;
        state.counters["second_ratio"] = fresh.second;
        state.counters["second_ratio_max"] = fresh.second_max;
        state.counters["first_ratio_lo"] = fresh.first_lo;
        state.counters["first_ratio_hi"] = fresh.first_hi;
        state.counters["second_ratio_lo"] = fresh.second_lo;
        state.counters["second_ratio_hi"] = fresh.second_hi;
        state.counters["rounds"] = fresh.rounds;
        state.counters["processes"] = fresh.processes;
        // The memory each side's runs add (MiB), and Tally's over Halide's with 1 MiB added to
        // both (runs that add a few pages give no meaningful quotient).
        std::string error;
        double tally_kib = memory_added_kib(dir, int(state.range(0)), "tally", &error);
        double halide_kib =
            error.empty() ? memory_added_kib(dir, int(state.range(0)), "halide", &error) : -1;
        if (!error.empty()) {
            state.SkipWithError(error.c_str());
            return;
        }
        state.counters["tally_added_mib"] = tally_kib / 1024;
        state.counters["halide_added_mib"] = halide_kib / 1024;
        state.counters["memory_ratio"] = (tally_kib + 1024) / (halide_kib + 1024);
    }
}

/** The corpus's pipelines whose `host` conformance check fails today (xfail.txt: `<pipeline>
 * <check> <reason>`), with the reason: Tally's outputs differ from Halide's there, so a speed
 * comparison would time code that computes something else. */
std::map<std::string, std::string> failing_host_checks() {
    std::map<std::string, std::string> failing;
    std::ifstream in(fs::path(conformance_dir) / "xfail.txt");
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        std::istringstream words(line);
        std::string pipeline, check, reason;
        words >> pipeline >> check;
        std::getline(words >> std::ws, reason);
        if (check == "host") {
            failing[pipeline] = reason;
        }
    }
    return failing;
}

}  // namespace

int main(int argc, char **argv) {
    // Pipelines that write files (debug_to_file) write them in the working directory: a scratch
    // folder of their own, not wherever the benchmark was started.
    std::error_code ec;
    const fs::path scratch = fs::temp_directory_path(ec) / ("tally_" + program);
    fs::create_directories(scratch, ec);
    fs::current_path(scratch, ec);
    if (argc == 5 && std::string(argv[1]) == "--memory") {
        return memory_child(argv[2], std::atoi(argv[3]), argv[4]);  // the default allocator
    }
    keep_freed_memory_in_process();
    if (argc == 4 && std::string(argv[1]) == "--probe") {
        return probe_child(argv[2], std::atoi(argv[3]));
    }
    if (argc == 5 && std::string(argv[1]) == "--fresh") {
        return fresh_child(argv[2], std::atoi(argv[3]), std::string(argv[4]) == "1");
    }
    if (argc == 6 && std::string(argv[1]) == "--spin") {
        return spin_child(argv[2], std::atoi(argv[3]), argv[4], std::atof(argv[5]));
    }
    std::vector<fs::path> dirs;
    for (const auto &e : fs::directory_iterator(conformance_dir)) {
        if (fs::exists(e.path() / "manifest.json") &&
            fs::exists(e.path() / (e.path().filename().string() + ".host.stmt"))) {
            dirs.push_back(e.path());
        }
    }
    std::sort(dirs.begin(), dirs.end());
    const std::map<std::string, std::string> failing = failing_host_checks();
    for (size_t i = 0; i < dirs.size(); i++) {
        const std::string name = dirs[i].filename().string();
        const std::string bench = "BM_VsHalide" + std::string(halide_version) + "/" + name;
        auto f = failing.find(name);
        if (name.rfind("truth_", 0) == 0) {
            // The truth pipelines' stages spin for set times (truth_bench's constructed truth):
            // both sides take those times whatever their code, which says nothing of it.
            continue;
        }
        if (f != failing.end()) {
            // Registered, so the results list it with the reason rather than leave it out.
            benchmark::RegisterBenchmark(bench.c_str(), [reason = f->second](benchmark::State &s) {
                s.SkipWithError(("skipped: its host check fails (xfail.txt): " + reason).c_str());
            })->Iterations(1);
            continue;
        }
        benchmark::RegisterBenchmark(bench.c_str(), BM_VsHalide, dirs[i])
            ->Arg(1)
            ->Arg(8)
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
