// Default IRMutator: rebuild a node only when a child changed, so that a mutator which changes
// nothing returns the very same tree.

#include "tally/IRMutator.h"

#include <algorithm>

#include "tally/Error.h"

namespace tally {

Expr IRMutator::mutate(const Expr &e) {
    if (!e.defined()) {
        return e;
    }
    switch (e.node_type()) {
#define TALLY_CASE(N)                                                                              \
    case IRNodeType::N:                                                                            \
        return visit(static_cast<const N *>(e.get()));
        TALLY_CASE(IntImm)
        TALLY_CASE(UIntImm)
        TALLY_CASE(FloatImm)
        TALLY_CASE(StringImm)
        TALLY_CASE(Cast)
        TALLY_CASE(Reinterpret)
        TALLY_CASE(Variable)
        TALLY_CASE(Add)
        TALLY_CASE(Sub)
        TALLY_CASE(Mul)
        TALLY_CASE(Div)
        TALLY_CASE(Mod)
        TALLY_CASE(Min)
        TALLY_CASE(Max)
        TALLY_CASE(EQ)
        TALLY_CASE(NE)
        TALLY_CASE(LT)
        TALLY_CASE(LE)
        TALLY_CASE(GT)
        TALLY_CASE(GE)
        TALLY_CASE(And)
        TALLY_CASE(Or)
        TALLY_CASE(Not)
        TALLY_CASE(Select)
        TALLY_CASE(Load)
        TALLY_CASE(Ramp)
        TALLY_CASE(Broadcast)
        TALLY_CASE(Let)
        TALLY_CASE(Call)
        TALLY_CASE(Shuffle)
#undef TALLY_CASE
    default:
        internal_error << "IRMutator::mutate(Expr) on a statement node";
    }
}

Stmt IRMutator::mutate(const Stmt &s) {
    if (!s.defined()) {
        return s;
    }
    Stmt out = visit_stmt(s);
    // The node that replaces a statement keeps its source location (the one place it is kept).
    if (out.defined() && !out.same_as(s) && !out.get()->loc.known()) {
        out.get()->loc = s.get()->loc;
    }
    return out;
}

Stmt IRMutator::visit_stmt(const Stmt &s) {
    switch (s.node_type()) {
#define TALLY_CASE(N)                                                                              \
    case IRNodeType::N:                                                                            \
        return visit(static_cast<const N *>(s.get()));
        TALLY_CASE(LetStmt)
        TALLY_CASE(AssertStmt)
        TALLY_CASE(ProducerConsumer)
        TALLY_CASE(For)
        TALLY_CASE(Store)
        TALLY_CASE(Allocate)
        TALLY_CASE(Free)
        TALLY_CASE(Block)
        TALLY_CASE(IfThenElse)
        TALLY_CASE(Evaluate)
        TALLY_CASE(Atomic)
        TALLY_CASE(Fork)
        TALLY_CASE(Acquire)
#undef TALLY_CASE
    default:
        internal_error << "IRMutator::mutate(Stmt) on an expression node";
    }
}

bool IRMutator::mutate_exprs(const std::vector<Expr> &in, std::vector<Expr> *out) {
    bool changed = false;
    out->clear();
    out->reserve(in.size());
    for (const Expr &e : in) {
        out->push_back(mutate(e));
        changed = changed || !out->back().same_as(e);
    }
    return changed;
}

Expr IRMutator::visit(const IntImm *op) {
    return op;
}
Expr IRMutator::visit(const UIntImm *op) {
    return op;
}
Expr IRMutator::visit(const FloatImm *op) {
    return op;
}
Expr IRMutator::visit(const StringImm *op) {
    return op;
}
Expr IRMutator::visit(const Variable *op) {
    return op;
}

Expr IRMutator::visit(const Cast *op) {
    Expr v = mutate(op->value);
    return v.same_as(op->value) ? Expr(op) : Cast::make(op->type, v);
}

Expr IRMutator::visit(const Reinterpret *op) {
    Expr v = mutate(op->value);
    return v.same_as(op->value) ? Expr(op) : Reinterpret::make(op->type, v);
}

#define TALLY_MUTATE_BINARY(N)                                                                     \
    Expr IRMutator::visit(const N *op) {                                                           \
        Expr a = mutate(op->a), b = mutate(op->b);                                                 \
        if (a.same_as(op->a) && b.same_as(op->b)) {                                                \
            return op;                                                                             \
        }                                                                                          \
        return N::make(a, b);                                                                      \
    }
TALLY_MUTATE_BINARY(Add)
TALLY_MUTATE_BINARY(Sub)
TALLY_MUTATE_BINARY(Mul)
TALLY_MUTATE_BINARY(Div)
TALLY_MUTATE_BINARY(Mod)
TALLY_MUTATE_BINARY(Min)
TALLY_MUTATE_BINARY(Max)
TALLY_MUTATE_BINARY(EQ)
TALLY_MUTATE_BINARY(NE)
TALLY_MUTATE_BINARY(LT)
TALLY_MUTATE_BINARY(LE)
TALLY_MUTATE_BINARY(GT)
TALLY_MUTATE_BINARY(GE)
TALLY_MUTATE_BINARY(And)
TALLY_MUTATE_BINARY(Or)
#undef TALLY_MUTATE_BINARY

Expr IRMutator::visit(const Not *op) {
    Expr a = mutate(op->a);
    return a.same_as(op->a) ? Expr(op) : Not::make(a);
}

Expr IRMutator::visit(const Select *op) {
    Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) {
        return op;
    }
    return Select::make(c, t, f);
}

Expr IRMutator::visit(const Load *op) {
    Expr i = mutate(op->index), p = mutate(op->predicate);
    if (i.same_as(op->index) && p.same_as(op->predicate)) {
        return op;
    }
    return Load::make(op->type, op->name, i, p, op->alignment);
}

Expr IRMutator::visit(const Ramp *op) {
    Expr b = mutate(op->base), s = mutate(op->stride);
    if (b.same_as(op->base) && s.same_as(op->stride)) {
        return op;
    }
    return Ramp::make(b, s, op->lanes);
}

Expr IRMutator::visit(const Broadcast *op) {
    Expr v = mutate(op->value);
    return v.same_as(op->value) ? Expr(op) : Broadcast::make(v, op->lanes);
}

Expr IRMutator::visit(const Let *op) {
    Expr v = mutate(op->value), b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) {
        return op;
    }
    return Let::make(op->name, v, b);
}

Expr IRMutator::visit(const Call *op) {
    std::vector<Expr> args;
    if (!mutate_exprs(op->args, &args)) {
        return op;
    }
    return Call::make(op->type, op->name, args, op->call_type);
}

Expr IRMutator::visit(const Shuffle *op) {
    std::vector<Expr> vs;
    if (!mutate_exprs(op->vectors, &vs)) {
        return op;
    }
    return Shuffle::make(vs, op->indices);
}

Stmt IRMutator::visit(const LetStmt *op) {
    Expr v = mutate(op->value);
    Stmt b = mutate(op->body);
    if (v.same_as(op->value) && b.same_as(op->body)) {
        return op;
    }
    return LetStmt::make(op->name, v, b);
}

Stmt IRMutator::visit(const AssertStmt *op) {
    Expr c = mutate(op->condition), m = mutate(op->message);
    if (c.same_as(op->condition) && m.same_as(op->message)) {
        return op;
    }
    return AssertStmt::make(c, m);
}

Stmt IRMutator::visit(const ProducerConsumer *op) {
    Stmt b = mutate(op->body);
    return b.same_as(op->body) ? Stmt(op) : ProducerConsumer::make(op->name, op->is_producer, b);
}

Stmt IRMutator::visit(const Atomic *op) {
    Stmt b = mutate(op->body);
    return b.same_as(op->body) ? Stmt(op) : Atomic::make(op->producer_name, op->mutex_name, b);
}

Stmt IRMutator::visit(const Fork *op) {
    Stmt f = mutate(op->first), r = mutate(op->rest);
    if (f.same_as(op->first) && r.same_as(op->rest)) {
        return op;
    }
    return Fork::make(f, r);
}

Stmt IRMutator::visit(const Acquire *op) {
    Expr s = mutate(op->semaphore), c = mutate(op->count);
    Stmt b = mutate(op->body);
    if (s.same_as(op->semaphore) && c.same_as(op->count) && b.same_as(op->body)) {
        return op;
    }
    return Acquire::make(s, c, b);
}

Stmt IRMutator::visit(const For *op) {
    Expr mn = mutate(op->min), ex = mutate(op->extent);
    Stmt b = mutate(op->body);
    if (mn.same_as(op->min) && ex.same_as(op->extent) && b.same_as(op->body)) {
        return op;
    }
    return For::make(op->name, mn, ex, op->for_type, op->device_api, b);
}

Stmt IRMutator::visit(const Store *op) {
    Expr v = mutate(op->value), i = mutate(op->index), p = mutate(op->predicate);
    if (v.same_as(op->value) && i.same_as(op->index) && p.same_as(op->predicate)) {
        return op;
    }
    return Store::make(op->name, v, i, p, op->alignment);
}

Stmt IRMutator::visit(const Allocate *op) {
    std::vector<Expr> extents;
    bool changed = mutate_exprs(op->extents, &extents);
    Expr c = mutate(op->condition), n = mutate(op->new_expr);
    Stmt b = mutate(op->body);
    if (!changed && c.same_as(op->condition) && n.same_as(op->new_expr) && b.same_as(op->body)) {
        return op;
    }
    return Allocate::make(op->name, op->type, op->memory_type, extents, c, b, n, op->free_function);
}

Stmt IRMutator::visit(const Free *op) {
    return op;
}

Stmt IRMutator::visit(const Block *op) {
    // Iterative over the right spine: blocks can be very long. Only the prefix up to the last
    // changed statement is rebuilt; the rest of the block is kept as the same node.
    std::vector<const Block *> spine;
    Stmt s = op;
    while (const Block *b = s.as<Block>()) {
        spine.push_back(b);
        s = b->rest;
    }
    const Stmt &last = s;
    std::vector<Stmt> out;
    out.reserve(spine.size() + 1);
    int last_changed = -1;
    for (size_t i = 0; i < spine.size(); i++) {
        out.push_back(mutate(spine[i]->first));
        if (!out.back().same_as(spine[i]->first)) {
            last_changed = int(i);
        }
    }
    Stmt new_last = mutate(last);
    Stmt rest;
    if (!new_last.same_as(last)) {
        rest = new_last;
        last_changed = int(spine.size());
    } else if (last_changed < 0) {
        return op;
    } else {
        rest = spine[last_changed]->rest;
    }
    for (int i = std::min(last_changed, int(spine.size()) - 1); i >= 0; i--) {
        if (!out[i].defined()) {
            continue;
        }
        rest = rest.defined() ? Block::make(out[i], rest) : out[i];
    }
    return rest;
}

Stmt IRMutator::visit(const IfThenElse *op) {
    Expr c = mutate(op->condition);
    Stmt t = mutate(op->then_case), e = mutate(op->else_case);
    if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case)) {
        return op;
    }
    return IfThenElse::make(c, t, e);
}

Stmt IRMutator::visit(const Evaluate *op) {
    Expr v = mutate(op->value);
    return v.same_as(op->value) ? Stmt(op) : Evaluate::make(v);
}

}  // namespace tally
