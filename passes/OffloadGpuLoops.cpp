// Placeholder: returns its input until the pass lands.

#include "OffloadGpuLoops.h"

namespace tally {

Module offload_gpu_loops(const Module &m) { return m; }

}  // namespace tally
