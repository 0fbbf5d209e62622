// Default IRVisitor: visit children in source order.

#include "tally/IRVisitor.h"

namespace tally {

void IRVisitor::visit(const IntImm *) {}
void IRVisitor::visit(const UIntImm *) {}
void IRVisitor::visit(const FloatImm *) {}
void IRVisitor::visit(const StringImm *) {}
void IRVisitor::visit(const Cast *op) {
    op->value.accept(this);
}
void IRVisitor::visit(const Reinterpret *op) {
    op->value.accept(this);
}
void IRVisitor::visit(const Variable *) {}

#define TALLY_VISIT_BINARY(N)                                                                      \
    void IRVisitor::visit(const N *op) {                                                           \
        op->a.accept(this);                                                                        \
        op->b.accept(this);                                                                        \
    }
TALLY_VISIT_BINARY(Add)
TALLY_VISIT_BINARY(Sub)
TALLY_VISIT_BINARY(Mul)
TALLY_VISIT_BINARY(Div)
TALLY_VISIT_BINARY(Mod)
TALLY_VISIT_BINARY(Min)
TALLY_VISIT_BINARY(Max)
TALLY_VISIT_BINARY(EQ)
TALLY_VISIT_BINARY(NE)
TALLY_VISIT_BINARY(LT)
TALLY_VISIT_BINARY(LE)
TALLY_VISIT_BINARY(GT)
TALLY_VISIT_BINARY(GE)
TALLY_VISIT_BINARY(And)
TALLY_VISIT_BINARY(Or)
#undef TALLY_VISIT_BINARY

void IRVisitor::visit(const Not *op) {
    op->a.accept(this);
}

void IRVisitor::visit(const Select *op) {
    op->condition.accept(this);
    op->true_value.accept(this);
    op->false_value.accept(this);
}

void IRVisitor::visit(const Load *op) {
    op->index.accept(this);
    if (op->predicate.defined()) {
        op->predicate.accept(this);
    }
}

void IRVisitor::visit(const Ramp *op) {
    op->base.accept(this);
    op->stride.accept(this);
}

void IRVisitor::visit(const Broadcast *op) {
    op->value.accept(this);
}

void IRVisitor::visit(const Let *op) {
    op->value.accept(this);
    op->body.accept(this);
}

void IRVisitor::visit(const Call *op) {
    for (const Expr &a : op->args) {
        a.accept(this);
    }
}

void IRVisitor::visit(const Shuffle *op) {
    for (const Expr &v : op->vectors) {
        v.accept(this);
    }
}

void IRVisitor::visit(const LetStmt *op) {
    op->value.accept(this);
    op->body.accept(this);
}

void IRVisitor::visit(const AssertStmt *op) {
    op->condition.accept(this);
    op->message.accept(this);
}

void IRVisitor::visit(const ProducerConsumer *op) {
    op->body.accept(this);
}

void IRVisitor::visit(const Atomic *op) {
    op->body.accept(this);
}

void IRVisitor::visit(const Fork *op) {
    op->first.accept(this);
    op->rest.accept(this);
}

void IRVisitor::visit(const Acquire *op) {
    op->semaphore.accept(this);
    op->count.accept(this);
    op->body.accept(this);
}

void IRVisitor::visit(const For *op) {
    op->min.accept(this);
    op->extent.accept(this);
    op->body.accept(this);
}

void IRVisitor::visit(const Store *op) {
    op->value.accept(this);
    op->index.accept(this);
    if (op->predicate.defined()) {
        op->predicate.accept(this);
    }
}

void IRVisitor::visit(const Allocate *op) {
    for (const Expr &e : op->extents) {
        e.accept(this);
    }
    if (op->condition.defined()) {
        op->condition.accept(this);
    }
    if (op->new_expr.defined()) {
        op->new_expr.accept(this);
    }
    op->body.accept(this);
}

void IRVisitor::visit(const Free *) {}

void IRVisitor::visit(const Block *op) {
    // Iterative over the right spine: blocks can be very long.
    op->first.accept(this);
    Stmt rest = op->rest;
    while (const Block *b = rest.as<Block>()) {
        b->first.accept(this);
        rest = b->rest;
    }
    rest.accept(this);
}

void IRVisitor::visit(const IfThenElse *op) {
    op->condition.accept(this);
    op->then_case.accept(this);
    if (op->else_case.defined()) {
        op->else_case.accept(this);
    }
}

void IRVisitor::visit(const Evaluate *op) {
    op->value.accept(this);
}

}  // namespace tally
