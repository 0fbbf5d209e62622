// Itanium C++ mangling of extern calls' functions. The expected symbols are what g++ 12 emits for
// these declarations (checked with nm):
//   struct halide_buffer_t;
//   namespace my_ns { int scale_stage(halide_buffer_t *, int, halide_buffer_t *); }
//   int stage(halide_buffer_t *, halide_buffer_t *, float, double, bool);
//   namespace a { namespace b { int f(void *, void *, const char *, const char *, signed char,
//       unsigned char, short, unsigned short, unsigned, long, unsigned long); } }
//   namespace a { struct Foo; int g(a::Foo *, a::Foo *, halide_buffer_t *); }
//   int none();
//   namespace n { struct S; int h(void **, const char **, n::S **, n::S *); }
// and, for entry_symbols, what Halide 14's objects define (nm) for a pipeline with arguments
// (__user_context, in: buffer, k: int32, s: float32, h: void *, u: uint16, b: bool, out: buffer)
// compiled as `a::bb::pipe` with c_plus_plus_name_mangling and user_context, as `plain` with
// c_plus_plus_name_mangling alone (no user context), and as `ns::cpipe` without either.

#include "ir/CPlusPlusMangle.h"

#include <gmock/gmock.h>

#include "tally/Error.h"
#include "tally/Module.h"
#include "tally/Target.h"

namespace tally {
namespace {

using ::testing::HasSubstr;

TEST(CPlusPlusMangle, MatchesTheItaniumAbiAsGccMangles) {
    const Type buf = Handle("halide_buffer_t");
    EXPECT_EQ(itanium_mangled_name("my_ns::scale_stage", {buf, Int(32), buf}),
              "_ZN5my_ns11scale_stageEP15halide_buffer_tiS1_");
    EXPECT_EQ(itanium_mangled_name("stage", {buf, buf, Float(32), Float(64), Bool()}),
              "_Z5stageP15halide_buffer_tS0_fdb");
    EXPECT_EQ(itanium_mangled_name("a::b::f", {Handle("void"), Handle("void"), Handle("const char"),
                                               Handle("const char"), Int(8), UInt(8), Int(16),
                                               UInt(16), UInt(32), Int(64), UInt(64)}),
              "_ZN1a1b1fEPvS1_PKcS3_ahstjlm");
    EXPECT_EQ(itanium_mangled_name("a::g", {Handle("a::Foo"), Handle("a::Foo"), buf}),
              "_ZN1a1gEPNS_3FooES1_P15halide_buffer_t");
    EXPECT_EQ(itanium_mangled_name("none", {}), "_Z4nonev");
    EXPECT_EQ(itanium_mangled_name("n::h", {Handle("void *"), Handle("const char *"),
                                            Handle("n::S *"), Handle("n::S")}),
              "_ZN1n1hEPPvPPKcPPNS_1SES6_");
    // Halide 21's spellings of the same types mangle the same: `struct` dropped, `T const` as
    // `const T`.
    EXPECT_EQ(itanium_mangled_name("a::b::f", {Handle("void"), Handle("void"), Handle("char const"),
                                               Handle("const char"), Int(8), UInt(8), Int(16),
                                               UInt(16), UInt(32), Int(64), UInt(64)}),
              "_ZN1a1b1fEPvS1_PKcS3_ahstjlm");
    EXPECT_EQ(itanium_mangled_name("my_ns::scale_stage",
                                   {Handle("struct halide_buffer_t"), Int(32), buf}),
              "_ZN5my_ns11scale_stageEP15halide_buffer_tiS1_");
}

TEST(CPlusPlusMangle, EntrySymbolsAreHalide14s) {
    auto pipeline = [](const std::string &name, bool user_context) {
        LoweredFunc f;
        f.name = name;
        f.linkage = LinkageType::ExternalPlusMetadata;
        auto arg = [&](const char *n, Argument::Kind k, Type t) {
            Argument a;
            a.name = n;
            a.kind = k;
            a.type = t;
            f.args.push_back(a);
        };
        if (user_context) {
            arg("__user_context", Argument::Scalar, Handle("void"));
        }
        arg("in", Argument::Buffer, UInt(8));
        arg("k", Argument::Scalar, Int(32));
        arg("s", Argument::Scalar, Float(32));
        arg("h", Argument::Scalar, Handle("void"));
        arg("u", Argument::Scalar, UInt(16));
        arg("b", Argument::Scalar, Bool());
        arg("out", Argument::Buffer, Float(32));
        return f;
    };
    Module m;
    m.target = Target::parse("x86-64-linux-avx-avx2-sse41-c_plus_plus_name_mangling-user_context");
    EntrySymbols s = entry_symbols(m, pipeline("a::bb::pipe", true));
    EXPECT_EQ(s.function, "_ZN1a2bb4pipeEPKvP15halide_buffer_tifPvtbS4_");
    EXPECT_EQ(s.argv, "_ZN1a2bb9pipe_argvEPPv");
    EXPECT_EQ(s.metadata, "_ZN1a2bb13pipe_metadataEv");
    EXPECT_EQ(s.name, "pipe");
    EXPECT_EQ(s.namespaces, (std::vector<std::string>{"a", "bb"}));
    EXPECT_TRUE(s.mangled);
    m.target = Target::parse("x86-64-linux-avx-avx2-sse41-c_plus_plus_name_mangling");
    s = entry_symbols(m, pipeline("plain", false));
    EXPECT_EQ(s.function, "_Z5plainP15halide_buffer_tifPvtbS0_");
    EXPECT_EQ(s.argv, "_Z10plain_argvPPv");
    EXPECT_EQ(s.metadata, "_Z14plain_metadatav");
    m.target = Target::parse("x86-64-linux-avx-avx2-sse41");
    s = entry_symbols(m, pipeline("ns::cpipe", true));
    EXPECT_EQ(s.function, "cpipe");
    EXPECT_EQ(s.argv, "cpipe_argv");
    EXPECT_EQ(s.metadata, "cpipe_metadata");
    EXPECT_EQ(s.name, "cpipe");
    EXPECT_FALSE(s.mangled);
    // A closure (internal) keeps its name, mangling or not.
    m.target = Target::parse("x86-64-linux-avx-avx2-sse41-c_plus_plus_name_mangling");
    LoweredFunc closure = pipeline("plain.par_for.out.s0.y", false);
    closure.linkage = LinkageType::Internal;
    EXPECT_EQ(entry_symbols(m, closure).function, "plain.par_for.out.s0.y");
}

TEST(CPlusPlusMangle, RejectsWhatCPlusPlusCannotSpell) {
    auto error = [](const std::string &name, const std::vector<Type> &args) {
        try {
            itanium_mangled_name(name, args);
        } catch (const CompileError &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_THAT(error("ns::", {}), HasSubstr("'ns::' is not a C++ function name"));
    EXPECT_THAT(error("f", {Int(32).with_lanes(4)}), HasSubstr("the vector type int32x4"));
    EXPECT_THAT(error("f", {Handle("bad name")}), HasSubstr("'bad name' is not a C++ type name"));
}

}  // namespace
}  // namespace tally
