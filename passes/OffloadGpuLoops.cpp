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
// (CollectLaunchBounds, then CollectKernelArgs), names the kernel (one UniqueNames for the
// module), records it, and builds the launch. Functions without GPU loops come back as the same
// nodes. Since no gpu_block loop survives in a function, a second run changes nothing.
//
// Cost: linear in the size of the module. The names a result name could collide with (those
// starting `halide_`) are collected once per function, and the search for a free `$n` (or
// kernel `_n`) resumes per base name where the previous one stopped.

#include "tally/Passes.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ir/FreeVariables.h"
#include "ir/LargeStack.h"
#include "ir/RuntimeCalls.h"
#include "ir/UniqueNames.h"
#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRMutator.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** The device API a GPU loop runs on: Default_GPU (or none) means the target's. Only CUDA and
 * Vulkan have back ends; anything else is a user error naming the API. */
DeviceAPI resolve_api(const For *op, const Target &target, const std::string &func) {
    DeviceAPI api = resolve_device_api(op->device_api, target);
    if (op->device_api == DeviceAPI::DefaultGPU || op->device_api == DeviceAPI::None) {
        user_assert(api != DeviceAPI::None)
            << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
            << "' in function '" << func << "' asks for Default_GPU, but target '"
            << target.to_string() << "' names no GPU API (add cuda or vulkan to the target)";
        user_assert(has_gpu_backend(api))
            << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
            << "' in function '" << func << "' asks for Default_GPU, which target '"
            << target.to_string() << "' resolves to " << device_api_name(api)
            << ", for which Tally has no back end (supported: CUDA, Vulkan)";
        return api;
    }
    user_assert(has_gpu_backend(api))
        << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
        << "' in function '" << func << "' uses device API " << device_api_name(api)
        << ", for which Tally has no back end (supported: CUDA, Vulkan)";
    return api;
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

// Every launch result name starts with this (`halide_<api>_run_result`, then `$n`), so only the
// names that do can collide with one.
const char *const result_prefix = "halide_";

/** Launch sizes of one nest. Walks the nest keeping the chain of enclosing gpu_block and
 * gpu_thread loops; at the innermost loop of a chain it files each loop's extent under its
 * dimension (innermost = X). It also checks that every GPU loop agrees on the device API and
 * that no extent uses a name bound inside the nest (FindFreeVariables keeps those in scope). */
class CollectLaunchBounds : public FindFreeVariables {
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

    using FindFreeVariables::visit;

private:
    DeviceAPI api;
    const Target &target;
    std::string func;
    std::vector<const For *> chain[2];
    int seen[2] = {0, 0};
    // Per kind and dimension (X, Y, Z), the distinct extents filed there.
    std::vector<std::vector<Expr>> extents[2] = {std::vector<std::vector<Expr>>(3),
                                                 std::vector<std::vector<Expr>>(3)};

    static int kind_of(const For *op) {
        return op->for_type == ForType::GPUBlock ? 0 : op->for_type == ForType::GPUThread ? 1 : -1;
    }

    void check_extent(const For *op) {
        for (const std::string &n : free_variables(op->extent)) {
            user_assert(!is_bound(n))
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
        FindFreeVariables::visit(op);
        if (kind >= 0) {
            if (seen[kind] == seen_before) {
                record_chain(kind);
            }
            chain[kind].pop_back();
        }
    }
};

/** The arguments of one kernel: buffers loaded or stored but not allocated in the nest, then
 * scalars used but not bound in it, each in the order the printed nest shows them first. The
 * scalars are the nest's free variables, less the user context and function references. */
class CollectKernelArgs : public FindFreeVariables {
public:
    explicit CollectKernelArgs(std::string kernel) : kernel(std::move(kernel)) {}

    /** Buffers first, then scalars. */
    std::vector<Argument> args() const {
        std::vector<Argument> out = buffers;
        for (const FreeVariable &v : variables()) {
            if (v.name == "__user_context" || v.name.compare(0, 2, "::") == 0) {
                continue;
            }
            for (const Argument &b : buffers) {
                user_assert(v.name != b.name)
                    << "offload-gpu-loops: kernel '" << kernel << "' uses '" << v.name
                    << "' both as a buffer and as a value; a kernel receives buffers only "
                       "through loads and stores";
            }
            Argument a;
            a.name = v.name;
            a.kind = Argument::Scalar;
            a.type = v.type;
            out.push_back(a);
        }
        return out;
    }

    using FindFreeVariables::visit;

private:
    std::string kernel;
    std::set<std::string> seen_buffers;
    std::vector<Argument> buffers;

    // An allocation binds its name as a variable (its host pointer) and as a buffer.
    void use_buffer(const std::string &n, const Type &t) {
        if (is_bound(n) || !seen_buffers.insert(n).second) {
            return;
        }
        Argument a;
        a.name = n;
        a.kind = Argument::Buffer;
        a.type = t.element_of();
        a.dimensions = 1;
        buffers.push_back(a);
    }

    void visit(const Load *op) override {
        use_buffer(op->name, op->type);
        FindFreeVariables::visit(op);
    }
    void visit(const Store *op) override {
        if (op->predicate.defined()) {
            op->predicate.accept(this);
        }
        use_buffer(op->name, op->value.type());
        op->index.accept(this);
        op->value.accept(this);
    }
};

/** Kernel names unique across the module: `<base>`, else `<base>_1`, `<base>_2`, ... */
UniqueNames kernel_names(const Module &m) {
    UniqueNames names("_");
    for (const Kernel &k : m.kernels) {
        names.reserve(k.name);
    }
    for (const LoweredFunc &f : m.functions) {
        names.reserve(f.name);
    }
    return names;
}

/** A kernel launch: the Kernel to add and the statements that replace its nest. */
struct Launch {
    Kernel kernel;
    std::string result;  // the let-bound result variable
    Expr call;
};

/** Replaces the outermost gpu_block nests of one function by launches and collects their
 * kernels. A gpu_block For is outermost here because the mutator never descends into one. */
class OffloadNests : public IRMutator {
public:
    OffloadNests(const LoweredFunc &f, const Target &target, UniqueNames &kernel_names,
                 std::vector<Kernel> *kernels)
        : func(f.name), target(target), kernel_names(kernel_names), kernels(kernels),
          results("$", result_prefix) {
        results.reserve_names_in(f.body);
    }

    using IRMutator::visit;

private:
    std::string func;
    const Target &target;
    UniqueNames &kernel_names;
    std::vector<Kernel> *kernels;
    // Launch results, unique in the function as Halide's unique_name makes them: the bare name
    // if the function does not use it, else `$1`, ...
    UniqueNames results;
    std::vector<std::string> producers;

    static const For *as_gpu_nest(const Stmt &s) {
        const For *f = s.as<For>();
        return f && f->for_type == ForType::GPUBlock ? f : nullptr;
    }

    Launch offload(const For *op) {
        Launch l;
        DeviceAPI api = resolve_api(op, target, func);
        CollectLaunchBounds bounds(api, target, func);
        op->accept(&bounds);

        const std::string &producer = producers.empty() ? func : producers.back();
        l.kernel.name = kernel_names.make(sanitize(producer + "_" + op->name));
        l.kernel.device_api = api;
        l.kernel.body = op;
        CollectKernelArgs args(l.kernel.name);
        op->accept(&args);
        l.kernel.args = args.args();

        std::vector<Expr> sizes, values, flags;
        for (const Argument &a : l.kernel.args) {
            if (a.is_buffer()) {
                sizes.push_back(make_const(Int(64), 8));
                values.push_back(buffer_var(a.name));
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

        std::string run = launch_function(api);
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

        l.result = results.make(result_name(run));
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
        return checked_call(l.result, l.call);
    }

    // The launch's let scopes over what followed the nest, as the parser reads the printed text.
    Stmt visit(const Block *op) override {
        const For *nest = as_gpu_nest(op->first);
        if (!nest) {
            return IRMutator::visit(op);
        }
        Launch l = offload(nest);
        return checked_call(l.result, l.call, mutate(op->rest));
    }
};

}  // namespace

static Module offload_gpu_loops_impl(const Module &m) {
    Module out = m;
    // 1. Kernel names already taken by the module's kernels and functions.
    UniqueNames names = kernel_names(out);
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
