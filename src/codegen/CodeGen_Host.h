/** \file
 * Host code generation: a lowered tally::Module to an LLVM 19 module.
 */
#ifndef TALLY_CODEGEN_CODEGEN_HOST_H
#define TALLY_CODEGEN_CODEGEN_HOST_H

#include <memory>
#include <vector>

#include "codegen/CompiledKernel.h"
#include "tally/Module.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace tally {

/** Emits every function of `m` as LLVM IR, plus for each pipeline function
 * `<name>_argv(void **args)`, which unpacks an argument array (buffers as halide_buffer_t *,
 * scalars by pointer) and calls it, and the module's `tally_kernel_table` holding `kernels`
 * (what `tally_kernel_table()` in the IR refers to; compile_kernels in DeviceKernels.h makes
 * them). The data layout and triple come from `tm`. */
std::unique_ptr<llvm::Module> codegen_host(const Module &m, llvm::LLVMContext &ctx,
                                           llvm::TargetMachine &tm,
                                           const std::vector<CompiledKernel> &kernels = {});

}  // namespace tally

#endif  // TALLY_CODEGEN_CODEGEN_HOST_H
