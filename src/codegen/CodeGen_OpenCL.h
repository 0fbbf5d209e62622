/** \file
 * The OpenCL back end: a device kernel to OpenCL C source.
 */
#ifndef TALLY_CODEGEN_CODEGEN_OPENCL_H
#define TALLY_CODEGEN_CODEGEN_OPENCL_H

#include "codegen/CompiledKernel.h"
#include "tally/Module.h"

namespace tally {

/** Compiles one kernel (device API OpenCL) to OpenCL C 1.2 source defining `__kernel void
 * <kernel name>(...)`: buffers as `__global` pointers, then scalars by value (see
 * tally_kernel_source in tally_runtime.h). The driver builds it when it is first launched.
 * Throws CompileError on IR it cannot compile. */
CompiledKernel compile_opencl_kernel(const Kernel &k, const Target &t);

/** Every OpenCL kernel of `lowered`, its sources one after the other (one program);
 * compile_to_opencl_c (tally/Compiler.h) returns it. "" when there is none. */
std::string compile_opencl_module(const Module &lowered);

}  // namespace tally

#endif  // TALLY_CODEGEN_CODEGEN_OPENCL_H
