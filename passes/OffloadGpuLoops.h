/** \file
 * The offload-gpu-loops pass.
 */
#ifndef TALLY_PASSES_OFFLOADGPULOOPS_H
#define TALLY_PASSES_OFFLOADGPULOOPS_H

#include "tally/Module.h"

namespace tally {

/** Moves each outermost gpu_block loop nest of every function into a device Kernel of the
 * module and replaces it with a checked launch:
 * `let halide_<api>_run_result = halide_<api>_run(...)` then
 * `assert(halide_<api>_run_result == 0, halide_<api>_run_result)`.
 *
 * The kernel's arguments are the buffers the nest loads or stores (first) and the scalars it
 * uses free (second), each in order of first use. Kernel names are deterministic and readable:
 * `<func>_<loop>` from the enclosing producer and the outermost block loop, made unique by a
 * numeric suffix. Each kernel records its launch geometry (derive_kernel_geometry), whose
 * extents are the launch's block and thread counts; a nest whose geometry is ambiguous is a
 * user error located at the loop.
 *
 * Runs second in lower(), after inject-host-dev-copies and before inject-profiling.
 * Assumes: GPU loops carry a device API that the target supports (CUDA or Vulkan;
 * Default_GPU means the target's). Establishes: no gpu_block loop remains in any function.
 * Running it again changes nothing.
 */
Module offload_gpu_loops(const Module &m);

}  // namespace tally

#endif  // TALLY_PASSES_OFFLOADGPULOOPS_H
