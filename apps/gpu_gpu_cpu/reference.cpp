// The gpu_gpu_cpu reference: the three stages of gpu_gpu_cpu.stmt, computed in the plainest way.

#include "reference.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tally_apps {

void gpu_gpu_cpu_reference(const float *input, float *C, int width, int height, int reps) {
    const std::size_t n = std::size_t(width) * std::size_t(height);
    std::vector<float> A(n), B(n);
    for (std::size_t i = 0; i < n; i++) {
        float v = input[i];
        for (int k = 0; k < reps; k++) {
            v = v * 0.99f + 0.01f;
        }
        A[i] = v;
    }
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++) {
            std::size_t row = std::size_t(y) * width;
            float v = (A[row + x] + A[row + std::min(x + 1, width - 1)]) * 0.5f;
            for (int k = 0; k < reps; k++) {
                v = v * 0.97f - 0.015f;
            }
            B[row + x] = v;
        }
    }
    for (std::size_t i = 0; i < n; i++) {
        float v = B[i] * 2.0f + input[i];
        for (int k = 0; k < reps / 16; k++) {
            v = v * 0.9f + 0.05f;
        }
        C[i] = v;
    }
}

}  // namespace tally_apps
