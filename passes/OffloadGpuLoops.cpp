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
// arguments are the buffers the nest loads or stores without allocating them (rank 1; element
// type as the function declares the buffer, an argument's or an enclosing allocation's, except
// bool, which Halide's lowering accesses as uint8; else the first access's), then the scalar
// variables it uses without binding them, each in the order the printer shows them first.
//
// Launch sizes: the kernel's geometry, decided by derive_kernel_geometry (ir/KernelGeometry.h,
// the one home of the rule: the innermost loop of a chain is X, sibling chains combine per
// dimension with max) and recorded in the Kernel; the launch passes its extents, 1 for a missing
// dimension. A loop with chains of different lengths inside it, or more than three nested loops
// of one kind, is a user error located at the loop, and so is an extent that uses a name bound
// inside the nest (it must be computable on the host).
//
// Strategy, per function: the OffloadNests mutator walks the body, tracking the enclosing
// producer; at each outermost gpu_block For it checks the nest (CheckGpuLoops), derives its
// geometry, names the kernel (one UniqueNames for the module), collects its arguments
// (CollectKernelArgs), records it, and builds the launch. Functions without GPU loops come back
// as the same nodes. Since no gpu_block loop survives in a function, a second run changes
// nothing.
//
// Cost: linear in the size of the module. The names a result name could collide with (those
// starting `halide_`) are collected once per function, and the search for a free `$n` (or
// kernel `_n`) resumes per base name where the previous one stopped.

#include "tally/Passes.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/FreeVariables.h"
#include "ir/KernelGeometry.h"
#include "ir/LargeStack.h"
#include "ir/RuntimeCalls.h"
#include "ir/UniqueNames.h"
#include "tally/Error.h"
#include "tally/IRMutator.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** The device API a GPU loop runs on: Default_GPU (or none) means the target's. Only CUDA and
 * Vulkan have back ends; anything else is a user error naming the API. */
DeviceAPI resolve_api(const For *op, const Target &target, const std::string &func) {
    DeviceAPI api = resolve_device_api(op->device_api, target);
    if (op->device_api == DeviceAPI::DefaultGPU || op->device_api == DeviceAPI::None) {
        user_assert(api != DeviceAPI::None).at(op->loc)
            << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
            << "' in function '" << func << "' asks for Default_GPU, but target '"
            << target.to_string()
            << "' names no GPU API (add cuda, opencl or vulkan to the target)";
        user_assert(has_gpu_backend(api)).at(op->loc)
            << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
            << "' in function '" << func << "' asks for Default_GPU, which target '"
            << target.to_string() << "' resolves to " << device_api_name(api)
            << ", for which Tally has no back end (supported: CUDA, OpenCL, Vulkan)";
        return api;
    }
    user_assert(has_gpu_backend(api)).at(op->loc)
        << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
        << "' in function '" << func << "' uses device API " << device_api_name(api)
        << ", for which Tally has no back end (supported: CUDA, OpenCL, Vulkan)";
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
    return Call::make(Handle(), Call::make_struct, std::move(fields));
}

// Every launch result name starts with this (`halide_<api>_run_result`, then `$n`), so only the
// names that do can collide with one.
const char *const result_prefix = "halide_";

/** Checks the GPU loops of one nest: every one agrees on the device API, and no extent uses a
 * name bound inside the nest (FindFreeVariables keeps those in scope), so that the launch sizes
 * are computable on the host. */
class CheckGpuLoops : public FindFreeVariables {
public:
    CheckGpuLoops(DeviceAPI api, const Target &target, std::string func)
        : api(api), target(target), func(std::move(func)) {}

    using FindFreeVariables::visit;

private:
    DeviceAPI api;
    const Target &target;
    std::string func;

    void visit(const For *op) override {
        if (op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread) {
            DeviceAPI a = resolve_api(op, target, func);
            user_assert(a == api).at(op->loc)
                << "offload-gpu-loops: " << for_type_name(op->for_type) << " loop '" << op->name
                << "' in function '" << func << "' runs on " << device_api_name(a)
                << " inside a GPU loop nest that runs on " << device_api_name(api);
            for (const std::string &n : free_variables(op->extent)) {
                user_assert(!is_bound(n)).at(op->loc)
                    << "offload-gpu-loops: the extent of " << for_type_name(op->for_type)
                    << " loop '" << op->name << "' in function '" << func << "' uses '" << n
                    << "', which is bound inside the GPU loop nest; launch sizes must be "
                       "computable before the launch";
            }
        }
        FindFreeVariables::visit(op);
    }
};

/** The arguments of one kernel: buffers loaded or stored but not allocated in the nest, then
 * scalars used but not bound in it, each in the order the printed nest shows them first. The
 * scalars are the nest's free variables, less the user context and function references. */
class CollectKernelArgs : public FindFreeVariables {
public:
    /** `declared`: the element type the function declares for each buffer in scope. */
    CollectKernelArgs(std::string kernel, SourceLoc nest,
                      const std::map<std::string, std::vector<Type>> &declared)
        : kernel(std::move(kernel)), nest(nest), declared(declared) {}

    /** Buffers first, then scalars. */
    std::vector<Argument> args() const {
        std::vector<Argument> out = buffers;
        for (const FreeVariable &v : variables()) {
            if (v.name == "__user_context" || v.name.compare(0, 2, "::") == 0) {
                continue;
            }
            for (const Argument &b : buffers) {
                user_assert(v.name != b.name).at(nest)
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
    SourceLoc nest;
    const std::map<std::string, std::vector<Type>> &declared;
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
        auto d = declared.find(n);
        if (d != declared.end() && d->second.back().is_valid() && !d->second.back().is_bool()) {
            a.type = d->second.back();
        }
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
        for (const Argument &a : f.args) {
            if (a.is_buffer()) {
                declared[a.name].push_back(a.type);
            }
        }
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
    // The element type of each buffer in scope, as its argument or allocation declares it.
    std::map<std::string, std::vector<Type>> declared;

    static const For *as_gpu_nest(const Stmt &s) {
        const For *f = s.as<For>();
        return f && f->for_type == ForType::GPUBlock ? f : nullptr;
    }

    Launch offload(const For *op) {
        Launch l;
        DeviceAPI api = resolve_api(op, target, func);
        CheckGpuLoops check(api, target, func);
        op->accept(&check);
        l.kernel.geometry =
            derive_kernel_geometry(op, "offload-gpu-loops", "function '" + func + "'");

        const std::string &producer = producers.empty() ? func : producers.back();
        l.kernel.name = kernel_names.make(sanitize(producer + "_" + op->name));
        l.kernel.device_api = api;
        l.kernel.body = op;
        CollectKernelArgs args(l.kernel.name, op->loc, declared);
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
        std::vector<Expr> call_args = {Call::make(Handle(), Call::tally_kernel_table, {}),
                                       StringImm::make(l.kernel.name)};
        for (ForType kind : {ForType::GPUBlock, ForType::GPUThread}) {
            for (int d = 0; d < 3; d++) {
                call_args.push_back(l.kernel.geometry.launch_extent(kind, d));
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

    Stmt visit(const Allocate *op) override {
        std::vector<Type> &types = declared[op->name];
        types.push_back(op->type);
        Stmt s = IRMutator::visit(op);
        types.pop_back();
        if (types.empty()) {
            declared.erase(op->name);
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
