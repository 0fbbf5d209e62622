// The C++ functions of the conformance corpus's extern stages (define_extern with
// NameMangling::CPlusPlus): like extern_stages.c, one home for both sides (Halide's corpus
// library and libconformance_externs.so), but compiled as C++, so that each is defined under the
// symbol g++ mangles for it, the one Halide's object and Tally's code both call.

#include <cstddef>
#include <cstdint>

#include "tally_runtime.h"

namespace tally_corpus {

/** out(x, y) = in(x, y) * k over float32, a 2-D region; a bounds query (input host NULL) asks for
 * the output's region of the input. */
int scale_stage(halide_buffer_t *in, int32_t k, halide_buffer_t *out) {
    if (in->dimensions != 2 || out->dimensions != 2 || in->type.bits != 32 ||
        out->type.bits != 32) {
        return -1;
    }
    if (in->host == nullptr && in->device == 0) {
        for (int d = 0; d < 2; d++) {
            in->dim[d].min = out->dim[d].min;
            in->dim[d].extent = out->dim[d].extent;
        }
        return 0;
    }
    const halide_dimension_t *id = in->dim, *od = out->dim;
    for (int32_t y = od[1].min; y < od[1].min + od[1].extent; y++) {
        for (int32_t x = od[0].min; x < od[0].min + od[0].extent; x++) {
            float v = reinterpret_cast<const float *>(
                in->host)[std::ptrdiff_t(x - id[0].min) * id[0].stride +
                          std::ptrdiff_t(y - id[1].min) * id[1].stride];
            reinterpret_cast<float *>(out->host)[std::ptrdiff_t(x - od[0].min) * od[0].stride +
                                                 std::ptrdiff_t(y - od[1].min) * od[1].stride] =
                v * float(k);
        }
    }
    return 0;
}

}  // namespace tally_corpus
