/** \file
 * A Module: what one lowering produces and one codegen consumes. It holds the pipeline
 * function(s) with their typed arguments, the target, constant buffers (Halide embeds kernel
 * sources this way) and, after offload-gpu-loops, the device kernels.
 */
#ifndef TALLY_MODULE_H
#define TALLY_MODULE_H

#include <string>
#include <vector>

#include "tally/IR.h"
#include "tally/Target.h"

namespace tally {

/** A function or kernel argument: a scalar of some type, or a buffer of some element type. */
struct Argument {
    enum Kind : uint8_t { Scalar, Buffer };
    std::string name;
    Kind kind = Scalar;
    /** The scalar's type, or the buffer's element type (invalid when not known). */
    Type type;
    /** Buffer rank, or -1 when not known. Always -1 for scalars. */
    int dimensions = -1;

    bool is_buffer() const { return kind == Buffer; }
    bool operator==(const Argument &o) const {
        return name == o.name && kind == o.kind && type == o.type && dimensions == o.dimensions;
    }
};

/** Halide 14's linkages: an external function, with its `_argv` wrapper, with its `_argv` and
 * its `_metadata`; an internal one. Tally's code defines `_argv` for every pipeline function (its
 * JIT calls that), and `_metadata` for ExternalPlusMetadata. */
enum class LinkageType : uint8_t { External, ExternalPlusArgv, ExternalPlusMetadata, Internal };
const char *linkage_name(LinkageType l);

struct LoweredFunc {
    std::string name;
    LinkageType linkage = LinkageType::External;
    std::vector<Argument> args;
    Stmt body;
};

/** A constant buffer embedded in the module; `opaque` ones were printed as `{...}`. */
struct BufferConstant {
    std::string name;
    bool opaque = true;
    /** Not opaque (a GPU module's kernels, `<api>_gpu_source_kernels`): the text between the
     * braces as printed, which Halide writes as a line break, the data, and a line break before
     * the closing brace (the last one not kept here); printed data(). */
    std::string bytes;
    /** Contents given from outside the text to an opaque constant (Halide prints a Buffer its
     * pipeline embeds as `buffer lut = {...}`, without the data; define_buffer_constant): the
     * element type (invalid: none given), and per dimension in Halide's order (dimension 0
     * innermost) its min and extent, dense; `bytes` then holds the elements. The code binds
     * `<name>.buffer` to a halide_buffer_t of them, as Halide's object file does. */
    Type type;
    std::vector<int32_t> mins, extents;

    bool has_contents() const { return type.is_valid(); }
    /** What a printed constant holds (not opaque): `bytes` less the line break Halide prints
     * after the opening brace. */
    std::string printed_data() const {
        return !bytes.empty() && bytes[0] == '\n' ? bytes.substr(1) : bytes;
    }
};

/** How a kernel is launched: which block or thread dimension each gpu_block and gpu_thread
 * loop of its body is, and how many blocks and threads each dimension launches. Decided once, by
 * derive_kernel_geometry (src/ir/KernelGeometry.h), when offload-gpu-loops makes the kernel (or
 * the parser reads one written without it); the launch call and the device back ends read it. */
struct KernelGeometry {
    /** One launch dimension. */
    struct Dim {
        /** The loops mapped to it, by name, in walk order. */
        std::vector<std::string> loops;
        /** The number of blocks or threads it launches: an int32 in terms of the kernel's
         * arguments, the largest of the loops' extents. */
        Expr extent;
    };
    /** The gpu_block and the gpu_thread dimensions, x first; at most 3 of each. A dimension past
     * the last launches 1. */
    std::vector<Dim> blocks, threads;

    /** The dimensions of one kind of loop (GPUBlock or GPUThread). */
    const std::vector<Dim> &dims(ForType kind) const;
    /** The dimension (0 = x, 1 = y, 2 = z) of a gpu_block or gpu_thread loop of the kernel. */
    int dim(const For *op) const;
    /** The launch size of dimension `d` of a kind: 1 past the last. */
    Expr launch_extent(ForType kind, int d) const;
    /** May the loop run over fewer ids than its dimension launches (so that it needs an
     * `id < extent` guard)? */
    bool needs_guard(const For *op) const;
};

/** A device kernel produced by offload-gpu-loops: the loop nest it came from, the arguments it
 * needs (buffers and free scalars) and its launch geometry. */
struct Kernel {
    std::string name;
    DeviceAPI device_api = DeviceAPI::None;
    std::vector<Argument> args;
    Stmt body;
    KernelGeometry geometry;
};

/** Whose printer wrote the text a module was read from. Halide 14 and Halide 21 print the same
 * IR differently in places (docs/halide21.md lists where), and a few spellings both print mean
 * different things in each: `atomic (f)` is Halide 21's producer but would be Halide 14's
 * mutex, and the profiler calls take other arguments. Tally's own text is Halide 14's plus
 * syntax of its own, so a module that shows no Halide 21 spelling is Halide 14's. Printed in
 * the module header (`dialect=halide21`), so a printed module keeps what it was read as. */
enum class Dialect : uint8_t { Halide14, Halide21 };
/** "halide14", "halide21". */
const char *dialect_name(Dialect d);
/** The dialect named `s`; false when `s` names none. */
bool dialect_from_name(const std::string &s, Dialect *out);

struct Module {
    std::string name;
    Target target;
    Dialect dialect = Dialect::Halide14;
    std::vector<BufferConstant> buffers;
    std::vector<Kernel> kernels;
    std::vector<LoweredFunc> functions;
    /** What lowering did that the text does not say (retarget-gpu-api: GPU code that runs on
     * another API than the text names). Not part of the IR: printed as `// note:` comments,
     * by the drivers to stderr, and next to the target in the profiler's report. */
    std::vector<std::string> notes;

    /** Gives the opaque buffer constant `name` its contents (see BufferConstant): elements of
     * type `t`, dense, with `mins` and `extents` per dimension in Halide's order; `bytes` the
     * elements. In a module of one function (a statement alone, such as Halide's conceptual
     * statement, where an embedded buffer is a free `<name>.buffer`) without that constant, the
     * function's buffer argument `name` becomes it. A CompileError when the module has neither,
     * or the shape does not match the bytes. */
    void define_buffer_constant(const std::string &name, const Type &t, std::vector<int32_t> mins,
                                std::vector<int32_t> extents, std::string bytes);

    LoweredFunc *find_function(const std::string &n);
    const LoweredFunc *find_function(const std::string &n) const;
    const Kernel *find_kernel(const std::string &n) const;
};

/** The symbols a pipeline function's compiled code defines, named as Halide 14 names them. */
struct EntrySymbols {
    std::string function;  // the function, its arguments in order
    std::string argv;      // the same, `int (void **args)`: its arguments as an array
    std::string metadata;  // `const halide_filter_metadata_t *(void)`, for ExternalPlusMetadata
    /** The function's name without its namespaces (`f` for `ns::inner::f`), and those
     * namespaces, outermost first: what a header declares, what the metadata calls it. */
    std::string name;
    std::vector<std::string> namespaces;
    /** Are the symbols C++ ones (c_plus_plus_name_mangling)? */
    bool mangled = false;
};

/** The symbols of `f`, a function of `m`: C functions named by the last component of its name
 * (`ns::f` defines `f`, `f_argv` and `f_metadata`), or, when the module's target has the feature
 * `c_plus_plus_name_mangling`, C++ functions in its namespaces, mangled by the Itanium ABI from
 * their parameters (buffers `halide_buffer_t *`, `__user_context` `const void *`, scalars as their
 * type, `argv`'s `void **`): `_ZN2ns1fEP15halide_buffer_ti...`, `_ZN2ns6f_argvEPPv`,
 * `_ZN2ns10f_metadataEv`. An
 * internal function keeps its name. Defined in src/ir/CPlusPlusMangle.cpp. */
EntrySymbols entry_symbols(const Module &m, const LoweredFunc &f);

}  // namespace tally

#endif  // TALLY_MODULE_H
