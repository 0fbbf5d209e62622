/** \file
 * The parse tree of the IR text format: what the syntax parser (SyntaxParser.h) builds and the
 * elaborator (Elaborator.h) types. It mirrors the text, not the IR: no node carries a type that
 * the text leaves implicit, every node keeps the source location its diagnostics point at, and
 * forms the IR spells otherwise stay as written (`-x` is Neg, `min(a, b)` is a Binary "min",
 * `let x = v` is a statement whose scope is the rest of its block). Nothing but the two stages of
 * the parser sees these types.
 */
#ifndef TALLY_TEXT_PARSETREE_H
#define TALLY_TEXT_PARSETREE_H

#include <cstdint>
#include <string>
#include <vector>

#include "tally/IR.h"
#include "tally/Module.h"
#include "tally/Target.h"
#include "text/Lexer.h"

namespace tally {

/** An expression as written. `kids` holds the operands in source order (a load: index
 * [, predicate]; a let: value, body; a ramp: base, stride; a shuffle: its vectors). */
struct PExpr {
    enum Kind {
        IntLit,
        FloatLit,
        SpecialFloat,  // inf, -inf, nan (needs a prefix)
        StrLit,
        Var,
        CallE,
        LoadE,
        Binary,
        NotE,
        Neg,
        CastE,
        LetE,
        SelectE,
        RampE,
        BroadcastE,
        ReinterpretE,
        ShuffleE,
    };
    Kind kind = IntLit;
    Loc loc;
    std::string name;  // variable/call/load/let name, binary operator, shuffle form
    Type prefix;       // an explicit `(T)` prefix, or invalid
    Type cast_type;
    uint64_t int_value = 0;
    bool negative = false;
    double float_value = 0;
    char float_suffix = 0;  // 'f', 'h' or 0, as the lexer read it
    int lanes = 0;          // ramp and broadcast
    bool has_call_type = false;
    Call::CallType call_type = Call::Extern;
    ModulusRemainder alignment;
    bool has_predicate = false;
    std::vector<int> indices;  // shuffle lanes; slice_vectors/extract_element literals
    std::vector<PExpr> kids;
};

/** A statement as written. `let` and `allocate` are statements here; their scope is the rest of
 * the enclosing block, which the elaborator nests. */
struct PStmt {
    enum Kind {
        LetS,
        AssertS,
        ProduceS,
        ConsumeS,
        ForS,
        StoreS,
        AllocateS,
        FreeS,
        IfS,
        EvalS,
        ScopeS,
        AtomicS,  // name: the mutex, or empty; producer: the producer, or empty
        ForkS,    // branches: two or more
        AcquireS  // exprs: semaphore, count; body
    };
    Kind kind = EvalS;
    Loc loc;
    std::string name;
    std::vector<PExpr> exprs;  // let: value; assert: cond,msg; for: min,extent; store: index,
                               // value[,pred]; allocate: extents...; if: cond; eval: value
    std::vector<PStmt> body, else_body;
    std::vector<std::vector<PStmt>> branches;  // fork
    bool has_else = false;
    ForType for_type = ForType::Serial;
    DeviceAPI device_api = DeviceAPI::None;
    Type type;  // allocate
    MemoryType memory_type = MemoryType::Auto;
    bool has_condition = false, has_new_expr = false, has_predicate = false;
    PExpr condition, new_expr;
    std::string free_function;
    std::string producer;  // atomic
    ModulusRemainder alignment;
};

/** A function argument; `typed` when the header gives its type (`name: T`, `name: buffer<..>`),
 * otherwise the elaborator infers `arg` from the body. */
struct PArg {
    std::string name;
    Loc loc;
    bool typed = false;
    Argument arg;
};

/** One launch dimension of a kernel header, `x: LOOP, ... < EXTENT` (KernelGeometry::Dim). */
struct PDim {
    Loc loc;
    std::vector<std::string> loops;
    PExpr extent;
};

/** A function or a `kernel<API>`; a bare statement is one nameless function. A kernel header
 * may give its launch geometry (`has_geometry`: `blocks(...)` and `threads(...)`, either one
 * empty when not written). */
struct PFunc {
    bool is_kernel = false;
    std::string name;
    Loc loc;
    LinkageType linkage = LinkageType::External;
    DeviceAPI device_api = DeviceAPI::None;
    std::vector<PArg> args;
    bool has_geometry = false;
    std::vector<PDim> blocks, threads;
    std::vector<PStmt> body;
};

/** A whole input. `bare`: the text was a statement, not a `module` (no name, no target yet). */
struct PModule {
    bool bare = false;
    std::string name;
    Target target;
    /** The header's `dialect=` (`has_dialect`), else what the text shows: Halide 21 where it
     * uses a spelling only Halide 21 prints. */
    bool has_dialect = false;
    Dialect dialect = Dialect::Halide14;
    std::vector<BufferConstant> buffers;
    std::vector<PFunc> funcs;  // kernels and functions, in order
};

}  // namespace tally

#endif  // TALLY_TEXT_PARSETREE_H
