// Structural equality of expressions, statements and modules.

#include "tally/IREquality.h"
#include "ir/KernelGeometry.h"
#include "ir/LargeStack.h"

#include "tally/IRPrinter.h"

namespace tally {

namespace {

class Comparer {
public:
    bool expr(const Expr &a, const Expr &b) {
        if (a.same_as(b)) {
            return true;
        }
        if (!a.defined() || !b.defined()) {
            return false;
        }
        if (a.node_type() != b.node_type() || a.type() != b.type()) {
            return false;
        }
        switch (a.node_type()) {
        case IRNodeType::IntImm:
            return a.as<IntImm>()->value == b.as<IntImm>()->value;
        case IRNodeType::UIntImm:
            return a.as<UIntImm>()->value == b.as<UIntImm>()->value;
        case IRNodeType::FloatImm: {
            double x = a.as<FloatImm>()->value, y = b.as<FloatImm>()->value;
            return x == y || (x != x && y != y);
        }
        case IRNodeType::StringImm:
            return a.as<StringImm>()->value == b.as<StringImm>()->value;
        case IRNodeType::Cast:
            return expr(a.as<Cast>()->value, b.as<Cast>()->value);
        case IRNodeType::Reinterpret:
            return expr(a.as<Reinterpret>()->value, b.as<Reinterpret>()->value);
        case IRNodeType::Variable:
            return a.as<Variable>()->name == b.as<Variable>()->name;
#define TALLY_BIN(N)                                                                               \
    case IRNodeType::N:                                                                            \
        return expr(a.as<N>()->a, b.as<N>()->a) && expr(a.as<N>()->b, b.as<N>()->b);
            TALLY_BIN(Add)
            TALLY_BIN(Sub)
            TALLY_BIN(Mul)
            TALLY_BIN(Div)
            TALLY_BIN(Mod)
            TALLY_BIN(Min)
            TALLY_BIN(Max)
            TALLY_BIN(EQ)
            TALLY_BIN(NE)
            TALLY_BIN(LT)
            TALLY_BIN(LE)
            TALLY_BIN(GT)
            TALLY_BIN(GE)
            TALLY_BIN(And)
            TALLY_BIN(Or)
#undef TALLY_BIN
        case IRNodeType::Not:
            return expr(a.as<Not>()->a, b.as<Not>()->a);
        case IRNodeType::Select: {
            const Select *x = a.as<Select>(), *y = b.as<Select>();
            return expr(x->condition, y->condition) && expr(x->true_value, y->true_value) &&
                   expr(x->false_value, y->false_value);
        }
        case IRNodeType::Load: {
            const Load *x = a.as<Load>(), *y = b.as<Load>();
            return x->name == y->name && x->alignment == y->alignment && expr(x->index, y->index) &&
                   expr(x->predicate, y->predicate);
        }
        case IRNodeType::Ramp: {
            const Ramp *x = a.as<Ramp>(), *y = b.as<Ramp>();
            return x->lanes == y->lanes && expr(x->base, y->base) && expr(x->stride, y->stride);
        }
        case IRNodeType::Broadcast: {
            const Broadcast *x = a.as<Broadcast>(), *y = b.as<Broadcast>();
            return x->lanes == y->lanes && expr(x->value, y->value);
        }
        case IRNodeType::Let: {
            const Let *x = a.as<Let>(), *y = b.as<Let>();
            return x->name == y->name && expr(x->value, y->value) && expr(x->body, y->body);
        }
        case IRNodeType::Call: {
            const Call *x = a.as<Call>(), *y = b.as<Call>();
            return x->name == y->name && x->call_type == y->call_type && exprs(x->args, y->args);
        }
        case IRNodeType::Shuffle: {
            const Shuffle *x = a.as<Shuffle>(), *y = b.as<Shuffle>();
            return x->indices == y->indices && exprs(x->vectors, y->vectors);
        }
        default:
            return false;
        }
    }

    bool exprs(const std::vector<Expr> &a, const std::vector<Expr> &b) {
        if (a.size() != b.size()) {
            return false;
        }
        for (size_t i = 0; i < a.size(); i++) {
            if (!expr(a[i], b[i])) {
                return false;
            }
        }
        return true;
    }

    bool stmt(const Stmt &a, const Stmt &b) {
        if (a.same_as(b)) {
            return true;
        }
        if (!a.defined() || !b.defined() || a.node_type() != b.node_type()) {
            return false;
        }
        switch (a.node_type()) {
        case IRNodeType::LetStmt: {
            const LetStmt *x = a.as<LetStmt>(), *y = b.as<LetStmt>();
            return x->name == y->name && expr(x->value, y->value) && stmt(x->body, y->body);
        }
        case IRNodeType::AssertStmt: {
            const AssertStmt *x = a.as<AssertStmt>(), *y = b.as<AssertStmt>();
            return expr(x->condition, y->condition) && expr(x->message, y->message);
        }
        case IRNodeType::ProducerConsumer: {
            const ProducerConsumer *x = a.as<ProducerConsumer>(), *y = b.as<ProducerConsumer>();
            return x->name == y->name && x->is_producer == y->is_producer && stmt(x->body, y->body);
        }
        case IRNodeType::Atomic: {
            const Atomic *x = a.as<Atomic>(), *y = b.as<Atomic>();
            return x->producer_name == y->producer_name && x->mutex_name == y->mutex_name &&
                   stmt(x->body, y->body);
        }
        case IRNodeType::Fork: {
            const Fork *x = a.as<Fork>(), *y = b.as<Fork>();
            return stmt(x->first, y->first) && stmt(x->rest, y->rest);
        }
        case IRNodeType::Acquire: {
            const Acquire *x = a.as<Acquire>(), *y = b.as<Acquire>();
            return expr(x->semaphore, y->semaphore) && expr(x->count, y->count) &&
                   stmt(x->body, y->body);
        }
        case IRNodeType::For: {
            const For *x = a.as<For>(), *y = b.as<For>();
            return x->name == y->name && x->for_type == y->for_type &&
                   x->device_api == y->device_api && expr(x->min, y->min) &&
                   expr(x->extent, y->extent) && stmt(x->body, y->body);
        }
        case IRNodeType::Store: {
            const Store *x = a.as<Store>(), *y = b.as<Store>();
            return x->name == y->name && x->alignment == y->alignment && expr(x->value, y->value) &&
                   expr(x->index, y->index) && expr(x->predicate, y->predicate);
        }
        case IRNodeType::Allocate: {
            const Allocate *x = a.as<Allocate>(), *y = b.as<Allocate>();
            return x->name == y->name && x->type == y->type && x->memory_type == y->memory_type &&
                   x->free_function == y->free_function && exprs(x->extents, y->extents) &&
                   expr(x->condition, y->condition) && expr(x->new_expr, y->new_expr) &&
                   stmt(x->body, y->body);
        }
        case IRNodeType::Free:
            return a.as<Free>()->name == b.as<Free>()->name;
        case IRNodeType::Block: {
            // Iterative over the spine: blocks can be very long.
            Stmt p = a, q = b;
            while (p.as<Block>() && q.as<Block>()) {
                if (!stmt(p.as<Block>()->first, q.as<Block>()->first)) {
                    return false;
                }
                Stmt pn = p.as<Block>()->rest, qn = q.as<Block>()->rest;
                p = pn;
                q = qn;
            }
            return stmt(p, q);
        }
        case IRNodeType::IfThenElse: {
            const IfThenElse *x = a.as<IfThenElse>(), *y = b.as<IfThenElse>();
            return expr(x->condition, y->condition) && stmt(x->then_case, y->then_case) &&
                   stmt(x->else_case, y->else_case);
        }
        case IRNodeType::Evaluate:
            return expr(a.as<Evaluate>()->value, b.as<Evaluate>()->value);
        default:
            return false;
        }
    }
};

}  // namespace

bool equal(const Expr &a, const Expr &b) {
    return Comparer().expr(a, b);
}
bool equal(const Stmt &a, const Stmt &b) {
    return Comparer().stmt(a, b);
}

static bool equal_impl(const Module &a, const Module &b, std::string *why) {
    auto fail = [&](const std::string &m) {
        if (why) {
            *why = m;
        }
        return false;
    };
    if (a.name != b.name) {
        return fail("module names differ: '" + a.name + "' vs '" + b.name + "'");
    }
    if (a.target != b.target) {
        return fail("targets differ: " + a.target.to_string() + " vs " + b.target.to_string());
    }
    if (a.dialect != b.dialect) {
        return fail(std::string("dialects differ: ") + dialect_name(a.dialect) + " vs " +
                    dialect_name(b.dialect));
    }
    if (a.buffers.size() != b.buffers.size()) {
        return fail("number of buffers differs");
    }
    for (size_t i = 0; i < a.buffers.size(); i++) {
        const BufferConstant &x = a.buffers[i], &y = b.buffers[i];
        if (x.name != y.name || x.opaque != y.opaque || x.bytes != y.bytes) {
            return fail("buffer '" + x.name + "' differs");
        }
    }
    if (a.kernels.size() != b.kernels.size()) {
        return fail("number of kernels differs");
    }
    for (size_t i = 0; i < a.kernels.size(); i++) {
        const Kernel &x = a.kernels[i], &y = b.kernels[i];
        if (x.name != y.name || x.device_api != y.device_api || x.args != y.args) {
            return fail("kernel '" + x.name + "' header differs");
        }
        if (!equal(x.body, y.body)) {
            return fail("kernel '" + x.name + "' body differs");
        }
        if (!equal(x.geometry, y.geometry)) {
            return fail("kernel '" + x.name + "' launch geometry differs");
        }
    }
    if (a.functions.size() != b.functions.size()) {
        return fail("number of functions differs");
    }
    for (size_t i = 0; i < a.functions.size(); i++) {
        const LoweredFunc &x = a.functions[i], &y = b.functions[i];
        if (x.name != y.name || x.linkage != y.linkage) {
            return fail("function '" + x.name + "' name or linkage differs");
        }
        if (x.args != y.args) {
            return fail("function '" + x.name + "' arguments differ");
        }
        if (!equal(x.body, y.body)) {
            return fail("function '" + x.name + "' body differs");
        }
    }
    return true;
}

bool equal(const Module &a, const Module &b, std::string *why) {
    return with_large_stack([&]() { return equal_impl(a, b, why); });
}

}  // namespace tally
