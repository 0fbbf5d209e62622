// The IR facts the back ends share (see Analysis.h).

#include "codegen/Analysis.h"

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
