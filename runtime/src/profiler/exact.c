// The exact rule: switch-timed billing. Every slot switch, every worker context starting or
// stopping to work and every device wait reads the clock and bills the time since the context's
// previous such event to the slot it is leaving. No sampler, no rescaling: a run's slot times sum
// to its wall time by construction, and a run shorter than any sampling interval is billed as
// exactly as a long one.
//
// Wall time, not thread time: the rule is the sampling rule (sampling.c) made continuous. While
// worker contexts count (active and not suspended; A of them), each nanosecond is split evenly
// among them, so each bills 1/A of it to its slot, and the main context bills nothing; while none
// counts, the main context bills the whole nanosecond. A run's *share clock* (tally_share_clock)
// integrates these rates: worker_share = integral of [A > 0] / A, main_ns = integral of [A == 0].
// A context bills the difference of the clock between two of its events, so a switch reads the
// clock and touches only memory of its own thread; only changes of A (a task starting or ending,
// a nested loop suspending its parent), of W (a worker waiting on a device) and of the main
// context's idleness write the shared clock, under a seqlock.
//
// Threads: worker_threads = integral of [A > 0] * W, W = counted workers not waiting; a worker
// adds its difference to the slot's thread integral and its own elapsed time to the slot's busy
// time, so thread_ns / busy_ns is the average number of threads working in the run while the slot
// ran (the sampling rule's per-observation count, integrated). The main context adds its elapsed
// time, or 0 while it waits or is suspended. run_threads integrates the run's working threads
// (W, else the main context's 1 or 0) for the pipeline's average.
//
// Fixed point: worker_share counts 1/65536 ns, and a reader multiplies by the rate 2^48 / A
// instead of dividing, so splitting among A workers loses < 1/65536 ns per reading; shares are
// rounded to whole ns when the run ends (tally_exact_collect).

#include "profiler/exact.h"
#include "profiler/run.h"

#include <sched.h>

// The share clock's rate for A counted workers: 2^(32 + TALLY_SHARE_SHIFT) / A, so that a share
// is a multiplication (exact for A = 1, 2, 4, ...; within 2^-48 of dt / A otherwise).
static uint64_t rate_for(int32_t active) {
    return active > 0 ? ((uint64_t)1 << (32 + TALLY_SHARE_SHIFT)) / (uint64_t)active : 0;
}

static uint64_t share_of(uint64_t dt, uint64_t rate) {
    return (uint64_t)(((unsigned __int128)dt * rate) >> 32);
}

// A writer holds the share clock (its seq is odd): wait for it to finish. Cold: writers hold it
// for a few dozen instructions, and only when a task starts or ends.
__attribute__((noinline, cold)) static uint32_t wait_for_writer(tally_share_clock *k) {
    int spins = 0;
    uint32_t s;
    while ((s = atomic_load_explicit(&k->seq, memory_order_acquire)) & 1) {
        if (++spins > 64) {
            sched_yield();
        }
    }
    return s;
}

// The share clock at `now`. Inlined into the switch's path (tally_exact_bill): one call, no
// stores but the caller's.
__attribute__((always_inline)) static inline void read_clock(tally_instance *inst, uint64_t now,
                                                             tally_exact_point *out) {
    tally_share_clock *k = &inst->share;
    uint32_t s1, s2;
    int32_t active, working;
    uint64_t base, share, main_ns, threads, rate;
    for (;;) {
        s1 = atomic_load_explicit(&k->seq, memory_order_acquire);
        if (__builtin_expect(s1 & 1, 0)) {
            s1 = wait_for_writer(k);
        }
        active = atomic_load_explicit(&k->active, memory_order_relaxed);
        working = atomic_load_explicit(&k->working, memory_order_relaxed);
        rate = atomic_load_explicit(&k->share_rate, memory_order_relaxed);
        base = atomic_load_explicit(&k->base_ns, memory_order_relaxed);
        share = atomic_load_explicit(&k->worker_share, memory_order_relaxed);
        main_ns = atomic_load_explicit(&k->main_ns, memory_order_relaxed);
        threads = atomic_load_explicit(&k->worker_threads, memory_order_relaxed);
        // The fence orders the field loads before the second read of seq. (GCC rejects fences
        // under ThreadSanitizer, which does not model them: there a sequentially consistent load
        // stands in, as in trace.c.)
#if defined(__SANITIZE_THREAD__)
        s2 = atomic_load_explicit(&k->seq, memory_order_seq_cst);
#else
        atomic_thread_fence(memory_order_acquire);
        s2 = atomic_load_explicit(&k->seq, memory_order_relaxed);
#endif
        if (__builtin_expect(s1 == s2, 1)) {
            break;
        }
    }
    // A clock read on another core just before a writer's may be a little behind its base.
    uint64_t dt = now > base ? now - base : 0;
    out->ns = now;
    if (active > 0) {
        out->worker_share = share + share_of(dt, rate);
        out->main_ns = main_ns;
        out->worker_threads = threads + dt * (uint64_t)working;
    } else {
        out->worker_share = share;
        out->main_ns = main_ns + dt;
        out->worker_threads = threads;
    }
}

void tally_exact_read(tally_instance *inst, uint64_t now, tally_exact_point *out) {
    read_clock(inst, now, out);
}

static uint64_t diff(uint64_t later, uint64_t earlier) {
    return later > earlier ? later - earlier : 0;
}

// Bills c from its mark to p and moves the mark (the holding thread only).
__attribute__((always_inline)) static inline void bill_to(tally_context *c,
                                                          const tally_exact_point *p) {
    tally_instance *inst = c->instance;
    int32_t slot = atomic_load_explicit(&c->slot, memory_order_relaxed);
    int32_t s = slot >= 0 && slot < inst->num_acc ? slot : 0;
    if (c == &inst->main) {
        uint64_t dt = diff(p->main_ns, c->mark.main_ns);
        int idle = atomic_load_explicit(&c->waiting, memory_order_relaxed) > 0 ||
                   atomic_load_explicit(&c->suspended, memory_order_relaxed) > 0;
        c->exact[s].share += dt << TALLY_SHARE_SHIFT;
        c->exact[s].busy_ns += dt;
        c->exact[s].thread_ns += idle ? 0 : dt;
    } else if (c->exact && atomic_load_explicit(&c->active, memory_order_relaxed) &&
               atomic_load_explicit(&c->suspended, memory_order_relaxed) == 0) {
        c->exact[s].share += diff(p->worker_share, c->mark.worker_share);
        c->exact[s].busy_ns += diff(p->ns, c->mark.ns);
        c->exact[s].thread_ns += diff(p->worker_threads, c->mark.worker_threads);
    }
    c->mark = *p;
}

void tally_exact_bill(tally_context *c, uint64_t now) {
    tally_exact_point p;
    read_clock(c->instance, now, &p);
    bill_to(c, &p);
}

void tally_exact_change(tally_instance *inst, tally_context *c, uint64_t now, int32_t d_active,
                        int32_t d_working, int32_t d_main_idle, tally_context *mark_only) {
    tally_share_clock *k = &inst->share;
    // Take the write side: seq even -> odd.
    int spins = 0;
    uint32_t seq = atomic_load_explicit(&k->seq, memory_order_relaxed);
    for (;;) {
        if (!(seq & 1) && atomic_compare_exchange_weak_explicit(
                              &k->seq, &seq, seq + 1, memory_order_acquire, memory_order_relaxed)) {
            break;
        }
        if (++spins > 64) {
            sched_yield();
        }
        seq = atomic_load_explicit(&k->seq, memory_order_relaxed);
    }
    // The odd seq is seen before the new fields. (Under ThreadSanitizer, which rejects fences and
    // does not model them, a sequentially consistent read-modify-write of seq stands in.)
#if defined(__SANITIZE_THREAD__)
    atomic_fetch_add_explicit(&k->seq, 0, memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_release);
#endif

    int32_t active = atomic_load_explicit(&k->active, memory_order_relaxed);
    int32_t working = atomic_load_explicit(&k->working, memory_order_relaxed);
    int32_t main_idle = atomic_load_explicit(&k->main_idle, memory_order_relaxed);
    uint64_t base = atomic_load_explicit(&k->base_ns, memory_order_relaxed);
    uint64_t dt = now > base ? now - base : 0;
    tally_exact_point p;
    p.ns = now > base ? now : base;
    p.worker_share = atomic_load_explicit(&k->worker_share, memory_order_relaxed);
    p.main_ns = atomic_load_explicit(&k->main_ns, memory_order_relaxed);
    p.worker_threads = atomic_load_explicit(&k->worker_threads, memory_order_relaxed);
    uint64_t run_threads = atomic_load_explicit(&k->run_threads, memory_order_relaxed);
    if (active > 0) {
        p.worker_share += share_of(dt, atomic_load_explicit(&k->share_rate, memory_order_relaxed));
        p.worker_threads += dt * (uint64_t)working;
        run_threads += dt * (uint64_t)working;
    } else {
        p.main_ns += dt;
        run_threads += main_idle > 0 ? 0 : dt;
    }
    p.ns = now;
    if (c) {
        bill_to(c, &p);
    }
    if (mark_only) {
        mark_only->mark = p;
    }
    atomic_store_explicit(&k->base_ns, now > base ? now : base, memory_order_relaxed);
    atomic_store_explicit(&k->worker_share, p.worker_share, memory_order_relaxed);
    atomic_store_explicit(&k->main_ns, p.main_ns, memory_order_relaxed);
    atomic_store_explicit(&k->worker_threads, p.worker_threads, memory_order_relaxed);
    atomic_store_explicit(&k->run_threads, run_threads, memory_order_relaxed);
    atomic_store_explicit(&k->active, active + d_active, memory_order_relaxed);
    atomic_store_explicit(&k->share_rate, rate_for(active + d_active), memory_order_relaxed);
    atomic_store_explicit(&k->working, working + d_working, memory_order_relaxed);
    atomic_store_explicit(&k->main_idle, main_idle + d_main_idle, memory_order_relaxed);
    atomic_store_explicit(&k->seq, seq + 2, memory_order_release);
}

static void collect_context(tally_instance *inst, const tally_context *c) {
    if (!c->exact) {
        return;
    }
    for (int32_t s = 0; s < inst->num_acc; s++) {
        inst->acc[s].time_ns += c->exact[s].share;  // still fixed point; see below
        inst->acc[s].busy_ns += c->exact[s].busy_ns;
        inst->acc[s].thread_ns += c->exact[s].thread_ns;
    }
}

void tally_exact_collect(tally_instance *inst) {
    collect_context(inst, &inst->main);
    int32_t hw = atomic_load_explicit(&inst->workers_high_water, memory_order_acquire);
    for (int32_t i = 0; i < hw; i++) {
        collect_context(inst, &inst->workers[i]);
    }
    for (const tally_context *c = atomic_load_explicit(&inst->extra_head, memory_order_acquire); c;
         c = atomic_load_explicit(&c->next_extra, memory_order_acquire)) {
        collect_context(inst, c);
    }
    const uint64_t half = (uint64_t)1 << (TALLY_SHARE_SHIFT - 1);
    for (int32_t s = 0; s < inst->num_acc; s++) {
        inst->acc[s].time_ns = (inst->acc[s].time_ns + half) >> TALLY_SHARE_SHIFT;
    }
}
