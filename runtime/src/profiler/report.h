// The report (report.c) at process exit; on demand it is public (tally_runtime.h). Layer
// profiler.report (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_PROFILER_REPORT_H
#define TALLY_RUNTIME_SRC_PROFILER_REPORT_H

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// The report at process exit (stderr, stdout or TALLY_PROFILE_OUTPUT's file; TALLY_PROFILE_JSON),
// printed when at least one run finished. The caller has stopped the sampler.
void tally_report_at_exit(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_PROFILER_REPORT_H
