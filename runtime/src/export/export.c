// The exports the environment asks for when the process exits: TALLY_PROFILE_PPROF=<path> writes
// the pprof profile (export_pprof.c), TALLY_PROFILE_FOLDED=<path> the folded stacks
// (export_folded.c), TALLY_PROFILE_TRACE=<path> the timeline (export_trace.c, recorded since the
// first profiled run because the variable was set then). Like the report, they are written only
// when at least one profiled run finished, and failures are reported through halide_error (the
// process is exiting: nothing can be returned).

#include "export/export.h"
#include "tally_runtime.h"

#include <stdlib.h>

void tally_export_at_exit(void) {
    const char *pprof = getenv("TALLY_PROFILE_PPROF");
    const char *folded = getenv("TALLY_PROFILE_FOLDED");
    const char *trace = getenv("TALLY_PROFILE_TRACE");
    int want_pprof = pprof && *pprof;
    int want_folded = folded && *folded;
    int want_trace = trace && *trace;
    if (!want_pprof && !want_folded && !want_trace) {
        return;
    }
    uint64_t runs = 0;
    int32_t n = tally_profiler_num_pipelines();
    for (int32_t i = 0; i < n; i++) {
        tally_pipeline_stats ps;
        if (tally_profiler_get_pipeline_stats_by_index(i, &ps) == 0) {
            runs += ps.runs;
        }
    }
    if (runs == 0) {
        return;
    }
    if (want_pprof) {
        tally_profiler_write_pprof(NULL, pprof);
    }
    if (want_folded) {
        tally_profiler_write_folded(NULL, folded);
    }
    if (want_trace) {
        tally_profiler_write_trace(NULL, trace);
    }
}
