/** \file
 * The device-kernel dispatcher: compiles every kernel of a lowered module with the back end of
 * its device API. Whoever sequences compilation (src/jit/) calls it first and hands the blobs
 * to the host code generator (codegen_host), so the host code generator never sees a device back
 * end, and the device back ends never see the host.
 */
#ifndef TALLY_CODEGEN_DEVICEKERNELS_H
#define TALLY_CODEGEN_DEVICEKERNELS_H

#include <vector>

#include "codegen/CompiledKernel.h"
#include "tally/Module.h"

namespace tally {

/** Compiles every kernel of `m` with the back end of its device API (Vulkan: SPIR-V; CUDA:
 * PTX), in the module's kernel order. Throws CompileError for an API without a back end. */
std::vector<CompiledKernel> compile_kernels(const Module &m);

}  // namespace tally

#endif  // TALLY_CODEGEN_DEVICEKERNELS_H
