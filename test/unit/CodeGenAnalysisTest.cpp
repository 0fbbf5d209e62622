// The IR facts the back ends share (src/codegen/Analysis.h): the names a statement uses. (The
// launch dimensions of GPU loops are the kernel's geometry, tested with offload-gpu-loops.)

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "codegen/Analysis.h"

using namespace tally;

namespace {

Expr var(const std::string &n) {
    return Variable::make(Int(32), n);
}

Stmt store(const std::string &buf, Expr index) {
    return Store::make(buf, Load::make(Int(32), "in", index), index);
}

TEST(CodeGenAnalysis, UsedNamesSeparatesVariablesLoadsAndStores) {
    UsedNames u = used_names(store("out", Add::make(var("x"), var("y"))));
    EXPECT_EQ(u.vars, (std::set<std::string>{"x", "y"}));
    EXPECT_EQ(u.loaded, (std::set<std::string>{"in"}));
    EXPECT_EQ(u.stored, (std::set<std::string>{"out"}));
}

}  // namespace
