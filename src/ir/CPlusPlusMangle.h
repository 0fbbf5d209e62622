/** \file
 * The symbol of a C++ function an extern call names, as the Itanium C++ ABI mangles it (Linux and
 * the other ELF targets): what Halide 14 calls for `define_extern(..., NameMangling::CPlusPlus)`
 * (its lowered text prints only the qualified name, `my_ns::stage(...)`), so that Tally's code
 * links against the same function Halide's object does.
 */
#ifndef TALLY_IR_CPLUSPLUSMANGLE_H
#define TALLY_IR_CPLUSPLUSMANGLE_H

#include <string>
#include <vector>

#include "tally/Type.h"

namespace tally {

/** `_Z...` for the function `name` (`ns::inner::f` or `f`) taking arguments of the IR types
 * `args`: scalars as the C types of their width (int32 `int`, int64 `long`, float16 `_Float16`,
 * bool `bool`), handles as pointers to the named type (`halide_buffer_t *`, `void *`, `char *`,
 * `const char *`, a qualified struct name), with the ABI's substitutions for repeated
 * components. A CompileError for a type C++ has no spelling of (a vector). */
std::string itanium_mangled_name(const std::string &name, const std::vector<Type> &args);

}  // namespace tally

#endif  // TALLY_IR_CPLUSPLUSMANGLE_H
