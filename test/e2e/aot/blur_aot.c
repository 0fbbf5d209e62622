/* AOT end-to-end test of apps/blur: blur.o and blur.h from `tallyc -target host`, linked with
 * the static runtime, checked exactly against a C reimplementation at sizes with and without a
 * vector tail. Exit code 0 on success. */
#include <stdlib.h>

#include "aot_util.h"
#include "blur.h"

static void reference(const uint16_t *in, uint16_t *out, int width, int height) {
    uint16_t *bx = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)width * (size_t)(height + 2));
    for (int y = 0; y < height + 2; y++) {
        for (int x = 0; x < width; x++) {
            const uint16_t *p = in + (size_t)y * (size_t)(width + 2) + x;
            bx[(size_t)y * width + x] = (uint16_t)(((uint32_t)p[0] + p[1] + p[2]) / 3u);
        }
    }
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++) {
            const uint16_t *p = bx + (size_t)y * width + x;
            out[(size_t)y * width + x] =
                (uint16_t)(((uint32_t)p[0] + p[width] + p[2 * width]) / 3u);
        }
    }
    free(bx);
}

static void check_size(int width, int height, uint64_t seed) {
    int in_ext[2] = {width + 2, height + 2}, out_ext[2] = {width, height};
    size_t n_in = (size_t)in_ext[0] * in_ext[1], n_out = (size_t)width * height;
    uint16_t *in = malloc(n_in * sizeof(uint16_t));
    uint16_t *out = malloc(n_out * sizeof(uint16_t));
    uint16_t *want = malloc(n_out * sizeof(uint16_t));
    for (size_t i = 0; i < n_in; i++) {
        in[i] = (uint16_t)aot_next(&seed);
    }
    memset(out, 0xa5, n_out * sizeof(uint16_t));
    halide_dimension_t din[2], dout[2];
    halide_buffer_t bin, bout;
    aot_make_buffer(&bin, din, in, halide_type_uint, 16, 2, in_ext);
    aot_make_buffer(&bout, dout, out, halide_type_uint, 16, 2, out_ext);
    int rc = blur(&bin, &bout, width, height);
    AOT_CHECK(rc == 0, "blur returned %d at %dx%d", rc, width, height);
    reference(in, want, width, height);
    for (size_t i = 0; i < n_out; i++) {
        AOT_CHECK(out[i] == want[i], "%dx%d [%zu]: got %u want %u", width, height, i,
                  (unsigned)out[i], (unsigned)want[i]);
    }
    free(in);
    free(out);
    free(want);
}

int main(void) {
    check_size(64, 48, 1);
    check_size(13, 7, 2);
    check_size(1, 1, 3);
    check_size(101, 37, 4);
    if (aot_failures) {
        fprintf(stderr, "blur_aot: %d failures\n", aot_failures);
        return 1;
    }
    printf("blur_aot: ok\n");
    return 0;
}
