/** \file
 * Host code generation: a lowered tally::Module to an LLVM 19 module.
 */
#ifndef TALLY_CODEGEN_CODEGEN_HOST_H
#define TALLY_CODEGEN_CODEGEN_HOST_H

#include <memory>

#include "tally/Module.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace tally {

/** Emits every function of `m` (kernels excluded) as LLVM IR, plus for each pipeline function
 * `<name>_argv(void **args)`, which unpacks an argument array (buffers as halide_buffer_t *,
 * scalars by pointer) and calls it. The data layout and triple come from `tm`. */
std::unique_ptr<llvm::Module> codegen_host(const Module &m, llvm::LLVMContext &ctx,
                                           llvm::TargetMachine &tm);

/** Runs LLVM's standard optimisation pipeline at `level` (0-3) for `tm`. */
void optimize_module(llvm::Module &m, llvm::TargetMachine &tm, int level);

/** The pipeline entry points of a module: functions no other function runs as a closure. */
std::vector<const LoweredFunc *> pipeline_functions(const Module &m);

}  // namespace tally

#endif  // TALLY_CODEGEN_CODEGEN_HOST_H
