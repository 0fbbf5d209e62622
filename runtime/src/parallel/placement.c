// The rule: the caller of a parallel loop whose last run took at least 40 us, waking a worker
// that went to sleep on the caller's own core, first narrows the worker's affinity to leave that
// core out; the worker widens it back to what it was before it next sleeps.
//
// Why: the caller wakes a worker and runs its own share of the loop on its core. If the kernel
// places the woken worker on that same core, the two take turns on one core while another is
// idle, and the loop runs serially. The kernel may do so: on the 2-vCPU KVM guest (Linux 6.18) of
// bench/RESULTS.md a woken thread went back to the core it had slept on, the caller's, run after
// run with the other core idle, and stayed there for hundreds of runs. escape_f64 at scale 1
// (halide21_bench: one parallel loop of 80 us) then took 0.13-0.17 ms a run instead of 0.07-0.09
// in 6 processes of 12; steered, in none of 12.
//
// Why only for loops that ran 40 us or more: the move is not free. On the same guest, narrowing
// took 6 us of the caller's time, and a thread woken onto the other, idle, vCPU started 20-45 us
// later, where one woken onto the waker's core ran within the waker's wake-up call. Steering every
// loop made the second run of the corpus's small parallel pipelines 1.2-1.7x slower
// (halide21_bench scale 1: rdom_scan's from 13-30 us to 37-63 us); a loop that runs serially for
// longer than the move (6 us and 30 us) gains. A loop's length is its last run's, kept per task
// function in a small table, and only from its second run on: a first run pays for cold memory
// and a worker's start, so its length says little (steering demosaic's second run after its first
// had made that run 1.34-1.39x Halide 21's instead of 0.89-0.93x). So a loop's first two runs
// are never steered.
//
// The narrowed set keeps every other core the worker was allowed, so a user's or a cgroup's
// affinity still holds, and a worker allowed only the caller's core is left as it is. Only a
// worker that slept on its waker's core costs anything.
//
// The second rule, for async tasks: the caller of a group that hands a blocking task to a task
// thread which is asleep (a fork of a producer and a consumer, say) first narrows that thread's
// affinity to the caller's own core; the task thread widens it back as soon as it wakes. Why: the
// caller goes on to run a task of its own and soon waits for the task thread (the consumer for
// the producer's first rows). Woken onto the other, idle, vCPU of the same guest the task thread
// started 35-40 us after the wake-up call (sched_switch traces), and the two then handed rows to
// each other across cores, each hand-over a contended pool lock and a futex system call; woken
// onto the caller's core, it runs as soon as the caller waits, and the two take turns there until
// the kernel spreads them. async_store (halide21_bench, the second run after 2 ms asleep):
// scale 1, 33-50 us against 23-116 us unpulled (bimodal: the slow mode in 8 processes of 12);
// scale 8, 109-139 us against 127-1246 us; async_fork, whose tasks do not wait for each other,
// unchanged. The task thread's affinity is the caller's core alone only from the wake-up call to
// its first instructions, so a long task is spread by the kernel as before.
//
// TALLY_NO_WORKER_STEERING=1 leaves placement to the kernel, for both rules
// (docs/environment.md).

#define _GNU_SOURCE  // cpu_set_t, sched_getcpu, sched_setaffinity, syscall
#include "parallel/placement.h"
#include "tally_runtime_testing.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

_Static_assert(sizeof(cpu_set_t) == sizeof(((tally_placement *)0)->saved),
               "tally_placement.saved holds a cpu_set_t");

// A loop whose last run took less is not steered.
#define TALLY_STEER_MIN_LOOP_NS 40000u

// 1 when steering is on, 0 when off, -1 before TALLY_NO_WORKER_STEERING is read (when the first
// worker starts) or a test sets it.
static _Atomic int32_t steering = -1;

// The last run's length of recent loops, by task function: direct-mapped, a slot taken by the
// latest loop that hashes to it (another loop's entry only costs a steer or a missed one).
#define TALLY_LOOP_SLOTS 64
static struct {
    _Atomic(halide_task_t) f;
    _Atomic uint64_t ns;    // its last run's length
    _Atomic uint32_t runs;  // its runs so far (at most 2: only whether it has run twice matters)
} loops[TALLY_LOOP_SLOTS];

static unsigned loop_slot(halide_task_t f) {
    uintptr_t a = (uintptr_t)f;
    return (unsigned)((a >> 4) ^ (a >> 10)) % TALLY_LOOP_SLOTS;
}

int32_t tally_testing_set_worker_steering(int32_t on) {
    int32_t was = atomic_exchange(&steering, on ? 1 : 0);
    return was < 0 ? !tally_env_flag("TALLY_NO_WORKER_STEERING") : was;
}

void tally_placement_reset(tally_placement *p) {
    p->tid = 0;
    p->cpu = -1;
    p->narrowed = 0;
}

void tally_placement_init(tally_placement *p) {
    int32_t unread = -1;
    if (atomic_load(&steering) < 0) {
        atomic_compare_exchange_strong(&steering, &unread,
                                       !tally_env_flag("TALLY_NO_WORKER_STEERING"));
    }
#if defined(__linux__)
    p->tid = (pid_t)syscall(SYS_gettid);
#endif
}

void tally_placement_before_sleep(tally_placement *p) {
#if defined(__linux__)
    if (p->narrowed) {
        // Widening never moves a thread: the core it runs on stays allowed.
        cpu_set_t saved;
        memcpy(&saved, p->saved, sizeof saved);
        (void)sched_setaffinity(0, sizeof saved, &saved);
        p->narrowed = 0;
    }
    p->cpu = sched_getcpu();
#else
    (void)p;
#endif
}

int tally_placement_worth_steering(halide_task_t f) {
    if (atomic_load_explicit(&steering, memory_order_relaxed) != 1) {
        return 0;
    }
    const unsigned s = loop_slot(f);
    return atomic_load_explicit(&loops[s].f, memory_order_relaxed) == f &&
           atomic_load_explicit(&loops[s].runs, memory_order_relaxed) >= 2 &&
           atomic_load_explicit(&loops[s].ns, memory_order_relaxed) >= TALLY_STEER_MIN_LOOP_NS;
}

void tally_placement_loop_ran(halide_task_t f, uint64_t ns) {
    const unsigned s = loop_slot(f);
    // Separate stores, not one: a reader between them may pair a loop with another's figures,
    // which only costs one steer or one missed.
    atomic_store_explicit(&loops[s].ns, ns, memory_order_relaxed);
    if (atomic_load_explicit(&loops[s].f, memory_order_relaxed) == f) {
        if (atomic_load_explicit(&loops[s].runs, memory_order_relaxed) < 2) {
            atomic_fetch_add_explicit(&loops[s].runs, 1, memory_order_relaxed);
        }
    } else {
        atomic_store_explicit(&loops[s].runs, 1, memory_order_relaxed);
        atomic_store_explicit(&loops[s].f, f, memory_order_relaxed);
    }
}

void tally_placement_steer(tally_placement *p) {
#if defined(__linux__)
    if (p->tid == 0 || p->narrowed || p->cpu < 0 || p->cpu >= CPU_SETSIZE ||
        p->cpu != sched_getcpu()) {
        return;
    }
    cpu_set_t saved;
    if (sched_getaffinity(p->tid, sizeof saved, &saved) != 0 || !CPU_ISSET(p->cpu, &saved) ||
        CPU_COUNT(&saved) < 2) {
        return;
    }
    cpu_set_t narrowed = saved;
    CPU_CLR(p->cpu, &narrowed);
    // A failure (the worker's cgroup allows none of the others) leaves it where it is.
    if (sched_setaffinity(p->tid, sizeof narrowed, &narrowed) == 0) {
        memcpy(p->saved, &saved, sizeof saved);
        p->narrowed = 1;
    }
#else
    (void)p;
#endif
}

void tally_placement_pull(tally_placement *p) {
#if defined(__linux__)
    if (atomic_load_explicit(&steering, memory_order_relaxed) != 1 || p->tid == 0 || p->narrowed) {
        return;
    }
    const int cpu = sched_getcpu();
    cpu_set_t saved;
    if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(p->tid, sizeof saved, &saved) != 0 ||
        !CPU_ISSET(cpu, &saved)) {
        return;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(p->tid, sizeof one, &one) == 0) {
        memcpy(p->saved, &saved, sizeof saved);
        p->narrowed = 1;
    }
#else
    (void)p;
#endif
}

void tally_placement_after_wake(tally_placement *p) {
#if defined(__linux__)
    if (p->narrowed) {
        cpu_set_t saved;
        memcpy(&saved, p->saved, sizeof saved);
        (void)sched_setaffinity(0, sizeof saved, &saved);
        p->narrowed = 0;
    }
#else
    (void)p;
#endif
}
