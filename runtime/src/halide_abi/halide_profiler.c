// Halide's profiler ABIs, Halide 14's and Halide 21's, served by Tally's profiler: IR that Halide
// instrumented itself (its -profile feature) runs and reports through Tally's runs, slots and
// report.
//
// Halide's model is one global state: a current func id and a count of active threads, written
// by whichever thread runs. Tally's is per thread: every thread working for a run writes its own
// context's slot (profiler.c). The mapping:
//  - halide_profiler_pipeline_start starts a Tally run whose slots are Halide's func ids
//    (Halide's id 0 is "overhead", like Tally's slot 0, and ids 1 and 2 are its halide_malloc and
//    halide_free pseudo-funcs), makes the run's main context current on the calling thread and
//    owned by it, and pushes the run on the thread's stack of Halide runs. The returned token is
//    a number the run carries; halide_profiler_set_current_func checks it.
//  - halide_profiler_pipeline_end, registered by Halide's code as a destructor and called with
//    nothing but the global state, pops that stack and ends the run.
//  - the per-thread calls find the run through the calling thread's current context, which the
//    thread pool hands to every task. halide_profiler_incr_active_threads on a thread that owns
//    its current context (the main thread outside tasks, or a pool thread back from a nested
//    call) resumes that context; anywhere else (a task's first increment) it opens a worker
//    context owned by the thread, which the pool ends when the task returns
//    (tally_profiler_end_owned_contexts). halide_profiler_decr_active_threads suspends the
//    owned context: the sampler skips it, so a thread waiting for nested tasks bills nothing.
//  - set_current_func writes the func id into the calling thread's context; memory calls go to
//    the run Halide got from halide_profiler_get_pipeline_state.
//
// Halide 21 keeps each run in memory its code allocates (`allocate profiler_instance[uint64 *
// N]`, at least 112 bytes) and passes that instance to every call instead of a token and the
// global state. The mapping is Halide 14's, with the run found through the instance:
//  - halide_profiler_instance_start writes a tally_h21_instance (below) into the instance memory:
//    a magic word, the Tally run (NULL when the start failed) and whether the run counts. The
//    run's slots are Halide's func ids; slots named "<buffer> (copy to device)" / "(copy to
//    host)" (Halide's GPU copies, named so by Halide's own report) are Tally's copy slots, under
//    the Func slot of the same name if there is one.
//  - halide_profiler_enable_instance, which Halide's code calls once past its bounds query,
//    marks the run as counting; halide_profiler_instance_end (a destructor, run on every exit)
//    ends the run, merged into the pipeline's totals only if it counts, and marks the memory ended.
//  - the 3-argument halide_profiler_set_current_func (tally_halide21_profiler_set_current_func
//    here: C cannot overload Halide 14's name) switches the calling thread's context when that
//    context works for the instance's run; the active-thread and sampling-token calls are Halide
//    14's, which find the run through the thread's context and ignore their pointer argument.
//  - memory calls take the instance where Halide 14's take the pipeline state; both are told
//    apart without guessing (memory_run).
//
// halide_profiler_pipeline_start and halide_profiler_instance_start are defined by lifetime.c (it
// installs the process hooks first) and call tally_halide_profiler_start and
// tally_halide21_profiler_start here.

#include "halide_abi/halide_profiler.h"
#include "core/context.h"
#include "core/error.h"
#include "profiler/profiler.h"
#include "profiler/run.h"
#include "tally_runtime.h"

#include <stdlib.h>
#include <string.h>

// Halide's code only passes this pointer around.
struct halide_profiler_state {
    int32_t unused;
};

static struct halide_profiler_state global_state;

// Runs started through this ABI on this thread, innermost last. Starts that failed push NULL, so
// that each end pops its own start; starts deeper than the stack are refused.
#define TALLY_HALIDE_RUN_DEPTH 16
static _Thread_local tally_instance *tls_runs[TALLY_HALIDE_RUN_DEPTH];
static _Thread_local int32_t tls_num_runs;

static _Atomic int32_t next_token;

static void push_run(tally_instance *inst) {
    tls_runs[tls_num_runs++] = inst;
}

// What Tally keeps in Halide 21's instance memory. The magic words' low 32 bits, read as an
// int32, are negative: the first word of a tally_instance is its main context's slot, which never
// is, so a pointer to either kind of state is told apart by its first word (memory_run). An
// ended instance keeps a magic of its own, so that calls after its end (or a second end) find
// no run instead of reading the memory as one.
#define TALLY_H21_MAGIC 0x54414c4ca1f0e21full
#define TALLY_H21_ENDED_MAGIC 0x54414c4ca1f0e2efull
typedef struct tally_h21_instance {
    uint64_t magic;         // TALLY_H21_MAGIC from start to end, then TALLY_H21_ENDED_MAGIC
    tally_instance *run;    // NULL when the start failed
    _Atomic int32_t count;  // set by halide_profiler_enable_instance: the run is no bounds query
} tally_h21_instance;
// Halide 21 allocates sizeof(halide_profiler_instance_state) + num_funcs *
// sizeof(halide_profiler_func_stats) bytes, 112 or more, aligned to 8 (an array of uint64).
#define TALLY_H21_INSTANCE_MIN_BYTES 112
_Static_assert(sizeof(tally_h21_instance) <= TALLY_H21_INSTANCE_MIN_BYTES,
               "Tally's state must fit the smallest instance Halide 21 allocates");
_Static_assert(_Alignof(tally_h21_instance) <= 8, "Halide 21's instance is aligned to 8");

// The Tally state in a Halide 21 instance, started or ended, or NULL when `instance` holds none.
static tally_h21_instance *h21_instance(void *instance) {
    tally_h21_instance *h = (tally_h21_instance *)instance;
    return h && (h->magic == TALLY_H21_MAGIC || h->magic == TALLY_H21_ENDED_MAGIC) ? h : NULL;
}

// Starts a run of Halide's func table for either ABI (func_names: `const char *`s stored as 64
// bits). `copy_slots`: slots named as Halide names its copies become copy slots (Halide 21).
// NULL after reporting an error.
static tally_instance *start_halide_run(void *user_context, const char *what, const char *target,
                                        const char *pipeline_name, int32_t num_funcs,
                                        const uint64_t *func_names, int copy_slots) {
    if (!pipeline_name || num_funcs < 1 || !func_names) {
        tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                           "%s: bad arguments (pipeline %s, %d funcs, func names %s)", what,
                           pipeline_name ? pipeline_name : "NULL", (int)num_funcs,
                           func_names ? "given" : "NULL");
        return NULL;
    }
    // Names, kinds and parents: on the stack for the usual sizes.
    enum { STACK_SLOTS = 64 };
    const char *stack_names[STACK_SLOTS];
    int32_t stack_kinds[STACK_SLOTS], stack_parents[STACK_SLOTS];
    const char **names = stack_names;
    int32_t *kinds = stack_kinds, *parents = stack_parents;
    void *heap = NULL;
    if (num_funcs > STACK_SLOTS) {
        heap = malloc((size_t)num_funcs * (sizeof(const char *) + 2 * sizeof(int32_t)));
        if (!heap) {
            tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                               "%s: out of memory starting pipeline %s", what, pipeline_name);
            return NULL;
        }
        names = (const char **)heap;
        kinds = (int32_t *)(names + num_funcs);
        parents = kinds + num_funcs;
    }
    static const char *const copy_suffix[2] = {" (copy to device)", " (copy to host)"};
    for (int32_t i = 0; i < num_funcs; i++) {
        names[i] = (const char *)(uintptr_t)func_names[i];
        kinds[i] = TALLY_SLOT_FUNC;
        parents[i] = -1;
        size_t n = names[i] ? strlen(names[i]) : 0;
        for (int k = 0; k < 2 && copy_slots; k++) {
            size_t m = strlen(copy_suffix[k]);
            if (n > m && strcmp(names[i] + n - m, copy_suffix[k]) == 0) {
                kinds[i] = k == 0 ? TALLY_SLOT_COPY_TO_DEVICE : TALLY_SLOT_COPY_TO_HOST;
            }
        }
    }
    // A copy slot belongs to the Func slot that has its buffer's name, when there is one.
    for (int32_t i = 0; i < num_funcs && copy_slots; i++) {
        if (kinds[i] == TALLY_SLOT_FUNC) {
            continue;
        }
        size_t owner =
            strlen(names[i]) - strlen(copy_suffix[kinds[i] == TALLY_SLOT_COPY_TO_DEVICE ? 0 : 1]);
        for (int32_t j = 0; j < num_funcs; j++) {
            if (kinds[j] == TALLY_SLOT_FUNC && names[j] && strlen(names[j]) == owner &&
                strncmp(names[j], names[i], owner) == 0) {
                parents[i] = j;
                break;
            }
        }
    }
    tally_instance *inst = (tally_instance *)tally_profiler_start_run(
        user_context, pipeline_name, target, num_funcs, names, copy_slots ? kinds : NULL,
        copy_slots ? parents : NULL, 0);
    free(heap);
    if (!inst) {
        return NULL;  // reported by tally_profiler_start_run
    }
    inst->token = atomic_fetch_add_explicit(&next_token, 1, memory_order_relaxed) & 0x3fffffff;
    inst->start_nesting = tally_task_nesting;
    inst->main.owner = tally_thread_tag();
    // Idle until Halide's code says its thread works (its first call after the start).
    tally_profiler_suspend(&inst->main);
    return inst;
}

int32_t tally_halide_profiler_start(void *user_context, const char *pipeline_name,
                                    int32_t num_funcs, const uint64_t *func_names) {
    if (tls_num_runs >= TALLY_HALIDE_RUN_DEPTH) {
        return tally_report_error(user_context, TALLY_ERROR_TOO_MANY_INSTANCES,
                                  "halide_profiler_pipeline_start: pipeline %s: more than %d "
                                  "profiled pipelines nested on one thread",
                                  pipeline_name ? pipeline_name : "NULL", TALLY_HALIDE_RUN_DEPTH);
    }
    // Halide 14's reports list its copies among the funcs: its slots stay Func slots.
    tally_instance *inst =
        start_halide_run(user_context, "halide_profiler_pipeline_start", "halide-profile",
                         pipeline_name, num_funcs, func_names, 0);
    push_run(inst);
    if (!inst) {
        return pipeline_name && num_funcs >= 1 && func_names ? TALLY_ERROR_GENERIC
                                                             : TALLY_ERROR_BAD_ARGUMENT;
    }
    return inst->token;
}

int32_t tally_halide21_profiler_start(void *user_context, const char *pipeline_name,
                                      int32_t num_funcs, const uint64_t *func_names,
                                      void *instance) {
    tally_h21_instance *h = (tally_h21_instance *)instance;
    if (!h) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_profiler_instance_start: pipeline %s: NULL instance",
                                  pipeline_name ? pipeline_name : "NULL");
    }
    // Written first, so that the end (a destructor, run whatever happens) finds a failed start.
    h->magic = TALLY_H21_MAGIC;
    h->run = NULL;
    atomic_store_explicit(&h->count, 0, memory_order_relaxed);
    h->run = start_halide_run(user_context, "halide_profiler_instance_start", "halide21-profile",
                              pipeline_name, num_funcs, func_names, 1);
    if (!h->run) {
        return pipeline_name && num_funcs >= 1 && func_names ? TALLY_ERROR_GENERIC
                                                             : TALLY_ERROR_BAD_ARGUMENT;
    }
    return 0;
}

int32_t halide_profiler_enable_instance(void *instance) {
    tally_h21_instance *h = h21_instance(instance);
    if (h) {
        atomic_store_explicit(&h->count, 1, memory_order_relaxed);
    }
    return 0;
}

int32_t halide_profiler_instance_end(void *user_context, void *instance) {
    tally_h21_instance *h = h21_instance(instance);
    if (!h) {
        return 0;
    }
    tally_instance *run = h->run;
    int32_t count = atomic_load_explicit(&h->count, memory_order_relaxed);
    h->magic = TALLY_H21_ENDED_MAGIC;
    h->run = NULL;
    if (run) {
        tally_profiler_end_run(user_context, run, count);
    }
    return 0;
}

struct halide_profiler_state *halide_profiler_get_state(void) {
    return &global_state;
}

void *halide_profiler_get_pipeline_state(const char *pipeline_name) {
    int32_t n = tls_num_runs;
    for (int32_t i = n - 1; i >= 0 && pipeline_name; i--) {
        tally_instance *inst = tls_runs[i];
        if (inst && strcmp(inst->pipeline->name, pipeline_name) == 0) {
            return inst;
        }
    }
    return NULL;
}

void halide_profiler_pipeline_end(void *user_context, void *state) {
    (void)state;
    if (tls_num_runs == 0) {
        return;
    }
    tally_instance *inst = tls_runs[--tls_num_runs];
    tls_runs[tls_num_runs] = NULL;
    if (inst) {
        tally_profiler_end(user_context, inst);
    }
}

// The calling thread's context when it works for a run of this ABI, else NULL.
static tally_context *halide_context(void) {
    tally_context *c = tally_get_current_context();
    return (c && c->instance->token >= 0) ? c : NULL;
}

// Switches context `c` to func `func_id`; an id out of range is reported once per run.
static void switch_to_func(tally_context *c, int32_t func_id) {
    tally_instance *inst = c->instance;
    if (!tally_valid_slot(inst, func_id)) {
        int32_t expected = 0;
        if (atomic_compare_exchange_strong(&inst->bad_call_reported, &expected, 1)) {
            tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                               "halide_profiler_set_current_func: func id %d out of range for "
                               "pipeline %s (%d funcs); ignored",
                               (int)func_id, inst->pipeline->name, (int)inst->num_slots);
        }
        return;
    }
    tally_profiler_switch_slot(c, func_id);
}

int32_t halide_profiler_set_current_func(struct halide_profiler_state *state, int32_t token,
                                         int32_t func_id, int32_t *sampling_token) {
    (void)state;
    if (sampling_token && *sampling_token != 0) {
        return 0;
    }
    tally_context *c = halide_context();
    if (c && c->instance->token == token) {
        switch_to_func(c, func_id);
    }
    return 0;
}

int32_t tally_halide21_profiler_set_current_func(void *instance, int32_t func_id,
                                                 int32_t *sampling_token) {
    if (sampling_token && *sampling_token != 0) {
        return 0;
    }
    tally_context *c = halide_context();
    tally_h21_instance *h = c ? h21_instance(instance) : NULL;
    if (h && h->run == c->instance) {
        switch_to_func(c, func_id);
    }
    return 0;
}

int32_t halide_profiler_init_sampling_token(int32_t *sampling_token, int32_t value) {
    if (sampling_token) {
        *sampling_token = value;
    }
    return 0;
}

int32_t halide_profiler_acquire_sampling_token(int32_t *shared, int32_t *local) {
    if (shared && local) {
        *local = atomic_exchange_explicit((_Atomic int32_t *)shared, 1, memory_order_acquire);
    }
    return 0;
}

int32_t halide_profiler_release_sampling_token(int32_t *shared, int32_t *local) {
    if (shared && local && *local == 0) {
        atomic_store_explicit((_Atomic int32_t *)shared, 0, memory_order_release);
        *local = 1;
    }
    return 0;
}

int32_t halide_profiler_incr_active_threads(struct halide_profiler_state *state) {
    (void)state;
    tally_context *c = halide_context();
    if (!c) {
        return 0;
    }
    const void *me = tally_thread_tag();
    tally_instance *inst = c->instance;
    // The main context counts as this thread's own only outside the tasks it runs: a task on
    // the main thread works in a worker context, as on any other thread.
    int own = c->owner == me && (c != &inst->main || tally_task_nesting <= inst->start_nesting);
    if (own) {
        tally_profiler_resume(c);
        return 0;
    }
    tally_context *w = (tally_context *)tally_profiler_thread_begin(c);
    if (w) {
        w->owner = me;
    }
    return 0;
}

int32_t halide_profiler_decr_active_threads(struct halide_profiler_state *state) {
    (void)state;
    tally_context *c = halide_context();
    if (c && c->owner == tally_thread_tag()) {
        tally_profiler_suspend(c);
    }
    return 0;
}

// The run a memory call's state names: Halide 14's pipeline state is the run itself, Halide 21's
// instance holds it. The usual Halide 14 call comes from a thread working for that run, known
// without reading the state; any other state is read: an instance starts with its magic word, a
// run with a slot number, which the magic never equals.
static tally_instance *memory_run(void *state) {
    tally_context *c = tally_get_current_context();
    if (!state || (c && (void *)c->instance == state)) {
        return (tally_instance *)state;
    }
    tally_h21_instance *h = h21_instance(state);
    return h ? h->run : (tally_instance *)state;
}

void halide_profiler_memory_allocate(void *user_context, void *pipeline_state, int32_t func_id,
                                     uint64_t bytes) {
    (void)user_context;
    tally_profiler_memory_allocate(memory_run(pipeline_state), func_id, TALLY_MEMORY_HEAP, bytes);
}

void halide_profiler_memory_free(void *user_context, void *pipeline_state, int32_t func_id,
                                 uint64_t bytes) {
    (void)user_context;
    tally_profiler_memory_free(memory_run(pipeline_state), func_id, TALLY_MEMORY_HEAP, bytes);
}

void halide_profiler_stack_peak_update(void *user_context, void *pipeline_state, uint64_t *values) {
    (void)user_context;
    (void)pipeline_state;
    (void)values;
}
