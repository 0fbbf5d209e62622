/** \file
 * The CUDA back end: a device kernel to PTX with LLVM's NVPTX target.
 */
#ifndef TALLY_CODEGEN_CODEGEN_PTX_H
#define TALLY_CODEGEN_CODEGEN_PTX_H

#include "codegen/CodeGen_Host.h"
#include "tally/Module.h"

namespace tally {

/** Compiles one kernel (device API CUDA) to PTX for the target's compute capability (sm_75
 * unless the target asks for another). Buffers are passed as device pointers, scalars by value
 * (see tally_kernel_source in tally_runtime.h). Throws CompileError on IR it cannot compile. */
CompiledKernel compile_ptx_kernel(const Kernel &k, const Target &t);

}  // namespace tally

#endif  // TALLY_CODEGEN_CODEGEN_PTX_H
