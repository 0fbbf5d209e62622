// Halide 14's profiler ABI, served by Tally's profiler: IR that Halide instrumented itself (its
// -profile feature) runs and reports through Tally's runs, slots and report.
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
// halide_profiler_pipeline_start is defined by lifetime.c (it installs the process hooks first)
// and calls tally_halide_profiler_start here.

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

int32_t tally_halide_profiler_start(void *user_context, const char *pipeline_name,
                                    int32_t num_funcs, const uint64_t *func_names) {
    if (tls_num_runs >= TALLY_HALIDE_RUN_DEPTH) {
        return tally_report_error(user_context, TALLY_ERROR_TOO_MANY_INSTANCES,
                                  "halide_profiler_pipeline_start: pipeline %s: more than %d "
                                  "profiled pipelines nested on one thread",
                                  pipeline_name ? pipeline_name : "NULL", TALLY_HALIDE_RUN_DEPTH);
    }
    if (!pipeline_name || num_funcs < 1 || !func_names) {
        push_run(NULL);
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_profiler_pipeline_start: bad arguments (pipeline %s, %d "
                                  "funcs, func names %s)",
                                  pipeline_name ? pipeline_name : "NULL", (int)num_funcs,
                                  func_names ? "given" : "NULL");
    }
    const char *stack_names[64];
    const char **names = stack_names;
    if (num_funcs > 64) {
        names = (const char **)malloc((size_t)num_funcs * sizeof(const char *));
        if (!names) {
            push_run(NULL);
            return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                      "halide_profiler_pipeline_start: out of memory starting "
                                      "pipeline %s",
                                      pipeline_name);
        }
    }
    for (int32_t i = 0; i < num_funcs; i++) {
        names[i] = (const char *)(uintptr_t)func_names[i];
    }
    tally_instance *inst = (tally_instance *)tally_profiler_start_run(
        user_context, pipeline_name, "halide-profile", num_funcs, names, NULL, NULL, 0);
    if (names != stack_names) {
        free(names);
    }
    push_run(inst);
    if (!inst) {
        return TALLY_ERROR_GENERIC;  // reported by tally_profiler_start_run
    }
    inst->token = atomic_fetch_add_explicit(&next_token, 1, memory_order_relaxed) & 0x3fffffff;
    inst->start_nesting = tally_task_nesting;
    inst->main.owner = tally_thread_tag();
    // Idle until Halide's code says its thread works (its first call after the start).
    tally_profiler_suspend(&inst->main);
    return inst->token;
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

int32_t halide_profiler_set_current_func(struct halide_profiler_state *state, int32_t token,
                                         int32_t func_id, int32_t *sampling_token) {
    (void)state;
    if (sampling_token && *sampling_token != 0) {
        return 0;
    }
    tally_context *c = halide_context();
    if (!c || c->instance->token != token) {
        return 0;
    }
    tally_instance *inst = c->instance;
    if (!tally_valid_slot(inst, func_id)) {
        int32_t expected = 0;
        if (atomic_compare_exchange_strong(&inst->bad_call_reported, &expected, 1)) {
            tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                               "halide_profiler_set_current_func: func id %d out of range for "
                               "pipeline %s (%d funcs); ignored",
                               (int)func_id, inst->pipeline->name, (int)inst->num_slots);
        }
        return 0;
    }
    tally_profiler_switch_slot(c, func_id);
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

void halide_profiler_memory_allocate(void *user_context, void *pipeline_state, int32_t func_id,
                                     uint64_t bytes) {
    (void)user_context;
    tally_profiler_memory_allocate(pipeline_state, func_id, TALLY_MEMORY_HEAP, bytes);
}

void halide_profiler_memory_free(void *user_context, void *pipeline_state, int32_t func_id,
                                 uint64_t bytes) {
    (void)user_context;
    tally_profiler_memory_free(pipeline_state, func_id, TALLY_MEMORY_HEAP, bytes);
}

void halide_profiler_stack_peak_update(void *user_context, void *pipeline_state, uint64_t *values) {
    (void)user_context;
    (void)pipeline_state;
    (void)values;
}
