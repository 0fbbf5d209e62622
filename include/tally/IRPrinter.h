/** \file
 * The text form of the IR. Output is a superset of what Halide 14's compile_to_lowered_stmt
 * prints, chosen so that the parser reads it back to a structurally equal module
 * (docs/ir-syntax.md has the grammar).
 */
#ifndef TALLY_IRPRINTER_H
#define TALLY_IRPRINTER_H

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

}  // namespace tally

#endif  // TALLY_IRPRINTER_H
