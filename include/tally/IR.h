/** \file
 * The IR node types.
 *
 * Semantics, written once here:
 * - Expressions are pure except for Call nodes of extern call type. Evaluation order of
 *   operands is left to right; Let binds a name over its body (lexical scope, shadowing allowed).
 * - Integer arithmetic wraps for unsigned types; for signed types of 32 bits or more overflow is
 *   undefined (as in Halide). Div and Mod on integers round towards negative infinity (Euclidean
 *   with a positive divisor), so `x % k` is never negative for k > 0; division by zero yields 0.
 * - Comparisons and And/Or/Not produce bool (uint1) with the lanes of their operands.
 * - Load/Store index elements of the named buffer (not bytes). The name refers to an enclosing
 *   Allocate, a buffer argument of the function, or a handle variable in scope that points at the
 *   memory. A missing predicate means "all lanes".
 * - For runs its body for min <= name < min + extent. Its ForType says how (serial, parallel,
 *   vectorized, unrolled, GPU block/thread/lane) and its DeviceAPI where.
 * - ProducerConsumer marks the region computing (produce f) or reading (consume f) the Func f;
 *   inject-profiling uses them to decide which profiler slot is current. "Current slot" is the
 *   per-thread profiler entry to which sampled time is billed.
 * - Allocate owns memory for its body; an explicit Free may end the lifetime earlier.
 */
#ifndef TALLY_IR_H
#define TALLY_IR_H

#include <initializer_list>
#include <string>
#include <vector>

#include "tally/Expr.h"

namespace tally {

enum class ForType : uint8_t {
    Serial,
    Parallel,
    Vectorized,
    Unrolled,
    Extern,
    GPUBlock,
    GPUThread,
    GPULane
};

enum class DeviceAPI : uint8_t {
    None,
    Host,
    DefaultGPU,
    CUDA,
    OpenCL,
    OpenGLCompute,
    Metal,
    Hexagon,
    HexagonDma,
    D3D12Compute,
    Vulkan,
    WebGPU
};

enum class MemoryType : uint8_t {
    Auto,
    Heap,
    Stack,
    Register,
    GPUShared,
    GPUTexture,
    LockedCache,
    VTCM,
    AMXTile
};

/** Known alignment of an index: index % modulus == remainder. Modulus 1 means unknown. */
struct ModulusRemainder {
    int64_t modulus = 1;
    int64_t remainder = 0;
    bool operator==(const ModulusRemainder &o) const {
        return modulus == o.modulus && remainder == o.remainder;
    }
};

const char *for_type_name(ForType t);
const char *device_api_name(DeviceAPI d);
const char *memory_type_name(MemoryType m);
bool is_gpu_for_type(ForType t);

// ---------------------------------------------------------------------------------------------
// Expressions

struct IntImm : ExprNode<IntImm> {
    static const IRNodeType _node_type = IRNodeType::IntImm;
    int64_t value;
    IntImm(Type t, int64_t v) : ExprNode(std::move(t)), value(v) {}
    static Expr make(Type t, int64_t value);
};

struct UIntImm : ExprNode<UIntImm> {
    static const IRNodeType _node_type = IRNodeType::UIntImm;
    uint64_t value;
    UIntImm(Type t, uint64_t v) : ExprNode(std::move(t)), value(v) {}
    static Expr make(Type t, uint64_t value);
};

struct FloatImm : ExprNode<FloatImm> {
    static const IRNodeType _node_type = IRNodeType::FloatImm;
    double value;
    FloatImm(Type t, double v) : ExprNode(std::move(t)), value(v) {}
    static Expr make(Type t, double value);
};

struct StringImm : ExprNode<StringImm> {
    static const IRNodeType _node_type = IRNodeType::StringImm;
    std::string value;
    StringImm(std::string v) : ExprNode(Handle("char")), value(std::move(v)) {}
    static Expr make(const std::string &value);
};

/** Value conversion to another type of the same lane count. */
struct Cast : ExprNode<Cast> {
    static const IRNodeType _node_type = IRNodeType::Cast;
    Expr value;
    Cast(Type t, Expr v) : ExprNode(std::move(t)), value(std::move(v)) {}
    static Expr make(Type t, Expr value);
};

/** Bit-pattern reinterpretation (same total bit width, or between handles and 64-bit ints). */
struct Reinterpret : ExprNode<Reinterpret> {
    static const IRNodeType _node_type = IRNodeType::Reinterpret;
    Expr value;
    Reinterpret(Type t, Expr v) : ExprNode(std::move(t)), value(std::move(v)) {}
    static Expr make(Type t, Expr value);
};

struct Variable : ExprNode<Variable> {
    static const IRNodeType _node_type = IRNodeType::Variable;
    std::string name;
    Variable(Type t, std::string n) : ExprNode(std::move(t)), name(std::move(n)) {}
    static Expr make(Type t, const std::string &name);
};

/** Shared shape of the binary operators; both operands have the same type. */
template <typename T>
struct BinaryOpNode : ExprNode<T> {
    Expr a, b;
    BinaryOpNode(Type t, Expr a, Expr b)
        : ExprNode<T>(std::move(t)), a(std::move(a)), b(std::move(b)) {}
};

#define TALLY_BINARY_NODE(N)                                                                       \
    struct N : BinaryOpNode<N> {                                                                   \
        static const IRNodeType _node_type = IRNodeType::N;                                        \
        using BinaryOpNode<N>::BinaryOpNode;                                                       \
        static Expr make(Expr a, Expr b);                                                          \
    };
TALLY_BINARY_NODE(Add)
TALLY_BINARY_NODE(Sub)
TALLY_BINARY_NODE(Mul)
TALLY_BINARY_NODE(Div)
TALLY_BINARY_NODE(Mod)
TALLY_BINARY_NODE(Min)
TALLY_BINARY_NODE(Max)
TALLY_BINARY_NODE(EQ)
TALLY_BINARY_NODE(NE)
TALLY_BINARY_NODE(LT)
TALLY_BINARY_NODE(LE)
TALLY_BINARY_NODE(GT)
TALLY_BINARY_NODE(GE)
TALLY_BINARY_NODE(And)
TALLY_BINARY_NODE(Or)
#undef TALLY_BINARY_NODE

struct Not : ExprNode<Not> {
    static const IRNodeType _node_type = IRNodeType::Not;
    Expr a;
    Not(Type t, Expr a) : ExprNode(std::move(t)), a(std::move(a)) {}
    static Expr make(Expr a);
};

struct Select : ExprNode<Select> {
    static const IRNodeType _node_type = IRNodeType::Select;
    Expr condition, true_value, false_value;
    Select(Type t, Expr c, Expr tv, Expr fv)
        : ExprNode(std::move(t)), condition(std::move(c)), true_value(std::move(tv)),
          false_value(std::move(fv)) {}
    static Expr make(Expr condition, Expr true_value, Expr false_value);
};

struct Load : ExprNode<Load> {
    static const IRNodeType _node_type = IRNodeType::Load;
    std::string name;
    Expr index;
    Expr predicate;  // undefined: all lanes
    ModulusRemainder alignment;
    Load(Type t, std::string n, Expr i, Expr p, ModulusRemainder a)
        : ExprNode(std::move(t)), name(std::move(n)), index(std::move(i)), predicate(std::move(p)),
          alignment(a) {}
    static Expr make(Type t, const std::string &name, Expr index, Expr predicate = Expr(),
                     ModulusRemainder alignment = {});
};

struct Ramp : ExprNode<Ramp> {
    static const IRNodeType _node_type = IRNodeType::Ramp;
    Expr base, stride;
    int lanes;
    Ramp(Type t, Expr b, Expr s, int l)
        : ExprNode(std::move(t)), base(std::move(b)), stride(std::move(s)), lanes(l) {}
    static Expr make(Expr base, Expr stride, int lanes);
};

struct Broadcast : ExprNode<Broadcast> {
    static const IRNodeType _node_type = IRNodeType::Broadcast;
    Expr value;
    int lanes;
    Broadcast(Type t, Expr v, int l) : ExprNode(std::move(t)), value(std::move(v)), lanes(l) {}
    static Expr make(Expr value, int lanes);
};

struct Let : ExprNode<Let> {
    static const IRNodeType _node_type = IRNodeType::Let;
    std::string name;
    Expr value, body;
    Let(Type t, std::string n, Expr v, Expr b)
        : ExprNode(std::move(t)), name(std::move(n)), value(std::move(v)), body(std::move(b)) {}
    static Expr make(const std::string &name, Expr value, Expr body);
};

/** Which text dialects know a name: the third column of TargetFeatures.def and Intrinsics.def. */
struct Dialects {
    enum : unsigned {
        H14 = 1,   ///< Halide 14.0.0 knows it
        H21 = 2,   ///< Halide 21.0.0 knows it
        Tally = 4  ///< neither release does: Tally's own, or kept from an older release
    };
};

struct Call : ExprNode<Call> {
    static const IRNodeType _node_type = IRNodeType::Call;
    /** Every intrinsic of Intrinsics.def, named as Halide names them. */
    enum IntrinsicOp : uint8_t {
#define TALLY_INTRINSIC(NAME, PURITY, DIALECTS) NAME,
#include "tally/Intrinsics.def"
        IntrinsicOpCount  ///< also "no intrinsic"
    };
    enum CallType : uint8_t {
        Image,
        Extern,
        ExternCPlusPlus,
        PureExtern,
        Halide,
        Intrinsic,
        PureIntrinsic
    };
    std::string name;
    std::vector<Expr> args;
    CallType call_type;
    /** The intrinsic an Intrinsic or PureIntrinsic call names, else IntrinsicOpCount. */
    IntrinsicOp intrinsic_op;
    Call(Type t, std::string n, std::vector<Expr> a, CallType ct)
        : ExprNode(std::move(t)), name(std::move(n)), args(std::move(a)), call_type(ct),
          intrinsic_op(ct == Intrinsic || ct == PureIntrinsic ? find_intrinsic(name)
                                                              : IntrinsicOpCount) {}
    static Expr make(Type t, const std::string &name, std::vector<Expr> args, CallType call_type);
    /** A call of intrinsic `op`, typed `t`. */
    static Expr make(Type t, IntrinsicOp op, std::vector<Expr> args);
    /** The call type a call of this name gets when text does not say (intrinsics by name). */
    static CallType default_call_type(const std::string &name);
    bool is_intrinsic() const {
        return call_type == Intrinsic || call_type == PureIntrinsic;
    }
    /** This is a call of intrinsic `op` (by call type and name, as in Halide). */
    bool is_intrinsic(IntrinsicOp op) const {
        return intrinsic_op == op;
    }
    /** This is a call of one of `ops`. */
    bool is_intrinsic(std::initializer_list<IntrinsicOp> ops) const {
        for (IntrinsicOp op : ops) {
            if (intrinsic_op == op) {
                return true;
            }
        }
        return false;
    }

    /** An intrinsic's name. */
    static const char *intrinsic_name(IntrinsicOp op);
    /** The intrinsic of that name, or IntrinsicOpCount. */
    static IntrinsicOp find_intrinsic(const std::string &name);
    /** Intrinsics.def's purity: no effect and a value for any argument (speculable). */
    static bool is_pure_intrinsic(IntrinsicOp op);
    /** Which dialects know the intrinsic (a mask of Dialects). */
    static unsigned intrinsic_dialects(IntrinsicOp op);
    bool is_extern() const {
        return call_type == Extern || call_type == ExternCPlusPlus || call_type == PureExtern;
    }
};
const char *call_type_name(Call::CallType t);

/** Lane gathering from one or more vectors: result lane i is lane indices[i] of the
 * concatenation of `vectors`. */
struct Shuffle : ExprNode<Shuffle> {
    static const IRNodeType _node_type = IRNodeType::Shuffle;
    std::vector<Expr> vectors;
    std::vector<int> indices;
    Shuffle(Type t, std::vector<Expr> v, std::vector<int> i)
        : ExprNode(std::move(t)), vectors(std::move(v)), indices(std::move(i)) {}
    static Expr make(std::vector<Expr> vectors, std::vector<int> indices);
    static Expr make_interleave(std::vector<Expr> vectors);
    static Expr make_concat(std::vector<Expr> vectors);
    static Expr make_slice(Expr vector, int begin, int stride, int size);
    static Expr make_extract_element(Expr vector, int i);
    bool is_interleave() const;
    bool is_concat() const;
    bool is_slice() const;
    bool is_extract_element() const;
};

// ---------------------------------------------------------------------------------------------
// Statements

struct LetStmt : StmtNode<LetStmt> {
    static const IRNodeType _node_type = IRNodeType::LetStmt;
    std::string name;
    Expr value;
    Stmt body;
    static Stmt make(const std::string &name, Expr value, Stmt body);
};

/** If condition is false, fail the pipeline with the integer error code `message`. */
struct AssertStmt : StmtNode<AssertStmt> {
    static const IRNodeType _node_type = IRNodeType::AssertStmt;
    Expr condition, message;
    static Stmt make(Expr condition, Expr message);
};

struct ProducerConsumer : StmtNode<ProducerConsumer> {
    static const IRNodeType _node_type = IRNodeType::ProducerConsumer;
    std::string name;
    bool is_producer;
    Stmt body;
    static Stmt make(const std::string &name, bool is_producer, Stmt body);
};

struct For : StmtNode<For> {
    static const IRNodeType _node_type = IRNodeType::For;
    std::string name;
    Expr min, extent;
    ForType for_type;
    DeviceAPI device_api;
    Stmt body;
    static Stmt make(const std::string &name, Expr min, Expr extent, ForType for_type,
                     DeviceAPI device_api, Stmt body);
};

struct Store : StmtNode<Store> {
    static const IRNodeType _node_type = IRNodeType::Store;
    std::string name;
    Expr value, index;
    Expr predicate;  // undefined: all lanes
    ModulusRemainder alignment;
    static Stmt make(const std::string &name, Expr value, Expr index, Expr predicate = Expr(),
                     ModulusRemainder alignment = {});
};

struct Allocate : StmtNode<Allocate> {
    static const IRNodeType _node_type = IRNodeType::Allocate;
    std::string name;
    Type type;
    MemoryType memory_type;
    std::vector<Expr> extents;
    Expr condition;  // undefined: always allocate
    Expr new_expr;   // custom allocation expression, or undefined
    std::string free_function;
    Stmt body;
    static Stmt make(const std::string &name, Type type, MemoryType memory_type,
                     std::vector<Expr> extents, Expr condition, Stmt body, Expr new_expr = Expr(),
                     const std::string &free_function = "");
};

struct Free : StmtNode<Free> {
    static const IRNodeType _node_type = IRNodeType::Free;
    std::string name;
    static Stmt make(const std::string &name);
};

/** Sequencing. Blocks nest to the right: `first` is never itself a Block. */
struct Block : StmtNode<Block> {
    static const IRNodeType _node_type = IRNodeType::Block;
    Stmt first, rest;
    static Stmt make(Stmt first, Stmt rest);
    /** Builds right-nested blocks; skips undefined entries; undefined if all are. */
    static Stmt make(const std::vector<Stmt> &stmts);
};

struct IfThenElse : StmtNode<IfThenElse> {
    static const IRNodeType _node_type = IRNodeType::IfThenElse;
    Expr condition;
    Stmt then_case, else_case;  // else_case may be undefined
    static Stmt make(Expr condition, Stmt then_case, Stmt else_case = Stmt());
};

struct Evaluate : StmtNode<Evaluate> {
    static const IRNodeType _node_type = IRNodeType::Evaluate;
    Expr value;
    static Stmt make(Expr value);
};

/** Halide's atomic update (`atomic { ... }`, `atomic (mutex) { ... }`): the body's stores to
 * the buffer it updates happen atomically with respect to other threads running the same
 * statement. Without a mutex the body must be one read-modify-write store (an atomic
 * instruction); with one, Halide guards the body with that mutex. */
struct Atomic : StmtNode<Atomic> {
    static const IRNodeType _node_type = IRNodeType::Atomic;
    std::string producer_name;  // the Func updated atomically; empty where the text says none
    std::string mutex_name;     // empty: no mutex (a lock-free update)
    Stmt body;
    static Stmt make(const std::string &producer_name, const std::string &mutex_name, Stmt body);
};

/** Halide's `fork { first } { rest }` (async schedules, before lowering ends): the two run
 * concurrently and the statement ends when both have. Chains nest to the right and print flat,
 * `fork { a } { b } { c }` being Fork(a, Fork(b, c)). Host code runs every branch of a chain as
 * one task of a single halide_do_parallel_tasks call. */
struct Fork : StmtNode<Fork> {
    static const IRNodeType _node_type = IRNodeType::Fork;
    Stmt first, rest;
    static Stmt make(Stmt first, Stmt rest);
    /** Right-nested forks of two or more branches. */
    static Stmt make(const std::vector<Stmt> &branches);
};

/** The branches of a fork chain, in order (the `rest` of each link that is a Fork continues the
 * chain; `first` never does: a Fork there is a branch of its own). */
std::vector<Stmt> fork_branches(const Fork *op);

/** Halide's `acquire (semaphore, count) { body }`: body runs once `count` units have been taken
 * from `semaphore` (a `halide_semaphore_t *` that halide_semaphore_init made and
 * halide_semaphore_release feeds). At the start of a fork branch it is a precondition of the
 * branch's task, so no thread blocks waiting for it; elsewhere it is a task of its own. */
struct Acquire : StmtNode<Acquire> {
    static const IRNodeType _node_type = IRNodeType::Acquire;
    Expr semaphore, count;
    Stmt body;
    static Stmt make(Expr semaphore, Expr count, Stmt body);
};

/** Halide 14 names a Func's mutex `<producer>.mutex`: true when `name` is such a name, with the
 * producer's name in *producer. (A single name in `atomic (NAME) {` is Halide 14's mutex exactly
 * then, and Halide 21's producer otherwise.) */
bool atomic_mutex_producer(const std::string &name, std::string *producer);

// ---------------------------------------------------------------------------------------------
// Small helpers used everywhere

Expr make_const(Type t, int64_t v);
Expr make_zero(Type t);
Expr make_one(Type t);
bool is_const(const Expr &e);
/** If e is an integer constant (IntImm, UIntImm within range, or a broadcast of one), store it. */
bool const_int_value(const Expr &e, int64_t *v);
bool is_const_one(const Expr &e);
bool is_const_zero(const Expr &e);
/** Does this allocation come from the heap (halide_malloc) rather than the stack or a custom
 * allocator? Heap: MemoryType::Heap, or Auto when the size is not a constant or exceeds
 * `stack_limit_bytes`. Codegen and inject-profiling must agree, so both call this. */
bool allocation_uses_heap(const Allocate *op, int64_t stack_limit_bytes = 16 * 1024);
/** The allocation's constant size in bytes, or -1 if not constant. */
int64_t constant_allocation_bytes(const Allocate *op);
/** Flattens right-nested blocks into a list. */
std::vector<Stmt> flatten_block(const Stmt &s);

/** The operators of Halide's vector reductions (`vector_reduce_add(v)`, Halide 14's
 * `vector_reduce(Add, v)`). */
enum class VectorReduceOp : uint8_t { Add, SaturatingAdd, Mul, Min, Max, And, Or };
/** Halide's VectorReduce of `value` to `lanes` lanes: lane i reduces the f = lanes(value) / lanes
 * adjacent lanes i*f ... i*f+f-1 of `value` with `op`. Tally's IR has no reduction node, so it
 * is written out as `op` applied to the f strided slices of `value` (`value` itself when f is
 * 1). `lanes` must divide the lanes of `value` (a CompileError otherwise). The text reader and
 * the Halide bridge both build reductions with this. */
Expr make_vector_reduce(VectorReduceOp op, const Expr &value, int lanes);

}  // namespace tally

// The nodes' accept() is defined with the visitor; every user of a node gets it.
#include "tally/IRVisitor.h"

#endif  // TALLY_IR_H
