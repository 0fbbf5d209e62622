/* AOT end-to-end test of apps/conv_chain: conv_chain.o and conv_chain.h from
 * `tallyc -target host`, linked with the static runtime, checked against a C reimplementation
 * within |got - want| <= 1e-4 * max(1, |want|). Exit code 0 on success. */
#include <math.h>
#include <stdlib.h>

#include "aot_util.h"
#include "conv_chain.h"

enum { C0 = 3, C1 = 8, C2 = 8, C3 = 4 };

static void conv3x3_relu(const float *in, int cin, const float *w, const float *b, float *out,
                         int cout, int out_w, int out_h) {
    int in_w = out_w + 2, in_h = out_h + 2;
    for (int c = 0; c < cout; c++) {
        for (int y = 0; y < out_h; y++) {
            for (int x = 0; x < out_w; x++) {
                float acc = b[c];
                for (int ci = 0; ci < cin; ci++) {
                    for (int ky = 0; ky < 3; ky++) {
                        for (int kx = 0; kx < 3; kx++) {
                            acc = acc + w[((c * cin + ci) * 3 + ky) * 3 + kx] *
                                            in[((size_t)ci * in_h + y + ky) * in_w + x + kx];
                        }
                    }
                }
                out[((size_t)c * out_h + y) * out_w + x] = acc > 0.0f ? acc : 0.0f;
            }
        }
    }
}

static float uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)(aot_next(s) >> 8) / 16777216.0f;
}

static float *random_array(size_t n, uint64_t *s, float lo, float hi) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        p[i] = uniform(s, lo, hi);
    }
    return p;
}

static void check_size(int width, int height, uint64_t seed) {
    int ext_in[3] = {width + 6, height + 6, C0}, ext_out[3] = {width, height, C3};
    int ext_w1[4] = {3, 3, C0, C1}, ext_w2[4] = {3, 3, C1, C2}, ext_w3[4] = {3, 3, C2, C3};
    int ext_b1[1] = {C1}, ext_b2[1] = {C2}, ext_b3[1] = {C3};
    size_t n_in = (size_t)ext_in[0] * ext_in[1] * C0, n_out = (size_t)width * height * C3;
    float *in = random_array(n_in, &seed, -1.0f, 1.0f);
    float *w1 = random_array(9 * C0 * C1, &seed, -1.0f, 1.0f);
    float *w2 = random_array(9 * C1 * C2, &seed, -1.0f, 1.0f);
    float *w3 = random_array(9 * C2 * C3, &seed, -1.0f, 1.0f);
    float *b1 = random_array(C1, &seed, -0.25f, 0.25f);
    float *b2 = random_array(C2, &seed, -0.25f, 0.25f);
    float *b3 = random_array(C3, &seed, -0.25f, 0.25f);
    float *out = malloc(n_out * sizeof(float));
    memset(out, 0xff, n_out * sizeof(float));

    halide_dimension_t d[8][4];
    halide_buffer_t b[8];
    aot_make_buffer(&b[0], d[0], in, halide_type_float, 32, 3, ext_in);
    aot_make_buffer(&b[1], d[1], w1, halide_type_float, 32, 4, ext_w1);
    aot_make_buffer(&b[2], d[2], b1, halide_type_float, 32, 1, ext_b1);
    aot_make_buffer(&b[3], d[3], w2, halide_type_float, 32, 4, ext_w2);
    aot_make_buffer(&b[4], d[4], b2, halide_type_float, 32, 1, ext_b2);
    aot_make_buffer(&b[5], d[5], w3, halide_type_float, 32, 4, ext_w3);
    aot_make_buffer(&b[6], d[6], b3, halide_type_float, 32, 1, ext_b3);
    aot_make_buffer(&b[7], d[7], out, halide_type_float, 32, 3, ext_out);
    int rc = conv_chain(&b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], width, height);
    AOT_CHECK(rc == 0, "conv_chain returned %d at %dx%d", rc, width, height);

    float *c1 = malloc(sizeof(float) * C1 * (size_t)(width + 4) * (height + 4));
    float *c2 = malloc(sizeof(float) * C2 * (size_t)(width + 2) * (height + 2));
    float *want = malloc(n_out * sizeof(float));
    conv3x3_relu(in, C0, w1, b1, c1, C1, width + 4, height + 4);
    conv3x3_relu(c1, C1, w2, b2, c2, C2, width + 2, height + 2);
    conv3x3_relu(c2, C2, w3, b3, want, C3, width, height);
    for (size_t i = 0; i < n_out; i++) {
        double scale = fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0;
        double err = fabs((double)out[i] - (double)want[i]) / scale;
        AOT_CHECK(err <= 1e-4, "%dx%d [%zu]: got %g want %g", width, height, i, out[i], want[i]);
    }
    float *all[] = {in, w1, w2, w3, b1, b2, b3, out, c1, c2, want};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        free(all[i]);
    }
}

int main(void) {
    check_size(16, 12, 1);
    check_size(7, 5, 2);
    check_size(1, 1, 3);
    if (aot_failures) {
        fprintf(stderr, "conv_chain_aot: %d failures\n", aot_failures);
        return 1;
    }
    printf("conv_chain_aot: ok\n");
    return 0;
}
