// The profiler runtime alone: the cost of its calls and of its sampler thread. Counters (besides
// Google Benchmark's time columns):
//   BM_SetCurrent                  time per iteration = ns per tally_profiler_set_current, with
//                                  the sampler running at 1 kHz.
//   BM_ThreadBeginSetEnd           ns per task for thread_begin + set_current + thread_end.
//   BM_SamplerCpu/<interval_us>/<runs>
//                                  sampler_cpu_pct: CPU time of the sampler thread as a percent of
//                                  one core while <runs> runs are live and the process is idle;
//                                  process_cpu_pct: the whole process's CPU (getrusage) over the
//                                  same window (the main thread sleeps, so this is the sampler plus
//                                  any runtime background work).
//   BM_BareWakeupCpu/<interval_us> wakeup_cpu_pct: the floor under sampler_cpu_pct: CPU of a
//                                  plain thread that only sleeps to absolute deadlines at the same
//                                  interval (what the platform charges for waking up at all).
//   BM_SampleTick/<runs>           time per iteration = one sampling pass over <runs> live runs
//                                  (the sampler's own work per tick, without the wakeup).
//   BM_WallOverhead/<mode>         overhead_pct: wall-time overhead of profiling a synthetic
//                                  workload that switches slots 10^5 times per second (10 us of
//                                  arithmetic per slot), min of interleaved repeats, profiled vs
//                                  not; mode 0 = sampler thread, 1 = timer signal.
//                                  cpu_overhead_pct: the same in CPU time of the workload thread
//                                  (robust on a loaded machine).
//                                  switches_per_s: the switch rate actually achieved.
#include "BareWakeup.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <sys/resource.h>
#include <time.h>
#include <vector>

namespace {

const char *const kSlotNames[] = {"overhead", "s1", "s2", "s3", "s4", "s5", "s6", "s7"};
constexpr int32_t kNumSlots = 8;

uint64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

uint64_t process_cpu_ns() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t(ru.ru_utime.tv_sec) + uint64_t(ru.ru_stime.tv_sec)) * 1000000000u +
           (uint64_t(ru.ru_utime.tv_usec) + uint64_t(ru.ru_stime.tv_usec)) * 1000u;
}

void *start_run(const char *name, int32_t flags = 0) {
    return tally_profiler_start(nullptr, name, "host-profile", kNumSlots, kSlotNames, nullptr,
                                nullptr, flags);
}

void BM_SetCurrent(benchmark::State &state) {
    tally_profiler_set_interval_us(1000);
    void *inst = start_run("bench_set_current");
    int32_t slot = 0;
    for (auto _ : state) {
        tally_profiler_set_current(inst, slot);
        slot = (slot + 1) & 7;
        benchmark::ClobberMemory();
    }
    tally_profiler_end(nullptr, inst);
}
BENCHMARK(BM_SetCurrent);

void BM_ThreadBeginSetEnd(benchmark::State &state) {
    void *inst = start_run("bench_thread_begin");
    for (auto _ : state) {
        void *ctx = tally_profiler_thread_begin(inst);
        tally_profiler_set_current(ctx, 3);
        tally_profiler_thread_end(ctx);
        benchmark::ClobberMemory();
    }
    tally_profiler_end(nullptr, inst);
}
BENCHMARK(BM_ThreadBeginSetEnd);

void BM_SamplerCpu(benchmark::State &state) {
    const uint32_t interval_us = uint32_t(state.range(0));
    const int runs = int(state.range(1));
    tally_profiler_set_interval_us(interval_us);
    std::vector<void *> insts;
    for (int i = 0; i < runs; i++) {
        insts.push_back(start_run("bench_sampler_cpu"));
    }
    double sampler_pct = 0, process_pct = 0;
    int n = 0;
    for (auto _ : state) {
        uint64_t w0 = monotonic_ns(), s0 = tally_testing_sampler_cpu_ns(), p0 = process_cpu_ns();
        timespec nap = {0, 250000000};  // 250 ms idle: only the sampler works
        nanosleep(&nap, nullptr);
        uint64_t w1 = monotonic_ns(), s1 = tally_testing_sampler_cpu_ns(), p1 = process_cpu_ns();
        sampler_pct += 100.0 * double(s1 - s0) / double(w1 - w0);
        process_pct += 100.0 * double(p1 - p0) / double(w1 - w0);
        n++;
    }
    for (void *inst : insts) {
        tally_profiler_end(nullptr, inst);
    }
    tally_profiler_set_interval_us(1000);
    state.counters["sampler_cpu_pct"] = sampler_pct / n;
    state.counters["process_cpu_pct"] = process_pct / n;
}
BENCHMARK(BM_SamplerCpu)
    ->Args({1000, 1})
    ->Args({1000, 16})
    ->Args({100, 1})
    ->Iterations(4)
    ->Unit(benchmark::kMillisecond);

void BM_BareWakeupCpu(benchmark::State &state) {
    BareWakeupThread sleeper(uint64_t(state.range(0)) * 1000);
    double pct = 0;
    int n = 0;
    for (auto _ : state) {
        uint64_t w0 = monotonic_ns(), c0 = sleeper.cpu_ns();
        timespec nap = {0, 250000000};
        nanosleep(&nap, nullptr);
        uint64_t w1 = monotonic_ns(), c1 = sleeper.cpu_ns();
        pct += 100.0 * double(c1 - c0) / double(w1 - w0);
        n++;
    }
    state.counters["wakeup_cpu_pct"] = pct / n;
}
BENCHMARK(BM_BareWakeupCpu)->Arg(1000)->Arg(100)->Iterations(4)->Unit(benchmark::kMillisecond);

void BM_SampleTick(benchmark::State &state) {
    // A long interval keeps the sampler thread out of the way; the benchmark samples by hand.
    tally_profiler_set_interval_us(1000000);
    std::vector<void *> insts;
    for (int64_t i = 0; i < state.range(0); i++) {
        insts.push_back(start_run("bench_sample_tick"));
        tally_profiler_set_current(insts.back(), 1);
    }
    for (auto _ : state) {
        tally_testing_sample_now();
    }
    for (void *inst : insts) {
        tally_profiler_end(nullptr, inst);
    }
    tally_profiler_set_interval_us(1000);
}
BENCHMARK(BM_SampleTick)->Arg(1)->Arg(16);

// ~10 us of arithmetic, calibrated once.
volatile double sink;
int64_t g_work_per_segment = 0;

void work(int64_t n) {
    double x = 1.0;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1.0000001 + 1e-9;
    }
    sink = x;
}

void calibrate() {
    if (g_work_per_segment) {
        return;
    }
    int64_t n = 1000;
    for (;;) {
        uint64_t best = UINT64_MAX;
        for (int rep = 0; rep < 5; rep++) {
            uint64_t t0 = monotonic_ns();
            work(n);
            best = std::min(best, monotonic_ns() - t0);
        }
        if (best > 1000000) {
            g_work_per_segment = n * 10000 / int64_t(best);  // 10 us worth
            return;
        }
        n *= 2;
    }
}

uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

struct PassTime {
    uint64_t wall_ns;
    uint64_t cpu_ns;  // of the thread running the workload
};

// One pass: `segments` segments of ~10 us; profiled passes switch slot before each segment.
PassTime workload(int segments, bool profiled, int32_t flags) {
    uint64_t t0 = monotonic_ns(), c0 = thread_cpu_ns();
    void *inst = profiled ? start_run("bench_wall_overhead", flags) : nullptr;
    for (int i = 0; i < segments; i++) {
        if (profiled) {
            tally_profiler_set_current(inst, 1 + (i % 7));
        }
        work(g_work_per_segment);
    }
    if (profiled) {
        tally_profiler_end(nullptr, inst);
    }
    return {monotonic_ns() - t0, thread_cpu_ns() - c0};
}

void BM_WallOverhead(benchmark::State &state) {
    calibrate();
    const int32_t flags = state.range(0) ? TALLY_PROFILER_FLAG_TIMER : 0;
    const int segments = 20000;  // ~200 ms per pass
    uint64_t best_base = UINT64_MAX, best_prof = UINT64_MAX;
    uint64_t best_base_cpu = UINT64_MAX, best_prof_cpu = UINT64_MAX;
    for (auto _ : state) {
        PassTime base = workload(segments, false, flags);
        PassTime prof = workload(segments, true, flags);
        best_base = std::min(best_base, base.wall_ns);
        best_prof = std::min(best_prof, prof.wall_ns);
        best_base_cpu = std::min(best_base_cpu, base.cpu_ns);
        best_prof_cpu = std::min(best_prof_cpu, prof.cpu_ns);
    }
    state.counters["overhead_pct"] =
        100.0 * (double(best_prof) - double(best_base)) / double(best_base);
    // The same comparison in CPU time of the workload thread: immune to other processes stealing
    // the core, and it still includes the set_current calls and, in timer mode, the signal
    // handler (which runs on this thread).
    state.counters["cpu_overhead_pct"] =
        100.0 * (double(best_prof_cpu) - double(best_base_cpu)) / double(best_base_cpu);
    state.counters["switches_per_s"] = double(segments) / (double(best_prof) / 1e9);
    state.counters["base_ms"] = double(best_base) / 1e6;
    state.counters["profiled_ms"] = double(best_prof) / 1e6;
}
BENCHMARK(BM_WallOverhead)->Arg(0)->Arg(1)->Iterations(10)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char **argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    // The runs above are measurements, not a profile anyone asked for: no report at exit.
    tally_profiler_reset();
    return 0;
}
