/** \file
 * The CUDA back end: device kernels to PTX with LLVM's NVPTX target.
 */
#ifndef TALLY_CODEGEN_CODEGEN_PTX_H
#define TALLY_CODEGEN_CODEGEN_PTX_H

#include <string>

#include "codegen/CompiledKernel.h"
#include "tally/Module.h"

namespace tally {

/** Compiles one kernel (device API CUDA) to PTX for the target's compute capability (sm_75
 * unless the target asks for another). Buffers are passed as device pointers, scalars by value
 * (see tally_kernel_source in tally_runtime.h). Throws CompileError on IR it cannot compile. */
CompiledKernel compile_ptx_kernel(const Kernel &k, const Target &t);

/** Every CUDA kernel of a lowered module as one PTX module with one `.visible .entry` per
 * kernel, for the module target's compute capability; empty when it has none. What the public
 * compile_to_ptx (tally/Compiler.h) returns. Throws CompileError on IR it cannot compile. */
std::string compile_ptx_module(const Module &lowered);

}  // namespace tally

#endif  // TALLY_CODEGEN_CODEGEN_PTX_H
