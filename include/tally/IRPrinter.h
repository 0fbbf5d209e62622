/** \file
 * The text form of the IR. Output is a superset of what Halide 14's compile_to_lowered_stmt
 * prints, chosen so that the parser reads it back to a structurally equal module
 * (docs/ir-syntax.md has the grammar).
 */
#ifndef TALLY_IRPRINTER_H
#define TALLY_IRPRINTER_H

#include <cstddef>
#include <ostream>
#include <string>

#include "tally/IR.h"
#include "tally/Module.h"

namespace tally {

std::string to_string(const Expr &e);
std::string to_string(const Stmt &s);
std::string to_string(const Module &m);

std::ostream &operator<<(std::ostream &os, const Expr &e);
std::ostream &operator<<(std::ostream &os, const Stmt &s);
std::ostream &operator<<(std::ostream &os, const Module &m);

/** Is `word` reserved by the text syntax? Unquoted, a reserved word is read only as the start of
 * its statement (`if`, `for`, `free`, `atomic`, `else`, `custom_new`, ...) or, for `let`, of a
 * let; never as a name. The printer quotes a variable, load, store or call so named
 * (`` `if` ``), and the parser rejects a reserved word that does not begin its form. */
bool is_reserved_word(const std::string &word);

/** Is `name`, unquoted and followed by `(`, read as a built-in form rather than a call: a cast
 * (`int64(x)`), a broadcast (`x8(v)`), ramp, select, min, max, reinterpret or a shuffle form? A
 * call so named is printed quoted (`` `select`(a, b, c) ``). */
bool is_builtin_form(const std::string &name);

/** Halide prints a vector handle type's lanes run together with the name that follows the
 * type's `)`: `(char *)x4stringify(...)`. If `word` begins so (`x`, then a lane count with no
 * leading zero, then the end of the word or a name), the length of its `xN`; else 0. The parser
 * reads the lanes at that length (a count of 1 is a name; over 9999, an error); the printer
 * quotes a scalar handle's name that begins so (`` (char *)`x4f`(...) ``). */
size_t vector_handle_lanes_length(const std::string &word);

}  // namespace tally

#endif  // TALLY_IRPRINTER_H
