/** \file
 * Plain C++ reference for apps/blur/blur.stmt: a two-stage 3x3 box blur of a uint16 image.
 */
#ifndef TALLY_APPS_BLUR_REFERENCE_H
#define TALLY_APPS_BLUR_REFERENCE_H

#include <cstdint>

namespace tally_apps {

/** Blurs `input` ((width + 2) x (height + 2), dense row-major) into `output` (width x height,
 * dense row-major): each output pixel is the truncated mean of the horizontal means of the 3x3
 * window whose top-left corner has the same coordinates, sums taken in 32 bits. */
void blur_reference(const uint16_t *input, uint16_t *output, int width, int height);

}  // namespace tally_apps

#endif  // TALLY_APPS_BLUR_REFERENCE_H
