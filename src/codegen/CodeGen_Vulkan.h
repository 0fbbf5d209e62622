/** \file
 * The Vulkan back end: a device kernel to a SPIR-V compute shader.
 */
#ifndef TALLY_CODEGEN_CODEGEN_VULKAN_H
#define TALLY_CODEGEN_CODEGEN_VULKAN_H

#include "codegen/CompiledKernel.h"
#include "tally/Module.h"

namespace tally {

/** Compiles one kernel (device API Vulkan) to SPIR-V for Vulkan 1.1. Buffers become storage
 * buffers at bindings 0..n-1 of set 0, scalars one push-constant block (see
 * tally_kernel_source in tally_runtime.h). Throws CompileError on IR it cannot compile. */
CompiledKernel compile_vulkan_kernel(const Kernel &k, const Target &t);

}  // namespace tally

#endif  // TALLY_CODEGEN_CODEGEN_VULKAN_H
