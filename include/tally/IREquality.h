/** \file
 * Structural equality: same node kinds, types, names and constants, recursively. Pointer-identical
 * subtrees compare equal at once. Used by the round-trip check and by tests.
 */
#ifndef TALLY_IREQUALITY_H
#define TALLY_IREQUALITY_H

#include <string>

#include "tally/IR.h"
#include "tally/Module.h"

namespace tally {

bool equal(const Expr &a, const Expr &b);
bool equal(const Stmt &a, const Stmt &b);
/** Compares everything a module holds. On a mismatch, if `why` is given, describes the first
 * difference found (which function or kernel, and the first differing node kind). */
bool equal(const Module &a, const Module &b, std::string *why = nullptr);

}  // namespace tally

#endif  // TALLY_IREQUALITY_H
