// Compiled pipelines: Module.compile / tally.compile, and Pipeline.__call__, which runs the JIT-
// compiled entry function on numpy arrays and Python scalars.
//
// A numpy adapter over the argument binder (tally/Arguments.h), which checks and packs every
// value and states the rules: element types, ranks, read-only and dense buffers, host-dirty
// marks, scalar ranges and rounding. What is left here is Python's side of a call: binding by
// position then by name as a Python function does; turning an object with the buffer protocol
// into a tally::Buffer over its memory, without copying (numpy's last axis is Halide's
// dimension 0, byte strides become element strides, mins are 0 unless a tally.Buffer gives
// them; an array that will not give a writable view makes a read-only Buffer); turning a Python
// number into a ScalarValue; and raising the binder's errors as TypeError, ValueError or
// OverflowError.
//
// The call itself runs with the GIL released. Device memory the call left attached to an argument
// (copies of inputs on a GPU) is copied back if the device copy is newer, then freed, before the
// call returns: the halide_buffer_t lives only for the call. Runtime error messages reported
// meanwhile are captured (ErrorCapture) and raised as tally.RuntimeError with the return code.

#include <pybind11/stl.h>

#include <climits>
#include <memory>

#include "tally/Arguments.h"
#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/Lower.h"
#include "tally_python.h"
#include "tally_runtime.h"

namespace tally_python {

using tally::Argument;
using tally::ArgumentBinder;
using tally::ArgumentError;
using tally::Module;

namespace {

// ---- Python values as the binder's --------------------------------------------------------------

[[noreturn]] void raise(PyObject *type, const std::string &msg) {
    PyErr_SetString(type, msg.c_str());
    throw py::error_already_set();
}

/** Raises the binder's error as the Python exception of its kind, with numpy's words for the
 * fix where there is one. */
[[noreturn]] void raise_argument_error(const ArgumentError &e) {
    using Kind = ArgumentError::Kind;
    switch (e.kind) {
    case Kind::Rank:
        raise(PyExc_ValueError, e.what());
    case Kind::ReadOnly:
        raise(PyExc_ValueError, std::string(e.what()) + " (numpy: flags.writeable is False)");
    case Kind::Layout:
        raise(PyExc_ValueError, std::string(e.what()) + " (numpy: pass a C-contiguous array, "
                                                        "numpy.ascontiguousarray(a))");
    case Kind::Range:
        raise(PyExc_OverflowError, e.what());
    default:
        raise(PyExc_TypeError, e.what());
    }
}

std::string py_type_name(py::handle h) {
    return py::str(py::type::of(h).attr("__name__"));
}

/** numpy.bool_ (numpy.bool in numpy 2), recognised without importing numpy. */
bool is_numpy_bool(py::handle h) {
    py::handle type = py::type::of(h);
    std::string name = py::str(type.attr("__name__"));
    return (name == "bool_" || name == "bool") && py::hasattr(type, "__module__") &&
           std::string(py::str(type.attr("__module__"))) == "numpy";
}

/** The element type a struct-module format string describes, or an invalid type. Only native or
 * little-endian single elements (what numpy arrays of numbers export). */
tally::Type element_type(const char *format, Py_ssize_t itemsize) {
    std::string f = format ? format : "B";
    if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) {
        f = f.substr(1);
    }
    if (f.size() != 1 || itemsize <= 0 || itemsize > 8) {
        return tally::Type();
    }
    int bits = int(itemsize) * 8;
    switch (f[0]) {
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
    case 'n':
        return tally::Int(bits);
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
    case 'N':
        return tally::UInt(bits);
    case 'e':
    case 'f':
    case 'd':
        return tally::Float(bits);
    case '?':
        return itemsize == 1 ? tally::Bool() : tally::Type();
    default:
        return tally::Type();
    }
}

/** How an array's element type reads in messages: numpy's dtype name if it has one. */
std::string array_type_text(py::handle obj, const tally::Type &t, const char *format) {
    if (py::hasattr(obj, "dtype")) {
        return py::str(obj.attr("dtype"));
    }
    if (t.is_valid()) {
        return type_name(t);
    }
    return std::string("format '") + (format ? format : "B") + "'";
}

/** tally.Buffer: an array with the mins of its dimensions, for pipelines whose buffers do not
 * start at 0 (a stencil reading its input at x - 1, an output tile at an offset). */
struct BufferWithMins {
    py::object array;
    std::vector<int32_t> mins;  // Halide order: mins[0] is dimension 0 (numpy's last axis)
};

/** A buffer argument for the duration of one call: the array's view and a tally::Buffer over
 * it. Releasing the view needs the GIL. */
struct ArrayBuffer {
    Py_buffer view{};
    std::unique_ptr<tally::Buffer<>> buffer;

    ArrayBuffer() = default;
    ArrayBuffer(const ArrayBuffer &) = delete;
    ArrayBuffer &operator=(const ArrayBuffer &) = delete;
    ~ArrayBuffer() {
        buffer.reset();
        if (view.obj) {
            PyBuffer_Release(&view);
        }
    }
};

/** The buffer argument `i` of `binder` over the array `given` (or the array of a tally.Buffer),
 * without copying. */
std::unique_ptr<ArrayBuffer> to_buffer(const ArgumentBinder &binder, size_t i, py::handle given) {
    std::string where = binder.function() + "(): argument '" + binder.arguments()[i].arg.name + "'";
    const BufferWithMins *with_mins =
        py::isinstance<BufferWithMins>(given) ? &given.cast<const BufferWithMins &>() : nullptr;
    py::handle obj = with_mins ? py::handle(with_mins->array) : given;
    if (!PyObject_CheckBuffer(obj.ptr())) {
        binder.type_error(i, py_type_name(obj));
    }
    auto b = std::make_unique<ArrayBuffer>();
    bool read_only = false;
    if (PyObject_GetBuffer(obj.ptr(), &b->view, PyBUF_RECORDS) != 0) {
        PyErr_Clear();
        if (PyObject_GetBuffer(obj.ptr(), &b->view, PyBUF_RECORDS_RO) != 0) {
            throw py::error_already_set();
        }
        read_only = true;
    }
    const Py_buffer &v = b->view;
    tally::Type t = element_type(v.format, v.itemsize);
    if (!t.is_valid()) {
        raise(PyExc_TypeError, where + ": unsupported element type " +
                                   array_type_text(obj, t, v.format) +
                                   " (supported: bool, int8-64, uint8-64, float16/32/64 in native "
                                   "byte order)");
    }
    std::vector<halide_dimension_t> dims(size_t(v.ndim));
    for (int d = 0; d < v.ndim; d++) {
        int axis = v.ndim - 1 - d;  // numpy's last axis is Halide's dimension 0
        Py_ssize_t extent = v.shape[axis];
        Py_ssize_t stride_bytes = v.strides ? v.strides[axis] : 0;
        if (stride_bytes % v.itemsize != 0) {
            raise(PyExc_ValueError, where + ": the stride of axis " + std::to_string(axis) + " (" +
                                        std::to_string(stride_bytes) +
                                        " bytes) is not a multiple of the element size (" +
                                        std::to_string(v.itemsize) + " bytes)");
        }
        Py_ssize_t stride = stride_bytes / v.itemsize;
        if (extent > INT32_MAX || stride > INT32_MAX || stride < INT32_MIN) {
            raise(PyExc_ValueError, where + ": axis " + std::to_string(axis) +
                                        " is too large for a 32-bit extent or stride");
        }
        dims[size_t(d)] = halide_dimension_t{0, int32_t(extent), int32_t(stride), 0};
    }
    if (with_mins) {
        if (with_mins->mins.size() != size_t(v.ndim)) {
            raise(PyExc_ValueError,
                  where + ": tally.Buffer gives " + std::to_string(with_mins->mins.size()) +
                      " mins for an array with " + std::to_string(v.ndim) + " dimensions");
        }
        for (int d = 0; d < v.ndim; d++) {
            dims[size_t(d)].min = with_mins->mins[size_t(d)];
        }
    }
    try {
        b->buffer = read_only ? std::make_unique<tally::Buffer<>>(
                                    t, static_cast<const void *>(v.buf), std::move(dims))
                              : std::make_unique<tally::Buffer<>>(t, v.buf, std::move(dims));
    } catch (const tally::CompileError &e) {
        raise(PyExc_ValueError, where + ": " + e.what());
    }
    return b;
}

/** The scalar argument `i` of `binder` for the Python value `obj`. */
tally::ScalarValue to_scalar(const ArgumentBinder &binder, size_t i, py::handle obj) {
    if (obj.is_none()) {
        if (!binder.arguments()[i].arg.type.is_handle()) {
            binder.type_error(i, "None");
        }
        return tally::ScalarValue::handle(nullptr);
    }
    if (PyBool_Check(obj.ptr()) || is_numpy_bool(obj)) {
        return tally::ScalarValue(bool(PyObject_IsTrue(obj.ptr())));
    }
    if (PyFloat_Check(obj.ptr())) {
        return tally::ScalarValue(PyFloat_AsDouble(obj.ptr()));
    }
    if (PyIndex_Check(obj.ptr())) {  // int, numpy integers
        py::int_ v = py::reinterpret_steal<py::int_>(PyNumber_Index(obj.ptr()));
        if (!v) {
            throw py::error_already_set();
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
        if (overflow == 0) {
            return tally::ScalarValue(int64_t(x));
        }
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
            if (!PyErr_Occurred()) {
                return tally::ScalarValue(uint64_t(u));
            }
            PyErr_Clear();
        }
        // Beyond any 64-bit integer: a float argument may still take it.
        double d = binder.arguments()[i].arg.type.is_float() ? PyLong_AsDouble(v.ptr()) : -1.0;
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
        } else if (binder.arguments()[i].arg.type.is_float()) {
            return tally::ScalarValue(d);
        }
        binder.range_error(i, py::str(v));
    }
    if (!PyUnicode_Check(obj.ptr()) && !PyBytes_Check(obj.ptr()) && PyNumber_Check(obj.ptr())) {
        double d = PyFloat_AsDouble(obj.ptr());  // numpy.float32 and other numbers with __float__
        if (!(d == -1.0 && PyErr_Occurred())) {
            return tally::ScalarValue(d);
        }
        PyErr_Clear();
    }
    binder.type_error(i, py_type_name(obj));
}

// ---- the pipeline -----------------------------------------------------------------------------

class Pipeline {
public:
    explicit Pipeline(std::unique_ptr<tally::JITModule> compiled)
        : jit(std::move(compiled)), name(jit->entry().name) {}

    void call(py::args pos, py::kwargs kw) const {
        const ArgumentBinder &binder = jit->binder();
        const std::vector<tally::ArgumentSpec> &args = binder.arguments();
        // 1. Bind the arguments by position, then by name, as a Python function would.
        std::vector<py::handle> given(args.size());
        if (pos.size() > args.size()) {
            raise(PyExc_TypeError, name + "() takes " + std::to_string(args.size()) +
                                       " arguments but " + std::to_string(pos.size()) +
                                       " were given");
        }
        for (size_t i = 0; i < pos.size(); i++) {
            given[i] = pos[i];
        }
        for (auto item : kw) {
            std::string key = py::str(item.first);
            int at = binder.find(key);
            if (at < 0) {
                raise(PyExc_TypeError,
                      name + "() got an unexpected keyword argument '" + key + "'");
            }
            if (given[size_t(at)]) {
                raise(PyExc_TypeError, name + "() got multiple values for argument '" + key + "'");
            }
            given[size_t(at)] = item.second;
        }
        std::string missing;
        for (size_t i = 0; i < args.size(); i++) {
            if (!given[i]) {
                missing += (missing.empty() ? "'" : ", '") + args[i].arg.name + "'";
            }
        }
        if (!missing.empty()) {
            raise(PyExc_TypeError, name + "() missing required argument(s): " + missing + " (" +
                                       signature(name, entry_args()) + ")");
        }

        // 2. Convert them, and have the binder check and pack them.
        std::vector<std::unique_ptr<ArrayBuffer>> buffers;
        std::vector<tally::ArgumentValue> values;
        std::unique_ptr<tally::BoundArguments> bound;
        try {
            for (size_t i = 0; i < args.size(); i++) {
                if (args[i].arg.is_buffer()) {
                    buffers.push_back(to_buffer(binder, i, given[i]));
                    values.emplace_back(*buffers.back()->buffer);
                } else {
                    values.emplace_back(to_scalar(binder, i, given[i]));
                }
            }
            bound = std::make_unique<tally::BoundArguments>(binder.bind(values));
        } catch (const ArgumentError &e) {
            raise_argument_error(e);
        }

        // 3. Run without the GIL, capturing the runtime's error messages; then bring back and
        // free device memory the run left on the arguments.
        int rc = 0;
        std::string message;
        {
            py::gil_scoped_release nogil;
            ErrorCapture capture;
            rc = jit->run(bound->argv());
            for (const auto &b : buffers) {
                int r = rc == 0 ? b->buffer->copy_to_host() : 0;
                int f = b->buffer->device_free();
                if (rc == 0) {
                    rc = r ? r : f;
                }
            }
            if (rc != 0) {
                message = capture.message();
            }
        }
        if (rc != 0) {
            if (message.empty()) {
                message = "pipeline '" + name + "' failed with error " + std::to_string(rc) + " (" +
                          tally_error_code_name(rc) + ")";
            }
            raise_runtime_error(message, rc);
        }
    }

    std::vector<Argument> entry_args() const {
        std::vector<Argument> out;
        for (const tally::ArgumentSpec &s : jit->binder().arguments()) {
            out.push_back(s.arg);
        }
        return out;
    }

    std::shared_ptr<tally::JITModule> jit;
    std::string name;
};

Pipeline compile_lowered(const Module &lowered, int opt_level) {
    tally::CompileOptions opts;
    opts.opt_level = opt_level;
    std::unique_ptr<tally::JITModule> jit;
    {
        py::gil_scoped_release nogil;
        jit = tally::compile_jit(lowered, opts);
    }
    return Pipeline(std::move(jit));
}

Pipeline lower_and_compile(const Module &m, py::object target, int opt_level,
                           bool inject_device_sync) {
    tally::Target t = to_target(target, m.target);
    tally::LowerOptions lopts;
    lopts.profiling.inject_device_sync = inject_device_sync;
    tally::CompileOptions copts;
    copts.opt_level = opt_level;
    std::unique_ptr<tally::JITModule> jit;
    {
        py::gil_scoped_release nogil;
        jit = tally::compile_jit(tally::lower(m, t, lopts), copts);
    }
    return Pipeline(std::move(jit));
}

}  // namespace

void bind_pipeline(py::module_ &m) {
    py::class_<BufferWithMins>(m, "Buffer", R"doc(An array with the mins of its dimensions.

    blur(tally.Buffer(inp, mins=(-1, -1)), out)

Pass it where a pipeline takes a buffer whose coordinates do not start at 0: Halide's blur3x3
reads its input at x - 1 and y - 1, so the input needs mins of -1. `mins` are in the pipeline's
dimension order (the first is dimension 0, numpy's last axis), one per array dimension; plain
arrays have mins 0. The array is used without copying, as for plain arrays.)doc")
        .def(py::init([](py::object array, std::vector<int32_t> mins) {
                 if (!PyObject_CheckBuffer(array.ptr())) {
                     raise(PyExc_TypeError,
                           "tally.Buffer expects an array, got " + py_type_name(array));
                 }
                 return BufferWithMins{std::move(array), std::move(mins)};
             }),
             py::arg("array"), py::kw_only(), py::arg("mins"),
             "Wraps `array` (not copied) with the mins of its dimensions, dimension 0 first.")
        .def_readonly("array", &BufferWithMins::array, "The array.")
        .def_readonly("mins", &BufferWithMins::mins, "The mins, dimension 0 first.");
    py::class_<Pipeline>(m, "Pipeline", R"doc(A JIT-compiled pipeline; call it to run it.

    blur = tally.parse("apps/blur/blur.stmt").compile("host")
    blur(inp, out, width, height)       # or by name: blur(input=inp, output=out, ...)

Buffer arguments take numpy arrays (or anything with the buffer protocol), without copying: the
array's last axis is the pipeline's dimension 0, mins are 0, and strides may be any multiple of
the element size (non-contiguous views work) where the pipeline reads the buffer's strides, as
Halide-lowered code does. A pipeline that never reads them indexes the buffer as a dense array:
there a non-contiguous array raises ValueError. The element type must equal the argument's type
(TypeError), the number of dimensions its rank (ValueError), and arrays the pipeline writes must
be writable (ValueError). Scalar arguments take Python numbers, checked against and converted to
the declared type (TypeError, OverflowError).

On a GPU target, arrays the pipeline reads are copied to the device as it needs them; an output
it only writes is not copied there first (as in Halide: write all of it). Device memory is freed
before the call returns.

The call releases the GIL while the pipeline runs; a Pipeline may be called from several threads
at once. It returns None, or raises tally.RuntimeError with the runtime's message when the
pipeline fails.

Attributes:
    name: the entry function's name.
    args: its arguments, a list of Argument.
    module: the lowered Module that was compiled.)doc")
        .def("__call__", &Pipeline::call,
             "Runs the pipeline on the given arrays and scalars (positional or by name).")
        .def_property_readonly(
            "name", [](const Pipeline &p) { return p.name; }, "The entry function's name.")
        .def_property_readonly("args", &Pipeline::entry_args,
                               "The entry function's arguments, a list of Argument.")
        .def_property_readonly(
            "outputs",
            [](const Pipeline &p) {
                std::vector<std::string> out;
                for (const tally::ArgumentSpec &s : p.jit->binder().arguments()) {
                    if (s.written) {
                        out.push_back(s.arg.name);
                    }
                }
                return out;
            },
            "Names of the buffer arguments the pipeline writes (they must be writable arrays).")
        .def_property_readonly(
            "module", [](const Pipeline &p) { return p.jit->module(); },
            "The lowered Module that was compiled.")
        .def_property_readonly(
            "target", [](const Pipeline &p) { return p.jit->module().target; },
            "The target it was compiled for.")
        .def("__repr__", [](const Pipeline &p) {
            return "<tally.Pipeline " + signature(p.name, p.entry_args()) +
                   " target=" + p.jit->module().target.to_string() + ">";
        });

    m.def("compile", &compile_lowered, py::arg("module"), py::kw_only(), py::arg("opt_level") = 3,
          R"doc(JIT-compiles an already lowered Module and returns a Pipeline.

Use Module.compile(target) to lower and compile in one step.

Args:
    module: a Module returned by tally.lower (or lowered by the passes).
    opt_level: LLVM optimisation level, 0-3.

Raises:
    CompileError: IR the back ends cannot compile (e.g. kernels for a device API whose back end
        is missing).)doc");

    auto module_class = py::reinterpret_borrow<py::class_<Module>>(m.attr("Module"));
    module_class.def(
        "with_buffer_constant",
        [](const Module &mod, const std::string &name, py::object array, py::object mins) {
            Py_buffer v;
            if (PyObject_GetBuffer(array.ptr(), &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
                throw py::error_already_set();
            }
            std::unique_ptr<Py_buffer, void (*)(Py_buffer *)> release(&v, PyBuffer_Release);
            tally::Type t = element_type(v.format, v.itemsize);
            if (!t.is_valid()) {
                raise(PyExc_TypeError, "with_buffer_constant(): unsupported element type " +
                                           array_type_text(array, t, v.format));
            }
            std::vector<int32_t> extents, ms(size_t(v.ndim), 0);
            for (int d = v.ndim - 1; d >= 0; d--) {  // numpy's last axis is dimension 0
                if (v.shape[d] > INT32_MAX) {
                    raise(PyExc_ValueError, "with_buffer_constant(): axis " + std::to_string(d) +
                                                " is too large for a 32-bit extent");
                }
                extents.push_back(int32_t(v.shape[d]));
            }
            if (!mins.is_none()) {
                ms = mins.cast<std::vector<int32_t>>();
            }
            std::string bytes(static_cast<const char *>(v.buf), size_t(v.len));
            Module out = mod;
            py::gil_scoped_release nogil;
            out.define_buffer_constant(name, t, std::move(ms), std::move(extents),
                                       std::move(bytes));
            return out;
        },
        py::arg("name"), py::arg("array"), py::kw_only(), py::arg("mins") = py::none(),
        R"doc(The module with its buffer constant `name` given `array`'s contents.

Halide prints a Buffer its pipeline embeds as `buffer NAME = {...}`, without the data: a module
read from such text compiles only once each such buffer has contents. The array is copied; its
element type is the buffer's, its last axis dimension 0; `mins` (dimension 0 first) default to 0.

Raises:
    CompileError: the module has no such buffer constant, or `mins` does not match the array.
    TypeError: the array's element type is not one Halide has.)doc");
    module_class.def("compile", &lower_and_compile, py::arg("target") = py::none(), py::kw_only(),
                     py::arg("opt_level") = 3, py::arg("inject_device_sync") = true,
                     R"doc(Lowers the module for `target` and JIT-compiles it; returns a Pipeline.

Args:
    target: a tally.Target or target string ('host', 'host-profile', 'host-vulkan-profile', ...);
        None uses the module's own target.
    opt_level: LLVM optimisation level, 0-3.
    inject_device_sync: see tally.lower.

Raises:
    CompileError: the module does not lower or compile for the target.)doc");
}

}  // namespace tally_python
