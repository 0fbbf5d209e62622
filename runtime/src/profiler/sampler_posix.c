// The samplers: a pthread (default) and a POSIX timer signal (profile_by_timer), and the tables of
// live runs they sample. Each sample applies the sampling rule (sampling.c) to one instance.
//
// Live tables: each mode has a fixed array of entries {state, instance}. An entry is FREE, BUSY
// (being filled or emptied by start/end), LIVE, or SAMPLING (a sampler holds the instance's
// sampling right). A sampler takes the right with a LIVE -> SAMPLING compare-and-swap and gives it
// back by storing LIVE; tally_profiler_end takes it for good with LIVE -> BUSY, spinning while a
// sample is in progress (a microsecond). No locks are involved, which is what makes the signal
// handler possible: it only does atomics, clock_gettime and plain stores to the instance it holds.
// The handler never waits, so a thread interrupted while spinning in end cannot deadlock.
//
// Sampler thread: sleeps to absolute deadlines interval_us apart (a condition variable on
// CLOCK_MONOTONIC, so shutdown can wake it), then samples every live instance; each sample bills
// the real time since that instance's previous sample, so late wake-ups are billed correctly. With
// no live instance it blocks on a condition variable.
//
// Timer: one process-wide timer_create(CLOCK_MONOTONIC, SIGEV_SIGNAL) timer delivering SIGPROF,
// armed while timer-mode runs are live. It measures wall time (unlike ITIMER_PROF, which is tick
// based and counts CPU time). The handler is installed once and never removed (a pending SIGPROF
// with the default disposition would kill the process); SIGPROF signals that are not from our
// timer go to the previously installed handler, if any.

#include "profiler/sampler_posix.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/error.h"
#include "core/fault.h"
#include "profiler/run.h"
#include "profiler/sampling.h"
#include "tally_runtime.h"
#include "tally_runtime_testing.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ENTRY_FREE = 0, ENTRY_BUSY = 1, ENTRY_LIVE = 2, ENTRY_SAMPLING = 3 };

typedef struct live_entry {
    _Atomic uint32_t state;
    _Atomic(tally_instance *) inst;
} live_entry;

typedef struct live_table {
    live_entry entries[TALLY_PROFILER_MAX_LIVE];
    _Atomic int32_t high_water;  // 1 + highest index ever used
    _Atomic int32_t count;       // LIVE or SAMPLING entries
} live_table;

static live_table thread_table, timer_table;

static int32_t table_add(live_table *t, tally_instance *inst) {
    for (int32_t i = 0; i < TALLY_PROFILER_MAX_LIVE; i++) {
        live_entry *e = &t->entries[i];
        uint32_t expected = ENTRY_FREE;
        if (atomic_load_explicit(&e->state, memory_order_relaxed) == ENTRY_FREE &&
            atomic_compare_exchange_strong(&e->state, &expected, ENTRY_BUSY)) {
            atomic_store_explicit(&e->inst, inst, memory_order_relaxed);
            int32_t hw = atomic_load(&t->high_water);
            while (hw < i + 1 && !atomic_compare_exchange_weak(&t->high_water, &hw, i + 1)) {
            }
            atomic_fetch_add(&t->count, 1);
            atomic_store_explicit(&e->state, ENTRY_LIVE, memory_order_release);
            return i;
        }
    }
    return -1;
}

static void table_remove(live_table *t, int32_t i) {
    live_entry *e = &t->entries[i];
    int spins = 0;
    for (;;) {
        uint32_t expected = ENTRY_LIVE;
        if (atomic_compare_exchange_weak_explicit(&e->state, &expected, ENTRY_BUSY,
                                                  memory_order_acquire, memory_order_relaxed)) {
            break;
        }
        if (++spins > 64) {
            sched_yield();
        }
    }
    atomic_store_explicit(&e->inst, NULL, memory_order_relaxed);
    atomic_fetch_sub(&t->count, 1);
    atomic_store_explicit(&e->state, ENTRY_FREE, memory_order_release);
}

// Async-signal-safe.
static void table_sample_all(live_table *t) {
    int32_t hw = atomic_load_explicit(&t->high_water, memory_order_acquire);
    for (int32_t i = 0; i < hw; i++) {
        live_entry *e = &t->entries[i];
        uint32_t expected = ENTRY_LIVE;
        if (atomic_load_explicit(&e->state, memory_order_relaxed) == ENTRY_LIVE &&
            atomic_compare_exchange_strong_explicit(&e->state, &expected, ENTRY_SAMPLING,
                                                    memory_order_acquire, memory_order_relaxed)) {
            tally_instance *inst = atomic_load_explicit(&e->inst, memory_order_relaxed);
            tally_sample_instance(inst, tally_now_ns());
            atomic_store_explicit(&e->state, ENTRY_LIVE, memory_order_release);
        }
    }
}

// Like table_sample_all, but waits for entries another sampler holds instead of skipping them, so
// that a test which samples by hand knows its sample covers everything up to now. Not for the
// signal handler.
static void table_sample_all_waiting(live_table *t) {
    int32_t hw = atomic_load_explicit(&t->high_water, memory_order_acquire);
    for (int32_t i = 0; i < hw; i++) {
        live_entry *e = &t->entries[i];
        for (;;) {
            uint32_t state = atomic_load_explicit(&e->state, memory_order_acquire);
            if (state == ENTRY_SAMPLING) {
                sched_yield();
                continue;
            }
            if (state != ENTRY_LIVE) {
                break;
            }
            if (atomic_compare_exchange_weak_explicit(&e->state, &state, ENTRY_SAMPLING,
                                                      memory_order_acquire, memory_order_relaxed)) {
                tally_instance *inst = atomic_load_explicit(&e->inst, memory_order_relaxed);
                tally_sample_instance(inst, tally_now_ns());
                atomic_store_explicit(&e->state, ENTRY_LIVE, memory_order_release);
                break;
            }
        }
    }
}

void tally_testing_sample_now(void) {
    table_sample_all_waiting(&thread_table);
    table_sample_all_waiting(&timer_table);
}

int32_t tally_testing_live_instances(void) {
    return atomic_load(&thread_table.count) + atomic_load(&timer_table.count);
}

// ---- interval -------------------------------------------------------------------------

static _Atomic uint32_t interval_us;  // 0 = not read from the environment yet

static uint32_t clamp_interval(uint64_t us) {
    return us < 10 ? 10 : us > 1000000 ? 1000000 : (uint32_t)us;
}

uint32_t tally_profiler_get_interval_us(void) {
    uint32_t us = atomic_load(&interval_us);
    if (us == 0) {
        uint64_t v = (uint64_t)tally_env_int("TALLY_PROFILE_INTERVAL_US", 10, 1000000, 1000,
                                             "1000, the default");
        uint32_t expected = 0;
        atomic_compare_exchange_strong(&interval_us, &expected, clamp_interval(v));
        us = atomic_load(&interval_us);
    }
    return us;
}

// ---- sampler thread and timer state ---------------------------------------------------

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;     // the sampler thread: instances arrived, or stop
    pthread_cond_t stopped;  // registrations waiting for a shutdown to finish
    pthread_t thread;
    int running;
    int stop;
    int stopping;
    // timer (under lock)
    int handler_installed;
    int timer_created;
    int timer_armed;
    timer_t timer;
    struct sigaction previous_action;
} sampler = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct timespec ns_to_timespec(uint64_t ns) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

// The sampler's condition variables wait on CLOCK_MONOTONIC, so tick deadlines are immune to
// wall-clock changes; they need a dynamic initialization (also redone in a forked child).
static void init_conds(void) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&sampler.wake, &attr);
    pthread_cond_init(&sampler.stopped, &attr);
    pthread_condattr_destroy(&attr);
}

static pthread_once_t conds_once = PTHREAD_ONCE_INIT;

static void *sampler_main(void *arg) {
    (void)arg;
    // The sampler thread must not take the timer's signal: keep it for the threads doing work.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    uint64_t next = tally_monotonic_ns();
    pthread_mutex_lock(&sampler.lock);
    for (;;) {
        while (!sampler.stop && atomic_load(&thread_table.count) == 0) {
            pthread_cond_wait(&sampler.wake, &sampler.lock);
            next = tally_monotonic_ns();
        }
        uint64_t interval = (uint64_t)tally_profiler_get_interval_us() * 1000u;
        next += interval;
        uint64_t now = tally_monotonic_ns();
        if (next + interval < now) {
            next = now;  // fell behind (suspended, overloaded): do not burst to catch up
        }
        // Sleep until the deadline; a stop request wakes us early.
        struct timespec deadline = ns_to_timespec(next);
        while (!sampler.stop && tally_monotonic_ns() < next) {
            pthread_cond_timedwait(&sampler.wake, &sampler.lock, &deadline);
        }
        if (sampler.stop) {
            break;
        }
        pthread_mutex_unlock(&sampler.lock);
        table_sample_all(&thread_table);
        pthread_mutex_lock(&sampler.lock);
    }
    pthread_mutex_unlock(&sampler.lock);
    return NULL;
}

// The tag in si_value that marks SIGPROF signals from our timer.
static char timer_tag;

static void on_timer_signal(int sig, siginfo_t *info, void *uctx) {
    int saved_errno = errno;
    if (info && info->si_code == SI_TIMER && info->si_value.sival_ptr == &timer_tag) {
        table_sample_all(&timer_table);
    } else if (sampler.previous_action.sa_flags & SA_SIGINFO) {
        if (sampler.previous_action.sa_sigaction) {
            sampler.previous_action.sa_sigaction(sig, info, uctx);
        }
    } else if (sampler.previous_action.sa_handler != SIG_DFL &&
               sampler.previous_action.sa_handler != SIG_IGN &&
               sampler.previous_action.sa_handler != NULL) {
        sampler.previous_action.sa_handler(sig);
    }
    errno = saved_errno;
}

static int arm_timer_locked(uint32_t us) {
    struct itimerspec spec;
    spec.it_interval = ns_to_timespec((uint64_t)us * 1000u);
    spec.it_value = spec.it_interval;
    return timer_settime(sampler.timer, 0, &spec, NULL);
}

static void disarm_timer_locked(void) {
    if (sampler.timer_created && sampler.timer_armed) {
        struct itimerspec spec;
        memset(&spec, 0, sizeof(spec));
        timer_settime(sampler.timer, 0, &spec, NULL);
        sampler.timer_armed = 0;
    }
}

// Sets up the handler and timer and arms it (sampler lock held). Returns 0 or an error code.
static int32_t ensure_timer_locked(void *user_context) {
    if (!sampler.handler_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_timer_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGPROF, &sa, &sampler.previous_action) != 0) {
            return tally_report_error(user_context, TALLY_ERROR_TIMER_FAILED,
                                      "tally profiler: cannot install the SIGPROF handler: %s",
                                      strerror(errno));
        }
        sampler.handler_installed = 1;
    }
    if (!sampler.timer_created) {
        struct sigevent sev;
        memset(&sev, 0, sizeof(sev));
        sev.sigev_notify = SIGEV_SIGNAL;
        sev.sigev_signo = SIGPROF;
        sev.sigev_value.sival_ptr = &timer_tag;
        if (timer_create(CLOCK_MONOTONIC, &sev, &sampler.timer) != 0) {
            return tally_report_error(user_context, TALLY_ERROR_TIMER_FAILED,
                                      "tally profiler: timer_create failed: %s", strerror(errno));
        }
        sampler.timer_created = 1;
    }
    if (!sampler.timer_armed) {
        if (arm_timer_locked(tally_profiler_get_interval_us()) != 0) {
            return tally_report_error(user_context, TALLY_ERROR_TIMER_FAILED,
                                      "tally profiler: timer_settime failed: %s", strerror(errno));
        }
        sampler.timer_armed = 1;
    }
    return 0;
}

// Starts the sampler thread if needed (sampler lock held). Returns 0 or an error code.
static int32_t ensure_thread_locked(void *user_context) {
    if (sampler.running) {
        return 0;
    }
    int err = tally_thread_create(&sampler.thread, sampler_main, NULL);
    if (err != 0) {
        return tally_report_error(user_context, TALLY_ERROR_THREAD_START_FAILED,
                                  "tally profiler: cannot start the sampler thread: %s",
                                  strerror(err));
    }
    sampler.running = 1;
    return 0;
}

int32_t tally_sampler_register(void *user_context, tally_instance *inst) {
    int timer_mode = (inst->flags & TALLY_PROFILER_FLAG_TIMER) != 0;
    pthread_once(&conds_once, init_conds);
    pthread_mutex_lock(&sampler.lock);
    while (sampler.stopping) {
        pthread_cond_wait(&sampler.stopped, &sampler.lock);
    }
    int32_t r = timer_mode ? ensure_timer_locked(user_context) : ensure_thread_locked(user_context);
    if (r == 0) {
        inst->live_index = table_add(timer_mode ? &timer_table : &thread_table, inst);
        if (inst->live_index < 0) {
            r = tally_report_error(user_context, TALLY_ERROR_TOO_MANY_INSTANCES,
                                   "tally profiler: more than %d profiled runs in flight",
                                   TALLY_PROFILER_MAX_LIVE);
            if (timer_mode && atomic_load(&timer_table.count) == 0) {
                disarm_timer_locked();
            }
        } else if (!timer_mode) {
            pthread_cond_signal(&sampler.wake);
        }
    }
    pthread_mutex_unlock(&sampler.lock);
    return r;
}

void tally_sampler_unregister(tally_instance *inst) {
    int timer_mode = (inst->flags & TALLY_PROFILER_FLAG_TIMER) != 0;
    live_table *t = timer_mode ? &timer_table : &thread_table;
    table_remove(t, inst->live_index);
    if (timer_mode) {
        pthread_mutex_lock(&sampler.lock);
        if (atomic_load(&timer_table.count) == 0) {
            disarm_timer_locked();
        }
        pthread_mutex_unlock(&sampler.lock);
    }
}

void tally_profiler_set_interval_us(uint32_t us) {
    pthread_mutex_lock(&sampler.lock);
    atomic_store(&interval_us, clamp_interval(us));
    if (sampler.timer_armed) {
        arm_timer_locked(atomic_load(&interval_us));
    }
    pthread_mutex_unlock(&sampler.lock);
}

void tally_sampler_shutdown(void) {
    pthread_once(&conds_once, init_conds);
    pthread_mutex_lock(&sampler.lock);
    while (sampler.stopping) {
        pthread_cond_wait(&sampler.stopped, &sampler.lock);
    }
    if (sampler.timer_created) {
        disarm_timer_locked();
        timer_delete(sampler.timer);
        sampler.timer_created = 0;
    }
    if (!sampler.running) {
        pthread_mutex_unlock(&sampler.lock);
        return;
    }
    sampler.stop = 1;
    sampler.stopping = 1;
    pthread_cond_broadcast(&sampler.wake);
    pthread_t thread = sampler.thread;
    pthread_mutex_unlock(&sampler.lock);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&sampler.lock);
    sampler.running = 0;
    sampler.stop = 0;
    sampler.stopping = 0;
    pthread_cond_broadcast(&sampler.stopped);
    pthread_mutex_unlock(&sampler.lock);
}

uint64_t tally_testing_sampler_cpu_ns(void) {
    uint64_t ns = 0;
    pthread_mutex_lock(&sampler.lock);
    if (sampler.running) {
        clockid_t cid;
        struct timespec ts;
        if (pthread_getcpuclockid(sampler.thread, &cid) == 0 && clock_gettime(cid, &ts) == 0) {
            ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        }
    }
    pthread_mutex_unlock(&sampler.lock);
    return ns;
}

// ---- fork -----------------------------------------------------------------------------

void tally_sampler_fork_prepare(void) {
    pthread_mutex_lock(&sampler.lock);
}

void tally_sampler_fork_parent(void) {
    pthread_mutex_unlock(&sampler.lock);
}

static void release_held_entries(live_table *t) {
    for (int32_t i = 0; i < TALLY_PROFILER_MAX_LIVE; i++) {
        uint32_t expected = ENTRY_SAMPLING;
        atomic_compare_exchange_strong(&t->entries[i].state, &expected, ENTRY_LIVE);
    }
}

void tally_sampler_fork_child(void) {
    // The child has neither the sampler thread nor the timer (timers are not inherited); samples
    // in progress on vanished threads will never finish, so give their entries back.
    sampler.running = 0;
    sampler.stop = 0;
    sampler.stopping = 0;
    sampler.timer_created = 0;
    sampler.timer_armed = 0;
    init_conds();
    release_held_entries(&thread_table);
    release_held_entries(&timer_table);
    pthread_mutex_unlock(&sampler.lock);
}
