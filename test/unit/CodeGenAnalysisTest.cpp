// The IR facts the back ends share (src/codegen/Analysis.h): the names a statement uses, and
// the launch dimension of every GPU loop of a kernel, with the guard rule and the errors the PTX
// and Vulkan back ends both rely on.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/Analysis.h"
#include "tally/Error.h"
#include "tally/IRVisitor.h"

using namespace tally;

namespace {

Expr var(const std::string &n) {
    return Variable::make(Int(32), n);
}

Stmt loop(const std::string &n, ForType t, int extent, Stmt body) {
    return For::make(n, make_const(Int(32), 0), make_const(Int(32), extent), t, DeviceAPI::CUDA,
                     std::move(body));
}

Stmt store(const std::string &buf, Expr index) {
    return Store::make(buf, Load::make(Int(32), "in", index), index);
}

Kernel kernel(Stmt body) {
    Kernel k;
    k.name = "k";
    k.device_api = DeviceAPI::CUDA;
    k.body = std::move(body);
    return k;
}

/** The For nodes of a statement, outermost first. */
std::vector<const For *> loops_of(const Stmt &s) {
    struct Collect : IRVisitor {
        std::vector<const For *> out;
        using IRVisitor::visit;
        void visit(const For *op) override {
            out.push_back(op);
            IRVisitor::visit(op);
        }
    } c;
    s.accept(&c);
    return c.out;
}

TEST(CodeGenAnalysis, UsedNamesSeparatesVariablesLoadsAndStores) {
    UsedNames u = used_names(store("out", Add::make(var("x"), var("y"))));
    EXPECT_EQ(u.vars, (std::set<std::string>{"x", "y"}));
    EXPECT_EQ(u.loaded, (std::set<std::string>{"in"}));
    EXPECT_EQ(u.stored, (std::set<std::string>{"out"}));
}

TEST(CodeGenAnalysis, InnermostLoopOfAChainIsX) {
    Stmt s = loop("by", ForType::GPUBlock, 4,
                  loop("bx", ForType::GPUBlock, 8,
                       loop("tx", ForType::GPUThread, 16, store("out", var("tx")))));
    GpuLoopDims dims(kernel(s), "test back end");
    std::vector<const For *> l = loops_of(s);
    ASSERT_EQ(l.size(), 3u);
    EXPECT_EQ(dims.dim(l[0]), 1);
    EXPECT_EQ(dims.dim(l[1]), 0);
    EXPECT_EQ(dims.dim(l[2]), 0);
    EXPECT_TRUE(dims.has_thread_loops());
    EXPECT_FALSE(dims.needs_guard(l[2]));
}

TEST(CodeGenAnalysis, SiblingLoopSmallerThanTheLaunchIsGuarded) {
    Stmt s = loop("bx", ForType::GPUBlock, 4,
                  Block::make(loop("t0", ForType::GPUThread, 16, store("out", var("t0"))),
                              loop("t1", ForType::GPUThread, 8, store("out", var("t1")))));
    GpuLoopDims dims(kernel(s), "test back end");
    std::vector<const For *> l = loops_of(s);
    ASSERT_EQ(l.size(), 3u);
    EXPECT_FALSE(dims.needs_guard(l[1]));  // the largest extent is the launch size
    EXPECT_TRUE(dims.needs_guard(l[2]));
}

TEST(CodeGenAnalysis, ChainsOfDifferentDepthsAreAnError) {
    Stmt s = loop("b0", ForType::GPUBlock, 4,
                  Block::make(loop("b1", ForType::GPUBlock, 4, store("out", var("b1"))),
                              store("out", var("b0"))));
    Stmt deep = loop("outer", ForType::GPUBlock, 2,
                     Block::make(s, loop("b2", ForType::GPUBlock, 2, store("out", var("b2")))));
    try {
        GpuLoopDims dims(kernel(deep), "test back end");
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("test back end: kernel 'k': gpu_block loop 'outer'"),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("ambiguous"), std::string::npos) << e.what();
    }
}

}  // namespace
