/* The C functions of the conformance corpus's extern stages (Halide's define_extern), one home
 * for both sides: tools/halide14/build_library.sh links this file into Halide's corpus library
 * (the references), and the harness builds it into libconformance_externs.so, which tally-run
 * (--extern-lib) and the AOT check load for Tally. Each follows Halide's extern-stage protocol:
 * called with input buffers whose host is NULL, it is a bounds query and fills in the region of
 * each input it needs for the output's region; otherwise it computes the output's region. */

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tally_runtime.h"
#include "truth_work.h"

static int is_bounds_query(const halide_buffer_t *b) {
    return b->host == NULL && b->device == 0;
}

/* out(x, y) = in(x + 1, y) - in(x, y) + offset over int32: needs one more column of `in` than
 * the output has. */
int tally_corpus_forward_diff(halide_buffer_t *in, int32_t offset, halide_buffer_t *out) {
    if (in->dimensions != 2 || out->dimensions != 2 || in->type.bits != 32 ||
        out->type.bits != 32) {
        return -1;
    }
    if (is_bounds_query(in)) {
        in->dim[0].min = out->dim[0].min;
        in->dim[0].extent = out->dim[0].extent + 1;
        in->dim[1].min = out->dim[1].min;
        in->dim[1].extent = out->dim[1].extent;
        return 0;
    }
    const halide_dimension_t *id = in->dim, *od = out->dim;
    for (int32_t y = od[1].min; y < od[1].min + od[1].extent; y++) {
        for (int32_t x = od[0].min; x < od[0].min + od[0].extent; x++) {
            const int32_t *row =
                (const int32_t *)in->host + (ptrdiff_t)(y - id[1].min) * id[1].stride;
            int32_t a = row[(ptrdiff_t)(x - id[0].min) * id[0].stride];
            int32_t b = row[(ptrdiff_t)(x + 1 - id[0].min) * id[0].stride];
            ((int32_t *)out->host)[(ptrdiff_t)(x - od[0].min) * od[0].stride +
                                   (ptrdiff_t)(y - od[1].min) * od[1].stride] = b - a + offset;
        }
    }
    return 0;
}

/* The work of the truth pipelines (truth_work.h), whose stages' times are set in advance: each
 * element calls tally_truth_work with the nanoseconds it costs, and it returns v + 1 once the
 * calling thread's deadline, advanced by ns, has passed. The deadline is a chain per thread,
 * started afresh by a call with `first` nonzero (now + ns) and only advanced after that, so the
 * calls of a run end at its start plus the sum of their ns, whatever the code between them costs:
 * a call that starts a little late returns as soon as its deadline has passed and the calls after
 * it catch up.
 *
 * What the machine takes from the thread is no schedule's to set: a gap of over
 * TALLY_TRUTH_GAP_NS between two of the thread's clock reads (in a call's wait, or from one
 * call's return to the next call of its chain) is time lost to a preemption or an interrupt. It
 * pushes the deadline back by its length, so the calls still run for their ns, and it is added to
 * the time lost by calls with the same ns, where the benchmark reads it: a stage's truth is its
 * elements' ns plus its lost time, and a profiler that bills wall time bills both to it. A gap
 * between the last call of one stage and the first of the next is counted to the next (the
 * dispatch of a parallel loop, say), except where the next's first call says the gap is the
 * stage before's (TALLY_TRUTH_AFTER_JOIN: its thread waited there for the stage's parallel loop
 * to finish on other threads).
 *
 * A parallel stage's set time is its calling thread's part; the other tasks run beside it on pool
 * threads, and what they lose delays the run only through the calling thread's wait at the join,
 * which counts it. Their gaps are therefore not counted. But a pool thread may start too late for
 * its task (a hog on every core), and then the calling thread runs it too: that task's calls
 * (TALLY_TRUTH_FORK at its first) are then the run's time beyond its set time, ns and gaps alike,
 * counted to their ns, for the benchmark to add to their stage's truth.
 * CLOCK_MONOTONIC is the clock both Halide's and Tally's code are judged by. An elemental call
 * (Halide's extern "C" function returning a value), not an extern stage. */
static int64_t truth_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The lost times, keyed by ns + 1 (0: a free entry), claimed in order; truth_lost_unkeyed when
 * none is free. */
static struct {
    _Atomic int64_t key;
    _Atomic int64_t ns;
} truth_lost[TALLY_TRUTH_KEYS];
static _Atomic int64_t truth_lost_unkeyed;

static int64_t truth_key(int32_t ns) {
    return (int64_t)ns + 1 - (int64_t)INT32_MIN;  // never 0
}

static void truth_lose(int32_t ns, int64_t gap) {
    const int64_t key = truth_key(ns);
    for (int i = 0; i < TALLY_TRUTH_KEYS; i++) {
        int64_t k = atomic_load(&truth_lost[i].key);
        if (k == 0) {
            int64_t expected = 0;
            k = atomic_compare_exchange_strong(&truth_lost[i].key, &expected, key) ? key : expected;
        }
        if (k == key) {
            atomic_fetch_add(&truth_lost[i].ns, gap);
            return;
        }
    }
    atomic_fetch_add(&truth_lost_unkeyed, gap);
}

int32_t tally_truth_work(int32_t v, int32_t ns, int32_t first) {
    static __thread int64_t deadline, last;
    static __thread int32_t previous_ns;
    // The thread's chain is a run's (its calling thread's), a pool thread's task, or, between a
    // FORK and the next RESTART or AFTER_JOIN, a task the calling thread took itself.
    static __thread enum { CHAIN_RUN, CHAIN_POOL_TASK, CHAIN_TAKEN_TASK } chain;
    int64_t now = truth_now_ns();
    if (first == TALLY_TRUTH_FORK && (last == 0 || chain == CHAIN_POOL_TASK)) {
        chain = CHAIN_POOL_TASK;
        deadline = now;
    } else if (first == TALLY_TRUTH_RESTART || last == 0) {
        chain = CHAIN_RUN;
        deadline = now;
    } else {
        if (first == TALLY_TRUTH_FORK) {
            chain = CHAIN_TAKEN_TASK;
        }
        if (now - last > TALLY_TRUTH_GAP_NS) {
            if (chain != CHAIN_POOL_TASK) {
                truth_lose(first == TALLY_TRUTH_AFTER_JOIN ? previous_ns : ns, now - last);
            }
            deadline += now - last;
        }
        if (first == TALLY_TRUTH_AFTER_JOIN && chain == CHAIN_TAKEN_TASK) {
            chain = CHAIN_RUN;
        }
    }
    if (chain == CHAIN_TAKEN_TASK) {
        truth_lose(ns, ns);
    }
    previous_ns = ns;
    deadline += ns;
    while (now < deadline) {
        const int64_t t = truth_now_ns();
        if (t - now > TALLY_TRUTH_GAP_NS) {
            if (chain != CHAIN_POOL_TASK) {
                truth_lose(ns, t - now);
            }
            deadline += t - now;
        }
        now = t;
    }
    last = now;
    return v + 1;
}

int64_t tally_truth_lost_ns(int32_t ns) {
    const int64_t key = truth_key(ns);
    for (int i = 0; i < TALLY_TRUTH_KEYS; i++) {
        if (atomic_load(&truth_lost[i].key) == key) {
            return atomic_load(&truth_lost[i].ns);
        }
    }
    return 0;
}

int64_t tally_truth_lost_unkeyed_ns(void) {
    return atomic_load(&truth_lost_unkeyed);
}

void tally_truth_reset_lost(void) {
    for (int i = 0; i < TALLY_TRUTH_KEYS; i++) {
        atomic_store(&truth_lost[i].key, 0);
        atomic_store(&truth_lost[i].ns, 0);
    }
    atomic_store(&truth_lost_unkeyed, 0);
}
