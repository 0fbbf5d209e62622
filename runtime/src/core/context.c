// The calling thread's current profiler context: the one pointer per thread through which the
// profiler's hot calls, the thread pool (which hands the caller's context to its tasks) and the
// device entry points (which count copies and mark waits) find the run a thread is working for.
// The accessors are inline (core/context.h): the hot calls read and write it on every slot switch.
// Here the context is only a pointer; what it holds is the profiler's (profiler/run.h), and so are
// the public calls that read it (tally_profiler_current_context / _instance, profiler.c).

#include "core/context.h"

_Thread_local tally_context *tally_current_context TALLY_HOT_TLS
    __attribute__((visibility("hidden")));
_Thread_local int32_t tally_task_nesting TALLY_HOT_TLS __attribute__((visibility("hidden")));

// Initial-exec, as the hot pointers: the pool reads the tag after every task it runs.
static _Thread_local char thread_tag TALLY_HOT_TLS;

const void *tally_thread_tag(void) {
    return &thread_tag;
}
