/** \file
 * The public surface of the lowering passes: one entry point per pass, alphabetical. Each is
 * documented in its own header under passes/; this header re-declares them for users of the
 * library.
 */
#ifndef TALLY_PASSES_H
#define TALLY_PASSES_H

#include "tally/Module.h"

namespace tally {

/** See passes/InjectHostDevCopies.h. */
Module inject_host_dev_copies(const Module &m);

struct ProfilingOptions {
    /** Add a buffer-free halide_device_sync_global after each kernel launch and copy to the
     * device. Switching it off exists for one purpose: to show the misattribution it fixes. */
    bool inject_device_sync = true;
};

/** See passes/InjectProfiling.h. */
Module inject_profiling(const Module &m, const ProfilingOptions &opts = {});

/** See passes/OffloadGpuLoops.h. */
Module offload_gpu_loops(const Module &m);

}  // namespace tally

#endif  // TALLY_PASSES_H
