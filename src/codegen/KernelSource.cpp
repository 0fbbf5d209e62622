// The C-family kernel source generator (KernelSource.h), shared by the GLSL (Vulkan) and OpenCL C
// back ends.
//
// Loops: a gpu_block loop binds its variable to min + the work group's id in its dimension, a
// gpu_thread loop to min + the work item's id in the group, where the dimension is the loop's
// in the kernel's geometry (Kernel::geometry, decided by offload-gpu-loops); each is guarded by
// `id < extent`, because sibling loops share the launch size (the largest extent). Every other
// loop kind runs serially. Code between the block and thread loops runs on every work item of
// the group, as it does in Halide's own GPU back ends. Allocations in GPUShared memory, or outside
// every gpu_thread loop of a kernel that has thread loops, are work-group shared arrays; others
// are per-item arrays. Both need a constant size.
//
// Values: every expression is generated as one string per lane, so vector IR (ramps, broadcasts,
// gathers, shuffles) is scalarized; a string used more than once (a broadcast value, a ramp base,
// a float modulo's operands) is first bound to a temporary, as is every Let value. Types: int32,
// uint32, float32 and bool (uint1) only; anything else is a CompileError naming the type.
// Arithmetic follows IR.h: integer ops wrap, Div/Mod on integers are Euclidean and x/0 == x%0 ==
// 0 (helper functions, the same case analysis as CodeGen_LLVM.cpp), float Mod is a - b*floor(a/b).
// Nodes that have no meaning in a kernel (asserts, strings, handles, extern calls other than
// Halide's math functions) are CompileErrors naming the node.

#include "codegen/KernelSource.h"

#include "codegen/Analysis.h"
#include "ir/IntrinsicLowering.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tally/Error.h"
#include "tally/IRPrinter.h"

namespace tally {

std::string kernel_source_name(const std::string &n) {
    std::string out;
    for (char c : n) {
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (alnum) {
            out.push_back(c);
        } else if (!out.empty() && out.back() != '_') {
            out.push_back('_');
        }
    }
    while (!out.empty() && out.back() == '_') {
        out.pop_back();
    }
    return out.empty() ? "x" : out;
}

namespace {

/** A string that is a single token (identifier or unsigned literal), safe to repeat. */
bool is_token(const std::string &s) {
    for (char c : s) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.';
        if (!ok) {
            return false;
        }
    }
    return !s.empty();
}

}  // namespace

const char *const KernelSourceGen::div_mod_helpers =
    R"(// Euclidean division and modulo (IR.h): x / 0 == 0, x % 0 == 0, remainders never negative.
int tally_div_i32(int a, int b) {
    if (b == 0) {
        return 0;
    }
    if (b == -1) {
        return -a;
    }
    int q = a / b;
    if (a - q * b < 0) {
        q = b > 0 ? q - 1 : q + 1;
    }
    return q;
}
int tally_mod_i32(int a, int b) {
    if (b == 0 || b == -1) {
        return 0;
    }
    int r = a - (a / b) * b;
    if (r < 0) {
        r = b > 0 ? r + b : r - b;
    }
    return r;
}
uint tally_div_u32(uint a, uint b) {
    return b == 0u ? 0u : a / b;
}
uint tally_mod_u32(uint a, uint b) {
    return b == 0u ? 0u : a % b;
}
)";

const char *const KernelSourceGen::div_mod_helpers_64 =
    R"(long tally_div_i64(long a, long b) {
    if (b == 0) {
        return 0;
    }
    if (b == -1) {
        return -a;
    }
    long q = a / b;
    if (a - q * b < 0) {
        q = b > 0 ? q - 1 : q + 1;
    }
    return q;
}
long tally_mod_i64(long a, long b) {
    if (b == 0 || b == -1) {
        return 0;
    }
    long r = a - (a / b) * b;
    if (r < 0) {
        r = b > 0 ? r + b : r - b;
    }
    return r;
}
ulong tally_div_u64(ulong a, ulong b) {
    return b == 0 ? 0 : a / b;
}
ulong tally_mod_u64(ulong a, ulong b) {
    return b == 0 ? 0 : a % b;
}
)";

void KernelSourceGen::bind_arguments() {
    UsedNames use = used_names(kernel.body);
    bool scalars_seen = false;
    for (const Argument &a : kernel.args) {
        if (a.is_buffer()) {
            user_assert(!scalars_seen)
                << api_name() << " back end: kernel '" << kernel.name << "': buffer argument '"
                << a.name << "' follows a scalar; kernels take their buffers first";
            Type t = a.type;
            if (!t.is_valid()) {
                t = UInt(32);  // never accessed with a type: any 32-bit element will do
            }
            check_type(t.element_of(), "element type of buffer '" + a.name + "'");
            std::string access =
                buffer_argument(a.name, t.element_of(), use.stored.count(a.name) != 0, num_buffers);
            push_buffer(a.name, {access, t.element_of(), Space::Global});
            num_buffers++;
        } else {
            scalars_seen = true;
            const Type &t = a.type;
            user_assert(t.is_valid() && t.is_scalar())
                << api_name() << " back end: kernel '" << kernel.name << "': scalar argument '"
                << a.name << "' has no scalar type";
            check_type(t, "scalar argument '" + a.name + "'");
            push_var(a.name, {t, {scalar_argument(a.name, t)}});
        }
    }
}

void KernelSourceGen::generate_body() {
    indent = 1;
    kernel.body.accept(this);
}

[[noreturn]] void KernelSourceGen::unsupported(const std::string &what) {
    user_error << api_name() << " back end: kernel '" << kernel.name << "': " << what
               << " is not supported in " << api_name() << " kernels";
    internal_error << "unreachable";
    std::abort();
}

bool KernelSourceGen::supports(const Type &e) const {
    return e.is_bool() || (e.bits() == 32 && (e.is_int() || e.is_uint())) ||
           (e.code() == Type::Float && e.bits() == 32);
}
const char *KernelSourceGen::supported_types() const {
    return "int32, uint32, float32 and bool";
}
bool KernelSourceGen::supported_type(const Type &t) const {
    return supports(t.element_of());
}
void KernelSourceGen::check_type(const Type &t, const std::string &where) {
    uses_float64 |= t.element_of() == Float(64);
    if (!supported_type(t)) {
        unsupported("type " + t.to_string() + " (" + where + "; " + std::string(api_name()) +
                    " kernels support " + supported_types() + ")");
    }
}

std::string KernelSourceGen::wrap(const std::string &s, const Type &t) const {
    Type e = t.element_of();
    return (e.is_int() || e.is_uint()) && e.bits() < 32 ? cast(s, Int(32), e) : s;
}

std::string KernelSourceGen::fresh(const std::string &hint) {
    std::string n = hint;
    for (int i = 2; used.count(n); i++) {
        n = hint + "_" + std::to_string(i);
    }
    used.insert(n);
    return n;
}

void KernelSourceGen::line(const std::string &s) {
    body << std::string(size_t(indent) * 4, ' ') << s << "\n";
}

/** A new temporary holding `s`. */
std::string KernelSourceGen::temp(const Type &t, const std::string &s) {
    std::string n;
    do {
        n = "t" + std::to_string(temp_counter++);
    } while (used.count(n));
    used.insert(n);
    line(type_name(t) + " " + n + " = " + s + ";");
    return n;
}
/** `s` if it can be repeated as it is, else a temporary holding it. */
std::string KernelSourceGen::share(const Type &t, const std::string &s) {
    return is_token(s) ? s : temp(t, s);
}

std::vector<std::string> KernelSourceGen::emit(const Expr &e) {
    internal_assert(e.defined()) << api_name() << " back end: undefined expression";
    uses_float64 |= e.type().element_of() == Float(64);
    if (!supported_type(e.type())) {
        check_type(e.type(), "expression " + to_string(e));
    }
    value.clear();
    e.accept(this);
    internal_assert(int(value.size()) == e.type().lanes())
        << api_name() << " back end: " << value.size() << " lanes generated for " << e;
    return std::move(value);
}
std::string KernelSourceGen::emit_scalar(const Expr &e) {
    std::vector<std::string> v = emit(e);
    internal_assert(v.size() == 1) << "expected a scalar: " << e;
    return v[0];
}

std::string KernelSourceGen::int_literal(const Type &t, int64_t v) {
    Type e = t.element_of();
    if (e.is_bool()) {
        return v ? "true" : "false";
    }
    if (e.is_float()) {
        return float_literal(e, double(v));
    }
    if (e.bits() == 64) {
        if (e.is_uint()) {
            return std::to_string(uint64_t(v)) + "UL";
        }
        if (v == INT64_MIN) {
            return "(-9223372036854775807L - 1L)";
        }
        return v < 0 ? "(" + std::to_string(v) + "L)" : std::to_string(v) + "L";
    }
    if (e.bits() < 32) {
        // The value, already of the type's range, as an int made that type.
        return cast(std::to_string(v), Int(32), e);
    }
    if (e.is_uint()) {
        return std::to_string(uint32_t(v)) + "u";
    }
    if (v == INT32_MIN) {
        return "(-2147483647 - 1)";
    }
    return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
}

std::string KernelSourceGen::float_literal(const Type &t, double d) {
    bool wide = t.bits() == 64;
    if (std::isnan(d) || std::isinf(d) || (!wide && std::isinf(float(d)))) {
        char buf[40];
        if (wide) {
            uint64_t bits;
            std::memcpy(&bits, &d, 8);
            std::snprintf(buf, sizeof(buf), "0x%016llxUL", (unsigned long long)bits);
            return bit_cast(buf, UInt(64), Float(64));
        }
        float f = float(d);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        std::snprintf(buf, sizeof(buf), "0x%08xu", bits);
        return bit_cast(buf, UInt(32), Float(32));
    }
    char buf[64];
    if (wide) {
        std::snprintf(buf, sizeof(buf), "%.17g", d);
    } else {
        std::snprintf(buf, sizeof(buf), "%.9g", double(float(d)));
    }
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) {
        s += ".0";
    }
    if (!wide) {
        s = float_digits(s);
    }
    return std::signbit(d) ? "(" + s + ")" : s;
}

void KernelSourceGen::pop_var(const std::string &n) {
    auto it = vars.find(n);
    it->second.pop_back();
    if (it->second.empty()) {
        vars.erase(it);
    }
}
void KernelSourceGen::pop_buffer(const std::string &n) {
    auto it = buffers.find(n);
    it->second.pop_back();
    if (it->second.empty()) {
        buffers.erase(it);
    }
}
const KernelSourceGen::BufferRef &KernelSourceGen::buffer(const std::string &n) {
    auto it = buffers.find(n);
    if (it == buffers.end()) {
        user_error << api_name() << " back end: kernel '" << kernel.name << "': '" << n
                   << "' names no buffer argument or allocation of the kernel";
    }
    return it->second.back();
}

/** Binds `n` to the lanes of `e`, each in a named variable; returns the binding. */
KernelSourceGen::Binding KernelSourceGen::bind_value(const std::string &n, const Expr &e) {
    std::vector<std::string> v = emit(e);
    Binding b;
    b.type = e.type();
    std::string base = "v_" + kernel_source_name(n);
    for (size_t i = 0; i < v.size(); i++) {
        std::string name = fresh(v.size() == 1 ? base : base + "_l" + std::to_string(i));
        line(type_name(e.type()) + " " + name + " = " + v[i] + ";");
        b.lanes.push_back(name);
    }
    return b;
}

/** Converts one lane from scalar type `from` to `to`. */
std::string KernelSourceGen::convert(const std::string &v, const Type &from, const Type &to) {
    Type f = from.element_of(), t = to.element_of();
    if (f == t) {
        return v;
    }
    if (t.is_bool()) {
        return "(" + v + " != " + int_literal(f, 0) + ")";
    }
    return cast(v, f, t);
}

std::string KernelSourceGen::reinterpret(const std::string &v, const Type &from, const Type &to) {
    Type f = from.element_of(), t = to.element_of();
    if (f == t) {
        return v;
    }
    if (f.is_bool() || t.is_bool()) {
        unsupported("reinterpret between " + from.to_string() + " and " + to.to_string());
    }
    return bit_cast(v, f, t);
}

// --- expressions --------------------------------------------------------------------------

void KernelSourceGen::visit(const IntImm *op) {
    value = {int_literal(op->type, op->value)};
}
void KernelSourceGen::visit(const UIntImm *op) {
    value = {int_literal(op->type, int64_t(op->value))};
}
void KernelSourceGen::visit(const FloatImm *op) {
    value = {float_literal(op->type, op->value)};
}
void KernelSourceGen::visit(const StringImm *) {
    unsupported("a string constant");
}

void KernelSourceGen::visit(const Cast *op) {
    std::vector<std::string> v = emit(op->value);
    for (std::string &l : v) {
        l = convert(l, op->value.type(), op->type);
    }
    value = std::move(v);
}
void KernelSourceGen::visit(const Reinterpret *op) {
    std::vector<std::string> v = emit(op->value);
    for (std::string &l : v) {
        l = reinterpret(l, op->value.type(), op->type);
    }
    value = std::move(v);
}
void KernelSourceGen::visit(const Variable *op) {
    auto it = vars.find(op->name);
    if (it == vars.end()) {
        if (buffers.count(op->name)) {
            unsupported("using buffer '" + op->name + "' as a value");
        }
        user_error << api_name() << " back end: kernel '" << kernel.name << "': variable '"
                   << op->name << "' is neither bound in the kernel nor one of its arguments";
    }
    const Binding &b = it->second.back();
    user_assert(int(b.lanes.size()) == op->type.lanes())
        << api_name() << " back end: kernel '" << kernel.name << "': variable '" << op->name
        << "' used with " << op->type.lanes() << " lanes but bound with " << b.lanes.size();
    value = b.lanes;
    if (b.type.element_of() != op->type.element_of()) {
        for (std::string &l : value) {
            l = convert(l, b.type, op->type);
        }
    }
}

template <typename F>
void KernelSourceGen::binary(const Expr &a, const Expr &b, F f) {
    std::vector<std::string> va = emit(a), vb = emit(b);
    value.resize(va.size());
    for (size_t i = 0; i < va.size(); i++) {
        value[i] = f(va[i], vb[i]);
    }
}
void KernelSourceGen::infix(const Expr &a, const Expr &b, const char *o) {
    binary(a, b, [&](const std::string &x, const std::string &y) {
        return "(" + x + " " + o + " " + y + ")";
    });
}
void KernelSourceGen::arithmetic(const Expr &a, const Expr &b, const char *o, const Type &t) {
    infix(a, b, o);
    for (std::string &l : value) {
        l = wrap(l, t);
    }
}

void KernelSourceGen::visit(const Add *op) {
    arithmetic(op->a, op->b, "+", op->type);
}
void KernelSourceGen::visit(const Sub *op) {
    arithmetic(op->a, op->b, "-", op->type);
}
void KernelSourceGen::visit(const Mul *op) {
    arithmetic(op->a, op->b, "*", op->type);
}
void KernelSourceGen::visit(const Div *op) {
    if (op->type.is_float()) {
        infix(op->a, op->b, "/");
        return;
    }
    div_mod(op->a, op->b, "div", op->type);
}
void KernelSourceGen::visit(const Mod *op) {
    if (op->type.is_float()) {
        Type t = op->type;
        binary(op->a, op->b, [&](const std::string &x, const std::string &y) {
            std::string a = share(t, x), b = share(t, y);
            return "(" + a + " - " + b + " * floor(" + a + " / " + b + "))";
        });
        return;
    }
    div_mod(op->a, op->b, "mod", op->type);
}
void KernelSourceGen::div_mod(const Expr &a, const Expr &b, const char *what, const Type &t) {
    // Narrow integers divide as int or uint (they convert exactly), then wrap back.
    bool wide = t.bits() == 64;
    (wide ? need_div_mod_64 : need_div_mod) = true;
    std::string f =
        std::string("tally_") + what + (t.is_int() ? "_i" : "_u") + (wide ? "64(" : "32(");
    binary(a, b, [&](const std::string &x, const std::string &y) {
        return wrap(f + x + ", " + y + ")", t);
    });
}
void KernelSourceGen::visit(const Min *op) {
    check_not_bool(op->type, "min");
    binary(op->a, op->b,
           [&](const std::string &x, const std::string &y) { return "min(" + x + ", " + y + ")"; });
}
void KernelSourceGen::visit(const Max *op) {
    check_not_bool(op->type, "max");
    binary(op->a, op->b,
           [&](const std::string &x, const std::string &y) { return "max(" + x + ", " + y + ")"; });
}
void KernelSourceGen::check_not_bool(const Type &t, const char *what) {
    if (t.is_bool()) {
        unsupported(std::string(what) + " of bool");
    }
}
void KernelSourceGen::visit(const EQ *op) {
    infix(op->a, op->b, "==");
}
void KernelSourceGen::visit(const NE *op) {
    infix(op->a, op->b, "!=");
}
void KernelSourceGen::visit(const LT *op) {
    ordered(op->a, op->b, "<");
}
void KernelSourceGen::visit(const LE *op) {
    ordered(op->a, op->b, "<=");
}
void KernelSourceGen::visit(const GT *op) {
    ordered(op->a, op->b, ">");
}
void KernelSourceGen::visit(const GE *op) {
    ordered(op->a, op->b, ">=");
}
void KernelSourceGen::ordered(const Expr &a, const Expr &b, const char *o) {
    if (a.type().is_bool()) {
        // Compare bools as 0/1 (GLSL orders none).
        binary(a, b, [&](const std::string &x, const std::string &y) {
            return "(" + cast(x, Bool(), Int(32)) + " " + o + " " + cast(y, Bool(), Int(32)) + ")";
        });
        return;
    }
    infix(a, b, o);
}
void KernelSourceGen::visit(const And *op) {
    infix(op->a, op->b, "&&");
}
void KernelSourceGen::visit(const Or *op) {
    infix(op->a, op->b, "||");
}
void KernelSourceGen::visit(const Not *op) {
    std::vector<std::string> v = emit(op->a);
    for (std::string &l : v) {
        l = "(!" + l + ")";
    }
    value = std::move(v);
}
void KernelSourceGen::visit(const Select *op) {
    std::vector<std::string> c = emit(op->condition);
    std::vector<std::string> t = emit(op->true_value), f = emit(op->false_value);
    value.resize(t.size());
    for (size_t i = 0; i < t.size(); i++) {
        // A scalar condition may select whole vectors.
        const std::string &ci = c.size() == 1 ? c[0] : c[i];
        value[i] = wrap("(" + ci + " ? " + t[i] + " : " + f[i] + ")", op->type);
    }
}

/** One element of buffer `name` as type `t` (a bitcast if the buffer's type differs). */
std::string KernelSourceGen::element(const std::string &name, const Type &t,
                                     const std::string &index) {
    const BufferRef &b = buffer(name);
    std::string e = from_storage(b, b.access + "[" + index + "]");
    if (b.elem == t.element_of()) {
        return e;
    }
    user_assert(b.elem.bits() == t.bits() && !t.is_bool())
        << api_name() << " back end: kernel '" << kernel.name << "': buffer '" << name << "' of "
        << b.elem.to_string() << " accessed as " << t.element_of().to_string();
    return reinterpret(e, b.elem, t.element_of());
}

void KernelSourceGen::visit(const Load *op) {
    std::vector<std::string> idx = emit(op->index);
    std::vector<std::string> pred;
    if (op->predicate.defined()) {
        pred = emit(op->predicate);
    }
    Type t = op->type.element_of();
    value.resize(idx.size());
    for (size_t i = 0; i < idx.size(); i++) {
        std::string e = element(op->name, t, idx[i]);
        value[i] = pred.empty() ? e : "(" + pred[i] + " ? " + e + " : " + int_literal(t, 0) + ")";
    }
}
void KernelSourceGen::visit(const Ramp *op) {
    Type t = op->base.type();
    std::string b = share(t, emit_scalar(op->base));
    std::string s = share(t, emit_scalar(op->stride));
    value.clear();
    for (int i = 0; i < op->lanes; i++) {
        value.push_back(i == 0   ? b
                        : i == 1 ? wrap("(" + b + " + " + s + ")", t)
                                 : wrap("(" + b + " + " + s + " * " + int_literal(t, i) + ")", t));
    }
}
void KernelSourceGen::visit(const Broadcast *op) {
    std::vector<std::string> v = emit(op->value);
    Type t = op->value.type();
    std::vector<std::string> out;
    for (std::string &l : v) {
        l = share(t, l);
    }
    for (int i = 0; i < op->lanes; i++) {
        out.insert(out.end(), v.begin(), v.end());
    }
    value = std::move(out);
}
void KernelSourceGen::visit(const Let *op) {
    Binding b = bind_value(op->name, op->value);
    push_var(op->name, b);
    std::vector<std::string> v = emit(op->body);
    pop_var(op->name);
    value = std::move(v);
}
void KernelSourceGen::visit(const Shuffle *op) {
    std::vector<std::string> all;
    for (const Expr &e : op->vectors) {
        std::vector<std::string> v = emit(e);
        all.insert(all.end(), v.begin(), v.end());
    }
    std::vector<int> uses(all.size(), 0);
    for (int i : op->indices) {
        internal_assert(i >= 0 && size_t(i) < all.size()) << "shuffle index out of range";
        uses[size_t(i)]++;
    }
    Type t = op->type.element_of();
    for (size_t i = 0; i < all.size(); i++) {
        if (uses[i] > 1) {
            all[i] = share(t, all[i]);
        }
    }
    value.clear();
    for (int i : op->indices) {
        value.push_back(all[size_t(i)]);
    }
}

std::string KernelSourceGen::math_function(const std::string &name) const {
    static const std::set<std::string> same = {
        "sqrt",  "sin",   "cos",   "tan", "asin", "acos",  "atan", "sinh",  "cosh", "tanh",
        "asinh", "acosh", "atanh", "exp", "log",  "floor", "ceil", "trunc", "pow",
    };
    static const std::map<std::string, std::string> renamed = {
        {"round", "rint"},  {"fabs", "fabs"},    {"abs", "fabs"},
        {"atan2", "atan2"}, {"is_nan", "isnan"}, {"is_inf", "isinf"},
    };
    if (same.count(name)) {
        return name;
    }
    auto it = renamed.find(name);
    return it == renamed.end() ? "" : it->second;
}

/** Halide's math functions: sqrt_f32, floor_f32, pow_f32, is_nan_f32, ... (and their C names,
 * sqrtf, ...). */
bool KernelSourceGen::call_math(const Call *op) {
    std::string n = op->name;
    if (n.size() > 4 &&
        (n.compare(n.size() - 4, 4, "_f32") == 0 || n.compare(n.size() - 4, 4, "_f64") == 0)) {
        n = n.substr(0, n.size() - 4);
    } else if (n.size() > 1 && n.back() == 'f' &&
               !math_function(n.substr(0, n.size() - 1)).empty()) {
        n.pop_back();
    }
    for (const Expr &a : op->args) {
        if (!a.type().is_float()) {
            return false;
        }
    }
    bool binary_function = n == "pow" || n == "atan2";
    std::string f = n == "is_finite" ? "" : math_function(n);
    if (!f.empty() && !binary_function && op->args.size() == 1) {
        std::vector<std::string> v = emit(op->args[0]);
        for (std::string &l : v) {
            l = f + "(" + l + ")";
        }
        value = std::move(v);
        return true;
    }
    if (n == "is_finite" && op->args.size() == 1) {
        std::string is_nan = math_function("is_nan"), is_inf = math_function("is_inf");
        std::vector<std::string> v = emit(op->args[0]);
        for (std::string &l : v) {
            std::string x = share(op->args[0].type(), l);
            l = "(!" + is_nan + "(" + x + ") && !" + is_inf + "(" + x + "))";
        }
        value = std::move(v);
        return true;
    }
    if (!f.empty() && binary_function && op->args.size() == 2) {
        binary(op->args[0], op->args[1], [&](const std::string &x, const std::string &y) {
            return f + "(" + x + ", " + y + ")";
        });
        return true;
    }
    return false;
}

/** Halide 21's intrinsics that ir/IntrinsicLowering.h lowers (saturating_cast, round,
 * widen_right_*, concat_bits, extract_bits, strict_*): the lowered expression, each
 * argument bound once by a Let. strict_* are the plain operations: the kernels are compiled
 * without fast-math (as Halide's own Vulkan and OpenCL back ends emit them). False if `op` is none
 * of them. */
bool KernelSourceGen::call_lowered_intrinsic(const Call *op) {
    std::vector<Expr> args;
    std::vector<std::string> names;
    for (size_t i = 0; i < op->args.size(); i++) {
        names.push_back("<intrinsic argument " + std::to_string(i) + ">");
        args.push_back(Variable::make(op->args[i].type(), names.back()));
    }
    Expr lowered = lower_halide21_intrinsic(op, args);
    if (!lowered.defined()) {
        return false;
    }
    for (size_t i = names.size(); i-- > 0;) {
        lowered = Let::make(names[i], op->args[i], lowered);
    }
    value = emit(lowered);
    return true;
}

/** The if_then_else intrinsic: only the chosen side is evaluated. */
void KernelSourceGen::if_then_else(const Call *op) {
    user_assert(op->args.size() == 2 || op->args.size() == 3)
        << api_name() << " back end: if_then_else takes 2 or 3 arguments";
    std::string c = emit_scalar(op->args[0]);
    Type t = op->type;
    std::vector<std::string> result;
    for (int i = 0; i < t.lanes(); i++) {
        std::string n;
        do {
            n = "t" + std::to_string(temp_counter++);
        } while (used.count(n));
        used.insert(n);
        line(type_name(t) + " " + n + " = " + int_literal(t.element_of(), 0) + ";");
        result.push_back(n);
    }
    auto branch = [&](const Expr &e) {
        indent++;
        std::vector<std::string> v = emit(e);
        for (size_t i = 0; i < v.size(); i++) {
            line(result[i] + " = " + v[i] + ";");
        }
        indent--;
    };
    line("if (" + c + ") {");
    branch(op->args[1]);
    if (op->args.size() == 3) {
        line("} else {");
        branch(op->args[2]);
    }
    line("}");
    value = std::move(result);
}

void KernelSourceGen::visit(const Call *op) {
    const std::string &n = op->name;
    if (op->is_extern()) {
        if (call_math(op)) {
            return;
        }
        unsupported("extern call '" + n + "'");
    }
    if (!op->is_intrinsic()) {
        unsupported("call '" + n + "' (" + call_type_name(op->call_type) + ")");
    }
    if (op->is_intrinsic({Call::likely, Call::likely_if_innermost, Call::promise_clamped,
                          Call::unsafe_promise_clamped, Call::strict_float})) {
        value = emit(op->args[0]);
    } else if (op->is_intrinsic(Call::return_second)) {
        emit(op->args[0]);
        value = emit(op->args[1]);
    } else if (op->is_intrinsic(Call::abs)) {
        const Type &t = op->args[0].type();
        std::vector<std::string> v = emit(op->args[0]);
        for (std::string &l : v) {
            // Integer abs is abs() in both languages; float abs is the math function fabs.
            std::string f = t.is_float() ? math_function("fabs") : "abs";
            l = t.is_uint() ? l : convert(f + "(" + l + ")", t, op->type);
        }
        value = std::move(v);
    } else if (op->is_intrinsic({Call::bitwise_and, Call::bitwise_or, Call::bitwise_xor})) {
        bool b = op->type.is_bool();
        const char *o = op->is_intrinsic(Call::bitwise_and)  ? (b ? "&&" : "&")
                        : op->is_intrinsic(Call::bitwise_or) ? (b ? "||" : "|")
                                                             : (b ? "!=" : "^");
        infix(op->args[0], op->args[1], o);
    } else if (op->is_intrinsic(Call::bitwise_not)) {
        std::vector<std::string> v = emit(op->args[0]);
        for (std::string &l : v) {
            l = (op->type.is_bool() ? "(!" : "(~") + l + ")";
        }
        value = std::move(v);
    } else if (op->is_intrinsic({Call::shift_left, Call::shift_right})) {
        infix(op->args[0], op->args[1], op->is_intrinsic(Call::shift_left) ? "<<" : ">>");
    } else if (op->is_intrinsic(Call::if_then_else)) {
        if_then_else(op);
    } else if (op->is_intrinsic(Call::div_round_to_zero)) {
        infix(op->args[0], op->args[1], "/");
    } else if (op->is_intrinsic(Call::mod_round_to_zero)) {
        Type t = op->type;
        binary(op->args[0], op->args[1], [&](const std::string &x, const std::string &y) {
            std::string a = share(t, x), b = share(t, y);
            return "(" + a + " - (" + a + " / " + b + ") * " + b + ")";
        });
    } else if (op->is_intrinsic(Call::gpu_thread_barrier)) {
        for (const std::string &s : barrier()) {
            line(s);
        }
        value = {int_literal(op->type, 0)};
    } else if (!call_lowered_intrinsic(op)) {
        std::string removed = intrinsic_removed_before_printing(op);
        user_assert(removed.empty()) << api_name() << " back end: the intrinsic '" << n
                                     << "' cannot be compiled: " << removed;
        unsupported("intrinsic '" + n + "'");
    }
    if (op->is_intrinsic({Call::bitwise_and, Call::bitwise_or, Call::bitwise_xor, Call::bitwise_not,
                          Call::shift_left, Call::shift_right, Call::div_round_to_zero,
                          Call::mod_round_to_zero})) {
        for (std::string &l : value) {
            l = wrap(l, op->type);  // C computes narrow integers as int
        }
    }
    if (value.size() == 1 && op->type.lanes() > 1) {
        value.assign(size_t(op->type.lanes()), share(op->type.element_of(), value[0]));
    }
}

// --- statements ---------------------------------------------------------------------------

void KernelSourceGen::visit(const LetStmt *op) {
    Binding b = bind_value(op->name, op->value);
    push_var(op->name, b);
    op->body.accept(this);
    pop_var(op->name);
}
void KernelSourceGen::visit(const AssertStmt *) {
    unsupported("assert (a kernel cannot fail the pipeline)");
}
void KernelSourceGen::visit(const ProducerConsumer *op) {
    line(std::string("// ") + (op->is_producer ? "produce " : "consume ") + op->name);
    op->body.accept(this);
}

void KernelSourceGen::visit(const For *op) {
    user_assert(op->min.type() == Int(32) && op->extent.type() == Int(32))
        << api_name() << " back end: kernel '" << kernel.name << "': loop '" << op->name
        << "' has a " << op->min.type().to_string() << " range; loops in kernels take int32 bounds";
    if (op->for_type == ForType::GPULane) {
        unsupported("gpu_lane loop '" + op->name + "'");
    }
    line("{  // " + std::string(for_type_name(op->for_type)) + " " + op->name);
    indent++;
    std::string mn = share(Int(32), emit_scalar(op->min));
    std::string ext = share(Int(32), emit_scalar(op->extent));
    std::string v = fresh("v_" + kernel_source_name(op->name));
    if (is_gpu_loop(op)) {
        std::string id = work_id(op->for_type == ForType::GPUBlock, kernel.geometry.dim(op));
        line("int " + v + " = " + (mn == "0" ? id : mn + " + " + id) + ";");
        // Sibling loops share the launch size, the largest extent: guard the others.
        line("if (" + id + " < " + ext + ") {");
    } else {
        std::string end = fresh(v + "_end");
        line("int " + end + " = " + mn + " + " + ext + ";");
        line("for (int " + v + " = " + mn + "; " + v + " < " + end + "; " + v + "++) {");
    }
    indent++;
    push_var(op->name, {Int(32), {v}});
    bool thread = op->for_type == ForType::GPUThread;
    thread_loop_depth += thread ? 1 : 0;
    op->body.accept(this);
    thread_loop_depth -= thread ? 1 : 0;
    pop_var(op->name);
    indent--;
    line("}");
    indent--;
    line("}");
}

void KernelSourceGen::visit(const Store *op) {
    Type t = op->value.type();
    std::vector<std::string> val = emit(op->value);
    std::vector<std::string> idx = emit(op->index);
    std::vector<std::string> pred;
    if (op->predicate.defined()) {
        pred = emit(op->predicate);
    }
    internal_assert(val.size() == idx.size()) << "store lanes differ: " << op->name;
    for (size_t i = 0; i < val.size(); i++) {
        const BufferRef &b = buffer(op->name);
        std::string v = val[i];
        if (b.elem != t.element_of()) {
            user_assert(b.elem.bits() == t.bits() && !t.is_bool())
                << api_name() << " back end: kernel '" << kernel.name << "': buffer '" << op->name
                << "' of " << b.elem.to_string() << " stored as " << t.element_of().to_string();
            v = reinterpret(v, t.element_of(), b.elem);
        }
        std::string s = b.access + "[" + idx[i] + "] = " + to_storage(b, v) + ";";
        line(pred.empty() ? s : "if (" + pred[i] + ") " + s);
    }
}

void KernelSourceGen::visit(const Allocate *op) {
    check_type(op->type, "allocation '" + op->name + "'");
    user_assert(!op->type.is_bool())
        << api_name() << " back end: kernel '" << kernel.name << "': allocation '" << op->name
        << "' of bool; allocate uint8 instead";
    if (op->new_expr.defined() || !op->free_function.empty()) {
        unsupported("custom allocation of '" + op->name + "'");
    }
    if (op->condition.defined() && !is_const_one(op->condition)) {
        unsupported("conditional allocation of '" + op->name + "'");
    }
    int64_t size = op->type.lanes();
    for (const Expr &e : op->extents) {
        int64_t v;
        user_assert(const_int_value(e, &v) && v > 0)
            << api_name() << " back end: kernel '" << kernel.name << "': allocation '" << op->name
            << "' needs a constant size in a kernel, not " << e;
        size *= v;
    }
    user_assert(size <= (int64_t(1) << 24))
        << api_name() << " back end: kernel '" << kernel.name << "': allocation '" << op->name
        << "' of " << size << " elements is too large for a kernel";
    Type elem = op->type.element_of();
    bool shared = op->memory_type == MemoryType::GPUShared ||
                  (!kernel.geometry.threads.empty() && thread_loop_depth == 0);
    std::string n = fresh((shared ? "s_" : "a_") + kernel_source_name(op->name));
    if (shared) {
        shared_decls << shared_array(type_name(elem), n, size) << "  // " << op->name << "\n";
    } else {
        line(type_name(elem) + " " + n + "[" + std::to_string(size) + "];  // " + op->name);
    }
    push_buffer(op->name, {n, elem, shared ? Space::Shared : Space::Private});
    op->body.accept(this);
    pop_buffer(op->name);
}
void KernelSourceGen::visit(const Free *) {}
// An atomic update: lets around one store (read_atomic_update). A work item's own array needs
// nothing atomic; otherwise each lane's element is updated by the language's read-modify-write
// function, or else by a compare-and-swap loop on its 32-bit word that computes the new value
// from the value it read, until no other work item changed it in between.
void KernelSourceGen::visit(const Atomic *op) {
    if (!op->mutex_name.empty()) {
        unsupported("an atomic update guarded by a mutex ('" + op->mutex_name + "')");
    }
    AtomicUpdate u;
    std::string why_not = read_atomic_update(op, &u);
    if (!why_not.empty()) {
        unsupported(why_not);
    }
    const BufferRef &b = buffer(u.store->name);
    if (b.space != Space::Private && atomic_word_pointer(b.space, UInt(32)).empty() &&
        !atomics_take_elements()) {
        unsupported("an atomic update");
    }
    for (const LetStmt *let : u.lets) {
        push_var(let->name, bind_value(let->name, let->value));
    }
    if (b.space == Space::Private) {
        u.store->accept(this);
    } else {
        atomic_store(u);
    }
    for (auto it = u.lets.rbegin(); it != u.lets.rend(); ++it) {
        pop_var((*it)->name);
    }
}

void KernelSourceGen::atomic_store(const AtomicUpdate &u) {
    const Store *st = u.store;
    const Type t = st->value.type().element_of();
    const BufferRef &b = buffer(st->name);
    const bool elements = atomics_take_elements();
    user_assert(b.elem == t && t.bits() == 32 && !t.is_bool())
        << api_name() << " back end: kernel '" << kernel.name << "': an atomic update of '"
        << st->name << "' (" << b.elem.to_string() << ", stored as " << t.to_string()
        << "); atomic updates take 32-bit integers and floats";
    user_assert(!elements || !t.is_float())
        << api_name() << " back end: kernel '" << kernel.name << "': an atomic update of '"
        << st->name << "' (" << t.to_string() << "); " << api_name()
        << " kernels' atomic updates take 32-bit integers";
    std::vector<std::string> idx = emit(st->index);
    for (std::string &i : idx) {
        i = share(Int(32), i);
    }
    // What the atomic functions take: a pointer to the element as a `word`, or the element.
    auto pointer = [&](const std::string &i, const Type &word) {
        if (elements) {
            return b.access + "[" + i + "]";
        }
        return "((" + atomic_word_pointer(b.space, word) + ")&" + b.access + "[" + i + "])";
    };
    std::string f = u.rmw == AtomicUpdate::Rmw::None ? "" : atomic_function(u.rmw, t);
    if (!f.empty()) {
        std::vector<std::string> d = emit(u.operand);
        for (size_t i = 0; i < idx.size(); i++) {
            line(f + "(" + pointer(idx[i], t) + ", " + d[i] + ");");
        }
        return;
    }
    // The loop swaps the element's 32-bit word (the element itself where the functions take
    // elements, which are then integers).
    const Type word = elements ? t : UInt(32);
    const std::string ptr_type = elements ? "" : atomic_word_pointer(b.space, word);
    for (size_t i = 0; i < idx.size(); i++) {
        line("{  // atomic update of " + st->name + ": compare and swap");
        indent++;
        std::string p = pointer(idx[i], word), seen = fresh("t_atomic_seen");
        if (!elements) {
            std::string ptr = fresh("t_atomic_ptr");
            line(ptr_type + ptr + " = " + p + ";");
            p = ptr;
        }
        line(type_name(word) + " " + seen + " = " + (elements ? p : "*" + p) + ";");
        line("for (;;) {");
        indent++;
        std::string old = fresh("v_atomic_old");
        line(type_name(t) + " " + old + " = " + reinterpret(seen, word, t) + ";");
        push_var(atomic_old_name, {t.with_lanes(st->value.type().lanes()),
                                   std::vector<std::string>(idx.size(), old)});
        std::vector<std::string> nv = emit(u.new_value);
        pop_var(atomic_old_name);
        std::string was = fresh("t_atomic_was");
        line(type_name(word) + " " + was + " = " +
             atomic_compare_exchange(p, seen, reinterpret(nv[i], t, word)) + ";");
        line("if (" + was + " == " + seen + ") {");
        line("    break;");
        line("}");
        line(seen + " = " + was + ";");
        indent--;
        line("}");
        indent--;
        line("}");
    }
}
void KernelSourceGen::visit(const Fork *) {
    unsupported("a fork (async tasks)");
}
void KernelSourceGen::visit(const Acquire *) {
    unsupported("an acquire (async tasks)");
}
void KernelSourceGen::visit(const Block *op) {
    op->first.accept(this);
    op->rest.accept(this);
}
void KernelSourceGen::visit(const IfThenElse *op) {
    std::string c = emit_scalar(op->condition);
    line("if (" + c + ") {");
    indent++;
    op->then_case.accept(this);
    indent--;
    if (op->else_case.defined()) {
        line("} else {");
        indent++;
        op->else_case.accept(this);
        indent--;
    }
    line("}");
}
void KernelSourceGen::visit(const Evaluate *op) {
    if (is_const(op->value)) {
        return;  // the no-op statement
    }
    const Call *c = op->value.as<Call>();
    if (c && c->is_intrinsic(Call::gpu_thread_barrier)) {
        emit(op->value);
        return;
    }
    // Anything else is pure here (extern calls are refused when generated): evaluate it
    // for its errors only.
    emit(op->value);
}
}  // namespace tally
