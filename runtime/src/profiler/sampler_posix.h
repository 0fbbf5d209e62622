// The samplers (sampler_posix.c): a thread and a timer signal, and the tables of live runs they
// sample. Layer profiler.sources (runtime/layers.txt). Not installed, not seen by generated code.
// C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_SAMPLER_POSIX_H
#define TALLY_RUNTIME_SRC_PROFILER_SAMPLER_POSIX_H

#include "profiler/run.h"

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// Registers / unregisters an instance with the sampler of its mode. Register starts the sampler
// thread or arms the timer on first use; returns 0 or an error code (already reported).
// Unregister returns once no sampler is sampling the instance; afterwards the caller owns its
// sampling state.
int32_t tally_sampler_register(void *user_context, tally_instance *inst);
void tally_sampler_unregister(tally_instance *inst);
// Stops the sampler thread and deletes the timer (waits for a shutdown in progress).
void tally_sampler_shutdown(void);
// Fork handlers: prepare takes the sampler lock; the child forgets the thread and the timer.
void tally_sampler_fork_prepare(void);
void tally_sampler_fork_parent(void);
void tally_sampler_fork_child(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_SAMPLER_POSIX_H
