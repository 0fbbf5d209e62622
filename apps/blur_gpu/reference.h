/** \file
 * Plain C++ reference for apps/blur_gpu/blur_gpu.stmt: a two-stage 3x3 box blur of a uint32
 * image.
 */
#ifndef TALLY_APPS_BLUR_GPU_REFERENCE_H
#define TALLY_APPS_BLUR_GPU_REFERENCE_H

#include <cstdint>

namespace tally_apps {

/** Blurs `input` ((width + 2) x (height + 2), dense row-major) into `output` (width x height,
 * dense row-major): the truncated mean of the truncated horizontal means of the 3x3 window whose
 * top-left corner has the same coordinates, in uint32 arithmetic. */
void blur_gpu_reference(const uint32_t *input, uint32_t *output, int width, int height);

}  // namespace tally_apps

#endif  // TALLY_APPS_BLUR_GPU_REFERENCE_H
