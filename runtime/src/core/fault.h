// Fault injection (fault.c): the operations TALLY_FAULT can make fail and the check each makes, and
// the thread start every runtime thread goes through. Layer core (runtime/layers.txt). Not
// installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_CORE_FAULT_H
#define TALLY_RUNTIME_SRC_CORE_FAULT_H

#include <pthread.h>
#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// Operations TALLY_FAULT (or tally_testing_set_fault) can make fail.
enum {
    TALLY_FAULT_MALLOC = 0,
    TALLY_FAULT_DEVICE_MALLOC,
    TALLY_FAULT_COPY_TO_HOST,
    TALLY_FAULT_COPY_TO_DEVICE,
    TALLY_FAULT_LAUNCH,
    TALLY_FAULT_SYNC,
    TALLY_NUM_FAULT_OPS
};

// Counts one operation of kind `op`. Returns 0, or, when it is the one chosen to fail, reports
// the printf-style message followed by " (injected fault)" through halide_error and returns the
// operation's error code. Callers return that code (halide_malloc: NULL) without doing the work.
int32_t tally_fault_check(void *user_context, int32_t op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// pthread_create that honours tally_testing_fail_thread_starts. Returns 0 or an errno value.
int tally_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);

// Reads TALLY_FAULT now (lifetime.c, at load), so that a first run takes no page fault for it.
void tally_fault_prefault(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_CORE_FAULT_H
