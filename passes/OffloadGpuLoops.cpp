// offload-gpu-loops: turns GPU loop nests into device kernels and checked launches.
//
// Where it runs: second in lower(), after inject-host-dev-copies (so every buffer a nest touches
// already has its device allocation and `X.buffer` handle) and before inject-profiling (which
// brackets the launches this pass writes). It also accepts IR that Halide 14 printed before its
// own offload (the corpus' `preoffload/` files).
//
// What it assumes: GPU loops are `gpu_block<API>` / `gpu_thread<API>` For nodes whose API is CUDA
// or Vulkan, or Default_GPU (or no API at all), which means the target's gpu_api(). Any other
// API, or Default_GPU on a target without a supported GPU API, is a user error naming the API.
//
// What it establishes: no gpu_block loop remains in any function. Each outermost gpu_block
// nest (one not inside another gpu_block loop) becomes a Kernel appended to the module, in
// function order and walk order, and is replaced in place by
//     let halide_<api>_run_result = halide_<api>_run((void *)tally_kernel_table(), "<kernel>",
//         blocksX, blocksY, blocksZ, threadsX, threadsY, threadsZ, 0,
//         (void *)make_struct(<arg sizes>..., (int64)0),
//         (void *)make_struct(<arg values>..., (void *)reinterpret((uint64)0)),
//         (void *)make_struct(<is_buffer flags>..., (uint8)0))
//     assert(halide_<api>_run_result == 0, halide_<api>_run_result)
// where the let scopes over the statements that followed the nest (the shape the parser gives
// that text, so printed output re-parses to the same IR). The result name follows Halide's
// unique_name: the first launch of a function gets the bare name, later ones (or one whose name
// the function already uses) `$1`, `$2`, ... as in Halide's own output for the corpus.
//
// Kernels: the name is `<producer>_<loop var>` (innermost enclosing `produce`, else the
// function), with every character outside [A-Za-z0-9_] replaced by '_', made unique against the
// module's kernels and functions with `_1`, `_2`, .... The body is the For nest unchanged; the
// device code generator maps the block and thread loop variables to block and thread ids. The
// arguments are the buffers the nest loads or stores without allocating them (element type from
// the first access, rank 1), then the scalar variables it uses without binding them, each in
// the order the printer shows them first.
//
// Launch sizes: along every chain of nested gpu_block loops the innermost is X, the next Y, then
// Z (Halide's `__block_id_x` is innermost); gpu_thread loops likewise. Sibling chains of one kind
// combine per dimension with max. A missing dimension is 1; more than three is a user error, and
// so is an extent that uses a name bound inside the nest (it must be computable on the host).
//
// Strategy, per function: the OffloadNests mutator walks the body, tracking the enclosing
// producer; at each outermost gpu_block For it runs two read-only analyses over the nest
// (CollectLaunchBounds, then CollectKernelArgs), names the kernel (KernelNames), records it, and
// builds the launch. Functions without GPU loops come back as the same nodes. Since no gpu_block
// loop survives in a function, a second run changes nothing.
//
// Cost: linear in the size of the module. The names a result name could collide with (those
// starting `halide_`) are collected once per function, and the search for a free `$n` (or
// kernel `_n`) resumes per base name where the previous one stopped.

#include "OffloadGpuLoops.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "codegen/RuntimeSymbols.h"
#include "ir/LargeStack.h"
#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRMutator.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

// The intrinsic that codegen resolves to the module's table of compiled kernels.
const char *const kernel_table_intrinsic = "tally_kernel_table";

/** The device API a GPU loop runs on: Default_GPU (or none) means the target's. Only CUDA and
 * Vulkan have back ends; anything else is a user error naming the API. */
DeviceAPI resolve_api(const For *op, const Target &target, const std::string &func) {
    DeviceAPI api = op->device_api;
    if (api == DeviceAPI::DefaultGPU || api == DeviceAPI::None) {
        api = target.gpu_api();
        user_assert(api != DeviceAPI::None)
            << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
            << "' in function '" << func << "' asks for Default_GPU, but target '"
            << target.to_string() << "' names no GPU API (add cuda or vulkan to the target)";
        user_assert(api == DeviceAPI::CUDA || api == DeviceAPI::Vulkan)
            << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
            << "' in function '" << func << "' asks for Default_GPU, which target '"
            << target.to_string() << "' resolves to " << device_api_name(api)
            << ", for which Tally has no back end (supported: CUDA, Vulkan)";
        return api;
    }
    user_assert(api == DeviceAPI::CUDA || api == DeviceAPI::Vulkan)
        << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
        << "' in function '" << func << "' uses device API " << device_api_name(api)
        << ", for which Tally has no back end (supported: CUDA, Vulkan)";
    return api;
}

/** `halide_cuda_run` / `halide_vulkan_run`: the launch entry point of an API. */
std::string run_function(DeviceAPI api) {
    std::string n = api == DeviceAPI::CUDA ? "halide_cuda_run" : "halide_vulkan_run";
    internal_assert(find_runtime_symbol(n.c_str())) << n << " is not a runtime symbol";
    return n;
}

/** Every character outside [A-Za-z0-9_] becomes '_'. */
std::string sanitize(const std::string &s) {
    std::string out = s;
    for (char &c : out) {
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum) {
            c = '_';
        }
    }
    return out;
}

Expr make_struct(std::vector<Expr> fields) {
    return Call::make(Handle(), "make_struct", std::move(fields), Call::Intrinsic);
}

/** The free variables of an expression (Lets inside it bind their names). */
class FreeVars : public IRVisitor {
public:
    const std::vector<std::string> &names() const { return found; }

private:
    std::map<std::string, int> bound;
    std::vector<std::string> found;

    using IRVisitor::visit;

    void visit(const Variable *op) override {
        if (!bound.count(op->name)) {
            found.push_back(op->name);
        }
    }
    void visit(const Let *op) override {
        op->value.accept(this);
        bound[op->name]++;
        op->body.accept(this);
        if (--bound[op->name] == 0) {
            bound.erase(op->name);
        }
    }
};

using NameSet = std::unordered_set<std::string>;

// Every launch result name starts with this (`halide_<api>_run_result`, then `$n`), so only the
// names that do can collide with one.
const std::string result_prefix = "halide_";

/** Every name a statement binds or uses that a fresh result name could collide with. Keeping
 * only those keeps the set small however large the function is. */
class AllNames : public IRVisitor {
public:
    NameSet names;

private:
    using IRVisitor::visit;

    void note(const std::string &n) {
        if (n.compare(0, result_prefix.size(), result_prefix) == 0) {
            names.insert(n);
        }
    }
    void visit(const Variable *op) override { note(op->name); }
    void visit(const Let *op) override {
        note(op->name);
        IRVisitor::visit(op);
    }
    void visit(const LetStmt *op) override {
        note(op->name);
        IRVisitor::visit(op);
    }
    void visit(const For *op) override {
        note(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Allocate *op) override {
        note(op->name);
        IRVisitor::visit(op);
    }
};

/** Launch sizes of one nest. Walks the nest keeping the chain of enclosing gpu_block and
 * gpu_thread loops; at the innermost loop of a chain it files each loop's extent under its
 * dimension (innermost = X). It also checks that every GPU loop agrees on the device API and
 * that no extent uses a name bound inside the nest. */
class CollectLaunchBounds : public IRVisitor {
public:
    CollectLaunchBounds(DeviceAPI api, const Target &target, std::string func)
        : api(api), target(target), func(std::move(func)) {}

    /** Blocks (kind 0) or threads (kind 1) in X, Y, Z order; missing dimensions are 1. */
    std::vector<Expr> sizes(int kind) const {
        std::vector<Expr> out;
        for (const std::vector<Expr> &candidates : extents[kind]) {
            // Constants fold to the largest; anything else combines with max in walk order.
            Expr e;
            bool all_const = !candidates.empty();
            int64_t largest = 0;
            for (const Expr &c : candidates) {
                int64_t v;
                if (const_int_value(c, &v)) {
                    largest = e.defined() ? std::max(largest, v) : v;
                } else {
                    all_const = false;
                }
                e = e.defined() ? Max::make(e, c) : c;
            }
            if (all_const) {
                e = make_const(Int(32), largest);
            }
            out.push_back(e.defined() ? e : make_one(Int(32)));
        }
        return out;
    }

    using IRVisitor::visit;

private:
    DeviceAPI api;
    const Target &target;
    std::string func;
    std::map<std::string, int> bound;
    std::vector<const For *> chain[2];
    int seen[2] = {0, 0};
    // Per kind and dimension (X, Y, Z), the distinct extents filed there.
    std::vector<std::vector<Expr>> extents[2] = {std::vector<std::vector<Expr>>(3),
                                                 std::vector<std::vector<Expr>>(3)};

    static int kind_of(const For *op) {
        return op->for_type == ForType::GPUBlock ? 0 : op->for_type == ForType::GPUThread ? 1 : -1;
    }

    void bind(const std::string &n) { bound[n]++; }
    void unbind(const std::string &n) {
        if (--bound[n] == 0) {
            bound.erase(n);
        }
    }

    void check_extent(const For *op) {
        FreeVars fv;
        op->extent.accept(&fv);
        for (const std::string &n : fv.names()) {
            user_assert(!bound.count(n))
                << "offload-gpu-loops: the extent of " << for_type_name(op->for_type) << " loop '"
                << op->name << "' in function '" << func << "' uses '" << n
                << "', which is bound inside the GPU loop nest; launch sizes must be computable "
                   "before the launch";
        }
    }

    /** Files the extents of a complete chain: its innermost loop is dimension X. */
    void record_chain(int kind) {
        const std::vector<const For *> &c = chain[kind];
        const char *what = kind == 0 ? "gpu_block" : "gpu_thread";
        user_assert(c.size() <= 3) << "offload-gpu-loops: " << c.size() << " nested " << what
                                   << " loops around '" << c.back()->name << "' in function '"
                                   << func << "'; a GPU launch has at most 3 dimensions";
        for (size_t i = 0; i < c.size(); i++) {
            Expr e = c[i]->extent;
            if (e.type() != Int(32)) {
                e = Cast::make(Int(32), e);
            }
            std::vector<Expr> &slot = extents[kind][c.size() - 1 - i];
            bool known = false;
            for (const Expr &o : slot) {
                known = known || equal(o, e);
            }
            if (!known) {
                slot.push_back(e);
            }
        }
    }

    void visit(const For *op) override {
        op->min.accept(this);
        op->extent.accept(this);
        int kind = kind_of(op);
        if (kind >= 0) {
            DeviceAPI a = resolve_api(op, target, func);
            user_assert(a == api) << "offload-gpu-loops: " << for_type_name(op->for_type)
                                  << " loop '" << op->name << "' in function '" << func
                                  << "' runs on " << device_api_name(a)
                                  << " inside a GPU loop nest that runs on "
                                  << device_api_name(api);
            check_extent(op);
            chain[kind].push_back(op);
            seen[kind]++;
        }
        int seen_before = kind >= 0 ? seen[kind] : 0;
        bind(op->name);
        op->body.accept(this);
        unbind(op->name);
        if (kind >= 0) {
            if (seen[kind] == seen_before) {
                record_chain(kind);
            }
            chain[kind].pop_back();
        }
    }
    void visit(const LetStmt *op) override {
        op->value.accept(this);
        bind(op->name);
        op->body.accept(this);
        unbind(op->name);
    }
    void visit(const Let *op) override {
        op->value.accept(this);
        bind(op->name);
        op->body.accept(this);
        unbind(op->name);
    }
    void visit(const Allocate *op) override {
        for (const Expr &e : op->extents) {
            e.accept(this);
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
};

/** The arguments of one kernel: buffers loaded or stored but not allocated in the nest, then
 * scalars used but not bound in it, each in the order the printed nest shows them first. */
class CollectKernelArgs : public IRVisitor {
public:
    explicit CollectKernelArgs(std::string kernel) : kernel(std::move(kernel)) {}

    /** Buffers first, then scalars. */
    std::vector<Argument> args() const {
        for (const Argument &s : scalars) {
            for (const Argument &b : buffers) {
                user_assert(s.name != b.name)
                    << "offload-gpu-loops: kernel '" << kernel << "' uses '" << s.name
                    << "' both as a buffer and as a value; a kernel receives buffers only "
                       "through loads and stores";
            }
        }
        std::vector<Argument> out = buffers;
        out.insert(out.end(), scalars.begin(), scalars.end());
        return out;
    }

    using IRVisitor::visit;

private:
    std::string kernel;
    std::map<std::string, int> bound_vars, bound_buffers;
    std::set<std::string> seen;
    std::vector<Argument> buffers, scalars;

    static void bind(std::map<std::string, int> &s, const std::string &n) { s[n]++; }
    static void unbind(std::map<std::string, int> &s, const std::string &n) {
        if (--s[n] == 0) {
            s.erase(n);
        }
    }

    void use_buffer(const std::string &n, const Type &t) {
        if (bound_buffers.count(n) || bound_vars.count(n) || !seen.insert("b:" + n).second) {
            return;
        }
        Argument a;
        a.name = n;
        a.kind = Argument::Buffer;
        a.type = t.element_of();
        a.dimensions = 1;
        buffers.push_back(a);
    }

    void visit(const Variable *op) override {
        const std::string &n = op->name;
        if (bound_vars.count(n) || n == "__user_context" || n.compare(0, 2, "::") == 0 ||
            !seen.insert("s:" + n).second) {
            return;
        }
        Argument a;
        a.name = n;
        a.kind = Argument::Scalar;
        a.type = op->type;
        scalars.push_back(a);
    }
    void visit(const Load *op) override {
        use_buffer(op->name, op->type);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        if (op->predicate.defined()) {
            op->predicate.accept(this);
        }
        use_buffer(op->name, op->value.type());
        op->index.accept(this);
        op->value.accept(this);
    }
    void visit(const Let *op) override {
        op->value.accept(this);
        bind(bound_vars, op->name);
        op->body.accept(this);
        unbind(bound_vars, op->name);
    }
    void visit(const LetStmt *op) override {
        op->value.accept(this);
        bind(bound_vars, op->name);
        op->body.accept(this);
        unbind(bound_vars, op->name);
    }
    void visit(const For *op) override {
        op->min.accept(this);
        op->extent.accept(this);
        bind(bound_vars, op->name);
        op->body.accept(this);
        unbind(bound_vars, op->name);
    }
    void visit(const Allocate *op) override {
        for (const Expr &e : op->extents) {
            e.accept(this);
        }
        if (op->condition.defined()) {
            op->condition.accept(this);
        }
        if (op->new_expr.defined()) {
            op->new_expr.accept(this);
        }
        bind(bound_vars, op->name);
        bind(bound_buffers, op->name);
        op->body.accept(this);
        unbind(bound_buffers, op->name);
        unbind(bound_vars, op->name);
    }
};

/** `base` if `taken` lacks it, else the first of `base<sep>1`, `base<sep>2`, ... that it lacks;
 * the result is added to `taken`. Names are only ever added, so the search for a base resumes
 * where the previous one for that base stopped (`next`): n launches cost n lookups, not n^2/2. */
std::string fresh_with_suffix(const std::string &base, const char *sep, NameSet *taken,
                              std::map<std::string, int> *next) {
    int &i = (*next)[base];
    std::string n = i == 0 ? base : base + sep + std::to_string(i);
    while (taken->count(n)) {
        i++;
        n = base + sep + std::to_string(i);
    }
    taken->insert(n);
    return n;
}

/** Kernel names unique across the module: `<base>`, else `<base>_1`, `<base>_2`, ... */
class KernelNames {
public:
    explicit KernelNames(const Module &m) {
        for (const Kernel &k : m.kernels) {
            taken.insert(k.name);
        }
        for (const LoweredFunc &f : m.functions) {
            taken.insert(f.name);
        }
    }

    std::string fresh(const std::string &base) {
        return fresh_with_suffix(base, "_", &taken, &next_suffix);
    }

private:
    NameSet taken;
    std::map<std::string, int> next_suffix;
};

/** A kernel launch: the Kernel to add and the statements that replace its nest. */
struct Launch {
    Kernel kernel;
    std::string result;  // the let-bound result variable
    Expr call;
    Stmt check;
};

/** Replaces the outermost gpu_block nests of one function by launches and collects their
 * kernels. A gpu_block For is outermost here because the mutator never descends into one. */
class OffloadNests : public IRMutator {
public:
    OffloadNests(const LoweredFunc &f, const Target &target, KernelNames &names,
                 std::vector<Kernel> *kernels)
        : func(f.name), target(target), names(names), kernels(kernels) {
        f.body.accept(&used);
    }

    using IRMutator::visit;

private:
    std::string func;
    const Target &target;
    KernelNames &names;
    std::vector<Kernel> *kernels;
    AllNames used;  // names of the function, for fresh result variables
    std::map<std::string, int> next_result_suffix;
    std::vector<std::string> producers;

    static const For *as_gpu_nest(const Stmt &s) {
        const For *f = s.as<For>();
        return f && f->for_type == ForType::GPUBlock ? f : nullptr;
    }

    /** Halide's unique_name: the bare name if the function does not use it, else `$1`, ... */
    std::string fresh_result(const std::string &base) {
        internal_assert(base.compare(0, result_prefix.size(), result_prefix) == 0)
            << "launch result " << base << " lacks the prefix AllNames keeps";
        return fresh_with_suffix(base, "$", &used.names, &next_result_suffix);
    }

    Launch offload(const For *op) {
        Launch l;
        DeviceAPI api = resolve_api(op, target, func);
        CollectLaunchBounds bounds(api, target, func);
        op->accept(&bounds);

        const std::string &producer = producers.empty() ? func : producers.back();
        l.kernel.name = names.fresh(sanitize(producer + "_" + op->name));
        l.kernel.device_api = api;
        l.kernel.body = op;
        CollectKernelArgs args(l.kernel.name);
        op->accept(&args);
        l.kernel.args = args.args();

        std::vector<Expr> sizes, values, flags;
        for (const Argument &a : l.kernel.args) {
            if (a.is_buffer()) {
                sizes.push_back(make_const(Int(64), 8));
                values.push_back(Variable::make(Handle("halide_buffer_t"), a.name + ".buffer"));
                flags.push_back(make_one(UInt(8)));
            } else {
                int bytes = (a.type.bits() * a.type.lanes() + 7) / 8;
                sizes.push_back(make_const(Int(64), bytes));
                values.push_back(make_struct({Variable::make(a.type, a.name)}));
                flags.push_back(make_zero(UInt(8)));
            }
        }
        sizes.push_back(make_zero(Int(64)));
        values.push_back(Reinterpret::make(Handle(), make_zero(UInt(64))));
        flags.push_back(make_zero(UInt(8)));

        std::string run = run_function(api);
        std::vector<Expr> call_args = {
            Call::make(Handle(), kernel_table_intrinsic, {}, Call::Intrinsic),
            StringImm::make(l.kernel.name)};
        for (int kind = 0; kind < 2; kind++) {
            for (const Expr &e : bounds.sizes(kind)) {
                call_args.push_back(e);
            }
        }
        call_args.push_back(make_zero(Int(32)));  // dynamic shared memory bytes
        call_args.push_back(make_struct(sizes));
        call_args.push_back(make_struct(values));
        call_args.push_back(make_struct(flags));
        l.call = Call::make(Int(32), run, call_args, Call::Extern);

        l.result = fresh_result(run + "_result");
        Expr r = Variable::make(Int(32), l.result);
        l.check = AssertStmt::make(EQ::make(r, make_zero(Int(32))), r);
        kernels->push_back(l.kernel);
        return l;
    }

    Stmt visit(const ProducerConsumer *op) override {
        if (op->is_producer) {
            producers.push_back(op->name);
        }
        Stmt s = IRMutator::visit(op);
        if (op->is_producer) {
            producers.pop_back();
        }
        return s;
    }

    Stmt visit(const For *op) override {
        if (op->for_type != ForType::GPUBlock) {
            return IRMutator::visit(op);
        }
        Launch l = offload(op);
        return LetStmt::make(l.result, l.call, l.check);
    }

    // The launch's let scopes over what followed the nest, as the parser reads the printed text.
    Stmt visit(const Block *op) override {
        const For *nest = as_gpu_nest(op->first);
        if (!nest) {
            return IRMutator::visit(op);
        }
        Launch l = offload(nest);
        Stmt rest = mutate(op->rest);
        return LetStmt::make(l.result, l.call, Block::make(l.check, rest));
    }
};

}  // namespace

static Module offload_gpu_loops_impl(const Module &m) {
    Module out = m;
    // 1. Kernel names already taken by the module's kernels and functions.
    KernelNames names(out);
    // 2. Each function's outermost gpu_block nests become kernels (appended in function order
    //    and walk order) and checked launches. Bodies without GPU loops come back unchanged.
    for (LoweredFunc &f : out.functions) {
        OffloadNests offload(f, out.target, names, &out.kernels);
        f.body = offload.mutate(f.body);
    }
    return out;
}

Module offload_gpu_loops(const Module &m) {
    return with_large_stack([&]() { return offload_gpu_loops_impl(m); });
}

}  // namespace tally
