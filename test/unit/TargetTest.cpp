// Unit tests of target strings: parsing and canonical printing (Halide's sorted feature order),
// diagnostics naming the bad part, and the queries passes rely on (GPU API, profiling, support).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tally/Error.h"
#include "tally/Target.h"

namespace tally {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

/** The `target=` of every corpus module file's first line. */
std::vector<std::string> corpus_targets() {
    std::vector<std::string> out;
    for (const fs::directory_entry &e : fs::directory_iterator(TALLY_CORPUS_DIR)) {
        if (e.path().extension() != ".stmt") {
            continue;
        }
        std::ifstream in(e.path());
        std::string line;
        std::getline(in, line);
        size_t at = line.find("target=");
        if (at != std::string::npos) {
            out.push_back(line.substr(at + 7));
        }
    }
    return out;
}

TEST(Target, EveryCorpusHeaderTargetRoundTrips) {
    std::vector<std::string> targets = corpus_targets();
    ASSERT_EQ(targets.size(), 19u);
    for (const std::string &s : targets) {
        Target t = Target::parse(s);
        EXPECT_EQ(t.to_string(), s);
        EXPECT_EQ(Target::parse(t.to_string()), t) << s;
        EXPECT_FALSE(t.host) << s;
        EXPECT_EQ(t.arch, Target::X86) << s;
        EXPECT_EQ(t.bits, 64) << s;
        EXPECT_EQ(t.os, Target::Linux) << s;
        EXPECT_TRUE(t.has_feature("avx2")) << s;
    }
}

TEST(Target, HostTargetsRoundTripInCanonicalOrder) {
    struct Case {
        const char *in, *canonical;
    };
    for (const Case &c : {Case{"host", "host"}, Case{"host-profile", "host-profile"},
                          Case{"host-vulkan-profile", "host-profile-vulkan"},
                          Case{"host-cuda-debug-profile", "host-cuda-debug-profile"},
                          Case{"host-profile_by_timer", "host-profile_by_timer"}}) {
        Target t = Target::parse(c.in);
        EXPECT_TRUE(t.host) << c.in;
        EXPECT_EQ(t.to_string(), c.canonical) << c.in;
        EXPECT_EQ(Target::parse(t.to_string()), t) << c.in;
    }
}

TEST(Target, FeaturesAreSortedAndUnique) {
    Target t = Target::parse("x86-64-linux-sse41-avx2-avx-avx2");
    EXPECT_EQ(t.features(), (std::vector<std::string>{"avx", "avx2", "sse41"}));
    EXPECT_EQ(t.to_string(), "x86-64-linux-avx-avx2-sse41");
    const std::vector<std::string> names = t.features();
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));

    Target h = Target::parse("host-vulkan-profile-debug");
    EXPECT_EQ(h.features(), (std::vector<std::string>{"debug", "profile", "vulkan"}));
}

// Every feature name Halide 14 knows (its Target.cpp's feature_name_map, in its order) is read:
// a target Halide prints never stops the parser, whatever the feature means to Tally.
TEST(Target, EveryHalide14FeatureNameParses) {
    const char *const halide14[] = {"jit",
                                    "debug",
                                    "no_asserts",
                                    "no_bounds_query",
                                    "sse41",
                                    "avx",
                                    "avx2",
                                    "fma",
                                    "fma4",
                                    "f16c",
                                    "armv7s",
                                    "no_neon",
                                    "vsx",
                                    "power_arch_2_07",
                                    "cuda",
                                    "cuda_capability_30",
                                    "cuda_capability_32",
                                    "cuda_capability_35",
                                    "cuda_capability_50",
                                    "cuda_capability_61",
                                    "cuda_capability_70",
                                    "cuda_capability_75",
                                    "cuda_capability_80",
                                    "cuda_capability_86",
                                    "opencl",
                                    "cl_doubles",
                                    "cl_half",
                                    "cl_atomics64",
                                    "openglcompute",
                                    "egl",
                                    "user_context",
                                    "matlab",
                                    "profile",
                                    "no_runtime",
                                    "metal",
                                    "c_plus_plus_name_mangling",
                                    "large_buffers",
                                    "hvx",
                                    "hvx_128",
                                    "hvx_v62",
                                    "hvx_v65",
                                    "hvx_v66",
                                    "hvx_shared_object",
                                    "fuzz_float_stores",
                                    "soft_float_abi",
                                    "msan",
                                    "avx512",
                                    "avx512_knl",
                                    "avx512_skylake",
                                    "avx512_cannonlake",
                                    "avx512_sapphirerapids",
                                    "trace_loads",
                                    "trace_stores",
                                    "trace_realizations",
                                    "trace_pipeline",
                                    "d3d12compute",
                                    "strict_float",
                                    "tsan",
                                    "asan",
                                    "check_unsafe_promises",
                                    "hexagon_dma",
                                    "embed_bitcode",
                                    "disable_llvm_loop_opt",
                                    "enable_llvm_loop_opt",
                                    "wasm_simd128",
                                    "wasm_signext",
                                    "wasm_sat_float_to_int",
                                    "wasm_threads",
                                    "wasm_bulk_memory",
                                    "sve",
                                    "sve2",
                                    "arm_dot_prod",
                                    "arm_fp16",
                                    "llvm_large_code_model",
                                    "rvv",
                                    "armv81a",
                                    "sanitizer_coverage",
                                    "profile_by_timer"};
    for (const char *f : halide14) {
        SCOPED_TRACE(f);
        EXPECT_NO_THROW(Target::parse(std::string("x86-64-linux-") + f));
    }
}

// Every feature name Halide 21 knows (its Target.cpp's feature_name_map, in its order), likewise.
TEST(Target, EveryHalide21FeatureNameParses) {
    const char *const halide21[] = {"jit",
                                    "debug",
                                    "enable_backtraces",
                                    "no_asserts",
                                    "no_bounds_query",
                                    "sse41",
                                    "avx",
                                    "avx2",
                                    "avxvnni",
                                    "fma",
                                    "fma4",
                                    "f16c",
                                    "armv7s",
                                    "no_neon",
                                    "vsx",
                                    "power_arch_2_07",
                                    "cuda",
                                    "cuda_capability_30",
                                    "cuda_capability_32",
                                    "cuda_capability_35",
                                    "cuda_capability_50",
                                    "cuda_capability_61",
                                    "cuda_capability_70",
                                    "cuda_capability_75",
                                    "cuda_capability_80",
                                    "cuda_capability_86",
                                    "opencl",
                                    "cl_doubles",
                                    "cl_half",
                                    "cl_atomics64",
                                    "egl",
                                    "user_context",
                                    "profile",
                                    "no_runtime",
                                    "metal",
                                    "c_plus_plus_name_mangling",
                                    "large_buffers",
                                    "hvx",
                                    "hvx_128",
                                    "hvx_v62",
                                    "hvx_v65",
                                    "hvx_v66",
                                    "hvx_v68",
                                    "fuzz_float_stores",
                                    "soft_float_abi",
                                    "msan",
                                    "avx512",
                                    "avx512_knl",
                                    "avx512_skylake",
                                    "avx512_cannonlake",
                                    "avx512_sapphirerapids",
                                    "avx512_zen4",
                                    "avx512_zen5",
                                    "trace_loads",
                                    "trace_stores",
                                    "trace_realizations",
                                    "trace_pipeline",
                                    "d3d12compute",
                                    "strict_float",
                                    "tsan",
                                    "asan",
                                    "check_unsafe_promises",
                                    "hexagon_dma",
                                    "embed_bitcode",
                                    "enable_llvm_loop_opt",
                                    "wasm_simd128",
                                    "wasm_mvponly",
                                    "wasm_threads",
                                    "wasm_bulk_memory",
                                    "webgpu",
                                    "sve",
                                    "sve2",
                                    "arm_dot_prod",
                                    "arm_fp16",
                                    "llvm_large_code_model",
                                    "rvv",
                                    "armv8a",
                                    "armv81a",
                                    "armv82a",
                                    "armv83a",
                                    "armv84a",
                                    "armv85a",
                                    "armv86a",
                                    "armv87a",
                                    "armv88a",
                                    "armv89a",
                                    "sanitizer_coverage",
                                    "profile_by_timer",
                                    "spirv",
                                    "vulkan",
                                    "vk_int8",
                                    "vk_int16",
                                    "vk_int64",
                                    "vk_float16",
                                    "vk_float64",
                                    "vk_v10",
                                    "vk_v12",
                                    "vk_v13",
                                    "semihosting",
                                    "avx10_1",
                                    "x86apx",
                                    "simulator"};
    EXPECT_EQ(std::size(halide21), 102u);
    for (const char *f : halide21) {
        SCOPED_TRACE(f);
        std::optional<Target::Feature> feature = Target::find_feature(f);
        ASSERT_TRUE(feature.has_value());
        EXPECT_TRUE(Target::feature_dialects(*feature) & Dialects::H21);
        EXPECT_TRUE(Target::parse(std::string("x86-64-linux-") + f).has_feature(*feature));
    }
}

// TargetFeatures.def's dialect column counts what each release's feature_name_map holds, and
// the enumerators and names are one to one.
TEST(Target, FeatureListIsOneToOneAndCountsEachDialect) {
    int h14 = 0, h21 = 0, tally_only = 0;
    std::set<std::string> names;
    for (int i = 0; i < Target::FeatureEnd; i++) {
        Target::Feature f = Target::Feature(i);
        unsigned d = Target::feature_dialects(f);
        h14 += (d & Dialects::H14) != 0;
        h21 += (d & Dialects::H21) != 0;
        tally_only += d == Dialects::Tally;
        EXPECT_TRUE(names.insert(Target::feature_name(f)).second) << Target::feature_name(f);
        EXPECT_EQ(Target::find_feature(Target::feature_name(f)), f);
    }
    EXPECT_EQ(h14, 78);
    EXPECT_EQ(h21, 102);
    EXPECT_EQ(tally_only, 3) << "profile_timestamps, cuda_capability_89, cuda_capability_90";
    EXPECT_EQ(Target::known_features().size(), size_t(Target::FeatureEnd));
}

// A misspelt feature name asked for by name is an error, not "absent": code asks by enumerator
// (a misspelling does not compile), users by name (and are told).
TEST(Target, UnknownFeatureNameIsAnErrorNotFalse) {
    Target t = Target::parse("host-profile");
    EXPECT_TRUE(t.has_feature("profile"));
    EXPECT_TRUE(t.has_feature(Target::Profile));
    EXPECT_FALSE(t.has_feature("debug"));
    EXPECT_THAT([&] { (void)t.has_feature("profle"); },
                ThrowsMessage<CompileError>(HasSubstr("unknown target feature 'profle'")));
    EXPECT_THAT([&] { (void)t.without_feature("profle"); },
                ThrowsMessage<CompileError>(HasSubstr("unknown target feature 'profle'")));
    EXPECT_THAT([] { (void)Target::feature_named("Profile"); },
                ThrowsMessage<CompileError>(HasSubstr("unknown target feature 'Profile'")));
}

TEST(Target, UnknownFeatureErrorNamesIt) {
    EXPECT_THAT([] { Target::parse("host-profile-bogus"); },
                ThrowsMessage<CompileError>(HasSubstr("unknown target feature 'bogus'")));
    EXPECT_THAT([] { Target::parse("x86-64-linux-cuda-warp"); },
                ThrowsMessage<CompileError>(HasSubstr("'warp'")));
    EXPECT_THAT([] { Target::parse(""); },
                ThrowsMessage<CompileError>(HasSubstr("empty target string")));
    EXPECT_THAT([] { Target::parse("host--profile"); },
                ThrowsMessage<CompileError>(HasSubstr("empty feature")));
    EXPECT_THAT(
        [] { Target::parse("gameboy-profile"); },
        ThrowsMessage<CompileError>(HasSubstr("must start with 'host' or an architecture")));
    EXPECT_THROW(Target::parse("HOST"), CompileError);
}

TEST(Target, ArchBitsAndOsAreReadInHalideOrder) {
    Target t = Target::parse("arm-32-android-no_neon");
    EXPECT_FALSE(t.host);
    EXPECT_EQ(t.arch, Target::ARM);
    EXPECT_EQ(t.bits, 32);
    EXPECT_EQ(t.os, Target::Android);
    EXPECT_EQ(t.to_string(), "arm-32-android-no_neon");
}

TEST(Target, CheckSupportedNamesTheUnsupportedApi) {
    EXPECT_THAT([] { Target::parse("x86-64-linux-metal-profile").check_supported(); },
                ThrowsMessage<CompileError>(HasSubstr("'metal'")));
    EXPECT_THAT([] { Target::parse("host-d3d12compute").check_supported(); },
                ThrowsMessage<CompileError>(HasSubstr("'d3d12compute'")));
    for (const char *two : {"host-cuda-vulkan", "host-cuda-opencl", "host-opencl-vulkan"}) {
        EXPECT_THAT([&] { Target::parse(two).check_supported(); },
                    ThrowsMessage<CompileError>(
                        HasSubstr("more than one of cuda, opencl and vulkan; pick one")))
            << two;
    }
    EXPECT_NO_THROW(Target::parse("host").check_supported());
    EXPECT_NO_THROW(Target::parse("host-cuda-debug-profile").check_supported());
    EXPECT_NO_THROW(Target::parse("host-vulkan-profile").check_supported());
    EXPECT_NO_THROW(Target::parse("host-opencl-profile").check_supported());
    EXPECT_NO_THROW(Target::parse("x86-64-linux-avx-avx2-opencl-sse41").check_supported());
}

TEST(Target, GpuApiFollowsTheFeatures) {
    EXPECT_EQ(Target::parse("host").gpu_api(), DeviceAPI::None);
    EXPECT_EQ(Target::parse("host-profile").gpu_api(), DeviceAPI::None);
    EXPECT_EQ(Target::parse("host-cuda").gpu_api(), DeviceAPI::CUDA);
    EXPECT_EQ(Target::parse("host-vulkan-profile").gpu_api(), DeviceAPI::Vulkan);
    EXPECT_EQ(Target::parse("x86-64-linux-avx-avx2-opencl-sse41").gpu_api(), DeviceAPI::OpenCL);
    EXPECT_EQ(Target::parse("host-metal").gpu_api(), DeviceAPI::Metal);
    EXPECT_EQ(Target::parse("host-cuda_capability_61-cuda").gpu_api(), DeviceAPI::CUDA);
    EXPECT_EQ(Target::parse("host-cuda_capability_61").gpu_api(), DeviceAPI::None)
        << "a capability alone does not ask for CUDA";
}

TEST(Target, ProfilingMeansProfileOrProfileByTimer) {
    EXPECT_TRUE(Target::parse("host-profile").profiling());
    EXPECT_TRUE(Target::parse("host-profile_by_timer").profiling());
    EXPECT_TRUE(Target::parse("host-cuda-debug-profile").profiling());
    EXPECT_FALSE(Target::parse("host").profiling());
    EXPECT_FALSE(Target::parse("host-debug").profiling());
    EXPECT_FALSE(Target::parse("host-trace_pipeline").profiling());
}

TEST(Target, ProfileTimestampsProfilesWithoutSyncMode) {
    Target t = Target::parse("host-vulkan-profile_timestamps");
    EXPECT_TRUE(t.profiling());
    EXPECT_TRUE(t.profile_timestamps());
    EXPECT_EQ(t.to_string(), "host-profile_timestamps-vulkan") << "features print sorted";
    EXPECT_EQ(Target::parse(t.to_string()), t);
    EXPECT_FALSE(Target::parse("host-profile").profile_timestamps());
    EXPECT_FALSE(Target::parse("host-profile_by_timer").profile_timestamps());
    EXPECT_TRUE(Target::parse("host").with_feature("profile_timestamps").profiling());
    EXPECT_THAT(
        [] { Target::parse("host-profile_timestamp"); },
        ThrowsMessage<CompileError>(HasSubstr("unknown target feature 'profile_timestamp'")));
}

TEST(Target, WithAndWithoutFeatureKeepTheOrder) {
    Target t = Target::parse("host-profile");
    Target c = t.with_feature("cuda");
    EXPECT_EQ(c.to_string(), "host-cuda-profile");
    EXPECT_EQ(c.with_feature("cuda"), c) << "adding twice changes nothing";
    EXPECT_EQ(c.without_feature("profile").to_string(), "host-cuda");
    EXPECT_EQ(t.without_feature("cuda"), t);
    EXPECT_THAT([&] { t.with_feature("bogus"); },
                ThrowsMessage<CompileError>(HasSubstr("unknown target feature 'bogus'")));
    EXPECT_EQ(t.to_string(), "host-profile") << "the original is unchanged";
}

TEST(Target, KnowsEveryHalideFeatureTheCorpusUsesAndVulkan) {
    const std::vector<std::string> &known = Target::known_features();
    for (const char *f : {"avx", "avx2", "sse41", "cuda", "opencl", "debug", "profile",
                          "profile_by_timer", "vulkan", "metal"}) {
        EXPECT_NE(std::find(known.begin(), known.end(), f), known.end()) << f;
    }
    EXPECT_EQ(std::find(known.begin(), known.end(), "host"), known.end());
}

TEST(Target, EqualityComparesEverything) {
    EXPECT_EQ(Target::parse("host-profile"), Target::parse("host-profile"));
    EXPECT_NE(Target::parse("host-profile"), Target::parse("host"));
    EXPECT_NE(Target::parse("x86-64-linux"), Target::parse("x86-32-linux"));
    EXPECT_NE(Target::parse("x86-64-linux"), Target::parse("x86-64-osx"));
    EXPECT_NE(Target::parse("host"), Target::parse("x86-64-linux"));
}

}  // namespace
}  // namespace tally
