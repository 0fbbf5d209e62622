// multitarget_wrapper (tally/Compiler.h): the dispatcher of a multi-target library checks each
// variant's x86 ISA extensions, as codegen/HostMachine lists them for its target, in the order
// given, calls the baseline unchecked, and returns what the variant returned; what cannot make a
// sound dispatcher is a CompileError naming it. (test/halide's brighten_multitarget runs one.)

#include <gtest/gtest.h>

#include <string>

#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/IRPrinter.h"

namespace tally {
namespace {

std::vector<Argument> brighten_args() {
    return {{"input", Argument::Buffer, UInt(8), 2},
            {"offset", Argument::Scalar, Int(32), -1},
            {"output", Argument::Buffer, UInt(8), 2}};
}

std::string error_of(const std::vector<MultitargetVariant> &variants) {
    try {
        multitarget_wrapper("f", brighten_args(), variants);
    } catch (const CompileError &e) {
        return e.what();
    }
    return "";
}

TEST(Multitarget, WrapperChecksEachVariantInOrderAndCallsTheBaseline) {
    Module w = multitarget_wrapper("f", brighten_args(),
                                   {{"f_avx2", Target::parse("x86-64-linux-avx2-profile")},
                                    {"f_sse41", Target::parse("x86-64-linux-sse41-profile")},
                                    {"f_base", Target::parse("x86-64-linux-profile")}});
    ASSERT_EQ(w.functions.size(), 1u);
    const LoweredFunc &f = w.functions[0];
    EXPECT_EQ(f.name, "f");
    EXPECT_EQ(f.linkage, LinkageType::ExternalPlusMetadata);
    EXPECT_EQ(f.args, brighten_args());
    // The baseline's target, without profiling: each variant profiles itself.
    EXPECT_EQ(w.target.to_string(), "x86-64-linux");
    const std::string text = to_string(f.body);
    size_t avx2 = text.find("tally_cpu_has_features(\"sse4.1,avx,avx2,fma,f16c\")");
    size_t call_avx2 = text.find("f_avx2(");
    size_t sse41 = text.find("tally_cpu_has_features(\"sse4.1\")");
    size_t call_sse41 = text.find("f_sse41(");
    size_t call_base = text.find("f_base(");
    ASSERT_NE(avx2, std::string::npos) << text;
    ASSERT_NE(sse41, std::string::npos) << text;
    ASSERT_NE(call_base, std::string::npos) << text;
    EXPECT_LT(avx2, call_avx2) << text;
    EXPECT_LT(call_avx2, sse41) << text;
    EXPECT_LT(sse41, call_sse41) << text;
    EXPECT_LT(call_sse41, call_base) << text;
    // Three checks at most: the baseline runs unchecked.
    EXPECT_EQ(text.find("tally_cpu_has_features", sse41 + 1), std::string::npos) << text;
    // The buffers go by their descriptors, the scalar by value; the result is returned.
    EXPECT_NE(
        text.find(
            "f_base((halide_buffer_t *)input.buffer, offset, (halide_buffer_t *)output.buffer)"),
        std::string::npos)
        << text;
    EXPECT_NE(text.find("assert(f.result == 0, f.result)"), std::string::npos) << text;
}

TEST(Multitarget, AVariantEveryCpuRunsEndsTheChoice) {
    Module w = multitarget_wrapper("f", brighten_args(),
                                   {{"f_avx", Target::parse("x86-64-linux-avx")},
                                    {"f_plain", Target::parse("x86-64-linux")},
                                    {"f_sse41", Target::parse("x86-64-linux-sse41")}});
    const std::string text = to_string(w.functions[0].body);
    EXPECT_NE(text.find("f_plain("), std::string::npos) << text;
    EXPECT_EQ(text.find("f_sse41("), std::string::npos) << text;
}

TEST(Multitarget, WhatCannotBeDispatchedIsNamed) {
    EXPECT_NE(error_of({}).find("no variants"), std::string::npos);
    EXPECT_NE(
        error_of({{"f_host", Target::parse("host")}, {"f_base", Target::parse("x86-64-linux")}})
            .find("`host`"),
        std::string::npos);
    EXPECT_NE(error_of({{"f_osx", Target::parse("x86-64-osx-avx")},
                        {"f_base", Target::parse("x86-64-linux")}})
                  .find("differ in arch-bits-os"),
              std::string::npos);
    EXPECT_NE(error_of({{"f_x", Target::parse("x86-64-linux-avx")},
                        {"f_x", Target::parse("x86-64-linux")}})
                  .find("named twice"),
              std::string::npos);
    EXPECT_NE(
        error_of({{"f", Target::parse("x86-64-linux")}}).find("named twice, or as the wrapper"),
        std::string::npos);
    EXPECT_NE(error_of({{"f_m", Target::parse("x86-64-linux-c_plus_plus_name_mangling")}})
                  .find("c_plus_plus_name_mangling"),
              std::string::npos);
}

}  // namespace
}  // namespace tally
