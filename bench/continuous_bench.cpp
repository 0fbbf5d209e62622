// Continuous mode's cost: low-rate sampling (19-100 Hz) with a fresh pprof file every N seconds,
// which must take at most 1 % of a core.
//
// Continuous mode is configured from the environment once per process (the writer thread starts
// on the first profiled run), so each measurement runs in a child process: this program runs
// itself with `--child SECONDS` and
//   TALLY_PROFILE_PPROF=<temp dir>/window.pb.gz  TALLY_PROFILE_PPROF_EVERY=<every_ms / 1000>
//   TALLY_PROFILE_INTERVAL_US=<10^6 / hz>        TALLY_PROFILE_OUTPUT=/dev/null
// The child stands for a long-running service: its main thread runs an 8-slot pipeline
// continuously, a run every 100 ms, switching slot every 10 ms, and otherwise sleeps. After a
// warm-up of one window, it measures SECONDS of wall time (five windows) and prints its CPU
// times; the parent turns them into percentages of one core (the time column is the child's whole
// life):
//
//   BM_ContinuousCpu/<hz>/<every_ms>
//     profiler_cpu_pct  every thread of the child but the main one: the sampler, the window
//                       writer and anything else the runtime runs -- continuous mode's cost
//     sampler_cpu_pct   the sampler thread alone
//     writer_cpu_pct    profiler - sampler: the writer thread (snapshots, pprof encoding, gzip,
//                       the file writes and the rotation)
//     service_cpu_pct   the main thread: the stand-in service waking 100 times a second, with
//                       its profiler calls (a start, an end and 10 switches per run, tens of ns
//                       each); what the service costs, not the profiler
//     windows           pprof files written during the measurement (the mode did engage)
//   BM_BareWakeupCpu/<interval_us>
//     wakeup_cpu_pct    the floor: a thread that only wakes at the sampler's interval
//                       (bench/BareWakeup.h), in this process
#include "BareWakeup.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ftw.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace {

const char *const kSlotNames[] = {"overhead", "decode", "resize", "filter",
                                  "blend",    "encode", "stats",  "upload"};
constexpr int32_t kNumSlots = 8;

uint64_t clock_ns(clockid_t clock) {
    timespec ts;
    clock_gettime(clock, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

void sleep_until(uint64_t deadline_ns) {
    timespec ts = {time_t(deadline_ns / 1000000000u), long(deadline_ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
    }
}

// The service: runs back to back, 100 ms each, a slot switch every 10 ms, until `end_ns`.
void serve_until(uint64_t end_ns) {
    uint64_t tick = clock_ns(CLOCK_MONOTONIC);
    while (tick < end_ns) {
        void *inst = tally_profiler_start(nullptr, "service", "host-profile", kNumSlots, kSlotNames,
                                          nullptr, nullptr, 0);
        for (int32_t i = 0; i < 10; i++) {
            tally_profiler_set_current(inst, 1 + i % (kNumSlots - 1));
            tick += 10000000;
            sleep_until(tick);
        }
        tally_profiler_end(nullptr, inst);
    }
}

// The child: one window of warm-up, then `seconds` measured. Prints
// "wall_ns process_ns sampler_ns main_ns windows".
int child_main(double seconds) {
    const char *path = getenv("TALLY_PROFILE_PPROF");
    const double every_s = atof(getenv("TALLY_PROFILE_PPROF_EVERY"));
    uint64_t start = clock_ns(CLOCK_MONOTONIC);
    serve_until(start + uint64_t(every_s * 1e9));
    auto windows_so_far = [&] {
        int n = 0;
        struct stat st;
        while (stat((std::string(path) + "." + std::to_string(n)).c_str(), &st) == 0) {
            n++;
        }
        return n;
    };
    int windows0 = windows_so_far();
    uint64_t w0 = clock_ns(CLOCK_MONOTONIC), p0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t s0 = tally_testing_sampler_cpu_ns(), m0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    serve_until(w0 + uint64_t(seconds * 1e9));
    uint64_t w1 = clock_ns(CLOCK_MONOTONIC), p1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t s1 = tally_testing_sampler_cpu_ns(), m1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    printf("%llu %llu %llu %llu %d\n", (unsigned long long)(w1 - w0), (unsigned long long)(p1 - p0),
           (unsigned long long)(s1 - s0), (unsigned long long)(m1 - m0),
           windows_so_far() - windows0);
    fflush(stdout);
    return 0;
}

std::string g_self;  // this program's path, for the children

struct ChildTimes {
    double wall_ns = 0, process_ns = 0, sampler_ns = 0, main_ns = 0;
    int windows = 0;
};

// Runs one child with continuous mode at `hz`, a window every `every_ms`, for `seconds`; false
// (and `error`) if it failed.
bool run_child(int hz, int every_ms, double seconds, ChildTimes *out, std::string *error) {
    char dir[] = "/tmp/tally-continuous-XXXXXX";
    if (!mkdtemp(dir)) {
        *error = "mkdtemp failed";
        return false;
    }
    std::string pprof = std::string(dir) + "/window.pb.gz";
    std::string every = std::to_string(every_ms / 1000.0);
    std::string interval = std::to_string(1000000 / hz);
    std::string secs = std::to_string(seconds);
    int fds[2];
    if (pipe(fds) != 0) {
        *error = "pipe failed";
        return false;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        setenv("TALLY_PROFILE_PPROF", pprof.c_str(), 1);
        setenv("TALLY_PROFILE_PPROF_EVERY", every.c_str(), 1);
        setenv("TALLY_PROFILE_PPROF_KEEP", "1000", 1);  // count every window written
        setenv("TALLY_PROFILE_INTERVAL_US", interval.c_str(), 1);
        setenv("TALLY_PROFILE_OUTPUT", "/dev/null", 1);
        unsetenv("TALLY_PROFILE_MODE");
        execl(g_self.c_str(), g_self.c_str(), "--child", secs.c_str(), (char *)nullptr);
        _exit(127);
    }
    close(fds[1]);
    std::string text;
    char buf[256];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) {
        text.append(buf, size_t(n));
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    nftw(
        dir, [](const char *p, const struct stat *, int, FTW *) { return remove(p); }, 8,
        FTW_DEPTH | FTW_PHYS);
    unsigned long long w, p, s, m;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(text.c_str(), "%llu %llu %llu %llu %d", &w, &p, &s, &m, &out->windows) != 5) {
        *error = "the child failed (status " + std::to_string(status) + "): " + text;
        return false;
    }
    out->wall_ns = double(w);
    out->process_ns = double(p);
    out->sampler_ns = double(s);
    out->main_ns = double(m);
    return true;
}

void BM_ContinuousCpu(benchmark::State &state) {
    const int hz = int(state.range(0)), every_ms = int(state.range(1));
    const double seconds = 5.0 * every_ms / 1000.0;  // five windows per measurement
    ChildTimes sum;
    int n = 0;
    for (auto _ : state) {
        ChildTimes t;
        std::string error;
        if (!run_child(hz, every_ms, seconds, &t, &error)) {
            state.SkipWithError(error.c_str());
            return;
        }
        if (t.windows == 0) {
            state.SkipWithError("no pprof window was written: continuous mode did not engage");
            return;
        }
        sum.wall_ns += t.wall_ns;
        sum.process_ns += t.process_ns;
        sum.sampler_ns += t.sampler_ns;
        sum.main_ns += t.main_ns;
        sum.windows += t.windows;
        n++;
    }
    state.counters["profiler_cpu_pct"] = 100.0 * (sum.process_ns - sum.main_ns) / sum.wall_ns;
    state.counters["sampler_cpu_pct"] = 100.0 * sum.sampler_ns / sum.wall_ns;
    state.counters["writer_cpu_pct"] =
        100.0 * (sum.process_ns - sum.main_ns - sum.sampler_ns) / sum.wall_ns;
    state.counters["service_cpu_pct"] = 100.0 * sum.main_ns / sum.wall_ns;
    state.counters["windows"] = double(sum.windows) / n;
}
BENCHMARK(BM_ContinuousCpu)
    ->Args({19, 1000})
    ->Args({100, 1000})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_BareWakeupCpu(benchmark::State &state) {
    BareWakeupThread sleeper(uint64_t(state.range(0)) * 1000);
    double pct = 0;
    int n = 0;
    for (auto _ : state) {
        uint64_t w0 = clock_ns(CLOCK_MONOTONIC), c0 = sleeper.cpu_ns();
        timespec nap = {1, 0};  // one second: 19 wakeups at the lowest rate
        nanosleep(&nap, nullptr);
        uint64_t w1 = clock_ns(CLOCK_MONOTONIC), c1 = sleeper.cpu_ns();
        pct += 100.0 * double(c1 - c0) / double(w1 - w0);
        n++;
    }
    state.counters["wakeup_cpu_pct"] = pct / n;
}
// The sampler's intervals at 19 Hz and 100 Hz.
BENCHMARK(BM_BareWakeupCpu)
    ->Arg(1000000 / 19)
    ->Arg(1000000 / 100)
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        return child_main(atof(argv[2]));
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    g_self = len > 0 ? std::string(self, size_t(len)) : std::string(argv[0]);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
