// Shared value semantics of the LLVM back ends.

#include "codegen/LLVMArith.h"

#include <llvm/IR/Intrinsics.h>

namespace tally {

llvm::Value *emit_cast(llvm::IRBuilderBase &b, llvm::Value *v, const Type &from, const Type &to,
                       llvm::Type *dst) {
    if (from == to) {
        return v;
    }
    if (to.is_handle()) {
        return from.is_handle() ? v : b.CreateIntToPtr(v, dst);
    }
    if (from.is_handle()) {
        return b.CreatePtrToInt(v, dst);
    }
    if (to.is_bool()) {
        if (from.is_float()) {
            return b.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
        }
        return b.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    }
    if (from.is_float() && to.is_float()) {
        return b.CreateFPCast(v, dst);
    }
    if (from.is_float()) {
        return to.is_int() ? b.CreateFPToSI(v, dst) : b.CreateFPToUI(v, dst);
    }
    if (to.is_float()) {
        return from.is_int() ? b.CreateSIToFP(v, dst) : b.CreateUIToFP(v, dst);
    }
    return b.CreateIntCast(v, dst, from.is_int());
}

void emit_div_mod(llvm::IRBuilderBase &b, const Type &t, llvm::Value *x, llvm::Value *y,
                  llvm::Value **q, llvm::Value **r) {
    llvm::Type *lt = x->getType();
    llvm::Value *zero = llvm::Constant::getNullValue(lt), *one = llvm::ConstantInt::get(lt, 1);
    llvm::Value *y_zero = b.CreateICmpEQ(y, zero);
    if (t.is_uint()) {
        llvm::Value *safe_y = b.CreateSelect(y_zero, one, y);
        *q = b.CreateSelect(y_zero, zero, b.CreateUDiv(x, safe_y));
        *r = b.CreateSelect(y_zero, zero, b.CreateURem(x, safe_y));
        return;
    }
    // Avoid the two undefined cases of sdiv: y == 0 and INT_MIN / -1.
    llvm::Value *minus_one = llvm::Constant::getAllOnesValue(lt);
    llvm::Value *y_m1 = b.CreateICmpEQ(y, minus_one);
    llvm::Value *safe_y = b.CreateSelect(b.CreateOr(y_zero, y_m1), one, y);
    llvm::Value *tq = b.CreateSDiv(x, safe_y), *tr = b.CreateSRem(x, safe_y);
    // y == -1: q = -x (wrapping), r = 0.
    tq = b.CreateSelect(y_m1, b.CreateNeg(x), tq);
    tr = b.CreateSelect(y_m1, zero, tr);
    // Make the remainder non-negative: r += |y|, q -= sign(y).
    llvm::Value *r_neg = b.CreateICmpSLT(tr, zero);
    llvm::Value *y_neg = b.CreateICmpSLT(y, zero);
    llvm::Value *abs_y = b.CreateSelect(y_neg, b.CreateNeg(y), y);
    tr = b.CreateSelect(r_neg, b.CreateAdd(tr, abs_y), tr);
    llvm::Value *adj = b.CreateSelect(y_neg, minus_one, one);
    tq = b.CreateSelect(r_neg, b.CreateSub(tq, adj), tq);
    *q = b.CreateSelect(y_zero, zero, tq);
    *r = b.CreateSelect(y_zero, zero, tr);
}

llvm::Value *emit_float_mod(llvm::IRBuilderBase &b, llvm::Value *x, llvm::Value *y) {
    llvm::Value *f = b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b.CreateFDiv(x, y));
    return b.CreateFSub(x, b.CreateFMul(y, f));
}

llvm::Value *emit_compare(llvm::IRBuilderBase &b, IRNodeType k, const Type &t, llvm::Value *x,
                          llvm::Value *y) {
    if (t.is_float()) {
        switch (k) {
        case IRNodeType::EQ:
            return b.CreateFCmpOEQ(x, y);
        case IRNodeType::NE:
            return b.CreateFCmpUNE(x, y);
        case IRNodeType::LT:
            return b.CreateFCmpOLT(x, y);
        case IRNodeType::LE:
            return b.CreateFCmpOLE(x, y);
        case IRNodeType::GT:
            return b.CreateFCmpOGT(x, y);
        default:
            return b.CreateFCmpOGE(x, y);
        }
    }
    bool s = t.is_int();
    switch (k) {
    case IRNodeType::EQ:
        return b.CreateICmpEQ(x, y);
    case IRNodeType::NE:
        return b.CreateICmpNE(x, y);
    case IRNodeType::LT:
        return s ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y);
    case IRNodeType::LE:
        return s ? b.CreateICmpSLE(x, y) : b.CreateICmpULE(x, y);
    case IRNodeType::GT:
        return s ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y);
    default:
        return s ? b.CreateICmpSGE(x, y) : b.CreateICmpUGE(x, y);
    }
}

}  // namespace tally
