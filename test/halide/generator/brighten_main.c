/* A program calling the library tally_add_halide_library built from brighten_generator.cpp, as it
 * would call the one add_halide_library builds: the header's function on halide_buffer_t, and its
 * metadata. Checks the output against a reference computed here, and that the metadata describes
 * the generator's arguments. Exit status 0 when everything matches. */
#include <stdio.h>
#include <string.h>

#include "brighten.h"

enum { W = 67, H = 23 };

static int expected(const uint8_t *in, int x, int y, int offset) {
    int s = (in[y * (W + 1) + x] + in[y * (W + 1) + x + 1] + 1) / 2 + offset;
    return s < 0 ? 0 : s > 255 ? 255 : s;
}

int main(void) {
    static uint8_t in[H][W + 1], out[H][W];
    for (int y = 0; y < H; y++) {
        for (int x = 0; x <= W; x++) {
            in[y][x] = (uint8_t)((x * 29 + y * 53) & 0xff);
        }
    }
    halide_dimension_t in_dims[2] = {{0, W + 1, 1, 0}, {0, H, W + 1, 0}};
    halide_dimension_t out_dims[2] = {{0, W, 1, 0}, {0, H, W, 0}};
    halide_buffer_t input = {0}, output = {0};
    input.host = &in[0][0];
    input.type.code = halide_type_uint;
    input.type.bits = 8;
    input.type.lanes = 1;
    input.dimensions = 2;
    input.dim = in_dims;
    output = input;
    output.host = &out[0][0];
    output.dim = out_dims;

    const int offset = 40;
    int r = brighten(&input, offset, &output);
    if (r != 0) {
        fprintf(stderr, "brighten returned %d\n", r);
        return 1;
    }
    int bad = 0;
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            if (out[y][x] != expected(&in[0][0], x, y, offset) && bad++ < 5) {
                fprintf(stderr, "at (%d, %d): %d, expected %d\n", x, y, out[y][x],
                        expected(&in[0][0], x, y, offset));
            }
        }
    }
    const struct halide_filter_metadata_t *md = brighten_metadata();
    const char *names[3] = {"input", "offset", "output"};
    if (md->num_arguments != 3 || strcmp(md->name, "brighten") != 0) {
        fprintf(stderr, "metadata: %d arguments, name %s\n", md->num_arguments, md->name);
        return 1;
    }
    for (int i = 0; i < 3; i++) {
        if (strcmp(md->arguments[i].name, names[i]) != 0) {
            fprintf(stderr, "metadata argument %d is %s, expected %s\n", i, md->arguments[i].name,
                    names[i]);
            return 1;
        }
    }
#ifdef TALLY_RUNTIME_ABI_VERSION
    /* Built through Tally with FEATURES profile: Tally's profiler has the run, per Func. */
    static char report[16384];
    if (tally_profiler_report_to_buffer(report, sizeof report, 0) <= 0 ||
        !strstr(report, "pipeline: brighten") || !strstr(report, "smooth") ||
        !strstr(report, "output")) {
        fprintf(stderr, "the profiler's report does not name brighten's Funcs:\n%s\n", report);
        return 1;
    }
#endif
    printf("brighten: %d of %d pixels differ; metadata names %s(%s, %s, %s)\n", bad, W * H,
           md->name, md->arguments[0].name, md->arguments[1].name, md->arguments[2].name);
    return bad == 0 ? 0 : 1;
}
