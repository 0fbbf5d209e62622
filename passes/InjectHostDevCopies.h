/** \file
 * The inject-host-dev-copies pass.
 */
#ifndef TALLY_PASSES_INJECTHOSTDEVCOPIES_H
#define TALLY_PASSES_INJECTHOSTDEVCOPIES_H

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

}  // namespace tally

#endif  // TALLY_PASSES_INJECTHOSTDEVCOPIES_H
