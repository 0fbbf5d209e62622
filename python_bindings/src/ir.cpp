// The IR side of the Python module: Target, Module (with its functions, kernels and arguments),
// parse, lower and the tally.passes submodule.
//
// Modules are values: every pass returns a new Module and none of them is modified in place, so
// Python code can keep the module before a pass and compare (`==` is structural equality, as the
// round-trip check uses). The C++ calls that do real work (parsing, passes, verification) run with
// the GIL released; the Module they read is owned by its Python object, which the call keeps alive,
// and cannot change meanwhile because nothing in Python mutates a Module.

#include <pybind11/stl.h>

#include <algorithm>
#include <sstream>

#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally/Passes.h"
#include "tally/Verifier.h"
#include "tally_python.h"

namespace tally_python {

using tally::Argument;
using tally::Kernel;
using tally::LoweredFunc;
using tally::Module;
using tally::Target;

std::string type_name(const tally::Type &t) {
    if (!t.is_valid()) {
        return "?";
    }
    if (t.is_bool() && t.is_scalar()) {
        return "bool";
    }
    return t.to_string();
}

namespace {

std::string argument_text(const Argument &a) {
    std::ostringstream s;
    s << a.name << ": ";
    if (a.is_buffer()) {
        s << "buffer<" << type_name(a.type);
        if (a.dimensions >= 0) {
            s << ", " << a.dimensions;
        }
        s << ">";
    } else {
        s << type_name(a.type);
    }
    return s.str();
}

std::string quoted(const std::string &s) {
    return py::repr(py::str(s)).cast<std::string>();
}

}  // namespace

std::string signature(const std::string &name, const std::vector<Argument> &args) {
    std::string s = name + "(";
    for (size_t i = 0; i < args.size(); i++) {
        s += (i ? ", " : "") + argument_text(args[i]);
    }
    return s + ")";
}

Target to_target(py::handle h, const Target &fallback) {
    if (h.is_none()) {
        return fallback;
    }
    if (py::isinstance<Target>(h)) {
        return h.cast<Target>();
    }
    if (py::isinstance<py::str>(h)) {
        return Target::parse(h.cast<std::string>());
    }
    throw py::type_error("expected a tally.Target or a target string such as 'host-profile', got " +
                         std::string(py::str(py::type::of(h).attr("__name__"))));
}

namespace {

// ---- parse ------------------------------------------------------------------------------------

Module parse(py::object source, py::object filename) {
    py::module_ os = py::module_::import("os");
    bool is_path_like = !py::isinstance<py::str>(source) && py::hasattr(source, "__fspath__");
    if (!is_path_like && !py::isinstance<py::str>(source)) {
        throw py::type_error("parse() expects IR text, a file path (str) or an os.PathLike, got " +
                             std::string(py::str(py::type::of(source).attr("__name__"))));
    }
    std::string s = py::str(os.attr("fspath")(source));
    bool is_file = is_path_like;
    if (!is_path_like && s.find('\n') == std::string::npos) {
        // An existing directory is meant as a path too: read_text_file says it is no file.
        is_file = os.attr("path").attr("isfile")(s).cast<bool>() ||
                  os.attr("path").attr("isdir")(s).cast<bool>();
        // A one-line string ending in .stmt is meant as a path: say the file is missing rather
        // than report a syntax error in the name.
        const std::string ext = ".stmt";
        if (!is_file && s.size() > ext.size() &&
            s.compare(s.size() - ext.size(), ext.size(), ext) == 0) {
            PyErr_SetObject(PyExc_FileNotFoundError, py::make_tuple(2, "no such IR file", s).ptr());
            throw py::error_already_set();
        }
    }
    std::string name = filename.is_none() ? std::string() : py::str(filename).cast<std::string>();
    py::gil_scoped_release nogil;
    if (is_file) {
        return tally::parse_module_file(s);
    }
    return tally::parse_module(s, name.empty() ? "<string>" : name);
}

// ---- passes -----------------------------------------------------------------------------------

Module lower(const Module &m, py::object target, bool inject_device_sync, bool verify_each_pass,
             int debug_level) {
    Target t = to_target(target, m.target);
    tally::LowerOptions opts;
    opts.profiling.inject_device_sync = inject_device_sync;
    opts.verify_each_pass = verify_each_pass;
    opts.debug_level = debug_level;
    py::gil_scoped_release nogil;
    return tally::lower(m, t, opts);
}

const char *const lower_doc = R"doc(Lowers `module` for `target` and returns the lowered Module.

Runs inject_host_dev_copies, offload_gpu_loops and, when the target asks for profiling
(`profile` or `profile_by_timer`), inject_profiling; the target replaces the module's own.

Args:
    module: the Module to lower.
    target: a tally.Target or a target string ('host-profile', 'host-vulkan-profile', ...);
        None uses the module's target.
    inject_device_sync: add a buffer-free halide_device_sync_global after every kernel launch and
        copy to the device when profiling (switch off only to see the misattribution it fixes).
    verify_each_pass: run the IR verifier after every pass.
    debug_level: 2 or more prints the IR after each pass to stderr.

Raises:
    CompileError: the target asks for a device API Tally has no back end for, or a pass rejects
        the IR.)doc";

/** The module, with its target replaced when `target` is not None (as tally-opt --target). */
Module retargeted(const Module &m, py::handle target) {
    if (target.is_none()) {
        return m;
    }
    Module out = m;
    out.target = to_target(target, m.target);
    return out;
}

void bind_passes(py::module_ &m) {
    py::module_ passes = m.def_submodule("passes", R"doc(The lowering passes, one function each.

Each takes a Module and returns a new Module; the argument is not changed. Running a pass twice
changes nothing the second time. `target`, when given (a tally.Target or a string), replaces the
module's target before the pass runs, as `tally-opt --target` does: the passes read the target
(inject_profiling does nothing unless it has `profile` or `profile_by_timer`). tally.lower runs
them in the default order.)doc");
    passes.def(
        "inject_host_dev_copies",
        [](const Module &mod, py::object target) {
            Module in = retargeted(mod, target);
            py::gil_scoped_release nogil;
            return tally::inject_host_dev_copies(in);
        },
        py::arg("module"), py::kw_only(), py::arg("target") = py::none(),
        R"doc(Inserts the host/device buffer copies around GPU loops.

Buffers read on a device are copied to it before the loop (halide_copy_to_device), buffers the
host reads after a device wrote them are copied back (halide_copy_to_host), device-written outputs
are copied back at the end, and intermediates get device allocations. Runs first, before
offload_gpu_loops.)doc");
    passes.def(
        "offload_gpu_loops",
        [](const Module &mod, py::object target) {
            Module in = retargeted(mod, target);
            py::gil_scoped_release nogil;
            return tally::offload_gpu_loops(in);
        },
        py::arg("module"), py::kw_only(), py::arg("target") = py::none(),
        R"doc(Moves every GPU loop nest into a device kernel of the module.

Each gpu_block/gpu_thread nest becomes a `kernel <API>` (buffers first, then the free scalars it
uses; see Module.kernels) and a checked halide_<api>_run launch in its place. Runs after
inject_host_dev_copies.)doc");
    passes.def(
        "inject_profiling",
        [](const Module &mod, bool inject_device_sync, py::object target) {
            Module in = retargeted(mod, target);
            tally::ProfilingOptions opts;
            opts.inject_device_sync = inject_device_sync;
            py::gil_scoped_release nogil;
            return tally::inject_profiling(in, opts);
        },
        py::arg("module"), py::arg("inject_device_sync") = true, py::kw_only(),
        py::arg("target") = py::none(),
        R"doc(Instruments the pipeline for the sampling profiler.

Only when the module's target (or `target`) has `profile` or `profile_by_timer`; otherwise the
module comes back unchanged. Brackets the body with tally_profiler_start/end, switches the current
slot at every produce and consume, gives each buffer copy its own '<func> (copy to device|host)'
slot, counts memory per Func, and (with inject_device_sync) adds one halide_device_sync_global
after each checked kernel launch and each copy to the device. Runs last.)doc");
    passes.def(
        "verify",
        [](const Module &mod) {
            {
                py::gil_scoped_release nogil;
                tally::verify(mod);
            }
            return mod;
        },
        py::arg("module"), R"doc(Runs the IR verifier and returns the module unchanged.

Checks that every name is in scope, operand types agree, loads and stores name declared buffers
and referenced kernels and functions exist. Raises CompileError naming the first problem.)doc");
    passes.def("lower", &lower, py::arg("module"), py::arg("target") = py::none(), py::kw_only(),
               py::arg("inject_device_sync") = true, py::arg("verify_each_pass") = true,
               py::arg("debug_level") = 0, lower_doc);
}

// ---- classes ----------------------------------------------------------------------------------

void bind_target(py::module_ &m) {
    py::class_<Target>(m, "Target",
                       R"doc(A Halide-style target: 'host' or 'arch-bits-os', then features.

    t = tally.Target("host-vulkan-profile")
    str(t)                 # 'host-profile-vulkan' (features sorted, as Halide prints them)
    t.features             # ['profile', 'vulkan']
    t.profiling            # True
    t.gpu_api              # 'Vulkan'

Unknown parts raise CompileError.)doc")
        .def(py::init([](const std::string &s) { return Target::parse(s); }),
             py::arg("target") = "host",
             "Parses a target string; raises CompileError naming the "
             "first unknown part.")
        .def("__str__", &Target::to_string)
        .def("__repr__",
             [](const Target &t) { return "tally.Target(" + quoted(t.to_string()) + ")"; })
        .def("__eq__",
             [](const Target &a, py::object b) -> py::object {
                 if (py::isinstance<Target>(b)) {
                     return py::bool_(a == b.cast<Target>());
                 }
                 if (py::isinstance<py::str>(b)) {
                     try {
                         return py::bool_(a == Target::parse(b.cast<std::string>()));
                     } catch (const tally::CompileError &) {
                         return py::bool_(false);
                     }
                 }
                 return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             })
        .def("__hash__", [](const Target &t) { return py::hash(py::str(t.to_string())); })
        .def_property_readonly(
            "features", [](const Target &t) { return t.features(); }, "The feature names, sorted.")
        .def(
            "has_feature",
            [](const Target &t, const std::string &f) {
                std::optional<Target::Feature> feature = Target::find_feature(f);
                if (!feature) {
                    throw py::value_error("unknown target feature '" + f + "'");
                }
                return t.has_feature(*feature);
            },
            py::arg("feature"),
            "True when the target has `feature` (e.g. 'profile'); ValueError for a name that "
            "is no target feature.")
        .def("with_feature",
             py::overload_cast<const std::string &>(&Target::with_feature, py::const_),
             py::arg("feature"), "A copy of the target with `feature` added.")
        .def("without_feature",
             py::overload_cast<const std::string &>(&Target::without_feature, py::const_),
             py::arg("feature"), "A copy of the target with `feature` removed.")
        .def_property_readonly("profiling", &Target::profiling,
                               "True when the target asks for profiling ('profile' or "
                               "'profile_by_timer').")
        .def_property_readonly(
            "gpu_api",
            [](const Target &t) -> py::object {
                tally::DeviceAPI api = t.gpu_api();
                if (api == tally::DeviceAPI::None) {
                    return py::none();
                }
                return py::str(tally::device_api_name(api));
            },
            "The GPU API the target asks for ('CUDA', 'Vulkan', ...), or None.")
        .def_property_readonly(
            "host", [](const Target &t) { return t.host; },
            "True when the string said 'host' (arch, bits and OS of this machine).")
        .def_property_readonly(
            "bits", [](const Target &t) { return t.bits; }, "Pointer width in bits (0 for 'host').")
        .def_static("known_features", &Target::known_features,
                    "Every feature name the parser accepts.");
}

void bind_arguments(py::module_ &m) {
    py::class_<Argument>(m, "Argument", R"doc(A function or kernel argument.

Attributes:
    name: the argument's name.
    kind: 'buffer' or 'scalar'.
    type: the scalar's type or the buffer's element type ('uint16', 'float32', 'bool', ...), or
        None when the IR does not say.
    dims: the buffer's number of dimensions, or None (scalars, or not known).)doc")
        .def_property_readonly(
            "name", [](const Argument &a) { return a.name; }, "The argument's name.")
        .def_property_readonly(
            "kind", [](const Argument &a) { return a.is_buffer() ? "buffer" : "scalar"; },
            "'buffer' or 'scalar'.")
        .def_property_readonly(
            "type",
            [](const Argument &a) -> py::object {
                if (!a.type.is_valid()) {
                    return py::none();
                }
                return py::str(type_name(a.type));
            },
            "The scalar's type or the buffer's element type ('uint16', 'float32', 'bool', ...), "
            "or None when the IR does not say.")
        .def_property_readonly(
            "dims",
            [](const Argument &a) -> py::object {
                if (a.dimensions < 0) {
                    return py::none();
                }
                return py::int_(a.dimensions);
            },
            "The buffer's number of dimensions, or None (scalars, or not known).")
        .def_property_readonly("is_buffer", &Argument::is_buffer, "True for a buffer argument.")
        .def("__eq__", [](const Argument &a, const Argument &b) { return a == b; })
        .def("__repr__",
             [](const Argument &a) { return "<tally.Argument " + argument_text(a) + ">"; });

    py::class_<LoweredFunc>(m, "Function", R"doc(A function of a Module.

Attributes:
    name: the function's name (the pipeline's name for the entry point).
    linkage: 'external', 'external_plus_metadata' or 'internal'.
    args: its arguments, a list of Argument.)doc")
        .def_property_readonly(
            "name", [](const LoweredFunc &f) { return f.name; }, "The function's name.")
        .def_property_readonly(
            "linkage", [](const LoweredFunc &f) { return tally::linkage_name(f.linkage); },
            "'external', 'external_plus_metadata' or 'internal'.")
        .def_property_readonly(
            "args", [](const LoweredFunc &f) { return f.args; },
            "The function's arguments, a list of Argument.")
        .def("__repr__", [](const LoweredFunc &f) {
            return std::string("<tally.Function ") + tally::linkage_name(f.linkage) + " " +
                   signature(f.name, f.args) + ">";
        });

    py::class_<Kernel>(m, "Kernel", R"doc(A device kernel of a Module (made by offload_gpu_loops).

Attributes:
    name: the kernel's name, as its launch names it.
    device_api: 'Vulkan', 'CUDA', ...
    args: its arguments (buffers first, then the free scalars), a list of Argument.)doc")
        .def_property_readonly(
            "name", [](const Kernel &k) { return k.name; },
            "The kernel's name, as its launch names it.")
        .def_property_readonly(
            "device_api", [](const Kernel &k) { return tally::device_api_name(k.device_api); },
            "The device API: 'Vulkan', 'CUDA', ...")
        .def_property_readonly(
            "args", [](const Kernel &k) { return k.args; },
            "The kernel's arguments (buffers first, then the free scalars), a list of Argument.")
        .def("__repr__", [](const Kernel &k) {
            return std::string("<tally.Kernel <") + tally::device_api_name(k.device_api) + "> " +
                   signature(k.name, k.args) + ">";
        });
}

void bind_module_class(py::module_ &m) {
    py::class_<Module>(m, "Module",
                       R"doc(A parsed or lowered module: functions, kernels and a target.

Modules are values: passes return new ones. str(module) is the IR text, which parse() reads back
to an equal module; `==` compares structurally.

Attributes:
    name: the module's name.
    target: its Target.
    functions: its functions, a list of Function (name and args).
    kernels: its device kernels, a list of Kernel (empty before offload_gpu_loops).)doc")
        .def_static(
            "_from_capsule",
            [](py::capsule c) {
                // tally.halide's module (another pybind11) hands its translated modules over
                // this way: a capsule named "tally.Module" owning a tally::Module.
                if (std::string(c.name() ? c.name() : "") != "tally.Module") {
                    throw py::type_error("_from_capsule(): not a tally.Module capsule");
                }
                return Module(*c.get_pointer<Module>());
            },
            py::arg("capsule"), "A copy of the module in a capsule named \"tally.Module\".")
        .def_property_readonly(
            "name", [](const Module &mod) { return mod.name; }, "The module's name.")
        .def_property_readonly(
            "target", [](const Module &mod) { return mod.target; }, "The module's Target.")
        .def_property_readonly(
            "functions", [](const Module &mod) { return mod.functions; },
            "The module's functions, a list of Function.")
        .def_property_readonly(
            "kernels", [](const Module &mod) { return mod.kernels; },
            "The module's device kernels, a list of Kernel (empty before offload_gpu_loops).")
        .def(
            "function",
            [](const Module &mod, const std::string &name) {
                const LoweredFunc *f = mod.find_function(name);
                if (!f) {
                    throw py::key_error("module '" + mod.name + "' has no function '" + name + "'");
                }
                return *f;
            },
            py::arg("name"), "The function named `name`; KeyError if there is none.")
        .def("__str__",
             [](const Module &mod) {
                 py::gil_scoped_release nogil;
                 return tally::to_string(mod);
             })
        .def("__repr__",
             [](const Module &mod) {
                 std::string fs;
                 for (const LoweredFunc &f : mod.functions) {
                     fs += (fs.empty() ? "" : ", ") + f.name;
                 }
                 std::string s = "<tally.Module " + quoted(mod.name) +
                                 " target=" + mod.target.to_string() + " functions=[" + fs + "]";
                 if (!mod.kernels.empty()) {
                     s += " kernels=" + std::to_string(mod.kernels.size());
                 }
                 return s + ">";
             })
        .def("__eq__",
             [](const Module &a, py::object b) -> py::object {
                 if (!py::isinstance<Module>(b)) {
                     return py::reinterpret_borrow<py::object>(Py_NotImplemented);
                 }
                 const Module &other = b.cast<const Module &>();
                 py::gil_scoped_release nogil;
                 return py::bool_(tally::equal(a, other));
             })
        .def(
            "difference",
            [](const Module &a, const Module &b) -> py::object {
                std::string why;
                bool same;
                {
                    py::gil_scoped_release nogil;
                    same = tally::equal(a, b, &why);
                }
                if (same) {
                    return py::none();
                }
                return py::str(why.empty() ? std::string("the modules differ") : why);
            },
            py::arg("other"),
            "None when the modules are structurally equal, otherwise a description of the first "
            "difference (which function or kernel, which node).")
        .def(
            "verify",
            [](const Module &mod) {
                py::gil_scoped_release nogil;
                tally::verify(mod);
            },
            "Runs the IR verifier; raises CompileError describing the first problem found.")
        .def("lower", &lower, py::arg("target") = py::none(), py::kw_only(),
             py::arg("inject_device_sync") = true, py::arg("verify_each_pass") = true,
             py::arg("debug_level") = 0, "The module lowered for `target`; see tally.lower.");
    // Modules compare by structure and are not hashable.
    m.attr("Module").attr("__hash__") = py::none();
}

}  // namespace

void bind_ir(py::module_ &m) {
    bind_target(m);
    bind_arguments(m);
    bind_module_class(m);
    bind_passes(m);
    m.def("parse", &parse, py::arg("source"), py::arg("filename") = py::none(),
          R"doc(Parses IR text and returns a Module.

Args:
    source: the IR text, or the path of a file holding it (a str naming an existing file, or an
        os.PathLike). A one-line str ending in '.stmt' that names no file raises
        FileNotFoundError.
    filename: the name diagnostics use for text (default '<string>').

Raises:
    CompileError: the text does not parse; the message reads 'file:line:col: error: ...'.)doc");
    m.def("lower", &lower, py::arg("module"), py::arg("target") = py::none(), py::kw_only(),
          py::arg("inject_device_sync") = true, py::arg("verify_each_pass") = true,
          py::arg("debug_level") = 0, lower_doc);
}

}  // namespace tally_python
