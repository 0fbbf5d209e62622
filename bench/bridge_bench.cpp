// Compile time through the Halide bridge against Halide 21's own JIT compile, for every pipeline
// of the Halide 21 conformance corpus built from its Halide source (tools/corpus/CorpusDefs.cpp),
// in one process.
//
// BM_BridgeCompile/<name>: each iteration builds the pipeline twice from its definition (a
// Halide Pipeline keeps the code it compiled, so each side gets a fresh one; building the Funcs is
// not timed), compiles one with Halide (Pipeline::compile_jit for Halide's host target: lowering,
// LLVM, JIT) and the other with Tally (tally::halide::compile for `host`: Halide's lowering to its
// conceptual statement, the translation, Tally's lowering, LLVM, JIT), the two in alternating
// order from one iteration to the next. Neither runs the code. The extern stages' C functions are
// linked into the process, where both JITs find them. Where Halide's JIT cannot compile a
// pipeline (extern_cpp: Halide 21 calls a C++ extern only for a target with
// c_plus_plus_name_mangling, and its JIT then cannot find its own entry point, "Symbols not
// found"), Tally's compile is timed alone and the label gives Halide's error.
//
// Counters: halide_ms and tally_ms, the medians of the iterations' compile times; translate_ms,
// the part of Tally's that is Halide's lowering and the translation (timed apart, on a third
// copy of the pipeline); ratio, the median per-iteration quotient Tally / Halide;
// ratio_max, the largest quotient. The target: ratio no more
// than 1.5 for every pipeline. Built where the bridge is (Halide 21 installed).

#include <benchmark/benchmark.h>

#include "CorpusDefs.h"
#include "tally/halide/Bridge.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bridge_compile(benchmark::State &state, const std::function<corpus::Def()> &make) {
    std::vector<double> halide, tally, front, ratios;
    bool tally_first = false;
    std::string halide_error;  // Halide's JIT's, where it cannot compile the pipeline
    for (auto _ : state) {
        state.PauseTiming();
        corpus::Def h = make(), t = make();
        state.ResumeTiming();
        double th = 0, tt = 0, tf = 0;
        auto run_halide = [&] {
            Halide::Target target = Halide::get_jit_target_from_environment();
            for (Halide::Target::Feature f : h.features) {
                target = target.with_feature(f);
            }
            auto t0 = std::chrono::steady_clock::now();
            try {
                h.pipeline.compile_jit(target);
            } catch (const Halide::Error &e) {
                halide_error = e.what();
            }
            th = seconds_since(t0);
        };
        auto run_tally = [&] {
            std::string target = "host";
            for (Halide::Target::Feature f : t.features) {
                target += "-" + Halide::Target::feature_to_name(f);
            }
            auto t0 = std::chrono::steady_clock::now();
            auto p = tally::halide::compile(t.pipeline, t.args, target);
            tt = seconds_since(t0);
            benchmark::DoNotOptimize(p.get());
            // The front half alone, on a third copy: Halide's lowering to its conceptual
            // statement and the translation.
            corpus::Def again = make();
            auto t1 = std::chrono::steady_clock::now();
            tally::Module m = tally::halide::translate(again.pipeline, again.args, target);
            tf = seconds_since(t1);
            benchmark::DoNotOptimize(&m);
        };
        try {
            if (!halide_error.empty()) {
                run_tally();
            } else if (tally_first) {
                run_tally();
                run_halide();
            } else {
                run_halide();
                run_tally();
            }
        } catch (const std::exception &e) {
            state.SkipWithError(e.what());
            return;
        } catch (const Halide::Error &e) {
            state.SkipWithError(e.what());
            return;
        }
        tally_first = !tally_first;
        tally.push_back(tt * 1e3);
        front.push_back(tf * 1e3);
        if (halide_error.empty()) {
            halide.push_back(th * 1e3);
            ratios.push_back(tt / th);
        }
    }
    state.counters["tally_ms"] = median(tally);
    state.counters["translate_ms"] = median(front);
    if (!halide_error.empty()) {
        // Halide's side failed: no Halide time and no ratio, its first line as the label.
        state.SetLabel("Halide's JIT cannot compile it: " +
                       halide_error.substr(0, halide_error.find('\n')));
        return;
    }
    state.counters["halide_ms"] = median(halide);
    state.counters["ratio"] = median(ratios);
    state.counters["ratio_max"] = *std::max_element(ratios.begin(), ratios.end());
}

}  // namespace

int main(int argc, char **argv) {
    for (const auto &kv : corpus::all_defs()) {
        benchmark::RegisterBenchmark(("BM_BridgeCompile/" + kv.first).c_str(), bridge_compile,
                                     kv.second)
            ->Iterations(2)
            ->Unit(benchmark::kMillisecond);
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
