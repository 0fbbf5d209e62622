// Halide's atomic updates, for every LLVM back end (see CodeGen_LLVM.h).
//
// Halide 14 prints `atomic { ... }` around an update it was told to make atomic and found to
// be one read-modify-write store, `b[i] = f(b[i], ...)`; it prints `atomic (mutex) { ... }`
// when it guards the body with a mutex instead, whose lock and unlock calls are already in
// the IR. So:
//
// - with a mutex, the body is generated as it is (the calls around it make it atomic);
// - without one, the body is lets around one store whose value reads the stored buffer only
//   at the stored index (read_atomic_update in Analysis.h says which, and which
//   read-modify-write it is). `b[i] + d`, `b[i] - d` become an atomicrmw add/sub (fadd/fsub for
//   floats), min/max of integers an atomicrmw min/max (signed or unsigned), bitwise and/or/xor
//   an atomicrmw and/or/xor. Any other function becomes a compare-and-swap loop that computes
//   the new value from the value it read, until no other thread changed it in between. A
//   vector store does each lane in turn, so lanes that hit one element are all counted.
// - anything else (several stores, a predicated store, a read of the buffer at another index)
//   cannot be made atomic this way and is a compile error naming it.
//
// Memory order is monotonic, as Halide's: atomicity of the one element, no ordering of others.

#include "codegen/CodeGen_LLVM.h"

#include "tally/Error.h"

namespace tally {

void CodeGen_LLVM::visit(const Atomic *op) {
    if (!op->mutex_name.empty()) {
        codegen(op->body);
        return;
    }
    AtomicUpdate u;
    std::string why_not = read_atomic_update(op, &u);
    if (!why_not.empty()) {
        unsupported(why_not);
    }
    for (const LetStmt *let : u.lets) {
        push_var(let->name, codegen(let->value));
    }
    atomic_store(u);
    for (auto it = u.lets.rbegin(); it != u.lets.rend(); ++it) {
        pop_var((*it)->name);
    }
}

void CodeGen_LLVM::atomic_store(const AtomicUpdate &u) {
    const Store *st = u.store;
    const Type &t = st->value.type();
    const Type et = t.element_of();
    const std::string &b = st->name;
    llvm::AtomicRMWInst::BinOp rmw = llvm::AtomicRMWInst::BAD_BINOP;
    switch (u.rmw) {
    case AtomicUpdate::Rmw::None:
        break;
    case AtomicUpdate::Rmw::Add:
        rmw = et.is_float() ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add;
        break;
    case AtomicUpdate::Rmw::Sub:
        rmw = et.is_float() ? llvm::AtomicRMWInst::FSub : llvm::AtomicRMWInst::Sub;
        break;
    case AtomicUpdate::Rmw::Min:
        rmw = et.is_int() ? llvm::AtomicRMWInst::Min : llvm::AtomicRMWInst::UMin;
        break;
    case AtomicUpdate::Rmw::Max:
        rmw = et.is_int() ? llvm::AtomicRMWInst::Max : llvm::AtomicRMWInst::UMax;
        break;
    case AtomicUpdate::Rmw::And:
        rmw = llvm::AtomicRMWInst::And;
        break;
    case AtomicUpdate::Rmw::Or:
        rmw = llvm::AtomicRMWInst::Or;
        break;
    case AtomicUpdate::Rmw::Xor:
        rmw = llvm::AtomicRMWInst::Xor;
        break;
    }
    const Expr &operand = u.operand;
    if (et.is_handle()) {
        unsupported("an atomic update of the handle buffer " + b);
    }
    llvm::Value *idx = codegen(st->index);
    auto lane_of = [&](llvm::Value *x, int i) {
        return t.is_vector() ? builder.CreateExtractElement(x, builder.getInt32(i)) : x;
    };
    const llvm::Align align(std::max(1, et.bytes()));
    if (rmw != llvm::AtomicRMWInst::BAD_BINOP) {
        llvm::Value *d = codegen(operand);
        for (int i = 0; i < t.lanes(); i++) {
            llvm::Value *addr = element_address(b, et, lane_of(idx, i));
            builder.CreateAtomicRMW(rmw, addr, lane_of(d, i), align,
                                    llvm::AtomicOrdering::Monotonic);
        }
        return;
    }
    // Compare-and-swap: compute the new value from the one read, store it only if the element
    // still holds that, else try again with what it holds now.
    const Expr &new_value = u.new_value;
    llvm::Type *mt = memory_type(et);
    llvm::Type *bits = builder.getIntNTy(mt->getPrimitiveSizeInBits());
    for (int i = 0; i < t.lanes(); i++) {
        llvm::Value *addr = element_address(b, et, lane_of(idx, i));
        llvm::LoadInst *first = builder.CreateAlignedLoad(bits, addr, align);
        first->setAtomic(llvm::AtomicOrdering::Monotonic);
        llvm::BasicBlock *pre = builder.GetInsertBlock();
        llvm::BasicBlock *loop = llvm::BasicBlock::Create(ctx, "cas_loop", fn);
        llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "cas_done", fn);
        builder.CreateBr(loop);
        builder.SetInsertPoint(loop);
        llvm::PHINode *seen = builder.CreatePHI(bits, 2, "cas_seen");
        seen->addIncoming(first, pre);
        // The old value as the IR sees it, in every lane (only lane i is used).
        llvm::Value *old = builder.CreateBitCast(seen, mt);
        if (et.is_bool()) {
            old = builder.CreateTrunc(old, i1);
        }
        if (t.is_vector()) {
            old = builder.CreateVectorSplat(t.lanes(), old);
        }
        push_var(atomic_old_name, old);
        llvm::Value *nv = lane_of(codegen(new_value), i);
        pop_var(atomic_old_name);
        if (et.is_bool()) {
            nv = builder.CreateZExt(nv, mt);
        }
        nv = builder.CreateBitCast(nv, bits);
        llvm::Value *pair =
            builder.CreateAtomicCmpXchg(addr, seen, nv, align, llvm::AtomicOrdering::Monotonic,
                                        llvm::AtomicOrdering::Monotonic);
        seen->addIncoming(builder.CreateExtractValue(pair, 0), builder.GetInsertBlock());
        builder.CreateCondBr(builder.CreateExtractValue(pair, 1), done, loop);
        builder.SetInsertPoint(done);
    }
}

}  // namespace tally
