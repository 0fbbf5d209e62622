// A conformance corpus library of one Halide version (libhalide14_corpus.so,
// libhalide21_corpus.so: every corpus pipeline as that Halide compiled it, with Halide's own
// runtime), loaded beside Tally in one process, and what Halide's profiler holds for the
// pipelines of it that were compiled with -profile.
//
// The library is opened RTLD_LOCAL | RTLD_DEEPBIND and was linked -Bsymbolic
// (tools/corpus/build_library.sh), so its pipelines call their own runtime: Halide's thread pool
// and profiler, apart from Tally's. Halide's print and error handlers are replaced (its report
// would otherwise be printed to stdout when the library is unloaded at exit, into a benchmark's
// JSON).
//
// Halide's profiler state is read through its public runtime API (halide_profiler_get_state,
// HalideRuntime.h) with the structs below, laid out as each version's header declares them
// (Halide 14.0.0 and 21.0.0; the pipeline record of 14 has a first_func_id that 21 dropped). In
// both, a Func's `time` is in ns, summed over the pipeline's runs; Halide 21 rescales each run's
// samples so that its Funcs' times add up to the run's wall time (halide_profiler_instance_end),
// Halide 14 bills the sampled intervals as they are.

#ifndef TALLY_BENCH_HALIDE_LIBRARY_H
#define TALLY_BENCH_HALIDE_LIBRARY_H

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace halide_bench {

/** halide_profiler_func_stats (the same in 14 and 21). */
struct FuncStats {
    uint64_t time;
    uint64_t memory_current, memory_peak, memory_total, stack_peak;
    uint64_t active_threads_numerator, active_threads_denominator;
    const char *name;
    int num_allocs;
};
static_assert(sizeof(FuncStats) == 72, "Halide's halide_profiler_func_stats is 72 bytes");

/** halide_profiler_pipeline_stats of Halide 21. */
struct PipelineStats21 {
    uint64_t time;
    uint64_t memory_current, memory_peak, memory_total;
    uint64_t active_threads_numerator, active_threads_denominator;
    const char *name;
    FuncStats *funcs;
    void *next;
    int num_funcs, runs, samples, num_allocs;
};
static_assert(sizeof(PipelineStats21) == 88, "Halide 21's pipeline stats are 88 bytes");

/** halide_profiler_pipeline_stats of Halide 14. */
struct PipelineStats14 {
    uint64_t time;
    uint64_t memory_current, memory_peak, memory_total;
    uint64_t active_threads_numerator, active_threads_denominator;
    const char *name;
    FuncStats *funcs;
    void *next;
    int num_funcs, first_func_id, runs, samples, num_allocs;
};
static_assert(sizeof(PipelineStats14) == 96, "Halide 14's pipeline stats are 96 bytes");

/** halide_profiler_state of Halide 21 (sleep_time in microseconds, default 1000). */
struct State21 {
    uintptr_t lock;
    PipelineStats21 *pipelines;
    void *sampling_thread;
    void *instances;
    void (*get_remote_profiler_state)(int *, int *);
    int sleep_time;
    int shutdown;
};

/** halide_profiler_state of Halide 14 (sleep_time in milliseconds, default 1). */
struct State14 {
    uintptr_t lock;
    int sleep_time, first_free_id, current_func, active_threads;
    PipelineStats14 *pipelines;
    void (*get_remote_profiler_state)(int *, int *);
    void *sampling_thread;
};

/** What Halide's profiler holds for one pipeline: per Func (its report's rows, slot 0
 * `overhead` and the runtime's slots included) the ns over all runs since the last reset. */
struct Profile {
    std::vector<std::string> names;
    std::vector<double> ns;
    int runs = 0, samples = 0;
    double wall_ns = 0;  // the pipeline's time (21: wall time; 14: the sampled intervals)

    /** The ns billed to the Func `name` (0 when the report has no such row). */
    double of(const std::string &name) const {
        double t = 0;
        for (size_t i = 0; i < names.size(); i++) {
            t += names[i] == name ? ns[i] : 0.0;
        }
        return t;
    }
};

inline void discard_print(void *, const char *) {}

class Library {
public:
    using Argv = int (*)(void **);

    Library(int version, const std::string &path) : version_(version) {
        handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        if (!handle_) {
            const char *why = dlerror();
            error_ = "cannot load " + path + ": " + (why ? why : "dlopen failed") +
                     " (build it: cmake --build build --target halide" + std::to_string(version) +
                     "_corpus)";
            return;
        }
        using PrintFn = void (*)(void *, const char *);
        using SetPrint = PrintFn (*)(PrintFn);
        for (const char *setter : {"halide_set_custom_print", "halide_set_error_handler"}) {
            if (auto set = reinterpret_cast<SetPrint>(dlsym(handle_, setter))) {
                set(discard_print);
            }
        }
        get_state_ = reinterpret_cast<void *(*)()>(dlsym(handle_, "halide_profiler_get_state"));
        reset_ = reinterpret_cast<void (*)()>(dlsym(handle_, "halide_profiler_reset"));
        set_threads_ = reinterpret_cast<int (*)(int)>(dlsym(handle_, "halide_set_num_threads"));
        if (!get_state_ || !reset_ || !set_threads_) {
            error_ = path + " has no halide_profiler_get_state, halide_profiler_reset or "
                            "halide_set_num_threads";
        }
    }
    // Not unloaded: Halide's runtime keeps threads (its pool, its sampler) running.
    Library(const Library &) = delete;
    Library &operator=(const Library &) = delete;

    const std::string &error() const { return error_; }
    int version() const { return version_; }

    /** The pipeline `function`'s `_argv` entry, or nullptr. */
    Argv argv(const std::string &function) const {
        return handle_ ? reinterpret_cast<Argv>(dlsym(handle_, (function + "_argv").c_str()))
                       : nullptr;
    }

    /** Any symbol the library defines, or nullptr. */
    void *symbol(const char *name) const { return handle_ ? dlsym(handle_, name) : nullptr; }

    void set_num_threads(int n) const { set_threads_(n); }

    /** Forgets every pipeline's figures; only between runs. */
    void reset_profiler() const { reset_(); }

    /** What the profiler holds for the pipeline `function` (compiled with -profile); between
     * runs only (Halide frees the records on reset). */
    Profile profile(const std::string &function) const {
        return version_ >= 21 ? read<State21, PipelineStats21>(function)
                              : read<State14, PipelineStats14>(function);
    }

private:
    template <typename State, typename Stats>
    Profile read(const std::string &function) const {
        Profile p;
        auto *s = static_cast<State *>(get_state_());
        // Halide names the pipeline by a pointer to its own string: compared by content.
        for (Stats *ps = s->pipelines; ps; ps = static_cast<Stats *>(ps->next)) {
            if (!ps->name || function != ps->name) {
                continue;
            }
            p.runs = ps->runs;
            p.samples = ps->samples;
            p.wall_ns = double(ps->time);
            for (int i = 0; i < ps->num_funcs; i++) {
                p.names.emplace_back(ps->funcs[i].name ? ps->funcs[i].name : "");
                p.ns.push_back(double(ps->funcs[i].time));
            }
        }
        return p;
    }

    int version_;
    void *handle_ = nullptr;
    std::string error_;
    void *(*get_state_)() = nullptr;
    void (*reset_)() = nullptr;
    int (*set_threads_)(int) = nullptr;
};

}  // namespace halide_bench

#endif  // TALLY_BENCH_HALIDE_LIBRARY_H
