// FindFreeVariables: each binder visits what it evaluates outside its scope (value, bounds,
// extents), then its body with its name bound. See FreeVariables.h.

#include "ir/FreeVariables.h"

namespace tally {

void FindFreeVariables::visit(const Variable *op) {
    if (!bound.contains(op->name) && seen.insert(op->name).second) {
        found.push_back({op->name, op->type});
    }
}

void FindFreeVariables::visit(const Let *op) {
    op->value.accept(this);
    bound.push(op->name);
    op->body.accept(this);
    bound.pop(op->name);
}

void FindFreeVariables::visit(const LetStmt *op) {
    op->value.accept(this);
    bound.push(op->name);
    op->body.accept(this);
    bound.pop(op->name);
}

void FindFreeVariables::visit(const For *op) {
    op->min.accept(this);
    op->extent.accept(this);
    bound.push(op->name);
    op->body.accept(this);
    bound.pop(op->name);
}

void FindFreeVariables::visit(const Allocate *op) {
    for (const Expr &e : op->extents) {
        e.accept(this);
    }
    if (op->condition.defined()) {
        op->condition.accept(this);
    }
    if (op->new_expr.defined()) {
        op->new_expr.accept(this);
    }
    bound.push(op->name);
    op->body.accept(this);
    bound.pop(op->name);
}

namespace {

template <typename T>
std::vector<std::string> names_of_free_variables(const T &node) {
    FindFreeVariables find;
    if (node.defined()) {
        node.accept(&find);
    }
    std::vector<std::string> out;
    for (const FreeVariable &v : find.variables()) {
        out.push_back(v.name);
    }
    return out;
}

}  // namespace

std::vector<std::string> free_variables(const Stmt &s) {
    return names_of_free_variables(s);
}

std::vector<std::string> free_variables(const Expr &e) {
    return names_of_free_variables(e);
}

}  // namespace tally
