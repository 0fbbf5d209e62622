// Halide 14's own lowered IR, compiled and run by Tally: every host corpus file JIT-compiles,
// blur3x3 computes a 3x3 blur exactly, and its shape checks report bad buffers instead of
// crashing.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"

using namespace tally;

namespace {

const std::string corpus = TALLY_CORPUS_DIR;

std::vector<std::string> host_files() {
    std::vector<std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(corpus)) {
        std::string p = e.path().string();
        if (p.find(".host.stmt") != std::string::npos ||
            p.find(".debug.stmt") != std::string::npos) {
            out.push_back(p);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::unique_ptr<JITModule> compile_file(const std::string &path) {
    Module m = parse_module_file(path);
    return compile_jit(lower(m, m.target));
}

/** A dense 2-D uint16 buffer with the given mins and extents. */
Buffer<uint16_t> buffer_2d(int x0, int w, int y0, int h) {
    return Buffer<uint16_t>({w, h}, {x0, y0});
}

/** The element at (x, y) of a dense 2-D buffer. */
uint16_t &at(Buffer<uint16_t> &b, int x, int y) {
    return b[size_t(y - b.min(1)) * size_t(b.extent(0)) + size_t(x - b.min(0))];
}

std::string last_error;
void record_error(void *, const char *msg) {
    last_error = msg;
}

}  // namespace

// The `host` and `debug` files: everything Halide's host lowering produced (closures for
// parallel loops, bounds queries, buffer checks, `debug`'s stringify/halide_print tracing).
// The `-profile` files call Halide's own profiler ABI, which Tally's profiler replaces, and the
// GPU files Halide's own CUDA/OpenCL runtimes; neither is a host file.
TEST(CorpusJit, EveryHostCorpusFileCompiles) {
    std::vector<std::string> files = host_files();
    EXPECT_EQ(files.size(), 10u);
    for (const std::string &f : files) {
        SCOPED_TRACE(f);
        std::unique_ptr<JITModule> jit;
        EXPECT_NO_THROW(jit = compile_file(f));
        if (jit) {
            EXPECT_NE(jit->symbol(entry_symbols(jit->module(), jit->entry()).function), nullptr);
        }
    }
}

// Halide's blur3x3 (uint16, wrapping adds, /3 at each stage) against a direct computation.
TEST(CorpusJit, HalideBlurComputesTheBlurExactly) {
    auto jit = compile_file(corpus + "/blur3x3.host.stmt");
    const int W = 512, H = 64;
    Buffer<uint16_t> in = buffer_2d(-1, W + 2, -1, H + 2), out = buffer_2d(0, W, 0, H);
    for (int y = -1; y <= H; y++) {
        for (int x = -1; x <= W; x++) {
            at(in, x, y) = uint16_t((x * 7919 + y * 104729) % 20000);
        }
    }
    ASSERT_EQ(jit->call({in, out}), 0);
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            auto bx = [&](int xx, int yy) {
                return uint16_t(uint16_t(at(in, xx - 1, yy) + at(in, xx, yy) + at(in, xx + 1, yy)) /
                                3);
            };
            uint16_t want = uint16_t(uint16_t(bx(x, y - 1) + bx(x, y) + bx(x, y + 1)) / 3);
            ASSERT_EQ(at(out, x, y), want) << "at " << x << "," << y;
        }
    }
}

// Halide's memoize: the allocation's `custom_delete` releases each cached buffer when the
// realization ends, so between runs nothing is in use, and the second run reads the cache.
TEST(CorpusJit, MemoizedBuffersAreReleasedWhenTheRealizationEnds) {
    auto jit = compile_file(corpus + "/../../conformance/halide14/memoize_p/memoize_p.host.stmt");
    halide_memoization_cache_cleanup();
    const int W = 24, H = 16;
    std::vector<float> in(W * H), out1(W * H), out2(W * H);
    for (int i = 0; i < W * H; i++) {
        in[i] = float(i % 13) * 0.5f - 3.0f;
    }
    auto buffer = [&](std::vector<float> &v) {
        return Buffer<float>(v.data(), {{0, W, 1, 0}, {0, H, W, 0}});
    };
    Buffer<float> bin = buffer(in), b1 = buffer(out1), b2 = buffer(out2);
    const int32_t kp = 3;
    ASSERT_EQ(jit->call({bin, kp, b1}), 0);
    EXPECT_EQ(tally_memoization_cache_in_use(), 0u);
    // m, and mt's two Tuple elements: float32 and int32, each 24x16.
    EXPECT_EQ(tally_memoization_cache_bytes(), uint64_t(3 * W * H * 4));
    ASSERT_EQ(jit->call({bin, kp, b2}), 0);
    EXPECT_EQ(tally_memoization_cache_in_use(), 0u);
    EXPECT_EQ(out1, out2);
    EXPECT_EQ(out1[5 + 2 * W], float(5 * 3 + 2) * 0.25f + in[5 + 2 * W] * 2.0f +
                                   float(int32_t(in[5 + 2 * W] * 8.0f)));
    halide_memoization_cache_cleanup();
    EXPECT_EQ(tally_memoization_cache_bytes(), 0u);
}

// Wrong shapes are reported by Halide's own checks, as an error code and a message; nothing
// crashes and nothing is written out of bounds. The arguments go in raw (JITModule::run), past
// the binder, which would refuse the wrong type and the null buffer itself.
TEST(CorpusJit, HalideShapeChecksReportBadBuffers) {
    auto jit = compile_file(corpus + "/blur3x3.host.stmt");
    tally_message_handler_t old = tally_set_error_handler(record_error);
    {
        // The input lacks the one-pixel border the blur reads.
        Buffer<uint16_t> in = buffer_2d(0, 512, 0, 64), out = buffer_2d(0, 512, 0, 64);
        void *args[] = {in.raw(), out.raw()};
        last_error.clear();
        EXPECT_EQ(jit->run(args), TALLY_ERROR_ACCESS_OUT_OF_BOUNDS);
        EXPECT_THAT(last_error, ::testing::HasSubstr("Input buffer input is accessed at -1"));
    }
    {
        // An output narrower than the 256-wide vectorized tiles.
        Buffer<uint16_t> in = buffer_2d(-1, 100, -1, 66), out = buffer_2d(0, 98, 0, 64);
        void *args[] = {in.raw(), out.raw()};
        last_error.clear();
        EXPECT_EQ(jit->run(args), TALLY_ERROR_ACCESS_OUT_OF_BOUNDS);
        EXPECT_THAT(last_error, ::testing::HasSubstr("Output buffer blur_y"));
    }
    {
        // The wrong element type.
        Buffer<int32_t> in({514, 66}, {-1, -1});
        Buffer<uint16_t> out = buffer_2d(0, 512, 0, 64);
        void *args[] = {in.raw(), out.raw()};
        last_error.clear();
        EXPECT_EQ(jit->run(args), TALLY_ERROR_BAD_TYPE);
        EXPECT_THAT(last_error, ::testing::HasSubstr("Input buffer input"));
    }
    {
        // A null buffer.
        Buffer<uint16_t> out = buffer_2d(0, 512, 0, 64);
        void *args[] = {nullptr, out.raw()};
        EXPECT_EQ(jit->run(args), TALLY_ERROR_BUFFER_ARGUMENT_IS_NULL);
    }
    tally_set_error_handler(old);
}
