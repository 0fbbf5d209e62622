/** \file
 * Declarations shared by the source files of the Python module `tally`: the exception types, the
 * capture of runtime error messages, the conversion of Python values to targets, and the functions
 * that add each part of the API to the module.
 */
#ifndef TALLY_PYTHON_BINDINGS_SRC_TALLY_PYTHON_H
#define TALLY_PYTHON_BINDINGS_SRC_TALLY_PYTHON_H

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tally/Module.h"
#include "tally/Target.h"

namespace tally_python {

namespace py = pybind11;

/** tally.CompileError, tally.InternalError and tally.RuntimeError (set up by bind_exceptions). */
PyObject *compile_error_type();
PyObject *internal_error_type();
PyObject *runtime_error_type();

/** Registers the exception types and the translators of tally::CompileError and
 * tally::InternalError. */
void bind_exceptions(py::module_ &m);

/** Raises tally.RuntimeError(message) with attributes `code` (the negative tally_error_code_t)
 * and `code_name` (e.g. "ERROR_REQUIREMENT_FAILED"). */
[[noreturn]] void raise_runtime_error(const std::string &message, int32_t code);

/** Collects the messages the runtime reports through halide_error while it lives, instead of
 * letting them reach the previous error handler (stderr by default). Messages reported on the
 * constructing thread are its own; messages reported on other threads (thread-pool workers) while
 * no capture is active on them go to every capture alive at that moment. Holds no Python state:
 * use it with the GIL released. Captures nest (the inner one sees the messages). */
class ErrorCapture {
public:
    ErrorCapture();
    ~ErrorCapture();
    ErrorCapture(const ErrorCapture &) = delete;
    ErrorCapture &operator=(const ErrorCapture &) = delete;

    /** The captured messages joined by newlines: this thread's own ones if there are any,
     * otherwise those that arrived from other threads. Call before the destructor. */
    std::string message() const;

    struct State;

private:
    State *state;
};

/** Installs the error handler that feeds ErrorCapture (once, at import), and restores the
 * previous handler at interpreter exit. */
void install_error_handler();

/** A Target from a tally.Target, a target string, or None (`fallback`). Bad strings raise
 * CompileError; other types TypeError. */
tally::Target to_target(py::handle h, const tally::Target &fallback);

/** The type name users see for a scalar or element type: "uint16", "float32", "bool", ...;
 * "?" for an unknown type. */
std::string type_name(const tally::Type &t);

/** The Python signature-like text of a function: "blur(input: buffer<uint16, 2>, width: int32)".
 */
std::string signature(const std::string &name, const std::vector<tally::Argument> &args);

void bind_ir(py::module_ &m);
void bind_pipeline(py::module_ &m);
void bind_profiler(py::module_ &m);
/** After bind_profiler: the exports (tally.profiler.write_*) and report files (report.cpp). */
void bind_report(py::module_ &m);

}  // namespace tally_python

#endif  // TALLY_PYTHON_BINDINGS_SRC_TALLY_PYTHON_H
