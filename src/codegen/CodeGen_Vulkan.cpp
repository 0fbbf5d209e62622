// The Vulkan back end: one Kernel (device API Vulkan) to a GLSL 450 compute shader, compiled to
// SPIR-V for Vulkan 1.1 with shaderc's C API.
//
// Interface (tally_kernel_source in tally_runtime.h): the kernel's buffer arguments come first
// and become std430 storage buffers at bindings 0..n-1 of set 0 (`b<i>.data[]`, element type from
// the argument); the scalars follow, each at the next byte offset aligned to its own size, in one
// push-constant block. The block is declared as an array of 32-bit words and main() unpacks every
// scalar from its word at entry (bitcasts for float, byte extraction for bool), so that the
// layout is exactly the runtime's whatever the mix of sizes. The work group size is
// `local_size_{x,y,z}_id = 0, 1, 2`: the runtime sets those specialization constants to the
// launch's thread counts. Entry point "main".
//
// Loops: a gpu_block loop binds its variable to min + gl_WorkGroupID.<d>, a gpu_thread loop to
// min + gl_LocalInvocationID.<d>, where <d> is the loop's dimension in the kernel's geometry
// (Kernel::geometry, decided by offload-gpu-loops); each is guarded by `id < extent`, because
// sibling loops share the launch size (the largest extent). Every other loop kind runs serially.
// Code between the block and thread loops runs on every invocation of the work group, as it does in
// Halide's own GPU back ends. Allocations in GPUShared memory, or outside every gpu_thread loop of
// a kernel that has thread loops, are work-group `shared` arrays; others are per-invocation
// arrays. Both need a constant size.
//
// Values: every expression is generated as one GLSL string per lane, so vector IR (ramps,
// broadcasts, gathers, shuffles) is scalarized; a string used more than once (a broadcast value,
// a ramp base, a float modulo's operands) is first bound to a temporary, as is every Let value.
// Types: int32, uint32, float32 and bool (uint1) only; anything else is a CompileError naming the
// type. Arithmetic follows IR.h: integer ops wrap, Div/Mod on integers are Euclidean and x/0 ==
// x%0 == 0 (helper functions, the same case analysis as CodeGen_LLVM.cpp), float Mod is
// a - b*floor(a/b). Nodes that have no meaning in a kernel (asserts, strings, handles, extern
// calls other than Halide's math functions) are CompileErrors naming the node.
//
// Debugging: with TALLY_DUMP_GLSL=<dir> in the environment, each kernel's GLSL is written to
// <dir>/<kernel>.comp and its SPIR-V to <dir>/<kernel>.spv.

#include "codegen/CodeGen_Vulkan.h"

#include "codegen/Analysis.h"
#include "ir/IntrinsicLowering.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <shaderc/shaderc.h>

#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** A GLSL identifier from an IR name: [A-Za-z0-9] kept, runs of anything else become one '_'
 * (GLSL reserves names with two consecutive underscores), no leading or trailing '_'. */
std::string clean_name(const std::string &n) {
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

const char *const div_mod_helpers =
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

/** Generates the GLSL source of one kernel. */
class CodeGenGLSL : public IRVisitor {
public:
    explicit CodeGenGLSL(const Kernel &k) : kernel(k) {}

    std::string generate() {
        UsedNames use = used_names(kernel.body);

        // Arguments: buffers (bindings in order), then scalars (push-constant words).
        std::ostringstream decls;
        int binding = 0, offset = 0;
        bool scalars_seen = false;
        std::ostringstream unpack;
        for (const Argument &a : kernel.args) {
            if (a.is_buffer()) {
                user_assert(!scalars_seen)
                    << "Vulkan back end: kernel '" << kernel.name << "': buffer argument '"
                    << a.name << "' follows a scalar; kernels take their buffers first";
                Type t = a.type;
                if (!t.is_valid()) {
                    t = UInt(32);  // never accessed with a type: any 32-bit element will do
                }
                check_type(t.element_of(), "element type of buffer '" + a.name + "'");
                user_assert(!t.is_bool())
                    << "Vulkan back end: kernel '" << kernel.name << "': buffer '" << a.name
                    << "' holds bool, which Vulkan storage buffers cannot (store uint8 instead)";
                std::string block = "b" + std::to_string(binding);
                used.insert(block);
                const char *access = use.stored.count(a.name) ? "" : "readonly ";
                decls << "// " << a.name << ": buffer<" << t.element_of().to_string() << ">\n"
                      << "layout(std430, set = 0, binding = " << binding << ") " << access
                      << "buffer B" << binding << " {\n    " << glsl_type(t.element_of())
                      << " data[];\n} " << block << ";\n";
                buffers[a.name].push_back({block + ".data", t.element_of()});
                binding++;
                num_buffers++;
            } else {
                scalars_seen = true;
                const Type &t = a.type;
                user_assert(t.is_valid() && t.is_scalar())
                    << "Vulkan back end: kernel '" << kernel.name << "': scalar argument '"
                    << a.name << "' has no scalar type";
                check_type(t, "scalar argument '" + a.name + "'");
                int size = t.bytes();
                offset = (offset + size - 1) / size * size;
                std::string word = "pc.w[" + std::to_string(offset / 4) + "]";
                std::string v;
                if (t.is_bool()) {
                    v = "((" + word + " >> " + std::to_string(8 * (offset % 4)) +
                        "u) & 0xffu) != 0u";
                } else if (t.is_float()) {
                    v = "uintBitsToFloat(" + word + ")";
                } else if (t.is_int()) {
                    v = "int(" + word + ")";
                } else {
                    v = word;
                }
                std::string n = fresh("v_" + clean_name(a.name));
                unpack << "    " << glsl_type(t) << " " << n << " = " << v << ";  // " << a.name
                       << " at byte " << offset << "\n";
                vars[a.name].push_back({t, {n}});
                offset += size;
            }
        }
        if (offset > 0) {
            used.insert("pc");
            decls << "layout(push_constant) uniform Args {\n    uint w[" << (offset + 3) / 4
                  << "];\n} pc;\n";
        }

        indent = 1;
        kernel.body.accept(this);

        std::ostringstream src;
        src << "#version 450\n"
            << "// Tally kernel " << kernel.name << " (Vulkan compute shader)\n"
            << "layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;\n"
            << decls.str() << shared_decls.str();
        if (need_div_mod) {
            src << div_mod_helpers;
        }
        src << "void main() {\n" << unpack.str() << body.str() << "}\n";
        return src.str();
    }

    int num_buffers = 0;

private:
    const Kernel &kernel;
    int thread_loop_depth = 0;

    struct Binding {
        Type type;
        std::vector<std::string> lanes;
    };
    struct BufferRef {
        std::string access;  // `b0.data` or a local/shared array name
        Type elem;
    };
    std::map<std::string, std::vector<Binding>> vars;
    std::map<std::string, std::vector<BufferRef>> buffers;
    std::set<std::string> used;
    int temp_counter = 0;
    bool need_div_mod = false;

    std::ostringstream body, shared_decls;
    int indent = 1;
    std::vector<std::string> value;  // lanes of the last visited expression

    // --- helpers ------------------------------------------------------------------------------

    [[noreturn]] void unsupported(const std::string &what) {
        user_error << "Vulkan back end: kernel '" << kernel.name << "': " << what
                   << " is not supported in Vulkan kernels";
        internal_error << "unreachable";
        std::abort();
    }

    static bool supported_type(const Type &t) {
        Type e = t.element_of();
        return e.is_bool() || (e.bits() == 32 && (e.is_int() || e.is_uint())) ||
               (e.code() == Type::Float && e.bits() == 32);
    }
    void check_type(const Type &t, const std::string &where) {
        if (!supported_type(t)) {
            unsupported("type " + t.to_string() + " (" + where +
                        "; Vulkan kernels support int32, uint32, float32 and bool)");
        }
    }

    std::string glsl_type(const Type &t) {
        Type e = t.element_of();
        if (e.is_bool()) {
            return "bool";
        }
        if (e.is_float()) {
            return "float";
        }
        return e.is_int() ? "int" : "uint";
    }

    std::string fresh(const std::string &hint) {
        std::string n = hint;
        for (int i = 2; used.count(n); i++) {
            n = hint + "_" + std::to_string(i);
        }
        used.insert(n);
        return n;
    }

    void line(const std::string &s) { body << std::string(size_t(indent) * 4, ' ') << s << "\n"; }

    /** A new temporary holding `s`. */
    std::string temp(const Type &t, const std::string &s) {
        std::string n;
        do {
            n = "t" + std::to_string(temp_counter++);
        } while (used.count(n));
        used.insert(n);
        line(glsl_type(t) + " " + n + " = " + s + ";");
        return n;
    }
    /** `s` if it can be repeated as it is, else a temporary holding it. */
    std::string share(const Type &t, const std::string &s) { return is_token(s) ? s : temp(t, s); }

    std::vector<std::string> emit(const Expr &e) {
        internal_assert(e.defined()) << "Vulkan back end: undefined expression";
        if (!supported_type(e.type())) {
            check_type(e.type(), "expression " + to_string(e));
        }
        value.clear();
        e.accept(this);
        internal_assert(int(value.size()) == e.type().lanes())
            << "Vulkan back end: " << value.size() << " lanes generated for " << e;
        return std::move(value);
    }
    std::string emit_scalar(const Expr &e) {
        std::vector<std::string> v = emit(e);
        internal_assert(v.size() == 1) << "expected a scalar: " << e;
        return v[0];
    }

    std::string int_literal(const Type &t, int64_t v) {
        if (t.is_bool()) {
            return v ? "true" : "false";
        }
        if (t.is_float()) {
            return float_literal(double(v));
        }
        if (t.is_uint()) {
            return std::to_string(uint32_t(v)) + "u";
        }
        if (v == INT32_MIN) {
            return "(-2147483647 - 1)";
        }
        return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
    }

    std::string float_literal(double d) {
        float f = float(d);
        if (std::isnan(f) || std::isinf(f)) {
            uint32_t bits;
            std::memcpy(&bits, &f, 4);
            char buf[40];
            std::snprintf(buf, sizeof(buf), "uintBitsToFloat(0x%08xu)", bits);
            return buf;
        }
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.9g", double(f));
        std::string s = buf;
        if (s.find_first_of(".en") == std::string::npos) {
            s += ".0";
        }
        return std::signbit(f) ? "(" + s + ")" : s;
    }

    void push_var(const std::string &n, Binding b) { vars[n].push_back(std::move(b)); }
    void pop_var(const std::string &n) {
        auto it = vars.find(n);
        it->second.pop_back();
        if (it->second.empty()) {
            vars.erase(it);
        }
    }
    void push_buffer(const std::string &n, BufferRef b) { buffers[n].push_back(std::move(b)); }
    void pop_buffer(const std::string &n) {
        auto it = buffers.find(n);
        it->second.pop_back();
        if (it->second.empty()) {
            buffers.erase(it);
        }
    }
    const BufferRef &buffer(const std::string &n) {
        auto it = buffers.find(n);
        if (it == buffers.end()) {
            user_error << "Vulkan back end: kernel '" << kernel.name << "': '" << n
                       << "' names no buffer argument or allocation of the kernel";
        }
        return it->second.back();
    }

    /** Binds `n` to the lanes of `e`, each in a named variable; returns the binding. */
    Binding bind_value(const std::string &n, const Expr &e) {
        std::vector<std::string> v = emit(e);
        Binding b;
        b.type = e.type();
        std::string base = "v_" + clean_name(n);
        for (size_t i = 0; i < v.size(); i++) {
            std::string name = fresh(v.size() == 1 ? base : base + "_l" + std::to_string(i));
            line(glsl_type(e.type()) + " " + name + " = " + v[i] + ";");
            b.lanes.push_back(name);
        }
        return b;
    }

    /** Converts one lane from scalar type `from` to `to`. */
    std::string convert(const std::string &v, const Type &from, const Type &to) {
        Type f = from.element_of(), t = to.element_of();
        if (f == t) {
            return v;
        }
        if (t.is_bool()) {
            return "(" + v + " != " + int_literal(f, 0) + ")";
        }
        return glsl_type(t) + "(" + v + ")";
    }

    std::string reinterpret(const std::string &v, const Type &from, const Type &to) {
        Type f = from.element_of(), t = to.element_of();
        if (f == t) {
            return v;
        }
        if (f.is_bool() || t.is_bool()) {
            unsupported("reinterpret between " + from.to_string() + " and " + to.to_string());
        }
        if (f.is_float()) {
            return (t.is_int() ? "floatBitsToInt(" : "floatBitsToUint(") + v + ")";
        }
        if (t.is_float()) {
            return (f.is_int() ? "intBitsToFloat(" : "uintBitsToFloat(") + v + ")";
        }
        return glsl_type(t) + "(" + v + ")";
    }

    // --- expressions --------------------------------------------------------------------------

    void visit(const IntImm *op) override { value = {int_literal(op->type, op->value)}; }
    void visit(const UIntImm *op) override {
        value = {int_literal(op->type, int64_t(uint32_t(op->value)))};
    }
    void visit(const FloatImm *op) override { value = {float_literal(op->value)}; }
    void visit(const StringImm *) override { unsupported("a string constant"); }

    void visit(const Cast *op) override {
        std::vector<std::string> v = emit(op->value);
        for (std::string &l : v) {
            l = convert(l, op->value.type(), op->type);
        }
        value = std::move(v);
    }
    void visit(const Reinterpret *op) override {
        std::vector<std::string> v = emit(op->value);
        for (std::string &l : v) {
            l = reinterpret(l, op->value.type(), op->type);
        }
        value = std::move(v);
    }
    void visit(const Variable *op) override {
        auto it = vars.find(op->name);
        if (it == vars.end()) {
            if (buffers.count(op->name)) {
                unsupported("using buffer '" + op->name + "' as a value");
            }
            user_error << "Vulkan back end: kernel '" << kernel.name << "': variable '" << op->name
                       << "' is neither bound in the kernel nor one of its arguments";
        }
        const Binding &b = it->second.back();
        user_assert(int(b.lanes.size()) == op->type.lanes())
            << "Vulkan back end: kernel '" << kernel.name << "': variable '" << op->name
            << "' used with " << op->type.lanes() << " lanes but bound with " << b.lanes.size();
        value = b.lanes;
        if (b.type.element_of() != op->type.element_of()) {
            for (std::string &l : value) {
                l = convert(l, b.type, op->type);
            }
        }
    }

    template <typename F>
    void binary(const Expr &a, const Expr &b, F f) {
        std::vector<std::string> va = emit(a), vb = emit(b);
        value.resize(va.size());
        for (size_t i = 0; i < va.size(); i++) {
            value[i] = f(va[i], vb[i]);
        }
    }
    void infix(const Expr &a, const Expr &b, const char *o) {
        binary(a, b, [&](const std::string &x, const std::string &y) {
            return "(" + x + " " + o + " " + y + ")";
        });
    }

    void visit(const Add *op) override { infix(op->a, op->b, "+"); }
    void visit(const Sub *op) override { infix(op->a, op->b, "-"); }
    void visit(const Mul *op) override { infix(op->a, op->b, "*"); }
    void visit(const Div *op) override {
        if (op->type.is_float()) {
            infix(op->a, op->b, "/");
            return;
        }
        need_div_mod = true;
        const char *f = op->type.is_int() ? "tally_div_i32(" : "tally_div_u32(";
        binary(op->a, op->b,
               [&](const std::string &x, const std::string &y) { return f + x + ", " + y + ")"; });
    }
    void visit(const Mod *op) override {
        if (op->type.is_float()) {
            Type t = op->type;
            binary(op->a, op->b, [&](const std::string &x, const std::string &y) {
                std::string a = share(t, x), b = share(t, y);
                return "(" + a + " - " + b + " * floor(" + a + " / " + b + "))";
            });
            return;
        }
        need_div_mod = true;
        const char *f = op->type.is_int() ? "tally_mod_i32(" : "tally_mod_u32(";
        binary(op->a, op->b,
               [&](const std::string &x, const std::string &y) { return f + x + ", " + y + ")"; });
    }
    void visit(const Min *op) override {
        check_not_bool(op->type, "min");
        binary(op->a, op->b, [&](const std::string &x, const std::string &y) {
            return "min(" + x + ", " + y + ")";
        });
    }
    void visit(const Max *op) override {
        check_not_bool(op->type, "max");
        binary(op->a, op->b, [&](const std::string &x, const std::string &y) {
            return "max(" + x + ", " + y + ")";
        });
    }
    void check_not_bool(const Type &t, const char *what) {
        if (t.is_bool()) {
            unsupported(std::string(what) + " of bool");
        }
    }
    void visit(const EQ *op) override { infix(op->a, op->b, "=="); }
    void visit(const NE *op) override { infix(op->a, op->b, "!="); }
    void visit(const LT *op) override { ordered(op->a, op->b, "<"); }
    void visit(const LE *op) override { ordered(op->a, op->b, "<="); }
    void visit(const GT *op) override { ordered(op->a, op->b, ">"); }
    void visit(const GE *op) override { ordered(op->a, op->b, ">="); }
    void ordered(const Expr &a, const Expr &b, const char *o) {
        if (a.type().is_bool()) {
            // GLSL orders no bools: compare them as 0/1.
            binary(a, b, [&](const std::string &x, const std::string &y) {
                return "(int(" + x + ") " + o + " int(" + y + "))";
            });
            return;
        }
        infix(a, b, o);
    }
    void visit(const And *op) override { infix(op->a, op->b, "&&"); }
    void visit(const Or *op) override { infix(op->a, op->b, "||"); }
    void visit(const Not *op) override {
        std::vector<std::string> v = emit(op->a);
        for (std::string &l : v) {
            l = "(!" + l + ")";
        }
        value = std::move(v);
    }
    void visit(const Select *op) override {
        std::vector<std::string> c = emit(op->condition);
        std::vector<std::string> t = emit(op->true_value), f = emit(op->false_value);
        value.resize(t.size());
        for (size_t i = 0; i < t.size(); i++) {
            // A scalar condition may select whole vectors.
            const std::string &ci = c.size() == 1 ? c[0] : c[i];
            value[i] = "(" + ci + " ? " + t[i] + " : " + f[i] + ")";
        }
    }

    /** One element of buffer `name` as type `t` (a bitcast if the buffer's type differs). */
    std::string element(const std::string &name, const Type &t, const std::string &index) {
        const BufferRef &b = buffer(name);
        std::string e = b.access + "[" + index + "]";
        if (b.elem == t.element_of()) {
            return e;
        }
        user_assert(b.elem.bits() == t.bits() && !t.is_bool())
            << "Vulkan back end: kernel '" << kernel.name << "': buffer '" << name << "' of "
            << b.elem.to_string() << " accessed as " << t.element_of().to_string();
        return reinterpret(e, b.elem, t.element_of());
    }

    void visit(const Load *op) override {
        std::vector<std::string> idx = emit(op->index);
        std::vector<std::string> pred;
        if (op->predicate.defined()) {
            pred = emit(op->predicate);
        }
        Type t = op->type.element_of();
        value.resize(idx.size());
        for (size_t i = 0; i < idx.size(); i++) {
            std::string e = element(op->name, t, idx[i]);
            value[i] =
                pred.empty() ? e : "(" + pred[i] + " ? " + e + " : " + int_literal(t, 0) + ")";
        }
    }
    void visit(const Ramp *op) override {
        Type t = op->base.type();
        std::string b = share(t, emit_scalar(op->base));
        std::string s = share(t, emit_scalar(op->stride));
        value.clear();
        for (int i = 0; i < op->lanes; i++) {
            value.push_back(i == 0   ? b
                            : i == 1 ? "(" + b + " + " + s + ")"
                                     : "(" + b + " + " + s + " * " + int_literal(t, i) + ")");
        }
    }
    void visit(const Broadcast *op) override {
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
    void visit(const Let *op) override {
        Binding b = bind_value(op->name, op->value);
        push_var(op->name, b);
        std::vector<std::string> v = emit(op->body);
        pop_var(op->name);
        value = std::move(v);
    }
    void visit(const Shuffle *op) override {
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

    /** Halide's math functions: sqrt_f32, floor_f32, pow_f32, is_nan_f32, ... */
    bool call_math(const Call *op) {
        static const std::map<std::string, std::string> unary = {
            {"sqrt", "sqrt"},   {"sin", "sin"},         {"cos", "cos"},      {"tan", "tan"},
            {"asin", "asin"},   {"acos", "acos"},       {"atan", "atan"},    {"sinh", "sinh"},
            {"cosh", "cosh"},   {"tanh", "tanh"},       {"asinh", "asinh"},  {"acosh", "acosh"},
            {"atanh", "atanh"}, {"exp", "exp"},         {"log", "log"},      {"floor", "floor"},
            {"ceil", "ceil"},   {"round", "roundEven"}, {"trunc", "trunc"},  {"fabs", "abs"},
            {"abs", "abs"},     {"is_nan", "isnan"},    {"is_inf", "isinf"},
        };
        std::string n = op->name;
        if (n.size() > 4 && n.compare(n.size() - 4, 4, "_f32") == 0) {
            n = n.substr(0, n.size() - 4);
        } else if (n.size() > 1 && n.back() == 'f' && unary.count(n.substr(0, n.size() - 1))) {
            n.pop_back();
        }
        for (const Expr &a : op->args) {
            if (!a.type().is_float()) {
                return false;
            }
        }
        auto it = unary.find(n);
        if (it != unary.end() && op->args.size() == 1) {
            std::vector<std::string> v = emit(op->args[0]);
            for (std::string &l : v) {
                l = it->second + "(" + l + ")";
            }
            value = std::move(v);
            return true;
        }
        if (n == "is_finite" && op->args.size() == 1) {
            std::vector<std::string> v = emit(op->args[0]);
            for (std::string &l : v) {
                std::string x = share(op->args[0].type(), l);
                l = "(!isnan(" + x + ") && !isinf(" + x + "))";
            }
            value = std::move(v);
            return true;
        }
        if ((n == "pow" || n == "atan2") && op->args.size() == 2) {
            const char *f = n == "pow" ? "pow(" : "atan(";
            binary(op->args[0], op->args[1], [&](const std::string &x, const std::string &y) {
                return f + x + ", " + y + ")";
            });
            return true;
        }
        return false;
    }

    /** Halide 21's intrinsics that ir/IntrinsicLowering.h lowers (saturating_cast, round,
     * widen_right_*, concat_bits, extract_bits, strict_*): the lowered expression, each
     * argument bound once by a Let. GLSL has no fast-math flags to clear (Halide's own Vulkan
     * back end emits strict_* as the plain operations too). False if `op` is none of them. */
    bool call_lowered_intrinsic(const Call *op) {
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
    void if_then_else(const Call *op) {
        user_assert(op->args.size() == 2 || op->args.size() == 3)
            << "Vulkan back end: if_then_else takes 2 or 3 arguments";
        std::string c = emit_scalar(op->args[0]);
        Type t = op->type;
        std::vector<std::string> result;
        for (int i = 0; i < t.lanes(); i++) {
            std::string n;
            do {
                n = "t" + std::to_string(temp_counter++);
            } while (used.count(n));
            used.insert(n);
            line(glsl_type(t) + " " + n + " = " + int_literal(t.element_of(), 0) + ";");
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

    void visit(const Call *op) override {
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
                l = t.is_uint() ? l : convert("abs(" + l + ")", t, op->type);
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
            line("memoryBarrierShared();");
            line("memoryBarrierBuffer();");
            line("barrier();");
            value = {int_literal(op->type, 0)};
        } else if (!call_lowered_intrinsic(op)) {
            std::string removed = intrinsic_removed_before_printing(op);
            user_assert(removed.empty())
                << "Vulkan back end: the intrinsic '" << n << "' cannot be compiled: " << removed;
            unsupported("intrinsic '" + n + "'");
        }
        if (value.size() == 1 && op->type.lanes() > 1) {
            value.assign(size_t(op->type.lanes()), share(op->type.element_of(), value[0]));
        }
    }

    // --- statements ---------------------------------------------------------------------------

    void visit(const LetStmt *op) override {
        Binding b = bind_value(op->name, op->value);
        push_var(op->name, b);
        op->body.accept(this);
        pop_var(op->name);
    }
    void visit(const AssertStmt *) override {
        unsupported("assert (a kernel cannot fail the pipeline)");
    }
    void visit(const ProducerConsumer *op) override {
        line(std::string("// ") + (op->is_producer ? "produce " : "consume ") + op->name);
        op->body.accept(this);
    }

    void visit(const For *op) override {
        user_assert(op->min.type() == Int(32) && op->extent.type() == Int(32))
            << "Vulkan back end: kernel '" << kernel.name << "': loop '" << op->name << "' has a "
            << op->min.type().to_string() << " range; loops in Vulkan kernels take int32 bounds";
        if (op->for_type == ForType::GPULane) {
            unsupported("gpu_lane loop '" + op->name + "'");
        }
        line("{  // " + std::string(for_type_name(op->for_type)) + " " + op->name);
        indent++;
        std::string mn = share(Int(32), emit_scalar(op->min));
        std::string ext = share(Int(32), emit_scalar(op->extent));
        std::string v = fresh("v_" + clean_name(op->name));
        if (is_gpu_loop(op)) {
            std::string id =
                std::string(op->for_type == ForType::GPUBlock ? "int(gl_WorkGroupID."
                                                              : "int(gl_LocalInvocationID.") +
                "xyz"[kernel.geometry.dim(op)] + ")";
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

    void visit(const Store *op) override {
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
                    << "Vulkan back end: kernel '" << kernel.name << "': buffer '" << op->name
                    << "' of " << b.elem.to_string() << " stored as " << t.element_of().to_string();
                v = reinterpret(v, t.element_of(), b.elem);
            }
            std::string s = b.access + "[" + idx[i] + "] = " + v + ";";
            line(pred.empty() ? s : "if (" + pred[i] + ") " + s);
        }
    }

    void visit(const Allocate *op) override {
        check_type(op->type, "allocation '" + op->name + "'");
        user_assert(!op->type.is_bool())
            << "Vulkan back end: kernel '" << kernel.name << "': allocation '" << op->name
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
                << "Vulkan back end: kernel '" << kernel.name << "': allocation '" << op->name
                << "' needs a constant size in a Vulkan kernel, not " << e;
            size *= v;
        }
        user_assert(size <= (int64_t(1) << 24))
            << "Vulkan back end: kernel '" << kernel.name << "': allocation '" << op->name
            << "' of " << size << " elements is too large for a kernel";
        Type elem = op->type.element_of();
        bool shared = op->memory_type == MemoryType::GPUShared ||
                      (!kernel.geometry.threads.empty() && thread_loop_depth == 0);
        std::string n = fresh((shared ? "s_" : "a_") + clean_name(op->name));
        std::string decl = glsl_type(elem) + " " + n + "[" + std::to_string(size) + "];";
        if (shared) {
            shared_decls << "shared " << decl << "  // " << op->name << "\n";
        } else {
            line(decl + "  // " + op->name);
        }
        push_buffer(op->name, {n, elem});
        op->body.accept(this);
        pop_buffer(op->name);
    }
    void visit(const Free *) override {}
    void visit(const Atomic *) override { unsupported("an atomic update"); }
    void visit(const Fork *) override { unsupported("a fork (async tasks)"); }
    void visit(const Acquire *) override { unsupported("an acquire (async tasks)"); }
    void visit(const Block *op) override {
        op->first.accept(this);
        op->rest.accept(this);
    }
    void visit(const IfThenElse *op) override {
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
    void visit(const Evaluate *op) override {
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
};

/** Compiles GLSL to SPIR-V (Vulkan 1.1) with shaderc; errors are internal (we wrote the source),
 * reported with the source. */
std::string compile_glsl(const std::string &kernel, const std::string &glsl) {
    shaderc_compiler_t compiler = shaderc_compiler_initialize();
    internal_assert(compiler) << "shaderc_compiler_initialize failed";
    shaderc_compile_options_t opts = shaderc_compile_options_initialize();
    shaderc_compile_options_set_source_language(opts, shaderc_source_language_glsl);
    shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan,
                                           shaderc_env_version_vulkan_1_1);
    shaderc_compile_options_set_target_spirv(opts, shaderc_spirv_version_1_3);
    shaderc_compile_options_set_optimization_level(opts, shaderc_optimization_level_performance);
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(compiler, glsl.data(), glsl.size(), shaderc_compute_shader,
                                 (kernel + ".comp").c_str(), "main", opts);
    bool ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    std::string spirv, message = shaderc_result_get_error_message(r);
    if (ok) {
        spirv.assign(shaderc_result_get_bytes(r), shaderc_result_get_length(r));
    }
    shaderc_result_release(r);
    shaderc_compile_options_release(opts);
    shaderc_compiler_release(compiler);
    if (!ok) {
        std::ostringstream numbered;
        std::istringstream in(glsl);
        std::string l;
        for (int i = 1; std::getline(in, l); i++) {
            numbered << i << ": " << l << "\n";
        }
        internal_error << "Vulkan back end: shaderc rejected the GLSL of kernel '" << kernel
                       << "':\n"
                       << message << "\n"
                       << numbered.str();
    }
    return spirv;
}

/** TALLY_DUMP_GLSL=<dir>: writes <dir>/<kernel>.comp and .spv. */
void dump(const std::string &kernel, const std::string &glsl, const std::string &spirv) {
    const char *dir = std::getenv("TALLY_DUMP_GLSL");
    if (!dir || !*dir) {
        return;
    }
    std::string base = std::string(dir) + "/" + kernel;
    std::ofstream(base + ".comp", std::ios::binary) << glsl;
    if (!spirv.empty()) {
        std::ofstream(base + ".spv", std::ios::binary) << spirv;
    }
}

}  // namespace

CompiledKernel compile_vulkan_kernel(const Kernel &k, const Target &) {
    user_assert(k.device_api == DeviceAPI::Vulkan)
        << "Vulkan back end: kernel '" << k.name << "' runs on " << device_api_name(k.device_api);
    CodeGenGLSL gen(k);
    std::string glsl = gen.generate();
    dump(k.name, glsl, "");
    std::string spirv = compile_glsl(k.name, glsl);
    dump(k.name, glsl, spirv);
    CompiledKernel out;
    out.name = k.name;
    out.device_api = DeviceAPI::Vulkan;
    out.code = std::move(spirv);
    out.num_args = int(k.args.size());
    out.num_buffers = gen.num_buffers;
    return out;
}

}  // namespace tally
