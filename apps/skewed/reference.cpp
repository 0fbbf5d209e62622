// The skewed reference: the three stages collapse into one chain of 7 * reps rounds.

#include "reference.h"

#include <cstddef>

namespace tally_apps {

void skewed_reference(const uint32_t *input, uint32_t *output, int n, int reps) {
    for (int i = 0; i < n; i++) {
        uint32_t v = input[i];
        for (int k = 0; k < 7 * reps; k++) {
            v ^= v << 13;
            v ^= v >> 17;
            v ^= v << 5;
        }
        output[i] = v;
    }
}

}  // namespace tally_apps
