// Halide's profiler ABIs (halide_profiler.c): the run starts lifetime.c calls once it has installed
// the process hooks. Layer halide_abi (runtime/layers.txt). Not installed, not seen by generated
// code. C11.
#ifndef TALLY_RUNTIME_SRC_HALIDE_ABI_HALIDE_PROFILER_H
#define TALLY_RUNTIME_SRC_HALIDE_ABI_HALIDE_PROFILER_H

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// halide_profiler_pipeline_start without the process hooks (lifetime.c installs them first).
int32_t tally_halide_profiler_start(void *user_context, const char *pipeline_name,
                                    int32_t num_funcs, const uint64_t *func_names);

// halide_profiler_instance_start (Halide 21) without the process hooks.
int32_t tally_halide21_profiler_start(void *user_context, const char *pipeline_name,
                                      int32_t num_funcs, const uint64_t *func_names,
                                      void *instance);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_HALIDE_ABI_HALIDE_PROFILER_H
