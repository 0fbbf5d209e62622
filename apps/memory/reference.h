/** \file
 * Plain C++ reference for apps/memory/memory.stmt: a separable 5x5 clamped box average.
 */
#ifndef TALLY_APPS_MEMORY_REFERENCE_H
#define TALLY_APPS_MEMORY_REFERENCE_H

#include <cstdint>

namespace tally_apps {

/** output(x, y) = vertical window mean of horizontal window means of `input`, windows of radius
 * 2 clamped to the image, means rounded down (inputs must be non-negative). Both images are
 * width x height, dense row-major. */
void memory_reference(const int32_t *input, int32_t *output, int width, int height);

}  // namespace tally_apps

#endif  // TALLY_APPS_MEMORY_REFERENCE_H
