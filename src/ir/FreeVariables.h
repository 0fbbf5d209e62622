/** \file
 * Free variables: the names a piece of IR uses without binding them itself.
 *
 * Binders are Let, LetStmt, For (the loop variable) and Allocate (the allocation's name, which
 * is also its host pointer variable); each scopes over its body only, so a name used in a
 * binder's own value or bounds is free there. Inner bindings shadow outer ones (Scope counts
 * them). Every free variable is reported once, at its first use in walk order, with the type of
 * that use.
 *
 * Users: offload-gpu-loops (kernel arguments, launch extents computable on the host); the
 * parser's argument inference can derive from FindFreeVariables to also see the calls.
 */
#ifndef TALLY_IR_FREEVARIABLES_H
#define TALLY_IR_FREEVARIABLES_H

#include <string>
#include <unordered_set>
#include <vector>

#include "ir/Scope.h"
#include "tally/IRVisitor.h"

namespace tally {

struct FreeVariable {
    std::string name;
    Type type;  // the type of its first use
};

/** Collects free variables while walking. Derive from it to look at more nodes: overrides that
 * call the base's visit keep the bookkeeping, and is_bound() answers for the current node. */
class FindFreeVariables : public IRVisitor {
public:
    /** The free variables seen so far, in order of first use. */
    const std::vector<FreeVariable> &variables() const { return found; }
    /** Has `name` been seen used free? */
    bool is_free(const std::string &name) const { return seen.count(name) > 0; }

protected:
    /** Is `name` bound by a node enclosing the one being visited? */
    bool is_bound(const std::string &name) const { return bound.contains(name); }

    using IRVisitor::visit;
    void visit(const Variable *op) override;
    void visit(const Let *op) override;
    void visit(const LetStmt *op) override;
    void visit(const For *op) override;
    void visit(const Allocate *op) override;

private:
    Scope<> bound;
    std::unordered_set<std::string> seen;
    std::vector<FreeVariable> found;
};

/** The names of the free variables of `s` (or `e`), in order of first use. */
std::vector<std::string> free_variables(const Stmt &s);
std::vector<std::string> free_variables(const Expr &e);

}  // namespace tally

#endif  // TALLY_IR_FREEVARIABLES_H
