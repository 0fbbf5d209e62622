// The calling thread's current context (context.c): the one pointer per thread through which the
// profiler's hot calls, the thread pool (which hands the caller's context to its tasks) and the
// device entry points find the run a thread is working for, with the thread-local variables of the
// hot calls. Layer core (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_CORE_CONTEXT_H
#define TALLY_RUNTIME_SRC_CORE_CONTEXT_H

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// Thread-local variables of the hot calls (a context switch, a pool task): the initial-exec TLS
// model, one %fs-relative access instead of a __tls_get_addr call per function, which in a
// shared library (libtally.so, loaded by the Python module or a JIT host) costs several ns per
// task. Safe for a library loaded at start-up and, since these are a few bytes, for one loaded
// with dlopen too (glibc keeps a surplus of static TLS for that).
#define TALLY_HOT_TLS __attribute__((tls_model("initial-exec")))

// A thread's view of a run; its fields are the profiler's (profiler/run.h). Here it is only
// a pointer.
typedef struct tally_context tally_context;

// The calling thread's current context (NULL when none). Accessed inline: the hot calls switch
// it on every slot change. Hidden: it is no part of the ABI libtally.so exports.
extern _Thread_local tally_context *tally_current_context TALLY_HOT_TLS
    __attribute__((visibility("hidden")));

static inline tally_context *tally_get_current_context(void) {
    return tally_current_context;
}

static inline void tally_set_current_context(tally_context *ctx) {
    tally_current_context = ctx;
}

// How many pool tasks (par_for iterations, async task units) the calling thread is inside; the
// thread pool counts them, Halide's profiler ABI reads them.
extern _Thread_local int32_t tally_task_nesting TALLY_HOT_TLS __attribute__((visibility("hidden")));

// A value unique to the calling thread while it lives (the address of a thread-local).
const void *tally_thread_tag(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_CORE_CONTEXT_H
