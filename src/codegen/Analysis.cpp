// The IR facts the back ends share (see Analysis.h).

#include "codegen/Analysis.h"

#include <algorithm>
#include <utility>

#include "tally/IREquality.h"
#include "tally/IRMutator.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

class CollectNames : public IRVisitor {
public:
    explicit CollectNames(UsedNames &out) : out(out) {}
    using IRVisitor::visit;

private:
    UsedNames &out;

    void visit(const Variable *op) override { out.vars.insert(op->name); }
    void visit(const Load *op) override {
        out.loaded.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        out.stored.insert(op->name);
        IRVisitor::visit(op);
    }
};

class FindStrictFloat : public IRVisitor {
public:
    using IRVisitor::visit;
    bool found = false;

private:
    void visit(const Call *op) override {
        found = found || op->is_intrinsic(Call::strict_float);
        IRVisitor::visit(op);
    }
};

}  // namespace

namespace {

/** async_min_threads: `result` is the most any statement visited so far needs. */
class MinThreads : public IRVisitor {
public:
    int result = 0;

    int of(const Stmt &s) {
        int saved = std::exchange(result, 0);
        s.accept(this);
        return std::exchange(result, saved);
    }

private:
    using IRVisitor::visit;

    /** The statement after `*s`'s leading acquires; counts them into `*acquires`. */
    static Stmt skip_acquires(Stmt s, int *acquires) {
        while (const Acquire *a = s.as<Acquire>()) {
            ++*acquires;
            s = a->body;
        }
        return s;
    }

    void visit(const Fork *op) override {
        int total = 0, acquires = 0;
        for (const Stmt &b : fork_branches(op)) {
            total += of(skip_acquires(b, &acquires));
        }
        result = std::max(result, total == 0 && acquires == 0 ? 0 : total + 1);
    }
    void visit(const Acquire *op) override {
        int acquires = 0;
        result = std::max(result, of(skip_acquires(Stmt(op), &acquires)) + 1);
    }
    void visit(const For *op) override {
        if (op->for_type != ForType::Parallel) {
            IRVisitor::visit(op);
            return;
        }
        int body = of(op->body);
        result = std::max(result, body > 0 ? body + 1 : 0);
    }
};

}  // namespace

int async_min_threads(const Stmt &body) {
    MinThreads m;
    return m.of(body);
}

UsedNames used_names(const Stmt &s) {
    UsedNames out;
    CollectNames collect(out);
    s.accept(&collect);
    return out;
}

const char *const atomic_old_name = "atomic.old";

namespace {

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

std::string read_atomic_update(const Atomic *op, AtomicUpdate *out) {
    AtomicUpdate u;
    Stmt s = op->body;
    while (const LetStmt *l = s.as<LetStmt>()) {
        u.lets.push_back(l);
        s = l->body;
    }
    const Store *st = s.as<Store>();
    if (!st) {
        return "the atomic block '" + to_string(Stmt(op)) +
               "' (without a mutex it must hold a single store)";
    }
    if (st->predicate.defined()) {
        return "a predicated store in an atomic block";
    }
    LoadsOf l(st->name, st->index);
    st->value.accept(&l);
    if (l.other_index) {
        return "the atomic update of " + st->name + " that reads " + st->name +
               " at another index than it stores";
    }
    u.store = st;
    const std::string &b = st->name;
    const Type et = st->value.type().element_of();
    auto other_side = [&](const Expr &x, const Expr &y, bool commutes) {
        if (is_the_load(x, b, st->index) && !reads(y, b)) {
            u.operand = y;
        } else if (commutes && is_the_load(y, b, st->index) && !reads(x, b)) {
            u.operand = x;
        }
        return u.operand.defined();
    };
    const Expr &v = st->value;
    using Rmw = AtomicUpdate::Rmw;
    bool is_int = (et.is_int() || et.is_uint()) && !et.is_bool();
    if (const Add *a = v.as<Add>()) {
        u.rmw = other_side(a->a, a->b, true) ? Rmw::Add : Rmw::None;
    } else if (const Sub *a = v.as<Sub>()) {
        u.rmw = other_side(a->a, a->b, false) ? Rmw::Sub : Rmw::None;
    } else if (const Min *a = v.as<Min>()) {
        u.rmw = is_int && other_side(a->a, a->b, true) ? Rmw::Min : Rmw::None;
    } else if (const Max *a = v.as<Max>()) {
        u.rmw = is_int && other_side(a->a, a->b, true) ? Rmw::Max : Rmw::None;
    } else if (const Call *c = v.as<Call>()) {
        if (is_int && c->is_intrinsic() && c->args.size() == 2 &&
            c->is_intrinsic({Call::bitwise_and, Call::bitwise_or, Call::bitwise_xor}) &&
            other_side(c->args[0], c->args[1], true)) {
            u.rmw = c->is_intrinsic(Call::bitwise_and)  ? Rmw::And
                    : c->is_intrinsic(Call::bitwise_or) ? Rmw::Or
                                                        : Rmw::Xor;
        }
    }
    if (et.is_bool()) {
        u.rmw = Rmw::None;  // bools are bytes in memory: a compare-and-swap
    }
    if (u.rmw == Rmw::None) {
        u.operand = Expr();
    }
    u.new_value = ReadOldValue(b).mutate(v);
    *out = std::move(u);
    return "";
}

bool is_gpu_loop(const For *op) {
    return op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread;
}

bool uses_strict_float(const Module &m) {
    if (m.target.has_feature(Target::StrictFloat)) {
        return true;
    }
    FindStrictFloat find;
    for (const LoweredFunc &f : m.functions) {
        if (f.body.defined()) {
            f.body.accept(&find);
        }
    }
    return find.found;
}

}  // namespace tally
