/* The C functions of the conformance corpus's extern stages (Halide's define_extern), one home
 * for both sides: tools/halide14/build_library.sh links this file into Halide's corpus library
 * (the references), and the harness builds it into libconformance_externs.so, which tally-run
 * (--extern-lib) and the AOT check load for Tally. Each follows Halide's extern-stage protocol:
 * called with input buffers whose host is NULL, it is a bounds query and fills in the region of
 * each input it needs for the output's region; otherwise it computes the output's region. */

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tally_runtime.h"

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

/* The work of the truth pipelines (truth_chain, truth_inner), whose stages' times are set in
 * advance: each element calls this with the nanoseconds it costs, and it returns v + 1 once the
 * calling thread's deadline, advanced by ns, has passed. The deadline is a chain per thread,
 * started afresh by the run's first element (`first` nonzero: now + ns) and only advanced after
 * that: the calls of a run end at the run's start plus the sum of their ns, whatever the code
 * between them costs or however long the thread was preempted, since a call that starts late
 * returns as soon as its deadline has passed and the calls after it catch up. So a stage's time
 * is its elements' ns, not its elements' ns plus call overheads or a preemption's length (unless
 * the stage's last calls end past their deadlines: the benchmark checks the run's time).
 * CLOCK_MONOTONIC is the clock both Halide's and Tally's code are judged by. An elemental call
 * (Halide's extern "C" function returning a value), not an extern stage. */
static int64_t truth_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int32_t tally_truth_work(int32_t v, int32_t ns, int32_t first) {
    static __thread int64_t deadline;
    deadline = (first ? truth_now_ns() : deadline) + ns;
    while (truth_now_ns() < deadline) {
    }
    return v + 1;
}
