// Translate.cpp's entry for the bridge itself (Bridge.cpp): the statement, and the Buffers it
// names directly, which are the ones the pipeline embeds.
#ifndef TALLY_HALIDE_TRANSLATE_H
#define TALLY_HALIDE_TRANSLATE_H

#include <map>
#include <string>

#include "tally/halide/Bridge.h"

namespace tally {
namespace halide {

/** translate(s), also recording in *images every Buffer a Variable or Load of `s` names
 * directly, by name. */
Stmt translate(const Halide::Internal::Stmt &s, std::map<std::string, Halide::Buffer<>> *images);

}  // namespace halide
}  // namespace tally

#endif  // TALLY_HALIDE_TRANSLATE_H
