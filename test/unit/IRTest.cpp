// Unit tests of the IR core: node factories and the invariants they assert, handle semantics
// (tag down-casts, sharing, reference counting), Block construction, constants and Type.

#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tally/Error.h"
#include "tally/IR.h"
#include "tally/IREquality.h"
#include "tally/IRMutator.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"
#include "tally/Type.h"

namespace tally {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Expr var(const std::string &n, Type t = Int(32)) {
    return Variable::make(t, n);
}
Expr i32(int64_t v) {
    return IntImm::make(Int(32), v);
}
Stmt eval(const std::string &f) {
    return Evaluate::make(Call::make(Int(32), f, {}, Call::Extern));
}

// A node whose destructor reports, so tests can see exactly when the last handle lets go.
struct CountedImm : IntImm {
    CountedImm(int64_t v, int *deaths) : IntImm(Int(32), v), deaths(deaths) {}
    ~CountedImm() override { ++*deaths; }
    int *deaths;
};

// ---------------------------------------------------------------------------------------------
// Factories

TEST(IR, ImmediateFactoriesRejectValuesOfTheWrongKindOrWidth) {
    EXPECT_THROW(IntImm::make(Float(32), 1), InternalError);
    EXPECT_THROW(IntImm::make(UInt(32), 1), InternalError);
    EXPECT_THROW(IntImm::make(Int(32, 4), 1), InternalError);
    EXPECT_THROW(IntImm::make(Int(8), 128), InternalError);
    EXPECT_THROW(IntImm::make(Int(8), -129), InternalError);
    EXPECT_NO_THROW(IntImm::make(Int(8), -128));
    EXPECT_NO_THROW(IntImm::make(Int(64), INT64_MIN));

    EXPECT_THROW(UIntImm::make(Int(32), 1), InternalError);
    EXPECT_THROW(UIntImm::make(UInt(8), 256), InternalError);
    EXPECT_THROW(UIntImm::make(Bool(), 2), InternalError);
    EXPECT_NO_THROW(UIntImm::make(UInt(64), UINT64_MAX));

    EXPECT_THROW(FloatImm::make(Int(32), 1.0), InternalError);
    EXPECT_THROW(FloatImm::make(Float(32, 2), 1.0), InternalError);
}

TEST(IR, InternalErrorsNameTheFailedCondition) {
    EXPECT_THAT([] { IntImm::make(Float(32), 1); },
                ThrowsMessage<InternalError>(HasSubstr("IntImm of type float32")));
    EXPECT_THAT([] { IntImm::make(Float(32), 1); },
                ThrowsMessage<InternalError>(HasSubstr("condition failed")));
}

TEST(IR, Float32ImmediatesAreRoundedToSinglePrecision) {
    Expr e = FloatImm::make(Float(32), 0.1);
    ASSERT_NE(e.as<FloatImm>(), nullptr);
    EXPECT_EQ(e.as<FloatImm>()->value, double(0.1f));
    EXPECT_NE(e.as<FloatImm>()->value, 0.1);
    EXPECT_EQ(FloatImm::make(Float(64), 0.1).as<FloatImm>()->value, 0.1);
}

TEST(IR, ArithmeticNeedsOperandsOfOneType) {
    EXPECT_THROW(Add::make(var("x"), var("y", Int(64))), InternalError);
    EXPECT_THROW(Mul::make(var("x"), var("y", UInt(32))), InternalError);
    EXPECT_THROW(Sub::make(var("x"), Expr()), InternalError);
    EXPECT_THROW(Min::make(var("x", Int(32, 4)), var("y")), InternalError);
    Expr sum = Add::make(var("x"), i32(1));
    EXPECT_EQ(sum.type(), Int(32));
}

TEST(IR, ArithmeticOnHandlesOfDifferentPointeesIsAllowed) {
    Expr a = var("a", Handle("void")), b = var("b", Handle("halide_buffer_t"));
    Expr e;
    ASSERT_NO_THROW(e = EQ::make(a, b));
    EXPECT_EQ(e.type(), Bool());
    // The result of an arithmetic node keeps the first operand's type.
    EXPECT_EQ(Add::make(b, a).type(), Handle("halide_buffer_t"));
}

TEST(IR, ComparisonsProduceBoolsWithTheOperandsLanes) {
    Expr x = Broadcast::make(var("x"), 4);
    Expr e = LT::make(x, x);
    EXPECT_EQ(e.type(), Bool(4));
    EXPECT_EQ(GE::make(var("x", Float(64)), var("y", Float(64))).type(), Bool());
}

TEST(IR, LogicalOperatorsNeedBoolsOfEqualLanes) {
    Expr t = LT::make(var("x"), i32(1));
    EXPECT_THROW(And::make(var("x"), var("y")), InternalError);
    EXPECT_THROW(Or::make(t, LT::make(Broadcast::make(var("x"), 2), Broadcast::make(i32(1), 2))),
                 InternalError);
    EXPECT_THROW(Not::make(var("x")), InternalError);
    EXPECT_EQ(And::make(t, t).type(), Bool());
    EXPECT_EQ(Not::make(t).type(), Bool());
}

TEST(IR, SelectChecksItsConditionAndValues) {
    Expr c = LT::make(var("x"), i32(1));
    EXPECT_THROW(Select::make(var("x"), i32(1), i32(2)), InternalError);
    EXPECT_THROW(Select::make(c, i32(1), FloatImm::make(Float(32), 2)), InternalError);
    Expr v4 = Broadcast::make(i32(1), 4);
    Expr c2 = LT::make(Broadcast::make(var("x"), 2), Broadcast::make(i32(1), 2));
    EXPECT_THROW(Select::make(c2, v4, v4), InternalError);
    // A scalar condition may select between vectors.
    EXPECT_EQ(Select::make(c, v4, v4).type(), Int(32, 4));
}

TEST(IR, CastKeepsTheLaneCount) {
    EXPECT_THROW(Cast::make(Int(64), Broadcast::make(i32(1), 4)), InternalError);
    EXPECT_THROW(Cast::make(Int(64), Expr()), InternalError);
    Expr c = Cast::make(Float(32, 4), Broadcast::make(i32(1), 4));
    EXPECT_EQ(c.type(), Float(32, 4));
}

TEST(IR, VariablesNeedANameAndAValidType) {
    EXPECT_THROW(Variable::make(Int(32), ""), InternalError);
    EXPECT_THROW(Variable::make(Type(), "x"), InternalError);
    Expr v = var("x.min.0", UInt(8));
    ASSERT_NE(v.as<Variable>(), nullptr);
    EXPECT_EQ(v.as<Variable>()->name, "x.min.0");
    EXPECT_EQ(v.type(), UInt(8));
}

TEST(IR, LoadsMatchTheirIndexAndPredicateLanes) {
    EXPECT_THROW(Load::make(Int(32, 4), "b", i32(0)), InternalError);
    EXPECT_THROW(Load::make(Int(32), "", i32(0)), InternalError);
    EXPECT_THROW(Load::make(Int(32), "b", Expr()), InternalError);
    Expr idx = Ramp::make(i32(0), i32(1), 4);
    EXPECT_THROW(Load::make(Int(32, 4), "b", idx, LT::make(var("x"), i32(1))), InternalError);
    Expr l = Load::make(UInt(8, 4), "b", idx);
    EXPECT_EQ(l.type(), UInt(8, 4));
    EXPECT_FALSE(l.as<Load>()->predicate.defined());
}

TEST(IR, RampsAndBroadcastsMultiplyLanes) {
    EXPECT_THROW(Ramp::make(i32(0), i32(1), 1), InternalError);
    EXPECT_THROW(Ramp::make(i32(0), var("s", Int(64)), 4), InternalError);
    EXPECT_THROW(Broadcast::make(i32(0), 1), InternalError);
    EXPECT_EQ(Ramp::make(i32(0), i32(1), 8).type(), Int(32, 8));
    Expr b2 = Broadcast::make(i32(3), 2);
    EXPECT_EQ(Broadcast::make(b2, 3).type(), Int(32, 6));
    EXPECT_EQ(Ramp::make(b2, b2, 4).type(), Int(32, 8));
}

TEST(IR, ShufflesCheckIndicesAndRecogniseTheirForms) {
    Expr a = Ramp::make(i32(0), i32(1), 4), b = Ramp::make(i32(4), i32(1), 4);
    EXPECT_THROW(Shuffle::make({a}, {4}), InternalError);
    EXPECT_THROW(Shuffle::make({a}, {}), InternalError);
    EXPECT_THROW(Shuffle::make({a, Broadcast::make(FloatImm::make(Float(32), 0), 4)}, {0}),
                 InternalError);

    Expr il = Shuffle::make_interleave({a, b});
    ASSERT_NE(il.as<Shuffle>(), nullptr);
    EXPECT_EQ(il.type(), Int(32, 8));
    EXPECT_EQ(il.as<Shuffle>()->indices, (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
    EXPECT_TRUE(il.as<Shuffle>()->is_interleave());
    EXPECT_FALSE(il.as<Shuffle>()->is_concat());

    Expr cat = Shuffle::make_concat({a, b});
    EXPECT_TRUE(cat.as<Shuffle>()->is_concat());
    EXPECT_FALSE(cat.as<Shuffle>()->is_interleave());

    Expr sl = Shuffle::make_slice(cat, 1, 2, 3);
    EXPECT_EQ(sl.as<Shuffle>()->indices, (std::vector<int>{1, 3, 5}));
    EXPECT_TRUE(sl.as<Shuffle>()->is_slice());
    EXPECT_EQ(sl.type(), Int(32, 3));

    Expr el = Shuffle::make_extract_element(a, 2);
    EXPECT_TRUE(el.as<Shuffle>()->is_extract_element());
    EXPECT_EQ(el.type(), Int(32));
}

TEST(IR, CallsKeepTheirNameTypeAndCallType) {
    EXPECT_THROW(Call::make(Int(32), "", {}, Call::Extern), InternalError);
    EXPECT_THROW(Call::make(Int(32), "f", {Expr()}, Call::Extern), InternalError);
    Expr c = Call::make(UInt(8), "f", {var("x")}, Call::PureExtern);
    const Call *op = c.as<Call>();
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->name, "f");
    EXPECT_EQ(c.type(), UInt(8));
    EXPECT_TRUE(op->is_extern());
    EXPECT_FALSE(op->is_intrinsic());
    EXPECT_EQ(Call::default_call_type("likely"), Call::Intrinsic);
    EXPECT_EQ(Call::default_call_type("make_struct"), Call::Intrinsic);
    EXPECT_EQ(Call::default_call_type("halide_copy_to_host"), Call::Extern);
    EXPECT_STREQ(call_type_name(Call::PureIntrinsic), "pure_intrinsic");
}

TEST(IR, StatementFactoriesRejectMissingOrMistypedParts) {
    Expr c = LT::make(var("x"), i32(1));
    Stmt s = eval("f");
    EXPECT_THROW(LetStmt::make("a", i32(1), Stmt()), InternalError);
    EXPECT_THROW(LetStmt::make("a", Expr(), s), InternalError);
    EXPECT_THROW(AssertStmt::make(var("x"), i32(1)), InternalError);
    EXPECT_THROW(AssertStmt::make(Broadcast::make(c, 2), i32(1)), InternalError);
    EXPECT_THROW(ProducerConsumer::make("f", true, Stmt()), InternalError);
    EXPECT_THROW(
        For::make("i", Broadcast::make(i32(0), 2), i32(1), ForType::Serial, DeviceAPI::None, s),
        InternalError);
    EXPECT_THROW(For::make("i", i32(0), i32(1), ForType::Serial, DeviceAPI::None, Stmt()),
                 InternalError);
    EXPECT_THROW(Store::make("b", Broadcast::make(i32(0), 4), i32(0)), InternalError);
    EXPECT_THROW(Allocate::make("b", Int(32), MemoryType::Heap, {i32(4)}, Expr(), Stmt()),
                 InternalError);
    EXPECT_THROW(
        Allocate::make("b", Int(32), MemoryType::Heap, {Broadcast::make(i32(4), 2)}, Expr(), s),
        InternalError);
    EXPECT_THROW(Block::make(s, Stmt()), InternalError);
    EXPECT_THROW(IfThenElse::make(var("x"), s), InternalError);
    EXPECT_THROW(IfThenElse::make(c, Stmt()), InternalError);
    EXPECT_THROW(Evaluate::make(Expr()), InternalError);

    Stmt ite = IfThenElse::make(c, s);
    ASSERT_NE(ite.as<IfThenElse>(), nullptr);
    EXPECT_FALSE(ite.as<IfThenElse>()->else_case.defined());
    Stmt f = For::make("i", i32(0), i32(8), ForType::GPUBlock, DeviceAPI::CUDA, s);
    EXPECT_EQ(f.as<For>()->for_type, ForType::GPUBlock);
    EXPECT_EQ(f.as<For>()->device_api, DeviceAPI::CUDA);
    EXPECT_TRUE(f.as<For>()->body.same_as(s));
}

TEST(IR, EnumNamesMatchTheTextSyntax) {
    EXPECT_STREQ(for_type_name(ForType::Serial), "for");
    EXPECT_STREQ(for_type_name(ForType::GPUThread), "gpu_thread");
    EXPECT_STREQ(device_api_name(DeviceAPI::CUDA), "CUDA");
    EXPECT_STREQ(device_api_name(DeviceAPI::DefaultGPU), "Default_GPU");
    EXPECT_STREQ(device_api_name(DeviceAPI::None), "");
    EXPECT_STREQ(memory_type_name(MemoryType::GPUShared), "GPUShared");
    EXPECT_TRUE(is_gpu_for_type(ForType::GPULane));
    EXPECT_FALSE(is_gpu_for_type(ForType::Parallel));
}

// ---------------------------------------------------------------------------------------------
// Handles

TEST(IRHandle, AsDownCastsByTagAndReturnsNullOnMismatch) {
    Expr e = i32(7);
    ASSERT_NE(e.as<IntImm>(), nullptr);
    EXPECT_EQ(e.as<IntImm>()->value, 7);
    EXPECT_EQ(e.as<UIntImm>(), nullptr);
    EXPECT_EQ(e.as<Variable>(), nullptr);
    EXPECT_EQ(e.node_type(), IRNodeType::IntImm);

    Expr undefined;
    EXPECT_FALSE(undefined.defined());
    EXPECT_EQ(undefined.as<IntImm>(), nullptr);

    Stmt s = eval("f");
    EXPECT_NE(s.as<Evaluate>(), nullptr);
    EXPECT_EQ(s.as<Block>(), nullptr);
    EXPECT_EQ(Stmt().as<Evaluate>(), nullptr);
}

TEST(IRHandle, CopiesShareTheNodeAndEqualNodesAreDistinct) {
    Expr a = Add::make(var("x"), i32(1));
    Expr b = a;
    EXPECT_TRUE(a.same_as(b));
    EXPECT_EQ(a.get(), b.get());
    Expr c = Add::make(var("x"), i32(1));
    EXPECT_FALSE(a.same_as(c));
    Expr d;
    d = b;
    EXPECT_TRUE(d.same_as(a));
}

TEST(IRHandle, CountsReferencesFromHandlesAndParents) {
    Expr x = var("x");
    EXPECT_EQ(x->ref_count.load(), 1);
    {
        Expr y = x;
        EXPECT_EQ(x->ref_count.load(), 2);
        Expr sum = Add::make(x, x);
        EXPECT_EQ(x->ref_count.load(), 4);
    }
    EXPECT_EQ(x->ref_count.load(), 1);
    Expr moved = std::move(x);
    EXPECT_FALSE(x.defined());  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(moved->ref_count.load(), 1);
}

TEST(IRHandle, FreesTheNodeWhenTheLastHandleGoes) {
    int deaths = 0;
    Expr a(new CountedImm(5, &deaths));
    // A subclass keeps the IntImm tag, so it down-casts like any IntImm.
    ASSERT_NE(a.as<IntImm>(), nullptr);
    EXPECT_EQ(a.as<IntImm>()->value, 5);
    {
        Expr b = a;
        Expr sum = Add::make(b, b);
        a = Expr();
        EXPECT_EQ(deaths, 0) << "still held by b and by sum";
        b = Expr();
        EXPECT_EQ(deaths, 0) << "still held by sum";
    }
    EXPECT_EQ(deaths, 1) << "freed with the parent that held it last";
}

TEST(IRHandle, SelfAssignmentKeepsTheNodeAlive) {
    int deaths = 0;
    Expr a(new CountedImm(1, &deaths));
    Expr &alias = a;
    a = alias;
    EXPECT_EQ(deaths, 0);
    EXPECT_EQ(a->ref_count.load(), 1);
    a = Expr();
    EXPECT_EQ(deaths, 1);
}

// ---------------------------------------------------------------------------------------------
// Blocks

TEST(IRBlock, KeepsBlocksRightNestedWhenTheFirstPartIsABlock) {
    Stmt a = eval("a"), b = eval("b"), c = eval("c");
    Stmt s = Block::make(Block::make(a, b), c);
    const Block *top = s.as<Block>();
    ASSERT_NE(top, nullptr);
    EXPECT_TRUE(top->first.same_as(a));
    const Block *rest = top->rest.as<Block>();
    ASSERT_NE(rest, nullptr);
    EXPECT_TRUE(rest->first.same_as(b));
    EXPECT_TRUE(rest->rest.same_as(c));
}

TEST(IRBlock, BuildsFromAListSkippingUndefinedEntries) {
    Stmt a = eval("a"), b = eval("b"), c = eval("c");
    Stmt s = Block::make(std::vector<Stmt>{a, Stmt(), Block::make(b, c), Stmt()});
    std::vector<Stmt> flat = flatten_block(s);
    ASSERT_EQ(flat.size(), 3u);
    EXPECT_TRUE(flat[0].same_as(a));
    EXPECT_TRUE(flat[1].same_as(b));
    EXPECT_TRUE(flat[2].same_as(c));
    // No Block is ever the first part of another.
    for (Stmt cur = s; const Block *blk = cur.as<Block>(); cur = blk->rest) {
        EXPECT_EQ(blk->first.as<Block>(), nullptr);
    }
    EXPECT_TRUE(Block::make(std::vector<Stmt>{a}).same_as(a));
    EXPECT_FALSE(Block::make(std::vector<Stmt>{}).defined());
    EXPECT_FALSE(Block::make(std::vector<Stmt>{Stmt(), Stmt()}).defined());
    EXPECT_EQ(flatten_block(Stmt()).size(), 0u);
    EXPECT_EQ(flatten_block(a).size(), 1u);
}

// Halide's Fork is binary; a chain nests to the right and lists its branches in order, while a
// fork as a first branch is a branch of its own. Fork and Acquire need every part.
TEST(IRFork, ChainsNestToTheRightAndListTheirBranchesInOrder) {
    Stmt a = eval("a"), b = eval("b"), c = eval("c");
    Stmt s = Fork::make(std::vector<Stmt>{a, b, c});
    const Fork *top = s.as<Fork>();
    ASSERT_NE(top, nullptr);
    EXPECT_TRUE(top->first.same_as(a));
    ASSERT_NE(top->rest.as<Fork>(), nullptr);
    std::vector<Stmt> branches = fork_branches(top);
    ASSERT_EQ(branches.size(), 3u);
    EXPECT_TRUE(branches[2].same_as(c));
    Stmt nested = Fork::make(Fork::make(a, b), c);
    EXPECT_EQ(fork_branches(nested.as<Fork>()).size(), 2u);
    EXPECT_FALSE(equal(s, nested));
    EXPECT_TRUE(equal(s, Fork::make(a, Fork::make(b, c))));
    EXPECT_THROW(Fork::make(a, Stmt()), InternalError);
    EXPECT_THROW(Fork::make(std::vector<Stmt>{a}), InternalError);
    Expr sem = Variable::make(Handle("halide_semaphore_t"), "s");
    EXPECT_THROW(Acquire::make(sem, Expr(), a), InternalError);
    EXPECT_THROW(Acquire::make(sem, make_one(Int(32)), Stmt()), InternalError);
}

// A mutator that changes nothing returns the same Fork and Acquire nodes; one that changes a
// branch rebuilds only the path to it.
TEST(IRFork, MutatorsKeepUnchangedForksAndAcquires) {
    Expr sem = Variable::make(Handle("halide_semaphore_t"), "s");
    Stmt a = eval("a"), b = eval("b");
    Stmt acq = Acquire::make(sem, make_one(Int(32)), b);
    Stmt s = Fork::make(a, acq);
    IRMutator none;
    EXPECT_TRUE(none.mutate(s).same_as(s));
    class RenameB : public IRMutator {
        using IRMutator::visit;
        Expr visit(const Call *op) override {
            return op->name == "b" ? Call::make(op->type, "b2", op->args, op->call_type) : op;
        }
    } rename;
    Stmt t = rename.mutate(s);
    ASSERT_FALSE(t.same_as(s));
    EXPECT_TRUE(t.as<Fork>()->first.same_as(a));
    const Acquire *t_acq = t.as<Fork>()->rest.as<Acquire>();
    ASSERT_NE(t_acq, nullptr);
    EXPECT_TRUE(t_acq->semaphore.same_as(sem));
    EXPECT_FALSE(equal(t, s));
}

// Long statement lists are common in generated code. Walking, rebuilding, comparing, printing
// or releasing a Block spine must not recurse once per statement (~Block -> ~Stmt -> ~Block ...),
// or a million-statement block overflows the 8 MiB stack. A death test keeps a crash in a child
// process, so it fails this test instead of killing the whole run.
TEST(IRBlock, AMillionStatementBlockIsHandledWithoutOverflowingTheStack) {
    EXPECT_EXIT(
        {
            std::vector<Stmt> stmts;
            for (int i = 0; i < 1000000; i++) {
                stmts.push_back(eval(i % 2 ? "f" : "g"));
            }
            Stmt blk = Block::make(stmts);
            Stmt copy = Block::make(stmts);
            stmts.clear();

            class Count : public IRVisitor {
            public:
                int evaluates = 0;
                using IRVisitor::visit;
                void visit(const Evaluate *op) override {
                    evaluates++;
                    IRVisitor::visit(op);
                }
            } count;
            blk.accept(&count);
            IRMutator noop;
            // The exit code says which step went wrong.
            int failed = (count.evaluates != 1000000) | (!noop.mutate(blk).same_as(blk)) << 1 |
                         (!equal(blk, copy)) << 2 | (to_string(blk).size() != 4000000) << 3;
            blk = Stmt();
            copy = Stmt();
            std::exit(failed);
        },
        ::testing::ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------------------------
// Constants

TEST(IRConst, MakeConstBuildsTheImmediateOfTheType) {
    Expr a = make_const(Int(16), -3);
    ASSERT_NE(a.as<IntImm>(), nullptr);
    EXPECT_EQ(a.as<IntImm>()->value, -3);
    EXPECT_EQ(a.type(), Int(16));

    Expr b = make_const(UInt(8), 200);
    ASSERT_NE(b.as<UIntImm>(), nullptr);
    EXPECT_EQ(b.as<UIntImm>()->value, 200u);

    Expr c = make_const(Float(32), 5);
    ASSERT_NE(c.as<FloatImm>(), nullptr);
    EXPECT_EQ(c.as<FloatImm>()->value, 5.0);

    Expr d = make_const(Int(32, 4), 9);
    const Broadcast *bc = d.as<Broadcast>();
    ASSERT_NE(bc, nullptr);
    EXPECT_EQ(bc->lanes, 4);
    EXPECT_EQ(d.type(), Int(32, 4));
    ASSERT_NE(bc->value.as<IntImm>(), nullptr);
    EXPECT_EQ(bc->value.as<IntImm>()->value, 9);

    EXPECT_THROW(make_const(Handle(), 0), InternalError);
    EXPECT_THROW(make_const(Int(8), 300), InternalError);
    EXPECT_TRUE(is_const_zero(make_zero(UInt(64))));
    EXPECT_TRUE(is_const_one(make_one(Int(32, 8))));
}

TEST(IRConst, ConstIntValueReadsIntegersAndBroadcastsOnly) {
    int64_t v = 0;
    EXPECT_TRUE(const_int_value(i32(-7), &v));
    EXPECT_EQ(v, -7);
    EXPECT_TRUE(const_int_value(UIntImm::make(UInt(64), 42), &v));
    EXPECT_EQ(v, 42);
    EXPECT_TRUE(const_int_value(Broadcast::make(i32(3), 4), &v));
    EXPECT_EQ(v, 3);
    v = 99;
    EXPECT_FALSE(const_int_value(UIntImm::make(UInt(64), UINT64_MAX), &v));
    EXPECT_FALSE(const_int_value(FloatImm::make(Float(32), 1), &v));
    EXPECT_FALSE(const_int_value(var("x"), &v));
    EXPECT_FALSE(const_int_value(Add::make(i32(1), i32(2)), &v));
    EXPECT_EQ(v, 99) << "a failed read leaves the output alone";

    EXPECT_TRUE(is_const(StringImm::make("s")));
    EXPECT_TRUE(is_const(Broadcast::make(FloatImm::make(Float(32), 1), 2)));
    EXPECT_FALSE(is_const(var("x")));
    EXPECT_FALSE(is_const_one(i32(2)));
    EXPECT_FALSE(is_const_zero(FloatImm::make(Float(32), 0)));
}

// ---------------------------------------------------------------------------------------------
// Types

TEST(Type, PrintsHalideStyleNames) {
    EXPECT_EQ(Int(32).to_string(), "int32");
    EXPECT_EQ(UInt(8, 16).to_string(), "uint8x16");
    EXPECT_EQ(Float(32, 8).to_string(), "float32x8");
    EXPECT_EQ(Bool().to_string(), "uint1");
    EXPECT_EQ(Type(Type::BFloat, 16, 1).to_string(), "bfloat16");
    EXPECT_EQ(Handle().to_string(), "void *");
    EXPECT_EQ(Handle("halide_buffer_t").to_string(), "halide_buffer_t *");
    EXPECT_EQ(Type().to_string(), "<unknown>");
}

// Halide 21 spells pointees with `struct` and `const`; comparisons see Halide 14's spelling.
TEST(Type, HandlePointeesCompareAcrossHalide14And21Spellings) {
    EXPECT_EQ(normalize_handle_name("struct halide_buffer_t"), "halide_buffer_t");
    EXPECT_EQ(normalize_handle_name("struct halide_device_interface_t const"),
              "halide_device_interface_t");
    EXPECT_EQ(normalize_handle_name("char const"), "char");
    EXPECT_EQ(normalize_handle_name("const char"), "char");
    EXPECT_EQ(normalize_handle_name("unsigned  char"), "unsigned char");
    EXPECT_TRUE(Handle("struct halide_buffer_t").is_handle_to("halide_buffer_t"));
    EXPECT_TRUE(Handle("halide_buffer_t").is_handle_to("halide_buffer_t"));
    EXPECT_TRUE(Handle("char const").is_handle_to("char"));
    EXPECT_FALSE(Handle("void").is_handle_to("halide_buffer_t"));
    EXPECT_FALSE(Handle("struct halide_buffer_t").is_handle_to("halide_dimension_t"));
    EXPECT_FALSE(Int(64).is_handle_to("halide_buffer_t"));
}

TEST(Type, ConstructorRejectsImpossibleWidthsAndLanes) {
    EXPECT_THROW(Type(Type::Int, 0, 1), InternalError);
    EXPECT_THROW(Type(Type::Int, 65, 1), InternalError);
    EXPECT_THROW(Type(Type::UInt, 8, 0), InternalError);
    EXPECT_THROW(Type(Type::UInt, 8, 65536), InternalError);
    EXPECT_NO_THROW(Type(Type::UInt, 8, 65535));
    EXPECT_FALSE(Type().is_valid());
    EXPECT_EQ(Handle().handle_name(), "void");
    EXPECT_EQ(Type(Type::Int, 32, 1, "ignored").handle_name(), "");
}

TEST(Type, HalideTypeCodeRoundTrips) {
    EXPECT_EQ(Int(32).halide_type_code(), 0x00012000u);
    EXPECT_EQ(UInt(8).halide_type_code(), 0x00010801u);
    EXPECT_EQ(Float(32, 4).halide_type_code(), 0x00042002u);
    for (const Type &t : {Int(8), Int(16, 4), UInt(1), UInt(64, 2), Float(16), Float(64, 8),
                          Type(Type::BFloat, 16, 1), Handle()}) {
        EXPECT_EQ(Type::from_halide_type_code(t.halide_type_code()), t) << t.to_string();
    }
    // Any handle comes back as `void *`: the code does not carry the pointee.
    EXPECT_EQ(Type::from_halide_type_code(Handle("halide_buffer_t").halide_type_code()), Handle());
    EXPECT_FALSE(Type::from_halide_type_code(0x00012005u).is_valid()) << "code 5";
    EXPECT_FALSE(Type::from_halide_type_code(0x00010000u).is_valid()) << "0 bits";
    EXPECT_FALSE(Type::from_halide_type_code(0x00004100u).is_valid()) << "65 bits, 0 lanes";
    EXPECT_FALSE(Type::from_halide_type_code(0x00002000u).is_valid()) << "0 lanes";
}

TEST(Type, ParseTypeNameAcceptsEveryIntegerWidthFromOneToSixtyFour) {
    for (int bits = 1; bits <= 64; bits++) {
        Type i = parse_type_name("int" + std::to_string(bits));
        Type u = parse_type_name("uint" + std::to_string(bits));
        EXPECT_EQ(i, Int(bits)) << bits;
        EXPECT_EQ(u, UInt(bits)) << bits;
    }
    EXPECT_EQ(parse_type_name("bool"), Bool());
    EXPECT_EQ(parse_type_name("float16"), Float(16));
    EXPECT_EQ(parse_type_name("float64"), Float(64));
    EXPECT_EQ(parse_type_name("bfloat16"), Type(Type::BFloat, 16, 1));
    EXPECT_EQ(parse_type_name("uint8x16"), UInt(8, 16));
    EXPECT_EQ(parse_type_name("int32x65535"), Int(32, 65535));
}

TEST(Type, ParseTypeNameRejectsJunk) {
    for (const char *s :
         {"",       "int",      "int0",        "int65",  "uint0",      "uint128",
          "float8", "float24",  "bfloat32",    "int32x", "int32x0",    "int32x1x2",
          "int032", "int32x08", "int32x65536", "Int32",  "int32 ",     " int32",
          "x32",    "handle",   "void",        "int32y", "float32x4f", "int999999999"}) {
        EXPECT_FALSE(parse_type_name(s).is_valid()) << "'" << s << "'";
    }
}

TEST(Type, LanesAndWidthsBehave) {
    Type v = Float(32, 8);
    EXPECT_TRUE(v.is_vector());
    EXPECT_FALSE(v.is_scalar());
    EXPECT_EQ(v.element_of(), Float(32));
    EXPECT_EQ(Int(16).with_lanes(4), Int(16, 4));
    EXPECT_EQ(Handle("halide_buffer_t").with_lanes(2).handle_name(), "halide_buffer_t");
    EXPECT_EQ(Bool().bytes(), 1);
    EXPECT_EQ(Int(12).bytes(), 2);
    EXPECT_EQ(Float(64).bytes(), 8);
    EXPECT_TRUE(Bool().is_bool());
    EXPECT_FALSE(UInt(8).is_bool());
    EXPECT_TRUE(Type(Type::BFloat, 16, 1).is_float());
}

TEST(Type, IntegerRangesAreExact) {
    EXPECT_EQ(Int(8).min_int(), -128);
    EXPECT_EQ(Int(8).max_uint(), 127u);
    EXPECT_EQ(Int(64).min_int(), INT64_MIN);
    EXPECT_EQ(Int(64).max_uint(), uint64_t(INT64_MAX));
    EXPECT_EQ(UInt(64).max_uint(), UINT64_MAX);
    EXPECT_EQ(UInt(16).min_int(), 0);
    EXPECT_TRUE(Int(8).can_represent(-128));
    EXPECT_FALSE(Int(8).can_represent(128));
    EXPECT_FALSE(UInt(8).can_represent(-1));
    EXPECT_TRUE(UInt(1).can_represent(1));
    EXPECT_FALSE(UInt(1).can_represent(2));
    EXPECT_TRUE(Int(64).can_represent(INT64_MIN));
    EXPECT_FALSE(Float(32).can_represent(0));
}

TEST(Type, AnyTwoHandlesOfEqualLanesAreCompatibleButNotEqual) {
    Type a = Handle("void"), b = Handle("halide_buffer_t");
    EXPECT_TRUE(types_compatible(a, b));
    EXPECT_NE(a, b);
    EXPECT_FALSE(types_compatible(a, Handle("void", 2)));
    EXPECT_FALSE(types_compatible(a, UInt(64)));
    EXPECT_FALSE(types_compatible(Int(32), UInt(32)));
    EXPECT_FALSE(types_compatible(Int(32), Int(32, 2)));
    EXPECT_TRUE(types_compatible(Float(16, 4), Float(16, 4)));
}

}  // namespace
}  // namespace tally

namespace tally {
namespace {

// Every intrinsic Halide 21 names (its IR.cpp's intrinsic_op_names, in its order) is an
// intrinsic here by default, found by name and marked as Halide 21's.
TEST(Intrinsics, EveryHalide21IntrinsicIsKnown) {
    const char *const halide21[] = {"abs",
                                    "absd",
                                    "add_image_checks_marker",
                                    "alloca",
                                    "bitwise_and",
                                    "bitwise_not",
                                    "bitwise_or",
                                    "bitwise_xor",
                                    "bool_to_mask",
                                    "bundle",
                                    "call_cached_indirect_function",
                                    "cast_mask",
                                    "concat_bits",
                                    "count_leading_zeros",
                                    "count_trailing_zeros",
                                    "debug_to_file",
                                    "declare_box_touched",
                                    "div_round_to_zero",
                                    "dynamic_shuffle",
                                    "extract_bits",
                                    "extract_mask_element",
                                    "get_user_context",
                                    "gpu_thread_barrier",
                                    "halving_add",
                                    "halving_sub",
                                    "hvx_gather",
                                    "hvx_scatter",
                                    "hvx_scatter_acc",
                                    "hvx_scatter_release",
                                    "if_then_else",
                                    "if_then_else_mask",
                                    "image_load",
                                    "image_store",
                                    "lerp",
                                    "likely",
                                    "likely_if_innermost",
                                    "load_typed_struct_member",
                                    "make_struct",
                                    "memoize_expr",
                                    "mod_round_to_zero",
                                    "mul_shift_right",
                                    "mux",
                                    "popcount",
                                    "prefetch",
                                    "profiling_enable_instance_marker",
                                    "promise_clamped",
                                    "random",
                                    "register_destructor",
                                    "require",
                                    "require_mask",
                                    "return_second",
                                    "rewrite_buffer",
                                    "round",
                                    "rounding_halving_add",
                                    "rounding_mul_shift_right",
                                    "rounding_shift_left",
                                    "rounding_shift_right",
                                    "saturating_add",
                                    "saturating_sub",
                                    "saturating_cast",
                                    "scatter_gather",
                                    "select_mask",
                                    "shift_left",
                                    "shift_right",
                                    "signed_integer_overflow",
                                    "size_of_halide_buffer_t",
                                    "skip_stages_marker",
                                    "sliding_window_marker",
                                    "sorted_avg",
                                    "strict_add",
                                    "strict_div",
                                    "strict_eq",
                                    "strict_le",
                                    "strict_lt",
                                    "strict_max",
                                    "strict_min",
                                    "strict_mul",
                                    "strict_sub",
                                    "stringify",
                                    "target_arch_is",
                                    "target_bits",
                                    "target_has_feature",
                                    "target_natural_vector_size",
                                    "target_os_is",
                                    "undef",
                                    "unreachable",
                                    "unsafe_promise_clamped",
                                    "widen_right_add",
                                    "widen_right_mul",
                                    "widen_right_sub",
                                    "widening_add",
                                    "widening_mul",
                                    "widening_shift_left",
                                    "widening_shift_right",
                                    "widening_sub",
                                    "get_runtime_vscale"};
    EXPECT_EQ(std::size(halide21), 96u);
    for (const char *n : halide21) {
        SCOPED_TRACE(n);
        Call::IntrinsicOp op = Call::find_intrinsic(n);
        ASSERT_NE(op, Call::IntrinsicOpCount);
        EXPECT_STREQ(Call::intrinsic_name(op), n);
        EXPECT_TRUE(Call::intrinsic_dialects(op) & Dialects::H21);
        EXPECT_EQ(Call::default_call_type(n), Call::Intrinsic);
    }
}

// Halide 14's list likewise, except reinterpret, which Tally reads as a Reinterpret node (as
// Halide 21 has it) and which therefore is no intrinsic here.
TEST(Intrinsics, EveryHalide14IntrinsicIsKnownExceptReinterpret) {
    const char *const halide14[] = {"abs",
                                    "absd",
                                    "add_image_checks_marker",
                                    "alloca",
                                    "bitwise_and",
                                    "bitwise_not",
                                    "bitwise_or",
                                    "bitwise_xor",
                                    "bool_to_mask",
                                    "bundle",
                                    "call_cached_indirect_function",
                                    "cast_mask",
                                    "count_leading_zeros",
                                    "count_trailing_zeros",
                                    "debug_to_file",
                                    "declare_box_touched",
                                    "div_round_to_zero",
                                    "dynamic_shuffle",
                                    "extract_mask_element",
                                    "get_user_context",
                                    "gpu_thread_barrier",
                                    "halving_add",
                                    "halving_sub",
                                    "hvx_gather",
                                    "hvx_scatter",
                                    "hvx_scatter_acc",
                                    "hvx_scatter_release",
                                    "if_then_else",
                                    "if_then_else_mask",
                                    "image_load",
                                    "image_store",
                                    "lerp",
                                    "likely",
                                    "likely_if_innermost",
                                    "load_typed_struct_member",
                                    "make_struct",
                                    "memoize_expr",
                                    "mod_round_to_zero",
                                    "mul_shift_right",
                                    "mux",
                                    "popcount",
                                    "prefetch",
                                    "promise_clamped",
                                    "random",
                                    "register_destructor",
                                    "reinterpret",
                                    "require",
                                    "require_mask",
                                    "return_second",
                                    "rewrite_buffer",
                                    "rounding_halving_add",
                                    "rounding_halving_sub",
                                    "rounding_mul_shift_right",
                                    "rounding_shift_left",
                                    "rounding_shift_right",
                                    "saturating_add",
                                    "saturating_sub",
                                    "scatter_gather",
                                    "select_mask",
                                    "shift_left",
                                    "shift_right",
                                    "signed_integer_overflow",
                                    "size_of_halide_buffer_t",
                                    "sorted_avg",
                                    "strict_float",
                                    "stringify",
                                    "undef",
                                    "unreachable",
                                    "unsafe_promise_clamped",
                                    "widening_add",
                                    "widening_mul",
                                    "widening_shift_left",
                                    "widening_shift_right",
                                    "widening_sub"};
    EXPECT_EQ(std::size(halide14), 74u);
    for (const char *n : halide14) {
        SCOPED_TRACE(n);
        Call::IntrinsicOp op = Call::find_intrinsic(n);
        if (std::string(n) == "reinterpret") {
            EXPECT_EQ(op, Call::IntrinsicOpCount);
            EXPECT_EQ(Call::default_call_type(n), Call::Extern);
            continue;
        }
        ASSERT_NE(op, Call::IntrinsicOpCount);
        EXPECT_TRUE(Call::intrinsic_dialects(op) & Dialects::H14);
    }
    EXPECT_EQ(Call::default_call_type("sqrt_f32"), Call::Extern) << "math is extern";
    EXPECT_EQ(Call::default_call_type("halide_copy_to_host"), Call::Extern);
}

// A Call knows its intrinsic from its call type and name, as Halide's is_intrinsic: an extern
// function that happens to share an intrinsic's name is not that intrinsic.
TEST(Intrinsics, CallsKnowTheirIntrinsicByTypeAndName) {
    Expr x = Variable::make(Int(32), "x");
    Expr a = Call::make(Int(32), Call::abs, {x});
    const Call *c = a.as<Call>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->name, "abs");
    EXPECT_EQ(c->call_type, Call::Intrinsic);
    EXPECT_TRUE(c->is_intrinsic(Call::abs));
    EXPECT_TRUE(c->is_intrinsic({Call::absd, Call::abs}));
    EXPECT_FALSE(c->is_intrinsic({Call::absd, Call::popcount}));
    Expr e = Call::make(Int(32), "abs", {x}, Call::Extern);
    EXPECT_FALSE(e.as<Call>()->is_intrinsic(Call::abs));
    EXPECT_EQ(e.as<Call>()->intrinsic_op, Call::IntrinsicOpCount);
    Expr p = Call::make(Int(32), "abs", {x}, Call::PureIntrinsic);
    EXPECT_TRUE(p.as<Call>()->is_intrinsic(Call::abs));
}

// Purity (what a back end may evaluate speculatively) is the list's second column: arithmetic
// is pure; effects, memory and calls undefined for some arguments are not.
TEST(Intrinsics, PurityIsTheListsColumn) {
    for (Call::IntrinsicOp op :
         {Call::abs, Call::bitwise_and, Call::shift_left, Call::lerp, Call::saturating_cast,
          Call::likely, Call::mux, Call::round, Call::widen_right_add, Call::concat_bits,
          Call::strict_div, Call::strict_le}) {
        EXPECT_TRUE(Call::is_pure_intrinsic(op)) << Call::intrinsic_name(op);
    }
    for (Call::IntrinsicOp op :
         {Call::div_round_to_zero, Call::mod_round_to_zero, Call::require, Call::prefetch,
          Call::alloca, Call::if_then_else, Call::debug_to_file, Call::tally_kernel_table,
          Call::extract_bits}) {
        EXPECT_FALSE(Call::is_pure_intrinsic(op)) << Call::intrinsic_name(op);
    }
}

}  // namespace
}  // namespace tally
