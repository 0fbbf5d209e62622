// The IR printer. Output follows Halide 14's compile_to_lowered_stmt text so that corpus files
// and our output read alike, with these additions (docs/ir-syntax.md has the grammar):
//  - typed function/kernel headers: `func f (in: buffer<uint16, 2>, k: float32)`;
//  - `kernel <CUDA> name (args) blocks(x: L < E, ...) threads(...) { ... }` for kernels made by
//    offload-gpu-loops, with their launch geometry;
//  - a `(type)` prefix on a Load whose type the parser could not otherwise know (Halide never
//    prints load types; the parser infers them, but our output must not depend on inference);
//  - `name@call_type(...)` when a call's type differs from the default for its name.
//
// The parser decides the type of an unprefixed variable from the innermost binding in scope
// (let, for, allocate) or int32 when unbound. The printer mirrors that scope and prints a
// prefix exactly when the parser would otherwise get the type wrong.

#include "tally/IRPrinter.h"
#include "ir/LargeStack.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

#include "tally/IRVisitor.h"

namespace tally {

bool is_reserved_word(const std::string &word) {
    // The statements of docs/ir-syntax.md and Halide 14's statements Tally rejects by name.
    static const char *const words[] = {
        "let",       "assert", "produce",    "consume",       "allocate", "free", "if",      "else",
        "predicate", "atomic", "custom_new", "custom_delete", "acquire",  "fork", "realize",
    };
    for (const char *w : words) {
        if (word == w) {
            return true;
        }
    }
    for (int i = 0; i <= int(ForType::GPULane); i++) {
        if (word == for_type_name(ForType(i))) {
            return true;
        }
    }
    return false;
}

bool is_builtin_form(const std::string &name) {
    static const char *const forms[] = {
        "ramp",
        "select",
        "min",
        "max",
        "reinterpret",
        "interleave_vectors",
        "concat_vectors",
        "slice_vectors",
        "extract_element",
        "shuffle",
    };
    for (const char *f : forms) {
        if (name == f) {
            return true;
        }
    }
    if (name.size() > 1 && name[0] == 'x' && name.find_first_not_of("0123456789", 1) == name.npos) {
        return true;  // xN(v), a broadcast
    }
    return parse_type_name(name).is_valid();  // T(v), a cast
}

size_t vector_handle_lanes_length(const std::string &word) {
    if (word.size() < 2 || word[0] != 'x' || word[1] < '1' || word[1] > '9') {
        return 0;
    }
    size_t i = 2;
    while (i < word.size() && word[i] >= '0' && word[i] <= '9') {
        i++;
    }
    if (i < word.size()) {
        const char c = word[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) {
            return 0;
        }
    }
    return i;
}

namespace {

bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || c == '$';
}
bool is_ident_char(char c) {
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

/** Can `s` be printed bare where the grammar expects a name? Only when the lexer
 * (src/text/Lexer.cpp) reads exactly `s` as one identifier: an optional `::`, then a letter,
 * `_`, `$` (not after `::`) or a `.` followed by a letter, `_` or `$`; then letters, digits, `_`,
 * `.`, `$`, and `::` followed by a letter or `_`. Anything else is quoted. */
bool is_plain_name(const std::string &s) {
    auto alpha = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    auto at = [&](size_t i) { return i < s.size() ? s[i] : '\0'; };
    size_t i = 0;
    const bool colons = s.compare(0, 2, "::") == 0;
    if (colons) {
        i = 2;
    }
    const char c = at(i);
    const bool starts =
        alpha(c) || (c == '$' && !colons) || (c == '.' && (alpha(at(i + 1)) || at(i + 1) == '$'));
    if (!starts) {
        return false;
    }
    for (; i < s.size(); i++) {
        if (s[i] == ':' && at(i + 1) == ':' && alpha(at(i + 2))) {
            i++;
            continue;
        }
        if (!is_ident_char(s[i])) {
            return false;
        }
    }
    return true;
}

std::string quote(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (c < 32 || c >= 127) {
                char buf[8];
                std::snprintf(buf, sizeof(buf), "\\x%02x", c);
                out += buf;
            } else {
                out += char(c);
            }
        }
    }
    return out + "\"";
}

/** `s` as a quoted name, with the string escapes. */
std::string quoted_name(const std::string &s) {
    std::string out = "`";
    for (unsigned char c : s) {
        if (c == '`' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 32 || c >= 127) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\x%02x", c);
            out += buf;
        } else {
            out += char(c);
        }
    }
    return out + "`";
}

/** A name where the grammar expects one (a header, or after `let`, `for (`, `allocate`,
 * `produce`, ...): bare, or quoted when it is not an identifier. */
std::string name_str(const std::string &s) {
    return is_plain_name(s) ? s : quoted_name(s);
}

/** The name of a variable, load, store or call, which may begin a statement or follow a type
 * prefix: also quoted when it is a reserved word, or `inf` or `nan` (after a type prefix,
 * those are float literals). */
std::string ref_name(const std::string &s) {
    if (is_reserved_word(s) || s == "inf" || s == "nan") {
        return quoted_name(s);
    }
    return name_str(s);
}

/** The name of a variable, load or call of type `t` printed after its `(T)` prefix: a scalar
 * handle's name that the parser would read as a vector handle's lanes and a name is quoted. */
std::string prefixed_ref_name(const Type &t, const std::string &s) {
    if (t.is_handle() && t.lanes() == 1) {
        size_t n = vector_handle_lanes_length(s);
        if (n != 0 && n < s.size()) {
            return quoted_name(s);
        }
    }
    return ref_name(s);
}

/** "int32" for values, "(void *)" for handles: the spelling used inside a `(T)` prefix is
 * the same with parentheses around it (and a vector handle's lanes after them). */
std::string type_prefix(const Type &t) {
    // A vector handle prints as Halide prints it: `(char *)x4`.
    return "(" + t.to_string() + ")" +
           (t.is_handle() && t.lanes() > 1 ? "x" + std::to_string(t.lanes()) : "");
}

/** The spelling of a type where the grammar expects a type (allocations, headers). */
std::string type_word(const Type &t) {
    return t.is_handle() ? type_prefix(t) : t.to_string();
}

std::string float_str(const Type &t, double v) {
    if (std::isnan(v)) {
        return type_prefix(t) + "nan";
    }
    if (std::isinf(v)) {
        return type_prefix(t) + (v < 0 ? "-inf" : "inf");
    }
    const char *suffix = t.bits() == 32 ? "f" : t.bits() == 16 ? "h" : "";
    // Room for any double in "%f" (up to 309 integer digits, the point and six decimals): a
    // shorter buffer cut 8e61's digits off before its point, and the rest read back as an integer
    // too large for 64 bits (fuzz_lowering, docs/reliability.md finding 16).
    char buf[400];
    // Halide prints six decimals; keep that when it reads back exactly, otherwise print
    // enough digits to round-trip.
    std::snprintf(buf, sizeof(buf), "%f", v);
    double back = std::strtod(buf, nullptr);
    bool exact = t.bits() == 32 ? float(back) == float(v) : back == v;
    if (!exact) {
        std::snprintf(buf, sizeof(buf), "%.17g", v);
        std::string s = buf;
        if (s.find_first_of(".en") == std::string::npos) {
            s += ".0";
        }
        return s + suffix;
    }
    std::string s = buf;
    if (t.bits() != 32 && t.bits() != 16 && t.bits() != 64) {
        return type_prefix(t) + s;
    }
    if (t.is_float() && t.code() == Type::BFloat) {
        return type_prefix(t) + s;
    }
    return s + suffix;
}

class Printer : public IRVisitor {
public:
    explicit Printer(std::ostream &os) : os(os) {}

    void print_module(const Module &m) {
        for (const std::string &n : m.notes) {
            os << "// note: " << n << "\n";
        }
        os << "module name=" << name_str(m.name) << ", target=" << m.target.to_string()
           << ", dialect=" << dialect_name(m.dialect) << "\n";
        for (const BufferConstant &b : m.buffers) {
            os << "buffer " << name_str(b.name) << " = {";
            if (b.opaque) {
                os << "...}\n";
            } else {
                os << b.bytes << "\n}\n";
            }
        }
        if (!m.buffers.empty()) {
            os << "\n";
        }
        for (const Kernel &k : m.kernels) {
            os << "kernel <" << device_api_name(k.device_api) << "> " << name_str(k.name) << " ";
            print_args(k.args);
            in_scope_of(k.args, [&]() {
                print_dims("blocks", k.geometry.blocks);
                print_dims("threads", k.geometry.threads);
                os << " {\n";
                print_stmt(k.body);
            });
            os << "}\n\n";
        }
        for (const LoweredFunc &f : m.functions) {
            os << linkage_name(f.linkage) << " func " << name_str(f.name) << " ";
            print_args(f.args);
            os << " {\n";
            in_scope_of(f.args, [&]() { print_stmt(f.body); });
            os << "}\n\n";
        }
    }

    void print_args(const std::vector<Argument> &args) {
        os << "(";
        for (size_t i = 0; i < args.size(); i++) {
            const Argument &a = args[i];
            os << (i ? ", " : "") << name_str(a.name) << ": ";
            if (a.is_buffer()) {
                os << "buffer<" << (a.type.is_valid() ? type_word(a.type) : "?");
                if (a.dimensions >= 0) {
                    os << ", " << a.dimensions;
                }
                os << ">";
            } else {
                os << (a.type.is_valid() ? type_word(a.type) : "?");
            }
        }
        os << ")";
    }

    /** ` blocks(x: LOOP, ... < EXTENT, y: ...)`: a kernel's launch dimensions of one kind. */
    void print_dims(const char *kind, const std::vector<KernelGeometry::Dim> &dims) {
        if (dims.empty()) {
            return;
        }
        os << " " << kind << "(";
        for (size_t d = 0; d < dims.size(); d++) {
            os << (d ? ", " : "") << "xyz"[d] << ": ";
            for (size_t i = 0; i < dims[d].loops.size(); i++) {
                os << (i ? ", " : "") << name_str(dims[d].loops[i]);
            }
            os << " < ";
            print_expr(dims[d].extent, false);
        }
        os << ")";
    }

    /** Prints a function or kernel body, or a kernel's launch extents, with the typed
     * arguments in scope (the parser puts them there), so that their bare names need no
     * prefix. */
    template <typename Print>
    void in_scope_of(const std::vector<Argument> &args, Print print) {
        std::vector<std::string> pushed;
        for (const Argument &a : args) {
            // Buffer descriptors keep Halide's spelling, `(halide_buffer_t *)X.buffer`.
            if (!a.is_buffer() && a.type.is_valid()) {
                pushed.push_back(a.name);
                push(var_scope, a.name, a.type);
            }
        }
        print();
        for (const std::string &n : pushed) {
            pop(var_scope, n);
        }
    }

    void print_stmt(const Stmt &s) {
        if (s.defined()) {
            s.accept(this);
        }
    }

    void print_expr(const Expr &e, bool parens = true) {
        bool old = implicit_parens;
        implicit_parens = !parens;
        e.accept(this);
        implicit_parens = old;
    }
    void print_no_parens(const Expr &e) { print_expr(e, false); }

private:
    std::ostream &os;
    int indent = 0;
    bool implicit_parens = false;
    // What the parser would infer for a bare name: variable and allocation scopes.
    std::map<std::string, std::vector<Type>> var_scope, alloc_scope;

    void push(std::map<std::string, std::vector<Type>> &s, const std::string &n, const Type &t) {
        s[n].push_back(t);
    }
    void pop(std::map<std::string, std::vector<Type>> &s, const std::string &n) {
        auto it = s.find(n);
        it->second.pop_back();
        if (it->second.empty()) {
            s.erase(it);
        }
    }
    const Type *lookup(const std::map<std::string, std::vector<Type>> &s,
                       const std::string &n) const {
        auto it = s.find(n);
        return it == s.end() ? nullptr : &it->second.back();
    }

    void do_indent() {
        for (int i = 0; i < indent; i++) {
            os << ' ';
        }
    }
    void open() {
        if (!implicit_parens) {
            os << "(";
        }
    }
    void close() {
        if (!implicit_parens) {
            os << ")";
        }
    }
    void print_list(const std::vector<Expr> &es) {
        for (size_t i = 0; i < es.size(); i++) {
            if (i) {
                os << ", ";
            }
            print_no_parens(es[i]);
        }
    }

    template <typename T>
    void binary(const T *op, const char *sym) {
        bool old = implicit_parens;
        open();
        implicit_parens = false;
        op->a.accept(this);
        os << sym;
        op->b.accept(this);
        implicit_parens = old;
        close();
    }

    void visit(const IntImm *op) override {
        if (op->type != Int(32)) {
            os << type_prefix(op->type);
        }
        os << op->value;
    }
    void visit(const UIntImm *op) override { os << type_prefix(op->type) << op->value; }
    void visit(const FloatImm *op) override { os << float_str(op->type, op->value); }
    void visit(const StringImm *op) override { os << quote(op->value); }
    void visit(const Cast *op) override {
        if (op->type.is_handle()) {
            os << type_prefix(op->type) << "(";
        } else {
            os << op->type.to_string() << "(";
        }
        print_expr(op->value);
        os << ")";
    }
    void visit(const Reinterpret *op) override {
        if (op->type != Int(32)) {
            os << type_prefix(op->type);
        }
        os << "reinterpret(";
        print_no_parens(op->value);
        os << ")";
    }
    void visit(const Variable *op) override {
        const Type *known = lookup(var_scope, op->name);
        bool bare = known ? *known == op->type : op->type == Int(32);
        if (!bare) {
            os << type_prefix(op->type) << prefixed_ref_name(op->type, op->name);
        } else {
            os << ref_name(op->name);
        }
    }
    void visit(const Add *op) override { binary(op, " + "); }
    void visit(const Sub *op) override { binary(op, " - "); }
    void visit(const Mul *op) override { binary(op, "*"); }
    void visit(const Div *op) override { binary(op, "/"); }
    void visit(const Mod *op) override { binary(op, " % "); }
    void visit(const Min *op) override {
        os << "min(";
        print_list({op->a, op->b});
        os << ")";
    }
    void visit(const Max *op) override {
        os << "max(";
        print_list({op->a, op->b});
        os << ")";
    }
    void visit(const EQ *op) override { binary(op, " == "); }
    void visit(const NE *op) override { binary(op, " != "); }
    void visit(const LT *op) override { binary(op, " < "); }
    void visit(const LE *op) override { binary(op, " <= "); }
    void visit(const GT *op) override { binary(op, " > "); }
    void visit(const GE *op) override { binary(op, " >= "); }
    void visit(const And *op) override { binary(op, " && "); }
    void visit(const Or *op) override { binary(op, " || "); }
    void visit(const Not *op) override {
        os << "!";
        print_expr(op->a);
    }
    void visit(const Select *op) override {
        os << "select(";
        print_list({op->condition, op->true_value, op->false_value});
        os << ")";
    }
    void visit(const Load *op) override {
        if (op->predicate.defined()) {
            os << "(";
        }
        const Type *alloc = lookup(alloc_scope, op->name);
        if (!alloc || *alloc != op->type.element_of()) {
            os << type_prefix(op->type) << prefixed_ref_name(op->type, op->name);
        } else {
            os << ref_name(op->name);
        }
        os << "[";
        print_no_parens(op->index);
        if (op->alignment.modulus > 1) {
            os << " aligned(" << op->alignment.modulus << ", " << op->alignment.remainder << ")";
        }
        os << "]";
        if (op->predicate.defined()) {
            os << " if ";
            print_expr(op->predicate);
            os << ")";
        }
    }
    void visit(const Ramp *op) override {
        os << "ramp(";
        print_list({op->base, op->stride});
        os << ", " << op->lanes << ")";
    }
    void visit(const Broadcast *op) override {
        os << "x" << op->lanes << "(";
        print_no_parens(op->value);
        os << ")";
    }
    void visit(const Let *op) override {
        bool old = implicit_parens;
        open();
        os << "let " << name_str(op->name) << " = ";
        print_expr(op->value);
        os << " in ";
        push(var_scope, op->name, op->value.type());
        print_expr(op->body);
        pop(var_scope, op->name);
        implicit_parens = old;
        close();
    }
    void visit(const Call *op) override {
        const bool prefixed = op->type != Int(32);
        if (prefixed) {
            os << type_prefix(op->type);
        }
        // A call named like a built-in form would read back as that form: quote its name.
        os << (is_builtin_form(op->name) ? quoted_name(op->name)
               : prefixed                ? prefixed_ref_name(op->type, op->name)
                                         : ref_name(op->name));
        if (op->call_type != Call::default_call_type(op->name)) {
            os << "@" << call_type_name(op->call_type);
        }
        os << "(";
        print_list(op->args);
        os << ")";
    }
    void visit(const Shuffle *op) override {
        if (op->is_interleave()) {
            os << "interleave_vectors(";
            print_list(op->vectors);
        } else if (op->is_concat()) {
            os << "concat_vectors(";
            print_list(op->vectors);
        } else if (op->is_extract_element()) {
            os << "extract_element(";
            print_list(op->vectors);
            os << ", " << op->indices[0];
        } else if (op->is_slice()) {
            os << "slice_vectors(";
            print_list(op->vectors);
            os << ", " << op->indices[0] << ", " << (op->indices[1] - op->indices[0]) << ", "
               << op->indices.size();
        } else {
            os << "shuffle(";
            print_list(op->vectors);
            os << ", [";
            for (size_t i = 0; i < op->indices.size(); i++) {
                os << (i ? ", " : "") << op->indices[i];
            }
            os << "]";
        }
        os << ")";
    }

    void visit(const LetStmt *op) override {
        do_indent();
        os << "let " << name_str(op->name) << " = ";
        print_no_parens(op->value);
        os << "\n";
        push(var_scope, op->name, op->value.type());
        print_stmt(op->body);
        pop(var_scope, op->name);
    }
    void visit(const AssertStmt *op) override {
        do_indent();
        os << "assert(";
        print_list({op->condition, op->message});
        os << ")\n";
    }
    void visit(const ProducerConsumer *op) override {
        do_indent();
        os << (op->is_producer ? "produce " : "consume ") << name_str(op->name) << " {\n";
        indent++;
        print_stmt(op->body);
        indent--;
        do_indent();
        os << "}\n";
    }
    void visit(const Atomic *op) override {
        do_indent();
        // As the parser reads them back (SyntaxParser's parse_atomic): Halide 14's form where
        // it says everything (a mutex named after its producer), Halide 21's otherwise.
        os << "atomic ";
        std::string named_producer;
        bool h14_mutex = atomic_mutex_producer(op->mutex_name, &named_producer) &&
                         named_producer == op->producer_name;
        if (h14_mutex) {
            os << "(" << name_str(op->mutex_name) << ") ";
        } else if (!op->mutex_name.empty()) {
            os << "(" << name_str(op->producer_name) << ", " << name_str(op->mutex_name) << ") ";
        } else if (!op->producer_name.empty()) {
            os << "(" << name_str(op->producer_name) << ") ";
        }
        os << "{\n";
        indent++;
        print_stmt(op->body);
        indent--;
        do_indent();
        os << "}\n";
    }
    void visit(const Fork *op) override {
        // Halide's form: a chain prints flat, every branch a braced block, the next `{` on the
        // line of the previous `}` (SyntaxParser's parse_fork).
        do_indent();
        os << "fork ";
        std::vector<Stmt> branches = fork_branches(op);
        for (size_t i = 0; i < branches.size(); i++) {
            os << (i ? " {\n" : "{\n");
            indent++;
            print_stmt(branches[i]);
            indent--;
            do_indent();
            os << "}";
        }
        os << "\n";
    }
    void visit(const Acquire *op) override {
        do_indent();
        os << "acquire (";
        print_list({op->semaphore, op->count});
        os << ") {\n";
        indent++;
        print_stmt(op->body);
        indent--;
        do_indent();
        os << "}\n";
    }
    void visit(const For *op) override {
        do_indent();
        os << for_type_name(op->for_type);
        if (op->device_api != DeviceAPI::None) {
            os << "<" << device_api_name(op->device_api) << ">";
        }
        os << " (" << name_str(op->name) << ", ";
        print_no_parens(op->min);
        os << ", ";
        print_no_parens(op->extent);
        os << ") {\n";
        indent++;
        push(var_scope, op->name, op->min.type());
        print_stmt(op->body);
        pop(var_scope, op->name);
        indent--;
        do_indent();
        os << "}\n";
    }
    void visit(const Store *op) override {
        do_indent();
        if (op->predicate.defined()) {
            os << "predicate (";
            print_no_parens(op->predicate);
            os << ")\n";
            indent++;
            do_indent();
        }
        os << ref_name(op->name) << "[";
        print_no_parens(op->index);
        if (op->alignment.modulus > 1) {
            os << " aligned(" << op->alignment.modulus << ", " << op->alignment.remainder << ")";
        }
        os << "] = ";
        print_no_parens(op->value);
        os << "\n";
        if (op->predicate.defined()) {
            indent--;
        }
    }
    void visit(const Allocate *op) override {
        do_indent();
        os << "allocate " << name_str(op->name) << "[" << type_word(op->type);
        for (const Expr &e : op->extents) {
            os << " * ";
            print_expr(e);
        }
        os << "]";
        if (op->memory_type != MemoryType::Auto) {
            os << " in " << memory_type_name(op->memory_type);
        }
        if (op->condition.defined()) {
            os << " if ";
            print_expr(op->condition);
        }
        if (op->new_expr.defined()) {
            os << "\n";
            do_indent();
            os << " custom_new { ";
            print_no_parens(op->new_expr);
            os << " }";
        }
        if (!op->free_function.empty()) {
            os << "\n";
            do_indent();
            os << " custom_delete { " << name_str(op->free_function) << "(" << name_str(op->name)
               << "); }";
        }
        os << "\n";
        push(alloc_scope, op->name, op->type);
        push(var_scope, op->name, Handle());
        print_stmt(op->body);
        pop(var_scope, op->name);
        pop(alloc_scope, op->name);
    }
    void visit(const Free *op) override {
        do_indent();
        os << "free " << name_str(op->name) << "\n";
    }
    void visit(const Block *op) override {
        Stmt s = op;
        while (const Block *b = s.as<Block>()) {
            if (b->first.as<LetStmt>() || b->first.as<Allocate>()) {
                // A let or allocation scopes over the rest of its block in the text; when the
                // IR ends its scope early, say so with braces.
                do_indent();
                os << "{\n";
                indent++;
                print_stmt(b->first);
                indent--;
                do_indent();
                os << "}\n";
            } else {
                print_stmt(b->first);
            }
            s = b->rest;
        }
        print_stmt(s);
    }
    void visit(const IfThenElse *op) override {
        do_indent();
        while (true) {
            os << "if (";
            print_no_parens(op->condition);
            os << ") {\n";
            indent++;
            print_stmt(op->then_case);
            indent--;
            if (!op->else_case.defined()) {
                break;
            }
            if (const IfThenElse *nested = op->else_case.as<IfThenElse>()) {
                do_indent();
                os << "} else ";
                op = nested;
            } else {
                do_indent();
                os << "} else {\n";
                indent++;
                print_stmt(op->else_case);
                indent--;
                break;
            }
        }
        do_indent();
        os << "}\n";
    }
    void visit(const Evaluate *op) override {
        do_indent();
        print_no_parens(op->value);
        os << "\n";
    }
};

}  // namespace

std::string to_string(const Expr &e) {
    std::ostringstream os;
    os << e;
    return os.str();
}

std::string to_string(const Stmt &s) {
    std::ostringstream os;
    os << s;
    return os.str();
}

std::string to_string(const Module &m) {
    std::ostringstream os;
    os << m;
    return os.str();
}

std::ostream &operator<<(std::ostream &os, const Expr &e) {
    if (!e.defined()) {
        return os << "(undefined)";
    }
    Printer p(os);
    p.print_no_parens(e);
    return os;
}

std::ostream &operator<<(std::ostream &os, const Stmt &s) {
    Printer p(os);
    p.print_stmt(s);
    return os;
}

static std::ostream &print_module_impl(std::ostream &os, const Module &m) {
    Printer p(os);
    p.print_module(m);
    return os;
}

std::ostream &operator<<(std::ostream &os, const Module &m) {
    std::string text = with_large_stack([&]() {
        std::ostringstream o;
        print_module_impl(o, m);
        return o.str();
    });
    return os << text;
}

}  // namespace tally
