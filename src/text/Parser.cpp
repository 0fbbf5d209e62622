// The parser's entry points (tally/Parser.h): text -> Module, in two stages.
//
//  1. Syntax (SyntaxParser.cpp): a recursive-descent parser builds the parse tree
//     (ParseTree.h), an untyped mirror of the text with source locations. Syntax errors are
//     reported here.
//  2. Elaboration (Elaborator.cpp): the tree is typed, Halide's implicit types are inferred, and
//     the IR is built. Type errors are reported here.
//
// Both stages recurse as deep as the text nests, so each entry runs them on a large stack. The
// lexer outlives both: the elaborator reports its errors through it, with the same file name.

#include "tally/Parser.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ir/LargeStack.h"
#include "tally/Error.h"
#include "text/Elaborator.h"
#include "text/Lexer.h"
#include "text/SyntaxParser.h"

namespace tally {

Module parse_module(const std::string &text, const std::string &filename) {
    return with_large_stack([&]() {
        Lexer lex(text, filename);
        PModule pm = parse_syntax_module(lex);
        return elaborate_module(pm, lex);
    });
}

std::string read_text_file(const std::string &path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        const int err = errno;
        user_error << path << ": error: cannot open file: " << std::strerror(err);
    }
    if (S_ISDIR(st.st_mode)) {
        user_error << path << ": error: is a directory, not a file";
    }
    if (!S_ISREG(st.st_mode)) {
        user_error << path << ": error: is not a regular file";
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        const int err = errno;
        user_error << path << ": error: cannot open file: " << std::strerror(err);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
        user_error << path << ": error: cannot read file";
    }
    return ss.str();
}

Module parse_module_file(const std::string &path) {
    return parse_module(read_text_file(path), path);
}

Module parse_pipeline_file(const std::string &path) {
    Module m = parse_module_file(path);
    if (m.functions.empty()) {
        user_error << path << ": error: module '" << m.name
                   << "' has no pipeline function: nothing to compile or run";
    }
    return m;
}

Expr parse_expr(const std::string &text) {
    return with_large_stack([&]() {
        Lexer lex(text, "<expr>");
        PExpr pe = parse_syntax_expr(lex);
        return elaborate_expr(pe, lex);
    });
}

}  // namespace tally
