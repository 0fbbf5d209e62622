// The IR facts the back ends share (src/codegen/Analysis.h): the names a statement uses, and how
// many threads an async task needs. (The
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

Stmt acquire(Stmt body) {
    return Acquire::make(Variable::make(Handle("halide_semaphore_t"), "s"), make_one(Int(32)),
                         std::move(body));
}

// As Halide's lowering counts them (LowerParallelTasks' MinThreads): a task that can never
// block needs no thread of its own; a standalone acquire adds one to its body; a fork adds one
// to the sum of its branches when any branch needs a thread or starts with an acquire; a
// parallel loop adds one to a body that needs any; a block needs what its neediest part does.
TEST(CodeGenAnalysis, AsyncMinThreadsCountsWhatMayBlockAsHalideDoes) {
    Stmt leaf = store("out", var("x"));
    EXPECT_EQ(async_min_threads(leaf), 0);
    EXPECT_EQ(async_min_threads(acquire(leaf)), 1);
    EXPECT_EQ(async_min_threads(acquire(acquire(leaf))), 1);
    EXPECT_EQ(async_min_threads(Fork::make(leaf, leaf)), 0);
    EXPECT_EQ(async_min_threads(Fork::make(acquire(leaf), leaf)), 1);
    EXPECT_EQ(async_min_threads(Fork::make({leaf, acquire(leaf), leaf})), 1);
    // Two branches that each block somewhere inside: 1 + 1, plus the fork's own.
    Stmt blocking = For::make("x", make_zero(Int(32)), make_one(Int(32)), ForType::Serial,
                              DeviceAPI::None, acquire(leaf));
    EXPECT_EQ(async_min_threads(blocking), 1);
    EXPECT_EQ(async_min_threads(Fork::make(blocking, blocking)), 3);
    Stmt par = For::make("y", make_zero(Int(32)), make_one(Int(32)), ForType::Parallel,
                         DeviceAPI::None, blocking);
    EXPECT_EQ(async_min_threads(par), 2);
    EXPECT_EQ(async_min_threads(For::make("y", make_zero(Int(32)), make_one(Int(32)),
                                          ForType::Parallel, DeviceAPI::None, leaf)),
              0);
    EXPECT_EQ(async_min_threads(Block::make(leaf, Block::make(par, blocking))), 2);
}

}  // namespace
