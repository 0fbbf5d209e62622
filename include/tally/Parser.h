/** \file
 * Reads IR text: modules as Halide 14 prints them (with our extensions, see docs/ir-syntax.md)
 * and bare statements as Halide hands them to custom lowering passes. Diagnostics are
 * CompileErrors whose message reads `file:line:col: error: ...`.
 */
#ifndef TALLY_PARSER_H
#define TALLY_PARSER_H

#include <string>

#include "tally/Module.h"

namespace tally {

/** Parses `text`; `filename` is used in diagnostics. A text that does not start with `module`
 * is a bare statement: it becomes a module with one function whose arguments are inferred from
 * the free names of the statement. */
Module parse_module(const std::string &text, const std::string &filename = "<input>");

/** Reads and parses a file (read_text_file); throws CompileError if it cannot be read or holds
 * no pipeline. */
Module parse_module_file(const std::string &path);

/** parse_module_file for the tools that compile or run what they read (tally-run, tallyc): also
 * a CompileError, naming the path, when the module has no pipeline function (a header alone, or
 * only kernels). */
Module parse_pipeline_file(const std::string &path);

/** The whole contents of the file at `path`, for every tool that reads one. Throws CompileError
 * `PATH: error: REASON` when there is none to read: the path does not exist or cannot be opened
 * (the system's reason), names a directory or another file that is not a regular file, or
 * reading fails. */
std::string read_text_file(const std::string &path);

/** Parses a single expression in an empty scope (free names are int32 unless typed). For tests. */
Expr parse_expr(const std::string &text);

}  // namespace tally

#endif  // TALLY_PARSER_H
