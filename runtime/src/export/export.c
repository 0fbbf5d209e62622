// The exports the environment asks for when the process exits: TALLY_PROFILE_PPROF=<path> writes
// the pprof profile (export_pprof.c), TALLY_PROFILE_FOLDED=<path> the folded stacks
// (export_folded.c), TALLY_PROFILE_TRACE=<path> the timeline (export_trace.c, recorded since the
// first profiled run because the variable was set then). Like the report, they are written only
// when at least one profiled run finished; each failure is reported through halide_error and the
// first is returned (tally_profiler_write_exit_outputs passes it on; at exit it is dropped).

#include "export/export.h"
#include "core/env.h"
#include "tally_runtime.h"

#include <stdlib.h>

int32_t tally_export_at_exit(void *user_context) {
    const char *pprof = tally_env_string("TALLY_PROFILE_PPROF");
    const char *folded = tally_env_string("TALLY_PROFILE_FOLDED");
    const char *trace = tally_env_string("TALLY_PROFILE_TRACE");
    if (!pprof && !folded && !trace) {
        return 0;
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
        return 0;
    }
    int32_t r = 0, w;
    if (pprof && (w = tally_profiler_write_pprof(user_context, pprof)) != 0 && r == 0) {
        r = w;
    }
    if (folded && (w = tally_profiler_write_folded(user_context, folded)) != 0 && r == 0) {
        r = w;
    }
    if (trace && (w = tally_profiler_write_trace(user_context, trace)) != 0 && r == 0) {
        r = w;
    }
    return r;
}
