// Itanium C++ mangling of extern calls' functions. The expected symbols are what g++ 12 emits for
// these declarations (checked with nm):
//   struct halide_buffer_t;
//   namespace my_ns { int scale_stage(halide_buffer_t *, int, halide_buffer_t *); }
//   int stage(halide_buffer_t *, halide_buffer_t *, float, double, bool);
//   namespace a { namespace b { int f(void *, void *, const char *, const char *, signed char,
//       unsigned char, short, unsigned short, unsigned, long, unsigned long); } }
//   namespace a { struct Foo; int g(a::Foo *, a::Foo *, halide_buffer_t *); }
//   int none();

#include "codegen/CPlusPlusMangle.h"

#include <gmock/gmock.h>

#include "tally/Error.h"

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
