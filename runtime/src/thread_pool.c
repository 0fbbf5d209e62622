// The thread pool behind halide_do_par_for.
//
// Design: a persistent set of worker threads and a FIFO list of jobs with unclaimed iterations,
// all under one mutex. A job lives on its caller's stack. Workers take the next iteration of the
// first job in the list; the caller takes iterations of its own job only, then waits until every
// claimed iteration has finished, so a job never outlives its caller's frame. Because callers
// always help, a job completes even with no workers (thread creation failed, shutdown running).
//
// Nested parallelism: a halide_do_par_for issued from inside a task (on a worker, or on a caller
// running one of its own iterations) runs its loop serially on that thread. That can never
// deadlock and keeps the outer loop's parallelism, which is where Halide schedules put it.
//
// Errors: the first nonzero task result wins (compare-and-swap from 0); iterations claimed after
// that are skipped, and the call returns that result.
//
// Profiling: tasks set the thread's current profiler context (tally_profiler_thread_begin). The
// pool resets it after every task (workers to NULL, callers to what it was before the task), so a
// task that failed before calling tally_profiler_thread_end cannot leave a dangling context.
//
// Lifetime: halide_do_par_for is defined by lifetime.c, which installs the process hooks (the
// fork handlers that call tally_thread_pool_fork_*, the at-exit shutdown) and then calls
// tally_thread_pool_run here.

#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TALLY_MAX_THREADS 256

typedef struct par_job {
    halide_task_t f;
    void *user_context;
    uint8_t *closure;
    int32_t min;
    int32_t extent;
    int32_t next;      // next iteration to claim, relative to min (pool lock)
    int32_t finished;  // iterations run or skipped (pool lock)
    _Atomic int32_t result;
    struct par_job *next_job;
    // The caller's profiler context: tasks run with it current, so that code Halide outlined
    // into closures can find the run (tally_profiler_current_instance) and device calls made
    // by tasks are counted against it.
    tally_context *caller_ctx;
} par_job;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work_cond;  // workers: a job arrived, or shutdown
    pthread_cond_t done_cond;  // callers: an iteration finished
    par_job *head, *tail;      // jobs with unclaimed iterations
    pthread_t threads[TALLY_MAX_THREADS];
    int32_t num_workers;
    int32_t desired_threads;  // 0 = default
    int32_t default_threads;  // 0 = not computed yet
    int shutting_down;
    int warned_thread_failure;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .work_cond = PTHREAD_COND_INITIALIZER,
          .done_cond = PTHREAD_COND_INITIALIZER};

// Serializes shutdown and resizing (both join workers).
static pthread_mutex_t resize_lock = PTHREAD_MUTEX_INITIALIZER;

// 1 on pool worker threads.
static _Thread_local int tls_is_worker;
// > 0 while this thread runs an iteration of a parallel loop.
static _Thread_local int tls_task_depth;

// ---- fork handling -----------------------------------------------------------------------

void tally_thread_pool_fork_prepare(void) {
    pthread_mutex_lock(&resize_lock);
    pthread_mutex_lock(&pool.lock);
}

void tally_thread_pool_fork_parent(void) {
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&resize_lock);
}

void tally_thread_pool_fork_child(void) {
    // Only the forking thread exists in the child: no workers, and no other callers whose jobs
    // could still be listed. Condition variables may hold state of vanished waiters: re-create.
    pool.num_workers = 0;
    pool.head = pool.tail = NULL;
    pool.shutting_down = 0;
    pthread_cond_init(&pool.work_cond, NULL);
    pthread_cond_init(&pool.done_cond, NULL);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&resize_lock);
}

// ---- jobs ----------------------------------------------------------------------------------

// Claims the next iteration of `job` (pool lock held); unlinks the job once fully claimed.
static int32_t claim_locked(par_job *job) {
    int32_t idx = job->next++;
    if (job->next == job->extent) {
        par_job **link = &pool.head;
        par_job *prev = NULL;
        while (*link && *link != job) {
            prev = *link;
            link = &(*link)->next_job;
        }
        if (*link) {
            *link = job->next_job;
            if (pool.tail == job) {
                pool.tail = prev;
            }
        }
    }
    return job->min + idx;
}

static void run_task(par_job *job, int32_t idx) {
    if (atomic_load_explicit(&job->result, memory_order_relaxed) != 0) {
        return;  // an earlier task failed: skip
    }
    tally_set_current_context(job->caller_ctx);
    tls_task_depth++;
    int32_t r = job->f(job->user_context, idx, job->closure);
    tls_task_depth--;
    if (r != 0) {
        int32_t expected = 0;
        atomic_compare_exchange_strong(&job->result, &expected, r);
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    tls_is_worker = 1;
    pthread_mutex_lock(&pool.lock);
    while (!pool.shutting_down) {
        par_job *job = pool.head;
        if (!job) {
            pthread_cond_wait(&pool.work_cond, &pool.lock);
            continue;
        }
        int32_t idx = claim_locked(job);
        pthread_mutex_unlock(&pool.lock);
        run_task(job, idx);
        tally_set_current_context(NULL);
        pthread_mutex_lock(&pool.lock);
        if (++job->finished == job->extent) {
            pthread_cond_broadcast(&pool.done_cond);
        }
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

static int32_t parse_thread_count(const char *s) {
    if (!s || !*s) {
        return 0;
    }
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v <= 0) {
        return 0;
    }
    return v > TALLY_MAX_THREADS ? TALLY_MAX_THREADS : (int32_t)v;
}

// Threads (caller included) the pool should use (pool lock held).
static int32_t wanted_threads_locked(void) {
    if (pool.desired_threads > 0) {
        return pool.desired_threads;
    }
    if (pool.default_threads == 0) {
        int32_t n = parse_thread_count(getenv("TALLY_NUM_THREADS"));
        if (n == 0) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            n = cores > 0 ? (int32_t)(cores > TALLY_MAX_THREADS ? TALLY_MAX_THREADS : cores) : 1;
        }
        pool.default_threads = n;
    }
    return pool.default_threads;
}

// Starts workers up to the wanted count (pool lock held). Failures leave fewer workers: the
// callers still run every iteration, so this only costs parallelism; it is said once per pool
// start (a warning through halide_print).
static void ensure_workers_locked(void) {
    if (pool.shutting_down) {
        return;
    }
    int32_t want = wanted_threads_locked() - 1;
    if (pool.num_workers >= want) {
        return;
    }
    while (pool.num_workers < want) {
        int err = tally_thread_create(&pool.threads[pool.num_workers], worker_main, NULL);
        if (err != 0) {
            if (!pool.warned_thread_failure) {
                pool.warned_thread_failure = 1;
                char msg[160];
                snprintf(msg, sizeof(msg),
                         "tally: warning: could not start a thread pool worker (%s); parallel "
                         "loops run on %d thread(s)\n",
                         strerror(err), (int)pool.num_workers + 1);
                halide_print(NULL, msg);
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
        // Nested loop: run serially on this thread.
        for (int32_t i = 0; i < extent; i++) {
            tls_task_depth++;
            int32_t r = f(user_context, min + i, closure);
            tls_task_depth--;
            tally_set_current_context(saved_ctx);
            if (r != 0) {
                return r;
            }
        }
        return 0;
    }

    par_job job;
    job.f = f;
    job.user_context = user_context;
    job.closure = closure;
    job.min = min;
    job.extent = extent;
    job.next = 0;
    job.finished = 0;
    atomic_init(&job.result, 0);
    job.next_job = NULL;
    job.caller_ctx = saved_ctx;

    pthread_mutex_lock(&pool.lock);
    ensure_workers_locked();
    if (extent > 1 && pool.num_workers > 0) {
        if (pool.tail) {
            pool.tail->next_job = &job;
        } else {
            pool.head = &job;
        }
        pool.tail = &job;
        pthread_cond_broadcast(&pool.work_cond);
    }
    while (job.next < job.extent) {
        int32_t idx = claim_locked(&job);
        pthread_mutex_unlock(&pool.lock);
        run_task(&job, idx);
        tally_set_current_context(saved_ctx);
        pthread_mutex_lock(&pool.lock);
        job.finished++;
    }
    while (job.finished < job.extent) {
        pthread_cond_wait(&pool.done_cond, &pool.lock);
    }
    pthread_mutex_unlock(&pool.lock);
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
    pool.shutting_down = 1;
    pthread_cond_broadcast(&pool.work_cond);
    pthread_mutex_unlock(&pool.lock);
    for (int32_t i = 0; i < n; i++) {
        pthread_join(pool.threads[i], NULL);
    }
    pthread_mutex_lock(&pool.lock);
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
