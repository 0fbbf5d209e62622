// A program calling the library of brighten_generator.cpp as Halide users write one: Halide's
// HalideBuffer.h (Halide::Runtime::Buffer) and the library's header, the function on the
// buffers, and its metadata. test/halide builds it twice, unchanged: against the library
// tally_add_halide_library makes (Tally's runtime) and against the one Halide's own GenGen makes
// (Halide's runtime). Checks the output against a reference computed here, and that the
// metadata describes the generator's arguments; built for Tally (TALLY_REPORT_CHECK), also that
// Tally's profiler has the run, per Func; built against the multi-target library
// (TALLY_MULTITARGET_CHECK), also that the variant that ran is the one this CPU should get.
#include "HalideBuffer.h"
#include "brighten.h"

#include <cstdio>
#include <cstring>

#ifdef TALLY_REPORT_CHECK
// From tally_runtime.h, which cannot share a file with HalideRuntime.h (both define
// halide_buffer_t): the one call used here.
extern "C" int32_t tally_profiler_report_to_buffer(char *buf, size_t size, int32_t json);
#endif

namespace {

const int W = 67, H = 23, kOffset = 40;

int expected(const Halide::Runtime::Buffer<uint8_t> &in, int x, int y) {
    int s = (in(x, y) + in(x + 1, y) + 1) / 2 + kOffset;
    return s < 0 ? 0 : s > 255 ? 255 : s;
}

}  // namespace

int main() {
    Halide::Runtime::Buffer<uint8_t> input(W + 1, H), output(W, H);
    input.for_each_element([&](int x, int y) { input(x, y) = uint8_t((x * 29 + y * 53) & 0xff); });

    int r = brighten(input, kOffset, output);
    if (r != 0) {
        std::fprintf(stderr, "brighten returned %d\n", r);
        return 1;
    }
    int bad = 0;
    output.for_each_element([&](int x, int y) {
        if (output(x, y) != expected(input, x, y) && bad++ < 5) {
            std::fprintf(stderr, "at (%d, %d): %d, expected %d\n", x, y, output(x, y),
                         expected(input, x, y));
        }
    });
    const halide_filter_metadata_t *md = brighten_metadata();
    const char *names[3] = {"input", "offset", "output"};
    if (md->num_arguments != 3 || std::strcmp(md->name, "brighten") != 0) {
        std::fprintf(stderr, "metadata: %d arguments, name %s\n", md->num_arguments, md->name);
        return 1;
    }
    for (int i = 0; i < 3; i++) {
        if (std::strcmp(md->arguments[i].name, names[i]) != 0) {
            std::fprintf(stderr, "metadata argument %d is %s, expected %s\n", i,
                         md->arguments[i].name, names[i]);
            return 1;
        }
    }
#ifdef TALLY_REPORT_CHECK
    static char report[16384];
    if (tally_profiler_report_to_buffer(report, sizeof report, 0) <= 0 ||
        !std::strstr(report, "pipeline: brighten") || !std::strstr(report, "smooth") ||
        !std::strstr(report, "output")) {
        std::fprintf(stderr, "the profiler's report does not name brighten's Funcs:\n%s\n", report);
        return 1;
    }
#endif
#ifdef TALLY_MULTITARGET_CHECK
    // The library's variants, in its order of preference: the first whose ISA extensions this
    // CPU has must be the one that ran (FMA4 only AMD's 2011-2015 CPUs have; AVX every x86-64
    // CPU since about then), and no other.
    const char *variants[3] = {"brighten_x86_64_linux_fma4_profile_sse41",
                               "brighten_x86_64_linux_avx_profile_sse41",
                               "brighten_x86_64_linux_profile"};
    __builtin_cpu_init();
    int want = __builtin_cpu_supports("fma4") && __builtin_cpu_supports("sse4.1")  ? 0
               : __builtin_cpu_supports("avx") && __builtin_cpu_supports("sse4.1") ? 1
                                                                                   : 2;
    for (int i = 0; i < 3; i++) {
        char line[128];
        std::snprintf(line, sizeof line, "pipeline: %s\n", variants[i]);
        if ((std::strstr(report, line) != nullptr) != (i == want)) {
            std::fprintf(stderr, "the variant %s %s, but this CPU should run %s:\n%s\n",
                         variants[i], i == want ? "did not run" : "ran", variants[want], report);
            return 1;
        }
    }
    std::printf("brighten: the wrapper ran %s\n", variants[want]);
#endif
    std::printf("brighten: %d of %d pixels differ; metadata names %s(%s, %s, %s)\n", bad, W * H,
                md->name, md->arguments[0].name, md->arguments[1].name, md->arguments[2].name);
    return bad == 0 ? 0 : 1;
}
