// The runtime's error reports and its own diagnostics (error.c); the hooks and Halide's
// halide_error_* helpers are public (tally_runtime.h). Layer core (runtime/layers.txt). Not
// installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_CORE_ERROR_H
#define TALLY_RUNTIME_SRC_CORE_ERROR_H

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// The runtime's own text (the on-demand report, warnings, Vulkan's debug messages): through the
// print handler where one is installed (so a program capturing what Halide's runtime prints gets
// it all, as with Halide's), else to stderr, where ARCHITECTURE.md puts the report; halide_print,
// what a pipeline prints, goes to stdout by default, as Halide's does.
void tally_print_diagnostic(void *user_context, const char *msg);

// Formats a message (printf-style) into a stack buffer, reports it through halide_error and
// returns `code`.
int32_t tally_report_error(void *user_context, int32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_CORE_ERROR_H
