// _tally_halide: the Halide bridge from Python, reached as `tally.halide` (the tally module
// imports it on first use).
//
//     import halide as hl, numpy as np, tally
//     blur = tally.halide.compile(by, target="host-profile")   # a halide.Func or Pipeline
//     blur(inp, out)                                            # numpy arrays or halide.Buffers
//     print(tally.profiler.report())
//
// Two pybind11 modules meet here. Halide 21's bindings were built with pybind11 3.0 (internals
// v11), and this module is too (pybind11==3.0.1, pinned in tools/python-requirements.txt), so
// that it shares their type registry and takes their halide.Func, halide.Pipeline,
// halide.ImageParam and halide.Param objects as the C++ objects they wrap. The tally module is
// built with Debian's pybind11 2.10, another registry: what crosses to it is the translated
// tally::Module, in a capsule ("tally.Module") that tally.Module._from_capsule copies. From there
// on it is an ordinary tally.Module, compiled by Module.compile into an ordinary tally.Pipeline:
// calls, the report, stats, exports and the diff gate are the tally module's own.

#include "tally/halide/Bridge.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

namespace py = pybind11;

namespace {

const char *const kCapsuleName = "tally.Module";

[[noreturn]] void raise(py::handle type, const std::string &msg) {
    PyErr_SetString(type.ptr(), msg.c_str());
    throw py::error_already_set();
}

/** The tally module's CompileError class. */
py::object tally_compile_error() {
    return py::module_::import("tally").attr("CompileError");
}

/** A halide.Pipeline, a halide.Func or a list of halide.Funcs, as a Halide pipeline. */
Halide::Pipeline as_pipeline(py::handle obj) {
    try {
        return obj.cast<Halide::Pipeline>();
    } catch (const py::cast_error &) {
    }
    try {
        return Halide::Pipeline(obj.cast<Halide::Func>());
    } catch (const py::cast_error &) {
    }
    if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
        try {
            return Halide::Pipeline(obj.cast<std::vector<Halide::Func>>());
        } catch (const py::cast_error &) {
        }
    }
    raise(PyExc_TypeError,
          "tally.halide: expected a halide.Func, a list of them or a halide.Pipeline, not " +
              std::string(py::str(py::type::of(obj).attr("__name__"))) +
              " (from Halide 21's Python bindings, the halide module of the halide==21.0.0 "
              "wheel)");
}

/** One argument: a halide.ImageParam, halide.Param or halide.Argument. */
Halide::Argument as_argument(py::handle obj) {
    try {
        return obj.cast<Halide::Argument>();
    } catch (const py::cast_error &) {
    }
    try {
        return Halide::Argument(obj.cast<Halide::ImageParam>());
    } catch (const py::cast_error &) {
    }
    try {
        return Halide::Argument(obj.cast<Halide::Param<>>());
    } catch (const py::cast_error &) {
    }
    raise(PyExc_TypeError, "tally.halide: an argument must be a halide.ImageParam, halide.Param "
                           "or halide.Argument, not " +
                               std::string(py::str(py::type::of(obj).attr("__name__"))));
}

/** translate() as Python sees it: the translated module, as a tally.Module. */
py::object translate(py::object pipeline, const std::string &target, py::object arguments,
                     const std::string &name) {
    Halide::Pipeline p = as_pipeline(pipeline);
    std::vector<Halide::Argument> args;
    if (arguments.is_none()) {
        args = p.infer_arguments();
    } else {
        for (py::handle a : arguments) {
            args.push_back(as_argument(a));
        }
    }
    tally::halide::Options options;
    options.name = name;
    tally::Module *m = nullptr;
    try {
        m = new tally::Module(tally::halide::translate(p, args, target, options));
    } catch (const tally::CompileError &e) {
        raise(tally_compile_error(), e.what());
    } catch (const Halide::Error &e) {
        // Halide's own complaint about the pipeline or schedule, as Halide's module raises it.
        raise(py::module_::import("halide").attr("HalideError"), e.what());
    }
    py::capsule capsule(m, kCapsuleName, [](PyObject *c) {
        delete static_cast<tally::Module *>(PyCapsule_GetPointer(c, kCapsuleName));
    });
    return py::module_::import("tally").attr("Module").attr("_from_capsule")(capsule);
}

}  // namespace

PYBIND11_MODULE(_tally_halide, m) {
    m.doc() = R"doc(tally.halide: Halide 21 pipelines compiled and profiled by Tally.

A halide.Func (or Pipeline) is lowered by Halide to its conceptual statement and translated in
memory into Tally's IR (float constants exactly); Tally lowers, compiles and profiles it.

    import halide as hl, numpy as np, tally
    p = tally.halide.compile(f, target="host-profile")
    p(inp, out)                  # numpy arrays or halide.Buffers; inputs, then outputs
    print(tally.profiler.report()))doc";

    m.def("translate", &translate, py::arg("pipeline"), py::arg("target") = "host", py::kw_only(),
          py::arg("arguments") = py::none(), py::arg("name") = "",
          R"doc(The pipeline lowered by Halide and translated into a tally.Module, not yet lowered
by Tally (print it, or compile it with Module.compile).

Args:
    pipeline: a halide.Func, a list of them, or a halide.Pipeline.
    target: a Tally target string ('host', 'host-profile', 'host-vulkan-profile', ...).
    arguments: the pipeline's inputs in order (halide.ImageParam, halide.Param); None: those the
        pipeline uses, as halide's infer_arguments() orders them. The outputs follow them.
    name: the function's (and the report's) name; '' is the first output's name.

Raises:
    tally.CompileError: a node, intrinsic or target Tally does not handle, named.
    halide.HalideError: Halide rejects the pipeline or its schedule.)doc");

    m.def(
        "compile",
        [](py::object pipeline, const std::string &target, py::object arguments,
           const std::string &name, int opt_level) {
            py::object module = translate(pipeline, target, arguments, name);
            return module.attr("compile")(target, py::arg("opt_level") = opt_level);
        },
        py::arg("pipeline"), py::arg("target") = "host", py::kw_only(),
        py::arg("arguments") = py::none(), py::arg("name") = "", py::arg("opt_level") = 3,
        R"doc(Compiles a Halide pipeline with Tally; returns a tally.Pipeline.

Call it on the inputs then the outputs (numpy arrays or halide.Buffers; numpy's last axis is
Halide's dimension 0, as halide.Buffer exports it), by position or by name; p.arguments lists
them. With a profiling target ('host-profile', 'host-vulkan-profile', ...) tally.profiler reads
the runs and the report prints when the process exits.

Args: as translate(), and opt_level, LLVM's optimisation level 0-3.

Raises:
    tally.CompileError: a node, intrinsic or target Tally does not handle, named; nothing is
        compiled then.
    halide.HalideError: Halide rejects the pipeline or its schedule.)doc");
}
