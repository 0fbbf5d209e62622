// Halide 14's float32 exp, log and pow as LLVM IR (HalideMath.h). The algorithms are Halide's
// (IROperator.cpp: evaluate_polynomial, range_reduce_log, halide_log, halide_exp, after Syrah;
// CodeGen_LLVM.cpp: pow_f32); each step below names the expression of Halide's it mirrors,
// because the results are only bit-exact if every rounding happens where Halide's does.

#include "codegen/HalideMath.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>

#include "tally/Error.h"

namespace tally {

namespace {

// ln(2) as float32, the value of Halide's `logf(2.0f)` (0x3f317218).
constexpr float ln2_f32 = 0x1.62e43p-1f;

/** The int32 scalar or vector type with the lanes of float32 type `t`. */
llvm::Type *int_type_like(llvm::Type *t) {
    llvm::Type *i32 = llvm::Type::getInt32Ty(t->getContext());
    if (auto *vt = llvm::dyn_cast<llvm::VectorType>(t)) {
        return llvm::VectorType::get(i32, vt->getElementCount());
    }
    return i32;
}

llvm::Constant *fconst(llvm::Type *t, float v) {
    return llvm::ConstantFP::get(t, static_cast<double>(v));
}

llvm::Constant *iconst(llvm::Type *t, int32_t v) {
    return llvm::ConstantInt::get(t, static_cast<uint64_t>(static_cast<int64_t>(v)), true);
}

void check_f32(llvm::Value *x) {
    internal_assert(x->getType()->getScalarType()->isFloatTy())
        << "Halide's polynomial math is defined for float32 only";
}

/** Halide's evaluate_polynomial: coefficients of the highest power first; the even and odd
 * powers are two Horner chains in x^2 (a zero coefficient only multiplies), joined at the end. */
llvm::Value *polynomial(llvm::IRBuilder<> &b, llvm::Value *x, const float *coeff, int n) {
    internal_assert(n >= 2) << "a polynomial needs two coefficients";
    llvm::Type *t = x->getType();
    llvm::Value *x2 = b.CreateFMul(x, x);
    llvm::Value *even = fconst(t, coeff[0]);
    llvm::Value *odd = fconst(t, coeff[1]);
    for (int i = 2; i < n; i++) {
        llvm::Value *&terms = (i & 1) ? odd : even;
        terms = b.CreateFMul(terms, x2);
        if (coeff[i] != 0.0f) {
            terms = b.CreateFAdd(terms, fconst(t, coeff[i]));
        }
    }
    return (n & 1) == 0 ? b.CreateFAdd(b.CreateFMul(even, x), odd)
                        : b.CreateFAdd(b.CreateFMul(odd, x), even);
}

/** Halide's abs of a float as its x86 back end computes it: vectors clear the sign bit (the
 * abs_f32x4/x8 intrinsics), a scalar is select(x >= 0, x, 0 - x). The two differ only in the sign
 * of -0 and of a NaN, which the log below reads. */
llvm::Value *halide_abs(llvm::IRBuilder<> &b, llvm::Value *x) {
    llvm::Type *t = x->getType();
    if (t->isVectorTy()) {
        return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    }
    llvm::Constant *zero = fconst(t, 0.0f);
    return b.CreateSelect(b.CreateFCmpOGE(x, zero), x, b.CreateFSub(zero, x));
}

}  // namespace

llvm::Value *emit_halide_exp_f32(llvm::IRBuilder<> &b, llvm::Value *x_full) {
    check_f32(x_full);
    llvm::Type *t = x_full->getType();
    llvm::Type *it = int_type_like(t);
    const float ln2_part1 = 0.6931457519f;
    const float ln2_part2 = 1.4286067653e-6f;
    const float one_over_ln2 = 1.0f / ln2_f32;

    // k = floor(x / ln 2); x -= k * ln 2 in two parts (Cody-Waite).
    llvm::Value *scaled = b.CreateFMul(x_full, fconst(t, one_over_ln2));
    llvm::Value *k_real = b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, scaled);
    llvm::Value *k = b.CreateFPToSI(k_real, it);
    llvm::Value *x = b.CreateFSub(x_full, b.CreateFMul(k_real, fconst(t, ln2_part1)));
    x = b.CreateFSub(x, b.CreateFMul(k_real, fconst(t, ln2_part2)));

    static const float coeff[] = {0.00031965933071842413f,
                                  0.00119156835564003744f,
                                  0.00848988645943932717f,
                                  0.04160188091348320655f,
                                  0.16667983794100929562f,
                                  0.49999899033463041098f,
                                  1.0f,
                                  1.0f};
    llvm::Value *result = polynomial(b, x, coeff, sizeof(coeff) / sizeof(coeff[0]));

    // 2^k from its bits, then overflow to inf and underflow to 0.
    llvm::Value *biased = b.CreateNSWAdd(k, iconst(it, 127));
    llvm::Value *two_to_the_k = b.CreateBitCast(b.CreateShl(biased, iconst(it, 23)), t);
    result = b.CreateFMul(result, two_to_the_k);
    result = b.CreateSelect(b.CreateICmpSLT(biased, iconst(it, 255)), result,
                            llvm::ConstantFP::getInfinity(t));
    return b.CreateSelect(b.CreateICmpSGT(biased, iconst(it, 0)), result, fconst(t, 0.0f));
}

llvm::Value *emit_halide_log_f32(llvm::IRBuilder<> &b, llvm::Value *x_full) {
    check_f32(x_full);
    llvm::Type *t = x_full->getType();
    llvm::Type *it = int_type_like(t);
    llvm::Constant *zero = fconst(t, 0.0f);

    // Negative x gives NaN and zero -inf, patched in at the end; meanwhile they compute log(1).
    llvm::Value *use_nan = b.CreateFCmpOLT(x_full, zero);
    llvm::Value *use_neg_inf = b.CreateFCmpOEQ(x_full, zero);
    llvm::Value *exceptional = b.CreateOr(use_nan, use_neg_inf);
    llvm::Value *patched = b.CreateSelect(exceptional, fconst(t, 1.0f), x_full);

    // range_reduce_log: patched = 2^exponent * reduced with reduced in [0.75, 1.5).
    llvm::Value *bits = b.CreateBitCast(patched, it);
    llvm::Constant *non_exponent_mask = iconst(it, static_cast<int32_t>(0x807fffffu));
    llvm::Value *no_exponent = b.CreateAnd(bits, non_exponent_mask);
    llvm::Value *new_exponent = b.CreateAShr(no_exponent, iconst(it, 22));
    llvm::Value *new_biased_exponent = b.CreateNSWSub(iconst(it, 127), new_exponent);
    llvm::Value *old_biased_exponent = b.CreateAShr(bits, iconst(it, 23));
    llvm::Value *exponent = b.CreateNSWSub(old_biased_exponent, new_biased_exponent);
    llvm::Value *blended =
        b.CreateOr(no_exponent, b.CreateShl(new_biased_exponent, iconst(it, 23)));
    llvm::Value *reduced = b.CreateBitCast(blended, t);

    static const float coeff[] = {0.05111976432738144643f,
                                  -0.11793923497136414580f,
                                  0.14971993724699017569f,
                                  -0.16862004708254804686f,
                                  0.19980668101718729313f,
                                  -0.24991211576292837737f,
                                  0.33333435275479328386f,
                                  -0.50000106292873236491f,
                                  1.0f,
                                  0.0f};
    llvm::Value *x1 = b.CreateFSub(reduced, fconst(t, 1.0f));
    llvm::Value *result = polynomial(b, x1, coeff, sizeof(coeff) / sizeof(coeff[0]));
    result = b.CreateFAdd(result, b.CreateFMul(b.CreateSIToFP(exponent, t), fconst(t, ln2_f32)));

    llvm::Value *special = b.CreateSelect(use_nan, llvm::ConstantFP::getQNaN(t),
                                          llvm::ConstantFP::getInfinity(t, /*Negative=*/true));
    return b.CreateSelect(exceptional, special, result);
}

llvm::Value *emit_halide_pow_f32(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
    check_f32(x);
    internal_assert(x->getType() == y->getType()) << "pow_f32 of mismatched types";
    llvm::Type *t = x->getType();
    llvm::Constant *zero = fconst(t, 0.0f);
    llvm::Constant *one = fconst(t, 1.0f);

    llvm::Value *abs_x_pow_y =
        emit_halide_exp_f32(b, b.CreateFMul(emit_halide_log_f32(b, halide_abs(b, x)), y));
    llvm::Value *iy = b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, y);
    // iy % 2 as Halide's float modulo: a - b * floor(a / b) (exact for integral iy).
    llvm::Constant *two = fconst(t, 2.0f);
    llvm::Value *iy_mod_2 = b.CreateFSub(
        iy,
        b.CreateFMul(two, b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b.CreateFDiv(iy, two))));

    // select(x > 0, |x|^y, y == 0, 1, x == 0, 0, y != iy, nan, iy % 2 == 0, |x|^y, -|x|^y),
    // built from the last case up.
    llvm::Value *r = b.CreateSelect(b.CreateFCmpOEQ(iy_mod_2, zero), abs_x_pow_y,
                                    b.CreateFSub(zero, abs_x_pow_y));
    r = b.CreateSelect(b.CreateFCmpONE(y, iy), llvm::ConstantFP::getQNaN(t), r);
    r = b.CreateSelect(b.CreateFCmpOEQ(x, zero), zero, r);
    r = b.CreateSelect(b.CreateFCmpOEQ(y, zero), one, r);
    return b.CreateSelect(b.CreateFCmpOGT(x, zero), abs_x_pow_y, r);
}

}  // namespace tally
