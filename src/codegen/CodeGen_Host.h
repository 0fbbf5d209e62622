/** \file
 * Host code generation: a lowered tally::Module to an LLVM 19 module.
 */
#ifndef TALLY_CODEGEN_CODEGEN_HOST_H
#define TALLY_CODEGEN_CODEGEN_HOST_H

#include <memory>
#include <string>
#include <vector>

#include "tally/Module.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace tally {

/** A device kernel compiled by its back end, ready to embed. */
struct CompiledKernel {
    std::string name;
    DeviceAPI device_api = DeviceAPI::None;
    std::string code;  // SPIR-V bytes, or PTX text (embedded with a terminating NUL)
    int num_args = 0;
    int num_buffers = 0;
};

/** Emits every function of `m` as LLVM IR, plus for each pipeline function
 * `<name>_argv(void **args)`, which unpacks an argument array (buffers as halide_buffer_t *,
 * scalars by pointer) and calls it, and the module's `tally_kernel_table` holding `kernels`
 * (what `tally_kernel_table()` in the IR refers to). The data layout and triple come from `tm`. */
std::unique_ptr<llvm::Module> codegen_host(const Module &m, llvm::LLVMContext &ctx,
                                           llvm::TargetMachine &tm,
                                           const std::vector<CompiledKernel> &kernels = {});

/** Compiles every kernel of `m` with the back end of its device API (Vulkan: SPIR-V; CUDA:
 * PTX). Throws CompileError for an API without a back end. */
std::vector<CompiledKernel> compile_kernels(const Module &m);

/** Runs LLVM's standard optimisation pipeline at `level` (0-3) for `tm`. */
void optimize_module(llvm::Module &m, llvm::TargetMachine &tm, int level);

}  // namespace tally

#endif  // TALLY_CODEGEN_CODEGEN_HOST_H
