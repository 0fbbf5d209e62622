/** \file
 * Plain C++ reference for apps/bounce/bounce.stmt: four update stages of one buffer alternating
 * between CPU and GPU, then a GPU output stage.
 */
#ifndef TALLY_APPS_BOUNCE_REFERENCE_H
#define TALLY_APPS_BOUNCE_REFERENCE_H

#include <cstdint>

namespace tally_apps {

/** Computes output (n int32) from input (n int32, |input| < 2^28) as bounce.stmt does, with
 * Halide's integer division and modulo (rounding towards negative infinity, remainder >= 0). */
void bounce_reference(const int32_t *input, int32_t *output, int n);

}  // namespace tally_apps

#endif  // TALLY_APPS_BOUNCE_REFERENCE_H
