/** \file
 * Compiling lowered modules for the host with LLVM 19: in-process (ORC LLJIT) or ahead of time
 * (an object file and a C header). Modules come from lower(); kernels for devices are compiled
 * by their own back ends and embedded by these entry points.
 */
#ifndef TALLY_COMPILER_H
#define TALLY_COMPILER_H

#include <memory>
#include <string>
#include <vector>

#include "tally/Arguments.h"
#include "tally/Module.h"

namespace tally {

struct CompileOptions {
    /** LLVM optimisation level, 0-3. */
    int opt_level = 3;
    /** Shared objects (paths) the JIT resolves the module's extern calls in, e.g. the C
     * functions of Halide's extern stages (`define_extern`), searched in this order after the
     * runtime and before the process. Each is loaded for the rest of the process; one that
     * cannot be loaded is a CompileError naming it. */
    std::vector<std::string> extern_libraries = {};
};

/** A module compiled in-process. Keeps the code alive for as long as it lives. */
class JITModule {
public:
    ~JITModule();
    JITModule(const JITModule &) = delete;
    JITModule &operator=(const JITModule &) = delete;

    /** The module as compiled. */
    const Module &module() const;
    /** The pipeline entry: the function no other function runs as a parallel closure (the
     * first such if there are several). */
    const LoweredFunc &entry() const;

    /** Runs the entry function on `args`, one per argument, checked and packed by its binder
     * (tally/Arguments.h): `jit->call({input, output, width, height})`. Returns the pipeline's
     * result (0, or a negative runtime error code); throws ArgumentError when a value does not
     * fit its argument. */
    int call(const std::vector<ArgumentValue> &args) const;
    /** The same for the pipeline function `function` of the module. */
    int call(const std::string &function, const std::vector<ArgumentValue> &args) const;
    /** The binder of the entry function, made when the module was compiled. */
    const ArgumentBinder &binder() const;
    /** The binder of the pipeline function `function`; a CompileError if there is none. */
    const ArgumentBinder &binder(const std::string &function) const;

    /** Calls a function of the module on arguments packed already, unchecked: `args[i]` is a
     * `halide_buffer_t *` for a buffer argument, or a pointer to the value for a scalar
     * argument (what BoundArguments::argv() holds). Returns the pipeline's result (0, or a
     * negative runtime error code). */
    int run(const std::string &function, void **args) const;
    /** Calls the entry function (through its address, resolved when compiled: no lookup). */
    int run(void **args) const;

    /** Address of a compiled symbol, or nullptr. */
    void *symbol(const std::string &name) const;

    struct Impl;
    explicit JITModule(std::unique_ptr<Impl> impl);

private:
    std::unique_ptr<Impl> impl;
};

/** JIT-compiles a lowered module. Throws CompileError on IR it cannot compile. */
std::unique_ptr<JITModule> compile_jit(const Module &lowered, const CompileOptions &opts = {});

/** What compile_to_files writes; empty paths are skipped. */
struct OutputFiles {
    std::string object;    // .o, for linking with the static runtime library
    std::string header;    // .h declaring the entry points
    std::string llvm_ir;   // .ll, human-readable LLVM IR
    std::string assembly;  // .s, the target's assembly (what the object holds, as text)
    std::string stmt;      // the lowered module as IR text
};

/** Compiles a lowered module ahead of time for the machine its target names (`host`: this
 * one; an x86-64 target: the CPU and features Halide 14 picks for it, see codegen/HostMachine.h).
 */
void compile_to_files(const Module &lowered, const OutputFiles &out,
                      const CompileOptions &opts = {});

/** One variant of a multi-target library: its pipeline function and the target it was compiled
 * for (an x86-64 target, not `host`). */
struct MultitargetVariant {
    std::string function;
    Target target;
};

/** A multi-target library's dispatcher, as Halide's compile_multitarget makes one: a module named
 * `name` whose function `name` (with `_argv` and `_metadata`) takes `args` (the arguments every
 * variant takes) and calls the first of `variants` whose x86 ISA extensions the running CPU has
 * (the runtime's tally_cpu_has_features), returning its result. `variants` are in order of
 * preference, the last the baseline, whose target the module is for (less Tally's profiling:
 * each variant profiles itself under its own name); arch-bits-os must be the same for all.
 * Compile it with compile_to_files and link it with the variants' objects. Throws CompileError
 * naming what does not fit. */
Module multitarget_wrapper(const std::string &name, const std::vector<Argument> &args,
                           const std::vector<MultitargetVariant> &variants);

/** The optimised LLVM IR of a lowered module, as text. */
std::string compile_to_llvm_ir(const Module &lowered, const CompileOptions &opts = {});

/** The PTX text of every CUDA kernel of a lowered module, as one PTX module with one
 * `.visible .entry` per kernel, for the target's compute capability (sm_75 unless a
 * cuda_capability_XX feature asks for another): what `tallyc -e ptx` writes. The kernel table
 * embeds each kernel compiled alone, the same way. Empty when the module has no CUDA kernels.
 * Throws CompileError on kernels it cannot compile. */
std::string compile_to_ptx(const Module &lowered);

/** The OpenCL C source of every OpenCL kernel of a lowered module, one after the other in one
 * text that builds as one program: what `tallyc -e cl` writes. The kernel table embeds each
 * kernel's source alone. Empty when the module has no OpenCL kernels. Throws CompileError on
 * kernels it cannot compile. */
std::string compile_to_opencl_c(const Module &lowered);

/** The C header declaring a module's entry points. */
std::string c_header(const Module &lowered);

}  // namespace tally

#endif  // TALLY_COMPILER_H
