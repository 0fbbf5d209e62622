/** \file
 * Halide 14's own float32 exp, log and pow, evaluated in LLVM IR as Halide evaluates them.
 *
 * Halide 14's CodeGen_LLVM never calls libm for `exp_f32`, `log_f32` or `pow_f32`: it expands
 * every such call, scalar or vector (and the float16 ones, which it computes in float32), into
 * the polynomial approximations of its IROperator.cpp (`halide_exp`, `halide_log`, the Syrah
 * range reductions) and its pow built from them. To give the bit-exact results Halide gives
 * under strict_float, Tally emits the same operations in the same order: the same constants,
 * the same even/odd split of the polynomials, the same integer tricks on the float bits, the
 * same `select`s for the exceptional cases, `0 - v` for negation. The instructions carry the
 * builder's fast-math flags, as Halide's do (so without strict_float LLVM may contract them into
 * FMAs, as it does Halide's).
 */
#ifndef TALLY_CODEGEN_HALIDEMATH_H
#define TALLY_CODEGEN_HALIDEMATH_H

#include <llvm/IR/IRBuilder.h>

namespace tally {

/** Halide 14's halide_exp of a float32 scalar or vector `x`. */
llvm::Value *emit_halide_exp_f32(llvm::IRBuilder<> &b, llvm::Value *x);
/** Halide 14's halide_log of a float32 scalar or vector `x`. */
llvm::Value *emit_halide_log_f32(llvm::IRBuilder<> &b, llvm::Value *x);
/** Halide 14's pow_f32(x, y): exp(log(|x|) * y), with its cases for x <= 0 (0^y, negative x to
 * integer and non-integer powers) and y == 0. `x` and `y` have the same float32 type. */
llvm::Value *emit_halide_pow_f32(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y);

}  // namespace tally

#endif  // TALLY_CODEGEN_HALIDEMATH_H
