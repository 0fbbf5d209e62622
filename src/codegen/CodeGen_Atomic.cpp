// Halide's atomic updates, for every LLVM back end (see CodeGen_LLVM.h).
//
// Halide 14 prints `atomic { ... }` around an update it was told to make atomic and found to
// be one read-modify-write store, `b[i] = f(b[i], ...)`; it prints `atomic (mutex) { ... }`
// when it guards the body with a mutex instead, whose lock and unlock calls are already in
// the IR. So:
//
// - with a mutex, the body is generated as it is (the calls around it make it atomic);
// - without one, the body is lets around one store whose value reads the stored buffer only
//   at the stored index. `b[i] + d`, `b[i] - d` become an atomicrmw add/sub (fadd/fsub for
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
#include "tally/IREquality.h"
#include "tally/IRMutator.h"
#include "tally/IRPrinter.h"

namespace tally {

namespace {

/** The name the value read by an atomic update is bound to while its new value is computed. */
const char *const atomic_old_name = "atomic.old";

/** Does `e` read buffer `name` anywhere, and is every such read at index `index`? */
class LoadsOf : public IRVisitor {
public:
    using IRVisitor::visit;
    LoadsOf(const std::string &name, const Expr &index) : name(name), index(index) {}
    bool found = false, other_index = false;

private:
    const std::string &name;
    const Expr &index;
    void visit(const Load *op) override {
        if (op->name == name) {
            found = true;
            if (!equal(op->index, index) || op->predicate.defined()) {
                other_index = true;
            }
        }
        IRVisitor::visit(op);
    }
};

/** Replaces the reads of the updated element with the variable `atomic_old_name`. */
class ReadOldValue : public IRMutator {
public:
    using IRMutator::visit;
    explicit ReadOldValue(const std::string &name) : name(name) {}

private:
    const std::string &name;
    Expr visit(const Load *op) override {
        if (op->name == name) {
            return Variable::make(op->type, atomic_old_name);
        }
        return IRMutator::visit(op);
    }
};

bool reads(const Expr &e, const std::string &name) {
    LoadsOf l(name, e);
    e.accept(&l);
    return l.found;
}

/** Is `e` the read `name[index]`? */
bool is_the_load(const Expr &e, const std::string &name, const Expr &index) {
    const Load *l = e.as<Load>();
    return l && l->name == name && !l->predicate.defined() && equal(l->index, index);
}

}  // namespace

void CodeGen_LLVM::visit(const Atomic *op) {
    if (!op->mutex_name.empty()) {
        codegen(op->body);
        return;
    }
    // Lets around one store.
    std::vector<const LetStmt *> lets;
    Stmt s = op->body;
    while (const LetStmt *l = s.as<LetStmt>()) {
        lets.push_back(l);
        s = l->body;
    }
    const Store *st = s.as<Store>();
    if (!st) {
        unsupported("the atomic block '" + to_string(Stmt(op)) +
                    "' (without a mutex it must hold a single store)");
    }
    if (st->predicate.defined()) {
        unsupported("a predicated store in an atomic block");
    }
    LoadsOf l(st->name, st->index);
    st->value.accept(&l);
    if (l.other_index) {
        unsupported("the atomic update of " + st->name + " that reads " + st->name +
                    " at another index than it stores");
    }
    for (const LetStmt *let : lets) {
        push_var(let->name, codegen(let->value));
    }
    atomic_store(st);
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
        pop_var((*it)->name);
    }
}

void CodeGen_LLVM::atomic_store(const Store *st) {
    const Type &t = st->value.type();
    const Type et = t.element_of();
    const std::string &b = st->name;
    // The read-modify-write operation, if the value has the form of one.
    llvm::AtomicRMWInst::BinOp rmw = llvm::AtomicRMWInst::BAD_BINOP;
    Expr operand;
    auto other_side = [&](const Expr &x, const Expr &y, bool commutes) {
        if (is_the_load(x, b, st->index) && !reads(y, b)) {
            operand = y;
        } else if (commutes && is_the_load(y, b, st->index) && !reads(x, b)) {
            operand = x;
        }
        return operand.defined();
    };
    const Expr &v = st->value;
    bool is_int = !et.is_float() && !et.is_handle();
    if (const Add *a = v.as<Add>()) {
        if (other_side(a->a, a->b, true)) {
            rmw = et.is_float() ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add;
        }
    } else if (const Sub *a = v.as<Sub>()) {
        if (other_side(a->a, a->b, false)) {
            rmw = et.is_float() ? llvm::AtomicRMWInst::FSub : llvm::AtomicRMWInst::Sub;
        }
    } else if (const Min *a = v.as<Min>()) {
        if (is_int && !et.is_bool() && other_side(a->a, a->b, true)) {
            rmw = et.is_int() ? llvm::AtomicRMWInst::Min : llvm::AtomicRMWInst::UMin;
        }
    } else if (const Max *a = v.as<Max>()) {
        if (is_int && !et.is_bool() && other_side(a->a, a->b, true)) {
            rmw = et.is_int() ? llvm::AtomicRMWInst::Max : llvm::AtomicRMWInst::UMax;
        }
    } else if (const Call *c = v.as<Call>()) {
        if (is_int && c->is_intrinsic() && c->args.size() == 2 &&
            (c->is_intrinsic({Call::bitwise_and, Call::bitwise_or, Call::bitwise_xor})) &&
            other_side(c->args[0], c->args[1], true)) {
            rmw = c->is_intrinsic(Call::bitwise_and)  ? llvm::AtomicRMWInst::And
                  : c->is_intrinsic(Call::bitwise_or) ? llvm::AtomicRMWInst::Or
                                                      : llvm::AtomicRMWInst::Xor;
        }
    }
    if (et.is_bool()) {
        rmw = llvm::AtomicRMWInst::BAD_BINOP;  // bools are bytes in memory: use the loop
    }
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
    Expr new_value = ReadOldValue(b).mutate(v);
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
