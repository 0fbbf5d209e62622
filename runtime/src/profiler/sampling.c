// The sampling rule: how one tick of real elapsed time is billed to a run's slots.
//
// For a tick of dt nanoseconds (the time since the instance's previous sample): if worker
// contexts are active, dt is split evenly among their slots and each observation records the
// number of working threads n (active workers not blocked in a device wait); otherwise dt goes to
// the main context's slot with 1 thread, or 0 while it is blocked in a device wait. Whoever holds
// the instance's sampling right calls it: the sampler thread, the timer signal handler
// (sampler_posix.c) or tally_profiler_end once the run is unregistered (profiler.c).

#include "profiler/sampling.h"
#include "profiler/run.h"

// One observation of a working context during a tick.
typedef struct observation {
    int32_t slot;
    int32_t waiting;
} observation;

#define TALLY_MAX_OBSERVATIONS 512

static int32_t observe(const tally_context *c, observation *obs, int32_t n) {
    if (n < TALLY_MAX_OBSERVATIONS && atomic_load_explicit(&c->active, memory_order_acquire) &&
        !atomic_load_explicit(&c->suspended, memory_order_acquire)) {
        obs[n].slot = atomic_load_explicit(&c->slot, memory_order_relaxed);
        obs[n].waiting = atomic_load_explicit(&c->waiting, memory_order_relaxed) > 0;
        n++;
    }
    return n;
}

// Async-signal-safe: atomics and plain stores to state the caller holds exclusively.
void tally_sample_instance(tally_instance *inst, uint64_t now) {
    if (now <= inst->last_ns) {
        return;
    }
    uint64_t dt = now - inst->last_ns;
    inst->last_ns = now;

    observation obs[TALLY_MAX_OBSERVATIONS];
    int32_t n = 0;
    int32_t hw = atomic_load_explicit(&inst->workers_high_water, memory_order_acquire);
    for (int32_t i = 0; i < hw; i++) {
        n = observe(&inst->workers[i], obs, n);
    }
    for (const tally_context *c = atomic_load_explicit(&inst->extra_head, memory_order_acquire); c;
         c = atomic_load_explicit(&c->next_extra, memory_order_acquire)) {
        n = observe(c, obs, n);
    }

    if (n == 0) {
        obs[0].slot = atomic_load_explicit(&inst->main.slot, memory_order_relaxed);
        // Halide's instrumentation suspends the main context while its thread is idle.
        obs[0].waiting = atomic_load_explicit(&inst->main.waiting, memory_order_relaxed) > 0 ||
                         atomic_load_explicit(&inst->main.suspended, memory_order_relaxed) > 0;
        n = 1;
    }
    uint64_t working = 0;
    for (int32_t i = 0; i < n; i++) {
        working += obs[i].waiting ? 0 : 1;
    }
    uint64_t share = dt / (uint64_t)n;
    uint64_t remainder = dt - share * (uint64_t)n;
    for (int32_t i = 0; i < n; i++) {
        // One-time rows are hidden slots after the pipeline's own (profiler.c).
        int32_t s = obs[i].slot >= 0 && obs[i].slot < inst->num_acc ? obs[i].slot : 0;
        inst->acc[s].time_ns += share + (i == 0 ? remainder : 0);
        inst->acc[s].samples += 1;
        inst->acc[s].thread_sum += working;
    }
    inst->ticks += 1;
    inst->tick_thread_sum += working;
}
