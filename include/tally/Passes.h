/** \file
 * The lowering passes: one entry point per pass, alphabetical, each with what it inserts or
 * removes, where it runs, and the invariants it assumes and establishes. This is the only
 * declaration of each entry point: passes/<Name>.cpp defines it, lower() (tally/Lower.h) runs
 * them in order, and tally-opt exposes each under its kebab-case name.
 */
#ifndef TALLY_PASSES_H
#define TALLY_PASSES_H

#include "tally/Module.h"

namespace tally {

/** Makes data movement between host and device explicit in every function of `m`.
 *
 * Inserts, each as a checked call (`let r = call(...)` then `assert(r == 0, r)`):
 * `halide_copy_to_device(X.buffer, <interface>)` before device code (an outermost gpu_block loop
 * nest) reads or writes a buffer whose current contents are on the host (a write may be partial,
 * and the copy is what gives a buffer argument its device allocation; the runtime moves no data
 * unless the host copy is dirty); `halide_copy_to_host(X.buffer)` before host code reads or
 * writes a buffer whose current contents are on the device, and at the end of the function for
 * output buffers last written on the device. Copies of buffers a loop only reads are hoisted
 * in front of the loop; dirty-bit updates after device
 * and host writes; and, for allocations that device code touches, a buffer descriptor
 * `X.buffer`, `halide_device_malloc` after the allocation and `halide_device_free` before its
 * end. No copy is inserted where the data is already where it is read; a buffer that bounces
 * host -> device -> host -> device is copied at every bounce.
 *
 * Runs first in lower(), before offload-gpu-loops (it needs the GPU loops in place).
 * Assumes: a verified module; device code is marked by gpu_block loops with a device API.
 * Establishes: every buffer read by device code has been copied to the device; every buffer
 * read on the host after a device write has been copied back. Running it on its own output
 * changes nothing (copies already present are recognised).
 */
Module inject_host_dev_copies(const Module &m);

struct ProfilingOptions {
    /** Add a buffer-free halide_device_sync_global after each kernel launch and copy to the
     * device. Switching it off exists for one purpose: to show the misattribution it fixes. */
    bool inject_device_sync = true;
};

/** Instruments every pipeline function of `m` for the Tally profiler when the module's target
 * has `profile`, `profile_by_timer` or `profile_timestamps`; otherwise returns `m` unchanged
 * (same nodes). Under `profile_timestamps` no device sync is injected (as if
 * inject_device_sync were false); everything else is the same.
 *
 * Inserts (see ARCHITECTURE.md, "Profiling semantics", which the golden tests pin rule by rule):
 * the slot table and `tally_profiler_start` / `tally_profiler_end` bracketing the body (the end
 * also on every error exit); a slot switch entering each `produce f` and a restore leaving each
 * `consume f`; a `<f> (copy to device)` / `<f> (copy to host)` slot around each copy call and
 * its check; one `halide_device_sync_global` with its own assert after each kernel launch's
 * assert and after each copy to the device; memory accounting for allocations; worker-thread
 * bookkeeping in parallel loops.
 *
 * Runs last in lower(), after offload-gpu-loops. Idempotent: a function already instrumented
 * (it calls tally_profiler_start) is left alone. Deterministic: slot ids follow walk order.
 */
Module inject_profiling(const Module &m, const ProfilingOptions &opts = {});

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
 * Assumes: GPU loops carry a device API that the target supports (CUDA, OpenCL or Vulkan;
 * Default_GPU means the target's). Establishes: no gpu_block loop remains in any function.
 * Running it again changes nothing.
 */
Module offload_gpu_loops(const Module &m);

/** Replaces every GPU API the text names (loop APIs, `halide_<api>_device_interface()` calls)
 * that the module's target does not enable by the target's GPU API, and records a note in
 * Module::notes. A user error, naming both, when the target has no GPU API with a Tally back
 * end, or when the text already launches kernels compiled for the API it would replace.
 * Runs first in lower(). Running it again changes nothing. */
Module retarget_gpu_api(const Module &m);

}  // namespace tally

#endif  // TALLY_PASSES_H
