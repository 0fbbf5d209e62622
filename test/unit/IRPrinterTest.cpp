// Unit tests of the IR printer: the Halide-style spellings it uses, the prefixes it adds exactly
// where the parser could not otherwise recover a type, and that its output parses back to the
// same IR (module round trips over the whole corpus live in CorpusTest.cpp).

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tally/IR.h"
#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/Parser.h"

namespace tally {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Expr i32(int64_t v) {
    return IntImm::make(Int(32), v);
}
Expr var(const std::string &n, Type t = Int(32)) {
    return Variable::make(t, n);
}

/** A module holding one function with the given body and no arguments. */
Module module_of(Stmt body) {
    Module m;
    m.name = "m";
    m.target = Target::parse("host");
    LoweredFunc f;
    f.name = "m";
    f.body = std::move(body);
    m.functions.push_back(f);
    return m;
}

/** Prints m, parses it back and compares. Returns "" on success, else what went wrong. */
std::string round_trip_problem(const Module &m) {
    std::string text = to_string(m);
    try {
        Module back = parse_module(text, "printed.stmt");
        std::string why;
        if (!equal(m, back, &why)) {
            return why + "\nprinted:\n" + text + "\nre-printed:\n" + to_string(back);
        }
    } catch (const std::exception &e) {
        return std::string("re-parse failed: ") + e.what();
    }
    return "";
}

TEST(IRPrinter, PrintsHalideSpellings) {
    EXPECT_EQ(to_string(Add::make(var("x"), Mul::make(i32(2), var("y")))), "x + (2*y)");
    EXPECT_EQ(to_string(Broadcast::make(i32(1), 8)), "x8(1)");
    EXPECT_EQ(to_string(Ramp::make(var("x"), i32(1), 4)), "ramp(x, 1, 4)");
    EXPECT_EQ(to_string(Cast::make(Int(64), var("x"))), "int64(x)");
    EXPECT_EQ(to_string(UIntImm::make(UInt(64), 0)), "(uint64)0");
    EXPECT_EQ(to_string(IntImm::make(Int(16), -3)), "(int16)-3");
    EXPECT_EQ(to_string(FloatImm::make(Float(32), 1.5)), "1.500000f");
    EXPECT_EQ(to_string(FloatImm::make(Float(16), 2)), "2.000000h");
    EXPECT_EQ(to_string(FloatImm::make(Float(64), 3)), "3.000000");
    EXPECT_EQ(to_string(Min::make(var("x"), i32(3))), "min(x, 3)");
    EXPECT_EQ(to_string(Select::make(LT::make(var("x"), i32(0)), i32(1), i32(2))),
              "select(x < 0, 1, 2)");
    EXPECT_EQ(to_string(Let::make("a", i32(1), Add::make(var("a"), var("a")))),
              "let a = 1 in (a + a)");
    EXPECT_EQ(to_string(Call::make(Int(32), "f", {var("x")}, Call::Extern)), "f(x)");
    EXPECT_EQ(to_string(Call::make(Int(32), "f", {var("x")}, Call::PureExtern)),
              "f@pure_extern(x)");
    EXPECT_EQ(to_string(StringImm::make("a\"b\n")), "\"a\\\"b\\n\"");
}

TEST(IRPrinter, PrefixesVariablesAndLoadsOnlyWhenTheParserCouldNotInferTheType) {
    EXPECT_EQ(to_string(var("x")), "x");
    EXPECT_EQ(to_string(var("p", Handle())), "(void *)p");
    EXPECT_EQ(to_string(Load::make(UInt(8), "in", i32(0))), "(uint8)in[0]");
    // Inside its let, a name prints bare because the parser gives it the value's type.
    EXPECT_EQ(to_string(Let::make("t", IntImm::make(Int(64), 1), var("t", Int(64)))),
              "let t = (int64)1 in t");
    Stmt alloc = Allocate::make("tmp", UInt(8), MemoryType::Auto, {i32(4)}, Expr(),
                                Store::make("tmp", Load::make(UInt(8), "tmp", i32(1)), i32(0)));
    std::string text = to_string(alloc);
    EXPECT_THAT(text, HasSubstr("allocate tmp[uint8 * 4]"));
    EXPECT_THAT(text, HasSubstr("tmp[0] = tmp[1]"));
}

TEST(IRPrinter, PrintsStatementsOnePerLineWithIndentedBodies) {
    Stmt loop = For::make("x", i32(0), i32(4), ForType::Parallel, DeviceAPI::None,
                          Store::make("out", var("x"), var("x")));
    Stmt s = ProducerConsumer::make("out", true, loop);
    EXPECT_EQ(to_string(s), "produce out {\n"
                            " parallel (x, 0, 4) {\n"
                            "  out[x] = x\n"
                            " }\n"
                            "}\n");
    Stmt gpu =
        For::make("b", i32(0), i32(4), ForType::GPUBlock, DeviceAPI::CUDA, Evaluate::make(i32(0)));
    EXPECT_THAT(to_string(gpu), HasSubstr("gpu_block<CUDA> (b, 0, 4) {"));
}

TEST(IRPrinter, PrintsModuleHeadersBuffersAndKernels) {
    Module m = module_of(Evaluate::make(i32(0)));
    m.target = Target::parse("host-cuda-profile");
    BufferConstant b;
    b.name = "cuda_gpu_source_kernels";
    b.opaque = false;
    b.bytes = std::string("\n// ptx\n\0", 9);
    m.buffers.push_back(b);
    BufferConstant opaque;
    opaque.name = "cuda_buf";
    m.buffers.push_back(opaque);
    Kernel k;
    k.name = "k0";
    k.device_api = DeviceAPI::CUDA;
    Argument a;
    a.name = "out";
    a.kind = Argument::Buffer;
    a.type = Float(32);
    a.dimensions = 2;
    k.args = {a};
    k.body = Store::make("out", FloatImm::make(Float(32), 0), i32(0));
    m.kernels.push_back(k);

    std::string text = to_string(m);
    EXPECT_THAT(text, HasSubstr("module name=m, target=host-cuda-profile, dialect=halide14\n"));
    EXPECT_THAT(text, HasSubstr("buffer cuda_gpu_source_kernels = {" + b.bytes + "\n}\n"));
    EXPECT_THAT(text, HasSubstr("buffer cuda_buf = {...}\n"));
    EXPECT_THAT(text, HasSubstr("kernel <CUDA> k0 (out: buffer<float32, 2>) {\n"));
    EXPECT_THAT(text, HasSubstr("external func m () {\n"));
    EXPECT_EQ(round_trip_problem(m), "");
}

TEST(IRPrinter, PrintsFloatsThatReadBackExactly) {
    for (double v : {0.1, 1.0 / 3.0, 1e-10, 6.02214076e23, -0.0, 123456789.125}) {
        for (Type t : {Float(32), Float(64)}) {
            Expr e = FloatImm::make(t, v);
            Expr back = parse_expr(to_string(e));
            EXPECT_TRUE(equal(e, back)) << to_string(e);
        }
    }
}

TEST(IRPrinter, QuotesNamesThatAreNotPlainIdentifiers) {
    Stmt s = ProducerConsumer::make("has space", true,
                                    LetStmt::make("a-b", i32(1), Evaluate::make(i32(0))));
    std::string text = to_string(s);
    // The quoting spelling is the printer's choice; the names must not come out bare.
    EXPECT_THAT(text, HasSubstr("has space"));
    EXPECT_THAT(text, Not(HasSubstr("produce has space {")));
    EXPECT_THAT(text, Not(HasSubstr("let a-b =")));
    EXPECT_EQ(round_trip_problem(module_of(s)), "");
}

// Names that are not plain identifiers must round-trip in every position, not only where the
// grammar expects a name (produce, let, for, allocate). At db662c6 a Store printed
// `"out-buf"[0] = 0`, which did not parse; a Variable printed its name unquoted (`a b`); a Call
// printed `"f x"(1)`, which read back as two statements.
TEST(IRPrinter, NamesThatNeedQuotingRoundTripInEveryPosition) {
    Stmt alloc = Allocate::make("out-buf", Int(32), MemoryType::Auto, {i32(4)}, Expr(),
                                Store::make("out-buf", i32(0), i32(0)));
    EXPECT_EQ(round_trip_problem(module_of(alloc)), "");
    Stmt let = LetStmt::make("a b", i32(1),
                             Evaluate::make(Call::make(Int(32), "g", {var("a b")}, Call::Extern)));
    EXPECT_EQ(round_trip_problem(module_of(let)), "");
    Stmt call = Evaluate::make(Call::make(Int(32), "f x", {i32(1)}, Call::Extern));
    EXPECT_EQ(round_trip_problem(module_of(call)), "");
}

TEST(IRPrinter, StatementsWithTheirOwnLinesRoundTrip) {
    Expr c = LT::make(var("x"), i32(1));
    Stmt body = Block::make({
        LetStmt::make(
            "x", i32(3),
            IfThenElse::make(c, Evaluate::make(i32(1)),
                             IfThenElse::make(c, Evaluate::make(i32(2)), Evaluate::make(i32(3))))),
        AssertStmt::make(c, i32(-1)),
        Allocate::make(
            "t", Float(32), MemoryType::Stack, {i32(4), i32(2)}, c,
            Block::make(Store::make("t", FloatImm::make(Float(32), 1), i32(0)), Free::make("t"))),
    });
    EXPECT_EQ(round_trip_problem(module_of(body)), "");
}

// Statements are not separated in the text, so an Evaluate whose printed form ends in a name,
// followed by a statement whose printed form starts with a `(T)` prefix, can re-parse as one
// call: at db662c6, `x` then `(uint64)0` read back as `x(uint64)` then `0`.
TEST(IRPrinter, AnEvaluatedNameFollowedByAPrefixedStatementRoundTrips) {
    Stmt body = Block::make(Evaluate::make(var("x")), Evaluate::make(UIntImm::make(UInt(64), 0)));
    EXPECT_EQ(round_trip_problem(module_of(body)), "");
    // `a + b` then `(void *)g(a)` reads `b(` as a call and then fails on `void *)`.
    Stmt body2 = Block::make(Evaluate::make(Add::make(var("a"), var("b"))),
                             Evaluate::make(Call::make(Handle(), "g", {var("a")}, Call::Extern)));
    EXPECT_EQ(round_trip_problem(module_of(body2)), "");
}

// The parser reads `x0 + x1 + ... + x250` (a flat chain, no nesting); the printer writes a
// left-nested sum with parentheses, `((x0 + x1) + x2) ...`. At db662c6 that was deeper than the
// parser's nesting limit (400, two levels per parenthesis), so the printed form of a parsed
// module no longer parsed.
TEST(IRPrinter, ALongSumParsedFromTextPrintsBackToParseableText) {
    std::string sum = "x0";
    for (int i = 1; i <= 250; i++) {
        sum += " + x" + std::to_string(i);
    }
    Module m = parse_module("f(" + sum + ")\n", "sum.stmt");
    EXPECT_EQ(round_trip_problem(m), "");
}

}  // namespace
}  // namespace tally
