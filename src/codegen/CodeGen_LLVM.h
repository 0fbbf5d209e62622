/** \file
 * The LLVM code generator both LLVM back ends derive from (as Halide's CodeGen_PTX_Dev derives
 * from CodeGen_LLVM): CodeGen_Host.cpp for the host CPU and CodeGen_PTX.cpp for NVPTX.
 *
 * It owns what IR.h's semantics fix for every target: the expression visitor (constants, casts,
 * arithmetic with Halide's Euclidean integer division and modulo, comparisons, vectors), loads
 * and stores (dense, reversed and short-strided vectors as LLVM vector accesses, predicated dense
 * ones masked, broadcast loads as one scalar load, the rest lane by lane, as Halide 14 does),
 * the fast-math flags Halide 14 gives floating point (and strict_float() turning them off),
 * Let/LetStmt scopes, blocks, ifs, serial loops and the pure intrinsics. A back end overrides
 * only what differs: how functions and their arguments are bound, what a name that is not in
 * scope means, loops that are not serial, allocations, calls to the outside world, and the
 * wording of its errors. So a bug in, say, Load is fixed once for host and device code.
 */
#ifndef TALLY_CODEGEN_CODEGEN_LLVM_H
#define TALLY_CODEGEN_CODEGEN_LLVM_H

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "codegen/Analysis.h"

#include "tally/IR.h"
#include "tally/IRVisitor.h"

namespace llvm {
class TargetMachine;
}  // namespace llvm

namespace tally {

class CodeGen_LLVM : public IRVisitor {
public:
    using IRVisitor::visit;

protected:
    /** Emits into `mod`, which the back end creates and sets before emitting. */
    explicit CodeGen_LLVM(llvm::LLVMContext &ctx);

    llvm::LLVMContext &ctx;
    llvm::IRBuilder<> builder;
    llvm::Module *mod = nullptr;   // the module being filled
    llvm::Function *fn = nullptr;  // the function being emitted
    llvm::Value *value = nullptr;  // the result of the last visited expression
    llvm::Type *i1, *i8, *i32, *i64, *ptr;

    /** Names to the stack of values they are bound to, innermost last. */
    using Scope = std::map<std::string, std::vector<llvm::Value *>>;
    Scope vars;     // variables
    Scope buffers;  // the memory a Load/Store name refers to (element 0)

    /** Float a <= b and a >= b as Halide's x86 back end computes them, !(a > b) and !(b > a)
     * (CodeGen_X86.cpp visit(LE/GE), Halide 14 and 21 alike), so true when either is NaN; else
     * ordered, as Halide's CodeGen_LLVM (the NVPTX back end's). Visible without fast-math
     * flags only: strict_le, strict_float targets. */
    bool float_le_ge_unordered = false;

    // --- what each back end says for itself --------------------------------------------------

    /** Reports IR the back end cannot compile (`what` names the node); throws CompileError. */
    [[noreturn]] virtual void unsupported(const std::string &what) = 0;
    /** The value of a variable that is not in scope (or an error). */
    virtual llvm::Value *unbound_var(const std::string &name) = 0;
    /** The memory of a Load/Store name that neither a buffer in scope nor a handle variable
     * names (or an error). */
    virtual llvm::Value *unbound_buffer(const std::string &name) = 0;

    // --- types ------------------------------------------------------------------------------

    llvm::Type *scalar_type(const Type &t);
    llvm::Type *llvm_type(const Type &t);
    /** In memory, bools take a byte. */
    llvm::Type *memory_type(const Type &t);

    // --- scopes -----------------------------------------------------------------------------

    void push_var(const std::string &n, llvm::Value *v) { vars[n].push_back(v); }
    void pop_var(const std::string &n) { pop(vars, n); }
    void push_buffer(const std::string &n, llvm::Value *v) { buffers[n].push_back(v); }
    void pop_buffer(const std::string &n) { pop(buffers, n); }
    llvm::Value *lookup_var(const std::string &n);
    /** The memory a Load/Store name refers to: an allocation or buffer bound with push_buffer,
     * else a handle variable of that name, else unbound_buffer(). */
    llvm::Value *buffer_base(const std::string &n);
    /** An alloca at the top of the current function's entry block. */
    llvm::AllocaInst *entry_alloca(llvm::Type *t, const std::string &name,
                                   llvm::Value *count = nullptr);

    // --- generation ---------------------------------------------------------------------------

    llvm::Value *codegen(const Expr &e);
    void codegen(const Stmt &s);

    /** Converts `v` of IR type `from` to `to`, as Cast does. */
    llvm::Value *cast_value(llvm::Value *v, const Type &from, const Type &to);
    /** Euclidean quotient and remainder of integers: the remainder is never negative, and
     * division by zero gives 0 for both. */
    void div_mod(const Type &t, llvm::Value *x, llvm::Value *y, llvm::Value **q, llvm::Value **r);
    /** x - y * floor(x / y). */
    llvm::Value *float_mod(llvm::Value *x, llvm::Value *y);
    /** The comparison `k` (EQ, NE, LT, LE, GT, GE) of operands of IR type `t`. */
    llvm::Value *compare(IRNodeType k, const Type &t, llvm::Value *x, llvm::Value *y);

    /** Tags `access`, a load or store of buffer `name`'s elements, with type-based alias
     * metadata of its own for that name, as Halide 14 does: in Halide's IR, different buffer
     * names are different memory, so LLVM may keep a value loaded from one in a register across
     * stores to another (a reduction's accumulator across its inputs' loads). Returns `access`. */
    llvm::Value *tag_buffer_access(llvm::Value *access, const std::string &name);
    /** A scalar load or store index (or a dense vector's first element), as Halide 14's
     * promote_64 computes it where pointers are 64-bit: an int32 index's adds, subtracts,
     * multiplies, mins and maxes in 64 bits (they do not overflow: see no_signed_wrap), each
     * leaf sign-extended, so that LLVM folds constant offsets into the address and strength-
     * reduces the loop's addresses without a sign extension per access. Other indices, and
     * every index where promote_indices() is false, as they are. */
    llvm::Value *codegen_index(const Expr &index);
    /** Whether indices are computed in 64 bits (codegen_index); false for NVPTX, as in
     * Halide 14 (its 32-bit index arithmetic is cheaper there). */
    virtual bool promote_indices() const { return true; }
    /** Address of element `index` (scalar) of buffer `name`. */
    llvm::Value *element_address(const std::string &name, const Type &elem, llvm::Value *index);
    llvm::Value *load_scalar(const std::string &name, const Type &t, llvm::Value *index);
    /** The dense vector of type `t` whose first element is element `base` of buffer `name`. */
    llvm::Value *load_dense(const std::string &name, const Type &t, llvm::Value *base);
    /** One vector holding the lanes of `vs` in order (the vectors may differ in width). */
    llvm::Value *concat_vectors(const std::vector<llvm::Value *> &vs);

    /** Floating point gets Halide 14's fast-math flags (no NaNs, no infinities, no signed
     * zeros, reassociation, contraction into FMA, approximate functions; never approximate
     * reciprocals) when `on`, strict IEEE operations otherwise. A back end that wants them
     * calls this before emitting; strict_float(e) always emits `e` strictly. */
    void set_fast_math(bool on);

    /** Runs `body` only when `cond` holds, in a block of its own; returns the block `body` ended
     * in, and leaves the builder in the block after. */
    template <typename F>
    llvm::BasicBlock *when(llvm::Value *cond, F body) {
        llvm::BasicBlock *yes = llvm::BasicBlock::Create(ctx, "lane", fn);
        llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "lane_done", fn);
        builder.CreateCondBr(cond, yes, done);
        builder.SetInsertPoint(yes);
        body();
        llvm::BasicBlock *end = builder.GetInsertBlock();
        builder.CreateBr(done);
        builder.SetInsertPoint(done);
        return end;
    }

    /** The intrinsics whose meaning is the same on every target (likely, abs, absd, bitwise
     * operations, shifts, bit counts, if_then_else, rounding-to-zero division, ...): sets
     * `value` and returns true, or returns false if `op` is none of them. */
    bool call_pure_intrinsic(const Call *op);
    /** Halide 14's arithmetic intrinsics (CodeGen_Intrinsics.cpp): widening, halving, rounding
     * and saturating arithmetic, mul_shift_right, sorted_avg, shifts, lerp, mux, undef. Sets
     * `value` and returns true, or returns false if `op` is none of them. */
    bool call_arith_intrinsic(const Call *op);
    /** Halide 21's intrinsics that ir/IntrinsicLowering.h lowers; false if `op` is none. */
    bool call_lowered_intrinsic(const Call *op);
    /** Halide's if_then_else: with a scalar condition only the chosen value is computed; with a
     * vector condition lane by lane (as Halide 14's scalarize does: a lane's print runs only
     * when that lane's condition holds), unless both values can be computed for every lane
     * without effect (`speculable`), when it is a select. */
    llvm::Value *if_then_else(const Call *op);

    // --- lane by lane (Halide's scalarize) ------------------------------------------------------

    /** The lane a lane-by-lane evaluation is in, or -1. While a vector if_then_else or require
     * evaluates a value for one lane, the calls with effects in it (extern calls, stringify)
     * run for that lane only; their other lanes are zero and unused. */
    int effect_lane = -1;
    /** The lanes a vector call with effects, of `lanes` lanes, runs for, in order: the lane
     * being evaluated, else all of them. */
    std::vector<int> effect_lanes(int lanes);
    /** Lane `i` of `v` (v itself if it is a scalar). */
    llvm::Value *lane_of(llvm::Value *v, int i);
    /** Whether `e` can be computed for lanes whose condition does not hold: no loads (which may
     * be out of bounds there) and no calls but Halide's pure arithmetic intrinsics. */
    static bool speculable(const Expr &e);
    /** Runs `body` with effect_lane = `lane`, restoring it after. */
    template <typename F>
    auto in_lane(int lane, F body) {
        struct Restore {
            int &at, old;
            ~Restore() { at = old; }
        } restore{effect_lane, effect_lane};
        effect_lane = lane;
        return body();
    }
    /** `a` (IR type `t`) shifted left or right by `b` (IR type `bt`); a negative signed amount
     * shifts the other way, as in Halide. */
    llvm::Value *shift_value(bool left, const Type &t, llvm::Value *a, const Type &bt,
                             llvm::Value *b);
    /** Halide's rounding_shift_right: a / 2^b rounded half up for b > 0, else a << -b. */
    llvm::Value *rounding_shift_right(const Type &t, llvm::Value *a, const Type &bt,
                                      llvm::Value *b);
    /** Integer `v` of IR type `from` clamped to the range of the narrower `to`, then narrowed. */
    llvm::Value *saturate_to(llvm::Value *v, const Type &from, const Type &to);
    /** Halide 14's lerp(zero, one, weight), exactly as its lower_lerp computes it. */
    llvm::Value *lerp_value(const Call *op);
    /** The name of a math call without Halide's type suffix (`_f16`, `_f32`, `_f64`) and, where
     * `float_spelling(base)` holds, without libm's float suffix (`sqrtf`). */
    static std::string
    math_base_name(const std::string &name,
                   const std::function<bool(const std::string &)> &float_spelling);
    /** Casts `value` to the integer type of the call when an intrinsic computed another width. */
    void coerce_to_call_type(const Call *op);

    /** A loop that runs its iterations one after the other: a phi from min to min + extent. */
    void serial_loop(const For *op);
    /** Whether the innermost serial loop around the code being emitted, in this function, has a
     * constant trip count (serial_loop's unrolling rule). A back end that emits a loop body in
     * a function of its own clears it there. */
    bool in_constant_trip_loop = false;

    // --- visitors -----------------------------------------------------------------------------

    void visit(const IntImm *op) override;
    void visit(const UIntImm *op) override;
    void visit(const FloatImm *op) override;
    void visit(const StringImm *op) override;
    void visit(const Cast *op) override;
    void visit(const Reinterpret *op) override;
    void visit(const Variable *op) override;
    void visit(const Add *op) override;
    void visit(const Sub *op) override;
    void visit(const Mul *op) override;
    void visit(const Div *op) override;
    void visit(const Mod *op) override;
    void visit(const Min *op) override;
    void visit(const Max *op) override;
    void visit(const EQ *op) override;
    void visit(const NE *op) override;
    void visit(const LT *op) override;
    void visit(const LE *op) override;
    void visit(const GT *op) override;
    void visit(const GE *op) override;
    void visit(const And *op) override;
    void visit(const Or *op) override;
    void visit(const Not *op) override;
    void visit(const Select *op) override;
    void visit(const Load *op) override;
    void visit(const Ramp *op) override;
    void visit(const Broadcast *op) override;
    void visit(const Let *op) override;
    void visit(const Shuffle *op) override;

    void visit(const AssertStmt *op) override;
    void visit(const LetStmt *op) override;
    void visit(const ProducerConsumer *op) override;
    void visit(const Block *op) override;
    void visit(const Evaluate *op) override;
    void visit(const IfThenElse *op) override;
    void visit(const Store *op) override;
    /** Halide's atomic updates (CodeGen_Atomic.cpp). */
    void visit(const Atomic *op) override;
    /** Async tasks run on the host's thread pool: a device back end has none (CodeGen_Host
     * overrides these). */
    void visit(const Fork *op) override;
    void visit(const Acquire *op) override;
    /** The store of an atomic block without a mutex, as one atomic operation per lane. */
    void atomic_store(const AtomicUpdate &u);

    // Every back end decides these for itself.
    void visit(const Call *op) override = 0;
    void visit(const For *op) override = 0;
    void visit(const Allocate *op) override = 0;
    void visit(const Free *op) override = 0;

private:
    /** Strided loads with a constant stride up to this become that many dense loads and a
     * shuffle; longer strides go lane by lane. */
    static constexpr int64_t max_shuffled_stride = 4;

    static void pop(Scope &s, const std::string &n);
    /** A gather's or scatter's index vector, sign-extended to 64-bit lanes as the addresses
     * use them. */
    llvm::Value *lane_indices(const Expr &index);
    /** A load lane by lane from a vector of indices, each predicated lane in a block of its own. */
    llvm::Value *load_lanes(const Load *op);
    /** A store of `v` (bools already widened) lane by lane, like load_lanes. */
    void store_lanes(const Store *op, llvm::Value *v);
    void compare_op(IRNodeType k, const Expr &a, const Expr &b);
    /** Div (`remainder` false) or Mod of x and y, of type `t`. */
    void divide(const Type &t, const Expr &x, const Expr &y, bool remainder);
};

/** Runs LLVM's standard optimisation pipeline at `level` (0-3) for `tm`. */
void optimize_module(llvm::Module &m, llvm::TargetMachine &tm, int level);

}  // namespace tally

#endif  // TALLY_CODEGEN_CODEGEN_LLVM_H
