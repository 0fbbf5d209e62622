// The syntax parser: IR text -> parse tree (ParseTree.h).
//
// A recursive-descent parser over the lexer's tokens, one function per grammar rule
// (docs/ir-syntax.md is the grammar). It knows no types beyond what the text spells: a `(T)`
// prefix, a cast's type, a header's argument types. Everything the text leaves implicit is the
// elaborator's job (Elaborator.cpp).
//
// Assumes: nothing about the input; any bytes are read or rejected with a CompileError
// `file:line:col: error: ...` at the first mistake (there is no error recovery).
// Establishes, in the tree it returns: every node has the location of its first token; the
// fixed arities hold (a select has 3 operands, a ramp 2 plus its literal lane count, a shuffle
// form its literal indices, a cast 1); function names are unique in a module and argument names
// unique in a function; a bare statement is a PModule with `bare` set and one function.
//
// Statements are one per line: outside brackets an expression ends at a line break, so `x`
// followed by a line that starts with `(` is two statements, not a call. Nesting deeper than
// max_nesting is rejected before it can exhaust the stack (the entry runs on a large stack, see
// ir/LargeStack.h, so the limit is the only bound).

#include "text/SyntaxParser.h"

#include <cctype>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally_halide_vulkan_module.h"

namespace tally {

namespace {

// Syntactic nesting beyond this is rejected rather than risking the stack.
constexpr int max_nesting = 10000;

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

// One parse of one text: a function per grammar rule, reading tokens from a borrowed lexer.
class SyntaxParser {
public:
    explicit SyntaxParser(Lexer &lex) : lex(lex) {}

    PModule parse() {
        PModule m;
        const Token &t = lex.peek();
        if (t.kind == Token::Ident && !t.quoted && t.text == "module") {
            parse_module_header(&m);
            while (lex.peek().kind != Token::End) {
                parse_top_level(&m);
            }
        } else {
            if (t.kind == Token::End) {
                // Nothing to run: an empty file, only comments, or a directory read as a file
                // would otherwise be a pipeline that does nothing.
                err(t, "no pipeline: the text is empty or holds only comments (expected a "
                       "`module` header or a statement)");
            }
            m.bare = true;
            PFunc f;
            f.loc = t.loc;
            f.body = parse_stmts(/*top_level=*/true);
            m.funcs.push_back(std::move(f));
        }
        check_unique_names(m);
        if (!m.has_dialect && halide21_spelling) {
            m.dialect = Dialect::Halide21;
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

private:
    Lexer &lex;
    int depth = 0;
    // Has the text used a spelling only Halide 21 prints? Then the module is Halide 21's,
    // unless its header names a dialect.
    bool halide21_spelling = false;

    void saw_halide21() { halide21_spelling = true; }

    /** Does `b` start right where `a` ends, on its line? Halide prints some forms run together
     * (`reinterpret<`) that would mean something else spaced out (`reinterpret < x`). */
    static bool touching(const Token &a, const Token &b) {
        return b.loc.line == a.loc.line && b.loc.col == a.loc.col + int(a.text.size());
    }
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

    /** Functions of a module, and arguments of a function, are defined once. Checked once the
     * whole text is read, so a later syntax error is reported first. */
    void check_unique_names(const PModule &m) {
        std::set<std::string> names;
        for (const PFunc &f : m.funcs) {
            if (!m.bare && !names.insert(f.name).second) {
                lex.error(f.loc, "'" + f.name + "' is defined twice");
            }
            std::set<std::string> arg_names;
            for (const PArg &a : f.args) {
                if (!arg_names.insert(a.name).second) {
                    lex.error(a.loc, "argument '" + a.name + "' appears twice");
                }
            }
        }
    }

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
    /** Is token k the word `p`, unquoted? (A quoted word is always a name.) */
    bool is_ident(const char *p, int k = 0) {
        const Token &t = lex.peek(k);
        return t.kind == Token::Ident && !t.quoted && t.text == p;
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

    /** `item (',' item)*`, reading each item with `read_item`. */
    template <typename ReadItem>
    void parse_comma_separated(ReadItem read_item) {
        read_item();
        while (is_punct(",")) {
            lex.next();
            read_item();
        }
    }

    // module name=NAME, target=TARGET[, dialect=DIALECT]
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
        // Tally prints the dialect after the target, which has no ',' of its own.
        const std::string dialect_key = ", dialect=";
        size_t d = target.find(dialect_key);
        if (d != std::string::npos) {
            std::string name = target.substr(d + dialect_key.size());
            Loc dloc = start;
            dloc.col += int(d + dialect_key.size());
            if (!dialect_from_name(name, &m->dialect)) {
                lex.error(dloc, "unknown dialect '" + name + "' (expected halide14 or halide21)");
            }
            m->has_dialect = true;
            target.resize(d);
        }
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

    static bool ends_with(const std::string &s, const std::string &suffix) {
        return s.size() >= suffix.size() &&
               s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    }

    /** Halide 21's Vulkan kernels, printed raw: `{`, a line break, the binary module, a line
     * break, `}`. The binary has no terminator (NUL bytes are everywhere in SPIR-V), so its
     * length comes from its own framing (tally_halide_vulkan_module.h, the runtime's rule too),
     * every count checked against the bytes there are. Returns the line break and the module
     * (what Tally prints back between the braces). */
    std::string read_vulkan_kernel_module() {
        const Loc at = lex.position();
        std::string_view rest = lex.raw_rest();
        auto fail = [&](const std::string &why) {
            lex.error(at, "Halide's Vulkan kernel module: " + why);
        };
        if (rest.empty() || rest[0] != '\n') {
            fail("expected a line break after '{'");
        }
        rest.remove_prefix(1);
        size_t table = 0;
        uint64_t modules = 0;
        char why[256];
        const uint32_t kernels =
            tally_hvk_read_module(reinterpret_cast<const uint8_t *>(rest.data()), rest.size(),
                                  &table, &modules, nullptr, "the text", why, sizeof why);
        if (kernels == 0) {
            fail(why);
        }
        if (modules > rest.size() - table || rest.substr(table + modules, 2) != "\n}") {
            fail("its " + std::to_string(kernels) + " kernels' " + std::to_string(modules) +
                 " bytes are not followed by a line break and '}'");
        }
        return lex.read_raw(1 + table + size_t(modules));
    }

    void parse_top_level(PModule *m) {
        const Token t = lex.peek();
        if (t.kind != Token::Ident || t.quoted) {
            err(t, "expected 'buffer', 'kernel' or a function definition");
        }
        if (t.text == "buffer") {
            lex.next();
            BufferConstant b;
            b.name = expect_name("for the buffer");
            expect_punct("=", "after the buffer name");
            expect_punct("{", "to open the buffer contents");
            if (ends_with(b.name, "vulkan_gpu_source_kernels") &&
                lex.raw_rest().compare(0, 4, "...}") != 0) {
                b.opaque = false;
                b.bytes = read_vulkan_kernel_module();
                saw_halide21();
            } else {
                b.opaque = !lex.read_blob(&b.bytes);
            }
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
            } else if (t.text == "external_plus_argv") {
                f.linkage = LinkageType::ExternalPlusArgv;
            } else if (t.text == "external_plus_metadata") {
                f.linkage = LinkageType::ExternalPlusMetadata;
            } else if (t.text == "internal") {
                f.linkage = LinkageType::Internal;
            } else {
                err(t, "expected 'buffer', 'kernel' or a linkage ('external', "
                       "'external_plus_argv', 'external_plus_metadata', 'internal')");
            }
            lex.next();
            expect_ident("func", "after the linkage");
        }
        f.name = expect_name("for the function");
        expect_punct("(", "to open the argument list");
        if (!is_punct(")")) {
            parse_comma_separated([&]() { f.args.push_back(parse_arg()); });
        }
        expect_punct(")", "to close the argument list");
        if (f.is_kernel) {
            parse_geometry(&f);
        }
        expect_punct("{", "to open the function body");
        f.body = parse_stmts(false);
        expect_punct("}", "to close the function body");
        m->funcs.push_back(std::move(f));
    }

    // [blocks(DIMS)] [threads(DIMS)] after a kernel's arguments.
    void parse_geometry(PFunc *f) {
        if (is_ident("blocks")) {
            lex.next();
            f->has_geometry = true;
            parse_dims(&f->blocks, "gpu_block");
        }
        if (is_ident("threads")) {
            lex.next();
            f->has_geometry = true;
            parse_dims(&f->threads, "gpu_thread");
        }
    }

    // (x: LOOP, ... < EXTENT[, y: ...[, z: ...]])
    void parse_dims(std::vector<PDim> *dims, const char *kind) {
        expect_punct("(", "to open the launch dimensions");
        do {
            if (!dims->empty()) {
                lex.next();
            }
            const Token t = lex.peek();
            const std::string expected(1, "xyz"[dims->size()]);
            if (t.kind != Token::Ident || t.quoted || t.text != expected) {
                err(t, "expected launch dimension '" + expected + "' of the " + kind + " loops");
            }
            lex.next();
            expect_punct(":", "after the launch dimension");
            PDim d;
            d.loc = t.loc;
            d.loops.push_back(expect_name("for a loop of the launch dimension"));
            while (is_punct(",")) {
                lex.next();
                d.loops.push_back(expect_name("for a loop of the launch dimension"));
            }
            expect_punct("<", "before the launch dimension's extent");
            d.extent = parse_expr();
            dims->push_back(std::move(d));
        } while (dims->size() < 3 && is_punct(","));
        expect_punct(")", "to close the launch dimensions");
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
                    const Loc at = lex.peek().loc;
                    a.arg.type = parse_type("as the buffer's element type");
                    if (a.arg.type.lanes() != 1) {
                        const Type &t = a.arg.type;
                        lex.error(at, "a buffer's element type is a scalar, not '" +
                                          (t.is_handle() ? "(" + t.to_string() + ")x" +
                                                               std::to_string(t.lanes())
                                                         : t.to_string()) +
                                          "'");
                    }
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

    /** Halide 21's `(halide_task_t)::f`: a handle whose C type is a pointer typedef, so
     * printed without a `*`. Read only before a `::` function name against the `)`, the one
     * place Halide prints one; elsewhere `(name)` is a parenthesized variable. */
    bool at_pointer_typedef_prefix() {
        const Token &name = lex.peek(1), &after = lex.peek(3);
        return is_punct("(") && name.kind == Token::Ident && !name.quoted &&
               !parse_type_name(name.text).is_valid() && is_punct(")", 2) &&
               after.kind == Token::Ident && !after.quoted && after.text.compare(0, 2, "::") == 0 &&
               touching(lex.peek(2), after);
    }

    /** Is there a `(T)` type prefix at lookahead 0? */
    bool at_type_prefix() {
        if (handle_prefix_length(0) || at_pointer_typedef_prefix()) {
            return true;
        }
        return is_punct("(") && lex.peek(1).kind == Token::Ident && !lex.peek(1).quoted &&
               parse_type_name(lex.peek(1).text).is_valid() && is_punct(")", 2);
    }

    /** Consumes `(T)` (value or handle type); `(T *)xN` too where a type stands alone
     * (`in_type_position`, see handle_lanes). */
    Type parse_type_prefix(bool in_type_position = false) {
        if (at_pointer_typedef_prefix()) {
            lex.next();  // (
            Type t = Type::pointer_typedef(lex.next().text);
            lex.next();  // )
            saw_halide21();
            return t;
        }
        int n = handle_prefix_length(0);
        if (n) {
            lex.next();  // (
            if (lex.peek().text == "struct") {
                saw_halide21();  // Halide 14 printed the bare tag name
            }
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
            Loc close = lex.next().loc;  // )
            return Handle(name).with_lanes(handle_lanes(close, in_type_position));
        }
        lex.next();
        Type t = parse_type_name(lex.next().text);
        lex.next();
        return t;
    }

    /** The lanes of a handle type whose `)` is at `close`: Halide prints a vector handle type
     * as `(char *)x4`, run together with the name of the call that has it
     * (`(char *)x4stringify(...)`, printing in vectorized code). An unquoted identifier right
     * after the `)` that starts with `x`, a lane count of 2 or more and then a name is read
     * so; `x4` and the name become two tokens. A name that must be quoted (a reserved word, or
     * not an identifier) follows the lanes as a quoted name, again with no space:
     * `(char *)x4\`predicate\`(...)`; a cast to a vector handle type is `(char *)x4(v)`, as
     * Halide prints it. (An extern function named like `x4f` or `x4` would be written quoted:
     * `(char *)\`x4f\`(...)`.) Where a type stands alone (`in_type_position`: an
     * argument's type, an allocation's), `x4` alone is the lanes: `p: (char *)x4`. */
    int handle_lanes(const Loc &close, bool in_type_position) {
        const Token &t = lex.peek();
        if (t.kind != Token::Ident || t.quoted || t.loc.line != close.line ||
            t.loc.col != close.col + 1) {
            return 1;
        }
        const size_t n = vector_handle_lanes_length(t.text);
        if (n == 0) {
            return 1;
        }
        const bool alone = n == t.text.size();
        if (alone && !in_type_position) {
            // `x4` alone: the lanes only when a quoted name or the `(` of a cast follows with
            // no space.
            const Token &q = lex.peek(1);
            const bool touching =
                q.loc.line == t.loc.line && q.loc.col == t.loc.col + (int)t.text.size();
            if (!(touching && ((q.kind == Token::Ident && q.quoted) ||
                               (q.kind == Token::Punct && q.text == "(")))) {
                return 1;
            }
        }
        std::string digits = t.text.substr(1, n - 1);
        if (digits.size() > 4) {
            lex.error(t.loc, "a vector handle type needs 2 to 9999 lanes, not '" + digits + "'");
        }
        if (std::stoi(digits) < 2) {
            return 1;  // Halide prints no lane count for one lane: a name
        }
        if (!alone) {
            lex.split_next(n);
        }
        lex.next();
        return std::stoi(digits);
    }

    /** A type where the grammar expects one: `float32` or `(void *)`. */
    Type parse_type(const char *context) {
        if (handle_prefix_length(0)) {
            return parse_type_prefix(/*in_type_position=*/true);
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
            if (!out.empty() && !t.newline_before) {
                err(t, "expected a line break between statements");
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

    /** One statement, chosen by its first token. A reserved word (tally::is_reserved_word)
     * counts only unquoted, and then it must begin its statement: `if x`, `free(p)` or `atomic
     * (1) {` are errors naming the statement, never a variable or a call of that name. */
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
            if (is_reserved_word(t.text)) {
                return parse_reserved_stmt(t);
            }
            if (t.text == "prefetch" && lex.peek(1).kind == Token::Ident &&
                !lex.peek(1).newline_before) {
                // Halide's `prefetch f ...` statement (its name on the same line);
                // `prefetch(...)` is the lowered intrinsic call, and a bare `prefetch` at the end
                // of a line a variable of that name (fuzz_parser, docs/reliability.md
                // finding 18).
                unlowered_statement(t.loc, "prefetch " + lex.peek(1).text);
            }
        }
        parse_store_or_eval(&s);
        return s;
    }

    /** A statement that starts with the reserved word `t`, in the form the grammar gives it. */
    PStmt parse_reserved_stmt(const Token &t) {
        const std::string &w = t.text;
        PStmt s;
        s.loc = t.loc;
        // The statement's form, checked from the token after the word; an error names both.
        auto expect_form = [&](bool ok, const std::string &form) {
            if (!ok) {
                lex.error(t.loc, "malformed '" + w + "' statement: expected " + form +
                                     describe(lex.peek(1)) + "; a name spelled '" + w +
                                     "' is written quoted, `" + w + "`");
            }
            lex.next();
        };
        auto named_next = [&]() {
            return (lex.peek(1).kind == Token::Ident || lex.peek(1).kind == Token::String) &&
                   !lex.peek(1).newline_before;
        };
        ForType ft;
        if (w == "let") {
            expect_form(named_next(), "`let NAME = value`");
            parse_let(&s);
        } else if (w == "assert") {
            expect_form(is_punct("(", 1), "`assert(condition, message)`");
            parse_assert(&s);
        } else if (w == "produce" || w == "consume") {
            expect_form(named_next(), "`" + w + " NAME {`");
            parse_producer_consumer(w == "produce", &s);
        } else if (for_type_from_name(w, &ft)) {
            expect_form(is_punct("(", 1) || is_punct("<", 1), "`" + w + " (NAME, min, extent) {`");
            parse_for(ft, &s);
        } else if (w == "allocate") {
            expect_form(named_next(), "`allocate NAME[type * extent...]`");
            parse_allocate(&s);
        } else if (w == "free") {
            expect_form(named_next(), "`free NAME`");
            s.kind = PStmt::FreeS;
            s.name = expect_name("after 'free'");
        } else if (w == "if") {
            expect_form(is_punct("(", 1), "`if (condition) {`");
            return parse_if(s.loc);
        } else if (w == "predicate") {
            expect_form(is_punct("(", 1), "`predicate (condition)` and a store");
            return parse_predicated_store();
        } else if (w == "atomic") {
            expect_form(is_punct("{", 1) ||
                            (is_punct("(", 1) && lex.peek(2).kind == Token::Ident &&
                             ((is_punct(")", 3) && is_punct("{", 4)) ||
                              (is_punct(",", 3) && lex.peek(4).kind == Token::Ident &&
                               is_punct(")", 5) && is_punct("{", 6)))),
                        "`atomic {`, `atomic (NAME) {` or `atomic (PRODUCER, MUTEX) {`");
            parse_atomic(&s);
        } else if (w == "acquire") {
            expect_form(is_punct("(", 1), "`acquire (semaphore, count) {`");
            parse_acquire(&s);
        } else if (w == "fork") {
            expect_form(is_punct("{", 1) && !lex.peek(1).newline_before, "`fork { ... } { ... }`");
            parse_fork(&s);
        } else if (w == "realize") {
            unlowered_statement(t.loc, "realize");
        } else if (w == "else") {
            lex.error(t.loc, "'else' without an 'if': it follows the '}' of an if's then-branch");
        } else if (w == "custom_new" || w == "custom_delete") {
            lex.error(t.loc, "'" + w + "' outside an allocate: it follows `allocate NAME[...]`");
        } else {
            lex.error(t.loc, "internal: reserved word '" + w + "' has no statement form");
        }
        return s;
    }

    // let NAME = VALUE, or `let NAME = VALUE in BODY` (an evaluated let expression)
    void parse_let(PStmt *s) {
        s->name = expect_name("after 'let'");
        expect_punct("=", "after the let name");
        PExpr value = parse_expr();
        if (!is_ident("in") || !continues()) {
            s->kind = PStmt::LetS;
            s->exprs.push_back(std::move(value));
            return;
        }
        lex.next();
        PExpr let;
        let.kind = PExpr::LetE;
        let.loc = s->loc;
        let.name = s->name;
        let.kids.push_back(std::move(value));
        let.kids.push_back(parse_expr());
        s->kind = PStmt::EvalS;
        s->name.clear();
        s->exprs.push_back(std::move(let));
    }

    // assert(COND, MESSAGE)
    void parse_assert(PStmt *s) {
        lex.next();  // (
        Group g(this);
        s->kind = PStmt::AssertS;
        s->exprs.push_back(parse_expr());
        expect_punct(",", "between the assert's condition and message");
        s->exprs.push_back(parse_expr());
        expect_punct(")", "to close the assert");
    }

    // produce NAME { ... } / consume NAME { ... }
    void parse_producer_consumer(bool is_producer, PStmt *s) {
        s->kind = is_producer ? PStmt::ProduceS : PStmt::ConsumeS;
        Token nt = lex.peek();
        if (nt.kind == Token::String && nt.text.empty()) {
            lex.error(nt.loc,
                      std::string(is_producer ? "producer" : "consumer") + " has an empty name");
        }
        s->name = expect_name("for the producer/consumer");
        s->body = parse_braced_body("to open the producer/consumer body");
    }

    // FORTYPE[<API>](NAME, MIN, EXTENT) { ... }
    void parse_for(ForType ft, PStmt *s) {
        s->kind = PStmt::ForS;
        s->for_type = ft;
        if (is_punct("<")) {
            lex.next();
            Token api = lex.peek();
            std::string api_name = expect_name("for the loop's device API");
            if (!device_api_from_name(api_name, &s->device_api)) {
                lex.error(api.loc, "unknown device API '" + api_name + "'");
            }
            expect_punct(">", "after the device API");
        }
        {
            expect_punct("(", "to open the loop header");
            Group g(this);
            s->name = expect_name("for the loop variable");
            expect_punct(",", "after the loop variable");
            s->exprs.push_back(parse_expr());
            expect_punct(",", "after the loop minimum");
            s->exprs.push_back(parse_expr());
            expect_punct(")", "to close the loop header");
        }
        s->body = parse_braced_body("to open the loop body");
    }

    // The two dialects print an Atomic's producer and mutex differently:
    //   atomic { ... }               neither (both dialects: a lock-free update)
    //   atomic (F.mutex) { ... }     Halide 14: the mutex only, which Halide 14 always names
    //                                `<producer>.mutex` (ScheduleFunctions.cpp)
    //   atomic (F) { ... }           Halide 21: the producer only, no mutex
    //   atomic (F, F.mutex) { ... }  Halide 21: the producer and its mutex
    // so a single name is Halide 14's mutex exactly when it ends in `.mutex` (a Halide Func name
    // has no dots), and otherwise Halide 21's producer of a lock-free update.
    void parse_atomic(PStmt *s) {
        s->kind = PStmt::AtomicS;
        if (is_punct("(")) {
            lex.next();
            Group g(this);
            std::string first = expect_name("for the atomic's producer or mutex");
            if (is_punct(",")) {
                lex.next();
                s->producer = first;
                s->name = expect_name("for the atomic's mutex");
                saw_halide21();
            } else if (atomic_mutex_producer(first, &s->producer)) {
                s->name = first;
            } else {
                s->producer = first;
                saw_halide21();
            }
            expect_punct(")", "after the atomic's producer and mutex");
        }
        s->body = parse_braced_body("to open the atomic body");
    }

    // fork { ... } { ... } [{ ... } ...]: Halide prints a chain of forks flat, each branch's
    // `{` on the line of the previous `}`; a `{` on a line of its own is a new statement.
    void parse_fork(PStmt *s) {
        s->kind = PStmt::ForkS;
        s->branches.push_back(parse_braced_body("to open the fork's first branch"));
        while (is_punct("{") && !lex.peek().newline_before) {
            s->branches.push_back(parse_braced_body("to open a fork branch"));
        }
        if (s->branches.size() < 2) {
            lex.error(s->loc, "malformed 'fork' statement: it needs two or more branches, "
                              "`fork { ... } { ... }`, each '{' on the line of the '}' before it");
        }
    }

    // acquire (SEMAPHORE, COUNT) { ... }
    void parse_acquire(PStmt *s) {
        s->kind = PStmt::AcquireS;
        {
            expect_punct("(", "after 'acquire'");
            Group g(this);
            s->exprs.push_back(parse_expr());
            expect_punct(",", "between the acquire's semaphore and count");
            s->exprs.push_back(parse_expr());
            expect_punct(")", "to close the acquire's semaphore and count");
        }
        s->body = parse_braced_body("to open the acquire body");
    }

    /** Statements Halide prints only before its lowering is done (and so never in the IR
     * `compile_to_lowered_stmt` writes, nor in its conceptual statement): `realize f(...)`,
     * `prefetch f(...)`, a Provide `f(x) = v`. Tally's IR has no such statement; each is named
     * in the error rather than misread. */
    [[noreturn]] void unlowered_statement(const Loc &loc, const std::string &what) {
        lex.error(loc, "unsupported statement '" + what +
                           "': Halide prints it only before lowering ends; give Tally the IR "
                           "of compile_to_lowered_stmt");
    }

    // predicate(PRED) followed by a store
    PStmt parse_predicated_store() {
        lex.next();  // (
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

    // An expression statement, or a store `name[index] = value`.
    void parse_store_or_eval(PStmt *s) {
        PExpr e = parse_expr();
        if (!is_punct("=")) {
            reject_unknown_block_statement(e);
            s->kind = PStmt::EvalS;
            s->exprs.push_back(std::move(e));
            return;
        }
        if (e.kind == PExpr::CallE && !e.has_call_type) {
            unlowered_statement(e.loc, e.name + "(...) = value");
        }
        if (e.kind != PExpr::LoadE || e.has_predicate) {
            lex.error(e.loc, "the left side of '=' must be a buffer element, `name[index]`");
        }
        lex.next();
        s->kind = PStmt::StoreS;
        s->name = e.name;
        s->alignment = e.alignment;
        s->exprs.push_back(std::move(e.kids[0]));
        s->exprs.push_back(parse_expr());
    }

    /** An evaluated expression is a whole statement: a `{` right after it on the same line
     * means the text is some statement form the grammar does not have, which must not be
     * read as a variable followed by a nested block. */
    void reject_unknown_block_statement(const PExpr &e) {
        const Token &next = lex.peek();
        if (next.kind != Token::Punct || next.text != "{" || next.newline_before) {
            return;
        }
        if ((e.kind == PExpr::Var || e.kind == PExpr::CallE) && !e.name.empty()) {
            lex.error(e.loc, "unknown statement '" + e.name + " ... {': no statement of the IR " +
                                 "syntax starts with '" + e.name + "' and opens a block");
        }
        lex.error(next.loc, "unexpected '{' after an expression statement (a nested block starts "
                            "on a line of its own)");
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
        // `in` and `if` continue the allocate's line; `custom_new` and `custom_delete` may start
        // the next one, as Halide prints them (they are reserved words, never a statement).
        if (is_ident("in") && continues()) {
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
        if (is_ident("if") && continues()) {
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

    /** An expression. A load followed on the same line by `if` is a predicated load, as Halide
     * prints one where its printer leaves out parentheses (a let's value, a call's argument):
     * `let t = in[ramp(x, 1, 8)] if (ramp(x, 1, 8) <= x8(n))`. Statements start on a line of
     * their own, so an `if` on the same line cannot begin one. */
    PExpr parse_expr() {
        PExpr e = parse_binary(0);
        if (e.kind == PExpr::LoadE && !e.has_predicate && is_ident("if") &&
            !lex.peek().newline_before) {
            lex.next();
            e.has_predicate = true;
            e.kids.push_back(parse_expr());
        }
        return e;
    }

    // The binary operators by precedence, loosest first; all associate left.
    static constexpr const char *binary_ops[][6] = {
        {"||"}, {"&&"}, {"==", "!=", "<", "<=", ">", ">="}, {"+", "-"}, {"*", "/", "%"},
    };
    static constexpr int binary_levels = int(std::size(binary_ops));

    bool at_binary_op(int level) {
        for (const char *op : binary_ops[level]) {
            if (op && is_punct(op)) {
                return true;
            }
        }
        return false;
    }

    /** An operand of precedence `level` or tighter: `a op b op c` with ops of that level. */
    PExpr parse_binary(int level) {
        if (level == binary_levels) {
            return parse_unary();
        }
        PExpr e = parse_binary(level + 1);
        while (at_binary_op(level) && continues()) {
            Token op = lex.next();
            e = binary(op.loc, op.text, std::move(e), parse_binary(level + 1));
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
            parse_comma_separated([&]() { args.push_back(parse_expr()); });
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
            PExpr e = parse_expr();  // `(name[index] if predicate)` included
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
            if (n.kind == Token::Ident && !n.quoted && n.text == "inf") {
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
        if (t.kind == Token::Ident && !t.quoted && (t.text == "inf" || t.text == "nan")) {
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
            parse_call_type(&e);
        }
        if (is_punct("[") && continues()) {
            parse_load_index(&e);
            return e;
        }
        if (!t.quoted && !e.has_call_type && t.text == "reinterpret" && is_punct("<") &&
            touching(t, lex.peek())) {
            parse_typed_reinterpret(&e);
            return e;
        }
        if (!is_punct("(") || (!continues() && !e.has_call_type)) {
            e.kind = PExpr::Var;
            return e;
        }
        if (!e.has_call_type && !t.quoted && parse_builtin(t, prefix, &e)) {
            return e;
        }
        e.kind = PExpr::CallE;
        e.kids = parse_call_args("after the function name");
        if (!t.quoted && e.name.compare(0, 14, "vector_reduce_") == 0) {
            saw_halide21();  // Halide 14: vector_reduce(Op, ...)
        }
        return e;
    }

    /** Halide 21's `reinterpret<T>(e)`: the type between angle brackets, value or handle
     * (`reinterpret<(void *)>((uint64)0)`). The same node Halide 14 printed `(T)reinterpret(e)`;
     * a prefix before it as well (`(T)reinterpret<U>(e)`) would be two types for one node. */
    void parse_typed_reinterpret(PExpr *e) {
        Loc at = e->loc;
        if (e->prefix.is_valid()) {
            lex.error(at, "reinterpret<T>(...) after a type prefix: write the type once");
        }
        lex.next();  // <
        e->prefix = parse_type("in reinterpret<...>");
        expect_punct(">", "to close reinterpret<...>");
        e->kind = PExpr::ReinterpretE;
        e->kids = parse_call_args("after reinterpret<...>");
        if (e->kids.size() != 1) {
            lex.error(at, "reinterpret takes one argument");
        }
        saw_halide21();
    }

    // NAME@CALLTYPE(...): a call whose call type is not the default for its name
    void parse_call_type(PExpr *e) {
        lex.next();
        Token ct = lex.peek();
        std::string n = expect_name("for the call type");
        bool found = false;
        for (int i = 0; i <= int(Call::PureIntrinsic); i++) {
            if (n == call_type_name(Call::CallType(i))) {
                e->call_type = Call::CallType(i);
                found = true;
            }
        }
        if (!found) {
            lex.error(ct.loc, "unknown call type '" + n + "'");
        }
        e->has_call_type = true;
        if (!is_punct("(")) {
            err(lex.peek(), "expected '(' after the call type");
        }
    }

    // NAME[INDEX [aligned(MOD, REM)]]
    void parse_load_index(PExpr *e) {
        lex.next();
        Group g(this);
        e->kind = PExpr::LoadE;
        e->kids.push_back(parse_expr());
        if (is_ident("aligned") && is_punct("(", 1)) {
            const Loc at = lex.peek().loc;
            lex.next();
            lex.next();
            e->alignment.modulus = expect_int("as the alignment modulus");
            expect_punct(",", "in aligned(...)");
            e->alignment.remainder = expect_int("as the alignment remainder", true);
            expect_punct(")", "to close aligned(...)");
            // Halide prints an index's alignment only when it knows one: a modulus of at least
            // 2 and a remainder below it. Anything else (aligned(0, 0), aligned(1, 0),
            // aligned(8, 9)) has no printed form to round-trip to, so it is no input either.
            if (e->alignment.modulus < 2 || e->alignment.remainder < 0 ||
                e->alignment.remainder >= e->alignment.modulus) {
                lex.error(at, "aligned(" + std::to_string(e->alignment.modulus) + ", " +
                                  std::to_string(e->alignment.remainder) +
                                  "): an alignment is a modulus of at least 2 and a remainder "
                                  "from 0 to the modulus - 1");
            }
        }
        expect_punct("]", "to close the index");
    }

    /** The built-in forms written like calls: `T(v)` casts, `xN(v)` broadcasts, ramp, select,
     * min, max, reinterpret and the shuffles. Reads one into `e` (named by `t`, after `prefix`)
     * and returns true, or returns false for an ordinary call. */
    bool parse_builtin(const Token &t, const Type &prefix, PExpr *e) {
        const std::string &n = e->name;
        if (!is_builtin_form(n)) {
            return false;
        }
        Type ct = parse_type_name(n);
        if (ct.is_valid() && !prefix.is_valid()) {
            e->kind = PExpr::CastE;
            e->cast_type = ct;
            std::vector<PExpr> args = parse_call_args("after the cast type");
            if (args.size() != 1) {
                lex.error(t.loc, "a cast takes exactly one value");
            }
            e->kids = std::move(args);
            return true;
        }
        if (n.size() > 1 && n[0] == 'x' && n.find_first_not_of("0123456789", 1) == n.npos &&
            !prefix.is_valid()) {
            e->kind = PExpr::BroadcastE;
            if (n.size() > 6 || std::stoi(n.substr(1)) > Type::max_lanes) {
                lex.error(t.loc, "a broadcast's lane count is at most " +
                                     std::to_string(Type::max_lanes) + ", not " + n.substr(1));
            }
            e->lanes = std::stoi(n.substr(1));
            e->kids = parse_call_args("after the broadcast");
            if (e->kids.size() != 1 || e->lanes < 2) {
                lex.error(t.loc, "a broadcast `xN(value)` takes one value and N >= 2");
            }
            return true;
        }
        if (n == "ramp" && !prefix.is_valid()) {
            e->kind = PExpr::RampE;
            e->kids = parse_call_args("after 'ramp'");
            if (e->kids.size() != 3 || e->kids[2].kind != PExpr::IntLit || e->kids[2].negative ||
                e->kids[2].prefix.is_valid() || e->kids[2].int_value < 2 ||
                e->kids[2].int_value > uint64_t(Type::max_lanes)) {
                lex.error(t.loc, "ramp takes (base, stride, lanes) with a literal lane "
                                 "count of at least 2");
            }
            e->lanes = int(e->kids[2].int_value);
            e->kids.pop_back();
            return true;
        }
        if ((n == "select" || n == "min" || n == "max") && !prefix.is_valid()) {
            e->kind = n == "select" ? PExpr::SelectE : PExpr::Binary;
            e->kids = parse_call_args("after the operator");
            if (e->kids.size() != (n == "select" ? 3u : 2u)) {
                lex.error(t.loc, n + " takes " + (n == "select" ? "3" : "2") + " arguments");
            }
            return true;
        }
        if (n == "reinterpret") {
            e->kind = PExpr::ReinterpretE;
            e->kids = parse_call_args("after 'reinterpret'");
            if (e->kids.size() != 1) {
                lex.error(t.loc, "reinterpret takes one argument");
            }
            return true;
        }
        if ((n == "interleave_vectors" || n == "concat_vectors" || n == "slice_vectors" ||
             n == "extract_element" || n == "shuffle") &&
            !prefix.is_valid()) {
            *e = parse_shuffle(std::move(*e));
            return true;
        }
        return false;
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
                parse_comma_separated(
                    [&]() { e.indices.push_back(int(expect_int("as a shuffle index"))); });
                expect_punct("]", "to close the shuffle indices");
                break;  // the index list is the last argument
            }
            e.kids.push_back(parse_expr());
            if (!is_punct(",")) {
                break;
            }
            lex.next();
        }
        expect_punct(")", "to close the shuffle");
        if (n == "shuffle" && e.indices.empty()) {
            // Halide's own spelling, `shuffle(a, b, 0, 4, 1, 5)`: the vectors, then the indices,
            // told apart only by being literals. The longest run of bare literal integers at the
            // end is the index list (the first argument is always a vector). A literal vector
            // operand right before the indices would be read as an index; Tally's printer
            // writes `shuffle(a, b, [0, 4, 1, 5])`, which has no such ambiguity.
            size_t first = e.kids.size();
            while (first > 1 && e.kids[first - 1].kind == PExpr::IntLit &&
                   !e.kids[first - 1].prefix.is_valid() && !e.kids[first - 1].negative) {
                first--;
            }
            for (size_t i = first; i < e.kids.size(); i++) {
                if (e.kids[i].int_value > uint64_t(Type::max_lanes)) {
                    lex.error(e.kids[i].loc, "shuffle index out of range");
                }
                e.indices.push_back(int(e.kids[i].int_value));
            }
            e.kids.resize(first);
        }
        if (trailing) {
            if (int(e.kids.size()) != trailing + 1) {
                lex.error(e.loc, n + " takes one vector and " + std::to_string(trailing) +
                                     " integer arguments");
            }
            for (int i = 0; i < trailing; i++) {
                const PExpr &k = e.kids[1 + i];
                if (k.kind != PExpr::IntLit || k.prefix.is_valid() ||
                    k.int_value > uint64_t(Type::max_lanes)) {
                    lex.error(k.loc, "expected a literal integer in " + n);
                }
                e.indices.push_back(int(k.int_value));
            }
            e.kids.resize(1);
        }
        if (e.kids.empty() || (n == "shuffle" && e.indices.empty())) {
            lex.error(e.loc, n + " needs at least one vector" +
                                 (n == "shuffle" ? std::string(" and its indices") : ""));
        }
        return e;
    }
};

}  // namespace

PModule parse_syntax_module(Lexer &lex) {
    return SyntaxParser(lex).parse();
}

PExpr parse_syntax_expr(Lexer &lex) {
    return SyntaxParser(lex).parse_single_expr();
}

}  // namespace tally
