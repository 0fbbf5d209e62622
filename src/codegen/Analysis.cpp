// The IR facts the back ends share (see Analysis.h).

#include "codegen/Analysis.h"

#include <algorithm>
#include <utility>

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
