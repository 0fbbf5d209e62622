// A Halide generator as a Halide user writes one: registered with HALIDE_REGISTER_GENERATOR and
// built with Halide's GenGen main into an executable (brighten.generator). test/halide builds
// the same sources through Tally with tally_add_halide_library.
#include "Halide.h"

namespace {

class Brighten : public Halide::Generator<Brighten> {
public:
    GeneratorParam<int> vector_width{"vector_width", 8};

    Input<Buffer<uint8_t, 2>> input{"input"};
    Input<int32_t> offset{"offset"};
    Output<Buffer<uint8_t, 2>> output{"output"};

    void generate() {
        Var x("x"), y("y");
        Func smooth("smooth");
        smooth(x, y) = (Halide::cast<int16_t>(input(x, y)) + input(x + 1, y) + 1) / 2;
        output(x, y) = Halide::saturating_cast<uint8_t>(smooth(x, y) + offset);
        output.vectorize(x, vector_width).parallel(y);
        smooth.compute_at(output, y).vectorize(x, vector_width);
    }
};

/** The same algorithm for an autoscheduler: estimates on every input and output, and a schedule
 * of its own only when none is asked for, as Halide's generators are written for autoscheduling. */
class BrightenAuto : public Halide::Generator<BrightenAuto> {
public:
    Input<Buffer<uint8_t, 2>> input{"input"};
    Input<int32_t> offset{"offset"};
    Output<Buffer<uint8_t, 2>> output{"output"};

    void generate() {
        Var x("x"), y("y");
        Func smooth("smooth");
        smooth(x, y) = (Halide::cast<int16_t>(input(x, y)) + input(x + 1, y) + 1) / 2;
        output(x, y) = Halide::saturating_cast<uint8_t>(smooth(x, y) + offset);
        input.set_estimates({{0, 1025}, {0, 768}});
        offset.set_estimate(40);
        output.set_estimates({{0, 1024}, {0, 768}});
        if (!using_autoscheduler()) {
            output.vectorize(x, 16).parallel(y);
            smooth.compute_at(output, y).vectorize(x, 16);
        }
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Brighten, brighten)
HALIDE_REGISTER_GENERATOR(BrightenAuto, brighten_auto)
