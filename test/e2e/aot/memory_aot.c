/* AOT end-to-end test of apps/memory: memory.o and memory.h from tallyc, linked with the static
 * runtime, checked exactly against a C reimplementation. Built twice: for `-target host`, and
 * with AOT_PROFILE for `-target host-profile`, where it also reads the profiler's numbers through
 * the runtime's C API (runs, and heap allocations per Func: loop iterations x runs) and leaves the
 * report to be printed at exit. Exit code 0 on success. */
#include <stdlib.h>

#include "aot_util.h"
#include "memory.h"

static void reference(const int32_t *in, int32_t *out, int width, int height) {
    int32_t *h = malloc(sizeof(int32_t) * (size_t)width * height);
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++) {
            int lo = x - 2 > 0 ? x - 2 : 0, hi = x + 3 < width ? x + 3 : width;
            int32_t s = 0;
            for (int i = lo; i < hi; i++) {
                s += in[(size_t)y * width + i];
            }
            h[(size_t)y * width + x] = s / (hi - lo);
        }
    }
    for (int y = 0; y < height; y++) {
        int lo = y - 2 > 0 ? y - 2 : 0, hi = y + 3 < height ? y + 3 : height;
        for (int x = 0; x < width; x++) {
            int32_t s = 0;
            for (int j = lo; j < hi; j++) {
                s += h[(size_t)j * width + x];
            }
            out[(size_t)y * width + x] = s / (hi - lo);
        }
    }
    free(h);
}

static void check_size(int width, int height, int runs, uint64_t seed) {
    int ext[2] = {width, height};
    size_t n = (size_t)width * height;
    int32_t *in = malloc(n * sizeof(int32_t));
    int32_t *out = malloc(n * sizeof(int32_t));
    int32_t *want = malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        in[i] = (int32_t)(aot_next(&seed) % 100000u);
    }
    reference(in, want, width, height);
    halide_dimension_t din[2], dout[2];
    halide_buffer_t bin, bout;
    aot_make_buffer(&bin, din, in, halide_type_int, 32, 2, ext);
    aot_make_buffer(&bout, dout, out, halide_type_int, 32, 2, ext);
    for (int r = 0; r < runs; r++) {
        memset(out, 0xee, n * sizeof(int32_t));
        int rc = memory(&bin, &bout, width, height);
        AOT_CHECK(rc == 0, "memory returned %d at %dx%d", rc, width, height);
        for (size_t i = 0; i < n; i++) {
            AOT_CHECK(out[i] == want[i], "%dx%d [%zu]: got %d want %d", width, height, i, out[i],
                      want[i]);
        }
    }
    free(in);
    free(out);
    free(want);
}

#ifdef AOT_PROFILE
static void check_profile(int width, int height, int runs) {
    tally_pipeline_stats ps;
    int rc = tally_profiler_get_pipeline_stats("memory", &ps);
    AOT_CHECK(rc == 0, "no stats for pipeline memory (%d)", rc);
    if (rc != 0) {
        return;
    }
    AOT_CHECK(ps.runs == (uint64_t)runs, "runs %llu, want %d", (unsigned long long)ps.runs, runs);
    AOT_CHECK(strcmp(ps.target, "host-profile") == 0, "target %s", ps.target);
    AOT_CHECK(ps.heap_peak >= (uint64_t)width * height * 4, "heap peak %llu",
              (unsigned long long)ps.heap_peak);
    AOT_CHECK(ps.num_slots == 6, "%d slots", ps.num_slots);
    const char *names[6] = {"overhead", "horiz", "row_prefix", "row_box", "output", "col_prefix"};
    uint64_t allocs[6] = {0,
                          (uint64_t)runs,
                          (uint64_t)height * runs,
                          (uint64_t)height * runs,
                          0,
                          (uint64_t)((width + 7) / 8) * runs};
    uint64_t bytes[6] = {
        0, (uint64_t)width * height * 4, (uint64_t)(width + 1) * 4, (uint64_t)width * 8,
        0, (uint64_t)(height + 1) * 32};
    for (int s = 0; s < 6 && s < ps.num_slots; s++) {
        tally_slot_stats ss;
        AOT_CHECK(tally_profiler_get_slot_stats("memory", s, &ss) == 0, "slot %d", s);
        AOT_CHECK(strcmp(ss.name, names[s]) == 0, "slot %d is %s, want %s", s, ss.name, names[s]);
        AOT_CHECK(ss.heap.num_allocs == allocs[s], "%s: %llu allocations, want %llu", names[s],
                  (unsigned long long)ss.heap.num_allocs, (unsigned long long)allocs[s]);
        AOT_CHECK(ss.heap.total_bytes == allocs[s] * bytes[s], "%s: %llu bytes, want %llu",
                  names[s], (unsigned long long)ss.heap.total_bytes,
                  (unsigned long long)(allocs[s] * bytes[s]));
        AOT_CHECK(ss.heap.current == 0, "%s: %lld bytes still allocated", names[s],
                  (long long)ss.heap.current);
    }
    char text[8192];
    int32_t len = tally_profiler_report_to_buffer(text, sizeof(text), 0);
    AOT_CHECK(len > 0, "report length %d", len);
    const char *funcs = strstr(text, "\n  funcs ");
    const char *to_dev = funcs ? strstr(funcs, "\n  copies to device ") : NULL;
    const char *to_host = to_dev ? strstr(to_dev, "\n  copies to host ") : NULL;
    AOT_CHECK(funcs && to_dev && to_host, "sections missing or out of order:\n%s", text);
}
#endif

int main(void) {
#ifdef AOT_PROFILE
    const int runs = 3;
    check_size(37, 23, runs, 1);
    check_profile(37, 23, runs);
#else
    check_size(37, 23, 2, 1);
    check_size(1, 1, 1, 2);
    check_size(64, 64, 1, 3);
    check_size(3, 100, 1, 4);
#endif
    if (aot_failures) {
        fprintf(stderr, "memory_aot: %d failures\n", aot_failures);
        return 1;
    }
    printf("memory_aot: ok\n");
    return 0;
}
