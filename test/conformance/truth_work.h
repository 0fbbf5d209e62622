/* The work of the truth pipelines (tools/corpus/CorpusDefs.cpp: truth_chain, truth_inner,
 * truth_par), defined in extern_stages.c: each element of a stage calls tally_truth_work, and a
 * benchmark reads from the other three what the machine took from that work. A library that
 * links its own copy of extern_stages.c (Halide's corpus library) has its own figures. */

#ifndef TALLY_CONFORMANCE_TRUTH_WORK_H
#define TALLY_CONFORMANCE_TRUTH_WORK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Returns v + 1 once the calling thread has run for ns more nanoseconds of its chained
 * deadline. `first`: TALLY_TRUTH_CONTINUE, TALLY_TRUTH_RESTART (the chain starts afresh at this
 * call: a run's first call, on the pipeline's calling thread), TALLY_TRUTH_AFTER_JOIN (the chain
 * continues, and a gap before this call is time lost by the thread's previous call's ns: the
 * stage before, whose parallel loop the thread waited for there) or TALLY_TRUTH_FORK (the first
 * call of a parallel task other than the calling thread's own: on a pool thread the task's chain
 * starts afresh and its gaps are not the run's; on the calling thread, which took the task
 * itself, the chain continues and the task's calls, their ns included, are time lost to the run
 * by their ns, until the next RESTART or AFTER_JOIN). */
int32_t tally_truth_work(int32_t v, int32_t ns, int32_t first);

#define TALLY_TRUTH_CONTINUE 0
#define TALLY_TRUTH_RESTART 1
#define TALLY_TRUTH_AFTER_JOIN 2
#define TALLY_TRUTH_FORK 3

/** The wall time lost, since the last reset, by calls made with this ns: the sum of the gaps of
 * over TALLY_TRUTH_GAP_NS between a thread's consecutive clock reads in and between its calls,
 * and the whole time of the forked calls that the calling thread ran itself. */
int64_t tally_truth_lost_ns(int32_t ns);

/** Time lost by calls whose ns found no room in the table (more than TALLY_TRUTH_KEYS values
 * since the last reset): a benchmark that reads a nonzero figure cannot trust the others. */
int64_t tally_truth_lost_unkeyed_ns(void);

/** Forgets every lost time; only while no call runs. */
void tally_truth_reset_lost(void);

/** A gap between two clock reads of one thread longer than this is time lost to something else
 * (a preemption, an interrupt), not the work's own. */
#define TALLY_TRUTH_GAP_NS 1000

/** How many distinct ns values the lost-time table holds between resets. */
#define TALLY_TRUTH_KEYS 16

#ifdef __cplusplus
}
#endif

#endif  // TALLY_CONFORMANCE_TRUTH_WORK_H
