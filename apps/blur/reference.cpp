// The blur reference: the same two stages as blur.stmt, computed in the plainest way.

#include "reference.h"

#include <cstddef>
#include <vector>

namespace tally_apps {

void blur_reference(const uint16_t *input, uint16_t *output, int width, int height) {
    const int in_stride = width + 2;
    std::vector<uint16_t> blur_x(std::size_t(width) * std::size_t(height + 2));
    for (int y = 0; y < height + 2; y++) {
        for (int x = 0; x < width; x++) {
            const uint16_t *p = input + std::size_t(y) * in_stride + x;
            uint32_t sum = uint32_t(p[0]) + uint32_t(p[1]) + uint32_t(p[2]);
            blur_x[std::size_t(y) * width + x] = uint16_t(sum / 3);
        }
    }
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++) {
            const uint16_t *p = blur_x.data() + std::size_t(y) * width + x;
            uint32_t sum = uint32_t(p[0]) + uint32_t(p[width]) + uint32_t(p[2 * width]);
            output[std::size_t(y) * width + x] = uint16_t(sum / 3);
        }
    }
}

}  // namespace tally_apps
