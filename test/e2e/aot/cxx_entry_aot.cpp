// AOT end-to-end test of C++ entry points: test/e2e/aot/cxx_entry.stmt is Halide 14's lowered
// text for
//   out(x, y) = select(b, cast<float>(in(x, y)) * s + k + u, 0.f)   (in: uint8, 2-D)
// compiled by Halide as `tally_e2e::inner::cxx_entry` for
// x86-64-linux-sse41-avx-avx2-c_plus_plus_name_mangling-user_context, whose object defines
//   _ZN9tally_e2e5inner9cxx_entryEPKvP15halide_buffer_tiftbS4_
//   _ZN9tally_e2e5inner14cxx_entry_argvEPPv
// (the lit test tally-run/cxx-entry-points.test checks that Tally's object defines the same).
// Here tallyc's object and header for host-c_plus_plus_name_mangling-user_context are linked
// from C++: the header declares the functions in their namespaces with the parameter types
// they were mangled from, so this links only if the two agree. Both entry points run, checked
// exactly (every value is an integer or a half: exact in float32). Exit code 0 on success.
#include <vector>

#include "aot_util.h"
#include "cxx_entry.h"

namespace {

void check(int width, int height, bool b, bool through_argv, uint64_t seed) {
    int ext[2] = {width, height};
    std::vector<uint8_t> in(size_t(width) * height);
    std::vector<float> out(in.size(), -1.0f);
    for (uint8_t &v : in) {
        v = uint8_t(aot_next(&seed));
    }
    halide_dimension_t din[2], dout[2];
    halide_buffer_t bin, bout;
    aot_make_buffer(&bin, din, in.data(), halide_type_uint, 8, 2, ext);
    aot_make_buffer(&bout, dout, out.data(), halide_type_float, 32, 2, ext);
    int32_t k = -3;
    float s = 0.5f;
    uint16_t u = 7;
    int marker = 0;
    const void *user_context = &marker;
    int rc;
    if (through_argv) {
        void *args[] = {&user_context, &bin, &k, &s, &u, &b, &bout};
        rc = tally_e2e::inner::cxx_entry_argv(args);
    } else {
        rc = tally_e2e::inner::cxx_entry(user_context, &bin, k, s, u, b, &bout);
    }
    AOT_CHECK(rc == 0, "cxx_entry returned %d", rc);
    for (size_t i = 0; i < in.size(); i++) {
        float want = b ? float(in[i]) * s + float(k) + float(u) : 0.0f;
        AOT_CHECK(out[i] == want, "%dx%d b=%d argv=%d [%zu]: got %g want %g", width, height, int(b),
                  int(through_argv), i, double(out[i]), double(want));
    }
}

}  // namespace

int main() {
    check(37, 5, true, false, 1);
    check(37, 5, true, true, 2);
    check(8, 3, false, false, 3);
    check(8, 3, false, true, 4);
    if (aot_failures) {
        fprintf(stderr, "cxx_entry_aot: %d failures\n", aot_failures);
        return 1;
    }
    printf("cxx_entry_aot: ok\n");
    return 0;
}
