// Halide 14's blur for apps_bench (see apps_bench_halide.h): the app's algorithm, sums widened
// to 32 bits, and its schedule: blur_x computed at the root, both stages parallel over rows and
// vectorized 8 wide along x.

#include "apps_bench_halide.h"

#include "Halide.h"

namespace apps_bench_halide {

struct Blur::Impl {
    Halide::Buffer<uint16_t> in, out;
    Halide::Func blur_x{"blur_x"}, blur_y{"blur_y"};
    Halide::Var x{"x"}, y{"y"};
};

Blur::Blur(const uint16_t *input, uint16_t *output, int width, int height)
    : impl(std::make_unique<Impl>()) {
    using Halide::cast;
    Impl &p = *impl;
    p.in = Halide::Buffer<uint16_t>(const_cast<uint16_t *>(input), width + 2, height + 2);
    p.out = Halide::Buffer<uint16_t>(output, width, height);
    Halide::Var x = p.x, y = p.y;
    p.blur_x(x, y) = cast<uint16_t>((cast<uint32_t>(p.in(x, y)) + cast<uint32_t>(p.in(x + 1, y)) +
                                     cast<uint32_t>(p.in(x + 2, y))) /
                                    3);
    p.blur_y(x, y) =
        cast<uint16_t>((cast<uint32_t>(p.blur_x(x, y)) + cast<uint32_t>(p.blur_x(x, y + 1)) +
                        cast<uint32_t>(p.blur_x(x, y + 2))) /
                       3);
    p.blur_x.compute_root().parallel(y).vectorize(x, 8);
    p.blur_y.parallel(y).vectorize(x, 8);
    p.blur_y.compile_jit(Halide::get_jit_target_from_environment());
}

Blur::~Blur() = default;

void Blur::run() {
    impl->blur_y.realize(impl->out);
}

}  // namespace apps_bench_halide
