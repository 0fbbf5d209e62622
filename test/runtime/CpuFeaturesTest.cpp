// tally_cpu_has_features, the check a multi-target library's wrapper makes: each extension it
// knows agrees with the compiler's own view of this CPU (GCC's __builtin_cpu_supports, which
// also asks the OS for the AVX state), a list holds only when every name in it does, and a name
// it cannot check never holds.

#include <gtest/gtest.h>

#include "tally_runtime.h"

namespace {

TEST(CpuFeatures, EachExtensionAgreesWithTheCompilersView) {
    __builtin_cpu_init();
    EXPECT_EQ(tally_cpu_has_features("sse4.1"), __builtin_cpu_supports("sse4.1") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("sse4.2"), __builtin_cpu_supports("sse4.2") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("avx"), __builtin_cpu_supports("avx") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("avx2"), __builtin_cpu_supports("avx2") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("fma"), __builtin_cpu_supports("fma") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("fma4"), __builtin_cpu_supports("fma4") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("avx512f"), __builtin_cpu_supports("avx512f") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("avx512bw"), __builtin_cpu_supports("avx512bw") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("avx512vl"), __builtin_cpu_supports("avx512vl") ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("avx512vbmi"), __builtin_cpu_supports("avx512vbmi") ? 1 : 0);
}

TEST(CpuFeatures, AListHoldsWhenEveryNameDoes) {
    __builtin_cpu_init();
    const bool sse41 = __builtin_cpu_supports("sse4.1"), fma4 = __builtin_cpu_supports("fma4");
    EXPECT_EQ(tally_cpu_has_features(""), 1);  // nothing asked: every CPU
    EXPECT_EQ(tally_cpu_has_features("sse4.1,fma4"), sse41 && fma4 ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("fma4,sse4.1"), sse41 && fma4 ? 1 : 0);
    EXPECT_EQ(tally_cpu_has_features("sse4.1,,sse4.1"), sse41 ? 1 : 0);
}

TEST(CpuFeatures, ANameItCannotCheckNeverHolds) {
    EXPECT_EQ(tally_cpu_has_features("avx2x"), 0);
    EXPECT_EQ(tally_cpu_has_features("sse4.1,no_such_extension"), 0);
    EXPECT_EQ(tally_cpu_has_features("sse4"), 0);  // a prefix of a known name is not that name
    EXPECT_EQ(tally_cpu_has_features(nullptr), 0);
}

}  // namespace
