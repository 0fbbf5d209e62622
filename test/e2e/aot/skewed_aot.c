/* AOT end-to-end test of apps/skewed: skewed.o and skewed.h from `tallyc -target host`, linked
 * with the static runtime, checked exactly against a C reimplementation. Exit code 0 on
 * success. */
#include <stdlib.h>

#include "aot_util.h"
#include "skewed.h"

static void check_size(int n, int reps, uint64_t seed) {
    uint32_t *in = malloc(sizeof(uint32_t) * (size_t)n);
    uint32_t *out = malloc(sizeof(uint32_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
        in[i] = aot_next(&seed) | 1u;
    }
    memset(out, 0xcc, sizeof(uint32_t) * (size_t)n);
    halide_dimension_t din[1], dout[1];
    halide_buffer_t bin, bout;
    aot_make_buffer(&bin, din, in, halide_type_uint, 32, 1, &n);
    aot_make_buffer(&bout, dout, out, halide_type_uint, 32, 1, &n);
    int rc = skewed(&bin, &bout, n, reps);
    AOT_CHECK(rc == 0, "skewed returned %d for n=%d reps=%d", rc, n, reps);
    for (int i = 0; i < n; i++) {
        uint32_t v = in[i];
        for (int k = 0; k < 7 * reps; k++) {
            v ^= v << 13;
            v ^= v >> 17;
            v ^= v << 5;
        }
        AOT_CHECK(out[i] == v, "n=%d reps=%d [%d]: got %u want %u", n, reps, i, out[i], v);
    }
    free(in);
    free(out);
}

int main(void) {
    check_size(1, 1, 1);
    check_size(1000, 3, 2);
    check_size(17, 0, 3);
    if (aot_failures) {
        fprintf(stderr, "skewed_aot: %d failures\n", aot_failures);
        return 1;
    }
    printf("skewed_aot: ok\n");
    return 0;
}
