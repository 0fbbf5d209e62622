/* A plain-C program that links the runtime alone: it simulates a profiled pipeline whose
 * generated code hits a failed assertion, ends the run on the error path and exits with an error.
 * ProfilerExitTest runs it and checks that the report still appears at exit. Being C11 with
 * -pedantic, it also proves the header and the runtime need no C++. Usage:
 *   tally_runtime_exit_child fail|ok|timer|none|interval|threads [N]|first_loop|env|written
 * "threads N" runs a parallel loop and prints the most tasks seen running at once; each task
 * first waits until N tasks have been seen running at once (giving up, for good, once 10 s have
 * passed: a deadlock guard), so that a pool with N threads shows them whatever the load.
 * "first_loop" prints how many times the runtime had counted the cores before the process's first
 * parallel loop and after it, the pool's thread count and sysconf's count of online cores.
 * "env" prints, a line each, what the runtime settled from the environment, then ends a run so
 * that the exports the environment asks for are written. "written" is "ok", then
 * tally_profiler_write_exit_outputs, whose result it prints and exits with (0 or 1). */
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_ms(uint64_t ms) {
    uint64_t start = now_ns();
    volatile double x = 1.0;
    while (now_ns() - start < ms * 1000000u) {
        x = x * 1.0000001 + 1e-9;
    }
}

static atomic_int running_tasks;
static atomic_int max_running_tasks;
static int wanted_concurrency = 1;
static uint64_t give_up_ns;
static atomic_int gave_up;

static int32_t spinning_task(void *user_context, int32_t idx, uint8_t *closure) {
    (void)user_context;
    (void)idx;
    (void)closure;
    int now = atomic_fetch_add(&running_tasks, 1) + 1;
    int prev = atomic_load(&max_running_tasks);
    while (now > prev && !atomic_compare_exchange_weak(&max_running_tasks, &prev, now)) {
    }
    while (atomic_load(&max_running_tasks) < wanted_concurrency && !atomic_load(&gave_up)) {
        if (now_ns() > give_up_ns) {
            atomic_store(&gave_up, 1);
        }
    }
    spin_ms(2);
    atomic_fetch_sub(&running_tasks, 1);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "fail";
    if (strcmp(mode, "none") == 0) {
        return 0; /* no pipeline ran: no report */
    }
    if (strcmp(mode, "threads") == 0) {
        wanted_concurrency = argc > 2 ? atoi(argv[2]) : 1;
        give_up_ns = now_ns() + 10000000000u;
        if (halide_do_par_for(NULL, spinning_task, 0, 64, NULL) != 0) {
            return 3;
        }
        printf("max_concurrency=%d\n", atomic_load(&max_running_tasks));
        return 0;
    }
    if (strcmp(mode, "first_loop") == 0) {
        const long long before = (long long)tally_testing_core_counts();
        wanted_concurrency = 1;
        give_up_ns = now_ns() + 10000000000u;
        if (halide_do_par_for(NULL, spinning_task, 0, 8, NULL) != 0) {
            return 3;
        }
        printf("core_counts_before=%lld\ncore_counts_after=%lld\nthreads=%d\ncores=%ld\n", before,
               (long long)tally_testing_core_counts(), (int)tally_set_num_threads(0),
               sysconf(_SC_NPROCESSORS_ONLN));
        return 0;
    }
    if (strcmp(mode, "env") == 0) {
        tally_malloc_cache_stats cache;
        tally_malloc_cache_get_stats(&cache);
        void *block = halide_malloc(NULL, 64);  // fails if TALLY_FAULT armed malloc
        printf("mode=%s\ninterval_us=%u\nthreads=%d\ncores=%ld\nmalloc_cache_limit=%llu\n"
               "clock=%s\nmalloc=%s\nfaults=%lld\n",
               tally_profiler_mode_name(tally_profiler_get_default_mode()),
               (unsigned)tally_profiler_get_interval_us(), (int)tally_set_num_threads(0),
               sysconf(_SC_NPROCESSORS_ONLN), (unsigned long long)cache.limit_bytes,
               tally_profiler_clock_name(), block ? "ok" : "failed",
               (long long)tally_testing_faults_injected());
        halide_free(NULL, block);
        mode = "ok";
    }
    static const char *const names[] = {"overhead", "producer", "consumer",
                                        "input (copy to device)", "consumer (copy to host)"};
    static const int32_t kinds[] = {TALLY_SLOT_FUNC, TALLY_SLOT_FUNC, TALLY_SLOT_FUNC,
                                    TALLY_SLOT_COPY_TO_DEVICE, TALLY_SLOT_COPY_TO_HOST};
    int32_t flags = strcmp(mode, "timer") == 0 ? TALLY_PROFILER_FLAG_TIMER : 0;
    void *inst = tally_profiler_start(NULL, "failing_pipeline", "host-profile", 5, names, kinds,
                                      NULL, flags);
    if (!inst) {
        return 2;
    }
    tally_profiler_set_current(inst, 1);
    tally_profiler_memory_allocate(inst, 1, TALLY_MEMORY_HEAP, 4096);
    spin_ms(20);
    tally_profiler_set_current(inst, 2);
    spin_ms(10);
    int32_t result = 0;
    if (strcmp(mode, "fail") == 0) {
        /* What generated code does when an assertion fails: call the error helper, then leave
         * through the exit block, which frees and ends the run. */
        result = halide_error_buffer_argument_is_null(NULL, "input");
    }
    tally_profiler_memory_free(inst, 1, TALLY_MEMORY_HEAP, 4096);
    if (strcmp(mode, "interval") == 0) {
        printf("interval_us=%u\n", (unsigned)tally_profiler_get_interval_us());
    }
    tally_profiler_end(NULL, inst);
    if (strcmp(mode, "written") == 0) {
        int32_t written = tally_profiler_write_exit_outputs(NULL);
        printf("write_exit_outputs=%s\n", tally_error_code_name(written));
        return written != 0 ? 1 : 0;
    }
    return result != 0 ? 1 : 0;
}
