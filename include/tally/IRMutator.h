/** \file
 * Rebuilding traversal. `mutate` dispatches on the node; each default visit mutates the children
 * and returns the original node when none changed, so a pass that changes nothing returns a
 * pointer-identical tree (tests assert this with `same_as`). A statement that replaces another
 * takes over its source location unless it has its own.
 */
#ifndef TALLY_IRMUTATOR_H
#define TALLY_IRMUTATOR_H

#include "tally/IR.h"

namespace tally {

class IRMutator {
public:
    virtual ~IRMutator() = default;

    virtual Expr mutate(const Expr &e);
    virtual Stmt mutate(const Stmt &s);

protected:
    virtual Expr visit(const IntImm *);
    virtual Expr visit(const UIntImm *);
    virtual Expr visit(const FloatImm *);
    virtual Expr visit(const StringImm *);
    virtual Expr visit(const Cast *);
    virtual Expr visit(const Reinterpret *);
    virtual Expr visit(const Variable *);
    virtual Expr visit(const Add *);
    virtual Expr visit(const Sub *);
    virtual Expr visit(const Mul *);
    virtual Expr visit(const Div *);
    virtual Expr visit(const Mod *);
    virtual Expr visit(const Min *);
    virtual Expr visit(const Max *);
    virtual Expr visit(const EQ *);
    virtual Expr visit(const NE *);
    virtual Expr visit(const LT *);
    virtual Expr visit(const LE *);
    virtual Expr visit(const GT *);
    virtual Expr visit(const GE *);
    virtual Expr visit(const And *);
    virtual Expr visit(const Or *);
    virtual Expr visit(const Not *);
    virtual Expr visit(const Select *);
    virtual Expr visit(const Load *);
    virtual Expr visit(const Ramp *);
    virtual Expr visit(const Broadcast *);
    virtual Expr visit(const Let *);
    virtual Expr visit(const Call *);
    virtual Expr visit(const Shuffle *);

    virtual Stmt visit(const LetStmt *);
    virtual Stmt visit(const AssertStmt *);
    virtual Stmt visit(const ProducerConsumer *);
    virtual Stmt visit(const For *);
    virtual Stmt visit(const Store *);
    virtual Stmt visit(const Allocate *);
    virtual Stmt visit(const Free *);
    virtual Stmt visit(const Block *);
    virtual Stmt visit(const IfThenElse *);
    virtual Stmt visit(const Atomic *);
    virtual Stmt visit(const Fork *);
    virtual Stmt visit(const Acquire *);
    virtual Stmt visit(const Evaluate *);

    /** Mutates each element; returns true if any changed. */
    bool mutate_exprs(const std::vector<Expr> &in, std::vector<Expr> *out);

private:
    /** Dispatches a statement to its visit overload. */
    Stmt visit_stmt(const Stmt &s);
};

}  // namespace tally

#endif  // TALLY_IRMUTATOR_H
