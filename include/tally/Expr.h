/** \file
 * Handles to IR nodes: intrusively reference-counted, immutable once built. `Expr` and `Stmt`
 * wrap a pointer to a node; `as<T>()` down-casts by the node's tag and returns nullptr on a
 * mismatch. Copying a handle is cheap; nodes are shared freely between trees.
 */
#ifndef TALLY_EXPR_H
#define TALLY_EXPR_H

#include <atomic>
#include <cstdint>
#include <utility>

#include "tally/Error.h"
#include "tally/Type.h"

namespace tally {

class IRVisitor;

/** The tag of every node kind. Expressions come first, then statements. */
enum class IRNodeType : uint8_t {
    // Expressions
    IntImm,
    UIntImm,
    FloatImm,
    StringImm,
    Cast,
    Reinterpret,
    Variable,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Min,
    Max,
    EQ,
    NE,
    LT,
    LE,
    GT,
    GE,
    And,
    Or,
    Not,
    Select,
    Load,
    Ramp,
    Broadcast,
    Let,
    Call,
    Shuffle,
    // Statements
    LetStmt,
    AssertStmt,
    ProducerConsumer,
    For,
    Store,
    Allocate,
    Free,
    Block,
    IfThenElse,
    Evaluate,
    Atomic,
    Fork,
    Acquire,
};

/** The base of every node: a reference count and a tag. */
struct IRNode {
    explicit IRNode(IRNodeType t) : node_type(t) {}
    virtual ~IRNode() = default;
    IRNode(const IRNode &) = delete;
    IRNode &operator=(const IRNode &) = delete;

    /** Calls the visitor's visit overload for the concrete node type. */
    virtual void accept(IRVisitor *v) const = 0;

    mutable std::atomic<int> ref_count{0};
    const IRNodeType node_type;
};

struct BaseExprNode : IRNode {
    BaseExprNode(IRNodeType t, Type type) : IRNode(t), type(std::move(type)) {}
    const Type type;
};

struct BaseStmtNode : IRNode {
    explicit BaseStmtNode(IRNodeType t) : IRNode(t) {}
    /** Where the statement was written, when it came from IR text: the elaborator sets it on the
     * node it has just made, IRMutator carries it over to the node that replaces one. Not part of
     * the statement's meaning: structural equality and the printer ignore it. */
    mutable SourceLoc loc;
};

/** CRTP base giving each node its static tag and accept(). */
template <typename T>
struct ExprNode : BaseExprNode {
    explicit ExprNode(Type type) : BaseExprNode(T::_node_type, std::move(type)) {}
    void accept(IRVisitor *v) const override;
};

template <typename T>
struct StmtNode : BaseStmtNode {
    StmtNode() : BaseStmtNode(T::_node_type) {}
    void accept(IRVisitor *v) const override;
};

/** Deletes a node whose count reached zero. Deleting a node releases its children; those
 * releases are queued and done in a loop rather than recursively, so that freeing a very deep
 * tree (say, a hundred thousand nested lets) cannot overflow the stack. */
void destroy_ir_node(const IRNode *n);

/** An owning, intrusively counted pointer to a const node. */
template <typename N>
class IntrusivePtr {
public:
    IntrusivePtr() = default;
    IntrusivePtr(const N *p) : ptr(p) { incref(); }
    IntrusivePtr(const IntrusivePtr &o) : ptr(o.ptr) { incref(); }
    IntrusivePtr(IntrusivePtr &&o) noexcept : ptr(o.ptr) { o.ptr = nullptr; }
    ~IntrusivePtr() { decref(); }
    IntrusivePtr &operator=(const IntrusivePtr &o) {
        if (o.ptr != ptr) {
            o.incref();
            decref();
            ptr = o.ptr;
        }
        return *this;
    }
    IntrusivePtr &operator=(IntrusivePtr &&o) noexcept {
        std::swap(ptr, o.ptr);
        return *this;
    }

    const N *get() const { return ptr; }
    const N *operator->() const { return ptr; }
    const N &operator*() const { return *ptr; }
    bool defined() const { return ptr != nullptr; }
    /** Pointer identity: the same node, not merely an equal one. */
    bool same_as(const IntrusivePtr &o) const { return ptr == o.ptr; }

private:
    void incref() const {
        if (ptr) {
            ptr->ref_count.fetch_add(1, std::memory_order_relaxed);
        }
    }
    void decref() {
        if (ptr && ptr->ref_count.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            destroy_ir_node(ptr);
        }
        ptr = nullptr;
    }
    const N *ptr = nullptr;
};

/** What expression and statement handles share: the node's kind, visiting it, and a down-cast
 * by tag. */
template <typename N>
class IRHandle : public IntrusivePtr<N> {
public:
    IRHandle() = default;
    IRHandle(const N *n) : IntrusivePtr<N>(n) {}

    IRNodeType node_type() const { return this->get()->node_type; }
    void accept(IRVisitor *v) const { this->get()->accept(v); }

    /** Down-cast by tag; nullptr if undefined or of another kind. */
    template <typename T>
    const T *as() const {
        if (this->defined() && this->get()->node_type == T::_node_type) {
            return static_cast<const T *>(this->get());
        }
        return nullptr;
    }
};

/** A handle to an expression node. */
class Expr : public IRHandle<BaseExprNode> {
public:
    Expr() = default;
    Expr(const BaseExprNode *n) : IRHandle<BaseExprNode>(n) {}

    const Type &type() const { return get()->type; }
};

/** A handle to a statement node. */
class Stmt : public IRHandle<BaseStmtNode> {
public:
    Stmt() = default;
    Stmt(const BaseStmtNode *n) : IRHandle<BaseStmtNode>(n) {}
};

}  // namespace tally

#endif  // TALLY_EXPR_H
