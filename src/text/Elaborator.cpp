// The elaborator: parse tree (ParseTree.h) -> typed Module. This is where Halide's implicit
// types are inferred.
//
// Halide's printer leaves most types implicit: a variable is printed bare when it is bound in
// scope or is int32, a call bare when it returns int32, and a load never shows its type
// (docs/ir-syntax.md states the rules). Types flow bottom-up where they are known (literals,
// prefixes, scopes) and top-down as hints where they are not (the other operand of a binary
// operator, the buffer a value is stored to, a runtime function's parameter, from
// ir/RuntimeCalls.h).
//
// The element types of buffers that are never allocated in view (pipeline inputs and outputs)
// are learned first, in rounds over the whole module: from loads typed by hints, from stores,
// from allocations in other functions, and from Halide's `X.type == (uint32)code` checks (those
// only where usage says nothing). A round builds no IR and reports only errors it finds on the
// way. Learning only adds (a name's first learned type stays), so a round that learns nothing
// is a fixpoint; every other round learns at least one of the finitely many names the module
// loads, stores, allocates or checks, so the rounds are bounded by their number plus one.
// Reaching that bound would mean the argument broke: it is a CompileError at the last thing
// learned, never a silent stop. Then the final pass builds the IR, reporting type errors with
// their location, and infers the arguments that the text leaves untyped (Halide's
// `func f (input, out)`) from the body: `X.buffer` referenced means X is a buffer argument. A
// kernel header without `blocks(...)` / `threads(...)` gets the geometry offload-gpu-loops would
// record (derive_kernel_geometry). Every statement built carries its source location.
//
// Assumes: a tree from the syntax parser (SyntaxParser.h), with its arities and unique names.
// Establishes: every Expr has a type; scalar bool conditions; integer indices and loop bounds;
// operands whose types and lanes agree. A bare statement becomes a module named after its last
// outermost producer, for target `host`. The verifier (Verifier.h) checks the rest.

#include "text/Elaborator.h"

#include <algorithm>

#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/FreeVariables.h"
#include "ir/KernelGeometry.h"
#include "ir/RuntimeCalls.h"
#include "ir/Scope.h"
#include "tally/Error.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** Halide's task closures take their parent task, a `void *`, as `__task_parent` (uniqued as
 * `__task_parent$N`); a closure that never uses it gives no type for it. */
bool is_task_parent(const std::string &name) {
    const std::string base = "__task_parent";
    return name.compare(0, base.size(), base) == 0 &&
           (name.size() == base.size() || name[base.size()] == '$');
}

/** Marks a statement the elaborator has just made with where the text wrote it (a scope's
 * statements keep their own). */
Stmt located(Stmt s, const Loc &loc) {
    if (s.defined() && !s.get()->loc.known()) {
        s.get()->loc = SourceLoc{loc.line, loc.col};
    }
    return s;
}

/** Adds to `names` every name whose element type learning could settle in `e`: those it
 * loads, and X for each `X.buffer` (a type check's subject). */
void collect_learnable(const PExpr &e, std::set<std::string> *names) {
    if (e.kind == PExpr::LoadE) {
        names->insert(e.name);
    } else if (e.kind == PExpr::Var && !buffer_name_of(e.name).empty()) {
        names->insert(buffer_name_of(e.name));
    }
    for (const PExpr &k : e.kids) {
        collect_learnable(k, names);
    }
}

/** The same for a statement: what it loads, stores, allocates or checks. */
void collect_learnable(const PStmt &s, std::set<std::string> *names) {
    if (s.kind == PStmt::StoreS || s.kind == PStmt::AllocateS) {
        names->insert(s.name);
    }
    for (const PExpr &e : s.exprs) {
        collect_learnable(e, names);
    }
    if (s.has_condition) {
        collect_learnable(s.condition, names);
    }
    if (s.has_new_expr) {
        collect_learnable(s.new_expr, names);
    }
    for (const std::vector<PStmt> *list : {&s.body, &s.else_body}) {
        for (const PStmt &k : *list) {
            collect_learnable(k, names);
        }
    }
}

/** The most learning rounds `pm` can need: one per learnable name, plus the round that finds
 * nothing new. */
int learning_round_bound(const PModule &pm) {
    std::set<std::string> names;
    for (const PFunc &f : pm.funcs) {
        for (const PStmt &s : f.body) {
            collect_learnable(s, &names);
        }
    }
    return int(names.size()) + 1;
}

// One elaboration: owns what the learning rounds learned and the scopes of the function being
// typed. Every elab_* function both learns (when `learning`) and builds (when not): one walk of
// the tree serves both, so a round learns from exactly the expressions the final pass types.
class Elaborator {
public:
    Elaborator(const Lexer &lex, const ElaborateOptions &opts) : lex(lex), opts(opts) {}

    Module run(const PModule &pm) {
        seed_declared_types(pm);
        learn_buffer_types(pm);
        return build_module(pm);
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
    const ElaborateOptions &opts;
    bool learning = false;
    // Element types of buffers learned across the module (or declared by typed headers), and
    // those read off Halide's `X.type == (uint32)code` checks, where they were read (used only
    // when nothing better is known).
    struct TypeCheck {
        Type type;
        Loc loc;
    };
    std::map<std::string, Type> learned;
    std::map<std::string, TypeCheck> type_codes;
    // The first name the current learning round learned, if any, and where.
    bool learned_in_round = false;
    std::string round_name;
    Loc round_loc;
    std::map<std::string, std::string> type_lets;  // let name -> buffer whose type it reads
    // Typed scopes: the type of each name's innermost binding.
    Scope<Type> var_scope, alloc_scope;
    bool have_unresolved = false;
    Loc unresolved_loc;
    std::string unresolved_name;

    // --- learning buffer types ------------------------------------------------------------

    /** Typed buffer arguments declare their element types. */
    void seed_declared_types(const PModule &pm) {
        for (const PFunc &f : pm.funcs) {
            for (const PArg &a : f.args) {
                if (a.typed && a.arg.is_buffer() && a.arg.type.is_valid()) {
                    learned.emplace(a.name, a.arg.type);
                }
            }
        }
    }

    /** Records the element type of buffer `name` if none is known yet (`loc` shows why). */
    void learn(const std::string &name, const Type &t, const Loc &loc) {
        if (learned.emplace(name, t).second && !learned_in_round) {
            learned_in_round = true;
            round_name = name;
            round_loc = loc;
        }
    }

    /** Learning rounds until one learns nothing new (see the design comment for the bound). */
    void learn_buffer_types(const PModule &pm) {
        int limit = opts.max_learning_rounds ? *opts.max_learning_rounds : learning_round_bound(pm);
        learning = true;
        for (int round = 1;; round++) {
            learned_in_round = false;
            for (const PFunc &f : pm.funcs) {
                elab_function_body(f);
            }
            // Halide's type checks fill in what usage did not say.
            for (const auto &kv : type_codes) {
                learn(kv.first, kv.second.type, kv.second.loc);
            }
            if (!learned_in_round) {
                break;
            }
            if (round >= limit) {
                error(round_loc, "buffer element types did not settle in " + std::to_string(limit) +
                                     " learning rounds: round " + std::to_string(round) +
                                     " still learned the type of '" + round_name + "' here");
            }
        }
        learning = false;
    }

    /** The final pass: the typed functions and kernels of the module. */
    Module build_module(const PModule &pm) {
        Module m;
        m.name = pm.name;
        m.target = pm.target;
        m.dialect = pm.dialect;
        m.buffers = pm.buffers;
        for (const PFunc &f : pm.funcs) {
            Stmt body = elab_function_body(f);
            std::vector<Argument> args = infer_args(f, body, pm.bare);
            if (f.is_kernel) {
                Kernel k;
                k.name = f.name;
                k.device_api = f.device_api;
                k.geometry = elab_geometry(f, body);
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

    // --- diagnostics and scopes -----------------------------------------------------------

    [[noreturn]] void error(const Loc &loc, const std::string &msg) const { lex.error(loc, msg); }

    [[noreturn]] void unresolved_error() const {
        error(unresolved_loc, "cannot infer the element type of buffer '" + unresolved_name +
                                  "'; write it as a prefix, e.g. (uint8)" + unresolved_name +
                                  "[...], or declare the argument as `" + unresolved_name +
                                  ": buffer<uint8>`");
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

    /** The element type of buffer `name` if known: from an enclosing allocation, or learned. */
    Type known_elem_type(const std::string &name) const {
        if (const Type *a = alloc_scope.find(name)) {
            return *a;
        }
        auto it = learned.find(name);
        return it == learned.end() ? Type() : it->second;
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

    // --- expressions ----------------------------------------------------------------------

    /** Types `e`, with `hint` the type its context expects (or null). Returns an undefined Expr
     * when a load's element type is not known yet (see unresolved()). */
    Expr elab(const PExpr &e, const Type *hint) {
        switch (e.kind) {
        case PExpr::IntLit:
            return elab_int(e);
        case PExpr::FloatLit:
            return elab_float(e);
        case PExpr::SpecialFloat:
            return elab_special_float(e);
        case PExpr::StrLit:
            return StringImm::make(e.name);
        case PExpr::Var:
            return elab_var(e);
        case PExpr::Binary:
            return elab_binary(e, hint);
        case PExpr::NotE:
            return elab_not(e);
        case PExpr::Neg:
            return elab_neg(e, hint);
        case PExpr::CastE:
            return elab_cast(e);
        case PExpr::ReinterpretE:
            return elab_reinterpret(e);
        case PExpr::LetE:
            return elab_let(e, hint);
        case PExpr::SelectE:
            return elab_select(e, hint);
        case PExpr::LoadE:
            return elab_load(e, hint);
        case PExpr::RampE:
            return elab_ramp(e, hint);
        case PExpr::BroadcastE:
            return elab_broadcast(e, hint);
        case PExpr::ShuffleE:
            return elab_shuffle(e, hint);
        case PExpr::CallE:
            return elab_call(e);
        }
        internal_error << "unhandled expression kind";
    }

    Expr elab_float(const PExpr &e) {
        Type t = e.prefix.is_valid()     ? e.prefix
                 : e.float_suffix == 'f' ? Float(32)
                 : e.float_suffix == 'h' ? Float(16)
                                         : Float(64);
        if (!t.is_float() || t.is_vector()) {
            error(e.loc, "a floating-point literal cannot have type " + t.to_string());
        }
        return FloatImm::make(t, e.negative ? -e.float_value : e.float_value);
    }

    Expr elab_special_float(const PExpr &e) {
        if (!e.prefix.is_float() || e.prefix.is_vector()) {
            error(e.loc, "'" + e.name + "' needs a float type prefix, e.g. (float32)inf");
        }
        double v = e.name == "nan"   ? std::numeric_limits<double>::quiet_NaN()
                   : e.name == "inf" ? std::numeric_limits<double>::infinity()
                                     : -std::numeric_limits<double>::infinity();
        return FloatImm::make(e.prefix, v);
    }

    /** A name: its prefix, else its type in scope, else what Halide prints bare. */
    Expr elab_var(const PExpr &e) {
        if (e.prefix.is_valid()) {
            return Variable::make(e.prefix, e.name);
        }
        if (const Type *t = var_scope.find(e.name)) {
            if (!t->is_valid()) {
                return unresolved(e);
            }
            return Variable::make(*t, e.name);
        }
        if (e.name == "__user_context" || is_task_parent(e.name)) {
            return Variable::make(Handle(), e.name);
        }
        // A free `X.buffer` is X's buffer descriptor (infer_args makes X a buffer argument),
        // typed as a declared buffer argument's is, so that the printed module reads back
        // the same.
        if (!buffer_name_of(e.name).empty()) {
            return Variable::make(buffer_ptr_type(), e.name);
        }
        return Variable::make(Int(32), e.name);
    }

    Expr elab_not(const PExpr &e) {
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

    Expr elab_neg(const PExpr &e, const Type *hint) {
        Expr a = elab(e.kids[0], hint);
        if (!a.defined()) {
            return a;
        }
        if (a.type().is_handle() || a.type().is_bool()) {
            error(e.loc, "cannot negate a value of type " + a.type().to_string());
        }
        return Sub::make(make_zero(a.type()), a);
    }

    Expr elab_cast(const PExpr &e) {
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

    Expr elab_reinterpret(const PExpr &e) {
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

    Expr elab_let(const PExpr &e, const Type *hint) {
        Expr v = elab(e.kids[0], nullptr);
        var_scope.push(e.name, v.defined() ? v.type() : Type());
        Expr b = elab(e.kids[1], hint);
        var_scope.pop(e.name);
        if (!v.defined() || !b.defined()) {
            return Expr();
        }
        return Let::make(e.name, v, b);
    }

    Expr elab_select(const PExpr &e, const Type *hint) {
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

    /** `what` at `loc` makes a vector of `lanes` lanes: an error past what a type holds. */
    void check_lanes_fit(const Loc &loc, int64_t lanes, const std::string &what) {
        if (lanes > Type::max_lanes) {
            error(loc, what + " makes " + std::to_string(lanes) + " lanes, more than " +
                           std::to_string(Type::max_lanes));
        }
    }

    Expr elab_ramp(const PExpr &e, const Type *hint) {
        Expr b, s;
        if (!elab_pair(e.kids[0], e.kids[1], hint, &b, &s)) {
            return Expr();
        }
        check_compatible(e, b, s, "ramp");
        check_lanes_fit(e.loc, int64_t(b.type().lanes()) * e.lanes, "ramp");
        return Ramp::make(b, s, e.lanes);
    }

    Expr elab_broadcast(const PExpr &e, const Type *hint) {
        Expr v = elab(e.kids[0], hint);
        if (!v.defined()) {
            return v;
        }
        check_lanes_fit(e.loc, int64_t(v.type().lanes()) * e.lanes, "a broadcast");
        return Broadcast::make(v, e.lanes);
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
            Type elem = known_elem_type(e.name);
            if (!elem.is_valid()) {
                if (!hint || !hint->is_valid()) {
                    return unresolved(e);
                }
                elem = hint->element_of();
                if (learning) {
                    learn(e.name, elem, e.loc);
                }
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
        int64_t total = 0;
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
            check_lanes_fit(e.loc, total, n);
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
                const int64_t lane = int64_t(e.indices[0]) + int64_t(i) * e.indices[1];
                if (lane >= total) {
                    error(e.loc, n + ": lane index " + std::to_string(lane) + " out of range");
                }
                idx.push_back(int(lane));
            }
        } else if (n == "extract_element") {
            idx.push_back(e.indices[0]);
        } else {
            idx = e.indices;
        }
        if (idx.empty()) {
            error(e.loc, n + " selects no lanes");
        }
        check_lanes_fit(e.loc, int64_t(idx.size()), n);
        for (int i : idx) {
            if (i < 0 || i >= total) {
                error(e.loc, n + ": lane index " + std::to_string(i) + " out of range");
            }
        }
        return Shuffle::make(vs, idx);
    }

    /** The type argument `i` of a call of `name` with `num_args` arguments takes, for runtime
     * calls (by the form that takes that many: Halide 14's and Halide 21's profiler calls
     * differ) and destructors. */
    static bool param_hint(const std::string &name, size_t num_args, size_t i, Type *out) {
        if (Call::find_intrinsic(name) == Call::register_destructor && i == 1) {
            *out = Handle();
            return true;
        }
        const RuntimeSymbol *sym = find_runtime_call(name, num_args);
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

    /** Halide's vector reductions: Halide 14's `(T)vector_reduce(OP, v)` and Halide 21's
     * `(T)vector_reduce_op(v)` (OP `Add` is `_add`, `SaturatingAdd` `_saturating_add`, ...),
     * written out by make_vector_reduce. */
    static const std::pair<const char *, VectorReduceOp> *vector_reduce_op(const std::string &s) {
        // Halide 21's suffix or Halide 14's operator name.
        static const std::pair<const char *, VectorReduceOp> ops[] = {
            {"add", VectorReduceOp::Add},
            {"saturating_add", VectorReduceOp::SaturatingAdd},
            {"mul", VectorReduceOp::Mul},
            {"min", VectorReduceOp::Min},
            {"max", VectorReduceOp::Max},
            {"and", VectorReduceOp::And},
            {"or", VectorReduceOp::Or},
            {"Add", VectorReduceOp::Add},
            {"SaturatingAdd", VectorReduceOp::SaturatingAdd},
            {"Mul", VectorReduceOp::Mul},
            {"Min", VectorReduceOp::Min},
            {"Max", VectorReduceOp::Max},
            {"And", VectorReduceOp::And},
            {"Or", VectorReduceOp::Or}};
        for (const auto &o : ops) {
            if (s == o.first) {
                return &o;
            }
        }
        return nullptr;
    }

    Expr elab_vector_reduce(const PExpr &e) {
        VectorReduceOp op;
        const PExpr *value = nullptr;
        if (e.name == "vector_reduce") {
            if (e.kids.size() != 2 || e.kids[0].kind != PExpr::Var) {
                error(e.loc, "vector_reduce takes an operator name and a vector");
            }
            const std::string &opn = e.kids[0].name;
            const auto *o = vector_reduce_op(opn);
            if (!o || !std::isupper(static_cast<unsigned char>(opn[0]))) {
                error(e.kids[0].loc, "unknown vector_reduce operator '" + opn +
                                         "' (Add, SaturatingAdd, Mul, Min, Max, And, Or)");
            }
            op = o->second;
            value = &e.kids[1];
        } else {
            op = vector_reduce_op(e.name.substr(std::strlen("vector_reduce_")))->second;
            if (e.kids.size() != 1) {
                error(e.loc, e.name + " takes one vector");
            }
            value = &e.kids[0];
        }
        if (!e.prefix.is_valid()) {
            error(e.loc, e.name + " needs its result type, `(T)" + e.name + "(...)`");
        }
        Type hint = e.prefix.with_lanes(e.prefix.lanes());
        Expr v = elab(*value, nullptr);
        if (!v.defined()) {
            return Expr();
        }
        int n = v.type().lanes(), m = e.prefix.lanes();
        if (m > n || n % m != 0 || !types_compatible(v.type().element_of(), hint.element_of())) {
            error(e.loc, "vector_reduce of " + v.type().to_string() + " to " +
                             e.prefix.to_string() + ": the lanes must divide evenly and the " +
                             "element types agree");
        }
        return make_vector_reduce(op, v, m);
    }

    Expr elab_call(const PExpr &e) {
        if (e.name == "vector_reduce" ||
            (e.name.compare(0, 14, "vector_reduce_") == 0 && vector_reduce_op(e.name.substr(14)) &&
             std::islower(static_cast<unsigned char>(e.name[14])))) {
            return elab_vector_reduce(e);
        }
        std::vector<Expr> args;
        bool ok = true;
        for (size_t i = 0; i < e.kids.size(); i++) {
            Type h;
            bool has = param_hint(e.name, e.kids.size(), i, &h);
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
                var_scope.push(buffer_var_name(a.name), buffer_ptr_type());
            } else if (a.arg.type.is_valid()) {
                var_scope.push(a.name, a.arg.type);
            }
        }
        return elab_block(f.body);
    }

    /** A kernel's launch geometry: as its header writes it (extents typed in the scope of the
     * arguments, which elab_function_body left open), else derived from the body by the rule
     * offload-gpu-loops uses. The verifier checks a written one against the body. */
    KernelGeometry elab_geometry(const PFunc &f, const Stmt &body) {
        if (!f.has_geometry) {
            try {
                return derive_kernel_geometry(body, "kernel '" + f.name + "'", "the kernel");
            } catch (const CompileError &e) {
                error(e.loc.known() ? Loc{e.loc.line, e.loc.col} : f.loc, e.what());
            }
        }
        KernelGeometry g;
        Type i32 = Int(32);
        for (const PDim &d : f.blocks) {
            g.blocks.push_back({d.loops, require(d.extent, &i32)});
        }
        for (const PDim &d : f.threads) {
            g.threads.push_back({d.loops, require(d.extent, &i32)});
        }
        return g;
    }

    /** One statement of a block, elaborated; a `let` or `allocate` keeps its parts until the
     * rest of its block is built. */
    struct BlockItem {
        const PStmt *p;
        Stmt plain;
        Expr value;  // let value
        std::vector<Expr> extents;
        Expr condition, new_expr;
    };

    /** A block of statements; `let` and `allocate` scope over the rest of the block. Built
     * back to front so that long blocks do not recurse. */
    Stmt elab_block(const std::vector<PStmt> &list) {
        std::vector<BlockItem> items;
        items.reserve(list.size());
        for (const PStmt &p : list) {
            BlockItem it;
            it.p = &p;
            if (p.kind == PStmt::LetS) {
                elab_let_binder(p, &it);
            } else if (p.kind == PStmt::AllocateS) {
                elab_allocate_binder(p, &it);
            } else {
                it.plain = located(elab_stmt(p), p.loc);
            }
            items.push_back(std::move(it));
        }
        for (auto it = list.rbegin(); it != list.rend(); ++it) {
            if (it->kind == PStmt::LetS) {
                var_scope.pop(it->name);
            } else if (it->kind == PStmt::AllocateS) {
                var_scope.pop(it->name);
                alloc_scope.pop(it->name);
            }
        }
        return learning ? Stmt() : nest_block(items);
    }

    /** `let NAME = value`: types the value and binds NAME for the rest of the block. */
    void elab_let_binder(const PStmt &p, BlockItem *it) {
        Expr v = require(p.exprs[0], nullptr);
        var_scope.push(p.name, v.defined() ? v.type() : Type());
        it->value = v;
        if (learning) {
            learn_type_let(p);
        }
    }

    /** `allocate NAME[T * extents...] ...`: types its parts and binds NAME, a buffer of T, for
     * the rest of the block. */
    void elab_allocate_binder(const PStmt &p, BlockItem *it) {
        Type i32 = Int(32);
        for (const PExpr &x : p.exprs) {
            it->extents.push_back(require(x, &i32));
        }
        if (p.has_condition) {
            Type b = Bool();
            it->condition = require(p.condition, &b);
            if (it->condition.defined() &&
                (!it->condition.type().is_bool() || it->condition.type().is_vector())) {
                error(p.condition.loc, "allocation condition must be a scalar bool");
            }
        }
        if (p.has_new_expr) {
            it->new_expr = require(p.new_expr, nullptr);
        }
        alloc_scope.push(p.name, p.type);
        var_scope.push(p.name, Handle());
        if (learning) {
            learn(p.name, p.type, p.loc);
        }
    }

    /** The statement of an elaborated block: each let or allocation wraps what follows it. */
    Stmt nest_block(const std::vector<BlockItem> &items) {
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
                located(rest, p.loc);
            } else {
                rest = rest.defined() ? Block::make(it->plain, rest) : it->plain;
            }
        }
        if (!rest.defined()) {
            // An empty block is the no-op statement.
            rest = Evaluate::make(make_zero(Int(32)));
        }
        return rest;
    }

    void learn_type_let(const PStmt &p) {
        // let X.type = (uint32)_halide_buffer_get_type((halide_buffer_t *)X.buffer)
        const PExpr &v = p.exprs[0];
        if (v.kind == PExpr::CallE && v.name == runtime::_halide_buffer_get_type &&
            v.kids.size() == 1 && v.kids[0].kind == PExpr::Var) {
            const std::string &b = v.kids[0].name;
            if (!buffer_name_of(b).empty()) {
                type_lets[p.name] = buffer_name_of(b);
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
            type_codes.emplace(it->second, TypeCheck{t, c.loc});
        }
    }

    /** A statement that binds nothing (lets and allocations are elab_block's). In a learning
     * round it learns and returns an undefined Stmt. */
    Stmt elab_stmt(const PStmt &p) {
        switch (p.kind) {
        case PStmt::AssertS:
            return elab_assert(p);
        case PStmt::ProduceS:
        case PStmt::ConsumeS: {
            Stmt body = elab_block(p.body);
            return learning ? Stmt()
                            : ProducerConsumer::make(p.name, p.kind == PStmt::ProduceS, body);
        }
        case PStmt::ForS:
            return elab_for(p);
        case PStmt::StoreS:
            return elab_store(p);
        case PStmt::FreeS:
            return learning ? Stmt() : Free::make(p.name);
        case PStmt::IfS:
            return elab_if(p);
        case PStmt::EvalS: {
            Expr v = require(p.exprs[0], nullptr);
            return learning ? Stmt() : Evaluate::make(v);
        }
        case PStmt::ScopeS:
            return elab_block(p.body);
        case PStmt::AtomicS: {
            Stmt body = elab_block(p.body);
            return learning ? Stmt() : Atomic::make(p.producer, p.name, body);
        }
        case PStmt::ForkS: {
            std::vector<Stmt> branches;
            for (const std::vector<PStmt> &b : p.branches) {
                branches.push_back(elab_block(b));
            }
            return learning ? Stmt() : Fork::make(branches);
        }
        case PStmt::AcquireS:
            return elab_acquire(p);
        default:
            internal_error << "binder statement in elab_stmt";
        }
    }

    Stmt elab_acquire(const PStmt &p) {
        Type h = Handle("halide_semaphore_t"), i32 = Int(32);
        Expr sem = require(p.exprs[0], &h);
        Expr count = require(p.exprs[1], &i32);
        Stmt body = elab_block(p.body);
        if (learning) {
            return Stmt();
        }
        if (!sem.type().is_handle()) {
            error(p.exprs[0].loc, "an acquire's semaphore must be a handle (a halide_semaphore_t "
                                  "*), not " +
                                      sem.type().to_string());
        }
        if (count.type() != i32) {
            error(p.exprs[1].loc,
                  "an acquire's count must be int32, not " + count.type().to_string());
        }
        return Acquire::make(sem, count, body);
    }

    Stmt elab_assert(const PStmt &p) {
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

    Stmt elab_for(const PStmt &p) {
        Type i32 = Int(32);
        Expr mn = require(p.exprs[0], &i32), ex = require(p.exprs[1], &i32);
        Type vt = mn.defined() ? mn.type() : Int(32);
        if (!learning) {
            if (!(mn.type().is_int() || mn.type().is_uint()) || mn.type().is_vector()) {
                error(p.exprs[0].loc, "loop bounds must be scalar integers");
            }
            if (ex.type() != mn.type()) {
                error(p.exprs[1].loc, "loop extent type " + ex.type().to_string() +
                                          " differs from its minimum's " + mn.type().to_string());
            }
        }
        var_scope.push(p.name, vt);
        Stmt body = elab_block(p.body);
        var_scope.pop(p.name);
        return learning ? Stmt() : For::make(p.name, mn, ex, p.for_type, p.device_api, body);
    }

    Stmt elab_store(const PStmt &p) {
        Type i32 = Int(32);
        Expr index = require(p.exprs[0], &i32);
        Type elem = known_elem_type(p.name);
        Expr value = require(p.exprs[1], elem.is_valid() ? &elem : nullptr);
        Expr pred;
        if (p.has_predicate) {
            Type b = Bool();
            pred = require(p.exprs[2], &b);
        }
        if (learning) {
            if (value.defined() && !alloc_scope.find(p.name)) {
                learn(p.name, value.type().element_of(), p.loc);
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

    Stmt elab_if(const PStmt &p) {
        Type b = Bool();
        Expr c = require(p.exprs[0], &b);
        Stmt t = elab_block(p.body);
        Stmt f;
        if (p.has_else) {
            f = elab_block(p.else_body);
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

    // --- arguments ------------------------------------------------------------------------

    /** Collects names used free in a function body, in order of first use, with the type of
     * their first use, and the highest dimension queried of each `X.buffer`. */
    class FreeNames : public FindFreeVariables {
    public:
        std::map<std::string, int> dims;

    private:
        using FindFreeVariables::visit;
        void visit(const Call *op) override {
            FindFreeVariables::visit(op);
            if ((op->name == runtime::_halide_buffer_get_min ||
                 op->name == runtime::_halide_buffer_get_extent ||
                 op->name == runtime::_halide_buffer_get_stride) &&
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

    Argument buffer_arg(const std::string &name, const FreeNames &fn) {
        Argument a;
        a.name = name;
        a.kind = Argument::Buffer;
        auto it = learned.find(name);
        if (it != learned.end()) {
            a.type = it->second;
        }
        auto d = fn.dims.find(buffer_var_name(name));
        a.dimensions = d == fn.dims.end() ? -1 : d->second;
        return a;
    }

    std::vector<Argument> infer_args(const PFunc &f, const Stmt &body, bool bare) {
        FreeNames fn;
        body.accept(&fn);
        std::vector<Argument> args;
        if (bare) {
            // Every free name is an argument: `X.buffer` makes X a buffer.
            for (const FreeVariable &fv : fn.variables()) {
                const std::string &n = fv.name;
                if (n == "__user_context" || n.compare(0, 2, "::") == 0) {
                    continue;
                }
                if (!buffer_name_of(n).empty()) {
                    args.push_back(buffer_arg(buffer_name_of(n), fn));
                } else {
                    Argument a;
                    a.name = n;
                    a.type = fv.type;
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
            if (fn.is_free(buffer_var_name(pa.name))) {
                args.push_back(buffer_arg(pa.name, fn));
                continue;
            }
            Argument a;
            a.name = pa.name;
            a.type = pa.name == "__user_context" || is_task_parent(pa.name) ? Handle() : Int(32);
            for (const FreeVariable &fv : fn.variables()) {
                if (fv.name == pa.name) {
                    a.type = fv.type;
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

Module elaborate_module(const PModule &pm, const Lexer &lex, const ElaborateOptions &opts) {
    return Elaborator(lex, opts).run(pm);
}

Expr elaborate_expr(const PExpr &e, const Lexer &lex) {
    return Elaborator(lex, ElaborateOptions()).elab_standalone(e);
}

}  // namespace tally
