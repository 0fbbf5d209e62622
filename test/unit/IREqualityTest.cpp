// Unit tests of structural equality: what makes two expressions, statements and modules equal,
// and what the module comparison says when they are not.

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tally/IR.h"
#include "tally/IREquality.h"
#include "tally/Parser.h"

namespace tally {
namespace {

using ::testing::HasSubstr;

std::string corpus(const std::string &name) {
    return std::string(TALLY_CORPUS_DIR) + "/" + name;
}

Expr i32(int64_t v) {
    return IntImm::make(Int(32), v);
}
Expr var(const std::string &n, Type t = Int(32)) {
    return Variable::make(t, n);
}
Expr call(const std::string &n, std::vector<Expr> args, Call::CallType ct = Call::Extern) {
    return Call::make(Int(32), n, std::move(args), ct);
}
Stmt eval(Expr e) {
    return Evaluate::make(std::move(e));
}

TEST(IREquality, SeparatelyBuiltIdenticalTreesAreEqual) {
    Expr a = Add::make(var("x"), Mul::make(i32(2), var("y")));
    Expr b = Add::make(var("x"), Mul::make(i32(2), var("y")));
    ASSERT_FALSE(a.same_as(b));
    EXPECT_TRUE(equal(a, b));
    EXPECT_TRUE(equal(a, a));
    EXPECT_TRUE(equal(Expr(), Expr()));
    EXPECT_FALSE(equal(a, Expr()));
    EXPECT_FALSE(equal(Expr(), a));
}

TEST(IREquality, NamesMatter) {
    EXPECT_FALSE(equal(var("x"), var("y")));
    EXPECT_FALSE(equal(Load::make(Int(32), "a", i32(0)), Load::make(Int(32), "b", i32(0))));
    EXPECT_FALSE(equal(call("f", {}), call("g", {})));
    EXPECT_FALSE(equal(Let::make("a", i32(1), var("z")), Let::make("b", i32(1), var("z"))));
    EXPECT_FALSE(
        equal(LetStmt::make("a", i32(1), eval(i32(0))), LetStmt::make("b", i32(1), eval(i32(0)))));
    EXPECT_FALSE(equal(Free::make("a"), Free::make("b")));
    EXPECT_FALSE(equal(ProducerConsumer::make("f", true, eval(i32(0))),
                       ProducerConsumer::make("g", true, eval(i32(0)))));
    EXPECT_FALSE(equal(StringImm::make("a"), StringImm::make("b")));
    EXPECT_TRUE(equal(StringImm::make("a"), StringImm::make("a")));
}

TEST(IREquality, TypesMatter) {
    EXPECT_FALSE(equal(var("x"), var("x", Int(64))));
    EXPECT_FALSE(equal(var("p", Handle("void")), var("p", Handle("halide_buffer_t"))))
        << "compatible handle types are still not equal";
    EXPECT_FALSE(equal(Cast::make(Int(64), var("x")), Cast::make(UInt(64), var("x"))));
    EXPECT_FALSE(equal(Load::make(UInt(8), "b", i32(0)), Load::make(Int(8), "b", i32(0))));
    EXPECT_FALSE(equal(Call::make(Int(32), "f", {}, Call::Extern),
                       Call::make(UInt(8), "f", {}, Call::Extern)));
    EXPECT_FALSE(
        equal(Allocate::make("b", UInt(8), MemoryType::Heap, {i32(4)}, Expr(), eval(i32(0))),
              Allocate::make("b", Int(8), MemoryType::Heap, {i32(4)}, Expr(), eval(i32(0)))));
}

TEST(IREquality, ConstantsCompareByKindTypeAndValue) {
    EXPECT_FALSE(equal(i32(1), i32(2)));
    EXPECT_FALSE(equal(i32(1), IntImm::make(Int(64), 1)));
    EXPECT_FALSE(equal(IntImm::make(Int(64), 1), UIntImm::make(UInt(64), 1)));
    EXPECT_FALSE(equal(FloatImm::make(Float(32), 1), FloatImm::make(Float(64), 1)));
    EXPECT_FALSE(equal(FloatImm::make(Float(64), 1.5), FloatImm::make(Float(64), 1.25)));
    EXPECT_TRUE(equal(FloatImm::make(Float(64), 1.5), FloatImm::make(Float(64), 1.5)));
    double nan = std::numeric_limits<double>::quiet_NaN();
    EXPECT_TRUE(equal(FloatImm::make(Float(32), nan), FloatImm::make(Float(32), nan)))
        << "NaN constants are the same constant";
    EXPECT_FALSE(equal(FloatImm::make(Float(32), nan), FloatImm::make(Float(32), 0)));
    EXPECT_FALSE(equal(UIntImm::make(UInt(64), UINT64_MAX), UIntImm::make(UInt(64), 0)));
}

TEST(IREquality, CallTypesMatter) {
    EXPECT_FALSE(equal(call("f", {i32(1)}, Call::Extern), call("f", {i32(1)}, Call::PureExtern)));
    EXPECT_FALSE(
        equal(call("abs", {i32(1)}, Call::Intrinsic), call("abs", {i32(1)}, Call::PureIntrinsic)));
    EXPECT_TRUE(equal(call("f", {i32(1)}, Call::Extern), call("f", {i32(1)}, Call::Extern)));
    EXPECT_FALSE(equal(call("f", {i32(1)}), call("f", {i32(1), i32(2)})));
    EXPECT_FALSE(equal(call("f", {i32(1)}), call("f", {i32(2)})));
}

TEST(IREquality, OperatorKindsAndOperandOrderMatter) {
    EXPECT_FALSE(equal(Add::make(var("x"), var("y")), Sub::make(var("x"), var("y"))));
    EXPECT_FALSE(equal(Add::make(var("x"), var("y")), Add::make(var("y"), var("x"))));
    EXPECT_FALSE(equal(LT::make(var("x"), var("y")), LE::make(var("x"), var("y"))));
    EXPECT_FALSE(equal(Min::make(var("x"), var("y")), Max::make(var("x"), var("y"))));
}

TEST(IREquality, VectorShapesMatter) {
    EXPECT_FALSE(equal(Broadcast::make(i32(1), 4), Broadcast::make(i32(1), 8)));
    EXPECT_FALSE(equal(Ramp::make(i32(0), i32(1), 4), Ramp::make(i32(0), i32(2), 4)));
    Expr v = Ramp::make(i32(0), i32(1), 4);
    EXPECT_FALSE(equal(Shuffle::make({v}, {0, 1}), Shuffle::make({v}, {1, 0})));
    EXPECT_TRUE(equal(Shuffle::make({v}, {3, 1}), Shuffle::make({v}, {3, 1})));
}

TEST(IREquality, LoadAndStoreDetailsMatter) {
    Expr idx = Ramp::make(i32(0), i32(1), 4);
    Expr pred = Broadcast::make(LT::make(var("x"), i32(1)), 4);
    Expr plain = Load::make(Int(32, 4), "b", idx);
    EXPECT_FALSE(equal(plain, Load::make(Int(32, 4), "b", idx, pred)));
    EXPECT_FALSE(equal(plain, Load::make(Int(32, 4), "b", idx, Expr(), {4, 0})));
    EXPECT_TRUE(equal(Load::make(Int(32, 4), "b", idx, pred, {4, 0}),
                      Load::make(Int(32, 4), "b", idx, pred, {4, 0})));
    EXPECT_FALSE(equal(Store::make("b", i32(1), i32(0)), Store::make("b", i32(1), i32(1))));
    EXPECT_FALSE(equal(Store::make("b", i32(1), i32(0)), Store::make("b", i32(2), i32(0))));
    EXPECT_FALSE(
        equal(Store::make("b", i32(1), i32(0)), Store::make("b", i32(1), i32(0), Expr(), {2, 0})));
}

TEST(IREquality, StatementDetailsMatter) {
    Stmt body = eval(i32(0));
    auto loop = [&](ForType ft, DeviceAPI api) {
        return For::make("i", i32(0), i32(8), ft, api, body);
    };
    EXPECT_TRUE(
        equal(loop(ForType::Serial, DeviceAPI::None), loop(ForType::Serial, DeviceAPI::None)));
    EXPECT_FALSE(
        equal(loop(ForType::Serial, DeviceAPI::None), loop(ForType::Parallel, DeviceAPI::None)));
    EXPECT_FALSE(equal(loop(ForType::GPUBlock, DeviceAPI::CUDA),
                       loop(ForType::GPUBlock, DeviceAPI::Vulkan)));
    EXPECT_FALSE(
        equal(ProducerConsumer::make("f", true, body), ProducerConsumer::make("f", false, body)));
    Expr c = LT::make(var("x"), i32(1));
    EXPECT_FALSE(equal(IfThenElse::make(c, body), IfThenElse::make(c, body, body)));
    EXPECT_FALSE(equal(Allocate::make("b", UInt(8), MemoryType::Heap, {i32(4)}, Expr(), body),
                       Allocate::make("b", UInt(8), MemoryType::Stack, {i32(4)}, Expr(), body)));
    EXPECT_FALSE(
        equal(Allocate::make("b", UInt(8), MemoryType::Heap, {i32(4)}, Expr(), body),
              Allocate::make("b", UInt(8), MemoryType::Heap, {i32(4), i32(2)}, Expr(), body)));
    EXPECT_FALSE(equal(Allocate::make("b", UInt(8), MemoryType::Heap, {i32(4)}, Expr(), body),
                       Allocate::make("b", UInt(8), MemoryType::Heap, {i32(4)}, Expr(), body,
                                      Expr(), "custom_free")));
    EXPECT_FALSE(equal(AssertStmt::make(c, i32(1)), AssertStmt::make(c, i32(2))));
    EXPECT_FALSE(equal(Stmt(eval(i32(0))), Stmt(Free::make("x"))));
}

TEST(IREquality, LongBlocksCompareElementByElement) {
    std::vector<Stmt> a, b;
    for (int i = 0; i < 100000; i++) {
        a.push_back(eval(i32(i)));
        b.push_back(eval(i32(i)));
    }
    EXPECT_TRUE(equal(Block::make(a), Block::make(b)));
    b.back() = eval(i32(-1));
    EXPECT_FALSE(equal(Block::make(a), Block::make(b)));
    b.pop_back();
    EXPECT_FALSE(equal(Block::make(a), Block::make(b))) << "one block is a prefix of the other";
}

// ---------------------------------------------------------------------------------------------
// Modules

class IREqualityModule : public ::testing::Test {
protected:
    void SetUp() override {
        a = parse_module_file(corpus("blur3x3.profile.stmt"));
        b = parse_module_file(corpus("blur3x3.profile.stmt"));
    }
    Module a, b;
    std::string why;
};

TEST_F(IREqualityModule, ParsingTheSameFileTwiceGivesEqualModules) {
    EXPECT_TRUE(equal(a, b, &why)) << why;
    EXPECT_TRUE(equal(a, b));
}

TEST_F(IREqualityModule, ReportsADifferentName) {
    b.name = "other";
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("module names differ"));
    EXPECT_THAT(why, HasSubstr("'other'"));
    EXPECT_FALSE(equal(a, b)) << "works without a message too";
}

TEST_F(IREqualityModule, ReportsADifferentTarget) {
    b.target = b.target.with_feature("cuda");
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("targets differ"));
    EXPECT_THAT(why, HasSubstr("cuda"));
}

TEST_F(IREqualityModule, ReportsWhichFunctionBodyDiffers) {
    LoweredFunc *f = b.find_function("blur_y");
    ASSERT_NE(f, nullptr);
    f->body = Block::make(f->body, eval(i32(0)));
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("function 'blur_y' body differs"));
}

TEST_F(IREqualityModule, ReportsDifferentArguments) {
    LoweredFunc *f = b.find_function("blur_y");
    ASSERT_NE(f, nullptr);
    ASSERT_FALSE(f->args.empty());
    f->args[0].dimensions = 3;
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("function 'blur_y' arguments differ"));
}

TEST_F(IREqualityModule, ReportsDifferentLinkage) {
    b.functions[0].linkage = LinkageType::Internal;
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("name or linkage differs"));
}

TEST_F(IREqualityModule, ReportsAMissingFunction) {
    b.functions.pop_back();
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("number of functions differs"));
}

TEST_F(IREqualityModule, ReportsKernelAndBufferDifferences) {
    Kernel k;
    k.name = "k0";
    k.device_api = DeviceAPI::CUDA;
    k.body = eval(i32(0));
    a.kernels.push_back(k);
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("number of kernels differs"));

    k.body = eval(i32(1));
    b.kernels.push_back(k);
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("kernel 'k0' body differs"));

    b.kernels[0].body = a.kernels[0].body;
    b.kernels[0].device_api = DeviceAPI::Vulkan;
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("kernel 'k0' header differs"));
    b.kernels[0].device_api = DeviceAPI::CUDA;
    EXPECT_TRUE(equal(a, b, &why)) << why;

    BufferConstant buf;
    buf.name = "src";
    buf.opaque = false;
    buf.bytes = std::string("abc\0", 4);
    a.buffers.push_back(buf);
    buf.bytes = std::string("abd\0", 4);
    b.buffers.push_back(buf);
    EXPECT_FALSE(equal(a, b, &why));
    EXPECT_THAT(why, HasSubstr("buffer 'src' differs"));
}

}  // namespace
}  // namespace tally
