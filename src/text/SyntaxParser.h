/** \file
 * The first stage of the parser: IR text -> parse tree. Reads the grammar of docs/ir-syntax.md
 * and nothing more; types the text leaves implicit are filled in by the elaborator
 * (Elaborator.h). Used only by the parser's entry points (Parser.cpp).
 */
#ifndef TALLY_TEXT_SYNTAXPARSER_H
#define TALLY_TEXT_SYNTAXPARSER_H

#include "text/Lexer.h"
#include "text/ParseTree.h"

namespace tally {

/** Reads all of `lex`: a module if the text starts with `module`, otherwise a bare statement
 * (a PModule with `bare` set and one nameless function). Throws a CompileError
 * `file:line:col: error: ...` at the first syntax error, or at a function or argument name
 * defined twice. Nesting deeper than 10000 levels is an error; call it on a large stack
 * (ir/LargeStack.h). */
PModule parse_syntax_module(Lexer &lex);

/** Reads one expression that spans all of `lex`. Throws like parse_syntax_module. */
PExpr parse_syntax_expr(Lexer &lex);

}  // namespace tally

#endif  // TALLY_TEXT_SYNTAXPARSER_H
