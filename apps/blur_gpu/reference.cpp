// The blur_gpu reference: the same two stages as blur_gpu.stmt, computed in the plainest way.

#include "reference.h"

#include <cstddef>
#include <vector>

namespace tally_apps {

void blur_gpu_reference(const uint32_t *input, uint32_t *output, int width, int height) {
    const std::size_t in_stride = std::size_t(width) + 2;
    std::vector<uint32_t> blur_x(std::size_t(width) * std::size_t(height + 2));
    for (int y = 0; y < height + 2; y++) {
        for (int x = 0; x < width; x++) {
            const uint32_t *p = input + std::size_t(y) * in_stride + x;
            blur_x[std::size_t(y) * width + x] = (p[0] + p[1] + p[2]) / 3u;
        }
    }
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++) {
            const uint32_t *p = blur_x.data() + std::size_t(y) * width + x;
            output[std::size_t(y) * width + x] = (p[0] + p[width] + p[2 * width]) / 3u;
        }
    }
}

}  // namespace tally_apps
