/** \file
 * The second stage of the parser: parse tree -> typed IR. Infers the types Halide's printed IR
 * leaves implicit (variables, calls, loads, the element types of pipeline buffers, untyped
 * function arguments) and reports type errors at their source location. Used only by the
 * parser's entry points (Parser.cpp) and by tests.
 */
#ifndef TALLY_TEXT_ELABORATOR_H
#define TALLY_TEXT_ELABORATOR_H

#include <optional>

#include "tally/Expr.h"
#include "tally/Module.h"
#include "text/Lexer.h"
#include "text/ParseTree.h"

namespace tally {

struct ElaborateOptions {
    /** The learning rounds allowed before elaboration stops with a CompileError. Unset: one
     * per buffer name whose type the module could teach, plus one, which learning cannot
     * exceed. Tests set it lower to see the error. */
    std::optional<int> max_learning_rounds;
};

/** Types the tree `pm` that parse_syntax_module read from `lex` (whose file name the
 * diagnostics carry) and builds its Module. Throws a CompileError `file:line:col: error: ...`
 * at the first type error or type that cannot be inferred. Recurses as deep as the tree;
 * call it on a large stack (ir/LargeStack.h). */
Module elaborate_module(const PModule &pm, const Lexer &lex, const ElaborateOptions &opts = {});

/** Types one expression in an empty scope (free names are int32 unless typed). */
Expr elaborate_expr(const PExpr &e, const Lexer &lex);

}  // namespace tally

#endif  // TALLY_TEXT_ELABORATOR_H
