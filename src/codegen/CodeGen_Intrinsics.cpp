// Halide 14's arithmetic intrinsics, for every LLVM back end (see CodeGen_LLVM.h).
//
// Halide's lowering leaves these calls in the IR it prints (FindIntrinsics turns arithmetic
// patterns into them; lerp is lowered only by Halide's code generator). Each is generated here
// with the meaning Halide 14 gives it, computed exactly where Halide's own lowering is exact:
//
// - widening_add/sub/mul, widening_shift_left/right: the operands converted to the (wider) call
//   type, then the operation; widening_sub's type is signed.
// - halving_add/sub, rounding_halving_add/sub: floor((a +- b [+ 1]) / 2) without overflow,
//   computed in twice the width; sorted_avg: a + ((b - a) >> 1) in the operand type.
// - saturating_add/sub: LLVM's saturating intrinsics (what Halide emits).
// - rounding_shift_right(a, b): floor(a / 2^b + 1/2) for b > 0, a << -b otherwise;
//   rounding_shift_left(a, b) is rounding_shift_right(a, -b).
// - mul_shift_right(a, b, q): the product shifted right by q, saturated to the operand type;
//   rounding_mul_shift_right rounds the shift.
// - shift_left/shift_right with a signed amount: a negative amount shifts the other way.
// - lerp: Halide's lower_lerp, including its integer rounding ((x + M/2) / M with M = 2^N - 1),
//   its bias trick for signed types and its rescaling of weights of another width.
// - mux(i, v0, v1, ...): v_i, or the last value when i is out of range.
//
// Halide 21's saturating_cast, round, widen_right_*, concat_bits, extract_bits and strict_* are
// the expressions ir/IntrinsicLowering.h gives (Halide's own lowerings), generated here with the
// arguments evaluated first under the back end's flags and the expression itself with no
// fast-math flags, as Halide generates strict_* (CodeGen_LLVM.cpp, is_strict_float_intrinsic).

#include "codegen/CodeGen_LLVM.h"

#include <cmath>

#include <llvm/IR/Intrinsics.h>

#include "ir/IntrinsicLowering.h"
#include "tally/Error.h"

namespace tally {

namespace {

/** The same kind of integer at twice the width (vectors keep their lanes). */
Type twice_as_wide(const Type &t) {
    return Type(t.code(), t.bits() * 2, t.lanes());
}

}  // namespace

llvm::Value *CodeGen_LLVM::shift_value(bool left, const Type &t, llvm::Value *a, const Type &bt,
                                       llvm::Value *b) {
    auto plain = [&](bool l, llvm::Value *amount) {
        return l ? builder.CreateShl(a, amount)
                 : (t.is_int() ? builder.CreateAShr(a, amount) : builder.CreateLShr(a, amount));
    };
    if (b->getType()->isVectorTy() != a->getType()->isVectorTy()) {
        b = builder.CreateVectorSplat(t.lanes(), b);
    }
    llvm::Type *at = a->getType();
    if (!bt.is_int()) {
        return plain(left, builder.CreateIntCast(b, at, false));
    }
    // Halide: a negative amount shifts the other way, by its magnitude.
    llvm::Value *wide_b = builder.CreateIntCast(b, at, true);
    llvm::Value *neg = builder.CreateICmpSLT(wide_b, llvm::Constant::getNullValue(at));
    llvm::Value *mag = builder.CreateSelect(neg, builder.CreateNeg(wide_b), wide_b);
    return builder.CreateSelect(neg, plain(!left, mag), plain(left, mag));
}

llvm::Value *CodeGen_LLVM::rounding_shift_right(const Type &t, llvm::Value *a, const Type &bt,
                                                llvm::Value *b) {
    if (b->getType()->isVectorTy() != a->getType()->isVectorTy()) {
        b = builder.CreateVectorSplat(t.lanes(), b);
    }
    llvm::Type *at = a->getType();
    llvm::Value *amount = builder.CreateIntCast(b, at, bt.is_int());
    llvm::Value *zero = llvm::Constant::getNullValue(at), *one = llvm::ConstantInt::get(at, 1);
    llvm::Value *positive =
        bt.is_int() ? builder.CreateICmpSGT(amount, zero) : builder.CreateICmpNE(amount, zero);
    // b > 0: (a >> b) + ((a >> (b - 1)) & 1), which cannot overflow.
    auto shr = [&](llvm::Value *x) {
        return t.is_int() ? builder.CreateAShr(a, x) : builder.CreateLShr(a, x);
    };
    llvm::Value *round_bit = builder.CreateAnd(shr(builder.CreateSub(amount, one)), one);
    llvm::Value *right = builder.CreateAdd(shr(amount), round_bit);
    if (!bt.is_int()) {
        return builder.CreateSelect(positive, right, a);
    }
    // b <= 0: a << -b.
    llvm::Value *left = builder.CreateShl(a, builder.CreateNeg(amount));
    return builder.CreateSelect(positive, right, left);
}

llvm::Value *CodeGen_LLVM::saturate_to(llvm::Value *v, const Type &from, const Type &to) {
    // Only narrowing of one kind of integer to the same kind is needed here.
    llvm::Type *ft = v->getType();
    llvm::Constant *lo, *hi;
    if (to.is_int()) {
        lo = llvm::ConstantInt::getSigned(ft, to.min_int());
        hi = llvm::ConstantInt::getSigned(ft, int64_t(to.max_uint()));
        v = builder.CreateSelect(builder.CreateICmpSLT(v, lo), lo, v);
        v = builder.CreateSelect(builder.CreateICmpSGT(v, hi), hi, v);
    } else {
        hi = llvm::ConstantInt::get(ft, to.max_uint());
        if (from.is_int()) {
            lo = llvm::Constant::getNullValue(ft);
            v = builder.CreateSelect(builder.CreateICmpSLT(v, lo), lo, v);
        }
        v = builder.CreateSelect(builder.CreateICmpUGT(v, hi), hi, v);
    }
    return builder.CreateTrunc(v, llvm_type(to));
}

llvm::Value *CodeGen_LLVM::lerp_value(const Call *op) {
    user_assert(op->args.size() == 3) << "lerp takes three arguments";
    // Halide computes float16 and bfloat16 lerps in float32.
    auto upgrade = [](const Type &t) {
        return t.is_float() && t.bits() < 32 ? Float(32, t.lanes()) : t;
    };
    const Type &vt = op->args[0].type(), &wt = op->args[2].type();
    user_assert(vt == op->args[1].type()) << "lerp: the two values must have the same type";
    user_assert(wt.is_uint() || wt.is_float()) << "lerp: the weight must be unsigned or float";
    Type t = upgrade(vt), w_type = upgrade(wt);
    llvm::Value *zero = cast_value(codegen(op->args[0]), vt, t);
    llvm::Value *one = cast_value(codegen(op->args[1]), vt, t);
    llvm::Value *w = cast_value(codegen(op->args[2]), wt, w_type);
    auto constant_of = [&](const Type &ty, double d) -> llvm::Value * {
        llvm::Type *lt = llvm_type(ty);
        return ty.is_float() ? llvm::ConstantFP::get(lt, d)
                             : llvm::ConstantInt::get(lt, uint64_t(d));
    };
    auto uint_constant = [&](const Type &ty, uint64_t v) -> llvm::Value * {
        return llvm::ConstantInt::get(llvm_type(ty), v);
    };
    llvm::Value *result;
    if (t.is_float()) {
        llvm::Value *tw = w_type.is_float()
                              ? cast_value(w, w_type, t)
                              : builder.CreateFDiv(cast_value(w, w_type, t),
                                                   constant_of(t, std::ldexp(1.0, wt.bits()) - 1));
        llvm::Value *inv = builder.CreateFSub(constant_of(t, 1.0), tw);
        result = builder.CreateFAdd(builder.CreateFMul(zero, inv), builder.CreateFMul(one, tw));
        return cast_value(result, t, op->type);
    }
    if (t.is_bool()) {
        llvm::Value *half = w_type.is_float() ? constant_of(w_type, 0.5)
                                              : uint_constant(w_type, w_type.max_uint() / 2);
        llvm::Value *gt =
            w_type.is_float() ? builder.CreateFCmpOGT(w, half) : builder.CreateICmpUGT(w, half);
        return cast_value(builder.CreateSelect(gt, one, zero), t, op->type);
    }
    const int n = t.bits();
    user_assert(n <= 32) << "lerp of " << t.to_string() << " is not supported (nor by Halide)";
    // Signed values are lerped as unsigned ones biased by 2^(n-1).
    Type ct = UInt(n, t.lanes());
    llvm::Value *bias = t.is_int() ? uint_constant(ct, uint64_t(1) << (n - 1)) : nullptr;
    if (bias) {
        zero = builder.CreateSub(zero, bias);
        one = builder.CreateSub(one, bias);
    }
    const uint64_t max = ct.max_uint();
    llvm::Value *tw;
    if (w_type.is_float()) {
        if (n == 32) {
            llvm::Value *wd = cast_value(w, w_type, Float(64, t.lanes()));
            tw = builder.CreateFPToUI(
                builder.CreateFMul(constant_of(Float(64, t.lanes()), 4294967295.0), wd),
                llvm_type(ct));
        } else {
            tw = builder.CreateFPToUI(builder.CreateFMul(constant_of(w_type, double(max)), w),
                                      llvm_type(ct));
        }
    } else {
        // Rescale an m-bit weight to n bits: multiply or divide by
        // (2^a + 1)(2^2a + 1)..., since 2^n - 1 = (2^m - 1) * that.
        int diff = wt.bits() - n;
        if (diff == 0) {
            tw = w;
        } else {
            int left = std::abs(diff), step = std::min(n, int(wt.bits()));
            uint64_t scale = 1;
            while (left > 0) {
                scale += scale << step;
                left -= step;
                step *= 2;
            }
            if (diff < 0) {
                tw = builder.CreateMul(cast_value(w, w_type, ct), uint_constant(ct, scale));
            } else {
                tw = cast_value(builder.CreateUDiv(w, uint_constant(w_type, scale)), w_type, ct);
            }
        }
    }
    if (n == 1) {
        result = builder.CreateSelect(tw, one, zero);
    } else {
        llvm::Value *inv = builder.CreateSub(uint_constant(ct, max), tw);
        Type wide = twice_as_wide(ct);
        auto widen = [&](llvm::Value *v) { return cast_value(v, ct, wide); };
        llvm::Value *prod = builder.CreateAdd(builder.CreateMul(widen(zero), widen(inv)),
                                              builder.CreateMul(widen(one), widen(tw)));
        // A rounding division by 2^n - 1 (never a tie: the divisor is odd).
        result = builder.CreateUDiv(builder.CreateAdd(prod, uint_constant(wide, max / 2)),
                                    uint_constant(wide, max));
        result = builder.CreateTrunc(result, llvm_type(ct));
    }
    if (bias) {
        result = builder.CreateAdd(result, bias);
    }
    return cast_value(result, t, op->type);
}

bool CodeGen_LLVM::call_arith_intrinsic(const Call *op) {
    const std::string &n = op->name;
    auto arg = [&](int i) { return codegen(op->args[i]); };
    auto need_args = [&](size_t k) {
        user_assert(op->args.size() == k) << n << " takes " << k << " argument"
                                          << (k == 1 ? "" : "s") << ", not " << op->args.size();
    };
    const Type &rt = op->type;
    if (op->is_intrinsic({Call::widening_add, Call::widening_sub, Call::widening_mul})) {
        need_args(2);
        llvm::Value *a = cast_value(arg(0), op->args[0].type(), rt);
        llvm::Value *b = cast_value(arg(1), op->args[1].type(), rt);
        bool f = rt.is_float();
        value = op->is_intrinsic(Call::widening_add)
                    ? (f ? builder.CreateFAdd(a, b) : builder.CreateAdd(a, b))
                : op->is_intrinsic(Call::widening_sub)
                    ? (f ? builder.CreateFSub(a, b) : builder.CreateSub(a, b))
                    : (f ? builder.CreateFMul(a, b) : builder.CreateMul(a, b));
    } else if (op->is_intrinsic({Call::widening_shift_left, Call::widening_shift_right})) {
        need_args(2);
        llvm::Value *a = cast_value(arg(0), op->args[0].type(), rt);
        llvm::Value *b = arg(1);
        value =
            shift_value(op->is_intrinsic(Call::widening_shift_left), rt, a, op->args[1].type(), b);
    } else if (op->is_intrinsic({Call::shift_left, Call::shift_right})) {
        need_args(2);
        llvm::Value *a = arg(0), *b = arg(1);
        value = shift_value(op->is_intrinsic(Call::shift_left), op->args[0].type(), a,
                            op->args[1].type(), b);
    } else if (op->is_intrinsic({Call::halving_add, Call::halving_sub, Call::rounding_halving_add,
                                 Call::rounding_halving_sub})) {
        need_args(2);
        const Type &t = op->args[0].type();
        user_assert(!t.is_float() && t == op->args[1].type())
            << n << " needs two integers of one type";
        // Exact in twice the width, where the arithmetic shift is a floor division by 2.
        Type wide = twice_as_wide(t);
        llvm::Value *a = cast_value(arg(0), t, wide), *b = cast_value(arg(1), t, wide);
        bool add = op->is_intrinsic({Call::halving_add, Call::rounding_halving_add});
        llvm::Value *s = add ? builder.CreateAdd(a, b) : builder.CreateSub(a, b);
        if (n.rfind("rounding_", 0) == 0) {
            s = builder.CreateAdd(s, llvm::ConstantInt::get(s->getType(), 1));
        }
        s = builder.CreateAShr(s, llvm::ConstantInt::get(s->getType(), 1));
        value = builder.CreateTrunc(s, llvm_type(t));
    } else if (op->is_intrinsic(Call::sorted_avg)) {
        need_args(2);
        const Type &t = op->args[0].type();
        llvm::Value *a = arg(0), *b = arg(1);
        if (t.is_float()) {
            value =
                builder.CreateFAdd(a, builder.CreateFMul(builder.CreateFSub(b, a),
                                                         llvm::ConstantFP::get(a->getType(), 0.5)));
        } else {
            llvm::Value *d = builder.CreateSub(b, a);
            llvm::Value *one = llvm::ConstantInt::get(d->getType(), 1);
            value = builder.CreateAdd(a, t.is_int() ? builder.CreateAShr(d, one)
                                                    : builder.CreateLShr(d, one));
        }
    } else if (op->is_intrinsic({Call::saturating_add, Call::saturating_sub})) {
        need_args(2);
        const Type &t = op->args[0].type();
        user_assert(!t.is_float() && t == op->args[1].type())
            << n << " needs two integers of one type";
        llvm::Intrinsic::ID id =
            op->is_intrinsic(Call::saturating_add)
                ? (t.is_int() ? llvm::Intrinsic::sadd_sat : llvm::Intrinsic::uadd_sat)
                : (t.is_int() ? llvm::Intrinsic::ssub_sat : llvm::Intrinsic::usub_sat);
        value = builder.CreateBinaryIntrinsic(id, arg(0), arg(1));
    } else if (op->is_intrinsic({Call::rounding_shift_right, Call::rounding_shift_left})) {
        need_args(2);
        const Type &t = op->args[0].type(), &bt = op->args[1].type();
        llvm::Value *a = arg(0), *b = arg(1);
        if (op->is_intrinsic(Call::rounding_shift_left)) {
            if (bt.is_int()) {
                value = rounding_shift_right(t, a, bt, builder.CreateNeg(b));
            } else {
                value = shift_value(true, t, a, bt, b);
            }
        } else {
            value = rounding_shift_right(t, a, bt, b);
        }
    } else if (op->is_intrinsic({Call::mul_shift_right, Call::rounding_mul_shift_right})) {
        need_args(3);
        const Type &t = op->args[0].type();
        user_assert(!t.is_float() && t == op->args[1].type())
            << n << " needs two integers of one type";
        Type wide = twice_as_wide(t);
        llvm::Value *prod =
            builder.CreateMul(cast_value(arg(0), t, wide), cast_value(arg(1), t, wide));
        llvm::Value *q = arg(2);
        const Type &qt = op->args[2].type();
        Type qwide = Type(qt.code(), wide.bits(), qt.lanes());
        q = cast_value(q, qt, qwide);
        llvm::Value *shifted = op->is_intrinsic(Call::mul_shift_right)
                                   ? shift_value(false, wide, prod, qwide, q)
                                   : rounding_shift_right(wide, prod, qwide, q);
        value = saturate_to(shifted, wide, t);
    } else if (op->is_intrinsic(Call::lerp)) {
        value = lerp_value(op);
    } else if (op->is_intrinsic(Call::mux)) {
        user_assert(op->args.size() >= 2) << "mux needs an index and at least one value";
        llvm::Value *index = arg(0);
        const Type &it = op->args[0].type();
        std::vector<llvm::Value *> vals;
        for (size_t i = 1; i < op->args.size(); i++) {
            vals.push_back(arg(int(i)));
        }
        // Halide: the last value, unless the index names an earlier one.
        llvm::Value *r = vals.back();
        for (int i = int(vals.size()) - 2; i >= 0; i--) {
            llvm::Value *k = llvm::ConstantInt::get(index->getType(), i);
            llvm::Value *v = vals[i];
            llvm::Value *c = builder.CreateICmpEQ(index, k);
            if (it.is_scalar() && rt.is_vector()) {
                c = builder.CreateVectorSplat(rt.lanes(), c);
            }
            r = builder.CreateSelect(c, v, r);
        }
        value = r;
    } else if (op->is_intrinsic(Call::undef)) {
        value = llvm::UndefValue::get(llvm_type(rt));
    } else if (op->is_intrinsic(Call::memoize_expr)) {
        user_assert(!op->args.empty()) << "memoize_expr needs a value";
        value = arg(0);
    } else if (op->is_intrinsic(Call::signed_integer_overflow)) {
        user_error << "codegen: signed_integer_overflow: Halide found signed integer overflow "
                      "while constant-folding; int32 and int64 overflow is undefined behaviour";
    } else {
        return call_lowered_intrinsic(op);
    }
    return true;
}

bool CodeGen_LLVM::call_lowered_intrinsic(const Call *op) {
    std::string removed = intrinsic_removed_before_printing(op);
    user_assert(removed.empty()) << "codegen: the intrinsic '" << op->name
                                 << "' cannot be compiled: " << removed;
    // Each argument evaluated once, outside the strict scope, and named by a variable that no
    // text can spell (the lowered expression refers to nothing else, so nothing is shadowed).
    std::vector<Expr> args;
    std::vector<std::string> names;
    for (size_t i = 0; i < op->args.size(); i++) {
        names.push_back("<intrinsic argument " + std::to_string(i) + ">");
        args.push_back(Variable::make(op->args[i].type(), names.back()));
    }
    Expr lowered = lower_halide21_intrinsic(op, args);
    if (!lowered.defined()) {
        return false;
    }
    std::vector<llvm::Value *> values;
    for (const Expr &a : op->args) {
        values.push_back(codegen(a));
    }
    for (size_t i = 0; i < names.size(); i++) {
        push_var(names[i], values[i]);
    }
    {
        llvm::IRBuilderBase::FastMathFlagGuard strict(builder);
        builder.clearFastMathFlags();
        value = codegen(lowered);
    }
    for (const std::string &n : names) {
        pop(vars, n);
    }
    return true;
}

}  // namespace tally
