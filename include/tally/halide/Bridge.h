/** \file
 * The Halide front door: a pipeline written with Halide's C++ API (Funcs and schedules), compiled
 * and profiled by Tally without a text round trip.
 *
 * Halide 21 lowers the pipeline to its conceptual statement (the statement before its GPU
 * offload and closures; `compile_to_conceptual_stmt` prints it) and the bridge translates that
 * statement node by node into Tally's IR: types, intrinsics, buffers and arguments exactly, float
 * constants bit for bit. Tally's own lowering then does the copies, the GPU offload and the
 * profiling, and Tally's back ends compile it. A node or intrinsic the bridge does not translate
 * is a tally::CompileError naming it, never dropped; nothing is half-compiled.
 *
 * Part of libtally_halide, built only where CMake finds Halide 21; the core library never links
 * Halide. Include "Halide.h" before this header or let it include it: Halide's and Tally's error
 * headers define macros of the same names (user_error, internal_assert, ...), and Tally's step
 * aside when Halide's are there.
 *
 *     Halide::Func blur = ...;
 *     auto p = tally::halide::compile(blur, {input}, "host-profile");
 *     p->run({input_buffer, output_buffer});   // the report prints when the process exits
 */
#ifndef TALLY_HALIDE_BRIDGE_H
#define TALLY_HALIDE_BRIDGE_H

#include "Halide.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tally/Module.h"

namespace tally {
namespace halide {

struct Options {
    /** The pipeline function's name (its symbol, the profiler's pipeline name); empty: Halide's
     * default, the name of the pipeline's first output Func with every character but a letter
     * or digit made '_' (a second Func named `out`, which Halide names `out$1`, gives `out_1`). */
    std::string name;
    /** LLVM optimisation level, 0-3. */
    int opt_level = 3;
    /** Shared objects the JIT resolves extern calls in (define_extern stages), searched before
     * the process (tally::CompileOptions::extern_libraries). */
    std::vector<std::string> extern_libraries;
};

/** The Halide target Halide lowers with for a Tally target: `host` is Halide's host target;
 * every feature Halide 21 knows is carried over but the profiling ones (`profile`,
 * `profile_by_timer`: Tally injects the profiling) and those only Tally knows
 * (`profile_timestamps`, ...). Throws tally::CompileError on a target string Tally does not
 * read. */
Halide::Target halide_target(const std::string &tally_target);

/** A Halide expression or statement in Tally's IR. Throws tally::CompileError naming the first
 * node, intrinsic or type Tally cannot represent. */
Expr translate(const Halide::Expr &e);
Stmt translate(const Halide::Internal::Stmt &s);
/** A Halide type in Tally's IR. */
Type translate(const Halide::Type &t);

/** The pipeline lowered by Halide for `target` (a Tally target string, halide_target()) to its
 * conceptual statement and translated: a module of one function (linkage external plus
 * metadata) with the arguments Halide gives it (`args` in order, then the outputs), the buffers
 * the pipeline embeds, and the target. What tally::lower takes. */
Module translate(const Halide::Pipeline &pipeline, const std::vector<Halide::Argument> &args,
                 const std::string &target, const Options &options = {});

/** One argument of Pipeline::run: a buffer (Halide::Buffer, or a halide_buffer_t) or a scalar. */
class Value {
public:
    enum class Kind : uint8_t { Buffer, Bool, Int, UInt, Float };
    Value(halide_buffer_t *b) : kind_(Kind::Buffer), buffer_(b) {}
    template <typename T>
    Value(Halide::Buffer<T> &b) : Value(b.raw_buffer()) {}
    Value(bool v) : kind_(Kind::Bool), u_(v) {}
    Value(double v) : kind_(Kind::Float), f_(v) {}
    Value(float v) : kind_(Kind::Float), f_(v) {}
    template <typename T,
              typename std::enable_if<std::is_integral<T>::value && !std::is_same<T, bool>::value,
                                      int>::type = 0>
    Value(T v) : kind_(std::is_signed<T>::value ? Kind::Int : Kind::UInt) {
        if (std::is_signed<T>::value) {
            i_ = int64_t(v);
        } else {
            u_ = uint64_t(v);
        }
    }
    Kind kind() const { return kind_; }
    halide_buffer_t *buffer() const { return buffer_; }
    int64_t as_int() const { return i_; }
    uint64_t as_uint() const { return u_; }
    double as_float() const { return f_; }

private:
    Kind kind_;
    halide_buffer_t *buffer_ = nullptr;
    union {
        int64_t i_;
        uint64_t u_ = 0;
        double f_;
    };
};

/** A pipeline compiled in this process by Tally. */
class Pipeline {
public:
    ~Pipeline();
    Pipeline(const Pipeline &) = delete;
    Pipeline &operator=(const Pipeline &) = delete;

    /** Runs the pipeline on one value per argument, in the order of the module's function
     * (the `args` given to compile, then the outputs). Buffers are checked against the
     * arguments (type, rank, bounds the pipeline needs); a value that does not fit is a
     * tally::ArgumentError. Buffers must hold their data on the host; after the run every
     * output is on the host (a GPU pipeline's outputs are copied back) and the pipeline's
     * device allocations for the given buffers are freed. Returns 0, or the runtime's negative
     * error code (its message was printed by the runtime). */
    int run(const std::vector<Value> &args) const;

    /** The translated module, as tally::lower took it. */
    const Module &translated() const;
    /** The lowered module, as it was compiled. */
    const Module &lowered() const;
    /** The pipeline function's name. */
    const std::string &name() const;

    struct Impl;
    explicit Pipeline(std::unique_ptr<Impl> impl);

private:
    std::unique_ptr<Impl> impl;
};

/** Translates (as translate()), lowers with Tally for `target` and JIT-compiles the pipeline. */
std::unique_ptr<Pipeline> compile(const Halide::Pipeline &pipeline,
                                  const std::vector<Halide::Argument> &args,
                                  const std::string &target = "host", const Options &options = {});

/** Ahead of time: writes `<prefix>.o` and `<prefix>.h` as Halide's `compile_to_static_library`
 * would (the same entry symbols: NAME, NAME_argv, NAME_metadata; link the object with the
 * static runtime, -ltally_runtime), for the machine `target` names. */
void compile_to_files(const Halide::Pipeline &pipeline, const std::vector<Halide::Argument> &args,
                      const std::string &prefix, const std::string &target = "host",
                      const Options &options = {});

/** Ahead of time, the wrapper of a multi-target library, as Halide's compile_multitarget builds
 * one: `translated` is the pipeline translated (translate()) for any of the targets, whose
 * arguments the wrapper takes; `variants` are the variants' function names and Tally target
 * strings (x86-64 targets, not `host`), in order of preference, the last the baseline. Writes
 * `<prefix>.o` and `<prefix>.h`: the function `name` (with `_argv` and `_metadata`), which runs
 * the first variant whose x86 ISA extensions the CPU has (tally::multitarget_wrapper). Compile
 * each variant with compile_to_files under its own name, and link them all with the static
 * runtime. */
void compile_multitarget_wrapper(const Module &translated, const std::string &name,
                                 const std::vector<std::pair<std::string, std::string>> &variants,
                                 const std::string &prefix);

/** Tally's profiler report of every pipeline run so far in this process, as text (what prints
 * when the process exits) or JSON (tally-report and the Python module read it). Empty before any
 * profiled run. */
std::string report(bool json = false);

}  // namespace halide
}  // namespace tally

#endif  // TALLY_HALIDE_BRIDGE_H
