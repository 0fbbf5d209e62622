// Halide 14's blur for apps_bench, built as a module of its own that apps_bench loads with
// dlopen(RTLD_LOCAL) (see apps_bench_halide.h): the app's algorithm, sums widened to 32 bits, and
// its schedule: blur_x computed at the root, both stages parallel over rows and vectorized 8 wide
// along x.

#include "apps_bench_halide.h"

#include "Halide.h"

namespace {

struct HalideBlur {
    Halide::Buffer<uint16_t> in, out;
    Halide::Func blur_x{"blur_x"}, blur_y{"blur_y"};
    Halide::Var x{"x"}, y{"y"};

    HalideBlur(const uint16_t *input, uint16_t *output, int width, int height) {
        using Halide::cast;
        in = Halide::Buffer<uint16_t>(const_cast<uint16_t *>(input), width + 2, height + 2);
        out = Halide::Buffer<uint16_t>(output, width, height);
        blur_x(x, y) = cast<uint16_t>((cast<uint32_t>(in(x, y)) + cast<uint32_t>(in(x + 1, y)) +
                                       cast<uint32_t>(in(x + 2, y))) /
                                      3);
        blur_y(x, y) =
            cast<uint16_t>((cast<uint32_t>(blur_x(x, y)) + cast<uint32_t>(blur_x(x, y + 1)) +
                            cast<uint32_t>(blur_x(x, y + 2))) /
                           3);
        blur_x.compute_root().parallel(y).vectorize(x, 8);
        blur_y.parallel(y).vectorize(x, 8);
        blur_y.compile_jit(Halide::get_jit_target_from_environment());
    }
};

}  // namespace

extern "C" {

void *apps_bench_halide_blur_new(const uint16_t *input, uint16_t *output, int width, int height) {
    return new HalideBlur(input, output, width, height);
}

void apps_bench_halide_blur_run(void *blur) {
    HalideBlur *b = static_cast<HalideBlur *>(blur);
    b->blur_y.realize(b->out);
}

void apps_bench_halide_blur_delete(void *blur) {
    delete static_cast<HalideBlur *>(blur);
}

}  // extern "C"
