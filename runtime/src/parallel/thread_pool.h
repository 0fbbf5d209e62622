// The thread pool (thread_pool.c): the workers and jobs behind halide_do_par_for, the async tasks
// of halide_do_parallel_tasks and their semaphores. Layer parallel (runtime/layers.txt), above
// the profiler: each task opens and ends a worker context of the run it works for. Not installed,
// not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PARALLEL_THREAD_POOL_H
#define TALLY_RUNTIME_SRC_PARALLEL_THREAD_POOL_H

#include "tally_runtime.h"

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// halide_do_par_for without the process hooks (lifetime.c installs them first).
int32_t tally_thread_pool_run(void *user_context, halide_task_t f, int32_t min, int32_t extent,
                              uint8_t *closure);
// halide_do_parallel_tasks without the process hooks.
int32_t tally_thread_pool_run_tasks(void *user_context, int32_t num_tasks,
                                    halide_parallel_task_t *tasks, void *task_parent);

// Fork handlers: prepare takes the resize and pool locks; the child forgets the workers.
void tally_thread_pool_fork_prepare(void);
void tally_thread_pool_fork_parent(void);
void tally_thread_pool_fork_child(void);
void tally_thread_pool_prefault(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PARALLEL_THREAD_POOL_H
