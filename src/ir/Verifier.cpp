// The IR verifier. Checks what the node factories cannot see locally: that every variable is
// bound (let, for, allocate, argument, module buffer, the implicit __user_context, or `::f`
// naming a function of the module) with a compatible type; that loads, stores and frees name a
// declared buffer; that loads agree with the allocation's element type; that kernel launches
// name kernels the module holds; and that each kernel's launch geometry is the one its body
// gives (every gpu_block and gpu_thread loop recorded at exactly one dimension, at most 3 of
// each kind, int32 extents in terms of the kernel's arguments). Errors name the function and
// show the statement.

#include "tally/Verifier.h"
#include "ir/FreeVariables.h"
#include "ir/KernelGeometry.h"
#include "ir/LargeStack.h"
#include "ir/RuntimeCalls.h"

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tally/Error.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** The names of a module's kernels and functions, looked up once per launch and per `::f`
 * (Module's finders scan the lists, which would make verifying n launches cost n^2). */
struct ModuleNames {
    std::unordered_set<std::string> kernels, functions;
    explicit ModuleNames(const Module &m) {
        for (const Kernel &k : m.kernels) {
            kernels.insert(k.name);
        }
        for (const LoweredFunc &f : m.functions) {
            functions.insert(f.name);
        }
    }
};

// Scopes: every name bound in scope, innermost binding last. Hashed, since scopes in lowered
// pipelines (nested allocations and lets) grow with the pipeline.
using Scope = std::unordered_map<std::string, std::vector<Type>>;

class Verify : public IRVisitor {
public:
    Verify(const Module &m, const ModuleNames &names, std::string where)
        : m(m), names(names), where(std::move(where)) {}

    void bind_var(const std::string &n, const Type &t) { vars[n].push_back(t); }
    void bind_buffer(const std::string &n, const Type &elem) { buffers[n].push_back(elem); }

    void run(const Stmt &s) {
        if (s.defined()) {
            s.accept(this);
        }
    }

private:
    const Module &m;
    const ModuleNames &names;
    std::string where;
    Scope vars;
    // Element type of each buffer in scope; an invalid type means "not known".
    Scope buffers;
    std::vector<const BaseStmtNode *> stmt_stack;

    using IRVisitor::visit;

    [[noreturn]] void fail(const std::string &msg) {
        std::string ctx;
        if (!stmt_stack.empty()) {
            std::string s = to_string(Stmt(stmt_stack.back()));
            size_t nl = s.find('\n');
            if (nl != std::string::npos) {
                s = s.substr(0, nl);
            }
            size_t start = s.find_first_not_of(' ');
            s = start == std::string::npos ? s : s.substr(start);
            if (s.size() > 120) {
                s = s.substr(0, 117) + "...";
            }
            ctx = "\n  in statement: " + s;
        }
        user_error << "verify: in " << where << ": " << msg << ctx;
    }

    template <typename T>
    void scoped_stmt(const T *op) {
        stmt_stack.push_back(op);
        IRVisitor::visit(op);
        stmt_stack.pop_back();
    }

    static void pop(Scope &s, const std::string &n) {
        auto it = s.find(n);
        it->second.pop_back();
        if (it->second.empty()) {
            s.erase(it);
        }
    }

    void check_buffer(const std::string &name, const Type &t, const char *what) {
        auto it = buffers.find(name);
        if (it != buffers.end()) {
            const Type &elem = it->second.back();
            // Halide keeps bools in memory as one byte each and its lowering reads and writes
            // bool buffers as uint8 (then casts), so a bool buffer takes uint8 accesses too.
            bool bool_storage = elem.is_bool() && t.element_of() == UInt(8);
            // A uint8 buffer is raw bytes: Halide's lowering packs values of other types into
            // one (memoize's cache key: a string's pointer, then each Param), each store
            // addressing it in units of its own type, as every back end computes addresses.
            bool byte_storage = elem == UInt(8) && std::string(what) == "store";
            if (elem.is_valid() && !bool_storage && !byte_storage &&
                !types_compatible(elem, t.element_of())) {
                fail(std::string(what) + " of " + t.to_string() + " from buffer '" + name +
                     "' of element type " + elem.to_string());
            }
            return;
        }
        auto v = vars.find(name);
        if (v != vars.end() && v->second.back().is_handle()) {
            return;  // a pointer in scope names the memory
        }
        fail(std::string(what) + " names '" + name + "', which is not a declared buffer");
    }

    void visit(const Variable *op) override {
        const std::string &n = op->name;
        auto it = vars.find(n);
        if (it != vars.end()) {
            if (!types_compatible(it->second.back(), op->type)) {
                fail("variable '" + n + "' used as " + op->type.to_string() + " but bound as " +
                     it->second.back().to_string());
            }
            return;
        }
        if (n == "__user_context") {
            return;
        }
        if (n.compare(0, 2, "::") == 0) {
            if (!names.functions.count(n.substr(2))) {
                fail("'" + n + "' names no function of this module");
            }
            return;
        }
        fail("variable '" + n + "' is not bound");
    }
    void visit(const Let *op) override {
        op->value.accept(this);
        bind_var(op->name, op->value.type());
        op->body.accept(this);
        pop(vars, op->name);
    }
    void visit(const Load *op) override {
        IRVisitor::visit(op);
        check_buffer(op->name, op->type, "load");
    }
    void visit(const Call *op) override {
        IRVisitor::visit(op);
        // A Halide name with two runtime forms must be called with one form's argument count
        // (debug_to_file, an intrinsic, calls halide_debug_to_file's forms).
        std::string arity = runtime_call_arity_error(
            op->is_intrinsic(Call::debug_to_file) ? runtime::halide_debug_to_file : op->name,
            op->args.size());
        if (!arity.empty()) {
            fail(arity);
        }
        if (!m.kernels.empty() && op->name.size() > 11 && op->name.compare(0, 7, "halide_") == 0 &&
            op->name.compare(op->name.size() - 4, 4, "_run") == 0 && op->args.size() > 1) {
            if (const StringImm *k = op->args[1].as<StringImm>()) {
                if (!names.kernels.count(k->value)) {
                    fail("launch of kernel '" + k->value + "', which the module does not hold");
                }
            }
        }
    }

    void visit(const LetStmt *op) override {
        stmt_stack.push_back(op);
        op->value.accept(this);
        stmt_stack.pop_back();
        bind_var(op->name, op->value.type());
        op->body.accept(this);
        pop(vars, op->name);
    }
    void visit(const AssertStmt *op) override {
        stmt_stack.push_back(op);
        IRVisitor::visit(op);
        if (!op->message.type().is_int() && !op->message.type().is_uint()) {
            fail("assert message must be an integer error code, not " +
                 op->message.type().to_string());
        }
        stmt_stack.pop_back();
    }
    void visit(const ProducerConsumer *op) override {
        if (op->name.empty()) {
            fail("producer/consumer with an empty name");
        }
        op->body.accept(this);
    }
    void visit(const For *op) override {
        stmt_stack.push_back(op);
        op->min.accept(this);
        op->extent.accept(this);
        if (op->min.type() != op->extent.type()) {
            fail("loop '" + op->name + "' has bounds of different types");
        }
        stmt_stack.pop_back();
        bind_var(op->name, op->min.type());
        op->body.accept(this);
        pop(vars, op->name);
    }
    void visit(const Store *op) override {
        stmt_stack.push_back(op);
        IRVisitor::visit(op);
        check_buffer(op->name, op->value.type(), "store");
        stmt_stack.pop_back();
    }
    void visit(const Allocate *op) override {
        stmt_stack.push_back(op);
        for (const Expr &e : op->extents) {
            e.accept(this);
            if (!e.type().is_int() && !e.type().is_uint()) {
                fail("allocation extent of '" + op->name + "' is not an integer");
            }
        }
        if (op->condition.defined()) {
            op->condition.accept(this);
        }
        if (op->new_expr.defined()) {
            op->new_expr.accept(this);
        }
        stmt_stack.pop_back();
        bind_buffer(op->name, op->type);
        bind_var(op->name, Handle());
        op->body.accept(this);
        pop(vars, op->name);
        pop(buffers, op->name);
    }
    void visit(const Free *op) override {
        if (!buffers.count(op->name)) {
            stmt_stack.push_back(op);
            fail("free of '" + op->name + "', which is not an allocation in scope");
        }
    }
    void visit(const Acquire *op) override {
        stmt_stack.push_back(op);
        op->semaphore.accept(this);
        op->count.accept(this);
        if (!op->semaphore.type().is_handle()) {
            fail("acquire of a semaphore that is not a handle (a halide_semaphore_t *), but " +
                 op->semaphore.type().to_string());
        }
        if (op->count.type() != Int(32)) {
            fail("acquire count must be int32, not " + op->count.type().to_string());
        }
        stmt_stack.pop_back();
        op->body.accept(this);
    }
    void visit(const IfThenElse *op) override { scoped_stmt(op); }
    void visit(const Evaluate *op) override { scoped_stmt(op); }
};

void bind_args(Verify &v, const std::vector<Argument> &args) {
    for (const Argument &a : args) {
        if (a.is_buffer()) {
            v.bind_var(a.name + ".buffer", Handle("halide_buffer_t"));
            v.bind_buffer(a.name, a.type);
        } else {
            v.bind_var(a.name, a.type.is_valid() ? a.type : Int(32));
        }
    }
}

/** The gpu_block and gpu_thread loops of a kernel body: name -> how many of each kind. */
class CountGpuLoops : public IRVisitor {
public:
    std::map<std::string, int> loops[2];
    using IRVisitor::visit;

private:
    void visit(const For *op) override {
        if (op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread) {
            loops[op->for_type == ForType::GPUBlock ? 0 : 1][op->name]++;
        }
        IRVisitor::visit(op);
    }
};

void verify_geometry(const Kernel &k) {
    const KernelGeometry &g = k.geometry;
    CountGpuLoops body;
    k.body.accept(&body);
    std::set<std::string> scalars;
    for (const Argument &a : k.args) {
        if (!a.is_buffer()) {
            scalars.insert(a.name);
        }
    }
    for (int kind = 0; kind < 2; kind++) {
        const char *what = kind == 0 ? "gpu_block" : "gpu_thread";
        const std::vector<KernelGeometry::Dim> &dims = kind == 0 ? g.blocks : g.threads;
        user_assert(dims.size() <= 3) << "verify: kernel '" << k.name << "' records " << dims.size()
                                      << " " << what << " dimensions; a launch has at most 3";
        std::map<std::string, int> recorded;
        for (const KernelGeometry::Dim &d : dims) {
            user_assert(!d.loops.empty()) << "verify: kernel '" << k.name << "' records a " << what
                                          << " dimension without loops";
            user_assert(d.extent.defined() && d.extent.type() == Int(32))
                << "verify: kernel '" << k.name << "' records a " << what
                << " launch extent that is not an int32";
            for (const std::string &n : free_variables(d.extent)) {
                user_assert(scalars.count(n))
                    << "verify: the " << what << " launch extent of kernel '" << k.name
                    << "' uses '" << n << "', which is not a scalar argument of the kernel";
            }
            for (const std::string &n : d.loops) {
                user_assert(body.loops[kind].count(n))
                    << "verify: kernel '" << k.name << "' records a launch dimension for " << what
                    << " loop '" << n << "', which its body does not have";
                user_assert(++recorded[n] == 1) << "verify: kernel '" << k.name << "' records "
                                                << what << " loop '" << n << "' twice";
            }
        }
        for (const auto &l : body.loops[kind]) {
            user_assert(recorded.count(l.first))
                << "verify: " << what << " loop '" << l.first << "' of kernel '" << k.name
                << "' has no launch dimension in the kernel's geometry";
        }
    }
    user_assert(equal(g, derive_kernel_geometry(k.body, "verify", "kernel '" + k.name + "'")))
        << "verify: the launch geometry of kernel '" << k.name
        << "' is not the one its loops give (see derive_kernel_geometry)";
}

}  // namespace

static void verify_impl(const Module &m) {
    ModuleNames names(m);
    std::set<std::string> seen;
    for (const Kernel &k : m.kernels) {
        user_assert(seen.insert(k.name).second)
            << "verify: kernel '" << k.name << "' defined twice";
        Verify v(m, names, "kernel '" + k.name + "'");
        bind_args(v, k.args);
        v.run(k.body);
        verify_geometry(k);
    }
    for (const LoweredFunc &f : m.functions) {
        user_assert(seen.insert(f.name).second)
            << "verify: function '" << f.name << "' defined twice";
        Verify v(m, names, "function '" + f.name + "'");
        for (const BufferConstant &b : m.buffers) {
            v.bind_var(b.name + ".buffer", Handle("halide_buffer_t"));
            v.bind_var(b.name, Handle());
        }
        bind_args(v, f.args);
        v.run(f.body);
    }
}

void verify(const Module &m) {
    with_large_stack([&]() { verify_impl(m); });
}

}  // namespace tally
