// Where a woken pool thread runs (placement.c): the caller of a parallel loop long enough to gain
// from it never leaves a worker it wakes queued behind itself on its own core, and the caller of
// a fork of blocking tasks wakes the task thread it hands one to on its own core. Layer parallel
// (runtime/layers.txt), below the thread pool, which calls it when its workers sleep and when a
// loop's caller wakes them. Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PARALLEL_PLACEMENT_H
#define TALLY_RUNTIME_SRC_PARALLEL_PLACEMENT_H

#include "tally_runtime.h"

#include <stdint.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

// One pool thread's placement, kept by the pool (one per worker slot, one per task thread); read
// and written under the pool lock.
typedef struct tally_placement {
    pid_t tid;           // the thread's kernel id; 0 until it has started
    int cpu;             // the core it went to sleep on, last (-1: unknown)
    int narrowed;        // 1 while its affinity is `saved` less one core (a worker, steered) or
                         // the waker's core alone (a task thread, pulled)
    uint64_t saved[16];  // its affinity before it was narrowed: a cpu_set_t (placement.c)
} tally_placement;

// A worker slot about to get a new thread: nobody is steered through it until that thread has
// started.
void tally_placement_reset(tally_placement *p);

// The calling thread, the worker of `p`, has started.
void tally_placement_init(tally_placement *p);

// The worker of `p` (the calling thread) is about to sleep: its affinity back to what it was
// before it was narrowed, and the core it sleeps on noted.
void tally_placement_before_sleep(tally_placement *p);

// 1 when the parallel loop of task `f` is worth steering its workers for: steering is on and the
// loop's last run (tally_placement_loop_ran) was long enough. Any thread, no lock.
int tally_placement_worth_steering(halide_task_t f);

// The parallel loop of task `f` ran for `ns` on its caller, from listing its iterations to the
// last one's end. Any thread, no lock.
void tally_placement_loop_ran(halide_task_t f, uint64_t ns);

// The calling thread is about to wake the worker of `p`, asleep, for a loop worth steering: if the
// worker went to sleep on the core this thread runs on, its affinity is narrowed to leave this
// core out, so the kernel places it on another.
void tally_placement_steer(tally_placement *p);

// The calling thread is about to wake the task thread of `p`, asleep, to run a task of a group
// whose caller will wait on it: the task thread's affinity is narrowed to this thread's core, so
// that it runs there as soon as the caller waits instead of on an idle core tens of microseconds
// later. The task thread widens it back when it wakes (tally_placement_after_wake).
void tally_placement_pull(tally_placement *p);

// The thread of `p` (the calling thread) has woken from a sleep: a pull is undone (its affinity
// back to what it was), so that the kernel may move it from the waker's core from now on.
void tally_placement_after_wake(tally_placement *p);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PARALLEL_PLACEMENT_H
