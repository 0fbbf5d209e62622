/** \file
 * The machine host code is compiled for: the LLVM triple, CPU and features a Tally target string
 * asks for, and the LLVM target machine made from them (the JIT and the AOT outputs use the same).
 *
 * `host` is the compiling machine: its triple, its CPU and every feature it has. An explicit
 * x86-64 target gets what Halide 14 asks LLVM for, so the same IR gets the same instruction set:
 * the CPU Halide names for the highest ISA feature (sse41 -> penryn, avx -> corei7-avx,
 * avx2 -> haswell, avx512_skylake -> skylake-avx512, ...; none -> k8) and Halide's attributes
 * (fma, fma4, f16c, the avx512 families), plus the ISA features spelled out (+sse4.1, +avx,
 * +avx2 with the +fma,+f16c that haswell implies) so that the IR's `target-features` says what
 * the code may use. Gathers and scatters are never preferred: as in Halide's x86 code, an
 * irregular vector access is done lane by lane.
 */
#ifndef TALLY_CODEGEN_HOSTMACHINE_H
#define TALLY_CODEGEN_HOSTMACHINE_H

#include <memory>
#include <string>
#include <vector>

#include "tally/Target.h"

namespace llvm {
class TargetMachine;
}  // namespace llvm

namespace tally {

struct HostMachine {
    std::string triple;    // e.g. x86_64-unknown-linux-gnu
    std::string cpu;       // e.g. haswell
    std::string features;  // LLVM attributes, comma-separated: +sse4.1,+avx,...
    /** The x86 ISA extensions the code may use, LLVM's names (sse4.1, avx, avx2, fma, ...): what
     * a CPU must have to run it (a multi-target library's wrapper asks the runtime's
     * tally_cpu_has_features). Empty for `host`, whose code is for the compiling machine. */
    std::vector<std::string> isa;
};

/** What `t` asks LLVM to compile host code for. Throws CompileError for a target Tally cannot
 * compile host code for (an architecture other than x86, 32 bits, an OS other than Linux). */
HostMachine host_machine(const Target &t);

/** A target machine for `t` at optimisation level `opt_level` (0-3). Floating-point operations
 * may be fused (FMA) unless `strict_float`, which the module's code generator decides (the
 * target's strict_float feature, or a strict_float() call anywhere in the module), as Halide 14
 * sets AllowFPOpFusion. */
std::unique_ptr<llvm::TargetMachine> host_target_machine(const Target &t, int opt_level,
                                                         bool strict_float);

/** Throws CompileError unless code compiled for `t` can run in this process: the same
 * architecture and OS, and no CPU feature this machine lacks (named in the message). */
void check_runs_here(const Target &t);

}  // namespace tally

#endif  // TALLY_CODEGEN_HOSTMACHINE_H
