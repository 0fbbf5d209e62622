// Compiled pipelines: Module.compile / tally.compile, and Pipeline.__call__, which runs the JIT-
// compiled entry function on numpy arrays and Python scalars.
//
// Buffers are passed without copying. Each buffer argument is read through the buffer protocol
// (strides and format), and a halide_buffer_t is built on the stack pointing at the array's data:
// numpy's last axis is Halide's dimension 0 (C order is row-major, Halide's dimension 0 is the
// fastest), strides are converted from bytes to elements, mins are 0 unless the array comes
// wrapped in a tally.Buffer with mins. The element type must
// equal the argument's declared type, the rank its declared rank. Arguments the pipeline writes
// (stores to, or marks device-dirty) must be writable. Any strides that are multiples of the
// element size are accepted for arguments whose strides the pipeline reads (Halide-lowered code
// does); a pipeline that never reads an argument's strides (the hand-written apps) indexes it as a
// dense array, so there the array must be C-contiguous. Buffers the pipeline reads are marked
// host-dirty (the array is the truth, so a pipeline that uses one on a device copies it there
// first); an output it only writes is not, as in Halide: its copy to a device only allocates, and
// a pipeline that writes just part of such an output on a device leaves the rest undefined.
//
// Scalars are converted to the declared type with range checks (OverflowError) and type checks
// (TypeError: no float for an integer argument).
//
// The call itself runs with the GIL released. Device memory the call left attached to an argument
// (copies of inputs on a GPU) is copied back if the device copy is newer, then freed, before the
// call returns: the halide_buffer_t lives only for the call. Runtime error messages reported
// meanwhile are captured (ErrorCapture) and raised as tally.RuntimeError with the return code.

#include <pybind11/stl.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <set>
#include <unordered_map>

#include "ir/RuntimeCalls.h"
#include "tally/Compiler.h"
#include "tally/IRVisitor.h"
#include "tally/Lower.h"
#include "tally_python.h"
#include "tally_runtime.h"

namespace tally_python {

using tally::Argument;
using tally::Module;

namespace {

// ---- how the pipeline uses its buffers --------------------------------------------------------

/** Finds, for a module's buffers: which it writes (stores to, in host code or kernels; marks
 * device-dirty; copies back to the host), which it reads (loads from, in host code or kernels;
 * hands to a call that may read it, such as an extern stage), and whose strides it reads
 * (`X.stride.N`, or a runtime call that reads the shape of X.buffer). A pipeline that never reads
 * a buffer's strides indexes it as a dense array. */
class FindBufferUses : public tally::IRVisitor {
public:
    using tally::IRVisitor::visit;
    std::set<std::string> written, read, reads_strides;

private:
    void visit(const tally::Store *op) override {
        written.insert(op->name);
        tally::IRVisitor::visit(op);
    }
    void visit(const tally::Load *op) override {
        read.insert(op->name);
        tally::IRVisitor::visit(op);
    }
    void visit(const tally::Variable *op) override {
        size_t at = op->name.rfind(".stride.");
        if (at != std::string::npos && at > 0) {
            reads_strides.insert(op->name.substr(0, at));
        }
    }
    void visit(const tally::Call *op) override {
        if (!op->args.empty()) {
            namespace rt = tally::runtime;
            std::string b = tally::buffer_name_of(op->args[0]);
            if (!b.empty()) {
                if (op->name == rt::_halide_buffer_set_device_dirty ||
                    op->name == rt::halide_copy_to_host) {
                    written.insert(b);
                } else if (op->name == rt::_halide_buffer_get_stride ||
                           op->name == rt::_halide_buffer_get_shape) {
                    reads_strides.insert(b);
                }
            }
        }
        if (!reads_no_buffer(op->name)) {
            for (const tally::Expr &a : op->args) {
                std::string b = tally::buffer_name_of(a);
                if (!b.empty()) {
                    read.insert(b);
                }
            }
        }
        tally::IRVisitor::visit(op);
    }

    /** Calls that take X.buffer without reading X's elements on the host: buffer queries and
     * flags, device management (a copy to the device reads the host only when it is dirty, which
     * is what the caller decides), and the argument structs of kernel launches (kernel bodies'
     * loads say what a kernel reads). */
    static bool reads_no_buffer(const std::string &n) {
        namespace rt = tally::runtime;
        static const std::set<std::string> calls = {rt::halide_copy_to_device,
                                                    rt::halide_copy_to_host,
                                                    rt::halide_device_malloc,
                                                    rt::halide_device_free,
                                                    rt::halide_device_sync,
                                                    rt::halide_device_and_host_malloc,
                                                    rt::halide_device_and_host_free,
                                                    "make_struct",
                                                    "register_destructor"};
        return n.compare(0, 15, "_halide_buffer_") == 0 || calls.count(n) > 0;
    }
};

FindBufferUses buffer_uses(const Module &m) {
    FindBufferUses f;
    for (const tally::LoweredFunc &fn : m.functions) {
        if (fn.body.defined()) {
            fn.body.accept(&f);
        }
    }
    for (const tally::Kernel &k : m.kernels) {
        if (k.body.defined()) {
            k.body.accept(&f);
        }
    }
    return f;
}

// ---- argument conversion ----------------------------------------------------------------------

[[noreturn]] void raise(PyObject *type, const std::string &msg) {
    PyErr_SetString(type, msg.c_str());
    throw py::error_already_set();
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

/** A buffer argument for the duration of one call. Releasing the view needs the GIL. */
struct BoundBuffer {
    Py_buffer view{};
    bool has_view = false;
    std::vector<halide_dimension_t> dims;
    halide_buffer_t buf{};

    BoundBuffer() = default;
    BoundBuffer(const BoundBuffer &) = delete;
    BoundBuffer &operator=(const BoundBuffer &) = delete;
    ~BoundBuffer() {
        if (has_view) {
            PyBuffer_Release(&view);
        }
    }
};

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

std::string shape_text(const Py_buffer &v) {
    std::string s = "(";
    for (int i = 0; i < v.ndim; i++) {
        s += (i ? ", " : "") + std::to_string(v.shape[i]);
    }
    return s + (v.ndim == 1 ? ",)" : ")");
}

struct ArgSpec {
    Argument arg;
    /** Buffer the pipeline writes: it must be writable. */
    bool written = false;
    /** The pipeline reads the buffer's elements: its host copy is marked dirty. */
    bool read = false;
    /** The pipeline reads the buffer's strides; if not, it must be dense (C-contiguous). */
    bool reads_strides = false;
};

/** tally.Buffer: an array with the mins of its dimensions, for pipelines whose buffers do not
 * start at 0 (a stencil reading its input at x - 1, an output tile at an offset). */
struct BufferWithMins {
    py::object array;
    std::vector<int32_t> mins;  // Halide order: mins[0] is dimension 0 (numpy's last axis)
};

void bind_buffer(const std::string &fn, const ArgSpec &spec, py::handle given, BoundBuffer &b) {
    const Argument &a = spec.arg;
    std::string where = fn + "(): argument '" + a.name + "'";
    const BufferWithMins *with_mins =
        py::isinstance<BufferWithMins>(given) ? &given.cast<const BufferWithMins &>() : nullptr;
    py::handle obj = with_mins ? py::handle(with_mins->array) : given;
    if (!PyObject_CheckBuffer(obj.ptr())) {
        raise(PyExc_TypeError,
              where + " expects an array (" +
                  std::string(a.type.is_valid() ? type_name(a.type) : "any type") +
                  (a.dimensions >= 0 ? ", " + std::to_string(a.dimensions) + "-D" : std::string()) +
                  "), got " + py_type_name(obj));
    }
    if (spec.written) {
        if (PyObject_GetBuffer(obj.ptr(), &b.view, PyBUF_RECORDS) != 0) {
            PyErr_Clear();
            Py_buffer ro;
            if (PyObject_GetBuffer(obj.ptr(), &ro, PyBUF_RECORDS_RO) == 0) {
                PyBuffer_Release(&ro);
                raise(PyExc_ValueError, where + " is written by the pipeline, but the array is "
                                                "read-only (numpy: flags.writeable is False)");
            }
            throw py::error_already_set();
        }
    } else if (PyObject_GetBuffer(obj.ptr(), &b.view, PyBUF_RECORDS_RO) != 0) {
        throw py::error_already_set();
    }
    b.has_view = true;
    const Py_buffer &v = b.view;

    tally::Type t = element_type(v.format, v.itemsize);
    if (!t.is_valid()) {
        raise(PyExc_TypeError, where + ": unsupported element type " +
                                   array_type_text(obj, t, v.format) +
                                   " (supported: bool, int8-64, uint8-64, float16/32/64 in native "
                                   "byte order)");
    }
    if (a.type.is_valid() && (a.type.code() != t.code() || a.type.bits() != t.bits())) {
        raise(PyExc_TypeError, where + " expects an array of " + type_name(a.type) + ", got " +
                                   array_type_text(obj, t, v.format));
    }
    if (a.dimensions >= 0 && v.ndim != a.dimensions) {
        raise(PyExc_ValueError, where + " expects an array with " + std::to_string(a.dimensions) +
                                    " dimension" + (a.dimensions == 1 ? "" : "s") + ", got " +
                                    std::to_string(v.ndim) + " (shape " + shape_text(v) + ")");
    }
    b.dims.resize(size_t(v.ndim));
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
        b.dims[size_t(d)] = halide_dimension_t{0, int32_t(extent), int32_t(stride), 0};
    }
    if (with_mins) {
        if (with_mins->mins.size() != size_t(v.ndim)) {
            raise(PyExc_ValueError,
                  where + ": tally.Buffer gives " + std::to_string(with_mins->mins.size()) +
                      " mins for an array with " + std::to_string(v.ndim) + " dimensions");
        }
        for (int d = 0; d < v.ndim; d++) {
            b.dims[size_t(d)].min = with_mins->mins[size_t(d)];
        }
    }
    if (!spec.reads_strides && !PyBuffer_IsContiguous(&v, 'C')) {
        raise(PyExc_ValueError,
              where + " must be C-contiguous: the pipeline never reads its strides, so it "
                      "indexes it as a dense row-major array (pass numpy.ascontiguousarray(a))");
    }
    b.buf.device = 0;
    b.buf.device_interface = nullptr;
    b.buf.host = static_cast<uint8_t *>(v.buf);
    // The array is the truth for what the pipeline reads; an output it only writes starts with
    // a clean host copy, so its copy to a device allocates without moving data (Halide's
    // convention, which the C++ tests and the apps' expected reports follow).
    b.buf.flags = (spec.read || !spec.written) ? halide_buffer_flag_host_dirty : 0;
    b.buf.type = halide_type_t{uint8_t(t.code()), uint8_t(t.bits()), 1};
    b.buf.dimensions = v.ndim;
    b.buf.dim = b.dims.empty() ? nullptr : b.dims.data();
    b.buf.padding = nullptr;
}

/** Converts a Python value to a scalar of the argument's type, stored in `slot` (little-endian
 * bytes of the value, as a pointer to it is what the pipeline reads). */
void bind_scalar(const std::string &fn, const Argument &a, py::handle obj, uint64_t &slot) {
    std::string where = fn + "(): argument '" + a.name + "'";
    const tally::Type &t = a.type;
    slot = 0;
    if (!t.is_valid()) {
        raise(PyExc_TypeError, where + " has no declared type; give it one in the IR (name: type)");
    }
    if (t.is_handle()) {
        if (obj.is_none()) {
            return;
        }
        if (!PyLong_Check(obj.ptr())) {
            raise(PyExc_TypeError,
                  where + " expects an address (int) or None, got " + py_type_name(obj));
        }
        slot = PyLong_AsUnsignedLongLong(obj.ptr());
        if (PyErr_Occurred()) {
            throw py::error_already_set();
        }
        return;
    }
    std::string tname = type_name(t);
    if (t.code() == tally::Type::Int || t.code() == tally::Type::UInt) {
        if (is_numpy_bool(obj)) {
            // numpy.bool_ is not an index (deprecated): take its truth value.
            slot = PyObject_IsTrue(obj.ptr()) ? 1 : 0;
            return;
        }
        if (PyFloat_Check(obj.ptr()) || !PyIndex_Check(obj.ptr())) {
            raise(PyExc_TypeError, where + " expects " + tname + ", got " + py_type_name(obj));
        }
        py::int_ v = py::reinterpret_steal<py::int_>(PyNumber_Index(obj.ptr()));
        if (!v) {
            throw py::error_already_set();
        }
        py::int_ lo = t.is_uint() ? py::int_(0) : py::int_(t.min_int());
        py::int_ hi = py::int_(t.max_uint());
        if (v < lo || v > hi) {
            raise(PyExc_OverflowError,
                  where + " = " + std::string(py::str(v)) + " is out of range for " + tname);
        }
        if (t.is_uint()) {
            slot = PyLong_AsUnsignedLongLong(v.ptr());
        } else {
            slot = uint64_t(PyLong_AsLongLong(v.ptr()));
        }
        if (PyErr_Occurred()) {
            throw py::error_already_set();
        }
        if (t.bits() < 64) {
            slot &= (uint64_t(1) << t.bits()) - 1;  // two's complement, low bytes first
        }
        return;
    }
    if (t.code() == tally::Type::Float || t.code() == tally::Type::BFloat) {
        if (PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr())) {
            raise(PyExc_TypeError, where + " expects " + tname + ", got " + py_type_name(obj));
        }
        double d = PyFloat_AsDouble(obj.ptr());
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            raise(PyExc_TypeError, where + " expects " + tname + ", got " + py_type_name(obj));
        }
        unsigned char bytes[8] = {0};
        int r = 0;
        if (t.code() == tally::Type::BFloat) {
            // Round to nearest even from float32 (NaN stays NaN).
            float f = float(d);
            uint32_t x;
            std::memcpy(&x, &f, 4);
            if (std::isnan(f)) {
                x = 0x7fc00000u;
            } else {
                x += 0x7fffu + ((x >> 16) & 1u);
            }
            uint16_t h = uint16_t(x >> 16);
            if (std::isfinite(d) && (h & 0x7f80u) == 0x7f80u) {
                raise(PyExc_OverflowError,
                      where + " = " + std::to_string(d) + " is out of range for bfloat16");
            }
            std::memcpy(bytes, &h, 2);
        } else if (t.bits() == 16) {
            r = PyFloat_Pack2(d, reinterpret_cast<char *>(bytes), 1);
        } else if (t.bits() == 32) {
            r = PyFloat_Pack4(d, reinterpret_cast<char *>(bytes), 1);
        } else if (t.bits() == 64) {
            r = PyFloat_Pack8(d, reinterpret_cast<char *>(bytes), 1);
        } else {
            raise(PyExc_TypeError, where + ": unsupported scalar type " + tname);
        }
        if (r != 0) {
            PyErr_Clear();
            raise(PyExc_OverflowError,
                  where + " = " + std::string(py::str(obj)) + " is out of range for " + tname);
        }
        std::memcpy(&slot, bytes, 8);
        return;
    }
    raise(PyExc_TypeError, where + ": unsupported scalar type " + tname);
}

// ---- the pipeline -----------------------------------------------------------------------------

class Pipeline {
public:
    explicit Pipeline(std::unique_ptr<tally::JITModule> compiled) : jit(std::move(compiled)) {
        const tally::LoweredFunc &entry = jit->entry();
        name = entry.name;
        FindBufferUses uses = buffer_uses(jit->module());
        for (const Argument &a : entry.args) {
            index[a.name] = args.size();
            bool buffer = a.is_buffer();
            args.push_back(ArgSpec{a, buffer && uses.written.count(a.name) > 0,
                                   buffer && uses.read.count(a.name) > 0,
                                   buffer && uses.reads_strides.count(a.name) > 0});
        }
        argv = reinterpret_cast<int (*)(void **)>(
            jit->symbol(tally::entry_symbols(jit->module(), entry).argv));
    }

    void call(py::args pos, py::kwargs kw) const {
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
            auto it = index.find(key);
            if (it == index.end()) {
                raise(PyExc_TypeError,
                      name + "() got an unexpected keyword argument '" + key + "'");
            }
            if (given[it->second]) {
                raise(PyExc_TypeError, name + "() got multiple values for argument '" + key + "'");
            }
            given[it->second] = item.second;
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

        // 2. Convert them.
        std::vector<std::unique_ptr<BoundBuffer>> buffers;
        std::vector<uint64_t> scalars(args.size(), 0);
        std::vector<void *> argv_values(args.size() + 1, nullptr);
        for (size_t i = 0; i < args.size(); i++) {
            if (args[i].arg.is_buffer()) {
                buffers.push_back(std::make_unique<BoundBuffer>());
                bind_buffer(name, args[i], given[i], *buffers.back());
                argv_values[i] = &buffers.back()->buf;
            } else {
                bind_scalar(name, args[i].arg, given[i], scalars[i]);
                argv_values[i] = &scalars[i];
            }
        }

        // 3. Run without the GIL, capturing the runtime's error messages; then bring back and
        // free device memory the run left on the arguments.
        int rc = 0;
        std::string message;
        {
            py::gil_scoped_release nogil;
            ErrorCapture capture;
            rc = argv ? argv(argv_values.data()) : jit->run(argv_values.data());
            for (const auto &b : buffers) {
                if (!b->buf.device_interface) {
                    continue;
                }
                int r = 0;
                if (rc == 0 && tally_buffer_get_device_dirty(&b->buf)) {
                    r = halide_copy_to_host(nullptr, &b->buf);
                }
                int f = halide_device_free(nullptr, &b->buf);
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
        for (const ArgSpec &s : args) {
            out.push_back(s.arg);
        }
        return out;
    }

    std::shared_ptr<tally::JITModule> jit;
    std::string name;
    std::vector<ArgSpec> args;
    std::unordered_map<std::string, size_t> index;
    int (*argv)(void **) = nullptr;
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
                for (const ArgSpec &s : p.args) {
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
