// The clock every profiler timestamp comes from.
//
// Exact mode reads the clock on every slot switch, so a read must cost a few nanoseconds. Where
// the CPU's time-stamp counter is invariant (CPUID leaf 0x80000007, EDX bit 8: constant rate in
// every P-, C- and T-state) and Linux's own clocksource is the TSC (the kernel checks the CPUs'
// counters against each other and moves off a TSC it cannot trust), it is read with RDTSC and
// converted to nanoseconds with a multiplier calibrated against CLOCK_MONOTONIC once, when the
// first profiled run starts (tally_clock_init): the calibration brackets an RDTSC read between two
// clock_gettime reads at the start and again ~1 ms later, keeping the tightest of a few brackets at
// each end (a bracket still wider than 20 us, preempted in every try, fails the calibration), and
// derives ns per tick from the two pairs. It is then checked: a third pair ~1 ms later must agree
// with the converted TSC within 2 us plus 0.1 % of the elapsed time, and the rate must be plausible
// (0.1 to 10 GHz). A failed calibration is tried again, three times in all; otherwise, or when the
// counter is not invariant, or when the environment says TALLY_PROFILE_CLOCK=monotonic, every read
// is a clock_gettime(CLOCK_MONOTONIC) (vDSO, ~20 ns). Both give nanoseconds on CLOCK_MONOTONIC's
// time base, so times taken before and after the calibration compare.
//
// A test clock (tally_testing_set_clock) overrides both whenever it is set, so profiler tests are
// deterministic. Everything here is async-signal-safe after initialisation (the timer mode reads
// the clock from its signal handler).

#include "core/clock.h"
#include "core/env.h"
#include "tally_runtime_testing.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define TALLY_HAVE_TSC 1
#else
#define TALLY_HAVE_TSC 0
#endif

_Atomic(tally_testing_clock_t) tally_test_clock;
tally_tsc_conversion tally_tsc;  // written once by init_clock, before tally_use_tsc is set
_Atomic int32_t tally_use_tsc;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

uint64_t tally_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if TALLY_HAVE_TSC
static int tsc_is_invariant(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x80000007u) {
        return 0;
    }
    if (!__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx)) {
        return 0;
    }
    return (edx >> 8) & 1;
}

// Whether Linux times itself with the TSC. The kernel checks the counters of all CPUs against
// each other at boot and while it runs, and moves off "tsc" when they disagree (a VM whose vCPUs'
// counters drift, a TSC halted in deep sleep): a clock it has given up on must not time slot
// switches that migrate between CPUs. Where the file cannot be read, the CPUID bit decides alone.
static int kernel_trusts_tsc(void) {
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    if (!f) {
        return 1;
    }
    char name[32] = {0};
    int ok = fgets(name, sizeof(name), f) != NULL;
    fclose(f);
    return !ok || strcmp(name, "tsc\n") == 0 || strcmp(name, "tsc") == 0;
}

// A pair whose bracket is wider than this (the thread was preempted in every try) cannot anchor a
// rate: calibration then tries again, and gives up on the TSC after a few failures.
#define TALLY_TSC_MAX_BRACKET_NS 20000u

// One (monotonic, tsc) pair: the TSC read between two clock reads, of the tightest of 5 tries;
// the pair's time is the midpoint of its bracket. Returns the bracket's width.
static uint64_t read_pair(uint64_t *ns, uint64_t *ticks) {
    uint64_t best = UINT64_MAX;
    *ns = 0;
    *ticks = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t a = tally_monotonic_ns();
        uint64_t t = __rdtsc();
        uint64_t b = tally_monotonic_ns();
        if (b - a < best) {
            best = b - a;
            *ns = a + (b - a) / 2;
            *ticks = t;
        }
    }
    return best;
}

static uint64_t tsc_to_ns(uint64_t ticks) {
    return tally_tsc_ticks_to_ns(ticks);
}

static void spin_until(uint64_t until) {
    while (tally_monotonic_ns() < until) {
    }
}

// One calibration: pairs 1 ms apart give the rate, a third pair 1 ms later checks it (a check
// right after the second pair would only see that pair's own error: the rate's error shows over
// time). A loaded machine can preempt a bracket in every try; such a calibration fails.
static int calibrate_once(void) {
    uint64_t ns0, t0, ns1, t1;
    if (read_pair(&ns0, &t0) > TALLY_TSC_MAX_BRACKET_NS) {
        return 0;
    }
    spin_until(ns0 + 1000000u);
    if (read_pair(&ns1, &t1) > TALLY_TSC_MAX_BRACKET_NS) {
        return 0;
    }
    if (t1 <= t0 || ns1 <= ns0) {
        return 0;
    }
    double ns_per_tick = (double)(ns1 - ns0) / (double)(t1 - t0);
    if (ns_per_tick < 0.1 || ns_per_tick > 10.0) {
        return 0;
    }
    tally_tsc.base_tsc = t1;
    tally_tsc.base_ns = ns1;
    tally_tsc.mult = (uint64_t)(ns_per_tick * 4294967296.0 + 0.5);
    // Check the conversion against one more pair, 1 ms on.
    uint64_t ns2, t2;
    spin_until(ns1 + 1000000u);
    if (read_pair(&ns2, &t2) > TALLY_TSC_MAX_BRACKET_NS) {
        return 0;
    }
    uint64_t converted = tsc_to_ns(t2);
    uint64_t err = converted > ns2 ? converted - ns2 : ns2 - converted;
    uint64_t elapsed = ns2 - ns0;
    return err <= 2000u + elapsed / 1000u;
}

static int calibrate(void) {
    for (int attempt = 0; attempt < 3; attempt++) {
        if (calibrate_once()) {
            return 1;
        }
    }
    return 0;
}
#endif

static void init_clock(void) {
#if TALLY_HAVE_TSC
    static const char *const words[] = {"tsc", "monotonic"};
    int forced_monotonic = tally_env_choice("TALLY_PROFILE_CLOCK", words, 2, 0,
                                            "tsc, the default (where the kernel trusts it)") == 1;
    if (!forced_monotonic && tsc_is_invariant() && kernel_trusts_tsc() && calibrate()) {
        atomic_store_explicit(&tally_use_tsc, 1, memory_order_release);
    }
#endif
}

void tally_clock_init(void) {
    pthread_once(&init_once, init_clock);
}

const char *tally_clock_name(void) {
    if (atomic_load_explicit(&tally_test_clock, memory_order_relaxed)) {
        return "test clock";
    }
    return atomic_load_explicit(&tally_use_tsc, memory_order_acquire) ? "tsc" : "clock_gettime";
}

void tally_testing_set_clock(tally_testing_clock_t clock) {
    atomic_store(&tally_test_clock, clock);
}

uint64_t tally_testing_now_ns(void) {
    return tally_now_ns();
}
