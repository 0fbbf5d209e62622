/** \file
 * The compiler library's error macros.
 *
 * `user_error` / `user_assert(cond)` report bad input IR or misuse of the API and throw
 * tally::CompileError. `internal_error` / `internal_assert(cond)` report broken invariants, i.e.
 * bugs in Tally, and throw tally::InternalError with the file, line and condition text. The
 * message after `<<` is evaluated only on failure. They are never compiled out.
 *
 * A user error about a statement that came from IR text can point at it: `user_error.at(loc)`
 * (or `user_assert(c).at(loc)`) puts the statement's SourceLoc on the CompileError, and tally-opt
 * prints it as `file:line:col: error: ...`.
 */
#ifndef TALLY_ERROR_H
#define TALLY_ERROR_H

#include <sstream>
#include <stdexcept>
#include <string>

namespace tally {

/** Where a statement was written in IR text: 1-based line and column, or 0 when it was made in
 * code (the IR nodes carry one, see BaseStmtNode). */
struct SourceLoc {
    int line = 0, col = 0;
    bool known() const { return line > 0; }
};

/** Bad input or misuse of the API: the message says what the user should change. `loc` is the
 * statement it is about, when known. */
class CompileError : public std::runtime_error {
public:
    explicit CompileError(const std::string &msg, SourceLoc loc = SourceLoc())
        : std::runtime_error(msg), loc(loc) {}
    SourceLoc loc;
};

/** A broken invariant inside Tally: always a bug. */
class InternalError : public std::runtime_error {
public:
    explicit InternalError(const std::string &msg) : std::runtime_error(msg) {}
};

namespace detail {

/** Collects a message and throws when it goes out of scope at the end of the full expression. */
class ErrorReport {
public:
    ErrorReport(bool internal, const char *file, int line, const char *cond) : internal(internal) {
        if (internal) {
            msg << "Internal error at " << file << ":" << line;
            if (cond) {
                msg << " (condition failed: " << cond << ")";
            }
            msg << ": ";
        }
    }
    /** Locates a user error at a statement (ignored when the location is unknown). */
    ErrorReport &at(SourceLoc l) {
        loc = l;
        return *this;
    }
    template <typename T>
    ErrorReport &operator<<(const T &x) {
        msg << x;
        return *this;
    }
    [[noreturn]] ~ErrorReport() noexcept(false) {
        if (internal) {
            throw InternalError(msg.str());
        }
        throw CompileError(msg.str(), loc);
    }

private:
    bool internal;
    SourceLoc loc;
    std::ostringstream msg;
};

/** Lets `cond ? (void)0 : Voidify() & report << ...` type-check. */
struct Voidify {
    void operator&(ErrorReport &) {}
};

}  // namespace detail
}  // namespace tally

// Halide's Error.h defines macros of the same names (for Halide's own exceptions): in a file
// that included Halide.h first (the Halide bridge, include/tally/halide/Bridge.h), Tally's are
// not defined and Tally's errors are thrown as tally::CompileError by name.
#ifndef HALIDE_ERROR_H
#define user_error ::tally::detail::ErrorReport(false, __FILE__, __LINE__, nullptr)
#define internal_error ::tally::detail::ErrorReport(true, __FILE__, __LINE__, nullptr)
#define user_assert(c)                                                                             \
    (c) ? (void)0                                                                                  \
        : ::tally::detail::Voidify() & ::tally::detail::ErrorReport(false, __FILE__, __LINE__, #c)
#define internal_assert(c)                                                                         \
    (c) ? (void)0                                                                                  \
        : ::tally::detail::Voidify() & ::tally::detail::ErrorReport(true, __FILE__, __LINE__, #c)
#endif  // HALIDE_ERROR_H

#endif  // TALLY_ERROR_H
