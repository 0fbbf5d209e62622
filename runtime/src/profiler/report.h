// The report (report.c) at process exit; on demand it is public (tally_runtime.h). Layer
// profiler.report (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_REPORT_H
#define TALLY_RUNTIME_SRC_PROFILER_REPORT_H

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// The report as at process exit (stderr, stdout or TALLY_PROFILE_OUTPUT's file, truncated;
// TALLY_PROFILE_JSON), printed when at least one run finished. Returns 0 or the first failure's
// code (each reported through halide_error); both outputs are attempted.
int32_t tally_report_at_exit(void *user_context);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_REPORT_H
