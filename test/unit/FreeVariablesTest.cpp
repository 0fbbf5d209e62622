// Unit tests of src/ir/FreeVariables: which names each binder scopes over, shadowing, order and
// types of first use, and a derived visitor that looks at more nodes.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/FreeVariables.h"
#include "tally/Parser.h"

namespace tally {
namespace {

Expr var(const std::string &n, Type t = Int(32)) {
    return Variable::make(t, n);
}
Expr i32(int64_t v) {
    return IntImm::make(Int(32), v);
}

TEST(FreeVariables, LetBindsItsBodyOnly) {
    // let x = x + y in x * z: the x in the value is the outer one.
    Expr e = Let::make("x", Add::make(var("x"), var("y")), Mul::make(var("x"), var("z")));
    EXPECT_EQ(free_variables(e), (std::vector<std::string>{"x", "y", "z"}));
    Expr inner = Let::make("x", i32(1), Mul::make(var("x"), var("z")));
    EXPECT_EQ(free_variables(inner), (std::vector<std::string>{"z"}));
}

TEST(FreeVariables, StatementBindersScopeOverTheirBodies) {
    Stmt store = Store::make("out", Add::make(var("i"), var("n")), var("i"), Expr());
    // for i in [lo, n): the bounds are outside the loop's scope.
    Stmt loop = For::make("i", var("lo"), var("n"), ForType::Serial, DeviceAPI::None, store);
    EXPECT_EQ(free_variables(loop), (std::vector<std::string>{"lo", "n"}));
    Stmt let = LetStmt::make("n", var("m"), loop);
    EXPECT_EQ(free_variables(let), (std::vector<std::string>{"m", "lo"}));
    // An allocation binds its name (its host pointer) over its body, not over its extents.
    Stmt use =
        Evaluate::make(Call::make(Int(32), "f", {var("buf", Handle()), var("k")}, Call::Extern));
    Stmt alloc = Allocate::make("buf", Int(32), MemoryType::Heap, {var("buf")}, Expr(), use);
    EXPECT_EQ(free_variables(alloc), (std::vector<std::string>{"buf", "k"}));
}

TEST(FreeVariables, ShadowingEndsWithTheInnerBinding) {
    // let x = 1 in (let x = 2 in x) + x: no x is free, and the outer one stays bound after the
    // inner one ends.
    Expr e = Let::make("x", i32(1), Add::make(Let::make("x", i32(2), var("x")), var("x")));
    EXPECT_TRUE(free_variables(e).empty());
}

TEST(FreeVariables, ReportsEachNameOnceWithItsFirstType) {
    Stmt s = Block::make(Evaluate::make(var("a", Float(32))),
                         Block::make(Evaluate::make(var("b")), Evaluate::make(var("a", Int(8)))));
    FindFreeVariables find;
    s.accept(&find);
    ASSERT_EQ(find.variables().size(), 2u);
    EXPECT_EQ(find.variables()[0].name, "a");
    EXPECT_EQ(find.variables()[0].type, Float(32));
    EXPECT_EQ(find.variables()[1].name, "b");
    EXPECT_TRUE(find.is_free("a"));
    EXPECT_FALSE(find.is_free("c"));
}

/** A derived visitor, as the parser's argument inference would write one: free variables plus
 * the calls made where a given name is bound. */
class CallsUnderX : public FindFreeVariables {
public:
    std::vector<std::string> calls;

private:
    using FindFreeVariables::visit;
    void visit(const Call *op) override {
        if (is_bound("x")) {
            calls.push_back(op->name);
        }
        FindFreeVariables::visit(op);
    }
};

TEST(FreeVariables, DerivedVisitorsSeeTheScope) {
    Expr f = Call::make(Int(32), "f", {var("y")}, Call::Extern);
    Expr g = Call::make(Int(32), "g", {}, Call::Extern);
    Stmt s = Block::make(LetStmt::make("x", i32(0), Evaluate::make(f)), Evaluate::make(g));
    CallsUnderX find;
    s.accept(&find);
    EXPECT_EQ(find.calls, (std::vector<std::string>{"f"}));
    ASSERT_EQ(find.variables().size(), 1u);
    EXPECT_EQ(find.variables()[0].name, "y");
}

}  // namespace
}  // namespace tally
