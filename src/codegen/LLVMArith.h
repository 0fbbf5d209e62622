/** \file
 * The value semantics every LLVM back end shares (host and NVPTX): casts, Halide's Euclidean
 * integer division and modulo (x / 0 == 0, no undefined inputs), float modulo, comparisons.
 * One definition, so that host and device code compute the same results.
 */
#ifndef TALLY_CODEGEN_LLVMARITH_H
#define TALLY_CODEGEN_LLVMARITH_H

#include <llvm/IR/IRBuilder.h>

#include "tally/IR.h"

namespace tally {

/** Converts `v` of IR type `from` to `to` (whose LLVM type is `dst`), as Cast does. */
llvm::Value *emit_cast(llvm::IRBuilderBase &b, llvm::Value *v, const Type &from, const Type &to,
                       llvm::Type *dst);

/** Euclidean quotient and remainder of integers: the remainder is never negative, and
 * division by zero gives 0 for both. */
void emit_div_mod(llvm::IRBuilderBase &b, const Type &t, llvm::Value *x, llvm::Value *y,
                  llvm::Value **q, llvm::Value **r);

/** x - y * floor(x / y). */
llvm::Value *emit_float_mod(llvm::IRBuilderBase &b, llvm::Value *x, llvm::Value *y);

/** The comparison `k` (EQ, NE, LT, LE, GT, GE) of operands of IR type `t`. */
llvm::Value *emit_compare(llvm::IRBuilderBase &b, IRNodeType k, const Type &t, llvm::Value *x,
                          llvm::Value *y);

}  // namespace tally

#endif  // TALLY_CODEGEN_LLVMARITH_H
