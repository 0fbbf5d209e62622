// The memory reference: direct window sums, no prefix sums and no scratch per row.

#include "reference.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tally_apps {

void memory_reference(const int32_t *input, int32_t *output, int width, int height) {
    std::vector<int32_t> horiz(std::size_t(width) * height);
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++) {
            int lo = std::max(x - 2, 0), hi = std::min(x + 3, width);
            int32_t sum = 0;
            for (int i = lo; i < hi; i++) {
                sum += input[std::size_t(y) * width + i];
            }
            horiz[std::size_t(y) * width + x] = sum / (hi - lo);
        }
    }
    for (int y = 0; y < height; y++) {
        int lo = std::max(y - 2, 0), hi = std::min(y + 3, height);
        for (int x = 0; x < width; x++) {
            int32_t sum = 0;
            for (int j = lo; j < hi; j++) {
                sum += horiz[std::size_t(j) * width + x];
            }
            output[std::size_t(y) * width + x] = sum / (hi - lo);
        }
    }
}

}  // namespace tally_apps
