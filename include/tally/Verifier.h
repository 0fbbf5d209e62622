/** \file
 * The IR verifier: every name in scope, operand types agree, loads and stores name declared
 * buffers, kernels and functions referenced exist. Runs after parsing (tally-opt `verify`) and,
 * in debug builds, after every lowering pass.
 */
#ifndef TALLY_VERIFIER_H
#define TALLY_VERIFIER_H

#include "tally/Module.h"

namespace tally {

/** Throws CompileError describing the first problem found (function, statement, name). */
void verify(const Module &m);

}  // namespace tally

#endif  // TALLY_VERIFIER_H
