/** \file
 * The C-family kernel source generator that the Vulkan (GLSL) and OpenCL (OpenCL C) back ends
 * share: one Kernel's body as C-like source, every vector value scalarized.
 *
 * What the two languages spell alike (statements, operators, loops over the kernel's geometry,
 * Euclidean division, scalarized vectors, which value is bound to a temporary) is written here
 * once; what they spell differently (type names, conversions, bit casts, literals, the ids of a
 * work item, barriers, math function names, how arguments arrive) is asked of the language's
 * subclass through the virtual functions below.
 */
#ifndef TALLY_CODEGEN_KERNELSOURCE_H
#define TALLY_CODEGEN_KERNELSOURCE_H

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/Analysis.h"
#include "tally/IRVisitor.h"
#include "tally/Module.h"

namespace tally {

/** A C identifier from an IR name: [A-Za-z0-9] kept, runs of anything else become one '_'
 * (GLSL reserves names with two consecutive underscores), no leading or trailing '_'. */
std::string kernel_source_name(const std::string &n);

/** Generates the source of one kernel's body; a subclass declares the arguments and wraps the
 * body into the language's entry point. Generation is single-use: construct, call the
 * subclass's entry, read the result. */
class KernelSourceGen : public IRVisitor {
public:
    explicit KernelSourceGen(const Kernel &k) : kernel(k) {}

    /** The buffers among the kernel's arguments (they come first). */
    int num_buffers = 0;

protected:
    /** Where a buffer lives: a kernel argument, a work-group shared array, a work item's own. */
    enum class Space { Global, Shared, Private };

    // --- what each language says ----------------------------------------------------------

    /** "Vulkan", "OpenCL": messages begin "<language> back end: kernel '<name>': ...". */
    virtual const char *api_name() const = 0;
    /** Whether the kernels support scalar type `elem` (default: int32, uint32, float32, bool),
     * and the list of those types, for messages. A language that supports integers narrower
     * than 32 bits gets C's arithmetic on them: computed as int, and wrapped back. */
    virtual bool supports(const Type &elem) const;
    virtual const char *supported_types() const;
    /** The language's name of a scalar type the back end supports. */
    virtual std::string type_name(const Type &t) const = 0;
    /** `v` (of scalar type `from`) converted to `to` as the language's value conversion does
     * (to a bool, `convert` compares with zero itself). */
    virtual std::string cast(const std::string &v, const Type &from, const Type &to) const = 0;
    /** The bits of `v` (of `from`) as `to`, both 32-bit non-bool scalars, different types. */
    virtual std::string bit_cast(const std::string &v, const Type &from, const Type &to) const = 0;
    /** A float32 literal written as digits ("1.5", "2.0"), in the language's spelling (a
     * float64 literal is plain C's). */
    virtual std::string float_digits(const std::string &digits) const { return digits; }
    /** The id of the work group (`block`) or of the item in it, in dimension `d`, as an int. */
    virtual std::string work_id(bool block, int d) const = 0;
    /** The statements of a work-group barrier over shared and global memory. */
    virtual std::vector<std::string> barrier() const = 0;
    /** The language's name of Halide's float math function `name` (sqrt, round, fabs, atan2,
     * ...; the name without `_f32`), or "" when it has none. */
    virtual std::string math_function(const std::string &name) const;
    /** Atomic updates (Halide's `atomic` without a mutex), where the language has them: the
     * type of a pointer to a 32-bit `word` (int32 or uint32) in `space`, which the atomic
     * functions take; and the function doing read-modify-write `rmw` on an element of `elem`
     * through a pointer to it as that word ("" when there is none: a compare-and-swap loop on
     * its uint32 word does it). A language whose word pointer type is "" (the default) has no
     * atomics: the update is a CompileError. */
    virtual std::string atomic_word_pointer(Space space, const Type &word) const { return ""; }
    virtual std::string atomic_function(AtomicUpdate::Rmw rmw, const Type &elem) const {
        return "";
    }
    /** A language whose atomic functions take the element itself rather than a pointer to it
     * (GLSL's `atomicAdd(b0.data[i], v)`): it has atomics on 32-bit integer elements only, and
     * atomic_function and atomic_compare_exchange are given the element where the others get a
     * pointer. */
    virtual bool atomics_take_elements() const { return false; }
    /** The compare-and-swap of the word at `pointer`: its value if it was `expected` (then
     * replaced by `desired`), else its value. */
    virtual std::string atomic_compare_exchange(const std::string &pointer,
                                                const std::string &expected,
                                                const std::string &desired) const {
        return "";
    }
    /** The declaration of a work-group shared array. */
    virtual std::string shared_array(const std::string &type, const std::string &name,
                                     int64_t size) const = 0;

    // --- for the subclasses --------------------------------------------------------------

    struct Binding {
        Type type;
        std::vector<std::string> lanes;
    };
    struct BufferRef {
        std::string access;  // `b0.data`, `b0` or a local/shared array name
        Type elem;
        Space space = Space::Global;
    };

    [[noreturn]] void unsupported(const std::string &what);
    /** Checks that `t` is a type the kernels support (int32, uint32, float32, bool). */
    void check_type(const Type &t, const std::string &where);
    /** A name not used yet, from `hint`. */
    std::string fresh(const std::string &hint);
    /** Reserves a name the subclass writes itself. */
    void reserve(const std::string &n) { used.insert(n); }
    void push_var(const std::string &n, Binding b) { vars[n].push_back(std::move(b)); }
    void push_buffer(const std::string &n, BufferRef b) { buffers[n].push_back(std::move(b)); }
    /** Binds the kernel's arguments: checks that buffers come first and that every type is
     * supported, then asks the language for each (buffer_argument, scalar_argument). */
    void bind_arguments();
    /** Declares buffer argument number `index` (elements of `elem`; `stored`: the kernel writes
     * it); returns how the body indexes it (`access[i]`). */
    virtual std::string buffer_argument(const std::string &name, const Type &elem, bool stored,
                                        int index) = 0;
    /** Declares scalar argument `name` of type `t`; returns the variable the body reads. */
    virtual std::string scalar_argument(const std::string &name, const Type &t) = 0;
    /** An element `e` read from buffer `b`, as a value of the buffer's element type: a language
     * that stores a type narrower than it computes with it (Vulkan's 8- and 16-bit integers)
     * converts here; `e` itself by default. */
    virtual std::string from_storage(const BufferRef &b, const std::string &e) const { return e; }
    /** A value `v` of the buffer's element type as stored into buffer `b`; `v` by default. */
    virtual std::string to_storage(const BufferRef &b, const std::string &v) const { return v; }
    /** Generates the body (indented one level) into body(), after the arguments are bound. */
    void generate_body();

    const Kernel &kernel;
    /** The generated body, the shared-array declarations, and whether the div/mod helpers
     * (div_mod_helpers) are needed. */
    std::ostringstream body, shared_decls;
    bool need_div_mod = false;

    /** Euclidean division and modulo of int and uint (tally_div_i32, ...), in C syntax both
     * languages read; of long and ulong (tally_div_i64, ...), for a language with 64-bit
     * integers. */
    static const char *const div_mod_helpers;
    static const char *const div_mod_helpers_64;
    bool need_div_mod_64 = false;
    /** Whether any value, argument or allocation is a float64. */
    bool uses_float64 = false;

private:
    int thread_loop_depth = 0;
    std::map<std::string, std::vector<Binding>> vars;
    std::map<std::string, std::vector<BufferRef>> buffers;
    std::set<std::string> used;
    int temp_counter = 0;
    int indent = 1;
    std::vector<std::string> value;  // lanes of the last visited expression

    bool supported_type(const Type &t) const;
    /** `s`, of integer type `t` narrower than 32 bits, computed as int: converted back. */
    std::string wrap(const std::string &s, const Type &t) const;
    void arithmetic(const Expr &a, const Expr &b, const char *o, const Type &t);
    void div_mod(const Expr &a, const Expr &b, const char *what, const Type &t);
    void line(const std::string &s);
    std::string temp(const Type &t, const std::string &s);
    std::string share(const Type &t, const std::string &s);
    std::vector<std::string> emit(const Expr &e);
    std::string emit_scalar(const Expr &e);
    std::string int_literal(const Type &t, int64_t v);
    std::string float_literal(const Type &t, double d);
    void pop_var(const std::string &n);
    void pop_buffer(const std::string &n);
    const BufferRef &buffer(const std::string &n);
    Binding bind_value(const std::string &n, const Expr &e);
    std::string convert(const std::string &v, const Type &from, const Type &to);
    std::string reinterpret(const std::string &v, const Type &from, const Type &to);
    template <typename F>
    void binary(const Expr &a, const Expr &b, F f);
    void infix(const Expr &a, const Expr &b, const char *o);
    void ordered(const Expr &a, const Expr &b, const char *o);
    void check_not_bool(const Type &t, const char *what);
    std::string element(const std::string &name, const Type &t, const std::string &index);
    bool call_math(const Call *op);
    bool call_lowered_intrinsic(const Call *op);
    void if_then_else(const Call *op);
    void atomic_store(const AtomicUpdate &u);

    void visit(const IntImm *op) override;
    void visit(const UIntImm *op) override;
    void visit(const FloatImm *op) override;
    void visit(const StringImm *) override;
    void visit(const Cast *op) override;
    void visit(const Reinterpret *op) override;
    void visit(const Variable *op) override;
    void visit(const Add *op) override;
    void visit(const Sub *op) override;
    void visit(const Mul *op) override;
    void visit(const Div *op) override;
    void visit(const Mod *op) override;
    void visit(const Min *op) override;
    void visit(const Max *op) override;
    void visit(const EQ *op) override;
    void visit(const NE *op) override;
    void visit(const LT *op) override;
    void visit(const LE *op) override;
    void visit(const GT *op) override;
    void visit(const GE *op) override;
    void visit(const And *op) override;
    void visit(const Or *op) override;
    void visit(const Not *op) override;
    void visit(const Select *op) override;
    void visit(const Load *op) override;
    void visit(const Ramp *op) override;
    void visit(const Broadcast *op) override;
    void visit(const Let *op) override;
    void visit(const Shuffle *op) override;
    void visit(const Call *op) override;
    void visit(const LetStmt *op) override;
    void visit(const AssertStmt *) override;
    void visit(const ProducerConsumer *op) override;
    void visit(const For *op) override;
    void visit(const Store *op) override;
    void visit(const Allocate *op) override;
    void visit(const Free *) override;
    void visit(const Atomic *) override;
    void visit(const Fork *) override;
    void visit(const Acquire *) override;
    void visit(const Block *op) override;
    void visit(const IfThenElse *op) override;
    void visit(const Evaluate *op) override;
};

}  // namespace tally

#endif  // TALLY_CODEGEN_KERNELSOURCE_H
