/** \file
 * The Halide 14 side of apps_bench: its own translation unit, because Halide.h and Tally's
 * runtime header both define halide_buffer_t and the other Halide runtime types.
 */
#ifndef TALLY_BENCH_APPS_BENCH_HALIDE_H
#define TALLY_BENCH_APPS_BENCH_HALIDE_H

#include <cstdint>
#include <memory>

namespace apps_bench_halide {

/** blur (apps/blur) written in Halide 14 and JIT-compiled with the app's schedule, over the
 * caller's dense row-major buffers: input (width + 2) x (height + 2), output width x height. */
class Blur {
public:
    Blur(const uint16_t *input, uint16_t *output, int width, int height);
    ~Blur();
    Blur(const Blur &) = delete;
    Blur &operator=(const Blur &) = delete;

    /** One run: fills the output. */
    void run();

    struct Impl;

private:
    std::unique_ptr<Impl> impl;
};

}  // namespace apps_bench_halide

#endif  // TALLY_BENCH_APPS_BENCH_HALIDE_H
