// The bounce reference: the stages of bounce.stmt in order, with Euclidean division and modulo.

#include "reference.h"

#include <cstddef>
#include <vector>

namespace tally_apps {

namespace {

/** Division rounding towards negative infinity (b > 0), as the IR defines it. */
int32_t floor_div(int32_t a, int32_t b) {
    int32_t q = a / b;
    return (a % b < 0) ? q - 1 : q;
}

/** The matching non-negative remainder (b > 0). */
int32_t floor_mod(int32_t a, int32_t b) {
    int32_t r = a % b;
    return r < 0 ? r + b : r;
}

}  // namespace

void bounce_reference(const int32_t *input, int32_t *output, int n) {
    std::vector<int32_t> T(static_cast<std::size_t>(n));
    for (int i = 0; i < n; i++) {
        T[i] = input[i] + 1;
    }
    for (int i = 0; i < n; i++) {
        T[i] = T[i] * 3 - 100;
    }
    for (int i = 0; i < n; i++) {
        T[i] = T[i] + i % 5;
    }
    for (int i = 0; i < n; i++) {
        int32_t v = T[i];
        T[i] = floor_div(v, 7) + floor_mod(v, 7) * 1000;
    }
    for (int i = 0; i < n; i++) {
        int32_t t = T[i];
        output[i] = (t < 0 ? -t : t) + (i / 64) % 4 * 100000;
    }
}

}  // namespace tally_apps
