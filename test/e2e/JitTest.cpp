// End-to-end JIT tests: every app in apps/ is parsed, lowered for `host` and for `host-profile`,
// JIT-compiled, and run on seeded random inputs at several sizes; the outputs must equal the
// plain C++ references in apps/<name>/reference.cpp (integers exactly, floats within the
// tolerance below). Each size runs twice with different inputs, each time into an output buffer
// pre-filled with a sentinel, so a run that skips elements or depends on the previous run's
// state fails.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "E2EUtil.h"
#include "blur/reference.h"
#include "conv_chain/reference.h"
#include "memory/reference.h"
#include "skewed/reference.h"

namespace tally_e2e {
namespace {

/** Floats agree when |got - want| <= 1e-4 * max(1, |want|): relative for large values,
 * absolute near zero (ReLU outputs are often exactly or nearly 0). */
constexpr double float_tolerance = 1e-4;

template <typename T>
void fill_sentinel(Buffer<T> &img, uint8_t byte) {
    std::memset(img.data(), byte, img.size() * sizeof(T));
}

/** Counts the elements that differ; reports the first few with their index. */
template <typename T>
::testing::AssertionResult same_integers(const std::vector<T> &got, const std::vector<T> &want) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "sizes differ";
    }
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); i++) {
        if (got[i] != want[i]) {
            if (bad < 5) {
                first << " [" << i << "] got " << int64_t(got[i]) << " want " << int64_t(want[i])
                      << ";";
            }
            bad++;
        }
    }
    if (bad) {
        return ::testing::AssertionFailure()
               << bad << " of " << got.size() << " elements differ:" << first.str();
    }
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult close_floats(const std::vector<float> &got,
                                        const std::vector<float> &want) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure() << "sizes differ";
    }
    size_t bad = 0;
    double worst = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); i++) {
        double err =
            std::fabs(double(got[i]) - double(want[i])) / std::max(1.0, std::fabs(double(want[i])));
        worst = std::max(worst, std::isnan(err) ? INFINITY : err);
        if (!(err <= float_tolerance)) {
            if (bad < 5) {
                first << " [" << i << "] got " << got[i] << " want " << want[i] << ";";
            }
            bad++;
        }
    }
    if (bad) {
        return ::testing::AssertionFailure()
               << bad << " of " << got.size() << " elements off (worst " << worst
               << "):" << first.str();
    }
    return ::testing::AssertionSuccess();
}

class Jit : public ::testing::TestWithParam<std::string> {
protected:
    std::string target() const { return GetParam(); }
};

// blur: uint16 in full range (the 32-bit sums must not wrap), widths that are and are not
// multiples of the vector width 8, down to 1x1.
TEST_P(Jit, BlurMatchesReference) {
    auto jit = compile_app("blur", target());
    const int sizes[][2] = {{64, 48}, {13, 7}, {1, 1}, {8, 3}, {7, 9}, {101, 37}};
    for (const auto &s : sizes) {
        int width = s[0], height = s[1];
        for (int round = 0; round < 2; round++) {
            SCOPED_TRACE("blur " + std::to_string(width) + "x" + std::to_string(height) +
                         " round " + std::to_string(round));
            Rng rng(1000 * width + height + 7919 * round);
            Buffer<uint16_t> input({width + 2, height + 2}), output({width, height});
            for (size_t i = 0; i < input.size(); i++) {
                input[i] = uint16_t(rng.next());
            }
            fill_sentinel(output, round ? 0x5a : 0xa5);
            ASSERT_EQ(jit->call({input, output, width, height}), 0);
            std::vector<uint16_t> want(output.size());
            tally_apps::blur_reference(input.data(), want.data(), width, height);
            EXPECT_TRUE(same_integers(output.to_vector(), want));
        }
    }
}

// conv_chain: weights and inputs in [-1, 1), biases small, so that some ReLUs clip and others
// pass; several sizes including 1x1 outputs.
TEST_P(Jit, ConvChainMatchesReference) {
    using namespace tally_apps;
    auto jit = compile_app("conv_chain", target());
    const int sizes[][2] = {{16, 12}, {7, 5}, {1, 1}, {33, 2}};
    for (const auto &s : sizes) {
        int width = s[0], height = s[1];
        for (int round = 0; round < 2; round++) {
            SCOPED_TRACE("conv_chain " + std::to_string(width) + "x" + std::to_string(height) +
                         " round " + std::to_string(round));
            Rng rng(31 * width + height + 104729 * round);
            Buffer<float> input({width + 6, height + 6, conv_chain_c0});
            Buffer<float> w1({3, 3, conv_chain_c0, conv_chain_c1}), b1({conv_chain_c1});
            Buffer<float> w2({3, 3, conv_chain_c1, conv_chain_c2}), b2({conv_chain_c2});
            Buffer<float> w3({3, 3, conv_chain_c2, conv_chain_c3}), b3({conv_chain_c3});
            Buffer<float> output({width, height, conv_chain_c3});
            for (Buffer<float> *img : {&input, &w1, &w2, &w3}) {
                for (size_t i = 0; i < img->size(); i++) {
                    (*img)[i] = rng.uniform(-1.0f, 1.0f);
                }
            }
            for (Buffer<float> *img : {&b1, &b2, &b3}) {
                for (size_t i = 0; i < img->size(); i++) {
                    (*img)[i] = rng.uniform(-0.25f, 0.25f);
                }
            }
            fill_sentinel(output, round ? 0x7f : 0xff);  // NaNs and large values
            ASSERT_EQ(jit->call({input, w1, b1, w2, b2, w3, b3, output, width, height}), 0);
            std::vector<float> want(output.size());
            conv_chain_reference(input.data(), w1.data(), b1.data(), w2.data(), b2.data(),
                                 w3.data(), b3.data(), want.data(), width, height);
            EXPECT_TRUE(close_floats(output.to_vector(), want));
        }
    }
}

// memory: non-negative int32 inputs (the division conventions agree there); widths below,
// at and above the 8-column strip, heights where the clamped windows overlap both borders.
TEST_P(Jit, MemoryMatchesReference) {
    auto jit = compile_app("memory", target());
    const int sizes[][2] = {{1, 1}, {37, 23}, {64, 64}, {3, 100}, {8, 4}, {9, 2}};
    for (const auto &s : sizes) {
        int width = s[0], height = s[1];
        for (int round = 0; round < 2; round++) {
            SCOPED_TRACE("memory " + std::to_string(width) + "x" + std::to_string(height) +
                         " round " + std::to_string(round));
            Rng rng(7 * width + 13 * height + 65537 * round);
            Buffer<int32_t> input({width, height}), output({width, height});
            for (size_t i = 0; i < input.size(); i++) {
                input[i] = int32_t(rng.below(1u << 20));
            }
            fill_sentinel(output, round ? 0x11 : 0xee);
            ASSERT_EQ(jit->call({input, output, width, height}), 0);
            std::vector<int32_t> want(output.size());
            tally_apps::memory_reference(input.data(), want.data(), width, height);
            EXPECT_TRUE(same_integers(output.to_vector(), want));
        }
    }
}

// skewed: small sizes and round counts (the profile test runs it big); reps = 0 copies.
TEST_P(Jit, SkewedMatchesReference) {
    auto jit = compile_app("skewed", target());
    const int sizes[][2] = {{1, 1}, {100, 3}, {1000, 2}, {17, 0}};
    for (const auto &s : sizes) {
        int n = s[0], reps = s[1];
        for (int round = 0; round < 2; round++) {
            SCOPED_TRACE("skewed n=" + std::to_string(n) + " reps=" + std::to_string(reps) +
                         " round " + std::to_string(round));
            Rng rng(n + 1000 * reps + 3 * round);
            Buffer<uint32_t> input({n}), output({n});
            for (size_t i = 0; i < input.size(); i++) {
                input[i] = rng.next() | 1u;
            }
            fill_sentinel(output, round ? 0x33 : 0xcc);
            ASSERT_EQ(jit->call({input, output, n, reps}), 0);
            std::vector<uint32_t> want(output.size());
            tally_apps::skewed_reference(input.data(), want.data(), n, reps);
            EXPECT_TRUE(same_integers(output.to_vector(), want));
        }
    }
}

// A null buffer argument is an error code, not a crash, in both builds.
TEST_P(Jit, NullBufferIsAnError) {
    auto jit = compile_app("blur", target());
    int width = 8, height = 8;
    Buffer<uint16_t> output({width, height});
    void *args[] = {nullptr, output.raw(), &width, &height};
    tally_message_handler_t old = tally_set_error_handler([](void *, const char *) {});
    int rc = jit->run(args);
    tally_set_error_handler(old);
    EXPECT_EQ(rc, TALLY_ERROR_BUFFER_ARGUMENT_IS_NULL);
}

// Every pipeline of a module runs by its name (their entries are resolved once, at compile
// time), the first one without a name; a name that is no pipeline is an error.
TEST(JitModule, RunsEachPipelineByName) {
    const char *ir = "module name=two, target=host\n"
                     "external func twice (in: buffer<int32, 1>, out: buffer<int32, 1>) {\n"
                     " for (x, 0, 4) {\n"
                     "  out[x] = in[x]*2\n"
                     " }\n"
                     "}\n"
                     "external func plus_one (in: buffer<int32, 1>, out: buffer<int32, 1>) {\n"
                     " for (x, 0, 4) {\n"
                     "  out[x] = in[x] + 1\n"
                     " }\n"
                     "}\n";
    auto jit =
        tally::compile_jit(tally::lower(tally::parse_module(ir), tally::Target::parse("host")));
    Buffer<int32_t> in({4}), out({4});
    for (int i = 0; i < 4; i++) {
        in[i] = 10 * i - 7;
    }
    for (int rep = 0; rep < 2; rep++) {
        ASSERT_EQ(jit->call("plus_one", {in, out}), 0);
        for (int i = 0; i < 4; i++) {
            EXPECT_EQ(out[i], in[i] + 1);
        }
        ASSERT_EQ(jit->call("twice", {in, out}), 0);
        for (int i = 0; i < 4; i++) {
            EXPECT_EQ(out[i], in[i] * 2);
        }
        fill_sentinel(out, 0);
        ASSERT_EQ(jit->call({in, out}), 0);
        EXPECT_EQ(jit->entry().name, "twice");
        for (int i = 0; i < 4; i++) {
            EXPECT_EQ(out[i], in[i] * 2);
        }
    }
    EXPECT_THROW(jit->call("thrice", {in, out}), tally::CompileError);
}

// A Buffer Halide embeds is printed `buffer NAME = {...}`, without its data: given contents with
// define_buffer_constant, the pipeline reads them through `NAME.buffer` (its type, mins and
// extents as given); without them it does not compile, and bad contents are errors.
TEST(JitModule, BufferConstantsReadTheContentsGiven) {
    const char *ir = "module name=embedded, target=host\n"
                     "buffer k = {...}\n"
                     "external func embedded (out: buffer<int16, 1>) {\n"
                     " let k = (void *)_halide_buffer_get_host((halide_buffer_t *)k.buffer)\n"
                     " let k.min.0 = _halide_buffer_get_min((halide_buffer_t *)k.buffer, 0)\n"
                     " let k.min.1 = _halide_buffer_get_min((halide_buffer_t *)k.buffer, 1)\n"
                     " let k.extent.0 = _halide_buffer_get_extent((halide_buffer_t *)k.buffer, 0)\n"
                     " let k.stride.1 = _halide_buffer_get_stride((halide_buffer_t *)k.buffer, 1)\n"
                     " let k.type = (uint32)_halide_buffer_get_type((halide_buffer_t *)k.buffer)\n"
                     " for (x, 0, 6) {\n"
                     "  out[x] = k[((x/3)*k.stride.1) + (x % 3)] + int16(k.min.0*1000)\n"
                     " }\n"
                     " out[6] = int16(k.extent.0*100 + k.stride.1*10 + k.min.1)\n"
                     " out[7] = int16(k.type)\n"
                     "}\n";
    tally::Module m = tally::parse_module(ir);
    EXPECT_THROW(tally::compile_jit(tally::lower(m, tally::Target::parse("host"))),
                 tally::CompileError);
    // A 3x2 int16 array with mins (-1, 4): dimension 0 has 3 elements.
    std::vector<int16_t> k = {1, 2, 3, 40, 50, 60};
    std::string bytes(reinterpret_cast<const char *>(k.data()), k.size() * 2);
    EXPECT_THROW(m.define_buffer_constant("kk", tally::Int(16), {-1, 4}, {3, 2}, bytes),
                 tally::CompileError);
    EXPECT_THROW(m.define_buffer_constant("k", tally::Int(16), {-1, 4}, {3, 3}, bytes),
                 tally::CompileError);
    EXPECT_THROW(m.define_buffer_constant("k", tally::Int(16), {-1}, {3, 2}, bytes),
                 tally::CompileError);
    m.define_buffer_constant("k", tally::Int(16), {-1, 4}, {3, 2}, bytes);
    auto jit = tally::compile_jit(tally::lower(m, tally::Target::parse("host")));
    Buffer<int16_t> out({8});
    ASSERT_EQ(jit->call({out}), 0);
    // x / 3 is the row in memory, x % 3 the column.
    const int16_t want[] = {1 - 1000,
                            2 - 1000,
                            3 - 1000,
                            40 - 1000,
                            50 - 1000,
                            60 - 1000,
                            3 * 100 + 3 * 10 + 4,
                            int16_t(halide_type_int | 16 << 8 | 1 << 16)};
    for (int i = 0; i < 8; i++) {
        EXPECT_EQ(out[i], want[i]) << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Targets, Jit, ::testing::Values("host", "host-profile"),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                             return info.param == "host" ? std::string("host")
                                                         : std::string("host_profile");
                         });

}  // namespace
}  // namespace tally_e2e
