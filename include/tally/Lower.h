/** \file
 * The default lowering pipeline.
 */
#ifndef TALLY_LOWER_H
#define TALLY_LOWER_H

#include "tally/Module.h"
#include "tally/Passes.h"

namespace tally {

struct LowerOptions {
    ProfilingOptions profiling;
    /** Run the verifier after every pass (always on in debug builds). */
    bool verify_each_pass = true;
    /** 0: quiet; 2 or more: print the IR after each pass to stderr under a banner. */
    int debug_level = 0;
};

/** Lowers `m` for `target` (which replaces the module's target): retarget-gpu-api,
 * inject-host-dev-copies, offload-gpu-loops, then inject-profiling when the target asks for
 * profiling. Throws
 * CompileError when the target asks for a device API Tally has no back end for. */
Module lower(const Module &m, const Target &target, const LowerOptions &opts = {});

}  // namespace tally

#endif  // TALLY_LOWER_H
