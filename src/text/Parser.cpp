// The parser: text -> syntax tree -> typed IR.
//
// Halide's printer leaves most types implicit: a variable is printed bare when it is bound in
// scope or is int32, a call bare when it returns int32, and a load never shows its type. So
// parsing runs in two stages:
//  1. Syntax: a recursive-descent parser builds a small untyped tree (PExpr/PStmt) with source
//     locations. Syntax errors are reported here.
//  2. Elaboration: the tree is typed and turned into IR. Types flow bottom-up where they are
//     known (literals, prefixes, scopes) and top-down as hints where they are not (the other
//     operand of a binary operator, the buffer a value is stored to, a runtime function's
//     parameter). The element types of buffers that are never allocated in view (pipeline
//     inputs and outputs) are learned in a few "learn" passes over the whole module before the
//     final pass: from loads typed by hints, from stores, from allocations in other functions,
//     and from Halide's `X.type == (uint32)code` checks. Type errors are reported in the final
//     pass with their location.
// Function arguments that the text leaves untyped (Halide's `func f (input, out)`) are then
// inferred from the body: `X.buffer` referenced means X is a buffer argument.

#include "tally/Parser.h"
#include "ir/LargeStack.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "ir/RuntimeCalls.h"
#include "tally/Error.h"
#include "tally/IRVisitor.h"
#include "text/Lexer.h"

namespace tally {

namespace {

// Syntactic nesting beyond this is rejected rather than risking the stack.
constexpr int max_nesting = 10000;

// ---------------------------------------------------------------------------------------------
// Syntax tree

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
    char float_suffix = 0;
    int lanes = 0;
    bool has_call_type = false;
    Call::CallType call_type = Call::Extern;
    ModulusRemainder alignment;
    bool has_predicate = false;
    std::vector<int> indices;
    std::vector<PExpr> kids;
};

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
        ScopeS
    };
    Kind kind = EvalS;
    Loc loc;
    std::string name;
    std::vector<PExpr> exprs;  // let: value; assert: cond,msg; for: min,extent; store: index,
                               // value[,pred]; allocate: extents...; if: cond; eval: value
    std::vector<PStmt> body, else_body;
    bool has_else = false;
    ForType for_type = ForType::Serial;
    DeviceAPI device_api = DeviceAPI::None;
    Type type;  // allocate
    MemoryType memory_type = MemoryType::Auto;
    bool has_condition = false, has_new_expr = false, has_predicate = false;
    PExpr condition, new_expr;
    std::string free_function;
    ModulusRemainder alignment;
};

struct PArg {
    std::string name;
    Loc loc;
    bool typed = false;
    Argument arg;
};

struct PFunc {
    bool is_kernel = false;
    std::string name;
    Loc loc;
    LinkageType linkage = LinkageType::External;
    DeviceAPI device_api = DeviceAPI::None;
    std::vector<PArg> args;
    std::vector<PStmt> body;
};

struct PModule {
    bool bare = false;
    std::string name;
    Target target;
    std::vector<BufferConstant> buffers;
    std::vector<PFunc> funcs;  // kernels and functions, in order
};

bool device_api_from_name(const std::string &s, DeviceAPI *out) {
    for (int i = 0; i <= int(DeviceAPI::WebGPU); i++) {
        DeviceAPI d = DeviceAPI(i);
        if (d != DeviceAPI::None && s == device_api_name(d)) {
            *out = d;
            return true;
        }
    }
    return false;
}

bool for_type_from_name(const std::string &s, ForType *out) {
    for (int i = 0; i <= int(ForType::GPULane); i++) {
        if (s == for_type_name(ForType(i))) {
            *out = ForType(i);
            return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Stage 1: syntax

class SyntaxParser {
public:
    SyntaxParser(const std::string &text, const std::string &filename) : lex(text, filename) {}

    PModule parse() {
        PModule m;
        const Token &t = lex.peek();
        if (t.kind == Token::Ident && t.text == "module") {
            parse_module_header(&m);
            while (lex.peek().kind != Token::End) {
                parse_top_level(&m);
            }
        } else {
            m.bare = true;
            PFunc f;
            f.loc = t.loc;
            f.body = parse_stmts(/*top_level=*/true);
            m.funcs.push_back(std::move(f));
        }
        return m;
    }

    PExpr parse_single_expr() {
        PExpr e = parse_expr();
        if (lex.peek().kind != Token::End) {
            err(lex.peek(), "expected end of input after expression");
        }
        return e;
    }

    Lexer lex;

private:
    int depth = 0;
    // Brackets currently open. At 0 an expression ends at a line break: statements are one per
    // line, so `x` followed by a line starting with `(` is two statements, not a call.
    int group_depth = 0;

    struct Group {
        SyntaxParser *p;
        explicit Group(SyntaxParser *p) : p(p) { p->group_depth++; }
        ~Group() { p->group_depth--; }
    };

    /** May the expression continue with the next token (same line, or inside brackets)? */
    bool continues() { return group_depth > 0 || !lex.peek().newline_before; }

    struct DepthGuard {
        SyntaxParser *p;
        DepthGuard(SyntaxParser *p, const Loc &loc) : p(p) {
            if (++p->depth > max_nesting) {
                p->lex.error(loc, "nesting deeper than " + std::to_string(max_nesting) + " levels");
            }
        }
        ~DepthGuard() { p->depth--; }
    };

    [[noreturn]] void err(const Token &t, const std::string &msg) {
        lex.error(t.loc, msg + describe(t));
    }

    static std::string describe(const Token &t) {
        switch (t.kind) {
        case Token::End:
            return " (found end of input)";
        case Token::String:
            return " (found a string)";
        default:
            return " (found '" + t.text + "')";
        }
    }

    bool is_punct(const char *p, int k = 0) {
        const Token &t = lex.peek(k);
        return t.kind == Token::Punct && t.text == p;
    }
    bool is_ident(const char *p, int k = 0) {
        const Token &t = lex.peek(k);
        return t.kind == Token::Ident && t.text == p;
    }
    Token expect_punct(const char *p, const char *context) {
        if (!is_punct(p)) {
            err(lex.peek(), std::string("expected '") + p + "' " + context);
        }
        return lex.next();
    }
    void expect_ident(const char *word, const char *context) {
        if (!is_ident(word)) {
            err(lex.peek(), std::string("expected '") + word + "' " + context);
        }
        lex.next();
    }
    std::string expect_name(const char *context) {
        const Token &t = lex.peek();
        if (t.kind == Token::Ident || t.kind == Token::String) {
            if (t.kind == Token::String && t.text.empty()) {
                lex.error(t.loc, std::string("empty name ") + context);
            }
            return lex.next().text;
        }
        err(t, std::string("expected a name ") + context);
    }
    int64_t expect_int(const char *context, bool allow_negative = false) {
        bool neg = false;
        if (allow_negative && is_punct("-")) {
            lex.next();
            neg = true;
        }
        const Token &t = lex.peek();
        if (t.kind != Token::Int || t.int_value > uint64_t(INT32_MAX)) {
            err(t, std::string("expected a small integer ") + context);
        }
        int64_t v = int64_t(lex.next().int_value);
        return neg ? -v : v;
    }

    // module name=NAME, target=TARGET
    void parse_module_header(PModule *m) {
        lex.next();  // module
        expect_ident("name", "after 'module'");
        expect_punct("=", "after 'name'");
        m->name = expect_name("for the module");
        expect_punct(",", "after the module name");
        const Token &tt = lex.peek();
        Loc tloc = tt.loc;
        expect_ident("target", "in the module header");
        // The target string is read raw: it contains '-' and digits.
        if (!is_punct("=")) {
            err(lex.peek(), "expected '=' after 'target'");
        }
        lex.next();
        while (lex.peek_raw_is_space()) {
            lex.skip_raw();
        }
        Loc start = lex.position();
        std::string target = lex.read_line_raw();
        try {
            m->target = Target::parse(target);
        } catch (const CompileError &e) {
            // Point at the part of the target string the message names, if it names one.
            std::string msg = e.what();
            size_t q1 = msg.find('\''), q2 = msg.find('\'', q1 + 1);
            if (q1 != std::string::npos && q2 != std::string::npos) {
                size_t at = target.find(msg.substr(q1 + 1, q2 - q1 - 1));
                if (at != std::string::npos) {
                    tloc = start;
                    tloc.col += int(at);
                }
            }
            lex.error(tloc, msg);
        }
    }

    void parse_top_level(PModule *m) {
        const Token t = lex.peek();
        if (t.kind != Token::Ident) {
            err(t, "expected 'buffer', 'kernel' or a function definition");
        }
        if (t.text == "buffer") {
            lex.next();
            BufferConstant b;
            b.name = expect_name("for the buffer");
            expect_punct("=", "after the buffer name");
            expect_punct("{", "to open the buffer contents");
            b.opaque = !lex.read_blob(&b.bytes);
            expect_punct("}", "to close the buffer contents");
            m->buffers.push_back(std::move(b));
            return;
        }
        PFunc f;
        f.loc = t.loc;
        if (t.text == "kernel") {
            lex.next();
            f.is_kernel = true;
            expect_punct("<", "after 'kernel'");
            Token api = lex.peek();
            std::string api_name = expect_name("for the kernel's device API");
            if (!device_api_from_name(api_name, &f.device_api)) {
                lex.error(api.loc, "unknown device API '" + api_name + "'");
            }
            expect_punct(">", "after the device API");
        } else {
            if (t.text == "external") {
                f.linkage = LinkageType::External;
            } else if (t.text == "external_plus_metadata") {
                f.linkage = LinkageType::ExternalPlusMetadata;
            } else if (t.text == "internal") {
                f.linkage = LinkageType::Internal;
            } else {
                err(t, "expected 'buffer', 'kernel' or a linkage ('external', "
                       "'external_plus_metadata', 'internal')");
            }
            lex.next();
            expect_ident("func", "after the linkage");
        }
        f.name = expect_name("for the function");
        expect_punct("(", "to open the argument list");
        if (!is_punct(")")) {
            while (true) {
                f.args.push_back(parse_arg());
                if (is_punct(",")) {
                    lex.next();
                    continue;
                }
                break;
            }
        }
        expect_punct(")", "to close the argument list");
        expect_punct("{", "to open the function body");
        f.body = parse_stmts(false);
        expect_punct("}", "to close the function body");
        m->funcs.push_back(std::move(f));
    }

    // NAME [: TYPE | : buffer<ELEM, DIMS>]
    PArg parse_arg() {
        PArg a;
        a.loc = lex.peek().loc;
        a.name = expect_name("for an argument");
        a.arg.name = a.name;
        if (!is_punct(":")) {
            return a;
        }
        lex.next();
        a.typed = true;
        if (is_ident("buffer")) {
            lex.next();
            a.arg.kind = Argument::Buffer;
            if (is_punct("<")) {
                lex.next();
                if (is_punct("?")) {
                    lex.next();
                } else {
                    a.arg.type = parse_type("as the buffer's element type");
                }
                if (is_punct(",")) {
                    lex.next();
                    a.arg.dimensions = int(expect_int("as the buffer's dimensions"));
                }
                expect_punct(">", "to close the buffer type");
            }
        } else {
            a.arg.kind = Argument::Scalar;
            a.arg.type = parse_type("as the argument's type");
        }
        return a;
    }

    /** `(ident... *...)` starting at lookahead k: the number of tokens, or 0. */
    int handle_prefix_length(int k) {
        if (!is_punct("(", k)) {
            return 0;
        }
        int i = k + 1;
        int words = 0;
        while (lex.peek(i).kind == Token::Ident && !lex.peek(i).quoted) {
            i++;
            words++;
        }
        int stars = 0;
        while (is_punct("*", i)) {
            i++;
            stars++;
        }
        if (words == 0 || stars == 0 || !is_punct(")", i)) {
            return 0;
        }
        return i - k + 1;
    }

    /** Is there a `(T)` type prefix at lookahead 0? */
    bool at_type_prefix() {
        if (handle_prefix_length(0)) {
            return true;
        }
        return is_punct("(") && lex.peek(1).kind == Token::Ident && !lex.peek(1).quoted &&
               parse_type_name(lex.peek(1).text).is_valid() && is_punct(")", 2);
    }

    /** Consumes `(T)` (value or handle type). */
    Type parse_type_prefix() {
        int n = handle_prefix_length(0);
        if (n) {
            lex.next();  // (
            std::string name;
            int words = 0;
            while (lex.peek().kind == Token::Ident) {
                name += (words++ ? " " : "") + lex.next().text;
            }
            int stars = 0;
            while (is_punct("*")) {
                lex.next();
                stars++;
            }
            for (int i = 1; i < stars; i++) {
                name += " *";
            }
            lex.next();  // )
            return Handle(name);
        }
        lex.next();
        Type t = parse_type_name(lex.next().text);
        lex.next();
        return t;
    }

    /** A type where the grammar expects one: `float32` or `(void *)`. */
    Type parse_type(const char *context) {
        if (handle_prefix_length(0)) {
            return parse_type_prefix();
        }
        const Token &t = lex.peek();
        if (t.kind == Token::Ident) {
            Type ty = parse_type_name(t.text);
            if (ty.is_valid()) {
                lex.next();
                return ty;
            }
        }
        err(t, std::string("expected a type ") + context);
    }

    // --- statements -----------------------------------------------------------------------

    std::vector<PStmt> parse_stmts(bool top_level) {
        std::vector<PStmt> out;
        while (true) {
            const Token &t = lex.peek();
            if (t.kind == Token::End) {
                if (!top_level) {
                    err(t, "expected '}'");
                }
                break;
            }
            if (t.kind == Token::Punct && t.text == "}") {
                if (top_level) {
                    err(t, "unexpected '}'");
                }
                break;
            }
            out.push_back(parse_stmt());
        }
        return out;
    }

    std::vector<PStmt> parse_braced_body(const char *what) {
        expect_punct("{", what);
        DepthGuard g(this, lex.peek().loc);
        // Statements inside braces are one per line again, whatever encloses the braces.
        int saved = group_depth;
        group_depth = 0;
        std::vector<PStmt> body = parse_stmts(false);
        group_depth = saved;
        expect_punct("}", "to close the block");
        return body;
    }

    PStmt parse_stmt() {
        const Token t = lex.peek();
        PStmt s;
        s.loc = t.loc;
        if (t.kind == Token::Punct && t.text == "{") {
            // `{ ... }`: a nested block that ends the scope of its lets and allocations.
            s.kind = PStmt::ScopeS;
            s.body = parse_braced_body("to open the block");
            return s;
        }
        if (t.kind == Token::Ident && !t.quoted) {
            const std::string w = t.text;
            ForType ft;
            if (w == "let") {
                lex.next();
                s.name = expect_name("after 'let'");
                expect_punct("=", "after the let name");
                PExpr value = parse_expr();
                if (is_ident("in")) {
                    // `let x = v in e` as a statement: an evaluated let expression.
                    lex.next();
                    PExpr let;
                    let.kind = PExpr::LetE;
                    let.loc = s.loc;
                    let.name = s.name;
                    let.kids.push_back(std::move(value));
                    let.kids.push_back(parse_expr());
                    s.kind = PStmt::EvalS;
                    s.name.clear();
                    s.exprs.push_back(std::move(let));
                    return s;
                }
                s.kind = PStmt::LetS;
                s.exprs.push_back(std::move(value));
                return s;
            }
            if (w == "assert" && is_punct("(", 1)) {
                lex.next();
                lex.next();
                Group g(this);
                s.kind = PStmt::AssertS;
                s.exprs.push_back(parse_expr());
                expect_punct(",", "between the assert's condition and message");
                s.exprs.push_back(parse_expr());
                expect_punct(")", "to close the assert");
                return s;
            }
            if ((w == "produce" || w == "consume") &&
                (lex.peek(1).kind == Token::Ident || lex.peek(1).kind == Token::String)) {
                s.kind = w == "produce" ? PStmt::ProduceS : PStmt::ConsumeS;
                lex.next();
                Token nt = lex.peek();
                if (nt.kind == Token::String && nt.text.empty()) {
                    lex.error(nt.loc, std::string(w == "produce" ? "producer" : "consumer") +
                                          " has an empty name");
                }
                s.name = expect_name("for the producer/consumer");
                s.body = parse_braced_body("to open the producer/consumer body");
                return s;
            }
            if (for_type_from_name(w, &ft) && (is_punct("(", 1) || is_punct("<", 1))) {
                lex.next();
                s.kind = PStmt::ForS;
                s.for_type = ft;
                if (is_punct("<")) {
                    lex.next();
                    Token api = lex.peek();
                    std::string api_name = expect_name("for the loop's device API");
                    if (!device_api_from_name(api_name, &s.device_api)) {
                        lex.error(api.loc, "unknown device API '" + api_name + "'");
                    }
                    expect_punct(">", "after the device API");
                }
                {
                    expect_punct("(", "to open the loop header");
                    Group g(this);
                    s.name = expect_name("for the loop variable");
                    expect_punct(",", "after the loop variable");
                    s.exprs.push_back(parse_expr());
                    expect_punct(",", "after the loop minimum");
                    s.exprs.push_back(parse_expr());
                    expect_punct(")", "to close the loop header");
                }
                s.body = parse_braced_body("to open the loop body");
                return s;
            }
            if (w == "allocate") {
                lex.next();
                parse_allocate(&s);
                return s;
            }
            if (w == "free" &&
                (lex.peek(1).kind == Token::Ident || lex.peek(1).kind == Token::String)) {
                lex.next();
                s.kind = PStmt::FreeS;
                s.name = expect_name("after 'free'");
                return s;
            }
            if (w == "if" && is_punct("(", 1)) {
                lex.next();
                return parse_if(s.loc);
            }
            if (w == "predicate" && is_punct("(", 1)) {
                lex.next();
                lex.next();
                PExpr pred;
                {
                    Group g(this);
                    pred = parse_expr();
                    expect_punct(")", "to close the store predicate");
                }
                PStmt st = parse_stmt();
                if (st.kind != PStmt::StoreS) {
                    lex.error(st.loc, "a 'predicate' must be followed by a store");
                }
                st.has_predicate = true;
                st.exprs.push_back(std::move(pred));
                return st;
            }
        }
        // An expression statement, or a store `name[index] = value`.
        PExpr e = parse_expr();
        if (is_punct("=")) {
            if (e.kind != PExpr::LoadE || e.has_predicate) {
                lex.error(e.loc, "the left side of '=' must be a buffer element, `name[index]`");
            }
            lex.next();
            s.kind = PStmt::StoreS;
            s.name = e.name;
            s.alignment = e.alignment;
            s.exprs.push_back(std::move(e.kids[0]));
            s.exprs.push_back(parse_expr());
            return s;
        }
        s.kind = PStmt::EvalS;
        s.exprs.push_back(std::move(e));
        return s;
    }

    PStmt parse_if(const Loc &loc) {
        PStmt s;
        s.loc = loc;
        s.kind = PStmt::IfS;
        {
            expect_punct("(", "after 'if'");
            Group g(this);
            s.exprs.push_back(parse_expr());
            expect_punct(")", "to close the if condition");
        }
        s.body = parse_braced_body("to open the then-branch");
        if (is_ident("else")) {
            lex.next();
            s.has_else = true;
            if (is_ident("if")) {
                Loc l = lex.next().loc;
                DepthGuard g(this, l);
                s.else_body.push_back(parse_if(l));
            } else {
                s.else_body = parse_braced_body("to open the else-branch");
            }
        }
        return s;
    }

    // allocate NAME[TYPE * e * e] [in MEM] [if COND] [custom_new { e }] [custom_delete { f(n); }]
    void parse_allocate(PStmt *s) {
        s->kind = PStmt::AllocateS;
        s->name = expect_name("after 'allocate'");
        {
            expect_punct("[", "after the allocation name");
            Group g(this);
            s->type = parse_type("for the allocation's elements");
            while (is_punct("*")) {
                lex.next();
                s->exprs.push_back(parse_unary());
            }
            expect_punct("]", "to close the allocation size");
        }
        if (is_ident("in")) {
            lex.next();
            Token mt = lex.peek();
            std::string m = expect_name("for the memory type");
            bool found = false;
            for (int i = 0; i <= int(MemoryType::AMXTile); i++) {
                if (m == memory_type_name(MemoryType(i))) {
                    s->memory_type = MemoryType(i);
                    found = true;
                }
            }
            if (!found) {
                lex.error(mt.loc, "unknown memory type '" + m + "'");
            }
        }
        if (is_ident("if")) {
            lex.next();
            s->has_condition = true;
            s->condition = parse_expr();
        }
        if (is_ident("custom_new")) {
            lex.next();
            expect_punct("{", "after 'custom_new'");
            s->has_new_expr = true;
            s->new_expr = parse_expr();
            expect_punct("}", "to close 'custom_new'");
        }
        if (is_ident("custom_delete")) {
            lex.next();
            expect_punct("{", "after 'custom_delete'");
            s->free_function = expect_name("for the free function");
            expect_punct("(", "after the free function");
            Token n = lex.peek();
            std::string arg = expect_name("as the free function's argument");
            if (arg != s->name) {
                lex.error(n.loc, "custom_delete must free '" + s->name + "', not '" + arg + "'");
            }
            expect_punct(")", "after the free function's argument");
            expect_punct(";", "after the free call");
            expect_punct("}", "to close 'custom_delete'");
        }
    }

    // --- expressions ----------------------------------------------------------------------

    PExpr binary(const Loc &loc, const std::string &op, PExpr a, PExpr b) {
        PExpr e;
        e.kind = PExpr::Binary;
        e.loc = loc;
        e.name = op;
        e.kids.push_back(std::move(a));
        e.kids.push_back(std::move(b));
        return e;
    }

    PExpr parse_expr() { return parse_or(); }

    PExpr parse_or() {
        PExpr e = parse_and();
        while (is_punct("||") && continues()) {
            Loc l = lex.next().loc;
            e = binary(l, "||", std::move(e), parse_and());
        }
        return e;
    }

    PExpr parse_and() {
        PExpr e = parse_cmp();
        while (is_punct("&&") && continues()) {
            Loc l = lex.next().loc;
            e = binary(l, "&&", std::move(e), parse_cmp());
        }
        return e;
    }

    PExpr parse_cmp() {
        PExpr e = parse_add();
        while (true) {
            const Token &t = lex.peek();
            if (t.kind == Token::Punct && continues() &&
                (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
                 t.text == ">" || t.text == ">=")) {
                Token op = lex.next();
                e = binary(op.loc, op.text, std::move(e), parse_add());
            } else {
                return e;
            }
        }
    }

    PExpr parse_add() {
        PExpr e = parse_mul();
        while ((is_punct("+") || is_punct("-")) && continues()) {
            Token op = lex.next();
            e = binary(op.loc, op.text, std::move(e), parse_mul());
        }
        return e;
    }

    PExpr parse_mul() {
        PExpr e = parse_unary();
        while ((is_punct("*") || is_punct("/") || is_punct("%")) && continues()) {
            Token op = lex.next();
            e = binary(op.loc, op.text, std::move(e), parse_unary());
        }
        return e;
    }

    PExpr parse_unary() {
        DepthGuard g(this, lex.peek().loc);
        if (is_punct("!")) {
            PExpr e;
            e.kind = PExpr::NotE;
            e.loc = lex.next().loc;
            e.kids.push_back(parse_unary());
            return e;
        }
        if (is_punct("-")) {
            Loc l = lex.next().loc;
            const Token &t = lex.peek();
            if (t.kind == Token::Int || t.kind == Token::Float) {
                PExpr e = parse_literal(Type());
                e.loc = l;
                e.negative = !e.negative;
                return e;
            }
            PExpr e;
            e.kind = PExpr::Neg;
            e.loc = l;
            e.kids.push_back(parse_unary());
            return e;
        }
        return parse_primary();
    }

    PExpr parse_literal(const Type &prefix) {
        Token t = lex.next();
        PExpr e;
        e.loc = t.loc;
        e.prefix = prefix;
        if (t.kind == Token::Int) {
            e.kind = PExpr::IntLit;
            e.int_value = t.int_value;
        } else {
            e.kind = PExpr::FloatLit;
            e.float_value = t.float_value;
            e.float_suffix = t.float_suffix;
        }
        return e;
    }

    std::vector<PExpr> parse_call_args(const char *what) {
        expect_punct("(", what);
        Group g(this);
        std::vector<PExpr> args;
        if (!is_punct(")")) {
            while (true) {
                args.push_back(parse_expr());
                if (is_punct(",")) {
                    lex.next();
                    continue;
                }
                break;
            }
        }
        expect_punct(")", "to close the argument list");
        return args;
    }

    PExpr parse_primary() {
        const Token t = lex.peek();
        if (t.kind == Token::Punct && t.text == "(") {
            Loc l = t.loc;
            if (at_type_prefix()) {
                Type prefix = parse_type_prefix();
                return parse_prefixed(l, prefix);
            }
            lex.next();
            Group g(this);
            PExpr e = parse_expr();
            if (is_ident("if") && e.kind == PExpr::LoadE && !e.has_predicate) {
                // A predicated load: `(name[index] if predicate)`.
                lex.next();
                e.has_predicate = true;
                e.kids.push_back(parse_expr());
            }
            expect_punct(")", "to close the parenthesis");
            return e;
        }
        if (t.kind == Token::Int || t.kind == Token::Float) {
            return parse_literal(Type());
        }
        if (t.kind == Token::String) {
            PExpr e;
            e.kind = PExpr::StrLit;
            e.loc = t.loc;
            e.name = lex.next().text;
            return e;
        }
        if (t.kind == Token::Ident) {
            if (t.text == "let" && !t.quoted) {
                PExpr e;
                e.kind = PExpr::LetE;
                e.loc = lex.next().loc;
                e.name = expect_name("after 'let'");
                expect_punct("=", "after the let name");
                e.kids.push_back(parse_expr());
                expect_ident("in", "after the let value");
                e.kids.push_back(parse_expr());
                return e;
            }
            return parse_named(Type());
        }
        err(t, "expected an expression");
    }

    PExpr parse_prefixed(const Loc &loc, const Type &prefix) {
        const Token &t = lex.peek();
        if (t.kind == Token::Int || t.kind == Token::Float) {
            PExpr e = parse_literal(prefix);
            e.loc = loc;
            return e;
        }
        if (t.kind == Token::Punct && t.text == "-") {
            lex.next();
            const Token &n = lex.peek();
            if (n.kind == Token::Int || n.kind == Token::Float) {
                PExpr e = parse_literal(prefix);
                e.loc = loc;
                e.negative = true;
                return e;
            }
            if (n.kind == Token::Ident && n.text == "inf") {
                lex.next();
                PExpr e;
                e.kind = PExpr::SpecialFloat;
                e.loc = loc;
                e.prefix = prefix;
                e.name = "-inf";
                return e;
            }
            err(n, "expected a number after '-'");
        }
        if (t.kind == Token::Ident && (t.text == "inf" || t.text == "nan")) {
            PExpr e;
            e.kind = PExpr::SpecialFloat;
            e.loc = loc;
            e.prefix = prefix;
            e.name = lex.next().text;
            return e;
        }
        if (t.kind == Token::Punct && t.text == "(") {
            // `(T)(e)`: Halide's spelling of a cast to a handle type.
            lex.next();
            Group g(this);
            PExpr e;
            e.kind = PExpr::CastE;
            e.loc = loc;
            e.cast_type = prefix;
            e.kids.push_back(parse_expr());
            expect_punct(")", "to close the cast");
            return e;
        }
        if (t.kind == Token::Ident) {
            PExpr e = parse_named(prefix);
            e.loc = loc;
            return e;
        }
        err(t, "expected a literal, name or call after a type prefix");
    }

    // A name: variable, call, load, or one of the built-in forms.
    PExpr parse_named(const Type &prefix) {
        Token t = lex.next();
        PExpr e;
        e.loc = t.loc;
        e.prefix = prefix;
        e.name = t.text;
        if (is_punct("@") && continues()) {
            lex.next();
            Token ct = lex.peek();
            std::string n = expect_name("for the call type");
            bool found = false;
            for (int i = 0; i <= int(Call::PureIntrinsic); i++) {
                if (n == call_type_name(Call::CallType(i))) {
                    e.call_type = Call::CallType(i);
                    found = true;
                }
            }
            if (!found) {
                lex.error(ct.loc, "unknown call type '" + n + "'");
            }
            e.has_call_type = true;
            if (!is_punct("(")) {
                err(lex.peek(), "expected '(' after the call type");
            }
        }
        if (is_punct("[") && continues()) {
            lex.next();
            Group g(this);
            e.kind = PExpr::LoadE;
            e.kids.push_back(parse_expr());
            if (is_ident("aligned") && is_punct("(", 1)) {
                lex.next();
                lex.next();
                e.alignment.modulus = expect_int("as the alignment modulus");
                expect_punct(",", "in aligned(...)");
                e.alignment.remainder = expect_int("as the alignment remainder", true);
                expect_punct(")", "to close aligned(...)");
            }
            expect_punct("]", "to close the index");
            return e;
        }
        if (!is_punct("(") || (!continues() && !e.has_call_type)) {
            e.kind = PExpr::Var;
            return e;
        }
        const std::string &n = e.name;
        if (!e.has_call_type && !t.quoted) {
            Type ct = parse_type_name(n);
            if (ct.is_valid() && !prefix.is_valid()) {
                e.kind = PExpr::CastE;
                e.cast_type = ct;
                std::vector<PExpr> args = parse_call_args("after the cast type");
                if (args.size() != 1) {
                    lex.error(t.loc, "a cast takes exactly one value");
                }
                e.kids = std::move(args);
                return e;
            }
            if (n.size() > 1 && n[0] == 'x' && n.find_first_not_of("0123456789", 1) == n.npos &&
                !prefix.is_valid()) {
                e.kind = PExpr::BroadcastE;
                if (n.size() > 6) {
                    lex.error(t.loc, "broadcast lane count too large");
                }
                e.lanes = std::stoi(n.substr(1));
                e.kids = parse_call_args("after the broadcast");
                if (e.kids.size() != 1 || e.lanes < 2) {
                    lex.error(t.loc, "a broadcast `xN(value)` takes one value and N >= 2");
                }
                return e;
            }
            if (n == "ramp" && !prefix.is_valid()) {
                e.kind = PExpr::RampE;
                e.kids = parse_call_args("after 'ramp'");
                if (e.kids.size() != 3 || e.kids[2].kind != PExpr::IntLit || e.kids[2].negative ||
                    e.kids[2].prefix.is_valid() || e.kids[2].int_value < 2 ||
                    e.kids[2].int_value > 65535) {
                    lex.error(t.loc, "ramp takes (base, stride, lanes) with a literal lane "
                                     "count of at least 2");
                }
                e.lanes = int(e.kids[2].int_value);
                e.kids.pop_back();
                return e;
            }
            if ((n == "select" || n == "min" || n == "max") && !prefix.is_valid()) {
                e.kind = n == "select" ? PExpr::SelectE : PExpr::Binary;
                e.kids = parse_call_args("after the operator");
                if (e.kids.size() != (n == "select" ? 3u : 2u)) {
                    lex.error(t.loc, n + " takes " + (n == "select" ? "3" : "2") + " arguments");
                }
                return e;
            }
            if (n == "reinterpret") {
                e.kind = PExpr::ReinterpretE;
                e.kids = parse_call_args("after 'reinterpret'");
                if (e.kids.size() != 1) {
                    lex.error(t.loc, "reinterpret takes one argument");
                }
                return e;
            }
            if ((n == "interleave_vectors" || n == "concat_vectors" || n == "slice_vectors" ||
                 n == "extract_element" || n == "shuffle") &&
                !prefix.is_valid()) {
                return parse_shuffle(std::move(e));
            }
        }
        e.kind = PExpr::CallE;
        e.kids = parse_call_args("after the function name");
        return e;
    }

    PExpr parse_shuffle(PExpr e) {
        e.kind = PExpr::ShuffleE;
        expect_punct("(", "after the shuffle");
        Group g(this);
        const std::string &n = e.name;
        int trailing = n == "slice_vectors" ? 3 : n == "extract_element" ? 1 : 0;
        while (true) {
            if (n == "shuffle" && is_punct("[")) {
                lex.next();
                while (true) {
                    e.indices.push_back(int(expect_int("as a shuffle index")));
                    if (is_punct(",")) {
                        lex.next();
                        continue;
                    }
                    break;
                }
                expect_punct("]", "to close the shuffle indices");
                break;
            }
            e.kids.push_back(parse_expr());
            if (is_punct(",")) {
                lex.next();
                continue;
            }
            break;
        }
        expect_punct(")", "to close the shuffle");
        if (trailing) {
            if (int(e.kids.size()) != trailing + 1) {
                lex.error(e.loc, n + " takes one vector and " + std::to_string(trailing) +
                                     " integer arguments");
            }
            for (int i = 0; i < trailing; i++) {
                const PExpr &k = e.kids[1 + i];
                if (k.kind != PExpr::IntLit || k.prefix.is_valid() || k.int_value > 65535) {
                    lex.error(k.loc, "expected a literal integer in " + n);
                }
                e.indices.push_back(int(k.int_value));
            }
            e.kids.resize(1);
        }
        if (e.kids.empty() || (n == "shuffle" && e.indices.empty())) {
            lex.error(e.loc, n + " needs at least one vector" +
                                 (n == "shuffle" ? std::string(" and a [indices] list") : ""));
        }
        return e;
    }
};

// ---------------------------------------------------------------------------------------------
// Stage 2: elaboration

class Elaborator {
public:
    Elaborator(const Lexer &lex) : lex(lex) {}

    Module run(PModule &pm) {
        // Seed what typed headers say, then learn buffer types until nothing new is learned.
        for (const PFunc &f : pm.funcs) {
            for (const PArg &a : f.args) {
                if (a.typed && a.arg.is_buffer() && a.arg.type.is_valid()) {
                    learned.emplace(a.name, a.arg.type);
                }
            }
        }
        learning = true;
        for (int iter = 0; iter < 8; iter++) {
            size_t before = learned.size() + type_codes.size();
            for (const PFunc &f : pm.funcs) {
                elab_function_body(f);
            }
            // Halide's type checks fill in what usage did not say.
            for (const auto &kv : type_codes) {
                learned.emplace(kv.first, kv.second);
            }
            if (learned.size() + type_codes.size() == before && iter > 0) {
                break;
            }
        }
        learning = false;

        Module m;
        m.name = pm.name;
        m.target = pm.target;
        m.buffers = pm.buffers;
        for (const PFunc &f : pm.funcs) {
            Stmt body = elab_function_body(f);
            std::vector<Argument> args = infer_args(f, body, pm.bare);
            if (f.is_kernel) {
                Kernel k;
                k.name = f.name;
                k.device_api = f.device_api;
                k.args = std::move(args);
                k.body = body;
                m.kernels.push_back(std::move(k));
            } else {
                LoweredFunc lf;
                lf.name = f.name;
                lf.linkage = f.linkage;
                lf.args = std::move(args);
                lf.body = body;
                m.functions.push_back(std::move(lf));
            }
        }
        if (pm.bare) {
            std::string name = pipeline_name(m.functions[0].body);
            m.functions[0].name = name;
            m.name = name;
            m.target = Target::parse("host");
        }
        return m;
    }

    Expr elab_standalone(const PExpr &e) {
        learning = false;
        Expr r = elab(e, nullptr);
        if (!r.defined()) {
            unresolved_error();
        }
        return r;
    }

private:
    const Lexer &lex;
    bool learning = false;
    // Element types of buffers learned across the module, and those read off Halide's
    // `X.type == (uint32)code` checks (used only when nothing better is known).
    std::map<std::string, Type> learned, type_codes;
    std::map<std::string, std::string> type_lets;  // let name -> buffer whose type it reads
    std::map<std::string, std::vector<Type>> var_scope, alloc_scope;
    bool have_unresolved = false;
    Loc unresolved_loc;
    std::string unresolved_name;

    [[noreturn]] void error(const Loc &loc, const std::string &msg) const { lex.error(loc, msg); }

    [[noreturn]] void unresolved_error() const {
        error(unresolved_loc, "cannot infer the element type of buffer '" + unresolved_name +
                                  "'; write it as a prefix, e.g. (uint8)" + unresolved_name +
                                  "[...], or declare the argument as `" + unresolved_name +
                                  ": buffer<uint8>`");
    }

    static const Type *top(const std::map<std::string, std::vector<Type>> &s,
                           const std::string &n) {
        auto it = s.find(n);
        return it == s.end() ? nullptr : &it->second.back();
    }
    static void push(std::map<std::string, std::vector<Type>> &s, const std::string &n, Type t) {
        s[n].push_back(std::move(t));
    }
    static void pop(std::map<std::string, std::vector<Type>> &s, const std::string &n) {
        auto it = s.find(n);
        it->second.pop_back();
        if (it->second.empty()) {
            s.erase(it);
        }
    }

    /** Records that an expression could not be typed yet. Returns an undefined Expr. */
    Expr unresolved(const PExpr &e) {
        if (!have_unresolved) {
            have_unresolved = true;
            unresolved_loc = e.loc;
            unresolved_name = e.name;
        }
        return Expr();
    }

    /** In the final pass, an expression that must have a type. */
    Expr require(const PExpr &e, const Type *hint) {
        have_unresolved = false;
        Expr r = elab(e, hint);
        if (!r.defined() && !learning) {
            if (have_unresolved) {
                unresolved_error();
            }
            internal_error << "expression left untyped without a reason";
        }
        return r;
    }

    void check_compatible(const PExpr &e, const Expr &a, const Expr &b, const char *what) {
        if (!types_compatible(a.type(), b.type())) {
            error(e.loc, std::string("operands of ") + what + " have different types: " +
                             a.type().to_string() + " and " + b.type().to_string());
        }
    }

    /** Elaborates two operands that must share a type, each hinting the other. */
    bool elab_pair(const PExpr &pa, const PExpr &pb, const Type *hint, Expr *a, Expr *b) {
        *a = elab(pa, hint);
        if (a->defined()) {
            Type ta = a->type().element_of();
            *b = elab(pb, &ta);
        } else {
            *b = elab(pb, hint);
            if (b->defined() && !hint) {
                Type tb = b->type().element_of();
                *a = elab(pa, &tb);
            }
        }
        return a->defined() && b->defined();
    }

    /** Matches lane counts the way Halide's printed IR already guarantees; mismatches are
     * user errors with a location. */
    void check_lanes(const PExpr &e, const Expr &a, const Expr &b, const char *what) {
        if (a.type().lanes() != b.type().lanes()) {
            error(e.loc, std::string(what) + ": lane counts differ (" + a.type().to_string() +
                             " and " + b.type().to_string() + ")");
        }
    }

    Expr elab(const PExpr &e, const Type *hint) {
        switch (e.kind) {
        case PExpr::IntLit:
            return elab_int(e);
        case PExpr::FloatLit: {
            Type t = e.prefix.is_valid()     ? e.prefix
                     : e.float_suffix == 'f' ? Float(32)
                     : e.float_suffix == 'h' ? Float(16)
                                             : Float(64);
            if (!t.is_float() || t.is_vector()) {
                error(e.loc, "a floating-point literal cannot have type " + t.to_string());
            }
            return FloatImm::make(t, e.negative ? -e.float_value : e.float_value);
        }
        case PExpr::SpecialFloat: {
            if (!e.prefix.is_float() || e.prefix.is_vector()) {
                error(e.loc, "'" + e.name + "' needs a float type prefix, e.g. (float32)inf");
            }
            double v = e.name == "nan"   ? std::numeric_limits<double>::quiet_NaN()
                       : e.name == "inf" ? std::numeric_limits<double>::infinity()
                                         : -std::numeric_limits<double>::infinity();
            return FloatImm::make(e.prefix, v);
        }
        case PExpr::StrLit:
            return StringImm::make(e.name);
        case PExpr::Var: {
            if (e.prefix.is_valid()) {
                return Variable::make(e.prefix, e.name);
            }
            if (const Type *t = top(var_scope, e.name)) {
                if (!t->is_valid()) {
                    return unresolved(e);
                }
                return Variable::make(*t, e.name);
            }
            if (e.name == "__user_context") {
                return Variable::make(Handle(), e.name);
            }
            // A free `X.buffer` is X's buffer descriptor (infer_args makes X a buffer argument),
            // typed as a declared buffer argument's is, so that the printed module reads back
            // the same.
            if (ends_with(e.name, ".buffer")) {
                return Variable::make(Handle("halide_buffer_t"), e.name);
            }
            return Variable::make(Int(32), e.name);
        }
        case PExpr::Binary:
            return elab_binary(e, hint);
        case PExpr::NotE: {
            Type b = Bool();
            Expr a = elab(e.kids[0], &b);
            if (!a.defined()) {
                return a;
            }
            if (!a.type().is_bool()) {
                error(e.loc, "'!' needs a bool operand, not " + a.type().to_string());
            }
            return Not::make(a);
        }
        case PExpr::Neg: {
            Expr a = elab(e.kids[0], hint);
            if (!a.defined()) {
                return a;
            }
            if (a.type().is_handle() || a.type().is_bool()) {
                error(e.loc, "cannot negate a value of type " + a.type().to_string());
            }
            return Sub::make(make_zero(a.type()), a);
        }
        case PExpr::CastE: {
            Expr v = elab(e.kids[0], nullptr);
            if (!v.defined()) {
                return v;
            }
            Type t = e.cast_type;
            if (t.lanes() != v.type().lanes()) {
                if (t.is_scalar() && t.is_handle()) {
                    t = t.with_lanes(v.type().lanes());
                } else {
                    error(e.loc, "cannot cast " + v.type().to_string() + " to " + t.to_string() +
                                     ": lane counts differ");
                }
            }
            return Cast::make(t, v);
        }
        case PExpr::ReinterpretE: {
            Expr v = elab(e.kids[0], nullptr);
            if (!v.defined()) {
                return v;
            }
            Type t = e.prefix.is_valid() ? e.prefix : Int(32);
            if (t.bits() * t.lanes() != v.type().bits() * v.type().lanes()) {
                error(e.loc, "reinterpret from " + v.type().to_string() + " to " + t.to_string() +
                                 " changes the bit width");
            }
            return Reinterpret::make(t, v);
        }
        case PExpr::LetE: {
            Expr v = elab(e.kids[0], nullptr);
            push(var_scope, e.name, v.defined() ? v.type() : Type());
            Expr b = elab(e.kids[1], hint);
            pop(var_scope, e.name);
            if (!v.defined() || !b.defined()) {
                return Expr();
            }
            return Let::make(e.name, v, b);
        }
        case PExpr::SelectE: {
            Expr c = elab(e.kids[0], nullptr);
            Expr t, f;
            bool ok = elab_pair(e.kids[1], e.kids[2], hint, &t, &f);
            if (!c.defined() || !ok) {
                return Expr();
            }
            if (!c.type().is_bool()) {
                error(e.kids[0].loc, "select condition must be bool, not " + c.type().to_string());
            }
            check_compatible(e, t, f, "select");
            check_lanes(e, t, f, "select");
            if (c.type().lanes() != 1 && c.type().lanes() != t.type().lanes()) {
                error(e.loc, "select condition lanes do not match its values");
            }
            return Select::make(c, t, f);
        }
        case PExpr::LoadE:
            return elab_load(e, hint);
        case PExpr::RampE: {
            Expr b, s;
            if (!elab_pair(e.kids[0], e.kids[1], hint, &b, &s)) {
                return Expr();
            }
            check_compatible(e, b, s, "ramp");
            return Ramp::make(b, s, e.lanes);
        }
        case PExpr::BroadcastE: {
            Expr v = elab(e.kids[0], hint);
            if (!v.defined()) {
                return v;
            }
            return Broadcast::make(v, e.lanes);
        }
        case PExpr::ShuffleE:
            return elab_shuffle(e, hint);
        case PExpr::CallE:
            return elab_call(e);
        }
        internal_error << "unhandled expression kind";
    }

    Expr elab_int(const PExpr &e) {
        Type t = e.prefix.is_valid() ? e.prefix : Int(32);
        if (t.is_vector()) {
            error(e.loc, "a literal cannot have vector type " + t.to_string());
        }
        if (t.is_float()) {
            double v = double(e.int_value);
            return FloatImm::make(t, e.negative ? -v : v);
        }
        if (t.is_handle()) {
            error(e.loc, "a literal cannot have handle type; write (" + t.to_string() +
                             ")reinterpret((uint64)" + std::to_string(e.int_value) + ")");
        }
        if (t.is_uint()) {
            if (e.negative && e.int_value != 0) {
                error(e.loc, "negative literal with unsigned type " + t.to_string());
            }
            if (e.int_value > t.max_uint()) {
                error(e.loc, std::to_string(e.int_value) + " does not fit in " + t.to_string());
            }
            return UIntImm::make(t, e.int_value);
        }
        // Signed.
        uint64_t limit = e.negative ? uint64_t(-(t.min_int() + 1)) + 1 : t.max_uint();
        if (e.int_value > limit) {
            error(e.loc, (e.negative ? "-" : "") + std::to_string(e.int_value) +
                             " does not fit in " + t.to_string() +
                             (e.prefix.is_valid() ? "" : "; give it a type, e.g. (int64)"));
        }
        int64_t v = e.negative ? int64_t(0 - e.int_value) : int64_t(e.int_value);
        return IntImm::make(t, v);
    }

    Expr elab_binary(const PExpr &e, const Type *hint) {
        const std::string &op = e.name;
        bool cmp = op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
        bool logical = op == "&&" || op == "||";
        Type b = Bool();
        const Type *h = cmp ? nullptr : logical ? &b : hint;
        Expr x, y;
        if (!elab_pair(e.kids[0], e.kids[1], h, &x, &y)) {
            return Expr();
        }
        std::string what = "'" + op + "'";
        check_compatible(e, x, y, what.c_str());
        check_lanes(e, x, y, what.c_str());
        if (logical) {
            if (!x.type().is_bool()) {
                error(e.loc, what + " needs bool operands, not " + x.type().to_string());
            }
            return op == "&&" ? And::make(x, y) : Or::make(x, y);
        }
        if (x.type().is_handle() && !(op == "==" || op == "!=")) {
            error(e.loc, what + " is not defined on handles");
        }
        if (op == "+")
            return Add::make(x, y);
        if (op == "-")
            return Sub::make(x, y);
        if (op == "*")
            return Mul::make(x, y);
        if (op == "/")
            return Div::make(x, y);
        if (op == "%")
            return Mod::make(x, y);
        if (op == "min")
            return Min::make(x, y);
        if (op == "max")
            return Max::make(x, y);
        if (op == "==")
            return EQ::make(x, y);
        if (op == "!=")
            return NE::make(x, y);
        if (op == "<")
            return LT::make(x, y);
        if (op == "<=")
            return LE::make(x, y);
        if (op == ">")
            return GT::make(x, y);
        if (op == ">=")
            return GE::make(x, y);
        internal_error << "unknown binary operator " << op;
    }

    Expr elab_load(const PExpr &e, const Type *hint) {
        Type i32 = Int(32);
        Expr index = elab(e.kids[0], &i32);
        Expr pred;
        if (e.has_predicate) {
            Type b = Bool();
            pred = elab(e.kids[1], &b);
        }
        if (!index.defined() || (e.has_predicate && !pred.defined())) {
            return Expr();
        }
        if (!index.type().is_int() && !index.type().is_uint()) {
            error(e.kids[0].loc, "index into '" + e.name + "' must be an integer, not " +
                                     index.type().to_string());
        }
        int lanes = index.type().lanes();
        if (pred.defined() && (!pred.type().is_bool() || pred.type().lanes() != lanes)) {
            error(e.kids[1].loc, "load predicate must be bool with the index's lanes");
        }
        Type t;
        if (e.prefix.is_valid()) {
            t = e.prefix;
            if (t.lanes() != lanes) {
                error(e.loc, "load of type " + t.to_string() + " with an index of " +
                                 std::to_string(lanes) + " lanes");
            }
        } else {
            Type elem;
            if (const Type *a = top(alloc_scope, e.name)) {
                elem = *a;
            } else if (learned.count(e.name)) {
                elem = learned[e.name];
            } else if (hint && hint->is_valid()) {
                elem = hint->element_of();
                if (learning) {
                    learned.emplace(e.name, elem);
                }
            } else {
                return unresolved(e);
            }
            t = elem.with_lanes(lanes);
        }
        return Load::make(t, e.name, index, pred, e.alignment);
    }

    Expr elab_shuffle(const PExpr &e, const Type *hint) {
        std::vector<Expr> vs;
        bool ok = true;
        for (const PExpr &k : e.kids) {
            vs.push_back(elab(k, hint));
            ok = ok && vs.back().defined();
        }
        if (!ok) {
            // Retry with a sibling's type as the hint.
            for (const Expr &v : vs) {
                if (v.defined() && !hint) {
                    Type t = v.type().element_of();
                    for (size_t i = 0; i < vs.size(); i++) {
                        if (!vs[i].defined()) {
                            vs[i] = elab(e.kids[i], &t);
                        }
                    }
                    break;
                }
            }
            for (const Expr &v : vs) {
                if (!v.defined()) {
                    return Expr();
                }
            }
        }
        int total = 0;
        for (size_t i = 0; i < vs.size(); i++) {
            if (!types_compatible(vs[i].type().element_of(), vs[0].type().element_of())) {
                error(e.kids[i].loc, e.name + ": vectors differ in element type");
            }
            total += vs[i].type().lanes();
        }
        const std::string &n = e.name;
        if (n == "interleave_vectors" || n == "concat_vectors") {
            if (vs.size() < 2) {
                error(e.loc, n + " needs at least two vectors");
            }
            if (n == "interleave_vectors") {
                for (const Expr &v : vs) {
                    if (v.type().lanes() != vs[0].type().lanes()) {
                        error(e.loc, "interleave_vectors needs vectors of equal lanes");
                    }
                }
                return Shuffle::make_interleave(vs);
            }
            return Shuffle::make_concat(vs);
        }
        std::vector<int> idx;
        if (n == "slice_vectors") {
            for (int i = 0; i < e.indices[2]; i++) {
                idx.push_back(e.indices[0] + i * e.indices[1]);
            }
        } else if (n == "extract_element") {
            idx.push_back(e.indices[0]);
        } else {
            idx = e.indices;
        }
        if (idx.empty()) {
            error(e.loc, n + " selects no lanes");
        }
        for (int i : idx) {
            if (i < 0 || i >= total) {
                error(e.loc, n + ": lane index " + std::to_string(i) + " out of range");
            }
        }
        return Shuffle::make(vs, idx);
    }

    /** The IR-level parameter type hints of a runtime function, from RuntimeSymbols.h. */
    static bool param_hint(const std::string &name, size_t i, Type *out) {
        if (name == "register_destructor" && i == 1) {
            *out = Handle();
            return true;
        }
        const RuntimeSymbol *sym = find_runtime_symbol(name.c_str());
        if (!sym) {
            return false;
        }
        const char *params = std::strchr(sym->signature, ':') + 1;
        if (*params == 'U') {
            params++;
        }
        if (i >= std::strlen(params)) {
            return false;
        }
        switch (params[i]) {
        case 'i':
            *out = Int(32);
            return true;
        case 'u':
            *out = UInt(32);
            return true;
        case 'q':
            *out = UInt(64);
            return true;
        case 'l':
            *out = Int(64);
            return true;
        case 'f':
            *out = Float(32);
            return true;
        case 'd':
            *out = Float(64);
            return true;
        case 'b':
            *out = Bool();
            return true;
        default:
            *out = Handle();
            return true;
        }
    }

    Expr elab_call(const PExpr &e) {
        std::vector<Expr> args;
        bool ok = true;
        for (size_t i = 0; i < e.kids.size(); i++) {
            Type h;
            bool has = param_hint(e.name, i, &h);
            args.push_back(elab(e.kids[i], has ? &h : nullptr));
            ok = ok && args.back().defined();
        }
        if (!ok) {
            return Expr();
        }
        Type t = e.prefix.is_valid() ? e.prefix : Int(32);
        Call::CallType ct = e.has_call_type ? e.call_type : Call::default_call_type(e.name);
        return Call::make(t, e.name, args, ct);
    }

    // --- statements -----------------------------------------------------------------------

    Stmt elab_function_body(const PFunc &f) {
        var_scope.clear();
        alloc_scope.clear();
        type_lets.clear();
        // Typed arguments are in scope, so their bare names have their declared types.
        for (const PArg &a : f.args) {
            if (!a.typed) {
                continue;
            }
            if (a.arg.is_buffer()) {
                push(var_scope, a.name + ".buffer", Handle("halide_buffer_t"));
            } else if (a.arg.type.is_valid()) {
                push(var_scope, a.name, a.arg.type);
            }
        }
        Stmt s = elab_block(f.body, f.loc);
        return s;
    }

    /** A block of statements; `let` and `allocate` scope over the rest of the block. Built
     * back to front so that long blocks do not recurse. */
    Stmt elab_block(const std::vector<PStmt> &list, const Loc &where) {
        struct Item {
            const PStmt *p;
            Stmt plain;
            Expr value;  // let value
            std::vector<Expr> extents;
            Expr condition, new_expr;
        };
        std::vector<Item> items;
        items.reserve(list.size());
        for (const PStmt &p : list) {
            Item it;
            it.p = &p;
            if (p.kind == PStmt::LetS) {
                Expr v = require(p.exprs[0], nullptr);
                push(var_scope, p.name, v.defined() ? v.type() : Type());
                it.value = v;
                if (learning) {
                    learn_type_let(p);
                }
            } else if (p.kind == PStmt::AllocateS) {
                Type i32 = Int(32);
                for (const PExpr &x : p.exprs) {
                    it.extents.push_back(require(x, &i32));
                }
                if (p.has_condition) {
                    Type b = Bool();
                    it.condition = require(p.condition, &b);
                    if (it.condition.defined() &&
                        (!it.condition.type().is_bool() || it.condition.type().is_vector())) {
                        error(p.condition.loc, "allocation condition must be a scalar bool");
                    }
                }
                if (p.has_new_expr) {
                    it.new_expr = require(p.new_expr, nullptr);
                }
                push(alloc_scope, p.name, p.type);
                push(var_scope, p.name, Handle());
                if (learning) {
                    learned.emplace(p.name, p.type);
                }
            } else {
                it.plain = elab_stmt(p);
            }
            items.push_back(std::move(it));
        }
        for (auto it = list.rbegin(); it != list.rend(); ++it) {
            if (it->kind == PStmt::LetS) {
                pop(var_scope, it->name);
            } else if (it->kind == PStmt::AllocateS) {
                pop(var_scope, it->name);
                pop(alloc_scope, it->name);
            }
        }
        if (learning) {
            return Stmt();
        }
        Stmt rest;
        for (auto it = items.rbegin(); it != items.rend(); ++it) {
            const PStmt &p = *it->p;
            if (p.kind == PStmt::LetS || p.kind == PStmt::AllocateS) {
                if (!rest.defined()) {
                    error(p.loc, std::string("'") + (p.kind == PStmt::LetS ? "let" : "allocate") +
                                     " " + p.name +
                                     "' is not followed by the statements it "
                                     "scopes");
                }
                if (p.kind == PStmt::LetS) {
                    rest = LetStmt::make(p.name, it->value, rest);
                } else {
                    rest = Allocate::make(p.name, p.type, p.memory_type, it->extents, it->condition,
                                          rest, it->new_expr, p.free_function);
                }
            } else {
                rest = rest.defined() ? Block::make(it->plain, rest) : it->plain;
            }
        }
        if (!rest.defined()) {
            // An empty block is the no-op statement.
            rest = Evaluate::make(make_zero(Int(32)));
        }
        (void)where;
        return rest;
    }

    void learn_type_let(const PStmt &p) {
        // let X.type = (uint32)_halide_buffer_get_type((halide_buffer_t *)X.buffer)
        const PExpr &v = p.exprs[0];
        if (v.kind == PExpr::CallE && v.name == "_halide_buffer_get_type" && v.kids.size() == 1 &&
            v.kids[0].kind == PExpr::Var) {
            const std::string &b = v.kids[0].name;
            const std::string suffix = ".buffer";
            if (b.size() > suffix.size() &&
                b.compare(b.size() - suffix.size(), suffix.size(), suffix) == 0) {
                type_lets[p.name] = b.substr(0, b.size() - suffix.size());
            }
        }
    }

    void learn_type_assert(const PExpr &c) {
        // assert(X.type == (uint32)CODE, ...)
        if (c.kind != PExpr::Binary || c.name != "==" || c.kids[0].kind != PExpr::Var ||
            c.kids[1].kind != PExpr::IntLit) {
            return;
        }
        auto it = type_lets.find(c.kids[0].name);
        if (it == type_lets.end()) {
            return;
        }
        Type t = Type::from_halide_type_code(uint32_t(c.kids[1].int_value));
        if (t.is_valid() && t.is_scalar()) {
            type_codes.emplace(it->second, t);
        }
    }

    Stmt elab_stmt(const PStmt &p) {
        switch (p.kind) {
        case PStmt::AssertS: {
            Type b = Bool(), i32 = Int(32);
            Expr c = require(p.exprs[0], &b);
            Expr m = require(p.exprs[1], &i32);
            if (learning) {
                learn_type_assert(p.exprs[0]);
                return Stmt();
            }
            if (!c.type().is_bool() || c.type().is_vector()) {
                error(p.exprs[0].loc,
                      "assert condition must be a scalar bool, not " + c.type().to_string());
            }
            return AssertStmt::make(c, m);
        }
        case PStmt::ProduceS:
        case PStmt::ConsumeS: {
            Stmt body = elab_block(p.body, p.loc);
            return learning ? Stmt()
                            : ProducerConsumer::make(p.name, p.kind == PStmt::ProduceS, body);
        }
        case PStmt::ForS: {
            Type i32 = Int(32);
            Expr mn = require(p.exprs[0], &i32), ex = require(p.exprs[1], &i32);
            Type vt = mn.defined() ? mn.type() : Int(32);
            if (!learning) {
                if (!(mn.type().is_int() || mn.type().is_uint()) || mn.type().is_vector()) {
                    error(p.exprs[0].loc, "loop bounds must be scalar integers");
                }
                if (ex.type() != mn.type()) {
                    error(p.exprs[1].loc, "loop extent type " + ex.type().to_string() +
                                              " differs from its minimum's " +
                                              mn.type().to_string());
                }
            }
            push(var_scope, p.name, vt);
            Stmt body = elab_block(p.body, p.loc);
            pop(var_scope, p.name);
            return learning ? Stmt() : For::make(p.name, mn, ex, p.for_type, p.device_api, body);
        }
        case PStmt::StoreS: {
            Type i32 = Int(32);
            Expr index = require(p.exprs[0], &i32);
            Type elem;
            if (const Type *a = top(alloc_scope, p.name)) {
                elem = *a;
            } else if (learned.count(p.name)) {
                elem = learned[p.name];
            }
            Expr value = require(p.exprs[1], elem.is_valid() ? &elem : nullptr);
            Expr pred;
            if (p.has_predicate) {
                Type b = Bool();
                pred = require(p.exprs[2], &b);
            }
            if (learning) {
                if (value.defined() && !top(alloc_scope, p.name)) {
                    learned.emplace(p.name, value.type().element_of());
                }
                return Stmt();
            }
            if (!index.type().is_int() && !index.type().is_uint()) {
                error(p.exprs[0].loc, "index into '" + p.name + "' must be an integer");
            }
            if (index.type().lanes() != value.type().lanes()) {
                error(p.loc, "store to '" + p.name + "': the value has " +
                                 std::to_string(value.type().lanes()) + " lanes, the index " +
                                 std::to_string(index.type().lanes()));
            }
            if (pred.defined() &&
                (!pred.type().is_bool() || pred.type().lanes() != value.type().lanes())) {
                error(p.exprs[2].loc, "store predicate must be bool with the value's lanes");
            }
            return Store::make(p.name, value, index, pred, p.alignment);
        }
        case PStmt::FreeS:
            return learning ? Stmt() : Free::make(p.name);
        case PStmt::IfS: {
            Type b = Bool();
            Expr c = require(p.exprs[0], &b);
            Stmt t = elab_block(p.body, p.loc);
            Stmt f;
            if (p.has_else) {
                f = elab_block(p.else_body, p.loc);
            }
            if (learning) {
                return Stmt();
            }
            if (!c.type().is_bool() || c.type().is_vector()) {
                error(p.exprs[0].loc,
                      "if condition must be a scalar bool, not " + c.type().to_string());
            }
            return IfThenElse::make(c, t, f);
        }
        case PStmt::EvalS: {
            Expr v = require(p.exprs[0], nullptr);
            return learning ? Stmt() : Evaluate::make(v);
        }
        case PStmt::ScopeS:
            return elab_block(p.body, p.loc);
        default:
            internal_error << "binder statement in elab_stmt";
        }
    }

    // --- arguments ------------------------------------------------------------------------

    /** Collects names used free in a function body, in order of first use, with the type of
     * their first use, and the highest dimension queried of each `X.buffer`. */
    class FreeNames : public IRVisitor {
    public:
        std::vector<std::pair<std::string, Type>> order;
        std::map<std::string, int> dims;
        std::set<std::string> seen;

    private:
        std::map<std::string, int> bound;
        using IRVisitor::visit;
        void bind(const std::string &n) { bound[n]++; }
        void unbind(const std::string &n) {
            if (--bound[n] == 0) {
                bound.erase(n);
            }
        }
        void visit(const Variable *op) override {
            if (!bound.count(op->name) && !seen.count(op->name)) {
                seen.insert(op->name);
                order.emplace_back(op->name, op->type);
            }
        }
        void visit(const Let *op) override {
            op->value.accept(this);
            bind(op->name);
            op->body.accept(this);
            unbind(op->name);
        }
        void visit(const LetStmt *op) override {
            op->value.accept(this);
            bind(op->name);
            op->body.accept(this);
            unbind(op->name);
        }
        void visit(const For *op) override {
            op->min.accept(this);
            op->extent.accept(this);
            bind(op->name);
            op->body.accept(this);
            unbind(op->name);
        }
        void visit(const Allocate *op) override {
            for (const Expr &x : op->extents) {
                x.accept(this);
            }
            if (op->condition.defined()) {
                op->condition.accept(this);
            }
            if (op->new_expr.defined()) {
                op->new_expr.accept(this);
            }
            bind(op->name);
            op->body.accept(this);
            unbind(op->name);
        }
        void visit(const Call *op) override {
            IRVisitor::visit(op);
            if ((op->name == "_halide_buffer_get_min" || op->name == "_halide_buffer_get_extent" ||
                 op->name == "_halide_buffer_get_stride") &&
                op->args.size() == 2) {
                const Variable *v = op->args[0].as<Variable>();
                int64_t d;
                if (v && const_int_value(op->args[1], &d) && d >= 0 && d < 64) {
                    int &cur = dims[v->name];
                    cur = std::max(cur, int(d) + 1);
                }
            }
        }
    };

    static bool ends_with(const std::string &s, const std::string &suffix) {
        return s.size() > suffix.size() &&
               s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    }

    Argument buffer_arg(const std::string &name, const FreeNames &fn) {
        Argument a;
        a.name = name;
        a.kind = Argument::Buffer;
        auto it = learned.find(name);
        if (it != learned.end()) {
            a.type = it->second;
        }
        auto d = fn.dims.find(name + ".buffer");
        a.dimensions = d == fn.dims.end() ? -1 : d->second;
        return a;
    }

    std::vector<Argument> infer_args(const PFunc &f, const Stmt &body, bool bare) {
        FreeNames fn;
        body.accept(&fn);
        std::vector<Argument> args;
        if (bare) {
            // Every free name is an argument: `X.buffer` makes X a buffer.
            for (const auto &kv : fn.order) {
                const std::string &n = kv.first;
                if (n == "__user_context" || n.compare(0, 2, "::") == 0) {
                    continue;
                }
                if (ends_with(n, ".buffer")) {
                    args.push_back(buffer_arg(n.substr(0, n.size() - 7), fn));
                } else {
                    Argument a;
                    a.name = n;
                    a.type = kv.second;
                    args.push_back(a);
                }
            }
            // Both `X` and `X.buffer` free would make two arguments named X, which no module
            // can declare (the printed header would not parse).
            std::set<std::string> names;
            for (const Argument &a : args) {
                if (!names.insert(a.name).second) {
                    error(f.loc, "'" + a.name + "' is used both as a value and as the buffer '" +
                                     a.name + ".buffer'; free names of a bare statement become " +
                                     "its arguments, and one name cannot be both");
                }
            }
            return args;
        }
        for (const PArg &pa : f.args) {
            if (pa.typed) {
                args.push_back(pa.arg);
                continue;
            }
            if (fn.seen.count(pa.name + ".buffer")) {
                args.push_back(buffer_arg(pa.name, fn));
                continue;
            }
            Argument a;
            a.name = pa.name;
            a.type = pa.name == "__user_context" ? Handle() : Int(32);
            for (const auto &kv : fn.order) {
                if (kv.first == pa.name) {
                    a.type = kv.second;
                }
            }
            args.push_back(a);
        }
        return args;
    }

    /** The name of a bare statement's pipeline: its last outermost producer. */
    static std::string pipeline_name(const Stmt &body) {
        class Outermost : public IRVisitor {
        public:
            std::string last;
            int depth = 0;
            using IRVisitor::visit;
            void visit(const ProducerConsumer *op) override {
                if (op->is_producer && depth == 0) {
                    last = op->name;
                }
                depth += op->is_producer;
                IRVisitor::visit(op);
                depth -= op->is_producer;
            }
        } v;
        body.accept(&v);
        return v.last.empty() ? "main" : v.last;
    }
};

}  // namespace

static Module parse_module_impl(const std::string &text, const std::string &filename) {
    SyntaxParser p(text, filename);
    PModule pm = p.parse();
    // Duplicate definitions are caught here, where locations are known.
    std::set<std::string> names;
    for (const PFunc &f : pm.funcs) {
        if (!pm.bare && !names.insert(f.name).second) {
            p.lex.error(f.loc, "'" + f.name + "' is defined twice");
        }
        std::set<std::string> arg_names;
        for (const PArg &a : f.args) {
            if (!arg_names.insert(a.name).second) {
                p.lex.error(a.loc, "argument '" + a.name + "' appears twice");
            }
        }
    }
    Elaborator e(p.lex);
    return e.run(pm);
}

Module parse_module(const std::string &text, const std::string &filename) {
    return with_large_stack([&]() { return parse_module_impl(text, filename); });
}

Module parse_module_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    user_assert(in.good()) << path << ": error: cannot open file";
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_module(ss.str(), path);
}

static Expr parse_expr_impl(const std::string &text) {
    SyntaxParser p(text, "<expr>");
    PExpr pe = p.parse_single_expr();
    Elaborator e(p.lex);
    return e.elab_standalone(pe);
}

Expr parse_expr(const std::string &text) {
    return with_large_stack([&]() { return parse_expr_impl(text); });
}

}  // namespace tally
