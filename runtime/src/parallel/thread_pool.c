// The thread pool behind halide_do_par_for, and the async tasks of halide_do_parallel_tasks.
//
// Design: a persistent set of worker threads and a FIFO list of jobs with unclaimed iterations,
// under one mutex. A job lives on its caller's stack. Workers take the first job in the list that
// has iterations left and claim its next iterations (a shrinking share of what is left: claim),
// batch after batch, until none are left; the caller claims iterations of its own job only, then
// waits until every claimed iteration has finished, so a job never outlives its caller's frame.
// Claims are a compare-and-swap on the job's next iteration, without the pool lock: a thread
// takes the lock to find a job and to count the iterations it ran as finished, not per batch
// (gpu_chain of the conformance corpus, three loops of 32 rows of about 40 ns, ran 2x Halide 21's
// time back to back when every batch took the lock, its waiters sleeping in the kernel). A thread
// touches a job only while iterations it claimed are unfinished, or under the lock while the job
// is listed; the caller unlists its job before it waits. Because callers always help, a job
// completes even with no workers (thread creation failed, shutdown running).
//
// Nested parallelism: a halide_do_par_for issued from inside a par_for task (on a worker, or on a
// caller running one of its own iterations) runs its loop serially on that thread. That can never
// deadlock and keeps the outer loop's parallelism, which is where Halide schedules put it.
//
// Errors: the first nonzero task result wins (compare-and-swap from 0); iterations claimed after
// that are skipped, and the call returns that result.
//
// Async tasks (halide_do_parallel_tasks). A call is a *group* of tasks on its caller's stack;
// each call of a task's fn (a *unit*: one iteration when the task may run in parallel; for a
// serial task its whole range, or with semaphores as many iterations as their semaphores can be
// taken for at once) first takes every semaphore of each of its iterations. The progress argument:
//  - a task with min_threads > 0 may block inside (it runs nested groups whose tasks wait on each
//    other through semaphores), so when the group has other tasks too it is handed to a *task
//    thread* of its own: an idle one, or a new one (beyond TALLY_NUM_THREADS: Halide's min_threads
//    means the same); when every task of the group blocks, the caller, which would only wait,
//    runs the last one itself. Every such task therefore runs at once, and it blocks only on
//    semaphores released by tasks that are running too;
//  - the other tasks never block once started; the caller runs their units, and pool workers
//    with nothing else to do help (the group is listed for them; the workers start then, not
//    for a group with no unit to spare, such as a fork of blocking tasks). A caller none of
//    whose units can run now runs a unit of another caller's group that can (every group is open
//    to them while its caller runs it), as Halide's pool does: a producer waiting for its
//    consumer to free a slot of a folded buffer runs the consumer's next rows itself, instead of
//    waiting for the consumer's thread to be scheduled (async_store of the conformance corpus:
//    0.64 -> 0.06 ms a run at 512x384). Such a unit never blocks, so the caller always gets back
//    to its own group. A thread only ever takes a unit whose semaphores it could take, so nobody
//    holds a thread while waiting for one;
//  - whoever waits (a caller for its group, a task thread for a semaphore) waits as below; a
//    release wakes the sleepers that wait for semaphores;
//  - a unit runs with the thread's par_for state reset, so a halide_do_par_for inside it is a
//    top-level loop (parallel), and nested halide_do_parallel_tasks calls are groups of their own.
// With one pool thread (TALLY_NUM_THREADS=1) the caller alone runs the non-blocking tasks in an
// order their semaphores allow, and blocking tasks still get their threads. A failure anywhere in
// a group, or in a group it nests in (task_parent), stops its waits: waiters give up with it.
// If a task thread cannot be started, its task runs on the caller (warned once), which is only
// safe when the task does not in fact wait for a sibling.
//
// Waiting. A thread that finds nothing to do (an idle worker or task thread, a caller whose
// iterations others are running, a task waiting for a semaphore) spins for up to TALLY_SPIN_NS
// with the lock released, watching pool_epoch, a count of the events that can let it proceed;
// then it sleeps on a condition variable of its own until one of the events it waits for signals
// it: a job or group listed (idle workers, as many as there are iterations for them), a
// semaphore released (those waiting for one), a unit or the last iteration of its own group or
// job finished (its caller only), a failure or shutdown (everyone). Sleeping costs a system call
// to wake and tens of microseconds to run again, and work usually comes back within microseconds
// (the next loop of a pipeline, the next row of a producer); Halide's pool spins before it sleeps
// too. The spin yields the core now and then, since blocking async tasks leave more threads than
// cores, and it runs once per stretch without work: a thread woken without finding any sleeps
// again at once. A spinning thread holds no profiler context (workers) or the one it would hold
// while asleep (a caller), so a profiled run's report does not change.
//
// Placement: the caller of a loop that ran long enough before, waking a worker that went to sleep
// on the caller's core, has the kernel place it on another; the caller of a group, waking a task
// thread to hand it a blocking task, has the kernel place it on the caller's core (placement.c
// holds both rules and why).
//
// Profiling: tasks set the thread's current profiler context (tally_profiler_thread_begin), or,
// in a run started with TALLY_PROFILER_FLAG_POOL_CONTEXTS (what inject-profiling's code starts),
// the pool opens each par_for task's worker context itself, in the slot of the context that
// started the loop, and ends it after the task (run_batch: the same calls the tasks' code would
// make, made once per batch of tasks a thread claims, so a task that switches no slot makes no
// profiler call). The pool resets
// it after every task (workers to NULL, callers to what it was before the task), so a task that
// failed before calling tally_profiler_thread_end cannot leave a dangling context; the worker
// contexts Halide's instrumentation opened on the thread are ended first
// (tally_profiler_end_owned_contexts). A task's context may linger after its task (profiler.c: the
// thread's next task of the same run takes it back without billing anything); the pool flushes it
// before the thread waits, runs a group's unit, counts the last task it took of a run as finished,
// or (a caller) has no iterations of its loop left to run.
//
// Lifetime: halide_do_par_for and halide_do_parallel_tasks are defined by lifetime.c, which
// installs the process hooks (the fork handlers that call tally_thread_pool_fork_*, the at-exit
// shutdown) and then calls tally_thread_pool_run / tally_thread_pool_run_tasks here.

#include "parallel/thread_pool.h"
#include "core/context.h"
#include "core/env.h"
#include "core/error.h"
#include "core/fault.h"
#include "parallel/placement.h"
#include "profiler/profiler.h"
#include "profiler/run.h"
#include "profiler/trace.h"
#include "tally_runtime.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TALLY_MAX_THREADS 256
// Task threads (one per blocking task running at once) are bounded separately.
#define TALLY_MAX_TASK_THREADS 256

// A thread that found nothing to do: it spins a while, then sleeps on its own condition variable
// (one per thread), listed in pool.sleeping so that the events it waits for can signal it and
// nobody else.
typedef struct waiter {
    pthread_cond_t cond;
    int wakes;      // WAKE_* events it sleeps for, besides a direct signal (pool lock)
    int signalled;  // a signal is on its way (pool lock)
    struct waiter *next;
    tally_placement *place;  // a pool worker's placement (placement.c), else NULL
} waiter;

enum {
    WAKE_WORK = 1,       // a job or a group was listed for workers, or shutdown
    WAKE_SEMAPHORE = 2,  // a semaphore was released
};

typedef struct par_job {
    halide_task_t f;
    void *user_context;
    uint8_t *closure;
    int32_t min;
    int32_t extent;
    int32_t shares;    // what one claim leaves of the rest (claim): 1 = claim it all
    int32_t finished;  // iterations run or skipped (pool lock)
    _Atomic int32_t result;
    struct par_job *next_job;
    // The caller's profiler context: tasks run with it current, so that code Halide outlined
    // into closures can find the run (tally_profiler_current_instance) and device calls made
    // by tasks are counted against it.
    tally_context *caller_ctx;
    // The run whose tasks the pool opens worker contexts for (TALLY_PROFILER_FLAG_POOL_CONTEXTS),
    // or NULL.
    tally_instance *task_run;
    waiter *owner;  // the caller, while it sleeps until the last iteration finishes (pool lock)
    // The next iteration to claim, relative to min (claim): on a cache line of its own, since
    // every claim writes it and every task reads the fields above.
    _Alignas(64) _Atomic int32_t next;
    char pad[64 - sizeof(int32_t)];
} par_job;

// The run a loop started in context `ctx` opens its tasks' contexts for, or NULL.
static tally_instance *task_run_of(const tally_context *ctx) {
    return ctx && ctx->instance && ctx->instance->pool_contexts ? ctx->instance : NULL;
}

// One task of a group (pool lock for the counters).
typedef struct group_task {
    const halide_parallel_task_t *task;
    int32_t next;       // next iteration to claim, relative to task->min
    int32_t running;    // units in flight
    int32_t dedicated;  // runs on a task thread of its own
} group_task;

// One halide_do_parallel_tasks call, on its caller's stack.
typedef struct task_group {
    void *user_context;
    group_task *tasks;
    int32_t num_tasks;
    int32_t remaining;  // iterations neither run nor skipped (pool lock)
    _Atomic int32_t result;
    struct task_group *parent;  // the group whose task made this call (task_parent), or NULL
    tally_context *caller_ctx;
    struct task_group *next_group;  // in pool.groups while listed for workers
    int32_t listed;
    struct task_group *next_open;  // in pool.open_groups while its caller runs it
    int32_t open;
    waiter *owner;  // the caller, while it sleeps (pool lock)
} task_group;

// A parked thread that runs one blocking task at a time.
typedef struct task_thread {
    pthread_t thread;
    waiter *sleeper;        // its waiter while it sleeps (pool lock)
    tally_placement place;  // where a wake-up puts it (placement.c)
    uint32_t seen;          // pool_epoch when it last found no assignment (pool lock)
    task_group *group;      // the assignment (pool lock), NULL while idle
    group_task *task;
    struct task_thread *next_idle;
} task_thread;

static struct {
    pthread_mutex_t lock;
    waiter *sleeping;         // threads asleep in wait_locked
    par_job *head, *tail;     // jobs with unclaimed iterations
    task_group *groups;       // groups with units workers may take
    task_group *open_groups;  // every group whose caller runs it: waiting callers help them
    pthread_t threads[TALLY_MAX_THREADS];
    tally_placement places[TALLY_MAX_THREADS];  // the workers' placements, by slot
    int32_t num_workers;
    int32_t desired_threads;  // 0 = default
    int32_t default_threads;  // 0 = not computed yet
    long online_cores;        // sysconf's count, read at load (0: not read)
    task_thread *task_threads[TALLY_MAX_TASK_THREADS];
    int32_t num_task_threads;
    task_thread *idle_task_threads;
    int shutting_down;
    int warned_thread_failure;
    int warned_task_thread_failure;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

// Counts events that may let a waiting thread proceed (units and jobs finished, work listed,
// semaphores released, failures). A waiter reads it before it looks for something to do and
// spins or sleeps only while it is unchanged, so no event between its look and its sleep is lost.
static _Atomic uint32_t pool_epoch;
// Waiters asleep for WAKE_SEMAPHORE: a release, which does not take the pool lock, takes it only
// when there are some (a Dekker handshake with pool_epoch: the sleeper counts itself, then
// re-reads the epoch; the releaser bumps the epoch, then reads the count).
static _Atomic int32_t semaphore_sleepers;

// The calling thread's waiter.
static _Thread_local waiter tls_waiter = {.cond = PTHREAD_COND_INITIALIZER};

// Serializes shutdown and resizing (both join workers).
static pthread_mutex_t resize_lock = PTHREAD_MUTEX_INITIALIZER;

// 1 on pool worker threads.
static _Thread_local int tls_is_worker TALLY_HOT_TLS;
// > 0 while this thread runs an iteration of a parallel loop.
static _Thread_local int tls_task_depth TALLY_HOT_TLS;

// ---- fork handling -----------------------------------------------------------------------

static void touch_pages(void *p, size_t n) {
    for (size_t i = 0; i < n; i += 4096) {
        volatile char *c = (volatile char *)p + i;
        *c = *c;
    }
    volatile char *last = (volatile char *)p + n - 1;
    *last = *last;
}

// Times this process has counted its online cores (tally_testing_core_counts).
static _Atomic int64_t core_counts;

static long count_online_cores(void) {
    atomic_fetch_add_explicit(&core_counts, 1, memory_order_relaxed);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

int64_t tally_testing_core_counts(void) {
    return atomic_load_explicit(&core_counts, memory_order_relaxed);
}

void tally_thread_pool_prefault(void) {
    // Counting the online cores reads a file under /sys (three system calls, and glibc's parsing
    // code mapped in): 40 us the first time in a process on a 2-vCPU guest, which a first
    // parallel loop paid. The count is taken now; the environment is still read at first use.
    const long cores = count_online_cores();
    pthread_mutex_lock(&resize_lock);
    pthread_mutex_lock(&pool.lock);
    touch_pages(&pool, sizeof(pool));
    pool.online_cores = cores;
    atomic_fetch_add(&pool_epoch, 0);
    atomic_fetch_add(&semaphore_sleepers, 0);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&resize_lock);
    // The text pages a first parallel run reaches outside this file's (a spinning worker
    // yields): a read maps them, so the run does not fault them in.
    (void)*(volatile const char *)(const void *)&sched_yield;
    (void)*(volatile const char *)(const void *)&tally_thread_pool_run;
}

void tally_thread_pool_fork_prepare(void) {
    pthread_mutex_lock(&resize_lock);
    pthread_mutex_lock(&pool.lock);
}

void tally_thread_pool_fork_parent(void) {
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&resize_lock);
}

void tally_thread_pool_fork_child(void) {
    // Only the forking thread exists in the child: no workers, no task threads, and no other
    // callers whose jobs could still be listed. (Task thread records are leaked: their threads do
    // not exist here.)
    pool.num_workers = 0;
    pool.head = pool.tail = NULL;
    pool.groups = NULL;
    pool.open_groups = NULL;
    pool.num_task_threads = 0;
    pool.idle_task_threads = NULL;
    pool.shutting_down = 0;
    // The forking thread was not asleep; the other threads' waiters are gone with them.
    pool.sleeping = NULL;
    atomic_store(&semaphore_sleepers, 0);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&resize_lock);
}

// ---- semaphores ----------------------------------------------------------------------------

// Halide's 16 opaque bytes hold the count.
typedef struct semaphore_impl {
    _Atomic int32_t value;
} semaphore_impl;

_Static_assert(sizeof(semaphore_impl) <= sizeof(halide_semaphore_t),
               "a semaphore must fit Halide's 16 bytes");

static semaphore_impl *sem_impl(halide_semaphore_t *s) {
    return (semaphore_impl *)(void *)s;
}

// ---- waiting (declared here: semaphore releases wake waiters) -----------------------------

// How long a thread that found nothing to do spins before it sleeps, in nanoseconds. Work often
// follows within microseconds (the next parallel loop of a pipeline, the next row a producer
// releases), and a sleeping thread costs a system call to wake and tens of microseconds to run
// again. The spin is bounded: once it has run out the thread sleeps, and it spins again only
// after it has found work.
#define TALLY_SPIN_NS 40000

static uint64_t spin_clock_ns(void) {
    // Not tally_now_ns: a test may freeze that clock, and a spin must always end.
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Signals the sleeping waiters that wait for any of `wakes`, at most `max` of them, and counts an
// event (pool lock held). `steer`: for a loop whose caller goes on running it on its core, long
// enough that a worker which slept on that core is placed on another (placement.c).
static void wake_locked(int wakes, int32_t max, int steer) {
    atomic_fetch_add(&pool_epoch, 1);
    for (waiter *w = pool.sleeping; w && max > 0; w = w->next) {
        if ((w->wakes & wakes) && !w->signalled) {
            w->signalled = 1;
            if (steer && w->place) {
                tally_placement_steer(w->place);
            }
            pthread_cond_signal(&w->cond);
            max--;
        }
    }
}

// Signals `w` if it sleeps, and counts an event (pool lock held).
static void wake_waiter_locked(waiter *w) {
    atomic_fetch_add(&pool_epoch, 1);
    if (w && !w->signalled) {
        w->signalled = 1;
        pthread_cond_signal(&w->cond);
    }
}

// Signals every sleeping waiter (pool lock held): a failure or shutdown, which any of them may
// be waiting for.
static void wake_all_locked(void) {
    atomic_fetch_add(&pool_epoch, 1);
    for (waiter *w = pool.sleeping; w; w = w->next) {
        if (!w->signalled) {
            w->signalled = 1;
            pthread_cond_signal(&w->cond);
        }
    }
}

// The calling thread looked for something to do and found nothing, having read pool_epoch as
// `seen` (under the pool lock) before it looked. While `*spin_until` (0: not started) allows, it
// spins with the lock released until the epoch moves; otherwise it sleeps until an event of
// `wakes` or a direct signal, through `*slot` when not NULL (cleared again on waking). Returns with
// the lock held, for the caller to look again (pool lock held).
static void wait_locked(uint32_t seen, int wakes, waiter **slot, uint64_t *spin_until) {
    uint64_t now = spin_clock_ns();
    if (*spin_until == 0) {
        *spin_until = now + TALLY_SPIN_NS;
    }
    if (now < *spin_until) {
        pthread_mutex_unlock(&pool.lock);
        for (uint32_t i = 1; atomic_load_explicit(&pool_epoch, memory_order_relaxed) == seen; i++) {
            cpu_relax();
            if ((i & 7) == 0) {
                if (spin_clock_ns() >= *spin_until) {
                    break;
                }
                // Other threads may be runnable on this core (there are more threads than
                // cores whenever async tasks block): let them run. Every 8 checks: async_store
                // of the conformance corpus (a producer and a consumer task handing rows over)
                // ran 1.1 ms a run so, 1.55 ms yielding every 64 and 1.4-1.6 ms every 2.
                sched_yield();
            }
        }
        pthread_mutex_lock(&pool.lock);
        return;
    }
    waiter *w = &tls_waiter;
    w->wakes = wakes;
    w->signalled = 0;
    w->next = pool.sleeping;
    pool.sleeping = w;
    if (slot) {
        *slot = w;
    }
    if (wakes & WAKE_SEMAPHORE) {
        atomic_fetch_add(&semaphore_sleepers, 1);
    }
    if (atomic_load(&pool_epoch) == seen) {
        if (w->place) {
            tally_placement_before_sleep(w->place);
        }
        pthread_cond_wait(&w->cond, &pool.lock);  // a spurious wake-up only looks again
    }
    if (wakes & WAKE_SEMAPHORE) {
        atomic_fetch_sub(&semaphore_sleepers, 1);
    }
    for (waiter **link = &pool.sleeping; *link; link = &(*link)->next) {
        if (*link == w) {
            *link = w->next;
            break;
        }
    }
    if (slot) {
        *slot = NULL;
    }
    w->signalled = 1;  // off the list: nobody signals it any more
    *spin_until = 1;   // spent: no spinning before the thread has found something to do
}

int32_t halide_semaphore_init(halide_semaphore_t *sem, int32_t n) {
    if (!sem) {
        return tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_semaphore_init: semaphore is NULL");
    }
    memset(sem, 0, sizeof(*sem));
    atomic_store(&sem_impl(sem)->value, n);
    return n;
}

static int32_t sem_add(halide_semaphore_t *sem, int32_t n) {
    return atomic_fetch_add(&sem_impl(sem)->value, n) + n;
}

int32_t halide_semaphore_release(halide_semaphore_t *sem, int32_t n) {
    if (!sem) {
        return tally_report_error(NULL, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_semaphore_release: semaphore is NULL");
    }
    int32_t v = sem_add(sem, n);
    atomic_fetch_add(&pool_epoch, 1);
    if (atomic_load(&semaphore_sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        wake_locked(WAKE_SEMAPHORE, INT32_MAX, 0);
        pthread_mutex_unlock(&pool.lock);
    }
    return v;
}

bool halide_semaphore_try_acquire(halide_semaphore_t *sem, int32_t n) {
    if (!sem) {
        return false;
    }
    int32_t v = atomic_load(&sem_impl(sem)->value);
    while (v >= n) {
        if (atomic_compare_exchange_weak(&sem_impl(sem)->value, &v, v - n)) {
            return true;
        }
    }
    return false;
}

// Takes every semaphore of `t` or none (pool lock held: a give-back wakes sleepers directly).
static int acquire_all_locked(const halide_parallel_task_t *t) {
    // Look first: a give-back wakes every thread waiting for a semaphore, and two threads that
    // took and gave back the same first semaphore in turn would keep waking each other.
    for (int32_t i = 0; i < t->num_semaphores; i++) {
        const halide_semaphore_acquire_t *a = &t->semaphores[i];
        if (atomic_load(&sem_impl(a->semaphore)->value) < a->count) {
            return 0;
        }
    }
    for (int32_t i = 0; i < t->num_semaphores; i++) {
        const halide_semaphore_acquire_t *a = &t->semaphores[i];
        if (!halide_semaphore_try_acquire(a->semaphore, a->count)) {
            for (int32_t j = 0; j < i; j++) {
                sem_add(t->semaphores[j].semaphore, t->semaphores[j].count);
            }
            if (i > 0) {
                wake_locked(WAKE_SEMAPHORE, INT32_MAX, 0);
            }
            return 0;
        }
    }
    return 1;
}

// ---- jobs ----------------------------------------------------------------------------------

// How many shares per thread a claim leaves of a loop's unclaimed iterations (see claim).
#define TALLY_CLAIM_SHARES 4

// Claims the next iterations of `job`, without the pool lock: 1/job->shares of what is left, at
// least one (job->shares is TALLY_CLAIM_SHARES per thread when the loop was listed for workers,
// 1 when its caller runs it alone). A loop of many short iterations then takes a few dozen claims
// rather than one an iteration, and the claims shrink as the loop ends, leaving single iterations
// for the threads that finish first, so the load still balances. Returns the first iteration
// claimed, and their number in *count: 0 when none is left.
static int32_t claim(par_job *job, int32_t *count) {
    int32_t next = atomic_load_explicit(&job->next, memory_order_relaxed);
    int32_t n;
    do {
        int32_t left = job->extent - next;
        if (left <= 0) {
            *count = 0;
            return 0;
        }
        n = left / job->shares;
        n = n < 1 ? 1 : n;
    } while (!atomic_compare_exchange_weak_explicit(&job->next, &next, next + n,
                                                    memory_order_relaxed, memory_order_relaxed));
    *count = n;
    return job->min + next;
}

// Takes `job` off the list of jobs if it is there (pool lock held).
static void unlist_job_locked(par_job *job) {
    par_job *prev = NULL;
    for (par_job **link = &pool.head; *link; prev = *link, link = &(*link)->next_job) {
        if (*link == job) {
            *link = job->next_job;
            if (pool.tail == job) {
                pool.tail = prev;
            }
            return;
        }
    }
}

// The first listed job with iterations left, after unlisting those before it that have none
// (pool lock held).
static par_job *first_open_job_locked(void) {
    while (pool.head &&
           atomic_load_explicit(&pool.head->next, memory_order_relaxed) >= pool.head->extent) {
        unlist_job_locked(pool.head);
    }
    return pool.head;
}

// Runs iterations [idx, idx + count) of `job` on this thread (skipping them once a task has
// failed), then makes `after` the thread's current context. In a run with pool contexts the
// batch's tasks run back to back in one worker context, opened before the first and ended (left
// to linger) after the last: each task would take it back as it is from its predecessor anyway,
// so the batch bills exactly what its tasks opening their own would, with no call per task.
static void run_batch(par_job *job, int32_t idx, int32_t count, tally_context *after) {
    int32_t saved_linger = tally_linger_ok;
    tally_linger_ok = 1;  // the task's profiler context may linger: the pool flushes it
    tally_set_current_context(job->caller_ctx);
    tally_context *task_ctx =
        job->task_run ? (tally_context *)tally_profiler_thread_begin(job->task_run) : NULL;
    tally_context *in_task = task_ctx ? task_ctx : job->caller_ctx;
    for (int32_t i = 0; i < count; i++) {
        if (atomic_load_explicit(&job->result, memory_order_relaxed) != 0) {
            break;  // an earlier task failed: skip the rest
        }
        tls_task_depth++;
        tally_task_nesting++;
        int32_t r = job->f(job->user_context, idx + i, job->closure);
        tally_task_nesting--;
        tls_task_depth--;
        // Whatever the task left current (contexts Halide's code opened and did not end, one a
        // failed task did not end), the next starts as this one did.
        tally_profiler_end_owned_contexts(in_task);
        tally_set_current_context(in_task);
        if (r != 0) {
            int32_t expected = 0;
            atomic_compare_exchange_strong(&job->result, &expected, r);
        }
    }
    tally_profiler_thread_end(task_ctx);
    tally_linger_ok = saved_linger;
    tally_set_current_context(after);
}

// ---- task groups ---------------------------------------------------------------------------

// The first failure of `g` or of a group it nests in, or 0.
static int32_t group_failure(const task_group *g) {
    for (; g; g = g->parent) {
        int32_t r = atomic_load(&g->result);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

static int acquire_all_locked(const halide_parallel_task_t *t);

// Iterations one unit of `gt` covers, the semaphores of its first already taken (pool lock
// held): the whole rest for a plain serial task; for a serial task with semaphores, as many
// iterations as their semaphores can be taken for now (each iteration's taken before it starts,
// as one call per iteration would), which saves a lock round trip per iteration of a consumer
// that trails its producer; one when others may run the next iteration alongside.
static int32_t unit_extent_locked(const group_task *gt) {
    const halide_parallel_task_t *t = gt->task;
    int32_t rest = t->extent - gt->next;
    if (!t->serial) {
        return 1;
    }
    if (t->num_semaphores == 0) {
        return rest;
    }
    int32_t n = 1;
    while (n < rest && acquire_all_locked(t)) {
        n++;
    }
    return n;
}

static void wake_waiter_locked(waiter *w);

// Skips every unclaimed iteration of the non-dedicated tasks of a failed group (pool lock held).
static void skip_unclaimed_locked(task_group *g) {
    for (int32_t i = 0; i < g->num_tasks; i++) {
        group_task *gt = &g->tasks[i];
        if (!gt->dedicated && gt->next < gt->task->extent) {
            g->remaining -= gt->task->extent - gt->next;
            gt->next = gt->task->extent;
            wake_waiter_locked(g->owner);
        }
    }
}

// Claims a unit of a non-dedicated task of `g` whose semaphores can be taken now (pool lock
// held). Returns the task, with the unit's first iteration and extent, or NULL.
static group_task *claim_unit_locked(task_group *g, int32_t *min, int32_t *extent) {
    if (group_failure(g) != 0) {
        skip_unclaimed_locked(g);
        return NULL;
    }
    for (int32_t i = 0; i < g->num_tasks; i++) {
        group_task *gt = &g->tasks[i];
        const halide_parallel_task_t *t = gt->task;
        if (gt->dedicated || gt->next >= t->extent || (t->serial && gt->running > 0)) {
            continue;
        }
        if (!acquire_all_locked(t)) {
            continue;
        }
        *min = t->min + gt->next;
        *extent = unit_extent_locked(gt);
        gt->next += *extent;
        gt->running++;
        return gt;
    }
    return NULL;
}

// Units the non-dedicated tasks of `g` have left to claim, counting a serial task as one (pool
// lock held).
static int32_t group_units_locked(const task_group *g) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->num_tasks; i++) {
        const group_task *gt = &g->tasks[i];
        if (!gt->dedicated && gt->next < gt->task->extent) {
            n += gt->task->serial ? 1 : gt->task->extent - gt->next;
        }
    }
    return n;
}

static int group_has_claimable_locked(const task_group *g) {
    for (int32_t i = 0; i < g->num_tasks; i++) {
        const group_task *gt = &g->tasks[i];
        if (!gt->dedicated && gt->next < gt->task->extent) {
            return 1;
        }
    }
    return 0;
}

static void unlist_group_locked(task_group *g) {
    if (!g->listed) {
        return;
    }
    for (task_group **link = &pool.groups; *link; link = &(*link)->next_group) {
        if (*link == g) {
            *link = g->next_group;
            break;
        }
    }
    g->listed = 0;
}

// Runs one unit on the calling thread (pool lock not held) as a top-level caller: a par_for in
// it is parallel, its profiler context is the group caller's.
static void run_unit(task_group *g, group_task *gt, int32_t min, int32_t extent) {
    const halide_parallel_task_t *t = gt->task;
    int saved_worker = tls_is_worker, saved_depth = tls_task_depth;
    int32_t saved_linger = tally_linger_ok;
    tally_profiler_linger_flush();  // a context left by an earlier par_for task of this thread
    tally_context *saved_ctx = tally_get_current_context();
    tls_is_worker = 0;
    tls_task_depth = 0;
    tally_linger_ok = 0;
    tally_set_current_context(g->caller_ctx);
    tally_task_nesting++;
    int32_t r = t->fn(g->user_context, min, extent, t->closure, g);
    tally_task_nesting--;
    tally_profiler_end_owned_contexts(g->caller_ctx);
    tally_set_current_context(saved_ctx);
    tls_is_worker = saved_worker;
    tls_task_depth = saved_depth;
    tally_linger_ok = saved_linger;
    if (r != 0) {
        int32_t expected = 0;
        atomic_compare_exchange_strong(&g->result, &expected, r);
    }
}

// Books a finished unit (pool lock held) and wakes the group's caller; after a failure, every
// waiter (waits in nested groups and for semaphores end with it).
static void finish_unit_locked(task_group *g, group_task *gt, int32_t extent) {
    gt->running--;
    g->remaining -= extent;
    if (atomic_load(&g->result) != 0) {
        skip_unclaimed_locked(g);
        wake_all_locked();
    } else {
        wake_waiter_locked(g->owner);
    }
}

// A task thread's assignment: every iteration of one task, in order, each after taking its
// semaphores (waiting for them), until done or the group fails (pool lock held on entry and exit).
static void run_dedicated_locked(task_group *g, group_task *gt) {
    const halide_parallel_task_t *t = gt->task;
    uint64_t spin_until = 0;
    while (gt->next < t->extent) {
        if (group_failure(g) != 0) {
            g->remaining -= t->extent - gt->next;
            gt->next = t->extent;
            break;
        }
        uint32_t seen = atomic_load(&pool_epoch);
        if (!acquire_all_locked(t)) {
            wait_locked(seen, WAKE_SEMAPHORE, NULL, &spin_until);
            continue;
        }
        spin_until = 0;
        int32_t min = t->min + gt->next;
        int32_t extent = unit_extent_locked(gt);
        gt->next += extent;
        gt->running++;
        pthread_mutex_unlock(&pool.lock);
        run_unit(g, gt, min, extent);
        pthread_mutex_lock(&pool.lock);
        finish_unit_locked(g, gt, extent);
    }
    wake_waiter_locked(g->owner);
}

static void *task_thread_main(void *arg) {
    task_thread *tt = (task_thread *)arg;
    uint64_t spin_until = 0;
    tally_placement_init(&tt->place);
    pthread_mutex_lock(&pool.lock);
    while (!pool.shutting_down) {
        if (!tt->group) {
            wait_locked(tt->seen, 0, &tt->sleeper, &spin_until);
            tally_placement_after_wake(&tt->place);
            tt->seen = atomic_load(&pool_epoch);
            continue;
        }
        spin_until = 0;
        run_dedicated_locked(tt->group, tt->task);
        tt->seen = atomic_load(&pool_epoch);
        tt->group = NULL;
        tt->task = NULL;
        tt->next_idle = pool.idle_task_threads;
        pool.idle_task_threads = tt;
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

// Hands `gt` to an idle task thread or a new one (pool lock held). Returns 0 when none could be
// had (said once).
static int dispatch_dedicated_locked(task_group *g, group_task *gt) {
    task_thread *tt = pool.idle_task_threads;
    if (tt) {
        pool.idle_task_threads = tt->next_idle;
    } else if (!pool.shutting_down && pool.num_task_threads < TALLY_MAX_TASK_THREADS &&
               (tt = (task_thread *)calloc(1, sizeof(task_thread))) != NULL) {
        tally_placement_reset(&tt->place);
        int err = tally_thread_create(&tt->thread, task_thread_main, tt);
        if (err != 0) {
            free(tt);
            tt = NULL;
        } else {
            pool.task_threads[pool.num_task_threads++] = tt;
        }
    }
    if (!tt) {
        if (!pool.warned_task_thread_failure) {
            pool.warned_task_thread_failure = 1;
            tally_print_diagnostic(
                NULL, "tally: warning: could not start a thread for an async task; it "
                      "runs on its caller, which deadlocks if it waits for a sibling\n");
        }
        return 0;
    }
    tt->next_idle = NULL;
    tt->group = g;
    tt->task = gt;
    if (tt->sleeper) {
        tally_placement_pull(&tt->place);  // the caller will wait on it: run it here
    }
    wake_waiter_locked(tt->sleeper);
    return 1;
}

static void ensure_workers_locked(void);

// Claims a unit of an open group other than `self` whose semaphores can be taken now (pool lock
// held); returns its task and group, or NULL.
static group_task *claim_other_unit_locked(task_group *self, task_group **group, int32_t *min,
                                           int32_t *extent) {
    for (task_group *h = pool.open_groups; h; h = h->next_open) {
        if (h == self || h->remaining == 0) {
            continue;
        }
        group_task *gt = claim_unit_locked(h, min, extent);
        if (gt) {
            *group = h;
            return gt;
        }
    }
    return NULL;
}

// Checks a task array as halide_do_parallel_tasks receives it; sets *total to the iterations of
// all tasks. Returns 0 or the error it reported.
static int32_t check_tasks(void *user_context, int32_t num_tasks,
                           const halide_parallel_task_t *tasks, int32_t *total) {
    if (!tasks) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_do_parallel_tasks: task array is NULL");
    }
    *total = 0;
    for (int32_t i = 0; i < num_tasks; i++) {
        const halide_parallel_task_t *t = &tasks[i];
        if (!t->fn || t->extent < 0 || t->num_semaphores < 0 ||
            (t->num_semaphores > 0 && !t->semaphores)) {
            return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                      "halide_do_parallel_tasks: task %d (%s) has %s", (int)i,
                                      t->name ? t->name : "unnamed",
                                      !t->fn          ? "no function"
                                      : t->extent < 0 ? "a negative extent"
                                                      : "a bad semaphore list");
        }
        for (int32_t j = 0; j < t->num_semaphores; j++) {
            if (!t->semaphores[j].semaphore || t->semaphores[j].count < 0) {
                return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                          "halide_do_parallel_tasks: task %d (%s): semaphore %d "
                                          "is NULL or has a negative count",
                                          (int)i, t->name ? t->name : "unnamed", (int)j);
            }
        }
        if (t->extent > INT32_MAX - *total) {
            return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                      "halide_do_parallel_tasks: too many iterations");
        }
        *total += t->extent;
    }
    return 0;
}

// A group of the caller's tasks, none running yet, on the task records `gts` (one per task).
static void init_group(task_group *g, void *user_context, halide_parallel_task_t *tasks,
                       group_task *gts, int32_t num_tasks, int32_t total, void *task_parent) {
    g->user_context = user_context;
    g->tasks = gts;
    g->num_tasks = num_tasks;
    g->remaining = total;
    atomic_init(&g->result, 0);
    g->parent = (task_group *)task_parent;
    g->caller_ctx = tally_get_current_context();
    g->next_group = NULL;
    g->listed = 0;
    g->owner = NULL;
    for (int32_t i = 0; i < num_tasks; i++) {
        gts[i].task = &tasks[i];
        gts[i].next = 0;
        gts[i].running = 0;
        gts[i].dedicated = 0;
    }
}

// Blocking tasks each get a thread, unless one task is all there is. When every task with
// iterations blocks, the caller, which would only wait, runs the last one itself: it runs at once
// as on a thread of its own, and there is one thread fewer to wake and to share the cores with
// (Halide's fork of two async producers and their consumer is this). Pool lock held.
static void dispatch_blocking_tasks_locked(task_group *g) {
    const int32_t num_tasks = g->num_tasks;
    group_task *gts = g->tasks;
    int32_t with_work = 0, blocking = 0;
    group_task *own = NULL;
    for (int32_t i = 0; i < num_tasks; i++) {
        if (gts[i].task->extent > 0) {
            with_work++;
            blocking += gts[i].task->min_threads > 0;
        }
    }
    for (int32_t i = num_tasks - 1; i >= 0 && with_work > 1 && blocking == with_work; i--) {
        if (gts[i].task->extent > 0) {
            own = &gts[i];
            own->dedicated = 1;
            break;
        }
    }
    for (int32_t i = 0; i < num_tasks && num_tasks > 1; i++) {
        const halide_parallel_task_t *t = gts[i].task;
        if (t->min_threads > 0 && t->extent > 0 && &gts[i] != own) {
            gts[i].dedicated = 1;
            if (!dispatch_dedicated_locked(g, &gts[i])) {
                gts[i].dedicated = 0;
                if (own) {  // the caller runs the undispatched tasks as units, its own too
                    own->dedicated = 0;
                    own = NULL;
                }
            }
        }
    }
    if (own) {
        run_dedicated_locked(g, own);
    }
}

// Lists the group for idle workers (as many as there are units beyond the one the caller takes)
// and among the open groups whose units others may run. The pool's workers are started here,
// when a group first has units for them: a group whose tasks all run on their own threads (a
// fork of blocking tasks) or one unit at a time (a single task, a serial one) gets no help from
// them, and a worker started for nothing would take a core from its first run (it looks for
// work, then spins). Pool lock held.
static void open_group_locked(task_group *g) {
    int32_t helpers = group_units_locked(g) - 1;
    if (helpers > 0) {
        ensure_workers_locked();
    }
    if (pool.num_workers > 0 && helpers > 0) {
        g->next_group = pool.groups;
        pool.groups = g;
        g->listed = 1;
        wake_locked(WAKE_WORK, helpers, 0);
    }
    g->next_open = pool.open_groups;
    pool.open_groups = g;
    g->open = 1;
}

// The caller works until none of its group's iterations is left: its own units first, else a
// unit of another open group that can run, else it waits. Pool lock held (released around each
// unit).
static void work_until_done_locked(task_group *g, uint64_t *spin_until) {
    while (g->remaining > 0) {
        int32_t min = 0, extent = 0;
        uint32_t seen = atomic_load(&pool_epoch);
        group_task *gt = claim_unit_locked(g, &min, &extent);
        if (gt) {
            *spin_until = 0;
            pthread_mutex_unlock(&pool.lock);
            run_unit(g, gt, min, extent);
            pthread_mutex_lock(&pool.lock);
            finish_unit_locked(g, gt, extent);
            continue;
        }
        if (g->remaining == 0) {
            break;
        }
        // Nothing of its own can run now: a unit of another caller's group that can (a producer
        // waiting for its consumer to free a slot runs the consumer's next rows, as Halide's
        // pool does). Such units never block, so this always returns.
        task_group *other = NULL;
        gt = claim_other_unit_locked(g, &other, &min, &extent);
        if (gt) {
            *spin_until = 0;
            pthread_mutex_unlock(&pool.lock);
            run_unit(other, gt, min, extent);
            pthread_mutex_lock(&pool.lock);
            finish_unit_locked(other, gt, extent);
            continue;
        }
        // Units left to claim wait for semaphores (or for a serial task's running unit, whose
        // end signals g->owner); otherwise only finishing units, which signal g->owner.
        int wakes = group_has_claimable_locked(g) ? WAKE_SEMAPHORE : 0;
        wait_locked(seen, wakes, &g->owner, spin_until);
    }
}

// Takes the finished group off the pool's lists and waits until no unit of it is running:
// dedicated tasks book their last unit before their thread goes idle, and nothing of the group
// is referenced once remaining is 0 and no unit is running. Pool lock held.
static void close_group_locked(task_group *g, uint64_t *spin_until) {
    unlist_group_locked(g);
    for (task_group **link = &pool.open_groups; *link; link = &(*link)->next_open) {
        if (*link == g) {
            *link = g->next_open;
            break;
        }
    }
    g->open = 0;
    for (int32_t i = 0; i < g->num_tasks; i++) {
        while (g->tasks[i].running > 0) {
            wait_locked(atomic_load(&pool_epoch), 0, &g->owner, spin_until);
        }
    }
}

int32_t tally_thread_pool_run_tasks(void *user_context, int32_t num_tasks,
                                    halide_parallel_task_t *tasks, void *task_parent) {
    if (num_tasks <= 0) {
        return 0;
    }
    int32_t total = 0;
    int32_t r = check_tasks(user_context, num_tasks, tasks, &total);
    if (r != 0) {
        return r;
    }
    group_task stack_tasks[8];
    group_task *gts = stack_tasks;
    if (num_tasks > 8) {
        gts = (group_task *)calloc((size_t)num_tasks, sizeof(group_task));
        if (!gts) {
            return tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                                      "halide_do_parallel_tasks: out of memory for %d tasks",
                                      (int)num_tasks);
        }
    }
    task_group g;
    init_group(&g, user_context, tasks, gts, num_tasks, total, task_parent);
    uint64_t spin_until = 0;
    pthread_mutex_lock(&pool.lock);
    dispatch_blocking_tasks_locked(&g);
    open_group_locked(&g);
    work_until_done_locked(&g, &spin_until);
    close_group_locked(&g, &spin_until);
    pthread_mutex_unlock(&pool.lock);
    if (gts != stack_tasks) {
        free(gts);
    }
    r = atomic_load(&g.result);
    return r != 0 ? r : group_failure(g.parent);
}

// ---- workers -------------------------------------------------------------------------------

// A worker takes a unit of a listed group (pool lock held); returns 1 if it ran one.
static int help_groups_locked(void) {
    for (task_group *g = pool.groups; g; g = g->next_group) {
        int32_t min = 0, extent = 0;
        group_task *gt = claim_unit_locked(g, &min, &extent);
        if (gt) {
            pthread_mutex_unlock(&pool.lock);
            run_unit(g, gt, min, extent);
            tally_set_current_context(NULL);
            tally_trace_context();
            pthread_mutex_lock(&pool.lock);
            finish_unit_locked(g, gt, extent);
            return 1;
        }
    }
    return 0;
}

static void *worker_main(void *arg) {
    tls_is_worker = 1;
    uint64_t spin_until = 0;
    pthread_mutex_lock(&pool.lock);
    tls_waiter.place = &pool.places[(intptr_t)arg];
    tally_placement_init(tls_waiter.place);
    while (!pool.shutting_down) {
        uint32_t seen = atomic_load(&pool_epoch);
        par_job *job = first_open_job_locked();
        if (!job) {
            tally_profiler_linger_flush();
            if (pool.groups && help_groups_locked()) {
                spin_until = 0;
                continue;
            }
            // Listed groups' units may wait for semaphores.
            wait_locked(seen, WAKE_WORK | (pool.groups ? WAKE_SEMAPHORE : 0), NULL, &spin_until);
            continue;
        }
        spin_until = 0;
        // A context lingering from another run's tasks ends before this job's run (below, the
        // lock is released).
        tally_profiler_linger_keep(job->caller_ctx);
        int32_t count = 0;
        int32_t idx = claim(job, &count);
        if (count == 0) {
            continue;  // its caller claimed the rest meanwhile: look again
        }
        pthread_mutex_unlock(&pool.lock);
        // Batch after batch while the job has iterations left: the job stays alive while this
        // thread has claimed iterations it has not counted as finished.
        int32_t ran = 0;
        do {
            run_batch(job, idx, count, NULL);
            tally_trace_context();
            ran += count;
            idx = claim(job, &count);
        } while (count > 0);
        pthread_mutex_lock(&pool.lock);
        // A task's lingering profiler context ends before its tasks count as finished, unless
        // the next open job belongs to the same run: this thread then claims from it under this
        // same lock, or finds no job and flushes the context before releasing the lock, so no
        // run ends with one of its contexts lingering here.
        par_job *next = first_open_job_locked();
        tally_profiler_linger_keep(next ? next->caller_ctx : NULL);
        job->finished += ran;
        if (job->finished == job->extent) {
            wake_waiter_locked(job->owner);
        }
    }
    tally_profiler_linger_flush();
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

// The default thread count: TALLY_NUM_THREADS, else Halide's HL_NUM_THREADS (so a program moved
// from Halide's runtime keeps its setting), else the number of online cores (at most
// TALLY_MAX_THREADS).
static int32_t default_thread_count(void) {
    const long cores = pool.online_cores != 0 ? pool.online_cores : count_online_cores();
    const int32_t n =
        cores > 0 ? (int32_t)(cores > TALLY_MAX_THREADS ? TALLY_MAX_THREADS : cores) : 1;
    char instead[64];
    snprintf(instead, sizeof instead, "the number of cores (%d)", (int)n);
    const char *name =
        tally_env_string("TALLY_NUM_THREADS") ? "TALLY_NUM_THREADS" : "HL_NUM_THREADS";
    return (int32_t)tally_env_int(name, 1, TALLY_MAX_THREADS, n, instead);
}

// Threads (caller included) the pool should use (pool lock held).
static int32_t wanted_threads_locked(void) {
    if (pool.desired_threads > 0) {
        return pool.desired_threads;
    }
    if (pool.default_threads == 0) {
        pool.default_threads = default_thread_count();
    }
    return pool.default_threads;
}

// Starts workers up to the wanted count (pool lock held). Failures leave fewer workers: the
// callers still run every iteration, so this only costs parallelism; it is said once per pool
// start (a warning through tally_print_diagnostic).
static void ensure_workers_locked(void) {
    if (pool.shutting_down) {
        return;
    }
    int32_t want = wanted_threads_locked() - 1;
    if (pool.num_workers >= want) {
        return;
    }
    while (pool.num_workers < want) {
        tally_placement_reset(&pool.places[pool.num_workers]);
        int err = tally_thread_create(&pool.threads[pool.num_workers], worker_main,
                                      (void *)(intptr_t)pool.num_workers);
        if (err != 0) {
            if (!pool.warned_thread_failure) {
                pool.warned_thread_failure = 1;
                char msg[160];
                snprintf(msg, sizeof(msg),
                         "tally: warning: could not start a thread pool worker (%s); parallel "
                         "loops run on %d thread(s)\n",
                         strerror(err), (int)pool.num_workers + 1);
                tally_print_diagnostic(NULL, msg);
            }
            return;
        }
        pool.num_workers++;
    }
}

int32_t tally_thread_pool_run(void *user_context, halide_task_t f, int32_t min, int32_t extent,
                              uint8_t *closure) {
    if (extent <= 0) {
        return 0;
    }
    if (!f) {
        return tally_report_error(user_context, TALLY_ERROR_BAD_ARGUMENT,
                                  "halide_do_par_for: task function is NULL");
    }
    tally_context *saved_ctx = tally_get_current_context();
    if (tls_is_worker || tls_task_depth > 0) {
        // Nested loop: run serially on this thread. Its tasks' contexts end with them (they
        // cannot linger: nothing would flush them before the enclosing task goes on).
        int32_t saved_linger = tally_linger_ok;
        tally_linger_ok = 0;
        tally_instance *task_run = task_run_of(saved_ctx);
        int32_t r = 0;
        for (int32_t i = 0; i < extent && r == 0; i++) {
            tls_task_depth++;
            tally_task_nesting++;
            void *task_ctx = task_run ? tally_profiler_thread_begin(task_run) : NULL;
            r = f(user_context, min + i, closure);
            tally_profiler_thread_end(task_ctx);
            tally_task_nesting--;
            tls_task_depth--;
            tally_profiler_end_owned_contexts(saved_ctx);
            tally_set_current_context(saved_ctx);
        }
        tally_linger_ok = saved_linger;
        return r;
    }

    par_job job;
    job.f = f;
    job.user_context = user_context;
    job.closure = closure;
    job.min = min;
    job.extent = extent;
    atomic_init(&job.next, 0);
    job.shares = 1;
    job.finished = 0;
    atomic_init(&job.result, 0);
    job.next_job = NULL;
    job.caller_ctx = saved_ctx;
    job.task_run = task_run_of(saved_ctx);
    job.owner = NULL;

    const int steer = tally_placement_worth_steering(f);
    pthread_mutex_lock(&pool.lock);
    ensure_workers_locked();
    uint64_t listed_at = 0;  // when workers were asked to help (0: they were not)
    if (extent > 1 && pool.num_workers > 0) {
        listed_at = spin_clock_ns();
        job.shares = TALLY_CLAIM_SHARES * (pool.num_workers + 1);
        if (pool.tail) {
            pool.tail->next_job = &job;
        } else {
            pool.head = &job;
        }
        pool.tail = &job;
        wake_locked(WAKE_WORK, extent - 1, steer);
    }
    pthread_mutex_unlock(&pool.lock);
    int32_t ran = 0, count = 0;
    for (int32_t idx = claim(&job, &count); count > 0; idx = claim(&job, &count)) {
        run_batch(&job, idx, count, saved_ctx);
        ran += count;
    }
    pthread_mutex_lock(&pool.lock);
    unlist_job_locked(&job);  // no iterations left: nobody else may look at it now
    job.finished += ran;
    tally_profiler_linger_flush();  // the caller's own tasks are done
    uint64_t spin_until = 0;
    while (job.finished < job.extent) {
        wait_locked(atomic_load(&pool_epoch), 0, &job.owner, &spin_until);
    }
    pthread_mutex_unlock(&pool.lock);
    if (listed_at) {
        tally_placement_loop_ran(f, spin_clock_ns() - listed_at);
    }
    return atomic_load(&job.result);
}

int32_t tally_thread_pool_shutdown(void) {
    if (tls_is_worker) {
        return tally_report_error(NULL, TALLY_ERROR_WRONG_THREAD,
                                  "tally_thread_pool_shutdown called from a pool worker");
    }
    pthread_mutex_lock(&resize_lock);
    pthread_mutex_lock(&pool.lock);
    int32_t n = pool.num_workers;
    int32_t num_tt = pool.num_task_threads;
    pool.shutting_down = 1;
    wake_all_locked();
    pthread_mutex_unlock(&pool.lock);
    for (int32_t i = 0; i < n; i++) {
        pthread_join(pool.threads[i], NULL);
    }
    // A task thread still running a task finishes it first.
    for (int32_t i = 0; i < num_tt; i++) {
        pthread_join(pool.task_threads[i]->thread, NULL);
        free(pool.task_threads[i]);
        pool.task_threads[i] = NULL;
    }
    pthread_mutex_lock(&pool.lock);
    pool.num_task_threads = 0;
    pool.idle_task_threads = NULL;
    pool.num_workers = 0;
    pool.shutting_down = 0;
    pool.warned_thread_failure = 0;  // a restart that fails again says so again
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&resize_lock);
    return 0;
}

int32_t tally_set_num_threads(int32_t n) {
    pthread_mutex_lock(&pool.lock);
    int32_t previous = wanted_threads_locked();
    pool.desired_threads = n > 0 ? (n > TALLY_MAX_THREADS ? TALLY_MAX_THREADS : n) : 0;
    int32_t now = wanted_threads_locked();
    pthread_mutex_unlock(&pool.lock);
    if (now != previous && !tls_is_worker && tls_task_depth == 0) {
        tally_thread_pool_shutdown();  // workers restart lazily at the new size
    }
    return previous;
}
