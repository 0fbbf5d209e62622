// Unit tests of the text parser: the structure it builds for each expression form, the located
// diagnostics it gives for bad input, and its robustness (garbage in gives a CompileError,
// never a crash, a hang or an internal error).

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tally/Error.h"
#include "tally/IR.h"
#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/Parser.h"
#include "text/Elaborator.h"
#include "text/Lexer.h"
#include "text/SyntaxParser.h"

namespace tally {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string corpus(const std::string &name) {
    return std::string(TALLY_CORPUS_DIR) + "/" + name;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

Expr i32(int64_t v) {
    return IntImm::make(Int(32), v);
}
Expr var(const std::string &n, Type t = Int(32)) {
    return Variable::make(t, n);
}

/** The message of the CompileError that parsing `text` as a module throws, or "" if none. */
std::string module_error(const std::string &text, const std::string &file = "bad.stmt") {
    try {
        parse_module(text, file);
    } catch (const CompileError &e) {
        return e.what();
    }
    return "";
}

std::string expr_error(const std::string &text) {
    try {
        parse_expr(text);
    } catch (const CompileError &e) {
        return e.what();
    }
    return "";
}

/** Parses `text` as a module; true if it parsed, false on a CompileError. Any other exception
 * is a test failure (it would mean a bug in the parser, not bad input). */
bool parses_or_compile_error(const std::string &text) {
    try {
        parse_module(text, "fuzz.stmt");
        return true;
    } catch (const CompileError &) {
        return false;
    } catch (const std::exception &e) {
        ADD_FAILURE() << "unexpected " << typeid(e).name() << ": " << e.what() << "\nfor input of "
                      << text.size() << " bytes:\n"
                      << text.substr(0, 400);
        return false;
    }
}

// ---------------------------------------------------------------------------------------------
// Expressions

TEST(IRParser, MultiplicationBindsTighterThanAddition) {
    Expr e = parse_expr("1 + 2*3");
    const Add *add = e.as<Add>();
    ASSERT_NE(add, nullptr);
    ASSERT_NE(add->a.as<IntImm>(), nullptr);
    EXPECT_EQ(add->a.as<IntImm>()->value, 1);
    const Mul *mul = add->b.as<Mul>();
    ASSERT_NE(mul, nullptr);
    EXPECT_TRUE(equal(mul->a, i32(2)));
    EXPECT_TRUE(equal(mul->b, i32(3)));

    EXPECT_TRUE(equal(parse_expr("1*2 + 3"), Add::make(Mul::make(i32(1), i32(2)), i32(3))));
    EXPECT_TRUE(equal(parse_expr("(1 + 2)*3"), Mul::make(Add::make(i32(1), i32(2)), i32(3))));
}

TEST(IRParser, BinaryOperatorsAssociateLeft) {
    EXPECT_TRUE(equal(parse_expr("1 - 2 - 3"), Sub::make(Sub::make(i32(1), i32(2)), i32(3))));
    EXPECT_TRUE(equal(parse_expr("8/4/2"), Div::make(Div::make(i32(8), i32(4)), i32(2))));
    EXPECT_TRUE(equal(parse_expr("7 % 3*2"), Mul::make(Mod::make(i32(7), i32(3)), i32(2))));
}

TEST(IRParser, ComparisonsBindTighterThanLogicalOperators) {
    Expr x = var("x"), y = var("y");
    Expr want = Or::make(And::make(LT::make(x, y), NE::make(x, i32(0))), GE::make(y, i32(1)));
    EXPECT_TRUE(equal(parse_expr("x < y && x != 0 || y >= 1"), want));
    EXPECT_TRUE(equal(parse_expr("!(x == y)"), Not::make(EQ::make(x, y))));
    EXPECT_TRUE(
        equal(parse_expr("x + 1 <= y*2"), LE::make(Add::make(x, i32(1)), Mul::make(y, i32(2)))));
}

TEST(IRParser, TypePrefixedIntegerIsAnImmediateOfThatType) {
    Expr e = parse_expr("(uint64)0");
    ASSERT_NE(e.as<UIntImm>(), nullptr);
    EXPECT_EQ(e.type(), UInt(64));
    EXPECT_EQ(e.as<UIntImm>()->value, 0u);

    Expr big = parse_expr("(uint64)18446744073709551615");
    ASSERT_NE(big.as<UIntImm>(), nullptr);
    EXPECT_EQ(big.as<UIntImm>()->value, UINT64_MAX);

    Expr b = parse_expr("(uint1)1");
    EXPECT_EQ(b.type(), Bool());
    Expr i8 = parse_expr("(int8)-128");
    ASSERT_NE(i8.as<IntImm>(), nullptr);
    EXPECT_EQ(i8.as<IntImm>()->value, -128);
    EXPECT_EQ(i8.type(), Int(8));
    Expr f = parse_expr("(float32)2");
    ASSERT_NE(f.as<FloatImm>(), nullptr);
    EXPECT_EQ(f.type(), Float(32));
}

TEST(IRParser, ReadsBroadcastRampAndCast) {
    Expr b = parse_expr("x8(1)");
    const Broadcast *bc = b.as<Broadcast>();
    ASSERT_NE(bc, nullptr);
    EXPECT_EQ(bc->lanes, 8);
    EXPECT_EQ(b.type(), Int(32, 8));
    EXPECT_TRUE(equal(bc->value, i32(1)));

    Expr r = parse_expr("ramp(0, 1, 4)");
    const Ramp *rp = r.as<Ramp>();
    ASSERT_NE(rp, nullptr);
    EXPECT_EQ(rp->lanes, 4);
    EXPECT_EQ(r.type(), Int(32, 4));
    EXPECT_TRUE(equal(rp->base, i32(0)));
    EXPECT_TRUE(equal(rp->stride, i32(1)));

    Expr c = parse_expr("int64(x)");
    const Cast *cast = c.as<Cast>();
    ASSERT_NE(cast, nullptr);
    EXPECT_EQ(c.type(), Int(64));
    EXPECT_TRUE(equal(cast->value, var("x")));

    Expr vc = parse_expr("float32x4(ramp(x, 1, 4))");
    EXPECT_EQ(vc.type(), Float(32, 4));
    EXPECT_NE(vc.as<Cast>(), nullptr);
}

TEST(IRParser, TypePrefixOnANameGivesATypedVariable) {
    Expr p = parse_expr("(void *)p");
    const Variable *v = p.as<Variable>();
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->name, "p");
    EXPECT_TRUE(p.type().is_handle());
    EXPECT_EQ(p.type().handle_name(), "void");

    Expr buf = parse_expr("(halide_buffer_t *)input.buffer");
    EXPECT_EQ(buf.type(), Handle("halide_buffer_t"));
    EXPECT_EQ(buf.as<Variable>()->name, "input.buffer");

    EXPECT_EQ(parse_expr("(uint8)x").type(), UInt(8));
    EXPECT_EQ(parse_expr("x").type(), Int(32)) << "bare free names are int32";
    EXPECT_EQ(parse_expr("(struct foo **)q").type().handle_name(), "struct foo *");
}

TEST(IRParser, LetBindsItsNameInTheBody) {
    Expr e = parse_expr("let a = 1 in a + a");
    const Let *let = e.as<Let>();
    ASSERT_NE(let, nullptr);
    EXPECT_EQ(let->name, "a");
    EXPECT_TRUE(equal(let->value, i32(1)));
    EXPECT_TRUE(equal(let->body, Add::make(var("a"), var("a"))));

    // The bound name takes the value's type, so `a` below is a uint8 without a prefix.
    Expr typed = parse_expr("let a = (uint8)1 in a + (uint8)2");
    EXPECT_EQ(typed.type(), UInt(8));
    EXPECT_EQ(typed.as<Let>()->body.as<Add>()->a.type(), UInt(8));
}

TEST(IRParser, FloatLiteralSuffixesPickTheWidth) {
    Expr f = parse_expr("1.5f");
    ASSERT_NE(f.as<FloatImm>(), nullptr);
    EXPECT_EQ(f.type(), Float(32));
    EXPECT_EQ(f.as<FloatImm>()->value, 1.5);

    Expr h = parse_expr("2.0h");
    ASSERT_NE(h.as<FloatImm>(), nullptr);
    EXPECT_EQ(h.type(), Float(16));
    EXPECT_EQ(h.as<FloatImm>()->value, 2.0);

    Expr d = parse_expr("3.0");
    ASSERT_NE(d.as<FloatImm>(), nullptr);
    EXPECT_EQ(d.type(), Float(64));
    EXPECT_EQ(d.as<FloatImm>()->value, 3.0);

    EXPECT_EQ(parse_expr("1e3f").as<FloatImm>()->value, 1000.0);
    EXPECT_EQ(parse_expr("2.5e-1").as<FloatImm>()->value, 0.25);
    Expr inf = parse_expr("(float32)inf");
    ASSERT_NE(inf.as<FloatImm>(), nullptr);
    EXPECT_TRUE(std::isinf(inf.as<FloatImm>()->value));
    EXPECT_TRUE(std::isnan(parse_expr("(float64)nan").as<FloatImm>()->value));
}

TEST(IRParser, NegativeLiteralsAreImmediatesNotSubtractions) {
    Expr n = parse_expr("-5");
    ASSERT_NE(n.as<IntImm>(), nullptr);
    EXPECT_EQ(n.as<IntImm>()->value, -5);

    Expr min = parse_expr("-2147483648");
    ASSERT_NE(min.as<IntImm>(), nullptr);
    EXPECT_EQ(min.as<IntImm>()->value, INT32_MIN);

    Expr min64 = parse_expr("(int64)-9223372036854775808");
    ASSERT_NE(min64.as<IntImm>(), nullptr);
    EXPECT_EQ(min64.as<IntImm>()->value, INT64_MIN);

    Expr f = parse_expr("-1.5f");
    ASSERT_NE(f.as<FloatImm>(), nullptr);
    EXPECT_EQ(f.as<FloatImm>()->value, -1.5);

    // `x + -1` is how Halide prints subtraction of a constant.
    EXPECT_TRUE(equal(parse_expr("x + -1"), Add::make(var("x"), i32(-1))));
    // Negating anything else is 0 - e.
    EXPECT_TRUE(equal(parse_expr("-x"), Sub::make(i32(0), var("x"))));

    EXPECT_THAT(expr_error("(uint8)-1"), HasSubstr("negative literal with unsigned type uint8"));
    EXPECT_THAT(expr_error("-2147483649"), HasSubstr("does not fit in int32"));
    EXPECT_THAT(expr_error("2147483648"), HasSubstr("does not fit in int32"));
    EXPECT_THAT(expr_error("(uint8)256"), HasSubstr("256 does not fit in uint8"));
}

TEST(IRParser, ReadsCallsLoadsSelectsAndShuffles) {
    Expr c = parse_expr("(uint8)f(x, 1)");
    const Call *call = c.as<Call>();
    ASSERT_NE(call, nullptr);
    EXPECT_EQ(call->name, "f");
    EXPECT_EQ(c.type(), UInt(8));
    EXPECT_EQ(call->call_type, Call::Extern);
    EXPECT_EQ(call->args.size(), 2u);

    EXPECT_EQ(parse_expr("likely(x)").as<Call>()->call_type, Call::Intrinsic);
    EXPECT_EQ(parse_expr("f@pure_extern(x)").as<Call>()->call_type, Call::PureExtern);
    EXPECT_THAT(expr_error("f@bogus(x)"), HasSubstr("unknown call type 'bogus'"));

    Expr l = parse_expr("(float32)buf[x + 1]");
    const Load *load = l.as<Load>();
    ASSERT_NE(load, nullptr);
    EXPECT_EQ(load->name, "buf");
    EXPECT_EQ(l.type(), Float(32));
    EXPECT_TRUE(equal(load->index, Add::make(var("x"), i32(1))));

    Expr pl = parse_expr("((uint8x4)buf[ramp(x, 1, 4) aligned(4, 0)] if x4(x < 1))");
    const Load *pload = pl.as<Load>();
    ASSERT_NE(pload, nullptr);
    EXPECT_TRUE(pload->predicate.defined());
    EXPECT_EQ(pload->alignment, (ModulusRemainder{4, 0}));

    // As Halide prints one where it leaves out parentheses (a let's value): no parentheses.
    Expr bare = parse_expr("(uint8x4)buf[ramp(x, 1, 4)] if x4(x < 1)");
    ASSERT_NE(bare.as<Load>(), nullptr);
    EXPECT_TRUE(equal(bare.as<Load>()->predicate, Broadcast::make(LT::make(var("x"), i32(1)), 4)));
    Module m = parse_module("let t = (uint8x4)buf[ramp(x, 1, 4)] if (ramp(x, 1, 4) <= x4(7))\n"
                            "out[ramp(0, 1, 4)] = t\n"
                            "if (x < 1) {\n  out[0] = (uint8)0\n}\n",
                            "predicated.stmt");
    const LetStmt *let = m.functions[0].body.as<LetStmt>();
    ASSERT_NE(let, nullptr);
    ASSERT_NE(let->value.as<Load>(), nullptr);
    EXPECT_TRUE(let->value.as<Load>()->predicate.defined());
    // An `if` on the next line is a statement, not a predicate.
    EXPECT_NE(let->body.as<Block>(), nullptr);

    // Halide prints a vector handle type run together with the call's name.
    Expr vs = parse_expr("(char *)x4stringify(ramp(x, 1, 4), x4(\" at \"))");
    ASSERT_NE(vs.as<Call>(), nullptr);
    EXPECT_EQ(vs.as<Call>()->name, "stringify");
    EXPECT_EQ(vs.type(), Handle("char").with_lanes(4));
    EXPECT_EQ(to_string(vs), "(char *)x4stringify(ramp(x, 1, 4), x4(\" at \"))");
    // Not a lane count: quoted, spaced, x0 or x1, or nothing after it; too many lanes is an error.
    const std::pair<const char *, const char *> names[] = {
        {"(char *)`x4stringify`(1)", "x4stringify"},
        {"(char *) x4stringify(1)", "x4stringify"},
        {"(char *)x1stringify(1)", "x1stringify"},
        {"(char *)x08f(1)", "x08f"},
        {"(char *)x4 (1)", "x4"}};
    for (const auto &[text, name] : names) {
        Expr e = parse_expr(text);
        ASSERT_NE(e.as<Call>(), nullptr) << text;
        EXPECT_EQ(e.as<Call>()->name, name) << text;
        EXPECT_EQ(e.type(), Handle("char")) << text;
    }
    // No vector has more lanes than a type holds: an error, not an internal one.
    EXPECT_THAT(expr_error("x88367(2)"),
                HasSubstr("a broadcast's lane count is at most 65535, not 88367"));
    EXPECT_TRUE(equal(parse_expr("x65535(2)"), Broadcast::make(i32(2), 65535)));
    EXPECT_THAT(expr_error("concat_vectors(x40000(1), x40000(1))"),
                HasSubstr("concat_vectors makes 80000 lanes, more than 65535"));
    EXPECT_THAT(expr_error("ramp(x4(0), x4(1), 20000)"), HasSubstr("ramp makes 80000 lanes"));
    EXPECT_THAT(expr_error("x40000(x4(1))"), HasSubstr("a broadcast makes 160000 lanes"));
    EXPECT_THAT(expr_error("slice_vectors(x60000(1), 0, 60000, 60000)"),
                HasSubstr("lane index 60000 out of range"));
    EXPECT_THAT(expr_error("(char *)x99999stringify(1)"),
                HasSubstr("a vector handle type needs 2 to 9999 lanes, not '99999'"));
    // A name that is printed quoted (here a reserved word) follows the lanes quoted, and reads
    // back the same; with a space between, `x4` is a variable and the quoted name an error.
    Expr vr = parse_expr("(char *)x4`predicate`(1)");
    ASSERT_NE(vr.as<Call>(), nullptr);
    EXPECT_EQ(vr.as<Call>()->name, "predicate");
    EXPECT_EQ(vr.type(), Handle("char").with_lanes(4));
    EXPECT_EQ(to_string(vr), "(char *)x4`predicate`(1)");
    EXPECT_EQ(to_string(parse_expr("(char *)x4predicate(1)")), "(char *)x4`predicate`(1)");
    EXPECT_FALSE(expr_error("(char *)x4 `predicate`(1)").empty());
    EXPECT_FALSE(expr_error("(char *)x1`predicate`(1)").empty());
    // `(T *)xN(v)` is a cast to a vector handle type, as Halide prints one.
    Expr vcast = parse_expr("(uint8_t *)x8((void *)x8make_struct(x))");
    ASSERT_NE(vcast.as<Cast>(), nullptr);
    EXPECT_EQ(vcast.type(), Handle("uint8_t").with_lanes(8));
    EXPECT_EQ(to_string(vcast), "(uint8_t *)x8((void *)x8make_struct(x))");
    EXPECT_THAT(expr_error("(char *)x4(1)"), HasSubstr("lane counts differ"));
    // A scalar handle call, variable or load whose name begins like lanes is printed quoted
    // (`(char *)x4foo(1)` would read back as a 4-lane call `foo`).
    for (const char *text :
         {"(char *) x4foo(1)", "(char *) x4foo", "(char *) x4foo[0]", "(char *) x12_f(1)"}) {
        Expr e = parse_expr(text);
        EXPECT_EQ(e.type(), Handle("char")) << text;
        const std::string printed = to_string(e);
        EXPECT_NE(printed.find("(char *)`x"), std::string::npos) << printed;
        EXPECT_TRUE(equal(parse_expr(printed), e)) << printed;
    }

    Expr s = parse_expr("select(x < 1, 2, 3)");
    ASSERT_NE(s.as<Select>(), nullptr);
    EXPECT_EQ(s.type(), Int(32));

    EXPECT_TRUE(equal(parse_expr("min(x, 2)"), Min::make(var("x"), i32(2))));
    EXPECT_TRUE(equal(parse_expr("max(x, 2)"), Max::make(var("x"), i32(2))));

    Expr cat = parse_expr("concat_vectors(x4(1), x4(2))");
    ASSERT_NE(cat.as<Shuffle>(), nullptr);
    EXPECT_TRUE(cat.as<Shuffle>()->is_concat());
    EXPECT_EQ(cat.type(), Int(32, 8));
    Expr sh = parse_expr("shuffle(ramp(0, 1, 4), [3, 2, 1])");
    EXPECT_EQ(sh.as<Shuffle>()->indices, (std::vector<int>{3, 2, 1}));
    Expr ex = parse_expr("extract_element(ramp(0, 1, 4), 2)");
    EXPECT_TRUE(ex.as<Shuffle>()->is_extract_element());
    EXPECT_EQ(ex.type(), Int(32));

    Expr r = parse_expr("(uint32)reinterpret(1.5f)");
    ASSERT_NE(r.as<Reinterpret>(), nullptr);
    EXPECT_EQ(r.type(), UInt(32));
    EXPECT_THAT(expr_error("(uint16)reinterpret(1.5f)"), HasSubstr("changes the bit width"));
}

TEST(IRParser, ReportsTypeErrorsWithTheirLocation) {
    EXPECT_EQ(expr_error("1 + 1.5f"),
              "<expr>:1:3: error: operands of '+' have different types: int32 and float32");
    EXPECT_THAT(expr_error("buf[0]"), StartsWith("<expr>:1:1: error: cannot infer the element "
                                                 "type of buffer 'buf'"));
    EXPECT_THAT(expr_error("select(1, 2, 3)"), HasSubstr("select condition must be bool"));
    EXPECT_THAT(expr_error("!x"), HasSubstr("'!' needs a bool operand"));
    EXPECT_THAT(expr_error("x4(1) + x8(1)"), HasSubstr("different types"));
    EXPECT_THAT(expr_error("x1(1)"), HasSubstr("N >= 2"));
    EXPECT_THAT(expr_error("ramp(0, 1, x)"), HasSubstr("literal lane count"));
    EXPECT_THAT(expr_error("int64(1, 2)"), HasSubstr("a cast takes exactly one value"));
}

TEST(IRParser, PrintedExpressionsParseBackEqual) {
    std::vector<Expr> es = {
        Add::make(Mul::make(var("x"), i32(-3)), Div::make(var("y"), i32(2))),
        Select::make(LT::make(var("x"), i32(0)), FloatImm::make(Float(32), 0.1),
                     FloatImm::make(Float(32), -2.5)),
        Let::make("t", IntImm::make(Int(64), 7), Add::make(var("t", Int(64)), var("t", Int(64)))),
        Cast::make(Handle("halide_buffer_t"), var("p", Handle())),
        Load::make(UInt(16, 8), "in", Ramp::make(var("x"), i32(1), 8)),
        Call::make(Float(64), "sqrt_f64", {FloatImm::make(Float(64), 2.0)}, Call::PureExtern),
        StringImm::make("quote \" backslash \\ newline \n tab \t byte \x01"),
        Shuffle::make_interleave({Ramp::make(i32(0), i32(2), 4), Ramp::make(i32(1), i32(2), 4)}),
        Shuffle::make_slice(Ramp::make(i32(0), i32(1), 8), 1, 2, 3),
        UIntImm::make(UInt(64), UINT64_MAX),
        FloatImm::make(Float(64), 1e300),
        FloatImm::make(Float(64), 1.0 / 3.0),
        IntImm::make(Int(64), INT64_MIN),
    };
    for (const Expr &e : es) {
        std::string text = to_string(e);
        Expr back;
        ASSERT_NO_THROW(back = parse_expr(text)) << text;
        EXPECT_TRUE(equal(e, back)) << text << "\nre-parsed as " << to_string(back);
    }
}

// ---------------------------------------------------------------------------------------------
// Statements and modules

TEST(IRParser, BareStatementsBecomeAModuleWithInferredArguments) {
    Module m = parse_module("produce f {\n"
                            "  for (f.s0.x, 0, n) {\n"
                            "    f[f.s0.x] = (float32)in[f.s0.x]*2.0f\n"
                            "  }\n"
                            "}\n",
                            "bare.stmt");
    EXPECT_EQ(m.name, "f");
    EXPECT_EQ(m.target.to_string(), "host");
    ASSERT_EQ(m.functions.size(), 1u);
    const LoweredFunc &f = m.functions[0];
    EXPECT_EQ(f.name, "f");
    ASSERT_EQ(f.args.size(), 1u) << "only `n` is free; buffers need an X.buffer reference";
    EXPECT_EQ(f.args[0].name, "n");
    EXPECT_EQ(f.args[0].type, Int(32));
    const ProducerConsumer *pc = f.body.as<ProducerConsumer>();
    ASSERT_NE(pc, nullptr);
    EXPECT_TRUE(pc->is_producer);
    const For *loop = pc->body.as<For>();
    ASSERT_NE(loop, nullptr);
    const Store *st = loop->body.as<Store>();
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(st->value.type(), Float(32));
}

TEST(IRParser, LetsAndAllocationsScopeOverTheRestOfTheirBlock) {
    Module m = parse_module("let a = (uint8)1\n"
                            "allocate t[uint8 * 4]\n"
                            "t[0] = a\n"
                            "free t\n");
    const LetStmt *let = m.functions[0].body.as<LetStmt>();
    ASSERT_NE(let, nullptr);
    const Allocate *alloc = let->body.as<Allocate>();
    ASSERT_NE(alloc, nullptr);
    EXPECT_EQ(alloc->type, UInt(8));
    EXPECT_EQ(flatten_block(alloc->body).size(), 2u);
    EXPECT_TRUE(m.functions[0].args.empty());
}

/** A bare statement whose buffers teach each other their element type backwards: `b0[0] =
 * b1[0]`, ..., `b{n-1}[0] = 1.5f`. Statements run in order, so each learning round settles only
 * the next buffer back: the worst case, n rounds and one more that learns nothing. */
std::string backward_chain(int n) {
    std::string text;
    for (int i = 0; i + 1 < n; i++) {
        text += "b" + std::to_string(i) + "[0] = b" + std::to_string(i + 1) + "[0]\n";
    }
    return text + "b" + std::to_string(n - 1) + "[0] = 1.5f\n";
}

TEST(IRParser, LearnsBufferTypesAlongAChainLongerThanAnyFixedRoundCount) {
    // Twenty buffers need twenty-one rounds; a cap of 8 used to stop early without a word and
    // report that b1's type could not be inferred.
    Module m = parse_module(backward_chain(20), "chain.stmt");
    std::vector<Stmt> stores = flatten_block(m.functions[0].body);
    ASSERT_EQ(stores.size(), 20u);
    for (const Stmt &s : stores) {
        const Store *st = s.as<Store>();
        ASSERT_NE(st, nullptr);
        EXPECT_EQ(st->value.type(), Float(32)) << st->name;
    }
}

/** Elaborates `text` allowing at most `rounds` learning rounds; the CompileError's message, or
 * "" if it elaborated. */
std::string error_with_rounds(const std::string &text, int rounds) {
    Lexer lex(text, "chain.stmt");
    PModule pm = parse_syntax_module(lex);
    ElaborateOptions opts;
    opts.max_learning_rounds = rounds;
    try {
        elaborate_module(pm, lex, opts);
    } catch (const CompileError &e) {
        return e.what();
    }
    return "";
}

TEST(IRParser, LearningThatDoesNotSettleInTheAllowedRoundsIsAnErrorAtWhatItLearnedLast) {
    // Round 1 learns b4 (line 5), round 2 b3 (line 4), round 3 b2 (line 3).
    EXPECT_EQ(error_with_rounds(backward_chain(5), 3),
              "chain.stmt:3:1: error: buffer element types did not settle in 3 learning rounds: "
              "round 3 still learned the type of 'b2' here");
    // Five buffers settle in five rounds; the sixth learns nothing and ends learning, so six
    // rounds (the derived bound: one per learnable name, plus one) are exactly enough.
    EXPECT_THAT(error_with_rounds(backward_chain(5), 5), HasSubstr("did not settle in 5"));
    EXPECT_EQ(error_with_rounds(backward_chain(5), 6), "");
}

TEST(IRParser, ReadsTypedModuleHeaders) {
    Module m =
        parse_module("module name=p, target=host-cuda-profile\n"
                     "internal func p (in: buffer<uint16, 2>, k: float32, out: buffer<?>) {\n"
                     "  out[0] = (float32)in[0]\n"
                     "}\n");
    EXPECT_EQ(m.name, "p");
    EXPECT_EQ(m.target.to_string(), "host-cuda-profile");
    ASSERT_EQ(m.functions.size(), 1u);
    EXPECT_EQ(m.functions[0].linkage, LinkageType::Internal);
    const std::vector<Argument> &args = m.functions[0].args;
    ASSERT_EQ(args.size(), 3u);
    EXPECT_TRUE(args[0].is_buffer());
    EXPECT_EQ(args[0].type, UInt(16));
    EXPECT_EQ(args[0].dimensions, 2);
    EXPECT_FALSE(args[1].is_buffer());
    EXPECT_EQ(args[1].type, Float(32));
    EXPECT_TRUE(args[2].is_buffer());
    EXPECT_FALSE(args[2].type.is_valid());
    EXPECT_EQ(args[2].dimensions, -1);
}

TEST(IRParser, ReadsAVectorHandleArgumentAndRejectsAVectorBufferElement) {
    // A free vector handle variable becomes an argument printed `(char *)x4`, which reads back.
    const std::string text = "module name=f, target=host\n"
                             "external func f (p: (char *)x4) {\n"
                             "(char *)x4`predicate`(p)\n"
                             "}\n";
    Module m = parse_module(text);
    ASSERT_EQ(m.functions.size(), 1u);
    ASSERT_EQ(m.functions[0].args.size(), 1u);
    EXPECT_EQ(m.functions[0].args[0].type, Handle("char").with_lanes(4));
    EXPECT_EQ(to_string(parse_module(to_string(m))), to_string(m));
    // A buffer's element is one lane: a vector one is an error at the type, not read as its
    // first lane.
    EXPECT_THAT(module_error("module name=f, target=host\n"
                             "external func f (b: buffer<int32x4, 1>) {\n"
                             "b[0]\n}\n"),
                HasSubstr("bad.stmt:2:28: error: a buffer's element type is a scalar, not "
                          "'int32x4'"));
    EXPECT_THAT(module_error("module name=f, target=host\n"
                             "external func f (b: buffer<(char *)x4, 1>) {\n"
                             "b[0]\n}\n"),
                HasSubstr("not '(char *)x4'"));
}

TEST(IRParser, ReportsLineAndColumnOfBadToken) {
    EXPECT_EQ(module_error("f(x)\n"
                           "  g(x y)\n"),
              "bad.stmt:2:7: error: expected ')' to close the argument list (found 'y')");
}

// A text with nothing to run is an error, not a pipeline that does nothing.
TEST(IRParser, EmptyTextHoldsNoPipeline) {
    const std::string msg =
        "error: no pipeline: the text is empty or holds only comments (expected a `module` header "
        "or a statement) (found end of input)";
    EXPECT_EQ(module_error(""), "bad.stmt:1:1: " + msg);
    EXPECT_EQ(module_error("// only a comment\n\n"), "bad.stmt:3:1: " + msg);
}

TEST(IRParser, ReportsTruncatedInputAtTheEnd) {
    EXPECT_EQ(module_error("module name=m, target=host\n"
                           "external func f (x: int32) {\n"
                           "  let y = x +"),
              "bad.stmt:3:14: error: expected an expression (found end of input)");
    EXPECT_EQ(module_error("produce f {\n"
                           " f(x)\n"),
              "bad.stmt:3:1: error: expected '}' (found end of input)");
}

TEST(IRParser, ReportsBinaryBytes) {
    EXPECT_EQ(module_error("f(x)\n  \x01\xff"), "bad.stmt:2:3: error: unexpected byte 0x01");
    EXPECT_EQ(module_error("f(\xff)"), "bad.stmt:1:3: error: unexpected byte 0xff");
    EXPECT_EQ(module_error(std::string("f(x)\0", 5)), "bad.stmt:1:5: error: unexpected byte 0x00");
}

TEST(IRParser, ReportsAnUnterminatedString) {
    EXPECT_EQ(module_error("f(x)\n  g(\"abc)\n"),
              "bad.stmt:2:5: error: unterminated string literal");
    EXPECT_THAT(module_error("g(\"a\\qb\")"), HasSubstr("unknown escape '\\q'"));
}

TEST(IRParser, ReportsAMissingCloseParenthesis) {
    EXPECT_EQ(module_error("f(x)\n(x + 1\ng(x)\n"),
              "bad.stmt:3:1: error: expected ')' to close the parenthesis (found 'g')");
    EXPECT_EQ(module_error("for (x, 0, 4 {\n}\n"),
              "bad.stmt:1:14: error: expected ')' to close the loop header (found '{')");
}

TEST(IRParser, ReportsAnUnknownTargetFeatureAtItsColumn) {
    EXPECT_EQ(module_error("module name=m, target=host-bogus\n"),
              "bad.stmt:1:28: error: unknown target feature 'bogus' in target 'host-bogus'");
    EXPECT_THAT(module_error("module name=m, target=x86-64-linux-avx-bogus-sse41\n"),
                StartsWith("bad.stmt:1:40: error: unknown target feature 'bogus'"));
}

TEST(IRParser, ReportsIntegerLiteralOverflow) {
    EXPECT_EQ(module_error("f(x)\n  g(99999999999999999999)"),
              "bad.stmt:2:5: error: integer literal '99999999999999999999' does not fit in 64 "
              "bits");
    EXPECT_THAT(module_error("g(2147483648)"),
                StartsWith("bad.stmt:1:3: error: 2147483648 does not fit in int32"));
    EXPECT_THAT(module_error("g((int16)40000)"),
                StartsWith("bad.stmt:1:3: error: 40000 does not fit in int16"));
}

TEST(IRParser, ReportsStructuralMistakes) {
    EXPECT_EQ(module_error("module name=m, target=host\n"
                           "external func f () {\n"
                           "}\n"
                           "external func f () {\n"
                           "}\n"),
              "bad.stmt:4:1: error: 'f' is defined twice");
    EXPECT_EQ(module_error("}"), "bad.stmt:1:1: error: unexpected '}' (found '}')");
    EXPECT_EQ(module_error("let x = 1\n"),
              "bad.stmt:1:1: error: 'let x' is not followed by the statements it scopes");
    EXPECT_THAT(module_error("x + 1 = 3"), HasSubstr("left side of '=' must be a buffer element"));
    EXPECT_THAT(module_error("module name=m, target=host\nfunc f () {\n}\n"),
                StartsWith("bad.stmt:2:1: error: expected 'buffer', 'kernel' or a linkage"));
    EXPECT_THAT(module_error("module name=m, target=host\nexternal func f (a, a) {\n}\n"),
                StartsWith("bad.stmt:2:21: error: argument 'a' appears twice"));
    EXPECT_THAT(module_error("gpu_block<Nowhere> (x, 0, 4) {\n}\n"),
                StartsWith("bad.stmt:1:11: error: unknown device API 'Nowhere'"));
    EXPECT_THAT(module_error("allocate t[uint8 * 4] in Nowhere\nfree t\n"),
                StartsWith("bad.stmt:1:26: error: unknown memory type 'Nowhere'"));
    EXPECT_THAT(module_error("module name=m, target=host\nbuffer b = {abc"),
                HasSubstr("not terminated by a NUL byte"));
}

TEST(IRParser, ReportsAnUnreadableFile) {
    EXPECT_THAT([] { parse_module_file("/nonexistent/dir/missing.stmt"); },
                ::testing::ThrowsMessage<CompileError>(
                    HasSubstr("/nonexistent/dir/missing.stmt: error: cannot open file")));
}

TEST(IRParser, UsesTheGivenFileNameInDiagnostics) {
    EXPECT_THAT(module_error("}", "some/dir/input.stmt"), StartsWith("some/dir/input.stmt:1:1:"));
    EXPECT_THAT(expr_error("1 +"), StartsWith("<expr>:1:4: error:"));
}

// ---------------------------------------------------------------------------------------------
// Robustness

TEST(IRParser, RandomBytesParseOrGiveACompileError) {
    std::mt19937 rng(20240601);
    int parsed = 0;
    for (int i = 0; i < 400; i++) {
        std::string s;
        int len = int(rng() % 120);
        for (int j = 0; j < len; j++) {
            s += char(rng() % 256);
        }
        parsed += parses_or_compile_error(s);
    }
    // Random bytes almost never form a program; the empty input is one.
    EXPECT_LT(parsed, 40);
}

TEST(IRParser, RandomTokenSoupParsesOrGivesACompileError) {
    const char *const tokens[] = {
        "(",       ")",       "[",       "]",         "{",       "}",          "let",
        "x",       "=",       "1",       "in",        "+",       "-",          "*",
        "for",     "produce", "consume", "allocate",  "free",    "if",         "else",
        "assert",  ",",       "x8",      "ramp",      "(uint8)", "(void *)",   "1.5f",
        "\"s\"",   "\n",      "@",       "extern",    "module",  "func",       "external",
        ";",       "<",       ">",       "==",        "!",       "select",     "min",
        "buffer",  "kernel",  "int32",   "predicate", "aligned", "0",          "2",
        "name",    "target",  "host",    "gpu_block", "<CUDA>",  "custom_new", "reinterpret",
        "shuffle", "inf",     "nan",     "(float32)", "::f",     "?",          ":"};
    const int n = int(sizeof(tokens) / sizeof(tokens[0]));
    std::mt19937 rng(7);
    int parsed = 0;
    for (int i = 0; i < 3000; i++) {
        std::string s;
        int len = int(rng() % 30);
        for (int j = 0; j < len; j++) {
            s += tokens[rng() % n];
            s += ' ';
        }
        parsed += parses_or_compile_error(s);
    }
    EXPECT_GT(parsed, 0) << "some soups are programs";
}

TEST(IRParser, TruncatedCorpusFilesParseOrGiveACompileError) {
    for (const char *file :
         {"blur3x3.profile.stmt", "gpu_gpu_cpu.cuda.stmt", "preoffload/mandelbrot.profile.stmt"}) {
        std::string text = read_file(corpus(file));
        ASSERT_FALSE(text.empty()) << file;
        int parsed = 0, tried = 0;
        for (size_t n = 0; n < text.size(); n += 1 + text.size() / 300) {
            parsed += parses_or_compile_error(text.substr(0, n));
            tried++;
        }
        EXPECT_GT(tried, 250) << file;
        EXPECT_LT(parsed, tried) << file << ": most truncations must be rejected";
    }
}

TEST(IRParser, MutatedCorpusFilesParseOrGiveACompileError) {
    std::string text = read_file(corpus("histogram_equalize.profile.stmt"));
    ASSERT_FALSE(text.empty());
    std::mt19937 rng(99);
    for (int i = 0; i < 300; i++) {
        std::string s = text;
        for (int k = 0; k < 3; k++) {
            size_t p = rng() % s.size();
            switch (rng() % 3) {
            case 0:
                s[p] = char(rng() % 256);
                break;
            case 1:
                s.erase(p, 1 + rng() % 8);
                break;
            default:
                s.insert(p, 1, "(){}[],=+-*\"@<>"[rng() % 15]);
            }
        }
        parses_or_compile_error(s);
    }
}

TEST(IRParser, DeepParenthesesGiveACompileErrorNotAStackOverflow) {
    std::string deep = std::string(100000, '(') + "1" + std::string(100000, ')');
    EXPECT_THAT(expr_error(deep), HasSubstr("error: nesting deeper than"));
    EXPECT_THAT(module_error("f(" + deep + ")"), HasSubstr("error: nesting deeper than"));
    EXPECT_THAT(expr_error(std::string(100000, '(')), HasSubstr("nesting deeper than"));
    EXPECT_THAT(expr_error(std::string(100000, '-') + "x"), HasSubstr("nesting deeper than"));
    EXPECT_THAT(expr_error(std::string(100000, '!') + "x"), HasSubstr("nesting deeper than"));
    EXPECT_THAT(expr_error("let a = " + std::string(100000, '(')), HasSubstr("nesting deeper"));
    // Moderate nesting is fine.
    EXPECT_TRUE(equal(parse_expr(std::string(50, '(') + "1" + std::string(50, ')')), i32(1)));
}

TEST(IRParser, DeepStatementNestingGivesACompileErrorNotAStackOverflow) {
    std::string loops;
    for (int i = 0; i < 100000; i++) {
        loops += "for (x, 0, 1) {\n";
    }
    EXPECT_THAT(module_error(loops), HasSubstr("error: nesting deeper than"));
    std::string producers;
    for (int i = 0; i < 100000; i++) {
        producers += "produce f {";
    }
    EXPECT_THAT(module_error(producers), HasSubstr("error: nesting deeper than"));
    std::string ifs = "if (x < 1) {\n} ";
    for (int i = 0; i < 100000; i++) {
        ifs += "else if (x < 1) {\n} ";
    }
    EXPECT_THAT(module_error(ifs), HasSubstr("error: nesting deeper than"));
}

// A long flat sequence of `let` statements parses into a LetStmt chain as deep as the sequence
// is long; the recursive walks that run during parsing (argument inference) and the release of
// the tree, printing and comparing must not overflow the stack. (At d62e8f2, 100000 lets died with
// SIGSEGV.) A death test keeps a crash in a child process, so it fails this test instead of killing
// the run.
TEST(IRParser, ALongSequenceOfLetsDoesNotOverflowTheStack) {
    std::string text;
    for (int i = 0; i < 100000; i++) {
        text += "let a" + std::to_string(i) + " = " + std::to_string(i) + "\n";
    }
    text += "f(a0)\n";
    EXPECT_EXIT(
        {
            // Exit 0: parsed, printed and read back equal; 1: not equal; 2: rejected.
            try {
                Module m = parse_module(text, "lets.stmt");
                Module back = parse_module(to_string(m), "printed.stmt");
                std::exit(equal(m, back) ? 0 : 1);
            } catch (const CompileError &) {
                std::exit(2);
            }
        },
        ::testing::ExitedWithCode(0), "");
}

// The strict grammar (docs/ir-syntax.md, "Reserved words"). Every reserved word, in every shape
// a name can take at the start of a statement (alone, in an expression, a call, a store, a field,
// with its statement's operand on the next line), is rejected with a located error naming it:
// never a variable, call or buffer of that name. Quoted, each is a name in all those shapes and
// prints back quoted, to an equal module.
TEST(IRParser, AReservedWordIsNeverANameUnlessQuoted) {
    const char *words[] = {"let",        "assert",     "produce",  "consume",    "for",
                           "parallel",   "vectorized", "unrolled", "extern",     "gpu_block",
                           "gpu_thread", "gpu_lane",   "allocate", "free",       "if",
                           "else",       "predicate",  "atomic",   "custom_new", "custom_delete",
                           "acquire",    "fork",       "realize"};
    const char *shapes[] = {"W", "W + 1", "W[0] = 1", "W(1)", "W = 1", "W\n  out", "W {\n  }"};
    auto module_with = [](const std::string &arg_type, const std::string &stmt) {
        return "module name=m, target=host\nexternal func f (out: buffer<int32, 1>, " + arg_type +
               ") {\n  " + stmt + "\n}\n";
    };
    auto replace_w = [](std::string shape, const std::string &w) {
        shape.replace(shape.find('W'), 1, w);
        return shape;
    };
    for (const char *w : words) {
        SCOPED_TRACE(w);
        EXPECT_TRUE(is_reserved_word(w));
        for (const std::string shape : shapes) {
            if (shape == "W {\n  }" && std::string(w) == "atomic") {
                continue;  // `atomic {` is the atomic statement
            }
            SCOPED_TRACE(shape);
            const std::string text = module_with("x: int32", replace_w(shape, w));
            try {
                parse_module(text, "r.stmt");
                ADD_FAILURE() << "accepted:\n" << text;
            } catch (const CompileError &e) {
                EXPECT_THAT(e.what(), StartsWith("r.stmt:"));
                // `for(1)`, `if(1)`, `assert(1)` start their statement and fail inside it (no
                // loop name, no block, no message); every other shape fails at the word.
                if (shape != "W(1)") {
                    EXPECT_THAT(e.what(), StartsWith("r.stmt:3:3: error: "));
                    EXPECT_THAT(e.what(), HasSubstr(std::string("'") + w));
                }
            }
        }
        const std::string q = std::string("`") + w + "`";
        for (const std::string &stmt :
             {q + " + 1", q + "[0] = " + q + "[1]", "out[0] = " + q + "[2]",
              "let y = " + q + "[0] + 1\n  " + q + "[1] = y"}) {
            SCOPED_TRACE(stmt);
            const Module m = parse_module(module_with(q + ": buffer<int32, 1>", stmt));
            const std::string printed = to_string(m);
            EXPECT_THAT(printed, HasSubstr(q));
            EXPECT_TRUE(equal(m, parse_module(printed)));
        }
        const Module v = parse_module(module_with(q + ": int32", q + "\n  out[0] = " + q));
        EXPECT_THAT(to_string(v), HasSubstr("\n" + q + "\nout[0] = " + q + "\n"));
        EXPECT_TRUE(equal(v, parse_module(to_string(v))));
    }
    EXPECT_FALSE(is_reserved_word("prefetch"));  // `prefetch(...)` is Halide's lowered call
    EXPECT_FALSE(is_reserved_word("in"));
}

// A quoted word is a name, never the keyword it spells; and `in`/`if` after an allocation or a
// let's value belong to it only on its line.
TEST(IRParser, QuotedWordsAreNamesAndContinuationKeywordsKeepToTheirLine) {
    EXPECT_THROW(parse_module("module name=m, target=host\n"
                              "external func f (c: bool, out: buffer<int32, 1>) {\n"
                              "  if (c) {\n    out[0] = 1\n  } `else` {\n    out[0] = 2\n  }\n}\n"),
                 CompileError);
    const Module m = parse_module("module name=m, target=host\n"
                                  "external func f (c: bool, out: buffer<int32, 1>) {\n"
                                  "  allocate t[int32 * 2]\n  if (c) {\n    t[0] = 1\n  }\n"
                                  "  out[0] = t[0]\n  free t\n}\n");
    EXPECT_THAT(to_string(m), HasSubstr("allocate t[int32 * 2]\nif (c) {\n"));
    // `in` on the line after a let's value is the next statement, a variable `in`.
    EXPECT_THAT(to_string(parse_module("let x = 1\nin + x\nout[0] = x")),
                HasSubstr("let x = 1\nin + x\nout[0] = x\n"));
    // Built-in forms: `select(...)` is a Select, `` `select`(...) `` a call that prints quoted.
    const Module c = parse_module("module name=m, target=host\n"
                                  "external func f (out: buffer<int32, 1>) {\n"
                                  "  out[0] = `select`(1, 2, 3) + `int64`(4) + `x4`(5)\n}\n");
    const std::string printed = to_string(c);
    EXPECT_THAT(printed, HasSubstr("(`select`(1, 2, 3) + `int64`(4)) + `x4`(5)"));
    EXPECT_TRUE(equal(c, parse_module(printed)));
}

// The module says whose printer wrote its text: Halide 21 where the text uses a spelling only
// Halide 21 prints, else Halide 14 (whose text Tally's extends); the header's `dialect=` wins,
// and the dialect survives printing. Modules of different dialects are not equal.
TEST(IRParser, ModuleDialectComesFromTheHeaderOrTheText) {
    const std::string body = "external func f (out: buffer<uint32, 1>, x: float32) {\n"
                             "  out[0] = reinterpret<uint32>(x)\n}\n";
    const Module h21 = parse_module("module name=m, target=host\n" + body);
    EXPECT_EQ(h21.dialect, Dialect::Halide21);
    EXPECT_THAT(to_string(h21), HasSubstr("target=host, dialect=halide21\n"));
    EXPECT_EQ(parse_module(to_string(h21)).dialect, Dialect::Halide21);
    EXPECT_TRUE(equal(h21, parse_module(to_string(h21))));

    const Module h14 = parse_module("module name=m, target=host\n"
                                    "external func f (out: buffer<uint32, 1>, x: float32) {\n"
                                    "  out[0] = (uint32)reinterpret(x)\n}\n");
    EXPECT_EQ(h14.dialect, Dialect::Halide14);
    std::string why;
    EXPECT_FALSE(equal(h14, h21, &why));
    EXPECT_THAT(why, HasSubstr("dialects differ: halide14 vs halide21"));

    // A header naming Halide 14 keeps it, whatever the text shows.
    EXPECT_EQ(parse_module("module name=m, target=host, dialect=halide14\n" + body).dialect,
              Dialect::Halide14);
    // A bare statement (Halide's conceptual form) has no header: the text decides.
    EXPECT_EQ(parse_module("let p = reinterpret<(void *)>((uint64)0)\nout[0] = 1").dialect,
              Dialect::Halide21);
    EXPECT_EQ(parse_module("let p = (void *)reinterpret((uint64)0)\nout[0] = 1").dialect,
              Dialect::Halide14);
}

// `(halide_task_t)::f`: a handle of a pointer typedef keeps its spelling (no `*`), is not equal
// to the pointer type of the same name, and converts like any handle.
TEST(IRParser, PointerTypedefHandlesKeepTheirSpelling) {
    const Type t = Type::pointer_typedef("halide_task_t");
    EXPECT_TRUE(t.is_handle());
    EXPECT_EQ(t.to_string(), "halide_task_t");
    EXPECT_NE(t, Handle("halide_task_t"));
    EXPECT_EQ(Handle("halide_task_t").to_string(), "halide_task_t *");
    EXPECT_TRUE(types_compatible(t, Handle()));
    EXPECT_EQ(t.with_lanes(2).element_of(), t);
    // Only before a `::` function name: elsewhere `(name)` is a parenthesized variable.
    const Module m = parse_module("module name=m, target=host\n"
                                  "external func f (out: buffer<int32, 1>, n: int32) {\n"
                                  "  let p = (halide_task_t)::g\n  out[0] = (n) + 1\n}\n");
    EXPECT_THAT(to_string(m), HasSubstr("let p = (halide_task_t)::g\n"));
    EXPECT_TRUE(equal(m, parse_module(to_string(m))));
}

}  // namespace
}  // namespace tally
