// UniqueNames (see UniqueNames.h): a set of the names in use that start with the prefix, and per
// base name the suffix its next search starts from.

#include "ir/UniqueNames.h"

#include <utility>

#include "tally/Error.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** Reserves every name a statement binds or uses. */
class ReserveNames : public IRVisitor {
public:
    explicit ReserveNames(UniqueNames *names) : names(names) {}

private:
    UniqueNames *names;

    using IRVisitor::visit;
    void visit(const Variable *op) override { names->reserve(op->name); }
    void visit(const Let *op) override {
        names->reserve(op->name);
        IRVisitor::visit(op);
    }
    void visit(const LetStmt *op) override {
        names->reserve(op->name);
        IRVisitor::visit(op);
    }
    void visit(const For *op) override {
        names->reserve(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Allocate *op) override {
        names->reserve(op->name);
        IRVisitor::visit(op);
    }
};

}  // namespace

UniqueNames::UniqueNames(std::string separator, std::string prefix)
    : separator(std::move(separator)), prefix(std::move(prefix)) {}

void UniqueNames::reserve(const std::string &name) {
    if (name.compare(0, prefix.size(), prefix) == 0) {
        taken.insert(name);
    }
}

void UniqueNames::reserve_names_in(const Stmt &s) {
    ReserveNames reserve(this);
    if (s.defined()) {
        s.accept(&reserve);
    }
}

std::string UniqueNames::make(const std::string &base) {
    internal_assert(base.compare(0, prefix.size(), prefix) == 0)
        << "generated name " << base << " lacks the prefix " << prefix;
    int &i = next_suffix[base];
    std::string n = i == 0 ? base : base + separator + std::to_string(i);
    while (taken.count(n)) {
        i++;
        n = base + separator + std::to_string(i);
    }
    taken.insert(n);
    return n;
}

}  // namespace tally
