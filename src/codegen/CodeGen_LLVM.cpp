// The shared part of the LLVM back ends (see CodeGen_LLVM.h).
//
// Semantics, as IR.h states them: unsigned and narrow signed integer arithmetic wraps, and signed
// arithmetic of 32 bits or more does not overflow (its adds, subtracts and multiplies are nsw, as
// in Halide 14, which lets LLVM widen loop indices); integer Div/Mod are Euclidean (the
// remainder is never negative) and x / 0 == x % 0 == 0, implemented with selects so that no
// input is undefined behaviour (sdiv's INT_MIN / -1 included); float Mod is x - y * floor(x / y);
// bools are i1 in registers and a byte in memory.
//
// Vector accesses follow Halide 14's CodeGen_LLVM, which never emits a gather or scatter on x86:
// a dense one (index `ramp(base, 1, lanes)`) is one LLVM vector load or store aligned to its
// element, a predicated dense one a masked load or store; stride -1 is the dense vector ending
// at the base, reversed; a load with a constant stride of 2 to 4 is that many dense loads that
// never reach past the first and last lanes' elements, and a shuffle; a broadcast index is one
// scalar load; any other ramp goes lane by lane stepping a pointer, and any other index lane by
// lane from the vector of indices (a predicated lane in a block of its own, so that lanes whose
// predicate is false never touch memory). The host's target machine tells LLVM's vectorizers
// not to turn those lanes back into gathers (HostMachine.h).
//
// Floating point: a back end that calls set_fast_math(true) gets Halide 14's flags on every FP
// instruction; strict_float(e) clears them while `e` is emitted.
//
// Unrolling (serial_loop), two rules, as loop metadata on the loop's back edge; every other loop
// is LLVM's to unroll:
//  - LLVM never unrolls a loop that holds a scalar loop of unknown trip count, since LLVM's loop
//    vectorizer then widens each copy of that loop on its own, with its run-time checks and
//    remainder loops (a loop of 8 rows around 4 such loops made 32 vectorized loops, and twice
//    Halide's compile time). Loops around loops the schedule vectorized stay LLVM's to unroll:
//    the rule changes only code that the vectorizer would multiply.
//  - LLVM never runtime-unrolls an innermost vectorized loop of unknown trip count whose
//    enclosing loop has a constant trip count: a row inside an RDom's taps, entered once per tap,
//    so that a remainder loop and its checks are paid once per tap on rows that may be a few
//    vectors long (conv4d of the conformance corpus: 3 x 3 x 4 taps around rows of 2 vectors ran
//    1.13-1.24x Halide 21's time, 1.03x without). Full unrolling of the taps stays. Innermost
//    rows under loops of unknown trip count (a pipeline's rows) keep their runtime unrolling,
//    which gpu_chain and prefetch_p gain from.
// docs/halide-bridge.md has the figures.

#include "codegen/CodeGen_LLVM.h"

#include <algorithm>
#include <set>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PatternMatch.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Target/TargetMachine.h>

#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** A dense vector access `ramp(base, 1, lanes)`: its base, else nullptr. */
const Expr *dense_base(const Expr &index) {
    const Ramp *r = index.as<Ramp>();
    if (r && is_const_one(r->stride) && r->base.type().is_scalar()) {
        return &r->base;
    }
    return nullptr;
}

/** Whether `s` holds a Ramp or a Broadcast: a loop the schedule vectorized. */
bool has_vectors(const Stmt &s) {
    struct HasVectors : IRVisitor {
        bool found = false;
        void visit(const Ramp *) override { found = true; }
        void visit(const Broadcast *) override { found = true; }
    } v;
    s.accept(&v);
    return v.found;
}

/** Whether `body` holds a scalar serial loop of unknown trip count (at any depth, but not inside
 * a parallel loop, whose body becomes a task function of its own): a loop whose extent is not a
 * constant and whose body has no vector. LLVM's loop vectorizer widens such a loop, with run-time
 * checks and a remainder: unrolling a loop around it makes that many loops for the vectorizer. */
bool holds_scalar_unknown_trip_loop(const Stmt &body) {
    struct Finder : IRVisitor {
        bool found = false;
        void visit(const For *op) override {
            if (found || op->for_type == ForType::Parallel) {
                return;
            }
            if (op->for_type == ForType::Serial && !op->extent.as<IntImm>() &&
                !has_vectors(op->body)) {
                found = true;
                return;
            }
            IRVisitor::visit(op);
        }
    } finder;
    body.accept(&finder);
    return finder.found;
}

/** Whether `body` holds any loop. */
bool holds_loop(const Stmt &body) {
    struct Finder : IRVisitor {
        bool found = false;
        void visit(const For *) override { found = true; }
    } finder;
    body.accept(&finder);
    return finder.found;
}

}  // namespace

CodeGen_LLVM::CodeGen_LLVM(llvm::LLVMContext &ctx) : ctx(ctx), builder(ctx) {
    i1 = builder.getInt1Ty();
    i8 = builder.getInt8Ty();
    i32 = builder.getInt32Ty();
    i64 = builder.getInt64Ty();
    ptr = builder.getPtrTy();
}

void CodeGen_LLVM::set_fast_math(bool on) {
    llvm::FastMathFlags f;
    if (on) {
        f.setNoNaNs();
        f.setNoInfs();
        f.setNoSignedZeros();
        f.setAllowReassoc();
        f.setAllowContract(true);
        f.setApproxFunc();
    }
    builder.setFastMathFlags(f);
}

// --- types ------------------------------------------------------------------------------------

llvm::Type *CodeGen_LLVM::scalar_type(const Type &t) {
    if (t.is_handle()) {
        return ptr;
    }
    if (t.is_float()) {
        if (t.code() == Type::BFloat) {
            return builder.getBFloatTy();
        }
        return t.bits() == 16   ? builder.getHalfTy()
               : t.bits() == 32 ? builder.getFloatTy()
                                : builder.getDoubleTy();
    }
    return builder.getIntNTy(t.bits());
}

llvm::Type *CodeGen_LLVM::llvm_type(const Type &t) {
    llvm::Type *s = scalar_type(t.element_of());
    return t.is_vector() ? llvm::FixedVectorType::get(s, t.lanes()) : s;
}

llvm::Type *CodeGen_LLVM::memory_type(const Type &t) {
    return t.is_bool() ? (t.is_vector() ? llvm::FixedVectorType::get(i8, t.lanes()) : i8)
                       : llvm_type(t);
}

// --- scopes -----------------------------------------------------------------------------------

void CodeGen_LLVM::pop(Scope &s, const std::string &n) {
    auto it = s.find(n);
    it->second.pop_back();
    if (it->second.empty()) {
        s.erase(it);
    }
}

llvm::Value *CodeGen_LLVM::lookup_var(const std::string &n) {
    auto it = vars.find(n);
    return it != vars.end() ? it->second.back() : unbound_var(n);
}

llvm::Value *CodeGen_LLVM::buffer_base(const std::string &n) {
    auto b = buffers.find(n);
    if (b != buffers.end()) {
        return b->second.back();
    }
    auto v = vars.find(n);
    if (v != vars.end() && v->second.back()->getType()->isPointerTy()) {
        return v->second.back();
    }
    return unbound_buffer(n);
}

llvm::AllocaInst *CodeGen_LLVM::entry_alloca(llvm::Type *t, const std::string &name,
                                             llvm::Value *count) {
    llvm::IRBuilder<> b(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    return b.CreateAlloca(t, count, name);
}

// --- generation -------------------------------------------------------------------------------

llvm::Value *CodeGen_LLVM::codegen(const Expr &e) {
    internal_assert(e.defined()) << "codegen of undefined expression";
    value = nullptr;
    e.accept(this);
    internal_assert(value) << "no value for " << e;
    return value;
}

void CodeGen_LLVM::codegen(const Stmt &s) {
    if (s.defined()) {
        s.accept(this);
    }
}

llvm::Value *CodeGen_LLVM::cast_value(llvm::Value *v, const Type &from, const Type &to) {
    llvm::Type *dst = llvm_type(to);
    if (from == to) {
        return v;
    }
    if (to.is_handle()) {
        return from.is_handle() ? v : builder.CreateIntToPtr(v, dst);
    }
    if (from.is_handle()) {
        return builder.CreatePtrToInt(v, dst);
    }
    if (to.is_bool()) {
        if (from.is_float()) {
            return builder.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
        }
        return builder.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    }
    if (from.is_float() && to.is_float()) {
        return builder.CreateFPCast(v, dst);
    }
    if (from.is_float()) {
        return to.is_int() ? builder.CreateFPToSI(v, dst) : builder.CreateFPToUI(v, dst);
    }
    if (to.is_float()) {
        return from.is_int() ? builder.CreateSIToFP(v, dst) : builder.CreateUIToFP(v, dst);
    }
    return builder.CreateIntCast(v, dst, from.is_int());
}

void CodeGen_LLVM::div_mod(const Type &t, llvm::Value *x, llvm::Value *y, llvm::Value **q,
                           llvm::Value **r) {
    llvm::IRBuilderBase &b = builder;
    llvm::Type *lt = x->getType();
    llvm::Value *zero = llvm::Constant::getNullValue(lt), *one = llvm::ConstantInt::get(lt, 1);
    llvm::Value *y_zero = b.CreateICmpEQ(y, zero);
    // A vector of at most 16-bit integers divided by a vector that is not constant: x86 has no
    // vector integer division, so LLVM would divide lane by lane with idiv (one of the slowest
    // instructions, and the 16-bit form carries a false dependency from one lane to the next).
    // Single-precision division is exact enough: |x|, |y| < 2^16 and the correctly rounded
    // quotient of two such integers never crosses an integer (the distance from x / y to the
    // nearest other integer is at least 1 / |y|, far above the rounding error), so it truncates
    // to the integer quotient. A constant divisor stays an integer division, which LLVM turns
    // into a multiplication.
    const bool float_quotient = t.is_vector() && t.bits() <= 16 && !llvm::isa<llvm::Constant>(y);
    auto truncating_div = [&](llvm::Value *n, llvm::Value *d, bool is_signed) {
        if (!float_quotient) {
            return is_signed ? b.CreateSDiv(n, d) : b.CreateUDiv(n, d);
        }
        llvm::IRBuilderBase::FastMathFlagGuard exact(b);
        b.clearFastMathFlags();
        llvm::Type *ft = llvm::VectorType::get(b.getFloatTy(),
                                               llvm::cast<llvm::VectorType>(lt)->getElementCount());
        llvm::Value *fn = is_signed ? b.CreateSIToFP(n, ft) : b.CreateUIToFP(n, ft);
        llvm::Value *fd = is_signed ? b.CreateSIToFP(d, ft) : b.CreateUIToFP(d, ft);
        llvm::Value *fq = b.CreateFDiv(fn, fd);
        // Converting back truncates; the quotient fits the type: |q| <= |n| (d is never 0 or -1).
        return is_signed ? b.CreateFPToSI(fq, lt) : b.CreateFPToUI(fq, lt);
    };
    auto remainder_of = [&](llvm::Value *n, llvm::Value *d, llvm::Value *quot, bool is_signed) {
        if (!float_quotient) {
            return is_signed ? b.CreateSRem(n, d) : b.CreateURem(n, d);
        }
        return b.CreateSub(n, b.CreateMul(quot, d));
    };
    if (t.is_uint()) {
        llvm::Value *safe_y = b.CreateSelect(y_zero, one, y);
        llvm::Value *uq = truncating_div(x, safe_y, false);
        *q = b.CreateSelect(y_zero, zero, uq);
        *r = b.CreateSelect(y_zero, zero, remainder_of(x, safe_y, uq, false));
        return;
    }
    const llvm::APInt *c = nullptr;
    if (llvm::PatternMatch::match(y, llvm::PatternMatch::m_APInt(c)) && c->isStrictlyPositive()) {
        // A positive constant divisor (scalar or splat), as Halide 14 lowers it. For c > 0 the
        // Euclidean quotient is the floor of x / c, and with s = x >> (bits - 1) (0 or -1),
        // u = x ^ s is never negative (x, or -x - 1 for negative x), so
        //   q = (u / c) ^ s   and   r = ((u % c) ^ s) + (s & c)
        // (for negative x: q = -(u / c) - 1 and r = c - 1 - u % c). An unsigned division by a
        // constant is one multiply-high and a shift; the truncating sdiv and the sign fix-up the
        // general path needs cost a multiply more (vpmulld on x86) and compares and selects.
        // A power of two is a shift and a mask.
        if (c->isPowerOf2()) {
            llvm::Value *k = llvm::ConstantInt::get(lt, c->logBase2());
            *q = b.CreateAShr(x, k);
            *r = b.CreateAnd(x, b.CreateSub(y, one));
            return;
        }
        llvm::Value *s = b.CreateAShr(x, llvm::ConstantInt::get(lt, t.bits() - 1));
        llvm::Value *u = b.CreateXor(x, s);
        *q = b.CreateXor(b.CreateUDiv(u, y), s);
        *r = b.CreateAdd(b.CreateXor(b.CreateURem(u, y), s), b.CreateAnd(s, y));
        return;
    }
    // Avoid the two undefined cases of sdiv: y == 0 and INT_MIN / -1.
    llvm::Value *minus_one = llvm::Constant::getAllOnesValue(lt);
    llvm::Value *y_m1 = b.CreateICmpEQ(y, minus_one);
    llvm::Value *safe_y = b.CreateSelect(b.CreateOr(y_zero, y_m1), one, y);
    llvm::Value *tq = truncating_div(x, safe_y, true);
    llvm::Value *tr = remainder_of(x, safe_y, tq, true);
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

llvm::Value *CodeGen_LLVM::float_mod(llvm::Value *x, llvm::Value *y) {
    llvm::Value *f = builder.CreateUnaryIntrinsic(llvm::Intrinsic::floor, builder.CreateFDiv(x, y));
    return builder.CreateFSub(x, builder.CreateFMul(y, f));
}

llvm::Value *CodeGen_LLVM::compare(IRNodeType k, const Type &t, llvm::Value *x, llvm::Value *y) {
    llvm::IRBuilderBase &b = builder;
    if (t.is_float()) {
        switch (k) {
        case IRNodeType::EQ:
            return b.CreateFCmpOEQ(x, y);
        case IRNodeType::NE:
            return b.CreateFCmpUNE(x, y);
        case IRNodeType::LT:
            return b.CreateFCmpOLT(x, y);
        case IRNodeType::LE:
            return float_le_ge_unordered ? b.CreateFCmpULE(x, y) : b.CreateFCmpOLE(x, y);
        case IRNodeType::GT:
            return b.CreateFCmpOGT(x, y);
        default:
            return float_le_ge_unordered ? b.CreateFCmpUGE(x, y) : b.CreateFCmpOGE(x, y);
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

llvm::Value *CodeGen_LLVM::tag_buffer_access(llvm::Value *access, const std::string &name) {
    if (auto *inst = llvm::dyn_cast<llvm::Instruction>(access)) {
        llvm::MDBuilder md(ctx);
        llvm::MDNode *root = md.createTBAARoot("Halide buffer");
        llvm::MDNode *type = md.createTBAAScalarTypeNode(name, root);
        inst->setMetadata(llvm::LLVMContext::MD_tbaa, md.createTBAAStructTagNode(type, type, 0));
    }
    return access;
}

llvm::Value *CodeGen_LLVM::element_address(const std::string &name, const Type &elem,
                                           llvm::Value *index) {
    llvm::Value *base = buffer_base(name);
    return builder.CreateInBoundsGEP(memory_type(elem), base,
                                     builder.CreateSExtOrTrunc(index, i64));
}

llvm::Value *CodeGen_LLVM::codegen_index(const Expr &index) {
    if (!promote_indices() || index.type() != Int(32)) {
        return codegen(index);
    }
    std::function<llvm::Value *(const Expr &)> wide = [&](const Expr &e) -> llvm::Value * {
        if (const Add *op = e.as<Add>()) {
            return builder.CreateAdd(wide(op->a), wide(op->b), "", false, true);
        }
        if (const Sub *op = e.as<Sub>()) {
            return builder.CreateSub(wide(op->a), wide(op->b), "", false, true);
        }
        if (const Mul *op = e.as<Mul>()) {
            return builder.CreateMul(wide(op->a), wide(op->b), "", false, true);
        }
        if (const Min *op = e.as<Min>()) {
            llvm::Value *a = wide(op->a), *b = wide(op->b);
            return builder.CreateSelect(builder.CreateICmpSLT(a, b), a, b);
        }
        if (const Max *op = e.as<Max>()) {
            llvm::Value *a = wide(op->a), *b = wide(op->b);
            return builder.CreateSelect(builder.CreateICmpSGT(a, b), a, b);
        }
        return builder.CreateSExt(codegen(e), i64);
    };
    return wide(index);
}

llvm::Value *CodeGen_LLVM::load_scalar(const std::string &name, const Type &t, llvm::Value *index) {
    llvm::Value *v = tag_buffer_access(
        builder.CreateLoad(memory_type(t), element_address(name, t, index)), name);
    return t.is_bool() ? builder.CreateTrunc(v, i1) : v;
}

bool CodeGen_LLVM::call_pure_intrinsic(const Call *op) {
    auto arg = [&](int i) { return codegen(op->args[i]); };
    if (op->is_intrinsic({Call::likely, Call::likely_if_innermost, Call::promise_clamped,
                          Call::unsafe_promise_clamped})) {
        value = arg(0);
    } else if (op->is_intrinsic(Call::strict_float)) {
        llvm::IRBuilderBase::FastMathFlagGuard strict(builder);
        builder.clearFastMathFlags();
        value = arg(0);
    } else if (op->is_intrinsic(Call::return_second)) {
        arg(0);
        value = arg(1);
    } else if (op->is_intrinsic(Call::abs)) {
        llvm::Value *a = arg(0);
        const Type &t = op->args[0].type();
        if (t.is_float()) {
            value = builder.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
        } else if (t.is_int()) {
            llvm::Value *neg = builder.CreateICmpSLT(a, llvm::Constant::getNullValue(a->getType()));
            value = builder.CreateSelect(neg, builder.CreateNeg(a), a);
        } else {
            value = a;
        }
    } else if (op->is_intrinsic(Call::absd)) {
        llvm::Value *a = arg(0), *b = arg(1);
        const Type &t = op->args[0].type();
        if (t.is_float()) {
            value = builder.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, builder.CreateFSub(a, b));
        } else {
            llvm::Value *lt = compare(IRNodeType::LT, t, a, b);
            value = builder.CreateSelect(lt, builder.CreateSub(b, a), builder.CreateSub(a, b));
        }
    } else if (op->is_intrinsic({Call::bitwise_and, Call::bitwise_or, Call::bitwise_xor})) {
        llvm::Value *a = arg(0), *b = arg(1);
        value = op->is_intrinsic(Call::bitwise_and)  ? builder.CreateAnd(a, b)
                : op->is_intrinsic(Call::bitwise_or) ? builder.CreateOr(a, b)
                                                     : builder.CreateXor(a, b);
    } else if (op->is_intrinsic(Call::bitwise_not)) {
        value = builder.CreateNot(arg(0));
    } else if (op->is_intrinsic({Call::count_leading_zeros, Call::count_trailing_zeros})) {
        value = builder.CreateBinaryIntrinsic(op->is_intrinsic(Call::count_leading_zeros)
                                                  ? llvm::Intrinsic::ctlz
                                                  : llvm::Intrinsic::cttz,
                                              arg(0), builder.getFalse());
    } else if (op->is_intrinsic(Call::popcount)) {
        value = builder.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, arg(0));
    } else if (op->is_intrinsic(Call::if_then_else)) {
        value = if_then_else(op);
    } else if (op->is_intrinsic({Call::div_round_to_zero, Call::mod_round_to_zero})) {
        llvm::Value *a = arg(0), *b = arg(1);
        bool s = op->type.is_int();
        value = op->is_intrinsic(Call::div_round_to_zero)
                    ? (s ? builder.CreateSDiv(a, b) : builder.CreateUDiv(a, b))
                    : (s ? builder.CreateSRem(a, b) : builder.CreateURem(a, b));
    } else {
        return call_arith_intrinsic(op);
    }
    return true;
}

llvm::Value *CodeGen_LLVM::if_then_else(const Call *op) {
    user_assert(op->args.size() == 2 || op->args.size() == 3)
        << "if_then_else takes a condition and one or two values";
    Expr cond = op->args[0];
    if (const Broadcast *b = cond.as<Broadcast>()) {
        cond = b->value;
    }
    Expr no = op->args.size() == 3 ? op->args[2] : make_zero(op->type);
    if (cond.type().is_vector() && speculable(op->args[1]) && speculable(no)) {
        // Nothing in either value can fault or be seen: both are computed, lanes select.
        llvm::Value *c = codegen(cond);
        llvm::Value *t = codegen(op->args[1]), *f = codegen(no);
        return builder.CreateSelect(c, t, f);
    }
    // Only the chosen value is computed: the other may read out of bounds, or print. With a
    // vector condition, lane by lane, each lane's value computed in that lane.
    llvm::Value *c = codegen(cond);
    auto choose = [&](llvm::Value *cv, int lane) {
        llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "if_true", fn);
        llvm::BasicBlock *other = llvm::BasicBlock::Create(ctx, "if_false", fn);
        llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "if_done", fn);
        builder.CreateCondBr(cv, yes, other);
        builder.SetInsertPoint(yes);
        llvm::Value *t = lane_of(codegen(op->args[1]), lane);
        llvm::BasicBlock *yes_end = builder.GetInsertBlock();
        builder.CreateBr(done);
        builder.SetInsertPoint(other);
        llvm::Value *f = lane_of(codegen(no), lane);
        llvm::BasicBlock *other_end = builder.GetInsertBlock();
        builder.CreateBr(done);
        builder.SetInsertPoint(done);
        llvm::PHINode *phi = builder.CreatePHI(t->getType(), 2);
        phi->addIncoming(t, yes_end);
        phi->addIncoming(f, other_end);
        return phi;
    };
    if (!cond.type().is_vector()) {
        return choose(c, -1);
    }
    llvm::Value *result = llvm::Constant::getNullValue(llvm_type(op->type));
    for (int i : effect_lanes(op->type.lanes())) {
        llvm::Value *v = in_lane(i, [&] { return choose(lane_of(c, i), i); });
        result = builder.CreateInsertElement(result, v, uint64_t(i));
    }
    return result;
}

std::vector<int> CodeGen_LLVM::effect_lanes(int lanes) {
    if (effect_lane >= 0) {
        user_assert(effect_lane < lanes)
            << "codegen: a vector call with effects of " << lanes
            << " lanes inside a lane-by-lane evaluation of lane " << effect_lane;
        return {effect_lane};
    }
    std::vector<int> all(lanes);
    for (int i = 0; i < lanes; i++) {
        all[i] = i;
    }
    return all;
}

llvm::Value *CodeGen_LLVM::lane_of(llvm::Value *v, int i) {
    if (i < 0 || !v->getType()->isVectorTy()) {
        return v;
    }
    return builder.CreateExtractElement(v, uint64_t(i));
}

bool CodeGen_LLVM::speculable(const Expr &e) {
    class Finder : public IRVisitor {
    public:
        using IRVisitor::visit;
        bool ok = true;
        void visit(const Load *) override { ok = false; }
        void visit(const Call *op) override {
            if (op->call_type != Call::PureExtern && op->call_type != Call::PureIntrinsic &&
                !(op->intrinsic_op != Call::IntrinsicOpCount &&
                  Call::is_pure_intrinsic(op->intrinsic_op))) {
                ok = false;
                return;
            }
            IRVisitor::visit(op);
        }
    } f;
    e.accept(&f);
    return f.ok;
}

std::string
CodeGen_LLVM::math_base_name(const std::string &name,
                             const std::function<bool(const std::string &)> &float_spelling) {
    std::string n = name;
    for (const char *suffix : {"_f16", "_f32", "_f64"}) {
        if (n.size() > 4 && n.compare(n.size() - 4, 4, suffix) == 0) {
            n = n.substr(0, n.size() - 4);
        }
    }
    if (n.size() > 1 && n.back() == 'f' && float_spelling(n.substr(0, n.size() - 1))) {
        n.pop_back();
    }
    return n;
}

void CodeGen_LLVM::coerce_to_call_type(const Call *op) {
    llvm::Type *want = llvm_type(op->type);
    if (value->getType() != want && value->getType()->isIntOrIntVectorTy() &&
        want->isIntOrIntVectorTy()) {
        value = builder.CreateIntCast(value, want, op->type.is_int());
    }
}

void CodeGen_LLVM::serial_loop(const For *op) {
    llvm::Value *min = codegen(op->min), *extent = codegen(op->extent);
    // The loop variable is a signed 32-bit integer of the IR: neither the end nor the next
    // value overflows, which lets LLVM widen the variable to 64 bits for the addresses.
    llvm::Value *end = builder.CreateNSWAdd(min, extent);
    llvm::BasicBlock *pre = builder.GetInsertBlock();
    llvm::BasicBlock *loop = llvm::BasicBlock::Create(ctx, op->name + "_loop", fn);
    llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx, op->name + "_end", fn);
    builder.CreateCondBr(builder.CreateICmpSLT(min, end), loop, after);
    builder.SetInsertPoint(loop);
    llvm::PHINode *i = builder.CreatePHI(min->getType(), 2, op->name);
    i->addIncoming(min, pre);
    push_var(op->name, i);
    const bool outer_constant_trip = in_constant_trip_loop;
    in_constant_trip_loop = op->extent.as<IntImm>() != nullptr;
    codegen(op->body);
    in_constant_trip_loop = outer_constant_trip;
    pop_var(op->name);
    llvm::Value *next = builder.CreateNSWAdd(i, llvm::ConstantInt::get(min->getType(), 1));
    i->addIncoming(next, builder.GetInsertBlock());
    llvm::BranchInst *back = builder.CreateCondBr(builder.CreateICmpSLT(next, end), loop, after);
    const bool innermost_vector_row = outer_constant_trip && !op->extent.as<IntImm>() &&
                                      !holds_loop(op->body) && has_vectors(op->body);
    const char *rule = holds_scalar_unknown_trip_loop(op->body) ? "llvm.loop.unroll.disable"
                       : innermost_vector_row                   ? "llvm.loop.unroll.runtime.disable"
                                                                : nullptr;
    if (rule) {
        // The unrolling rules of the header comment: a loop ID whose property says which.
        llvm::MDNode *property = llvm::MDNode::get(ctx, llvm::MDString::get(ctx, rule));
        llvm::MDNode *id = llvm::MDNode::getDistinct(ctx, {nullptr, property});
        id->replaceOperandWith(0, id);
        back->setMetadata(llvm::LLVMContext::MD_loop, id);
    }
    builder.SetInsertPoint(after);
}

// --- expressions ------------------------------------------------------------------------------

void CodeGen_LLVM::visit(const IntImm *op) {
    value = llvm::ConstantInt::getSigned(llvm_type(op->type), op->value);
}
void CodeGen_LLVM::visit(const UIntImm *op) {
    value = llvm::ConstantInt::get(llvm_type(op->type), op->value);
}
void CodeGen_LLVM::visit(const FloatImm *op) {
    value = llvm::ConstantFP::get(llvm_type(op->type), op->value);
}
void CodeGen_LLVM::visit(const StringImm *op) {
    unsupported("the string \"" + op->value + "\"");
}

void CodeGen_LLVM::visit(const Cast *op) {
    value = cast_value(codegen(op->value), op->value.type(), op->type);
}

void CodeGen_LLVM::visit(const Reinterpret *op) {
    llvm::Value *v = codegen(op->value);
    const Type &from = op->value.type(), &to = op->type;
    if (to.is_handle() && !from.is_handle()) {
        value = builder.CreateIntToPtr(v, llvm_type(to));
    } else if (from.is_handle() && !to.is_handle()) {
        value = builder.CreatePtrToInt(v, llvm_type(to));
    } else {
        value = builder.CreateBitCast(v, llvm_type(to));
    }
}

void CodeGen_LLVM::visit(const Variable *op) {
    value = lookup_var(op->name);
    internal_assert(op->type.is_handle() || value->getType()->isPointerTy() ||
                    value->getType() == llvm_type(op->type))
        << "variable " << op->name << " used with another type";
}

namespace {

/** Signed integers of 32 bits or more do not overflow (IR.h): LLVM may then widen loop indices
 * and fold the sign extension of an index into the address arithmetic, as Halide 14 lets it. */
bool no_signed_wrap(const Type &t) {
    return t.is_int() && t.bits() >= 32;
}

}  // namespace

void CodeGen_LLVM::visit(const Add *op) {
    llvm::Value *a = codegen(op->a), *b = codegen(op->b);
    value = op->type.is_float() ? builder.CreateFAdd(a, b)
                                : builder.CreateAdd(a, b, "", false, no_signed_wrap(op->type));
}
void CodeGen_LLVM::visit(const Sub *op) {
    llvm::Value *a = codegen(op->a), *b = codegen(op->b);
    value = op->type.is_float() ? builder.CreateFSub(a, b)
                                : builder.CreateSub(a, b, "", false, no_signed_wrap(op->type));
}
void CodeGen_LLVM::visit(const Mul *op) {
    llvm::Value *a = codegen(op->a), *b = codegen(op->b);
    value = op->type.is_float() ? builder.CreateFMul(a, b)
                                : builder.CreateMul(a, b, "", false, no_signed_wrap(op->type));
}

void CodeGen_LLVM::divide(const Type &t, const Expr &x, const Expr &y, bool remainder) {
    llvm::Value *a = codegen(x), *b = codegen(y);
    if (t.is_float()) {
        value = remainder ? float_mod(a, b) : builder.CreateFDiv(a, b);
        return;
    }
    llvm::Value *q, *r;
    div_mod(t, a, b, &q, &r);
    value = remainder ? r : q;
}
void CodeGen_LLVM::visit(const Div *op) {
    divide(op->type, op->a, op->b, false);
}
void CodeGen_LLVM::visit(const Mod *op) {
    divide(op->type, op->a, op->b, true);
}

void CodeGen_LLVM::visit(const Min *op) {
    llvm::Value *a = codegen(op->a), *b = codegen(op->b);
    value = builder.CreateSelect(compare(IRNodeType::LT, op->type, a, b), a, b);
}
void CodeGen_LLVM::visit(const Max *op) {
    llvm::Value *a = codegen(op->a), *b = codegen(op->b);
    value = builder.CreateSelect(compare(IRNodeType::GT, op->type, a, b), a, b);
}

void CodeGen_LLVM::compare_op(IRNodeType k, const Expr &a, const Expr &b) {
    llvm::Value *x = codegen(a), *y = codegen(b);
    value = compare(k, a.type(), x, y);
}
void CodeGen_LLVM::visit(const EQ *op) {
    compare_op(IRNodeType::EQ, op->a, op->b);
}
void CodeGen_LLVM::visit(const NE *op) {
    compare_op(IRNodeType::NE, op->a, op->b);
}
void CodeGen_LLVM::visit(const LT *op) {
    compare_op(IRNodeType::LT, op->a, op->b);
}
void CodeGen_LLVM::visit(const LE *op) {
    compare_op(IRNodeType::LE, op->a, op->b);
}
void CodeGen_LLVM::visit(const GT *op) {
    compare_op(IRNodeType::GT, op->a, op->b);
}
void CodeGen_LLVM::visit(const GE *op) {
    compare_op(IRNodeType::GE, op->a, op->b);
}

void CodeGen_LLVM::visit(const And *op) {
    llvm::Value *a = codegen(op->a), *b = codegen(op->b);
    value = builder.CreateAnd(a, b);
}
void CodeGen_LLVM::visit(const Or *op) {
    llvm::Value *a = codegen(op->a), *b = codegen(op->b);
    value = builder.CreateOr(a, b);
}
void CodeGen_LLVM::visit(const Not *op) {
    value = builder.CreateNot(codegen(op->a));
}
void CodeGen_LLVM::visit(const Select *op) {
    llvm::Value *c = codegen(op->condition);
    llvm::Value *t = codegen(op->true_value), *f = codegen(op->false_value);
    value = builder.CreateSelect(c, t, f);
}

void CodeGen_LLVM::visit(const Load *op) {
    const Type &t = op->type;
    if (t.is_scalar() && !op->predicate.defined()) {
        value = load_scalar(op->name, t, codegen_index(op->index));
        return;
    }
    const Type et = t.element_of();
    const int lanes = t.lanes();
    const Expr *dense = dense_base(op->index);
    if (op->predicate.defined()) {
        if (dense && t.is_vector()) {
            // A masked vector load: lanes whose predicate is false do not touch memory.
            llvm::Value *mask = codegen(op->predicate);
            llvm::Value *addr = element_address(op->name, et, codegen_index(*dense));
            llvm::Value *v = tag_buffer_access(
                builder.CreateMaskedLoad(memory_type(t), addr, llvm::Align(et.bytes()), mask,
                                         llvm::Constant::getNullValue(memory_type(t))),
                op->name);
            value = t.is_bool() ? builder.CreateTrunc(v, llvm_type(t)) : v;
            return;
        }
        value = load_lanes(op);
        return;
    }
    if (dense) {
        value = load_dense(op->name, t, codegen_index(*dense));
        return;
    }
    const Broadcast *bc = op->index.as<Broadcast>();
    if (bc && bc->value.type().is_scalar()) {
        // Every lane reads the same element: one scalar load.
        value =
            builder.CreateVectorSplat(lanes, load_scalar(op->name, et, codegen_index(bc->value)));
        return;
    }
    const Ramp *ramp = op->index.as<Ramp>();
    if (!ramp || !ramp->base.type().is_scalar()) {
        value = load_lanes(op);
        return;
    }
    int64_t stride = 0;
    bool const_stride = const_int_value(ramp->stride, &stride);
    if (const_stride && stride == -1) {
        // Backwards: the dense vector that ends at the base, reversed.
        llvm::Value *base = codegen_index(ramp->base);
        llvm::Value *first =
            builder.CreateSub(base, llvm::ConstantInt::get(base->getType(), lanes - 1));
        value = builder.CreateVectorReverse(load_dense(op->name, t, first));
        return;
    }
    if (const_stride && stride >= 2 && stride <= max_shuffled_stride) {
        // `stride` dense vectors that together cover exactly the elements from the first lane's to
        // the last lane's (the last one ends at the last lane), then one shuffle picks the lanes.
        llvm::Value *base = codegen_index(ramp->base);
        llvm::Type *it = base->getType();
        const int64_t last_start = (lanes - 1) * stride + 1 - lanes;
        std::vector<llvm::Value *> parts;
        for (int64_t j = 0; j < stride; j++) {
            int64_t start = j + 1 < stride ? j * lanes : last_start;
            parts.push_back(load_dense(op->name, t,
                                       builder.CreateAdd(base, llvm::ConstantInt::get(it, start))));
        }
        std::vector<int> mask;
        for (int64_t i = 0; i < lanes; i++) {
            int64_t e = i * stride;
            mask.push_back(e < (stride - 1) * lanes ? e : (stride - 1) * lanes + (e - last_start));
        }
        value = builder.CreateShuffleVector(concat_vectors(parts), mask);
        return;
    }
    // Any other ramp: lane by lane, stepping a pointer (no vector of indices).
    llvm::Value *addr = element_address(op->name, et, codegen_index(ramp->base));
    llvm::Value *step = builder.CreateSExtOrTrunc(codegen(ramp->stride), i64);
    llvm::Value *result = llvm::PoisonValue::get(llvm_type(t));
    for (int i = 0; i < lanes; i++) {
        llvm::Value *lane = tag_buffer_access(builder.CreateLoad(memory_type(et), addr), op->name);
        if (et.is_bool()) {
            lane = builder.CreateTrunc(lane, i1);
        }
        result = builder.CreateInsertElement(result, lane, builder.getInt32(i));
        addr = builder.CreateInBoundsGEP(memory_type(et), addr, step);
    }
    value = result;
}

llvm::Value *CodeGen_LLVM::load_dense(const std::string &name, const Type &t, llvm::Value *base) {
    llvm::Value *addr = element_address(name, t.element_of(), base);
    llvm::Value *v = tag_buffer_access(
        builder.CreateAlignedLoad(memory_type(t), addr, llvm::Align(t.element_of().bytes())), name);
    return t.is_bool() ? builder.CreateTrunc(v, llvm_type(t)) : v;
}

llvm::Value *CodeGen_LLVM::lane_indices(const Expr &index) {
    // Each lane's address sign-extends its index to 64 bits. Extending the whole vector first
    // (one vpmovsxdq per four lanes on x86) and extracting 64-bit lanes costs less than
    // extracting 32-bit lanes and extending each (a movslq per lane, which LLVM 19 keeps: 120 of
    // them in bilateral_grid's interpolation loop, about 15 % of its instructions).
    llvm::Value *idx = codegen(index);
    auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(idx->getType());
    if (vt && vt->getElementType()->getIntegerBitWidth() < 64) {
        idx = builder.CreateSExt(idx, llvm::FixedVectorType::get(i64, vt->getNumElements()));
    }
    return idx;
}

llvm::Value *CodeGen_LLVM::load_lanes(const Load *op) {
    // Gather lane by lane (only lanes whose predicate holds are read).
    const Type &t = op->type;
    llvm::Value *idx = lane_indices(op->index);
    llvm::Value *pred = op->predicate.defined() ? codegen(op->predicate) : nullptr;
    llvm::Value *result = llvm::UndefValue::get(llvm_type(t));
    for (int i = 0; i < t.lanes(); i++) {
        llvm::Value *li =
            t.is_vector() ? builder.CreateExtractElement(idx, builder.getInt32(i)) : idx;
        llvm::Value *lane;
        if (pred) {
            llvm::Value *p =
                t.is_vector() ? builder.CreateExtractElement(pred, builder.getInt32(i)) : pred;
            llvm::BasicBlock *cur = builder.GetInsertBlock();
            llvm::Value *lv = nullptr;
            llvm::BasicBlock *yes_end =
                when(p, [&]() { lv = load_scalar(op->name, t.element_of(), li); });
            llvm::PHINode *phi = builder.CreatePHI(scalar_type(t.element_of()), 2);
            phi->addIncoming(llvm::Constant::getNullValue(phi->getType()), cur);
            phi->addIncoming(lv, yes_end);
            lane = phi;
        } else {
            lane = load_scalar(op->name, t.element_of(), li);
        }
        result =
            t.is_vector() ? builder.CreateInsertElement(result, lane, builder.getInt32(i)) : lane;
    }
    return result;
}

llvm::Value *CodeGen_LLVM::concat_vectors(const std::vector<llvm::Value *> &vs) {
    llvm::Value *all = vs[0];
    for (size_t i = 1; i < vs.size(); i++) {
        int na = llvm::cast<llvm::FixedVectorType>(all->getType())->getNumElements();
        int nb = llvm::cast<llvm::FixedVectorType>(vs[i]->getType())->getNumElements();
        int n = std::max(na, nb);
        auto widen = [&](llvm::Value *x, int from) {
            if (from == n) {
                return x;
            }
            std::vector<int> mask;
            for (int j = 0; j < n; j++) {
                mask.push_back(j < from ? j : -1);
            }
            return builder.CreateShuffleVector(x, mask);
        };
        llvm::Value *a = widen(all, na), *b = widen(vs[i], nb);
        std::vector<int> mask;
        for (int j = 0; j < na; j++) {
            mask.push_back(j);
        }
        for (int j = 0; j < nb; j++) {
            mask.push_back(n + j);
        }
        all = builder.CreateShuffleVector(a, b, mask);
    }
    return all;
}

void CodeGen_LLVM::visit(const Ramp *op) {
    llvm::Value *base = codegen(op->base), *stride = codegen(op->stride);
    const Type &et = op->base.type();
    if (!et.is_scalar()) {
        unsupported("a ramp of vectors");
    }
    llvm::Value *b = builder.CreateVectorSplat(op->lanes, base);
    llvm::Value *s = builder.CreateVectorSplat(op->lanes, stride);
    std::vector<llvm::Constant *> steps;
    for (int i = 0; i < op->lanes; i++) {
        steps.push_back(et.is_float() ? llvm::ConstantFP::get(scalar_type(et), double(i))
                                      : llvm::ConstantInt::get(scalar_type(et), i));
    }
    llvm::Value *k = llvm::ConstantVector::get(steps);
    const bool nsw = no_signed_wrap(et);
    value = et.is_float()
                ? builder.CreateFAdd(b, builder.CreateFMul(s, k))
                : builder.CreateAdd(b, builder.CreateMul(s, k, "", false, nsw), "", false, nsw);
}

void CodeGen_LLVM::visit(const Broadcast *op) {
    if (!op->value.type().is_scalar()) {
        unsupported("a broadcast of a vector");
    }
    value = builder.CreateVectorSplat(op->lanes, codegen(op->value));
}

void CodeGen_LLVM::visit(const Let *op) {
    llvm::Value *v = codegen(op->value);
    push_var(op->name, v);
    value = codegen(op->body);
    pop_var(op->name);
}

void CodeGen_LLVM::visit(const Shuffle *op) {
    std::vector<llvm::Value *> vs;
    for (const Expr &v : op->vectors) {
        llvm::Value *x = codegen(v);
        if (!x->getType()->isVectorTy()) {
            x = builder.CreateVectorSplat(1, x);
        }
        vs.push_back(x);
    }
    // Concatenate everything into one vector, then pick the lanes.
    llvm::Value *all = concat_vectors(vs);
    if (op->type.is_scalar()) {
        value = builder.CreateExtractElement(all, builder.getInt32(op->indices[0]));
    } else {
        value = builder.CreateShuffleVector(all, op->indices);
    }
}

// --- statements -------------------------------------------------------------------------------

void CodeGen_LLVM::visit(const AssertStmt *op) {
    unsupported("the assert '" + to_string(Stmt(op)) + "'");
}

void CodeGen_LLVM::visit(const Fork *) {
    unsupported("a fork (async tasks)");
}

void CodeGen_LLVM::visit(const Acquire *) {
    unsupported("an acquire (async tasks)");
}

void CodeGen_LLVM::visit(const LetStmt *op) {
    llvm::Value *v = codegen(op->value);
    if (!v->hasName() && !llvm::isa<llvm::Constant>(v)) {
        v->setName(op->name);
    }
    push_var(op->name, v);
    codegen(op->body);
    pop_var(op->name);
}

void CodeGen_LLVM::visit(const ProducerConsumer *op) {
    codegen(op->body);
}

void CodeGen_LLVM::visit(const Block *op) {
    Stmt s = op;
    while (const Block *b = s.as<Block>()) {
        codegen(b->first);
        s = b->rest;
    }
    codegen(s);
}

void CodeGen_LLVM::visit(const Evaluate *op) {
    // A constant has no effect (and a string would only leave an unused global behind).
    if (!is_const(op->value)) {
        codegen(op->value);
    }
}

void CodeGen_LLVM::visit(const IfThenElse *op) {
    llvm::Value *c = codegen(op->condition);
    llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(ctx, "then", fn);
    llvm::BasicBlock *else_bb = llvm::BasicBlock::Create(ctx, "else", fn);
    llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx, "after_if", fn);
    builder.CreateCondBr(c, then_bb, else_bb);
    builder.SetInsertPoint(then_bb);
    codegen(op->then_case);
    builder.CreateBr(after);
    builder.SetInsertPoint(else_bb);
    codegen(op->else_case);
    builder.CreateBr(after);
    builder.SetInsertPoint(after);
}

void CodeGen_LLVM::visit(const Store *op) {
    const Type &t = op->value.type();
    llvm::Value *v = codegen(op->value);
    if (t.is_bool()) {
        v = builder.CreateZExt(v, memory_type(t));
    }
    if (t.is_scalar() && !op->predicate.defined()) {
        tag_buffer_access(
            builder.CreateStore(v, element_address(op->name, t, codegen_index(op->index))),
            op->name);
        return;
    }
    const Type et = t.element_of();
    const int lanes = t.lanes();
    const Expr *dense = dense_base(op->index);
    if (op->predicate.defined()) {
        if (dense && t.is_vector()) {
            // A masked vector store: lanes whose predicate is false do not touch memory.
            llvm::Value *mask = codegen(op->predicate);
            llvm::Value *addr = element_address(op->name, et, codegen_index(*dense));
            tag_buffer_access(builder.CreateMaskedStore(v, addr, llvm::Align(et.bytes()), mask),
                              op->name);
            return;
        }
        store_lanes(op, v);
        return;
    }
    if (dense) {
        llvm::Value *addr = element_address(op->name, et, codegen_index(*dense));
        tag_buffer_access(builder.CreateAlignedStore(v, addr, llvm::Align(et.bytes())), op->name);
        return;
    }
    const Ramp *ramp = op->index.as<Ramp>();
    if (!ramp || !ramp->base.type().is_scalar()) {
        store_lanes(op, v);
        return;
    }
    int64_t stride = 0;
    if (const_int_value(ramp->stride, &stride) && stride == -1) {
        // Backwards: reversed, the dense vector that ends at the base.
        llvm::Value *base = codegen_index(ramp->base);
        llvm::Value *first =
            builder.CreateSub(base, llvm::ConstantInt::get(base->getType(), lanes - 1));
        tag_buffer_access(builder.CreateAlignedStore(builder.CreateVectorReverse(v),
                                                     element_address(op->name, et, first),
                                                     llvm::Align(et.bytes())),
                          op->name);
        return;
    }
    // Any other ramp: lane by lane, stepping a pointer (no vector of indices).
    llvm::Value *addr = element_address(op->name, et, codegen_index(ramp->base));
    llvm::Value *step = builder.CreateSExtOrTrunc(codegen(ramp->stride), i64);
    for (int i = 0; i < lanes; i++) {
        tag_buffer_access(
            builder.CreateStore(builder.CreateExtractElement(v, builder.getInt32(i)), addr),
            op->name);
        addr = builder.CreateInBoundsGEP(memory_type(et), addr, step);
    }
}

void CodeGen_LLVM::store_lanes(const Store *op, llvm::Value *v) {
    // Scatter lane by lane (only lanes whose predicate holds are written). Bools were widened
    // to bytes: the lanes are stored as their memory type.
    const Type &t = op->value.type();
    llvm::Value *idx = lane_indices(op->index);
    llvm::Value *pred = op->predicate.defined() ? codegen(op->predicate) : nullptr;
    for (int i = 0; i < t.lanes(); i++) {
        auto lane_of = [&](llvm::Value *x) {
            return t.is_vector() ? builder.CreateExtractElement(x, builder.getInt32(i)) : x;
        };
        llvm::Value *lane = lane_of(v), *li = lane_of(idx);
        auto store_lane = [&]() {
            tag_buffer_access(
                builder.CreateStore(lane, element_address(op->name, t.element_of(), li)), op->name);
        };
        if (pred) {
            when(lane_of(pred), store_lane);
        } else {
            store_lane();
        }
    }
}

namespace {

/** `wide` (float32 lanes) rounded to bfloat16 to nearest, ties to even, by integer arithmetic
 * (Halide's float32_to_bfloat16): the bits plus 0x7fff plus the lowest bit kept, shifted. */
llvm::Value *round_to_bfloat(llvm::IRBuilder<> &b, llvm::Value *wide, llvm::Type *to) {
    llvm::Type *i32t = wide->getType()->getWithNewType(b.getInt32Ty());
    llvm::Type *i16t = wide->getType()->getWithNewType(b.getInt16Ty());
    llvm::Value *bits = b.CreateBitCast(wide, i32t);
    llvm::Value *c16 = llvm::ConstantInt::get(i32t, 16);
    llvm::Value *odd = b.CreateAnd(b.CreateLShr(bits, c16), llvm::ConstantInt::get(i32t, 1));
    bits = b.CreateAdd(bits, b.CreateAdd(odd, llvm::ConstantInt::get(i32t, 0x7fff)));
    return b.CreateBitCast(b.CreateTrunc(b.CreateLShr(bits, c16), i16t), to);
}

/** bfloat16 arithmetic, as Halide 21 computes it without native bfloat16 (EmulateFloat16Math):
 * in float32, each result rounded to bfloat16 to nearest even by integer arithmetic. LLVM would
 * round with a call of __truncsfbf2 wherever the target has no bfloat16 instructions (x86 below
 * AVX512-BF16), which Debian 12's libgcc does not define: so every instruction whose result is
 * bfloat16 and would be rounded (a conversion to it, an arithmetic operation, a floating-point
 * intrinsic) is rewritten here, on every target, before LLVM sees it. Widening bfloat16 to
 * float32 is exact (a shift), and so are loads, stores, selects and comparisons. */
void round_bfloat_in_float32(llvm::Module &m) {
    for (llvm::Function &f : m) {
        for (llvm::BasicBlock &bb : f) {
            for (llvm::Instruction &inst : llvm::make_early_inc_range(bb)) {
                llvm::Type *t = inst.getType();
                if (!t->getScalarType()->isBFloatTy()) {
                    continue;
                }
                llvm::IRBuilder<> b(&inst);
                llvm::Type *f32t = t->getWithNewType(b.getFloatTy());
                auto widen = [&](llvm::Value *v) {
                    return v->getType()->getScalarType()->isBFloatTy() ? b.CreateFPExt(v, f32t) : v;
                };
                llvm::Value *wide = nullptr;
                if (auto *c = llvm::dyn_cast<llvm::CastInst>(&inst)) {
                    llvm::Value *src = c->getOperand(0);
                    switch (c->getOpcode()) {
                    case llvm::Instruction::FPTrunc:  // from float32 (exact) or wider
                        wide = src->getType()->getScalarType()->isFloatTy()
                                   ? src
                                   : b.CreateFPTrunc(src, f32t);  // float64: Halide's two steps
                        break;
                    case llvm::Instruction::SIToFP:
                        wide = b.CreateSIToFP(src, f32t);
                        break;
                    case llvm::Instruction::UIToFP:
                        wide = b.CreateUIToFP(src, f32t);
                        break;
                    default:
                        break;
                    }
                } else if (auto *bo = llvm::dyn_cast<llvm::BinaryOperator>(&inst)) {
                    wide = b.CreateBinOp(bo->getOpcode(), widen(bo->getOperand(0)),
                                         widen(bo->getOperand(1)));
                } else if (auto *uo = llvm::dyn_cast<llvm::UnaryOperator>(&inst)) {
                    wide = b.CreateUnOp(uo->getOpcode(), widen(uo->getOperand(0)));
                } else if (auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst)) {
                    // Floating-point intrinsics overloaded on their one type (sqrt, fabs, floor,
                    // minnum, fma, ...): the float32 overload on widened arguments.
                    std::vector<llvm::Value *> args;
                    bool same_type = true;
                    for (llvm::Value *a : call->args()) {
                        same_type = same_type && a->getType() == t;
                        args.push_back(widen(a));
                    }
                    if (same_type && call->getFunctionType()->getNumParams() > 0 &&
                        llvm::Intrinsic::isOverloaded(call->getIntrinsicID())) {
                        wide = b.CreateIntrinsic(call->getIntrinsicID(), {f32t}, args);
                    }
                }
                if (!wide) {
                    continue;  // exact on bfloat16 (a load, a select, a phi, a bitcast)
                }
                auto *wi = llvm::dyn_cast<llvm::Instruction>(wide);
                if (wi && wi != inst.getOperand(0) && llvm::isa<llvm::FPMathOperator>(wi) &&
                    llvm::isa<llvm::FPMathOperator>(inst)) {
                    wi->setFastMathFlags(inst.getFastMathFlags());  // a new instruction's
                }
                inst.replaceAllUsesWith(round_to_bfloat(b, wide, t));
                inst.eraseFromParent();
            }
        }
    }
}

}  // namespace

void optimize_module(llvm::Module &m, llvm::TargetMachine &tm, int level) {
    round_bfloat_in_float32(m);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = level >= 2;
    pto.SLPVectorization = level >= 2;
    llvm::PassBuilder pb(&tm, pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel ol = level <= 0   ? llvm::OptimizationLevel::O0
                                 : level == 1 ? llvm::OptimizationLevel::O1
                                 : level == 2 ? llvm::OptimizationLevel::O2
                                              : llvm::OptimizationLevel::O3;
    llvm::ModulePassManager mpm =
        level <= 0 ? pb.buildO0DefaultPipeline(ol) : pb.buildPerModuleDefaultPipeline(ol);
    mpm.run(m, mam);
}

}  // namespace tally
