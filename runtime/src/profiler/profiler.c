// The profiler: pipeline registry, per-run instances, and the calls generated code makes.
//
// Two levels of state:
//  - a *pipeline* (tally_pipeline) holds totals over finished runs. Pipelines live in a global
//    registry, a list guarded by tally_registry_lock, keyed by name and slot layout. Only
//    tally_profiler_start (lookup) and tally_profiler_end (merge) touch it on the run path.
//  - an *instance* (tally_instance) is one run. Everything a run records goes into its instance
//    first, so concurrent runs of the same or different pipelines never share mutable state:
//    memory and counters are atomics (any thread of the run may update them); sampled times are
//    written only by whoever holds the instance's sampling right (sampler_posix.c hands it out).
//
// Contexts: the generated code writes "the current slot" into a context with one relaxed store
// (tally_profiler_set_current). The main thread's context is the first member of the instance,
// so the instance pointer doubles as that context. A parallel task claims a worker context from a
// per-instance pool (tally_profiler_thread_begin), so the hot path never allocates; if the pool is
// exhausted, an overflow context is allocated once and kept on a push-only list, reused by later
// tasks. A per-thread pointer ("current context", context.c) lets the device entry points find the
// run.
//
// Modes: each run has one, resolved when it starts (resolve_mode): a mode flag the caller passed
// (the target's profile_by_timer), else the process default (tally_profiler_set_default_mode,
// else TALLY_PROFILE_MODE, else TALLY_PROFILER_DEFAULT_MODE).
//  - exact: every switch of a context's slot or state reads the clock and bills the elapsed time
//    by the exact rule (exact.c); nothing samples the run and its times need no rescaling.
//  - sampling / timer: the run registers with the sampler of its mode (sampler_posix.c), which
//    bills ticks by the sampling rule (sampling.c); at the end of the run the sampled times are
//    rescaled to sum to the measured wall time.
// The switch points are the same in all modes (switch_slot, the worker begin/end, suspend and
// resume, waits); in the sampling modes they only store the new state.
//
// One-time costs (device initialisation, kernel compilation in a first run): the thread switches
// to a hidden slot after the pipeline's own (TALLY_NUM_ONE_TIME of them) for their duration, so
// they are billed like any slot in every mode and reported as rows of their own.
//
// tally_profiler_start is defined by lifetime.c, which installs the process hooks (fork, exit)
// before the first run and then calls tally_profiler_start_run here.

#include "profiler/profiler.h"
#include "core/clock.h"
#include "core/context.h"
#include "core/env.h"
#include "core/error.h"
#include "profiler/device_timeline.h"
#include "profiler/device_waits.h"
#include "profiler/exact.h"
#include "profiler/run.h"
#include "profiler/sampler_posix.h"
#include "profiler/sampling.h"
#include "profiler/trace.h"
#include "tally_runtime.h"

#include <stdlib.h>
#include <string.h>

pthread_mutex_t tally_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static tally_pipeline *registry_head, *registry_tail;

tally_pipeline *tally_registry_first_locked(void) {
    return registry_head;
}

// ---- small helpers --------------------------------------------------------------------

static void atomic_max_u64(_Atomic uint64_t *p, uint64_t v) {
    uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
    while (cur < v && !atomic_compare_exchange_weak_explicit(p, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed)) {
    }
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)malloc(n);
    if (d) {
        memcpy(d, s, n);
    }
    return d;
}

static size_t round_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

// The instance a pointer handed to the hot calls belongs to (an instance or a worker context).
static tally_instance *instance_of(void *p) {
    return p ? ((tally_context *)p)->instance : NULL;
}

// ---- registry -------------------------------------------------------------------------

static void free_pipeline(tally_pipeline *p) {
    if (!p) {
        return;
    }
    if (p->slot_names) {
        for (int32_t i = 0; i < p->num_slots; i++) {
            free(p->slot_names[i]);
        }
    }
    free(p->slot_names);
    free(p->slot_kinds);
    free(p->slot_parents);
    free(p->slots);
    free(p->name);
    free(p->target);
    free(p);
}

static int pipeline_matches(const tally_pipeline *p, const char *name, int32_t num_slots,
                            const char *const *slot_names, const int32_t *slot_kinds,
                            const int32_t *slot_parents, int32_t mode, int32_t device_flags) {
    if (p->num_slots != num_slots || p->flags != mode || p->device_flags != device_flags ||
        strcmp(p->name, name) != 0) {
        return 0;
    }
    for (int32_t i = 0; i < num_slots; i++) {
        int32_t kind = slot_kinds ? slot_kinds[i] : TALLY_SLOT_FUNC;
        int32_t parent = slot_parents ? slot_parents[i] : -1;
        if (p->slot_kinds[i] != kind || p->slot_parents[i] != parent ||
            strcmp(p->slot_names[i], slot_names[i]) != 0) {
            return 0;
        }
    }
    return 1;
}

static tally_pipeline *new_pipeline(const char *name, const char *target, int32_t num_slots,
                                    const char *const *slot_names, const int32_t *slot_kinds,
                                    const int32_t *slot_parents) {
    tally_pipeline *p = (tally_pipeline *)calloc(1, sizeof(tally_pipeline));
    if (!p) {
        return NULL;
    }
    p->num_slots = num_slots;
    p->name = dup_string(name);
    p->target = dup_string(target ? target : "");
    p->slot_names = (char **)calloc((size_t)num_slots, sizeof(char *));
    p->slot_kinds = (int32_t *)calloc((size_t)num_slots, sizeof(int32_t));
    p->slot_parents = (int32_t *)calloc((size_t)num_slots, sizeof(int32_t));
    p->slots = (tally_slot_total *)calloc((size_t)(num_slots + TALLY_NUM_ONE_TIME),
                                          sizeof(tally_slot_total));
    if (!p->name || !p->target || !p->slot_names || !p->slot_kinds || !p->slot_parents ||
        !p->slots) {
        free_pipeline(p);
        return NULL;
    }
    for (int32_t i = 0; i < num_slots; i++) {
        p->slot_kinds[i] = slot_kinds ? slot_kinds[i] : TALLY_SLOT_FUNC;
        p->slot_parents[i] = slot_parents ? slot_parents[i] : -1;
        p->slot_names[i] = dup_string(slot_names[i]);
        if (!p->slot_names[i]) {
            free_pipeline(p);
            return NULL;
        }
    }
    return p;
}

// Finds or creates the pipeline and counts one more run in flight on it. Runs of one pipeline in
// different modes are kept apart (`flags` is the run's one mode flag): their numbers mean
// different things; so are builds for different devices or timing (`device_flags`).
static tally_pipeline *acquire_pipeline(const char *name, const char *target, int32_t num_slots,
                                        const char *const *slot_names, const int32_t *slot_kinds,
                                        const int32_t *slot_parents, int32_t flags,
                                        int32_t device_flags) {
    pthread_mutex_lock(&tally_registry_lock);
    tally_pipeline *p = registry_head;
    while (p && !pipeline_matches(p, name, num_slots, slot_names, slot_kinds, slot_parents, flags,
                                  device_flags)) {
        p = p->next;
    }
    if (!p) {
        p = new_pipeline(name, target, num_slots, slot_names, slot_kinds, slot_parents);
        if (p) {
            p->device_flags = device_flags;
            if (registry_tail) {
                registry_tail->next = p;
            } else {
                registry_head = p;
            }
            registry_tail = p;
        }
    }
    if (p) {
        p->active_runs++;
        p->flags = flags;
    }
    pthread_mutex_unlock(&tally_registry_lock);
    return p;
}

// Drops a run's hold on its pipeline (registry lock held); frees orphans with no runs left.
static void release_pipeline_locked(tally_pipeline *p) {
    p->active_runs--;
    if (p->orphaned && p->active_runs == 0) {
        free_pipeline(p);
    }
}

void tally_profiler_reset(void) {
    tally_timeline_reset();  // device time billed by timestamps (device_timeline.c)
    tally_trace_clear();     // the timeline's records (trace.c)
    pthread_mutex_lock(&tally_registry_lock);
    tally_pipeline *p = registry_head;
    while (p) {
        tally_pipeline *next = p->next;
        p->next = NULL;
        if (p->active_runs == 0) {
            free_pipeline(p);
        } else {
            p->orphaned = 1;
        }
        p = next;
    }
    registry_head = registry_tail = NULL;
    pthread_mutex_unlock(&tally_registry_lock);
}

// ---- instances ------------------------------------------------------------------------

// One allocation per run: the instance, its worker context pool and its per-slot arrays.
static tally_instance *new_instance(tally_pipeline *p, int32_t num_slots, int32_t flags) {
    const int32_t num_acc = num_slots + TALLY_NUM_ONE_TIME;
    size_t off_workers = round_up(sizeof(tally_instance), TALLY_CACHE_LINE);
    size_t off_acc = off_workers + TALLY_WORKER_POOL_SIZE * sizeof(tally_context);
    size_t off_exact = round_up(off_acc + (size_t)num_acc * sizeof(tally_slot_acc), 8);
    size_t off_mem =
        round_up(off_exact + ((flags & TALLY_PROFILER_FLAG_EXACT) ? (size_t)num_acc : 0) *
                                 sizeof(tally_exact_acc),
                 8);
    size_t off_copies = round_up(off_mem + (size_t)num_slots * 2 * sizeof(tally_mem_acc), 8);
    size_t total =
        round_up(off_copies + (size_t)num_slots * sizeof(tally_copy_acc), TALLY_CACHE_LINE);
    char *block = (char *)aligned_alloc(TALLY_CACHE_LINE, total);
    if (!block) {
        return NULL;
    }
    // All-zero bytes is a valid initial value for every field, atomics included.
    memset(block, 0, total);
    tally_instance *inst = (tally_instance *)block;
    inst->workers = (tally_context *)(block + off_workers);
    inst->acc = (tally_slot_acc *)(block + off_acc);
    if (flags & TALLY_PROFILER_FLAG_EXACT) {
        inst->main.exact = (tally_exact_acc *)(block + off_exact);
    }
    inst->mem = (tally_mem_acc *)(block + off_mem);
    inst->copies = (tally_copy_acc *)(block + off_copies);
    inst->pipeline = p;
    inst->num_slots = num_slots;
    inst->num_acc = num_acc;
    inst->flags = flags;
    inst->main.instance = inst;
    inst->token = -1;
    for (int32_t i = 0; i < TALLY_WORKER_POOL_SIZE; i++) {
        inst->workers[i].instance = inst;
        inst->workers[i].is_worker = 1;
    }
    return inst;
}

static void free_instance(tally_instance *inst) {
    tally_context *c = atomic_load(&inst->extra_head);
    while (c) {
        tally_context *next = atomic_load(&c->next_extra);
        free(c->exact);
        free(c);
        c = next;
    }
    int32_t hw = atomic_load(&inst->workers_high_water);
    for (int32_t i = 0; i < hw; i++) {
        free(inst->workers[i].exact);
    }
    free(inst);
}

static void report_bad_call_once(tally_instance *inst, const char *what, int32_t slot,
                                 int32_t kind) {
    int32_t expected = 0;
    if (atomic_compare_exchange_strong(&inst->bad_call_reported, &expected, 1)) {
        tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                           "%s: slot %d / kind %d out of range for pipeline %s (%d slots); "
                           "ignored",
                           what, (int)slot, (int)kind, inst->pipeline->name, (int)inst->num_slots);
    }
}

// ---- modes ----------------------------------------------------------------------------

static _Atomic int32_t default_mode;  // a mode flag, or 0: not chosen yet

static int32_t mode_from_env(void) {
    static const char *const words[] = {"exact", "sampling", "timer"};
    static const int32_t flags[] = {TALLY_PROFILER_FLAG_EXACT, TALLY_PROFILER_FLAG_SAMPLING,
                                    TALLY_PROFILER_FLAG_TIMER};
    _Static_assert(TALLY_PROFILER_DEFAULT_MODE == TALLY_PROFILER_FLAG_EXACT,
                   "the fallback below names the default");
    return flags[tally_env_choice("TALLY_PROFILE_MODE", words, 3, 0, "exact, the default")];
}

int32_t tally_profiler_set_default_mode(int32_t mode) {
    if (mode != 0 && mode != TALLY_PROFILER_FLAG_EXACT && mode != TALLY_PROFILER_FLAG_SAMPLING &&
        mode != TALLY_PROFILER_FLAG_TIMER) {
        return tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                                  "tally_profiler_set_default_mode: %d is not a mode flag",
                                  (int)mode);
    }
    atomic_store(&default_mode, mode);
    return 0;
}

int32_t tally_profiler_get_default_mode(void) {
    int32_t mode = atomic_load(&default_mode);
    if (mode == 0) {
        int32_t expected = 0;
        atomic_compare_exchange_strong(&default_mode, &expected, mode_from_env());
        mode = atomic_load(&default_mode);
    }
    return mode;
}

// The one mode flag a run started with `flags` gets: the first the caller passed (timer before
// sampling before exact), else the default.
static int32_t resolve_mode(int32_t flags) {
    if (flags & TALLY_PROFILER_FLAG_TIMER) {
        return TALLY_PROFILER_FLAG_TIMER;
    }
    if (flags & TALLY_PROFILER_FLAG_SAMPLING) {
        return TALLY_PROFILER_FLAG_SAMPLING;
    }
    if (flags & TALLY_PROFILER_FLAG_EXACT) {
        return TALLY_PROFILER_FLAG_EXACT;
    }
    return tally_profiler_get_default_mode();
}

static int is_exact(const tally_instance *inst) {
    return (inst->flags & TALLY_PROFILER_FLAG_EXACT) != 0;
}

static void end_active_workers(tally_instance *inst, uint64_t now);

void *tally_profiler_start_run(void *user_context, const char *pipeline, const char *target,
                               int32_t num_slots, const char *const *slot_names,
                               const int32_t *slot_kinds, const int32_t *slot_parents,
                               int32_t flags) {
    if (!pipeline || num_slots < 1 || !slot_names) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "tally_profiler_start: bad arguments (pipeline %s, %d slots, slot "
                           "names %s)",
                           pipeline ? pipeline : "NULL", (int)num_slots,
                           slot_names ? "given" : "NULL");
        return NULL;
    }
    for (int32_t i = 0; i < num_slots; i++) {
        int32_t kind = slot_kinds ? slot_kinds[i] : TALLY_SLOT_FUNC;
        if (!slot_names[i] || kind < TALLY_SLOT_FUNC || kind > TALLY_SLOT_COPY_TO_HOST) {
            tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                               "tally_profiler_start: pipeline %s: slot %d has %s", pipeline,
                               (int)i, slot_names[i] ? "an unknown kind" : "a NULL name");
            return NULL;
        }
        // A copy slot's parent is a Func slot or none; a Func slot has none.
        int32_t parent = slot_parents ? slot_parents[i] : -1;
        int parent_ok = parent == -1 ||
                        (kind != TALLY_SLOT_FUNC && parent >= 0 && parent < num_slots &&
                         (slot_kinds ? slot_kinds[parent] : TALLY_SLOT_FUNC) == TALLY_SLOT_FUNC);
        if (!parent_ok) {
            tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                               "tally_profiler_start: pipeline %s: slot %d has parent %d, which "
                               "is not %s",
                               pipeline, (int)i, (int)parent,
                               kind == TALLY_SLOT_FUNC ? "-1 (a Func slot has no parent)"
                                                       : "-1 or a Func slot");
            return NULL;
        }
    }
    if ((flags & ~(int32_t)TALLY_PROFILER_START_FLAGS) ||
        TALLY_PROFILER_DEVICE_API_OF(flags) > TALLY_DEVICE_API_OPENCL) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "tally_profiler_start: pipeline %s: unknown flags 0x%x", pipeline,
                           (unsigned)flags);
        return NULL;
    }
    const int32_t pool_contexts = (flags & TALLY_PROFILER_FLAG_POOL_CONTEXTS) != 0;
    const int32_t device_flags =
        flags & (TALLY_PROFILER_FLAG_TIMESTAMPS | TALLY_PROFILER_DEVICE_API_MASK);
    flags = resolve_mode(flags & TALLY_PROFILER_MODE_FLAGS);
    tally_clock_init();
    tally_pipeline *p = acquire_pipeline(pipeline, target, num_slots, slot_names, slot_kinds,
                                         slot_parents, flags, device_flags);
    tally_instance *inst = p ? new_instance(p, num_slots, flags) : NULL;
    if (!inst) {
        if (p) {
            pthread_mutex_lock(&tally_registry_lock);
            release_pipeline_locked(p);
            pthread_mutex_unlock(&tally_registry_lock);
        }
        tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                           "tally_profiler_start: out of memory starting pipeline %s", pipeline);
        return NULL;
    }
    inst->pool_contexts = pool_contexts;
    inst->main.saved_tls = tally_get_current_context();
    inst->main_thread = tally_thread_tag();
    inst->start_ns = tally_now_ns();
    inst->last_ns = inst->start_ns;
    atomic_store_explicit(&inst->share.base_ns, inst->start_ns, memory_order_relaxed);
    inst->main.mark.ns = inst->start_ns;
    int32_t r = is_exact(inst) ? 0 : tally_sampler_register(user_context, inst);
    if (r != 0) {
        pthread_mutex_lock(&tally_registry_lock);
        release_pipeline_locked(p);
        pthread_mutex_unlock(&tally_registry_lock);
        free_instance(inst);
        return NULL;
    }
    tally_set_current_context(&inst->main);
    tally_trace_run_started(inst);
    return inst;
}

// Scales the run's slot times so they sum to `wall` exactly (the rounding remainder goes to the
// slot with the most time). Both rules bill every nanosecond between start and end already, so
// this only corrects for ticks that were lost or clipped (sampling) or for rounding the shares to
// whole nanoseconds (exact: a few ns at most); it keeps the invariant explicit.
static void rescale_to_wall(tally_instance *inst, uint64_t wall) {
    uint64_t sum = 0;
    int32_t largest = 0;
    for (int32_t s = 0; s < inst->num_acc; s++) {
        sum += inst->acc[s].time_ns;
        if (inst->acc[s].time_ns > inst->acc[largest].time_ns) {
            largest = s;
        }
    }
    if (sum == wall) {
        return;
    }
    if (sum == 0) {
        int32_t s = atomic_load_explicit(&inst->main.slot, memory_order_relaxed);
        inst->acc[s >= 0 && s < inst->num_acc ? s : 0].time_ns = wall;
        return;
    }
    uint64_t scaled_sum = 0;
    for (int32_t s = 0; s < inst->num_acc; s++) {
        inst->acc[s].time_ns = (uint64_t)((unsigned __int128)inst->acc[s].time_ns * wall / sum);
        scaled_sum += inst->acc[s].time_ns;
    }
    inst->acc[largest].time_ns += wall - scaled_sum;
}

// Runs merged into any pipeline since the process started; never reset (tally_profiler_reset
// forgets the totals, not this count).
static _Atomic uint64_t runs_finished;

uint64_t tally_profiler_runs_finished(void) {
    return atomic_load_explicit(&runs_finished, memory_order_acquire);
}

static void merge_into_pipeline_locked(tally_instance *inst, uint64_t wall) {
    tally_pipeline *p = inst->pipeline;
    const int32_t failed = atomic_load_explicit(&inst->failed, memory_order_relaxed);
    p->runs++;
    atomic_fetch_add_explicit(&runs_finished, 1, memory_order_release);
    p->total_ns += wall;
    p->ticks += inst->ticks;
    p->tick_thread_sum += inst->tick_thread_sum;
    p->run_threads_ns += atomic_load_explicit(&inst->share.run_threads, memory_order_relaxed);
    for (int32_t k = 0; k < 2; k++) {
        uint64_t peak = atomic_load(&inst->mem_peak[k]);
        if (peak > p->mem_peak[k]) {
            p->mem_peak[k] = peak;
        }
    }
    for (int32_t c = 0; c < TALLY_NUM_COUNTERS; c++) {
        p->counters[c] += atomic_load(&inst->counters[c]);
    }
    for (int32_t s = 0; s < inst->num_acc; s++) {
        tally_slot_total *t = &p->slots[s];
        t->time_ns += inst->acc[s].time_ns;
        t->samples += inst->acc[s].samples;
        t->thread_sum += inst->acc[s].thread_sum;
        t->busy_ns += inst->acc[s].busy_ns;
        t->thread_ns += inst->acc[s].thread_ns;
        if (s >= inst->num_slots) {
            continue;  // one-time rows: time only
        }
        t->copies += atomic_load(&inst->copies[s].count);
        t->copy_bytes += atomic_load(&inst->copies[s].bytes);
        for (int32_t k = 0; k < 2; k++) {
            tally_mem_acc *m = &inst->mem[s * 2 + k];
            tally_mem_total *mt = &t->mem[k];
            // A run that failed left through its error exit, which releases every allocation of
            // the run (destructors) without reporting the frees: what it still has current was
            // released. A run that succeeded reported every free, so a remainder is a leak and
            // stays visible.
            // Summed modulo 2^64, as the run's own count is (sizes the caller makes up can pass
            // 2^63; docs/reliability.md, findings 12 and 15).
            if (!failed) {
                mt->current = (int64_t)((uint64_t)mt->current + (uint64_t)atomic_load(&m->current));
            }
            uint64_t peak = atomic_load(&m->peak);
            if (peak > mt->peak) {
                mt->peak = peak;
            }
            mt->num_allocs += atomic_load(&m->num_allocs);
            mt->total_bytes += atomic_load(&m->total_bytes);
        }
    }
}

int32_t tally_profiler_end(void *user_context, void *instance) {
    return tally_profiler_end_run(user_context, instance, 1);
}

int32_t tally_profiler_end_run(void *user_context, void *instance, int32_t count) {
    (void)user_context;
    tally_instance *inst = (tally_instance *)instance;
    if (!inst) {
        return 0;
    }
    uint64_t now = tally_now_ns();
    if (is_exact(inst)) {
        // Contexts of tasks that never ended bill up to now too (their time is the run's).
        end_active_workers(inst, now);
        // A change of nothing: bills the main context and brings the run's integrals to now.
        tally_exact_change(inst, &inst->main, now, 0, 0, 0, NULL);
        tally_exact_collect(inst);
    } else {
        // After this, no sampler touches the instance: its sampling state is ours.
        tally_sampler_unregister(inst);
        tally_sample_instance(inst, now);
    }
    // profile_timestamps: bill the device intervals completed by now (device_waits.c).
    tally_device_collect_completed(inst->pipeline);
    uint64_t wall = now > inst->start_ns ? now - inst->start_ns : 0;
    rescale_to_wall(inst, wall);

    pthread_mutex_lock(&tally_registry_lock);
    if (count) {
        merge_into_pipeline_locked(inst, wall);
    }
    release_pipeline_locked(inst->pipeline);
    pthread_mutex_unlock(&tally_registry_lock);

    // Give the thread back the context it had before this run (a worker context of this run left
    // current by a task that never ended counts as this run's too).
    tally_context *current = tally_get_current_context();
    if (current && current->instance == inst) {
        tally_set_current_context(inst->main.saved_tls);
    }
    tally_trace_context();
    free_instance(inst);
    return 0;
}

// ---- hot calls ------------------------------------------------------------------------
//
// State changes of a context. In exact mode each bills the context up to now first (and, when it
// changes what counts on the run's share clock, changes it in the same step); in the sampling
// modes they only store the state the sampler reads.

__attribute__((always_inline)) static inline void switch_slot(tally_context *ctx, int32_t slot) {
    tally_trace_switch(ctx, slot);
    // Setting the slot a context is in bills nothing: the time since its last event still goes
    // to that slot at its next one. (Parallel tasks set their loop's slot again on entry.)
    if (is_exact(ctx->instance) && atomic_load_explicit(&ctx->slot, memory_order_relaxed) != slot) {
        tally_exact_bill(ctx, tally_now_ns());
    }
    atomic_store_explicit(&ctx->slot, slot, memory_order_relaxed);
}

// Whether a worker context counts on the share clock (exact mode), and whether it works.
static int worker_counts(const tally_context *c) {
    return atomic_load_explicit(&c->active, memory_order_relaxed) &&
           atomic_load_explicit(&c->suspended, memory_order_relaxed) == 0;
}

static int worker_works(const tally_context *c) {
    return worker_counts(c) && atomic_load_explicit(&c->waiting, memory_order_relaxed) == 0;
}

void tally_profiler_suspend(tally_context *c) {
    tally_instance *inst = c->instance;
    if (is_exact(inst)) {
        if (c == &inst->main) {
            tally_exact_change(inst, c, tally_now_ns(), 0, 0, 1, NULL);
        } else if (worker_counts(c)) {
            tally_exact_change(inst, c, tally_now_ns(), -1, worker_works(c) ? -1 : 0, 0, NULL);
        }
    }
    atomic_fetch_add_explicit(&c->suspended, 1, memory_order_release);
}

void tally_profiler_resume(tally_context *c) {
    tally_instance *inst = c->instance;
    int32_t s = atomic_load_explicit(&c->suspended, memory_order_relaxed);
    if (s <= 0) {
        return;
    }
    if (is_exact(inst)) {
        if (c == &inst->main) {
            tally_exact_change(inst, c, tally_now_ns(), 0, 0, -1, NULL);
        } else if (s == 1 && atomic_load_explicit(&c->active, memory_order_relaxed)) {
            int works = atomic_load_explicit(&c->waiting, memory_order_relaxed) == 0;
            tally_exact_change(inst, c, tally_now_ns(), 1, works, 0, NULL);
        }
    }
    // Only the thread holding the context changes its suspension: no race with another resume.
    atomic_store_explicit(&c->suspended, s - 1, memory_order_release);
}

void *tally_profiler_current_instance(void) {
    tally_context *ctx = tally_get_current_context();
    return ctx ? (void *)ctx->instance : NULL;
}

void *tally_profiler_current_context(void) {
    return tally_get_current_context();
}

void tally_profiler_set_current(void *context, int32_t slot) {
    tally_context *ctx = (tally_context *)context;
    if (ctx) {
        switch_slot(ctx, slot);
        tally_set_current_context(ctx);
    }
}

void tally_profiler_switch_slot(tally_context *ctx, int32_t slot) {
    switch_slot(ctx, slot);
}

static tally_context *claim_worker_context(tally_instance *inst) {
    for (int32_t i = 0; i < TALLY_WORKER_POOL_SIZE; i++) {
        tally_context *c = &inst->workers[i];
        int32_t expected = 0;
        if (atomic_load_explicit(&c->claimed, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&c->claimed, &expected, 1, memory_order_acquire,
                                                    memory_order_relaxed)) {
            // Publish the high-water mark before the context can become active, so the sampler
            // scanning up to it sees this context.
            int32_t hw = atomic_load_explicit(&inst->workers_high_water, memory_order_relaxed);
            while (hw < i + 1 && !atomic_compare_exchange_weak_explicit(
                                     &inst->workers_high_water, &hw, i + 1, memory_order_release,
                                     memory_order_relaxed)) {
            }
            return c;
        }
    }
    for (tally_context *c = atomic_load_explicit(&inst->extra_head, memory_order_acquire); c;
         c = atomic_load_explicit(&c->next_extra, memory_order_acquire)) {
        int32_t expected = 0;
        if (atomic_compare_exchange_strong_explicit(&c->claimed, &expected, 1, memory_order_acquire,
                                                    memory_order_relaxed)) {
            return c;
        }
    }
    // Pool exhausted: allocate an overflow context, kept (and reused) until the run ends.
    tally_context *c = (tally_context *)aligned_alloc(TALLY_CACHE_LINE, sizeof(tally_context));
    if (!c) {
        return NULL;
    }
    memset(c, 0, sizeof(*c));
    c->instance = inst;
    c->is_worker = 1;
    atomic_store_explicit(&c->claimed, 1, memory_order_relaxed);
    tally_context *head = atomic_load_explicit(&inst->extra_head, memory_order_relaxed);
    do {
        atomic_store_explicit(&c->next_extra, head, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(&inst->extra_head, &head, c,
                                                    memory_order_release, memory_order_relaxed));
    return c;
}

static void release_worker_context(tally_context *c) {
    c->parent = NULL;
    c->saved_tls = NULL;
    c->owner = NULL;
    atomic_store_explicit(&c->claimed, 0, memory_order_release);
}

// ---- lingering worker contexts ------------------------------------------------------------
//
// A parallel loop's tasks are short (a row: microseconds) and a pool thread runs many of them in
// a row. Ending a worker context and claiming the next one costs shared writes per task: the
// claim (a compare-and-swap on the instance's context pool, which the other threads' claims
// contend for) and, in exact mode, two changes of the run's share clock (seqlock writes the other
// threads' contexts then re-read) and two clock reads; most of a task's profiling cost. So a pool
// task's context (one not nested in another) is not ended when its task ends: it *lingers*,
// still active (counting, in exact mode), in the thread's tls_lingering, and the thread's next
// task of the same run takes it back as it is (no clock read, no shared write). The time between
// the two tasks, the pool's own work of handing out the next one, goes to the slot the context
// was in, the loop's (a sampler tick in that gap finds it there too).
// The pool ends a lingering context (tally_profiler_linger_flush) before its thread does
// anything else: before it waits for work, before it reports the last task of the run's work it
// took as finished (so a run never ends with a context of it lingering on another thread), when
// a caller has no more iterations of its own loop to run, and before it runs a task group's unit.
// Only tasks the pool runs may linger (tally_linger_ok): the pool is what ends them.

static _Thread_local tally_context *tls_lingering TALLY_HOT_TLS;
_Thread_local int32_t tally_linger_ok TALLY_HOT_TLS __attribute__((visibility("hidden")));

// Ends worker context `c` (exact mode: bills it up to now and stops it counting) and releases it;
// with `restore`, gives the thread back the context it had before `c`.
static void end_worker_context(tally_context *c, int restore);

void tally_profiler_linger_flush(void) {
    tally_context *c = tls_lingering;
    if (c) {
        tls_lingering = NULL;
        end_worker_context(c, 0);
    }
}

int32_t tally_profiler_linger_keep(const tally_context *next) {
    const tally_context *c = tls_lingering;
    if (c && !(next && next->instance == c->instance)) {
        tally_profiler_linger_flush();
    }
    return tls_lingering != NULL;
}

void *tally_profiler_thread_begin(void *instance) {
    tally_instance *inst = instance_of(instance);
    if (!inst) {
        return NULL;
    }
    tally_context *l = tls_lingering;
    if (l) {
        tally_context *prev = tally_get_current_context();
        if (l->instance == inst && !(prev && prev->is_worker && prev->instance == inst)) {
            // The thread's previous task of this run left it counting: take it back as it is.
            tls_lingering = NULL;
            l->saved_tls = prev;
            l->owner = NULL;
            switch_slot(l, atomic_load_explicit(&inst->main.slot, memory_order_relaxed));
            tally_set_current_context(l);
            tally_trace_context();
            return l;
        }
        tally_profiler_linger_flush();
    }
    tally_context *c = claim_worker_context(inst);
    if (!c) {
        return NULL;
    }
    if (is_exact(inst) && !c->exact) {
        // First claim of this context in the run: its accumulators, kept until the run ends.
        c->exact = (tally_exact_acc *)calloc((size_t)inst->num_acc, sizeof(tally_exact_acc));
        if (!c->exact) {
            release_worker_context(c);
            return NULL;
        }
    }
    tally_context *prev = tally_get_current_context();
    c->saved_tls = prev;
    c->parent = (prev && prev->is_worker && prev->instance == inst) ? prev : NULL;
    tally_context *from = c->parent ? c->parent : &inst->main;
    atomic_store_explicit(&c->slot, atomic_load_explicit(&from->slot, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&c->waiting, 0, memory_order_relaxed);
    atomic_store_explicit(&c->suspended, 0, memory_order_relaxed);
    c->owner = NULL;
    if (is_exact(inst)) {
        // The new context counts from now on; a parent it nests in stops counting (only the
        // innermost context of a thread works).
        uint64_t now = tally_now_ns();
        int parent_counted = c->parent && worker_counts(c->parent);
        int parent_works = c->parent && worker_works(c->parent);
        // The new context is not active yet: the change only sets its mark.
        tally_exact_change(inst, c->parent, now, parent_counted ? 0 : 1, parent_works ? 0 : 1, 0,
                           c);
    }
    atomic_store_explicit(&c->active, 1, memory_order_release);
    if (c->parent) {
        // A nested loop ran serially inside a task: only the innermost context is working.
        atomic_fetch_add_explicit(&c->parent->suspended, 1, memory_order_release);
    }
    tally_set_current_context(c);
    tally_trace_context();
    return c;
}

void tally_profiler_thread_end(void *context) {
    tally_context *c = (tally_context *)context;
    if (!c || !c->is_worker) {
        return;
    }
    if (tally_linger_ok && !c->parent && !tls_lingering && tally_get_current_context() == c &&
        atomic_load_explicit(&c->suspended, memory_order_relaxed) == 0 &&
        atomic_load_explicit(&c->waiting, memory_order_relaxed) == 0) {
        // A pool task's own context, working: it lingers as it is until the thread's next task
        // of the run takes it back or the pool flushes it. (One Halide's code suspended, or one
        // waiting on a device, ends now.)
        tally_set_current_context(c->saved_tls);
        tally_trace_context();
        c->saved_tls = NULL;
        c->owner = NULL;
        tls_lingering = c;
        return;
    }
    end_worker_context(c, 1);
}

static void end_worker_context(tally_context *c, int restore) {
    tally_instance *inst = c->instance;
    if (is_exact(inst)) {
        // The context stops counting; the parent it nested in counts again, from now.
        uint64_t now = tally_now_ns();
        int counted = worker_counts(c);
        int works = worker_works(c);
        tally_context *parent = c->parent;
        int parent_resumes = parent &&
                             atomic_load_explicit(&parent->suspended, memory_order_relaxed) == 1 &&
                             atomic_load_explicit(&parent->active, memory_order_relaxed);
        int parent_works =
            parent_resumes && atomic_load_explicit(&parent->waiting, memory_order_relaxed) == 0;
        // A resuming parent was suspended until now: the change only moves its mark.
        tally_exact_change(inst, c, now, (parent_resumes ? 1 : 0) - (counted ? 1 : 0),
                           (parent_works ? 1 : 0) - (works ? 1 : 0), 0,
                           parent_resumes ? parent : NULL);
    }
    if (c->parent) {
        atomic_fetch_sub_explicit(&c->parent->suspended, 1, memory_order_release);
    }
    atomic_store_explicit(&c->active, 0, memory_order_release);
    if (restore) {
        tally_set_current_context(c->saved_tls);
        tally_trace_context();
    }
    release_worker_context(c);
}

// Exact mode, at the end of a run: bills the worker contexts still active (a task that returned
// without ending its context) up to `now` and stops them counting.
static void end_active_workers(tally_instance *inst, uint64_t now) {
    int32_t hw = atomic_load_explicit(&inst->workers_high_water, memory_order_acquire);
    for (int32_t i = 0; i < hw; i++) {
        tally_context *c = &inst->workers[i];
        if (worker_counts(c)) {
            tally_exact_change(inst, c, now, -1, worker_works(c) ? -1 : 0, 0, NULL);
        }
    }
    for (tally_context *c = atomic_load_explicit(&inst->extra_head, memory_order_acquire); c;
         c = atomic_load_explicit(&c->next_extra, memory_order_acquire)) {
        if (worker_counts(c)) {
            tally_exact_change(inst, c, now, -1, worker_works(c) ? -1 : 0, 0, NULL);
        }
    }
}

void tally_profiler_end_owned_contexts(tally_context *keep) {
    tally_context *c = tally_get_current_context();
    if (!c || c == keep) {
        return;  // the common case: the task left the thread as it found it
    }
    const void *me = tally_thread_tag();
    while (c && c != keep && c->is_worker && c->owner == me) {
        tally_context *next = c->saved_tls;
        tally_profiler_thread_end(c);
        c = next;
    }
}

// ---- memory and counters --------------------------------------------------------------

// The run `instance` belongs to, when slot and kind are valid for it; NULL otherwise (a bad call
// is reported once per run).
static tally_instance *memory_call_instance(void *instance, int32_t slot, int32_t kind,
                                            const char *what) {
    tally_instance *inst = instance_of(instance);
    if (inst && (!tally_valid_slot(inst, slot) ||
                 (kind != TALLY_MEMORY_HEAP && kind != TALLY_MEMORY_DEVICE))) {
        report_bad_call_once(inst, what, slot, kind);
        return NULL;
    }
    return inst;
}

void tally_profiler_memory_allocate(void *instance, int32_t slot, int32_t kind, uint64_t bytes) {
    tally_instance *inst =
        memory_call_instance(instance, slot, kind, "tally_profiler_memory_allocate");
    if (!inst) {
        return;
    }
    tally_mem_acc *m = &inst->mem[slot * 2 + kind];
    // The atomic add wraps (C11 7.17.7.5); the sum after it is taken in unsigned arithmetic so
    // that sizes no address space holds (a fuzzer's 2^62 twice) cannot overflow a signed add.
    int64_t cur = (int64_t)((uint64_t)atomic_fetch_add_explicit(&m->current, (int64_t)bytes,
                                                                memory_order_relaxed) +
                            bytes);
    if (cur > 0) {
        atomic_max_u64(&m->peak, (uint64_t)cur);
    }
    atomic_fetch_add_explicit(&m->num_allocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->total_bytes, bytes, memory_order_relaxed);
    int64_t run_cur =
        (int64_t)((uint64_t)atomic_fetch_add_explicit(&inst->mem_current[kind], (int64_t)bytes,
                                                      memory_order_relaxed) +
                  bytes);
    if (run_cur > 0) {
        atomic_max_u64(&inst->mem_peak[kind], (uint64_t)run_cur);
    }
    tally_trace_memory(inst, kind, bytes);
}

void tally_profiler_memory_free(void *instance, int32_t slot, int32_t kind, uint64_t bytes) {
    tally_instance *inst = memory_call_instance(instance, slot, kind, "tally_profiler_memory_free");
    if (!inst) {
        return;
    }
    atomic_fetch_sub_explicit(&inst->mem[slot * 2 + kind].current, (int64_t)bytes,
                              memory_order_relaxed);
    atomic_fetch_sub_explicit(&inst->mem_current[kind], (int64_t)bytes, memory_order_relaxed);
    // 0 - bytes in unsigned arithmetic: negating 2^63 bytes is defined there, not in int64_t.
    tally_trace_memory(inst, kind, 0 - bytes);
}

void tally_profiler_count(int32_t counter) {
    tally_context *ctx = tally_get_current_context();
    if (ctx) {
        atomic_fetch_add_explicit(&ctx->instance->counters[counter], 1, memory_order_relaxed);
    }
}

void tally_profiler_count_launch(void) {
    tally_profiler_count(TALLY_COUNTER_LAUNCHES);
}

void tally_profiler_count_copy(int32_t to_device, uint64_t bytes) {
    tally_context *ctx = tally_get_current_context();
    if (!ctx) {
        return;
    }
    tally_instance *inst = ctx->instance;
    int32_t count = to_device ? TALLY_COUNTER_COPIES_TO_DEVICE : TALLY_COUNTER_COPIES_TO_HOST;
    int32_t sum = to_device ? TALLY_COUNTER_COPY_TO_DEVICE_BYTES : TALLY_COUNTER_COPY_TO_HOST_BYTES;
    atomic_fetch_add_explicit(&inst->counters[count], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&inst->counters[sum], bytes, memory_order_relaxed);
    int32_t slot = atomic_load_explicit(&ctx->slot, memory_order_relaxed);
    if (tally_valid_slot(inst, slot)) {
        atomic_fetch_add_explicit(&inst->copies[slot].count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&inst->copies[slot].bytes, bytes, memory_order_relaxed);
    }
}

// Whether the calling thread may bill `ctx` (exact mode): a context's accumulators belong to
// the thread holding it. The calls that find their context through the thread's current context
// (waits, one-time sections) can meet the main context on a pool thread (the pool makes the
// caller's context current for tasks that open none); that thread leaves the billing alone.
static int holds(const tally_context *ctx) {
    return ctx != &ctx->instance->main || ctx->instance->main_thread == tally_thread_tag();
}

// A wait changes the run's working threads: in exact mode the context bills up to it first.
static void exact_wait_change(tally_context *ctx, int32_t d) {
    tally_instance *inst = ctx->instance;
    if (!is_exact(inst) || !holds(ctx)) {
        return;
    }
    int32_t w = atomic_load_explicit(&ctx->waiting, memory_order_relaxed);
    uint64_t now = tally_now_ns();
    if (ctx == &inst->main) {
        tally_exact_change(inst, ctx, now, 0, 0, d, NULL);
    } else if (worker_counts(ctx) && (w == 0 || w + d == 0)) {
        tally_exact_change(inst, ctx, now, 0, -d, 0, NULL);
    } else {
        tally_exact_bill(ctx, now);
    }
}

tally_context *tally_profiler_wait_begin(void) {
    tally_context *ctx = tally_get_current_context();
    if (ctx) {
        exact_wait_change(ctx, 1);
        atomic_fetch_add_explicit(&ctx->waiting, 1, memory_order_relaxed);
    }
    return ctx;
}

void tally_profiler_wait_end(tally_context *ctx) {
    if (ctx) {
        exact_wait_change(ctx, -1);
        atomic_fetch_sub_explicit(&ctx->waiting, 1, memory_order_relaxed);
    }
}

// ---- one-time costs -------------------------------------------------------------------

int32_t tally_profiler_one_time_begin(int32_t kind) {
    tally_context *ctx = tally_get_current_context();
    if (!ctx || kind < 0 || kind >= TALLY_NUM_ONE_TIME || !holds(ctx)) {
        return -1;
    }
    int32_t previous = atomic_load_explicit(&ctx->slot, memory_order_relaxed);
    switch_slot(ctx, ctx->instance->num_slots + kind);
    return previous;
}

void tally_profiler_one_time_end(int32_t token) {
    tally_context *ctx = tally_get_current_context();
    if (ctx && token >= 0) {
        switch_slot(ctx, token);
    }
}

// ---- stats ----------------------------------------------------------------------------

void tally_fill_pipeline_stats_locked(const tally_pipeline *p, tally_pipeline_stats *out) {
    memset(out, 0, sizeof(*out));
    out->name = p->name;
    out->target = p->target;
    out->clock = tally_pipeline_clock(p);
    out->num_slots = p->num_slots;
    out->flags = p->flags;
    out->runs = p->runs;
    out->total_ns = p->total_ns;
    out->samples = p->ticks;
    if (p->flags & TALLY_PROFILER_FLAG_EXACT) {
        out->average_threads = p->total_ns ? (double)p->run_threads_ns / (double)p->total_ns : 0.0;
    } else {
        out->average_threads = p->ticks ? (double)p->tick_thread_sum / (double)p->ticks : 0.0;
    }
    out->heap_peak = p->mem_peak[TALLY_MEMORY_HEAP];
    out->device_peak = p->mem_peak[TALLY_MEMORY_DEVICE];
    out->kernel_launches = p->counters[TALLY_COUNTER_LAUNCHES];
    out->injected_syncs = p->counters[TALLY_COUNTER_INJECTED_SYNCS];
    out->explicit_syncs = p->counters[TALLY_COUNTER_EXPLICIT_SYNCS];
    out->copies_to_device = p->counters[TALLY_COUNTER_COPIES_TO_DEVICE];
    out->copies_to_device_bytes = p->counters[TALLY_COUNTER_COPY_TO_DEVICE_BYTES];
    out->copies_to_host = p->counters[TALLY_COUNTER_COPIES_TO_HOST];
    out->copies_to_host_bytes = p->counters[TALLY_COUNTER_COPY_TO_HOST_BYTES];
}

void tally_fill_slot_stats_locked(const tally_pipeline *p, int32_t slot, tally_slot_stats *out) {
    const tally_slot_total *t = &p->slots[slot];
    memset(out, 0, sizeof(*out));
    out->name = p->slot_names[slot];
    out->slot = slot;
    out->kind = p->slot_kinds[slot];
    out->parent = p->slot_parents[slot];
    out->time_ns = t->time_ns;
    out->percent = p->total_ns ? 100.0 * (double)t->time_ns / (double)p->total_ns : 0.0;
    out->samples = t->samples;
    if (p->flags & TALLY_PROFILER_FLAG_EXACT) {
        out->average_threads = t->busy_ns ? (double)t->thread_ns / (double)t->busy_ns : 0.0;
    } else {
        out->average_threads = t->samples ? (double)t->thread_sum / (double)t->samples : 0.0;
    }
    out->copies = t->copies;
    out->copy_bytes = t->copy_bytes;
    tally_memory_stats *dst[2] = {&out->heap, &out->device};
    for (int32_t k = 0; k < 2; k++) {
        dst[k]->current = t->mem[k].current;
        dst[k]->peak = t->mem[k].peak;
        dst[k]->num_allocs = t->mem[k].num_allocs;
        dst[k]->total_bytes = t->mem[k].total_bytes;
    }
}

static tally_pipeline *find_by_name_locked(const char *name) {
    tally_pipeline *p = registry_head;
    while (p && strcmp(p->name, name) != 0) {
        p = p->next;
    }
    return p;
}

static tally_pipeline *find_by_index_locked(int32_t index) {
    if (index < 0) {
        return NULL;
    }
    tally_pipeline *p = registry_head;
    for (int32_t i = 0; p && i < index; i++) {
        p = p->next;
    }
    return p;
}

int32_t tally_profiler_num_pipelines(void) {
    pthread_mutex_lock(&tally_registry_lock);
    int32_t n = 0;
    for (tally_pipeline *p = registry_head; p; p = p->next) {
        n++;
    }
    pthread_mutex_unlock(&tally_registry_lock);
    return n;
}

static int32_t get_pipeline_stats(tally_pipeline *(*find)(const void *), const void *key,
                                  tally_pipeline_stats *out) {
    pthread_mutex_lock(&tally_registry_lock);
    tally_pipeline *p = find(key);
    if (p) {
        tally_fill_pipeline_stats_locked(p, out);
    }
    pthread_mutex_unlock(&tally_registry_lock);
    return p ? 0 : TALLY_ERROR_NOT_FOUND;
}

static int32_t get_slot_stats(tally_pipeline *(*find)(const void *), const void *key, int32_t slot,
                              tally_slot_stats *out) {
    pthread_mutex_lock(&tally_registry_lock);
    tally_pipeline *p = find(key);
    int32_t found = p && slot >= 0 && slot < p->num_slots;
    if (found) {
        tally_fill_slot_stats_locked(p, slot, out);
    }
    pthread_mutex_unlock(&tally_registry_lock);
    return found ? 0 : TALLY_ERROR_NOT_FOUND;
}

static tally_pipeline *find_name_key(const void *key) {
    return find_by_name_locked((const char *)key);
}

static tally_pipeline *find_index_key(const void *key) {
    return find_by_index_locked(*(const int32_t *)key);
}

int32_t tally_profiler_get_pipeline_stats(const char *pipeline, tally_pipeline_stats *out) {
    if (!pipeline || !out) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    return get_pipeline_stats(find_name_key, pipeline, out);
}

int32_t tally_profiler_get_pipeline_stats_by_index(int32_t index, tally_pipeline_stats *out) {
    if (!out) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    return get_pipeline_stats(find_index_key, &index, out);
}

int32_t tally_profiler_get_slot_stats(const char *pipeline, int32_t slot, tally_slot_stats *out) {
    if (!pipeline || !out) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    return get_slot_stats(find_name_key, pipeline, slot, out);
}

int32_t tally_profiler_get_slot_stats_by_index(int32_t index, int32_t slot, tally_slot_stats *out) {
    if (!out) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    return get_slot_stats(find_index_key, &index, slot, out);
}

int32_t tally_profiler_get_one_time_ns_by_index(int32_t index, int32_t kind, uint64_t *out) {
    if (!out || kind < 0 || kind >= TALLY_NUM_ONE_TIME) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    pthread_mutex_lock(&tally_registry_lock);
    tally_pipeline *p = find_by_index_locked(index);
    if (p) {
        *out = p->slots[p->num_slots + kind].time_ns;
    }
    pthread_mutex_unlock(&tally_registry_lock);
    return p ? 0 : TALLY_ERROR_NOT_FOUND;
}

const char *tally_pipeline_clock(const tally_pipeline *p) {
    return p->clock ? p->clock : tally_clock_name();
}

const char *tally_profiler_clock_name(void) {
    tally_clock_init();
    return tally_clock_name();
}

// ---- fork -----------------------------------------------------------------------------

void tally_profiler_fork_prepare(void) {
    pthread_mutex_lock(&tally_registry_lock);
}

void tally_profiler_fork_parent(void) {
    pthread_mutex_unlock(&tally_registry_lock);
}

void tally_profiler_fork_child(void) {
    pthread_mutex_unlock(&tally_registry_lock);
}

// ---- a pipeline from stats (tally_profiler_format_text) --------------------------------
//
// The inverse of tally_fill_pipeline_stats_locked and tally_fill_slot_stats_locked (keep the
// three in step): a pipeline outside the registry that holds the numbers of stats structs, so
// report.c formats numbers read elsewhere (a JSON report) with the same code as its own. Derived
// numbers come back from what they were derived from: average thread counts as thread sums
// (rounded to the nearest integer), percentages not at all (the report recomputes them).

static uint64_t thread_sum_of(double average_threads, uint64_t samples) {
    double sum = average_threads * (double)samples;
    return sum > 0 ? (uint64_t)(sum + 0.5) : 0;
}

int32_t tally_pipeline_from_stats(const tally_pipeline_stats *ps, const tally_slot_stats *slots,
                                  tally_pipeline **out) {
    *out = NULL;
    if (!ps || !ps->name || ps->num_slots < 1 || !slots) {
        return TALLY_ERROR_BAD_ARGUMENT;
    }
    const char **names = (const char **)calloc((size_t)ps->num_slots, sizeof(char *));
    int32_t *kinds = (int32_t *)calloc((size_t)ps->num_slots, sizeof(int32_t));
    int32_t *parents = (int32_t *)calloc((size_t)ps->num_slots, sizeof(int32_t));
    int ok = names && kinds && parents;
    for (int32_t s = 0; ok && s < ps->num_slots; s++) {
        names[s] = slots[s].name;
        kinds[s] = slots[s].kind;
        parents[s] = slots[s].parent;
        ok = names[s] && kinds[s] >= TALLY_SLOT_FUNC && kinds[s] <= TALLY_SLOT_COPY_TO_HOST &&
             parents[s] >= -1 && parents[s] < ps->num_slots;
    }
    int32_t allocated = names && kinds && parents;
    tally_pipeline *p =
        ok ? new_pipeline(ps->name, ps->target, ps->num_slots, names, kinds, parents) : NULL;
    free((void *)names);
    free(kinds);
    free(parents);
    if (!p) {
        return ok || !allocated ? TALLY_ERROR_OUT_OF_MEMORY : TALLY_ERROR_BAD_ARGUMENT;
    }
    p->flags = ps->flags;
    static const char *const known_clocks[] = {"tsc", "clock_gettime", "test clock"};
    p->clock = "not recorded";
    for (size_t k = 0; ps->clock && k < sizeof(known_clocks) / sizeof(known_clocks[0]); k++) {
        if (strcmp(ps->clock, known_clocks[k]) == 0) {
            p->clock = known_clocks[k];
        }
    }
    p->runs = ps->runs;
    p->total_ns = ps->total_ns;
    p->ticks = ps->samples;
    p->tick_thread_sum = thread_sum_of(ps->average_threads, ps->samples);
    // Exact mode derives average threads from thread-nanoseconds over time, not from samples.
    const int exact = (ps->flags & TALLY_PROFILER_FLAG_EXACT) != 0;
    if (exact) {
        p->run_threads_ns = thread_sum_of(ps->average_threads, ps->total_ns);
    }
    p->mem_peak[TALLY_MEMORY_HEAP] = ps->heap_peak;
    p->mem_peak[TALLY_MEMORY_DEVICE] = ps->device_peak;
    p->counters[TALLY_COUNTER_LAUNCHES] = ps->kernel_launches;
    p->counters[TALLY_COUNTER_INJECTED_SYNCS] = ps->injected_syncs;
    p->counters[TALLY_COUNTER_EXPLICIT_SYNCS] = ps->explicit_syncs;
    p->counters[TALLY_COUNTER_COPIES_TO_DEVICE] = ps->copies_to_device;
    p->counters[TALLY_COUNTER_COPY_TO_DEVICE_BYTES] = ps->copies_to_device_bytes;
    p->counters[TALLY_COUNTER_COPIES_TO_HOST] = ps->copies_to_host;
    p->counters[TALLY_COUNTER_COPY_TO_HOST_BYTES] = ps->copies_to_host_bytes;
    for (int32_t s = 0; s < ps->num_slots; s++) {
        const tally_slot_stats *in = &slots[s];
        tally_slot_total *t = &p->slots[s];
        t->time_ns = in->time_ns;
        t->samples = in->samples;
        t->thread_sum = thread_sum_of(in->average_threads, in->samples);
        if (exact) {
            // Any busy time gives the average back; a second keeps 9 decimals of it.
            t->busy_ns = in->average_threads > 0 ? 1000000000u : 0;
            t->thread_ns = thread_sum_of(in->average_threads, t->busy_ns);
        }
        t->copies = in->copies;
        t->copy_bytes = in->copy_bytes;
        const tally_memory_stats *src[2] = {&in->heap, &in->device};
        for (int32_t k = 0; k < 2; k++) {
            t->mem[k].current = src[k]->current;
            t->mem[k].peak = src[k]->peak;
            t->mem[k].num_allocs = src[k]->num_allocs;
            t->mem[k].total_bytes = src[k]->total_bytes;
        }
    }
    *out = p;
    return 0;
}

void tally_pipeline_free_unregistered(tally_pipeline *p) {
    if (p) {
        free_pipeline(p);
    }
}
