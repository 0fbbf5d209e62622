// The Halide bridge: pipelines written with Halide 21's C++ API, compiled by Tally in memory and
// run beside Halide's own JIT in the same process (two LLVMs, one process), outputs compared
// with Halide's realize.

#include "tally/halide/Bridge.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "tally/IRPrinter.h"

namespace {

using Halide::Buffer;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;

Buffer<uint16_t> ramp_input(int w, int h) {
    Buffer<uint16_t> in(w, h);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            in(x, y) = uint16_t((x * 37 + y * 101 + (x * y) % 13) & 0xfff);
        }
    }
    return in;
}

/** A separable 3x3 blur of a uint16 image with a clamped edge, tiled, vectorized, parallel. */
struct Blur {
    ImageParam in{Halide::UInt(16), 2, "in"};
    Var x{"x"}, y{"y"}, xi{"xi"}, yi{"yi"};
    Func bx{"blur_x"}, by{"blur_y"};
    Blur() {
        Func c = Halide::BoundaryConditions::repeat_edge(in);
        bx(x, y) = (c(x - 1, y) + c(x, y) + c(x + 1, y)) / 3;
        by(x, y) = (bx(x, y - 1) + bx(x, y) + bx(x, y + 1)) / 3;
        by.tile(x, y, xi, yi, 32, 16).vectorize(xi, 8).parallel(y);
        bx.compute_at(by, x).vectorize(x, 8);
    }
};

template <typename T>
void expect_equal(const Buffer<T> &want, const Buffer<T> &got) {
    ASSERT_EQ(want.width(), got.width());
    ASSERT_EQ(want.height(), got.height());
    int bad = 0;
    want.for_each_element([&](int x, int y) {
        if (want(x, y) != got(x, y) && bad++ < 5) {
            ADD_FAILURE() << "at (" << x << ", " << y << "): Halide " << +want(x, y) << ", Tally "
                          << +got(x, y);
        }
    });
    EXPECT_EQ(bad, 0);
}

TEST(HalideBridge, BlurMatchesHalidesRealizeInOneProcess) {
    Blur b;
    Buffer<uint16_t> input = ramp_input(100, 70);
    b.in.set(input);
    // Halide's JIT first, then Tally's, then Halide's again: the two LLVMs share the process.
    Buffer<uint16_t> want = b.by.realize({100, 70});
    auto p = tally::halide::compile(b.by, {b.in}, "host");
    Buffer<uint16_t> got(100, 70);
    ASSERT_EQ(p->run({input, got}), 0);
    expect_equal(want, got);
    Buffer<uint16_t> again = b.by.realize({100, 70});
    expect_equal(want, again);
    // The function takes Halide's arguments, in order, then the output.
    const tally::LoweredFunc &f = p->translated().functions.at(0);
    ASSERT_EQ(f.args.size(), 2u);
    EXPECT_EQ(f.args[0].name, "in");
    EXPECT_EQ(f.args[1].name, "blur_y");
    EXPECT_EQ(p->name(), "blur_y");
}

TEST(HalideBridge, OutputWithMinsAndScalarParams) {
    ImageParam in(Halide::Float(32), 1, "in");
    Halide::Param<float> gain("gain");
    Halide::Param<int32_t> shift("shift");
    Var x("x");
    Func f("scaled");
    f(x) = in(x + shift) * gain + 0.25f;
    f.vectorize(x, 4, Halide::TailStrategy::GuardWithIf);
    Buffer<float> input(64);
    for (int i = 0; i < 64; i++) {
        input(i) = float(i) * 0.5f - 7.0f;
    }
    input.set_min(-10);
    in.set(input);
    gain.set(1.5f);
    shift.set(-3);
    Buffer<float> want(30);
    want.set_min(-5);
    f.realize(want);

    auto p = tally::halide::compile(f, {in, gain, shift}, "host");
    Buffer<float> got(30);
    got.set_min(-5);
    ASSERT_EQ(p->run({input, 1.5f, -3, got}), 0);
    for (int i = -5; i < 25; i++) {
        EXPECT_EQ(want(i), got(i)) << "at " << i;
    }
}

// Halide names a second Func `twice` `twice$1`; the pipeline function gets Halide's own default
// name for it, `twice_1`, a symbol C and C++ can both spell (c_plus_plus_name_mangling mangles it).
TEST(HalideBridge, PipelineNamesAreSymbolsAsHalideMakesThem) {
    Var x("x"), y("y");
    Func first("twice"), second("twice");
    first(x, y) = x * 2 + y;
    second(x, y) = x * 3 + y;
    ASSERT_EQ(second.name(), "twice$1");
    Buffer<int32_t> want = second.realize({16, 4});
    for (const char *target : {"host", "host-c_plus_plus_name_mangling"}) {
        auto p = tally::halide::compile(second, {}, target);
        EXPECT_EQ(p->name(), "twice_1") << target;
        Buffer<int32_t> got(16, 4);
        ASSERT_EQ(p->run({got}), 0) << target;
        expect_equal(want, got);
    }
}

// Halide prints float constants with 6 decimals; the bridge carries Halide's double. 1/255 and
// 0.1 are not exact in 6 decimals: read from text they would differ in the low bits, through
// the bridge the output equals Halide's bit for bit (strict_float on both sides, so that no
// fast-math reassociation is involved).
TEST(HalideBridge, FloatConstantsAreBitExact) {
    ImageParam in(Halide::Float(32), 1, "in");
    Var x("x");
    Func f("normalized");
    f(x) = Halide::strict_float(in(x) * (1.0f / 255.0f) + 0.1f);
    Buffer<float> input(16);
    for (int i = 0; i < 16; i++) {
        input(i) = float(i * 17 + 3);
    }
    in.set(input);
    Halide::Target ht =
        Halide::get_jit_target_from_environment().with_feature(Halide::Target::StrictFloat);
    Buffer<float> want = f.realize({16}, ht);

    auto p = tally::halide::compile(f, {in}, "host-strict_float");
    Buffer<float> got(16);
    ASSERT_EQ(p->run({input, got}), 0);
    for (int i = 0; i < 16; i++) {
        uint32_t a, b;
        std::memcpy(&a, &want(i), 4);
        std::memcpy(&b, &got(i), 4);
        EXPECT_EQ(a, b) << "at " << i << ": " << want(i) << " vs " << got(i);
    }
    // The constant in Tally's IR is Halide's value, not its 6-decimal print.
    Halide::Expr c = Halide::Expr(1.0f / 255.0f);
    tally::Expr t = tally::halide::translate(c);
    const tally::FloatImm *imm = t.as<tally::FloatImm>();
    ASSERT_NE(imm, nullptr);
    EXPECT_EQ(imm->value, double(1.0f / 255.0f));
    EXPECT_NE(float(imm->value), 0.003922f);
}

TEST(HalideBridge, ProfiledRunReportsTheFuncs) {
    Blur b;
    Buffer<uint16_t> input = ramp_input(64, 48);
    tally::halide::Options options;
    options.name = "blur_profiled";
    auto p = tally::halide::compile(b.by, {b.in}, "host-profile", options);
    Buffer<uint16_t> got(64, 48);
    ASSERT_EQ(p->run({input, got}), 0);
    b.in.set(input);
    Buffer<uint16_t> want = b.by.realize({64, 48});
    expect_equal(want, got);
    const std::string text = tally::halide::report();
    EXPECT_NE(text.find("blur_profiled"), std::string::npos) << text;
    EXPECT_NE(text.find("blur_x"), std::string::npos) << text;
    EXPECT_NE(text.find("blur_y"), std::string::npos) << text;
    // Tally's profiler calls, not Halide's: Halide lowered without -profile.
    const std::string lowered = tally::to_string(p->lowered());
    EXPECT_NE(lowered.find("tally_profiler"), std::string::npos);
    EXPECT_EQ(tally::to_string(p->translated()).find("halide_profiler"), std::string::npos);
}

TEST(HalideBridge, ArgumentMismatchIsAnError) {
    Blur b;
    auto p = tally::halide::compile(b.by, {b.in}, "host");
    Buffer<float> wrong(8, 8);
    Buffer<uint16_t> out(8, 8);
    EXPECT_THROW(p->run({wrong, out}), tally::CompileError);
    Buffer<uint16_t> in(8, 8);
    EXPECT_THROW(p->run({in}), tally::CompileError);
}

// What Tally cannot take is an error naming it, before anything is compiled.
TEST(HalideBridge, UntranslatableNodesAreNamed) {
    namespace HI = Halide::Internal;
    HI::Stmt provide =
        HI::Provide::make("f", {Halide::Expr(1)}, {Halide::Expr(0)}, HI::const_true());
    try {
        tally::halide::translate(provide);
        FAIL() << "a Provide translated";
    } catch (const tally::CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("Provide statement to 'f'"), std::string::npos)
            << e.what();
    }
    Halide::Expr bogus =
        HI::Call::make(Halide::Int(32), "tally_no_such_intrinsic", {}, HI::Call::PureIntrinsic);
    try {
        tally::halide::translate(bogus);
        FAIL() << "an unknown intrinsic translated";
    } catch (const tally::CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("intrinsic 'tally_no_such_intrinsic'"),
                  std::string::npos)
            << e.what();
    }
}

TEST(HalideBridge, UnsupportedTargetsAreNamed) {
    Blur b;
    try {
        tally::halide::compile(b.by, {b.in}, "host-metal");
        FAIL() << "a Metal target compiled";
    } catch (const tally::CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("metal"), std::string::npos) << e.what();
    }
    EXPECT_THROW(tally::halide::compile(b.by, {b.in}, "host-no_such_feature"), tally::CompileError);
}

TEST(HalideBridge, HalideTargetDropsTallysProfiling) {
    Halide::Target t = tally::halide::halide_target("host-profile-profile_timestamps-debug");
    EXPECT_FALSE(t.has_feature(Halide::Target::Profile));
    EXPECT_TRUE(t.has_feature(Halide::Target::Debug));
    EXPECT_EQ(t.arch, Halide::get_host_target().arch);
    Halide::Target x = tally::halide::halide_target("x86-64-linux-avx2-cuda");
    EXPECT_EQ(x.arch, Halide::Target::X86);
    EXPECT_EQ(x.bits, 64);
    EXPECT_TRUE(x.has_feature(Halide::Target::AVX2));
    EXPECT_TRUE(x.has_feature(Halide::Target::CUDA));
}

}  // namespace
