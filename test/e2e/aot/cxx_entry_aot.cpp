// AOT end-to-end test of C++ entry points: test/e2e/aot/cxx_entry.stmt is Halide 14's lowered
// text for
//   out(x, y) = select(b, cast<float>(in(x, y)) * s + k + u, 0.f)   (in: uint8, 2-D)
//   k.set_range(-5, 5); s.set_range(0.0f, 2.0f);
// compiled by Halide as `tally_e2e::inner::cxx_entry` for
// x86-64-linux-sse41-avx-avx2-c_plus_plus_name_mangling-user_context, whose object defines
//   _ZN9tally_e2e5inner9cxx_entryEPKvP15halide_buffer_tiftbS4_
//   _ZN9tally_e2e5inner14cxx_entry_argvEPPv
// (the lit test tally-run/cxx-entry-points.test checks that Tally's object defines the same).
// Here tallyc's object and header for host-c_plus_plus_name_mangling-user_context are linked
// from C++: the header declares the functions in their namespaces with the parameter types
// they were mangled from, so this links only if the two agree. Both entry points run, checked
// exactly (every value is an integer or a half: exact in float32). Exit code 0 on success.
#include <string>
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

/** Its metadata describes the arguments as Halide's does (the user context a handle, then the
 * input buffer, the scalars, the output buffer), k's and s's ranges as Halide's metadata holds
 * them, no defaults or estimates: as in Halide's, each buffer has an array of rank * 2 estimate
 * pointers, all null. */
void check_metadata() {
    const halide_filter_metadata_t *md = tally_e2e::inner::cxx_entry_metadata();
    AOT_CHECK(md->version == 1, "version %d", md->version);
    AOT_CHECK(std::string(md->name) == "cxx_entry", "name %s", md->name);
    struct Want {
        const char *name;
        int kind, dimensions, code, bits;
    };
    const Want want[] = {
        {"__user_context", halide_argument_kind_input_scalar, 0, halide_type_handle, 64},
        {"in", halide_argument_kind_input_buffer, 2, halide_type_uint, 8},
        {"k", halide_argument_kind_input_scalar, 0, halide_type_int, 32},
        {"s", halide_argument_kind_input_scalar, 0, halide_type_float, 32},
        {"u", halide_argument_kind_input_scalar, 0, halide_type_uint, 16},
        {"b", halide_argument_kind_input_scalar, 0, halide_type_uint, 1},
        {"out", halide_argument_kind_output_buffer, 2, halide_type_float, 32}};
    AOT_CHECK(md->num_arguments == 7, "%d arguments", md->num_arguments);
    for (int i = 0; i < 7 && i < md->num_arguments; i++) {
        const halide_filter_argument_t &a = md->arguments[i];
        AOT_CHECK(std::string(a.name) == want[i].name && a.kind == want[i].kind &&
                      a.dimensions == want[i].dimensions && a.type.code == want[i].code &&
                      a.type.bits == want[i].bits && a.type.lanes == 1,
                  "argument %d: %s kind %d rank %d type %d/%d/%d", i, a.name, a.kind, a.dimensions,
                  a.type.code, a.type.bits, a.type.lanes);
        bool ranged = i == 2 || i == 3;  // k, s
        AOT_CHECK(!a.scalar_def && !a.scalar_estimate && !a.scalar_min == !ranged &&
                      !a.scalar_max == !ranged,
                  "argument %d: scalar values %p %p %p %p", i, (const void *)a.scalar_def,
                  (const void *)a.scalar_min, (const void *)a.scalar_max,
                  (const void *)a.scalar_estimate);
        bool buffer = want[i].kind != halide_argument_kind_input_scalar;
        AOT_CHECK(!a.buffer_estimates == !buffer, "argument %d: buffer_estimates %p", i,
                  (const void *)a.buffer_estimates);
        for (int k = 0; buffer && a.buffer_estimates && k < 2 * a.dimensions; k++) {
            AOT_CHECK(!a.buffer_estimates[k], "argument %d: estimate %d given", i, k);
        }
    }
    // Halide's union holds the value in its own type, zero above (k's min: 0xfffffffb).
    if (md->num_arguments == 7 && md->arguments[2].scalar_min && md->arguments[3].scalar_max) {
        const halide_filter_argument_t &k = md->arguments[2], &s = md->arguments[3];
        AOT_CHECK(k.scalar_min->u.u64 == 0xfffffffbull && k.scalar_max->u.u64 == 5,
                  "k's range %llx %llx", (unsigned long long)k.scalar_min->u.u64,
                  (unsigned long long)k.scalar_max->u.u64);
        AOT_CHECK(s.scalar_min->u.f32 == 0.0f && s.scalar_max->u.f32 == 2.0f &&
                      s.scalar_max->u.u64 >> 32 == 0,
                  "s's range %g %g", double(s.scalar_min->u.f32), double(s.scalar_max->u.f32));
    }
}

}  // namespace

int main() {
    check_metadata();
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
