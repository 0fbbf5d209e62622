// A Halide pipeline profiled by Tally, from C++: the classic 3x3 blur written with Halide 21's
// C++ API, compiled by Tally (tally::halide::compile) and run on Halide::Buffers. Tally's report
// prints when the process exits. The output is checked against Halide's own realize.
//
//   build/test/halide/halide_blur_example [W H RUNS]
#include "tally/halide/Bridge.h"

#include <cstdio>
#include <cstdlib>

using namespace Halide;

int main(int argc, char **argv) {
    const int w = argc > 2 ? std::atoi(argv[1]) : 2048, h = argc > 2 ? std::atoi(argv[2]) : 1536;
    const int runs = argc > 3 ? std::atoi(argv[3]) : 50;

    // The algorithm.
    Var x("x"), y("y"), yo("yo"), yi("yi");
    ImageParam input(UInt(16), 2, "input");
    Func clamped = BoundaryConditions::repeat_edge(input);
    Func blur_x("blur_x"), blur_y("blur_y");
    blur_x(x, y) = (clamped(x - 1, y) + clamped(x, y) + clamped(x + 1, y)) / 3;
    blur_y(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3;
    // The schedule.
    blur_y.split(y, yo, yi, 32).parallel(yo).vectorize(x, 8);
    blur_x.compute_at(blur_y, yo).vectorize(x, 8);

    // Profile it with Tally.
    tally::halide::Options options;
    options.name = "blur";
    auto blur = tally::halide::compile(blur_y, {input}, "host-profile", options);
    Buffer<uint16_t> image(w, h), out(w, h);
    image.for_each_element(
        [&](int i, int j) { image(i, j) = uint16_t((i * 37 + j * 101) & 0xffff); });
    for (int r = 0; r < runs; r++) {
        if (blur->run({image, out}) != 0) {
            return 1;
        }
    }

    input.set(image);
    Buffer<uint16_t> want = blur_y.realize({w, h});
    int bad = 0;
    want.for_each_element([&](int i, int j) { bad += want(i, j) != out(i, j); });
    std::printf("blur: %dx%d, %d runs, %d pixels differ from Halide's realize\n", w, h, runs, bad);
    return bad == 0 ? 0 : 1;
}
