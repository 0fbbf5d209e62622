// The Python module `tally`: its docstring, the exception types, the runtime error capture, and
// the few top-level functions that belong to no other part (device availability, thread count).
//
// Error handling has two sides. Compiler errors are C++ exceptions (tally::CompileError for bad
// input, tally::InternalError for Tally's bugs) and are translated to Python exceptions of the same
// names. The runtime never throws: it reports a message through halide_error and returns a negative
// code. The module installs an error handler once, at import; while a pipeline call is in flight
// the handler collects the messages (ErrorCapture) so that the call can raise tally.RuntimeError
// with them; at all other times it forwards to the handler that was installed before (stderr).

#include <pybind11/pybind11.h>

#include <algorithm>
#include <mutex>

#include "tally/Error.h"
#include "tally_python.h"
#include "tally_runtime.h"

#ifndef TALLY_VERSION
#define TALLY_VERSION "unknown"
#endif

namespace tally_python {

// ---- exceptions -------------------------------------------------------------------------------

namespace {

PyObject *compile_error_obj = nullptr;
PyObject *internal_error_obj = nullptr;
PyObject *runtime_error_obj = nullptr;

PyObject *new_exception(py::module_ &m, const char *name, const char *doc, PyObject *base) {
    std::string qualified = std::string("tally.") + name;
    PyObject *type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr);
    if (!type) {
        throw py::error_already_set();
    }
    // The module keeps a reference; the raw pointer stays valid for the process (modules with
    // C++ state are never unloaded).
    m.add_object(name, py::handle(type));
    return type;
}

}  // namespace

PyObject *compile_error_type() {
    return compile_error_obj;
}
PyObject *internal_error_type() {
    return internal_error_obj;
}
PyObject *runtime_error_type() {
    return runtime_error_obj;
}

void bind_exceptions(py::module_ &m) {
    compile_error_obj = new_exception(
        m, "CompileError",
        "Bad input to the compiler: IR that does not parse or verify, an unknown target string, "
        "a pass precondition that does not hold. Parser messages read "
        "'file:line:col: error: ...'.",
        PyExc_Exception);
    internal_error_obj = new_exception(
        m, "InternalError",
        "A broken invariant inside Tally (always a bug in Tally). The message names the source "
        "file, line and failed condition.",
        PyExc_Exception);
    runtime_error_obj = new_exception(
        m, "RuntimeError",
        "A compiled pipeline returned an error. str(e) is the message the runtime reported "
        "(joined by newlines if there were several); e.code is the negative error code and "
        "e.code_name its name (e.g. 'ERROR_REQUIREMENT_FAILED'). Subclass of the built-in "
        "RuntimeError.",
        PyExc_RuntimeError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) {
                std::rethrow_exception(p);
            }
        } catch (const tally::CompileError &e) {
            PyErr_SetString(compile_error_obj, e.what());
        } catch (const tally::InternalError &e) {
            PyErr_SetString(internal_error_obj, e.what());
        }
    });
}

void raise_runtime_error(const std::string &message, int32_t code) {
    py::object type = py::reinterpret_borrow<py::object>(runtime_error_obj);
    py::object exc = type(message);
    exc.attr("code") = code;
    exc.attr("code_name") = tally_error_code_name(code);
    PyErr_SetObject(runtime_error_obj, exc.ptr());
    throw py::error_already_set();
}

// ---- runtime error capture --------------------------------------------------------------------

struct ErrorCapture::State {
    /** Messages reported on the capturing thread; touched by that thread only. */
    std::vector<std::string> own;
    /** Messages reported on other threads; guarded by Registry::mu. */
    std::vector<std::string> foreign;
    /** The capture this one is nested in, on the same thread. */
    State *outer = nullptr;
};

namespace {

struct Registry {
    std::mutex mu;
    std::vector<ErrorCapture::State *> active;
    tally_message_handler_t previous = nullptr;
};

// Leaked on purpose: the runtime may report errors from its exit handlers, after static
// destructors have run.
Registry &registry() {
    static Registry *r = new Registry;
    return *r;
}

thread_local ErrorCapture::State *current_capture = nullptr;

std::string trimmed(const char *msg) {
    std::string s = msg ? msg : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) {
        s.pop_back();
    }
    return s;
}

void on_runtime_error(void *user_context, const char *msg) {
    if (current_capture) {
        current_capture->own.push_back(trimmed(msg));
        return;
    }
    Registry &r = registry();
    std::unique_lock<std::mutex> lock(r.mu);
    if (!r.active.empty()) {
        for (ErrorCapture::State *s : r.active) {
            s->foreign.push_back(trimmed(msg));
        }
        return;
    }
    tally_message_handler_t previous = r.previous;
    lock.unlock();
    if (previous) {
        previous(user_context, msg);
    }
}

std::string join(const std::vector<std::string> &v) {
    std::string out;
    for (const std::string &s : v) {
        if (!out.empty()) {
            out += "\n";
        }
        out += s;
    }
    return out;
}

}  // namespace

ErrorCapture::ErrorCapture() : state(new State) {
    state->outer = current_capture;
    current_capture = state;
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.active.push_back(state);
}

ErrorCapture::~ErrorCapture() {
    {
        Registry &r = registry();
        std::lock_guard<std::mutex> lock(r.mu);
        r.active.erase(std::find(r.active.begin(), r.active.end(), state));
    }
    current_capture = state->outer;
    if (state->outer) {
        // The enclosing capture sees what this one saw, as if this one had not existed.
        for (std::string &s : state->own) {
            state->outer->own.push_back(std::move(s));
        }
    }
    delete state;
}

std::string ErrorCapture::message() const {
    if (!state->own.empty()) {
        return join(state->own);
    }
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    return join(state->foreign);
}

void install_error_handler() {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.previous) {
        return;
    }
    r.previous = tally_set_error_handler(on_runtime_error);
    if (r.previous == on_runtime_error) {
        // Already ours (a second interpreter in the process): forward to the runtime's default.
        r.previous = tally_set_error_handler(nullptr);
        tally_set_error_handler(on_runtime_error);
    }
}

}  // namespace tally_python

namespace py = pybind11;
using namespace tally_python;

PYBIND11_MODULE(tally, m) {
    m.doc() = R"doc(Tally: compile and profile Halide-style lowered pipelines from Python.

Parse IR text into a Module, print it, verify it, lower it for a target (host/device copies, GPU
offload, profiling probes) or run single passes, JIT-compile it into a Pipeline and call that on
numpy arrays; read the sampling profiler's numbers and report.

    import numpy as np, tally
    m = tally.parse("apps/blur/blur.stmt")
    blur = m.compile("host-profile")
    inp = np.random.randint(0, 65536, (770, 1026), dtype=np.uint16)
    out = np.empty((768, 1024), dtype=np.uint16)
    blur(inp, out, 1024, 768)           # or blur(input=inp, output=out, width=1024, height=768)
    print(tally.profiler.report())
    tally.profiler.stats()["blur"]["sections"]["funcs"]["blur_x"]["time_ms"]

Buffers are passed without copying: numpy's last axis is the pipeline's dimension 0. Compiler
errors raise tally.CompileError, failing pipelines tally.RuntimeError.)doc";
    m.attr("__version__") = TALLY_VERSION;
    m.attr("RUNTIME_ABI_VERSION") = TALLY_RUNTIME_ABI_VERSION;

    bind_exceptions(m);
    install_error_handler();
    bind_ir(m);
    bind_pipeline(m);
    bind_profiler(m);
    bind_report(m);

    // tally.halide: the Halide bridge's module (_tally_halide, built where Halide 21 is
    // installed), imported on first use so that `import tally` never loads Halide.
    m.def(
        "__getattr__",
        [](const std::string &name) -> py::object {
            if (name != "halide") {
                throw py::attribute_error("module 'tally' has no attribute '" + name + "'");
            }
            py::module_ bridge;
            try {
                bridge = py::module_::import("_tally_halide");
            } catch (py::error_already_set &e) {
                if (!e.matches(PyExc_ImportError)) {
                    throw;
                }
                throw py::import_error(
                    "tally.halide needs the Halide bridge (_tally_halide), which is built where "
                    "Halide 21 is installed (./run.sh deps; pip install halide==21.0.0): " +
                    std::string(e.what()));
            }
            py::module_::import("sys").attr("modules")["tally.halide"] = bridge;
            py::module_::import("tally").attr("halide") = bridge;
            return std::move(bridge);
        },
        py::arg("name"));

    m.def(
        "vulkan_available",
        [] {
            py::gil_scoped_release nogil;
            return halide_vulkan_device_interface() != nullptr;
        },
        R"doc(True when the runtime can use Vulkan here (a loader and a device, e.g. lavapipe).

The first call initializes the Vulkan device interface; when it is unusable, the runtime reports
why once through its error handler (printed to stderr).)doc");
    m.def(
        "cuda_available",
        [] {
            py::gil_scoped_release nogil;
            return halide_cuda_device_interface() != nullptr;
        },
        R"doc(True when the runtime can use CUDA here (a driver and a device).

As for vulkan_available, the reason it is not is reported once to stderr.)doc");
    m.def(
        "opencl_available",
        [] {
            py::gil_scoped_release nogil;
            return halide_opencl_device_interface() != nullptr;
        },
        R"doc(True when the runtime can use OpenCL here (the ICD loader, a platform and a device, e.g.
PoCL; chosen by HL_OCL_PLATFORM_NAME, HL_OCL_DEVICE_TYPE and HL_GPU_DEVICE as Halide does).

As for vulkan_available, the reason it is not is reported once to stderr.)doc");
    m.def(
        "set_num_threads",
        [](int n) {
            py::gil_scoped_release nogil;
            return tally_set_num_threads(n);
        },
        py::arg("n"),
        R"doc(Sets the number of threads (the caller included) that parallel loops use; n <= 0
restores the default (TALLY_NUM_THREADS, else one per core). Returns the previous setting. Must
not be called while a pipeline runs.)doc");
}
