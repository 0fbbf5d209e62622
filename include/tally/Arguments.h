/** \file
 * Calling a compiled pipeline: the one argument binder every caller goes through (the Python
 * module, tally-run, the benchmarks and tests, the Halide front end). It checks each value a
 * caller gives against the argument it is for and against how the pipeline uses it, packs it
 * the way the pipeline's `_argv` entry reads it (JITModule::run), and names the argument in
 * every error it throws.
 *
 * Buffers (tally::Buffer): where the pipeline declares them, the element type must be the
 * argument's (code and bits) and the rank its rank. A buffer the pipeline writes must not be
 * read-only. A buffer whose strides the pipeline never reads must be dense: its code indexes it
 * as a dense array, dimension 0 innermost (Halide-lowered code reads its buffers' strides, so
 * any strides work there). Which buffers a pipeline reads and writes and whose strides it reads
 * is src/ir/RuntimeCalls.h's buffer_uses, the rule Halide's metadata follows too. Binding marks a
 * buffer with no device copy host-dirty when the pipeline reads it or does not write it: its
 * host memory is the only copy. An output the pipeline only writes stays clean, as in Halide, so
 * that its copy to a device allocates without moving data (write all of it there); a buffer that
 * has a device copy keeps the dirty bits its owner set.
 *
 * Scalars (ScalarValue): an integer must lie in the argument type's range (bool: 0 or 1); a
 * float argument takes any number whose magnitude is at most its type's largest finite value
 * (65504 for float16, about 3.39e38 for bfloat16, FLT_MAX for float32), infinities and NaN
 * included, rounded to the nearest value of the type (ties to even) straight from the double:
 * never through float32, which would round twice. A bool counts as 0 or 1. A float for an
 * integer argument, a pointer for a number, or any value for an argument whose type the pipeline
 * does not declare is an error. A handle takes a pointer or a non-negative integer address.
 */
#ifndef TALLY_ARGUMENTS_H
#define TALLY_ARGUMENTS_H

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/Buffer.h"
#include "tally/Error.h"
#include "tally/Module.h"

namespace tally {

/** A value that does not fit the argument it is given for. The message names the function and
 * the argument: "blur(): argument 'input' expects a buffer of uint16, got a buffer of float32".
 * `kind` says which check failed, for callers that map them to their own errors (the Python
 * module raises TypeError, ValueError or OverflowError). */
class ArgumentError : public CompileError {
public:
    enum class Kind : uint8_t {
        Count,        ///< more or fewer values than the function has arguments
        NotABuffer,   ///< something other than a buffer for a buffer argument
        NotAScalar,   ///< a buffer for a scalar argument
        ElementType,  ///< a buffer of another element type
        Rank,         ///< a buffer of another rank
        ReadOnly,     ///< a read-only buffer for a buffer the pipeline writes
        Layout,       ///< a strided buffer where the pipeline indexes a dense array
        ScalarType,   ///< a value of the wrong kind for a scalar (a float for an integer)
        Range,        ///< a number outside the range of the scalar's type
    };
    ArgumentError(Kind kind, std::string argument, const std::string &message)
        : CompileError(message), kind(kind), argument(std::move(argument)) {}
    Kind kind;
    /** The argument's name ("" for Kind::Count). */
    std::string argument;
};

/** A scalar argument's value as the caller has it, before it is checked against the argument's
 * type and packed for it. Integers keep their signedness, so that 2^64 - 1 and -1 differ. */
class ScalarValue {
public:
    enum class Kind : uint8_t { Bool, Int, UInt, Float, Handle };

    ScalarValue(bool v) : kind_(Kind::Bool), u_(v ? 1 : 0) {}
    template <typename T,
              typename std::enable_if<std::is_integral<T>::value && !std::is_same<T, bool>::value,
                                      int>::type = 0>
    ScalarValue(T v) : kind_(std::is_signed<T>::value ? Kind::Int : Kind::UInt) {
        if (std::is_signed<T>::value) {
            i_ = int64_t(v);
        } else {
            u_ = uint64_t(v);
        }
    }
    ScalarValue(double v) : kind_(Kind::Float), f_(v) {}
    /** A pointer, for a handle argument. */
    static ScalarValue handle(const void *p) {
        ScalarValue v(false);
        v.kind_ = Kind::Handle;
        v.u_ = uint64_t(reinterpret_cast<uintptr_t>(p));
        return v;
    }

    Kind kind() const { return kind_; }
    bool as_bool() const { return u_ != 0; }
    int64_t as_int() const { return i_; }
    /** The unsigned value, or a handle's address. */
    uint64_t as_uint() const { return u_; }
    double as_float() const { return f_; }
    /** The value as messages show it: 42, -7, 0.5, 1e+300, true, 0x1000. */
    std::string to_string() const;

private:
    Kind kind_;
    union {
        int64_t i_;
        uint64_t u_;
        double f_;
    };
};

/** One value of a call: a buffer (the caller's, which must outlive the call) or a scalar. */
class ArgumentValue {
public:
    ArgumentValue(Buffer<> &buffer) : buffer_(&buffer) {}
    ArgumentValue(const ScalarValue &scalar) : scalar_(scalar) {}
    template <typename T, typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0>
    ArgumentValue(T v) : scalar_(ScalarValue(v)) {}

    bool is_buffer() const { return buffer_ != nullptr; }
    Buffer<> *buffer() const { return buffer_; }
    const ScalarValue &scalar() const { return scalar_; }

private:
    Buffer<> *buffer_ = nullptr;
    ScalarValue scalar_{false};
};

/** How a pipeline takes one argument: its declaration and, for a buffer, how the pipeline's
 * code uses it (buffer_uses in src/ir/RuntimeCalls.h). */
struct ArgumentSpec {
    /** Name, kind, type (invalid when the pipeline does not declare it) and rank (-1: the same). */
    Argument arg;
    /** The pipeline reads the buffer's elements. */
    bool read = false;
    /** The pipeline writes the buffer's elements: it must not be read-only. */
    bool written = false;
    /** The pipeline reads the buffer's strides; if not, the buffer must be dense. */
    bool reads_strides = false;
};

/** The values of one call, checked and packed: argv() is what JITModule::run takes. Holds the
 * packed scalars; points at the caller's buffers, which must outlive it. Move-only. */
class BoundArguments {
public:
    BoundArguments(BoundArguments &&) = default;
    BoundArguments &operator=(BoundArguments &&) = default;
    BoundArguments(const BoundArguments &) = delete;
    BoundArguments &operator=(const BoundArguments &) = delete;

    /** One pointer per argument, in order: the buffer's halide_buffer_t, or the scalar's value
     * in the low bytes of 8 (little-endian). */
    void **argv() { return pointers_.data(); }

private:
    friend class ArgumentBinder;
    BoundArguments() = default;
    std::vector<uint64_t> scalars_;
    std::vector<void *> pointers_;
};

/** Binds values to the arguments of one pipeline function. Made once per function (it reads
 * the function's code to learn how it uses its buffers) and used for every call; its methods
 * are const and may run on several threads at once. */
class ArgumentBinder {
public:
    /** The binder of `f`, a pipeline function of `m` (lowered: its closures and kernels are
     * part of how it uses its buffers). */
    ArgumentBinder(const Module &m, const LoweredFunc &f);

    /** The function's name. */
    const std::string &function() const { return function_; }
    /** Its arguments, in order. */
    const std::vector<ArgumentSpec> &arguments() const { return args_; }
    /** The index of the argument named `name`, or -1. */
    int find(const std::string &name) const;

    /** Checks `values`, one per argument in order, and packs them for a call; marks buffers
     * host-dirty as the file comment says. Throws ArgumentError naming the first argument whose
     * value does not fit. */
    BoundArguments bind(const std::vector<ArgumentValue> &values) const;

    /** The checks and marks bind() makes of buffer `b` for argument `i`, for callers that
     * convert values one at a time. */
    void check_buffer(size_t i, Buffer<> &b) const;
    /** The value of scalar argument `i` for `v`, checked: the bytes of its type in the low
     * bytes of the result (little-endian), the rest zero. */
    uint64_t pack_scalar(size_t i, const ScalarValue &v) const;

    /** Throws the ArgumentError for a value of the wrong kind given for argument `i`; `given`
     * says what it is ("float", "str", "a buffer"). For callers whose values are not
     * ArgumentValues (a Python object, a string on a command line). */
    [[noreturn]] void type_error(size_t i, const std::string &given) const;
    /** Throws the ArgumentError for a number out of the range of argument `i`'s type; `value`
     * is the number as the caller wrote it. */
    [[noreturn]] void range_error(size_t i, const std::string &value) const;

private:
    std::string function_;
    std::vector<ArgumentSpec> args_;
};

}  // namespace tally

#endif  // TALLY_ARGUMENTS_H
