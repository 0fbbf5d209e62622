/** \file
 * Halide 21's intrinsics that Halide's own code generators compute as other IR, written once
 * here so that every back end (host and NVPTX through CodeGen_LLVM, Vulkan) gives them the same
 * meaning: saturating_cast, round, widen_right_add/sub/mul, concat_bits, extract_bits and the
 * strict_* float operations. And the intrinsics of Halide 21's list that never reach the text
 * Halide prints, with the pass of Halide's that removes each, for a back end's error message.
 */
#ifndef TALLY_IR_INTRINSICLOWERING_H
#define TALLY_IR_INTRINSICLOWERING_H

#include <string>
#include <vector>

#include "tally/IR.h"

namespace tally {

/** The expression Halide 21 computes for `op`, over `args` (op's arguments, or variables a back
 * end has bound to their values, so that each is evaluated once and outside any strict scope),
 * or an undefined Expr when `op` is not one of the intrinsics this file lowers. The result uses
 * only nodes and Halide 14 intrinsics every back end has (casts, min/max, selects, shifts,
 * bitwise or, the extern `round_f<bits>`). Throws CompileError for a wrong number or type of
 * arguments. A back end evaluates the result without fast-math flags: strict_* exist to have
 * none, and saturating_cast's clamps are defined on NaN only without them. */
Expr lower_halide21_intrinsic(const Call *op, const std::vector<Expr> &args);

/** For an intrinsic that Halide 21 resolves or removes before it prints lowered text (target
 * queries, lowering markers, ARM's runtime vscale): a sentence saying where, for an error
 * message; empty for every other call. */
std::string intrinsic_removed_before_printing(const Call *op);

}  // namespace tally

#endif  // TALLY_IR_INTRINSICLOWERING_H
