// inject-profiling: instruments pipelines for the Tally sampling profiler.
//
// Where it runs: last in lower(), after inject-host-dev-copies and offload-gpu-loops, so the copy
// calls and kernel launches it brackets are already explicit. It also accepts IR that Halide 14
// lowered (copies present, parallel loops already outlined into `external func` closures).
//
// What it assumes: copies and launches are checked the way Halide and our passes write them,
// `let r = call(...)` followed by `assert(r == 0, r)`; Func regions are marked by
// produce/consume. What it establishes (ARCHITECTURE.md, "Profiling semantics"):
//  - a slot table: slot 0 `overhead`, then one slot per Func in walk order, then one slot per
//    copied buffer and direction, `<f> (copy to device)` / `<f> (copy to host)`;
//  - `tally_profiler_start` opens each pipeline function, and `tally_profiler_end` is registered
//    as a destructor so that it runs on every exit, errors included;
//  - `produce f` switches to f's slot; the end of `produce f` and of `consume f` switches back to
//    the enclosing slot (times are exclusive);
//  - each copy switches to its copy slot before the call and back after its check; a copy to
//    the device is followed by a global device sync (copies may be asynchronous), a copy to the
//    host is not (it blocks already);
//  - each kernel launch gets exactly one buffer-free `halide_device_sync_global` with its own
//    assert, placed after the launch's assert so that a failed launch reports as a launch;
//  - except under `profile_timestamps`: no sync after launches or copies at all (the device is
//    never serialised; its time comes from device timestamps the runtime reads where the
//    pipeline blocks anyway), everything else as above;
//  - heap allocations and device allocations are reported to the profiler per Func;
//  - a parallel loop's tasks (parallel loop bodies and the closures Halide outlined for
//    halide_do_par_for) run in worker contexts that the runtime's thread pool opens and ends
//    around each task, in the slot current where the loop starts (every run starts with
//    TALLY_PROFILER_FLAG_POOL_CONTEXTS): a task makes no profiler call of its own unless it
//    switches slots inside, on `tally_profiler_current_context()`. The task functions of
//    halide_do_parallel_tasks (async) announce their worker context and set its slot themselves,
//    and so do the tasks of a `fork` or `acquire` (each branch, after the acquires it starts
//    with: the runtime takes those before the task runs).
//
// Strategy: 1. find the pipeline functions and the closures they call; 2. collect the slot table
// by walking each pipeline (and its closures, at their call sites) in order; 3. rewrite each
// function with the Instrument mutator; 4. add the prologue. A function that already calls
// tally_profiler_start or tally_profiler_thread_begin is left alone, so running twice changes
// nothing; so is one that Halide instrumented itself (it calls halide_profiler_pipeline_start,
// Halide 21's halide_profiler_instance_start, or, in its closures,
// halide_profiler_incr_active_threads / _set_current_func): the runtime
// serves Halide's profiler ABI, and a second set of probes would report every run twice.
// Closures are the functions halide_do_par_for runs and the task functions of
// halide_do_parallel_tasks (task_closures in RuntimeCalls.h).

#include "tally/Passes.h"

#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "ir/LargeStack.h"
#include "ir/RuntimeCalls.h"
#include "ir/UniqueNames.h"
#include "tally/Error.h"
#include "tally/IRMutator.h"
#include "tally/IRVisitor.h"
#include "tally_runtime.h"

namespace tally {

namespace {

/** The names the probes bind in one function: the run (`tally_prof`) and a worker's context
 * (`tally_prof_ctx`), or `tally_prof$1`, ... where the function already uses those names (an
 * argument named `tally_prof` must keep its meaning). */
struct ProbeNames {
    std::string inst, ctx;
    /** Every name the function uses, for the other names the probes bind (an allocation's byte
     * count, `<buffer>.tally_bytes`, or `<buffer>.tally_bytes$1` where that is taken). */
    UniqueNames taken{"$"};
};

ProbeNames probe_names(const LoweredFunc &f) {
    UniqueNames names("$", "tally_prof");
    for (const Argument &a : f.args) {
        names.reserve(a.name);
    }
    names.reserve_names_in(f.body);
    ProbeNames n;
    n.inst = names.make("tally_prof");
    n.ctx = names.make("tally_prof_ctx");
    for (const Argument &a : f.args) {
        n.taken.reserve(a.name);
    }
    n.taken.reserve_names_in(f.body);
    n.taken.reserve(n.inst);
    n.taken.reserve(n.ctx);
    return n;
}

Expr handle_var(const std::string &n) {
    return Variable::make(Handle(), n);
}

Expr call_i32(const std::string &n, std::vector<Expr> args) {
    return Call::make(Int(32), n, std::move(args), Call::Extern);
}

Stmt set_current(const Expr &ctx, int slot) {
    return Evaluate::make(
        call_i32(runtime::tally_profiler_set_current, {ctx, make_const(Int(32), slot)}));
}

/** Does `s` use the name `n` (as a variable)? */
bool uses_name(const Stmt &s, const std::string &n) {
    class Uses : public IRVisitor {
    public:
        const std::string &n;
        bool found = false;
        explicit Uses(const std::string &n) : n(n) {}
        using IRVisitor::visit;
        void visit(const Variable *op) override { found = found || op->name == n; }
    } u(n);
    s.accept(&u);
    return u.found;
}

/** A par_for task's body: binds the worker context the pool opened for the task where the body
 * switches slots on it, and adds nothing where it does not (a leaf task makes no call). */
Stmt with_task_context(const ProbeNames &names, const Stmt &body) {
    if (!uses_name(body, names.ctx)) {
        return body;
    }
    return LetStmt::make(
        names.ctx, Call::make(Handle(), runtime::tally_profiler_current_context, {}, Call::Extern),
        body);
}

/** The functions halide_do_parallel_tasks runs (async tasks): they open their own contexts. */
std::set<std::string> parallel_task_functions(const Module &m) {
    class Find : public IRVisitor {
    public:
        std::set<std::string> names;

    private:
        using IRVisitor::visit;
        void visit(const Call *op) override {
            if (op->name == runtime::halide_do_parallel_tasks) {
                for (const std::string &c : task_closures(op)) {
                    names.insert(c);
                }
            }
            IRVisitor::visit(op);
        }
    } find;
    for (const LoweredFunc &f : m.functions) {
        if (f.body.defined()) {
            f.body.accept(&find);
        }
    }
    return std::move(find.names);
}

/** Appends `tail` at the end of `body`, inside the scopes of its trailing lets and
 * allocations when `tail` does not use their names: the printed text then needs no braces.
 * Costs the length of that trailing chain, which a `free`, a produce/consume or a loop ends;
 * only heap allocations without a `free`, nested one in the next, make it add up to n^2. */
Stmt append_inside(const Stmt &body, const Stmt &tail) {
    if (const LetStmt *l = body.as<LetStmt>()) {
        if (!uses_name(tail, l->name)) {
            return LetStmt::make(l->name, l->value, append_inside(l->body, tail));
        }
    } else if (const Allocate *a = body.as<Allocate>()) {
        if (!uses_name(tail, a->name)) {
            return Allocate::make(a->name, a->type, a->memory_type, a->extents, a->condition,
                                  append_inside(a->body, tail), a->new_expr, a->free_function);
        }
    } else if (const Block *b = body.as<Block>()) {
        return Block::make(b->first, append_inside(b->rest, tail));
    }
    return Block::make(body, tail);
}

/** The Func a buffer expression belongs to: `f.buffer` (possibly cast) names f; any other
 * variable names itself. */
std::string buffer_func(const Expr &e) {
    std::string f = buffer_name_of(e);
    Expr x = e;
    while (const Cast *c = x.as<Cast>()) {
        x = c->value;
    }
    const Variable *v = x.as<Variable>();
    return !f.empty() ? f : v ? v->name : "<buffer>";
}

bool calls_any(const Stmt &s, const std::set<std::string> &names) {
    class Finder : public IRVisitor {
    public:
        const std::set<std::string> &names;
        bool found = false;
        explicit Finder(const std::set<std::string> &n) : names(n) {}
        using IRVisitor::visit;
        void visit(const Call *op) override {
            found = found || names.count(op->name);
            IRVisitor::visit(op);
        }
    } f(names);
    if (s.defined()) {
        s.accept(&f);
    }
    return f.found;
}

/** The slot table of one pipeline. */
struct SlotTable {
    std::vector<std::string> names{"overhead"};
    std::vector<int> kinds{TALLY_SLOT_FUNC};
    std::vector<int> parents{-1};  // a copy slot's Func slot (-1: a Func, or a copy of no Func)
    std::unordered_map<std::string, int> func_slot;
    std::map<std::pair<std::string, bool>, int> copy_slot;  // (func, to_device)
    std::map<std::string, int> closure_slot;  // slot current where a closure is called

    int func(const std::string &f) const {
        auto it = func_slot.find(f);
        return it == func_slot.end() ? -1 : it->second;
    }
};

/** Walks a pipeline in order: Funcs by their producers, copies by their calls, and closures
 * at their call sites. */
class CollectSlots : public IRVisitor {
public:
    CollectSlots(const Module &m, SlotTable *t) : m(m), table(t) {}

    void run(const Stmt &s) {
        s.accept(this);
        // Copy slots follow the Func slots, in walk order.
        for (const auto &c : copies) {
            if (table->copy_slot.count(c)) {
                continue;
            }
            table->copy_slot[c] = int(table->names.size());
            table->names.push_back(c.first + (c.second ? " (copy to device)" : " (copy to host)"));
            table->kinds.push_back(c.second ? TALLY_SLOT_COPY_TO_DEVICE : TALLY_SLOT_COPY_TO_HOST);
            table->parents.push_back(table->func(c.first));
        }
    }

private:
    const Module &m;
    SlotTable *table;
    std::vector<std::pair<std::string, bool>> copies;
    std::vector<int> current{0};
    std::set<std::string> visiting;

    using IRVisitor::visit;

    void visit(const ProducerConsumer *op) override {
        if (!op->is_producer) {
            IRVisitor::visit(op);
            return;
        }
        if (!table->func_slot.count(op->name)) {
            table->func_slot[op->name] = int(table->names.size());
            table->names.push_back(op->name);
            table->kinds.push_back(TALLY_SLOT_FUNC);
            table->parents.push_back(-1);
        }
        current.push_back(table->func_slot[op->name]);
        IRVisitor::visit(op);
        current.pop_back();
    }
    void visit(const For *op) override {
        if (is_gpu_for_type(op->for_type)) {
            return;  // device code: no probes inside
        }
        IRVisitor::visit(op);
    }
    void visit(const Call *op) override {
        bool to_device;
        if (as_copy_call(op, &to_device)) {
            copies.emplace_back(buffer_func(op->args[0]), to_device);
        }
        IRVisitor::visit(op);
        for (const std::string &closure : task_closures(op)) {
            if (visiting.count(closure)) {
                continue;
            }
            if (const LoweredFunc *f = m.find_function(closure)) {
                table->closure_slot.emplace(closure, current.back());
                visiting.insert(closure);
                f->body.accept(this);
                visiting.erase(closure);
            }
        }
    }
};

/** Rewrites one function body: slot switches, copy slots, syncs, memory, worker contexts. */
class Instrument : public IRMutator {
public:
    Instrument(const SlotTable &t, const ProfilingOptions &o, const ProbeNames &n, int entry_slot,
               bool worker)
        : table(t), opts(o), names(n), ctx(handle_var(worker ? n.ctx : n.inst)),
          inst(handle_var(n.inst)) {
        current.push_back(entry_slot);
    }

private:
    const SlotTable &table;
    const ProfilingOptions &opts;
    ProbeNames names;
    Expr ctx, inst;
    std::vector<int> current;
    struct HeapAlloc {
        int slot;
        std::string bytes_var;
    };
    std::unordered_map<std::string, std::vector<HeapAlloc>> heap_allocs;
    // Buffers whose device allocation has been reported: Halide may call device_malloc on a
    // buffer that device_and_host_malloc already allocated (the runtime makes it a no-op).
    std::set<std::string> device_reported;

    using IRMutator::visit;

    int slot_for_buffer(const std::string &name) const {
        int s = table.func(name);
        if (s < 0) {
            // Halide names tuple components `f.0`, `f.1`: bill them to f.
            size_t dot = name.rfind('.');
            if (dot != std::string::npos) {
                s = table.func(name.substr(0, dot));
            }
        }
        return s < 0 ? current.back() : s;
    }

    Stmt memory_call(bool alloc, int slot, tally_memory_kind_t kind, const Expr &bytes) {
        return Evaluate::make(call_i32(
            alloc ? runtime::tally_profiler_memory_allocate : runtime::tally_profiler_memory_free,
            {inst, make_const(Int(32), slot), make_const(Int(32), kind), bytes}));
    }

    Expr buffer_bytes(const Expr &buf) {
        return Call::make(UInt(64), runtime::tally_buffer_size_in_bytes, {buf}, Call::Extern);
    }

    Stmt visit(const ProducerConsumer *op) override {
        int enclosing = current.back();
        if (op->is_producer) {
            int slot = table.func(op->name);
            internal_assert(slot >= 0) << "no slot for " << op->name;
            current.push_back(slot);
            Stmt body = mutate(op->body);
            current.pop_back();
            return ProducerConsumer::make(
                op->name, true,
                Block::make(set_current(ctx, slot),
                            append_inside(body, set_current(ctx, enclosing))));
        }
        Stmt body = mutate(op->body);
        return ProducerConsumer::make(op->name, false,
                                      append_inside(body, set_current(ctx, enclosing)));
    }

    Stmt visit(const For *op) override {
        if (is_gpu_for_type(op->for_type)) {
            return op;
        }
        if (op->for_type != ForType::Parallel) {
            return IRMutator::visit(op);
        }
        // A parallel body runs on worker threads, each task in the worker context the pool opens
        // for it in the slot current here; its switches go to that context.
        Expr saved = ctx;
        ctx = handle_var(names.ctx);
        Stmt body = with_task_context(names, mutate(op->body));
        ctx = saved;
        return For::make(op->name, op->min, op->extent, op->for_type, op->device_api, body);
    }

    // Async tasks (a fork's branches, the body of an acquire that does not start a branch) run
    // on worker threads, one task each, as halide_do_parallel_tasks runs Halide's task
    // functions: each opens its worker context (the thread counts as active from there) in the
    // slot current where the tasks start, and ends it when done. The acquires a task starts
    // with stay outside: the runtime takes them before the task runs, on no thread's time.
    Stmt visit(const Fork *op) override {
        std::vector<Stmt> tasks;
        collect_tasks(Stmt(op), &tasks);
        Stmt out = tasks.back();
        for (size_t i = tasks.size() - 1; i-- > 0;) {
            out = Fork::make(tasks[i], out);
        }
        return out;
    }
    Stmt visit(const Acquire *op) override { return async_task(Stmt(op)); }

    void collect_tasks(const Stmt &s, std::vector<Stmt> *tasks) {
        if (const Fork *f = s.as<Fork>()) {
            collect_tasks(f->first, tasks);
            collect_tasks(f->rest, tasks);
            return;
        }
        tasks->push_back(async_task(s));
    }

    Stmt async_task(const Stmt &s) {
        if (const Acquire *a = s.as<Acquire>()) {
            return Acquire::make(a->semaphore, a->count, async_task(a->body));
        }
        Expr saved = ctx;
        ctx = handle_var(names.ctx);
        Stmt body = mutate(s);
        ctx = saved;
        Expr worker = handle_var(names.ctx);
        return LetStmt::make(
            names.ctx,
            Call::make(Handle(), runtime::tally_profiler_thread_begin, {inst}, Call::Extern),
            Block::make(set_current(worker, current.back()),
                        append_inside(body, Evaluate::make(call_i32(
                                                runtime::tally_profiler_thread_end, {worker})))));
    }

    /** Splits a let body into its leading `assert(name == 0, ...)` and the rest. */
    static bool split_check(const std::string &name, const Stmt &body, Stmt *check, Stmt *rest) {
        Stmt first = body, tail;
        if (const Block *b = body.as<Block>()) {
            first = b->first;
            tail = b->rest;
        }
        if (!is_result_check(first, name)) {
            return false;
        }
        *check = first;
        *rest = tail;
        return true;
    }

    static bool starts_with_sync(const Stmt &s) {
        Stmt first = s;
        if (const Block *b = s.as<Block>()) {
            first = b->first;
        }
        const LetStmt *l = first.as<LetStmt>();
        const Call *c = l ? l->value.as<Call>() : nullptr;
        if (c && c->name == runtime::halide_device_sync_global) {
            return true;
        }
        const Evaluate *e = first.as<Evaluate>();
        c = e ? e->value.as<Call>() : nullptr;
        return c && c->name == runtime::halide_device_sync_global;
    }

    Stmt sync_global(const Expr &iface, const Stmt &rest) {
        return checked_call(
            result_name(runtime::halide_device_sync_global),
            Call::make(Int(32), runtime::halide_device_sync_global, {iface}, Call::Extern), rest);
    }

    Stmt join(const Stmt &a, const Stmt &b) {
        if (!a.defined()) {
            return b;
        }
        if (!b.defined()) {
            return a;
        }
        return Block::make(a, b);
    }

    Stmt visit(const LetStmt *op) override {
        const Call *c = op->value.as<Call>();
        bool to_device;
        Stmt check, rest;
        bool checked = split_check(op->name, op->body, &check, &rest);

        if (as_copy_call(op->value, &to_device)) {
            // Copy slot on, the call and its check, the sync for a copy to the device, back.
            int slot = table.copy_slot.at({buffer_func(c->args[0]), to_device});
            Stmt after = mutate(checked ? rest : op->body);
            Stmt tail = join(set_current(ctx, current.back()), after);
            if (to_device && opts.inject_device_sync && !starts_with_sync(after) &&
                c->args.size() > 1) {
                tail = sync_global(c->args[1], tail);
            }
            Stmt body = checked ? Block::make(check, tail) : tail;
            return Block::make(set_current(ctx, slot), LetStmt::make(op->name, op->value, body));
        }
        if (DeviceAPI api = launch_api(c); api != DeviceAPI::None && checked) {
            // One buffer-free sync after the launch's own check, never before it.
            Stmt after = mutate(rest);
            if (opts.inject_device_sync && !starts_with_sync(rest)) {
                after = sync_global(device_interface_call(api), after);
            }
            return LetStmt::make(op->name, op->value, join(check, after));
        }
        if (c && checked &&
            (c->name == runtime::halide_device_malloc ||
             c->name == runtime::halide_device_and_host_malloc) &&
            !c->args.empty()) {
            std::string buf = buffer_func(c->args[0]);
            if (!device_reported.insert(buf).second) {
                return IRMutator::visit(op);
            }
            int slot = slot_for_buffer(buf);
            Stmt after = mutate(rest);
            Stmt acct = memory_call(true, slot, TALLY_MEMORY_DEVICE, buffer_bytes(c->args[0]));
            if (c->name == runtime::halide_device_and_host_malloc) {
                acct = Block::make(
                    acct, memory_call(true, slot, TALLY_MEMORY_HEAP, buffer_bytes(c->args[0])));
            }
            return LetStmt::make(op->name, op->value, Block::make({check, acct, after}));
        }
        if (c &&
            (c->name == runtime::halide_device_free ||
             c->name == runtime::halide_device_and_host_free) &&
            !c->args.empty()) {
            std::string buf = buffer_func(c->args[0]);
            if (!device_reported.erase(buf)) {
                return IRMutator::visit(op);
            }
            int slot = slot_for_buffer(buf);
            Stmt acct = memory_call(false, slot, TALLY_MEMORY_DEVICE, buffer_bytes(c->args[0]));
            if (c->name == runtime::halide_device_and_host_free) {
                acct = Block::make(
                    acct, memory_call(false, slot, TALLY_MEMORY_HEAP, buffer_bytes(c->args[0])));
            }
            return Block::make(acct, IRMutator::visit(op));
        }
        return IRMutator::visit(op);
    }

    Stmt visit(const Evaluate *op) override {
        bool to_device;
        if (const Call *c = as_copy_call(op->value, &to_device)) {
            int slot = table.copy_slot.at({buffer_func(c->args[0]), to_device});
            Stmt s = Block::make(set_current(ctx, slot), op);
            if (to_device && opts.inject_device_sync && c->args.size() > 1) {
                s = Block::make(s, sync_global(c->args[1], Stmt()));
            }
            return Block::make(s, set_current(ctx, current.back()));
        }
        return op;
    }

    Stmt visit(const Allocate *op) override {
        if (!allocation_uses_heap(op)) {
            return IRMutator::visit(op);
        }
        // The size is bound once, so that the free reports the same number even where the
        // extents' names are shadowed.
        int slot = slot_for_buffer(op->name);
        std::string bytes_var = names.taken.make(op->name + ".tally_bytes");
        Expr bytes = make_const(UInt(64), op->type.bytes() * op->type.lanes());
        for (const Expr &e : op->extents) {
            bytes = Mul::make(bytes, Cast::make(UInt(64), e));
        }
        heap_allocs[op->name].push_back({slot, bytes_var});
        Stmt body = mutate(op->body);
        bool freed = heap_allocs[op->name].back().bytes_var.empty();
        heap_allocs[op->name].pop_back();
        if (heap_allocs[op->name].empty()) {
            heap_allocs.erase(op->name);
        }
        Expr bytes_v = Variable::make(UInt(64), bytes_var);
        if (!freed) {
            body = append_inside(body, memory_call(false, slot, TALLY_MEMORY_HEAP, bytes_v));
        }
        // The allocation is reported inside its body, where it has succeeded: a halide_malloc
        // that fails exits before the body, so the profiler never counts it.
        body = Block::make(memory_call(true, slot, TALLY_MEMORY_HEAP, bytes_v), body);
        Stmt alloc = Allocate::make(op->name, op->type, op->memory_type, op->extents, op->condition,
                                    body, op->new_expr, op->free_function);
        return LetStmt::make(bytes_var, bytes, alloc);
    }

    Stmt visit(const Free *op) override {
        auto it = heap_allocs.find(op->name);
        if (it == heap_allocs.end() || it->second.back().bytes_var.empty()) {
            return op;
        }
        HeapAlloc &a = it->second.back();
        Stmt s = Block::make(
            memory_call(false, a.slot, TALLY_MEMORY_HEAP, Variable::make(UInt(64), a.bytes_var)),
            op);
        a.bytes_var.clear();  // reported: the end of the allocation adds nothing more
        return s;
    }
};

Expr string_table(const std::vector<std::string> &names) {
    std::vector<Expr> e;
    for (const std::string &n : names) {
        e.push_back(StringImm::make(n));
    }
    return Call::make(Handle(), Call::make_struct, e);
}

Expr int_table(const std::vector<int> &v) {
    std::vector<Expr> e;
    for (int x : v) {
        e.push_back(make_const(Int(32), x));
    }
    return Call::make(Handle(), Call::make_struct, e);
}

/** The target as the report shows it: the target string, then the module's notes (what lowering
 * did that the text does not say, such as a retargeted GPU API) in parentheses. */
std::string report_target(const Module &m) {
    std::string s = m.target.to_string();
    for (const std::string &n : m.notes) {
        s += " (" + n + ")";
    }
    return s;
}

/** Opens a pipeline: start, its check, and the end registered for every exit. */
Stmt pipeline_prologue(const std::string &name, const Module &m, const SlotTable &table,
                       const ProbeNames &names, const Stmt &body) {
    const Target &t = m.target;
    int flags = TALLY_PROFILER_FLAG_POOL_CONTEXTS |
                (t.has_feature(Target::ProfileByTimer) ? TALLY_PROFILER_FLAG_TIMER : 0) |
                (t.profile_timestamps() ? TALLY_PROFILER_FLAG_TIMESTAMPS : 0) |
                TALLY_PROFILER_FLAG_DEVICE_API(runtime_device_api(t.gpu_api()));
    Expr start =
        Call::make(Handle(), runtime::tally_profiler_start,
                   {StringImm::make(name), StringImm::make(report_target(m)),
                    make_const(Int(32), int(table.names.size())), string_table(table.names),
                    int_table(table.kinds), int_table(table.parents), make_const(Int(32), flags)},
                   Call::Extern);
    Expr inst = handle_var(names.inst);
    Expr not_null = NE::make(Reinterpret::make(UInt(64), inst), make_zero(UInt(64)));
    Stmt check = AssertStmt::make(not_null, make_const(Int(32), -1));
    Stmt end = Evaluate::make(Call::make(Handle(), Call::register_destructor,
                                         {StringImm::make(runtime::tally_profiler_end), inst}));
    return LetStmt::make(names.inst, start, Block::make({check, end, body}));
}

/** Opens a closure that Halide outlined for halide_do_par_for: its task runs in the worker
 * context the pool opened; the run is bound where the body reports memory to it. */
Stmt par_for_prologue(const ProbeNames &names, const Stmt &body) {
    Stmt b = with_task_context(names, body);
    if (!uses_name(b, names.inst)) {
        return b;
    }
    return LetStmt::make(
        names.inst,
        Call::make(Handle(), runtime::tally_profiler_current_instance, {}, Call::Extern), b);
}

/** Opens an async task function (halide_do_parallel_tasks): a worker context on the instance of
 * the pipeline that called it, in `slot`. */
Stmt task_prologue(int slot, const ProbeNames &names, const Stmt &body) {
    Expr inst = handle_var(names.inst), worker = handle_var(names.ctx);
    Stmt inner = LetStmt::make(
        names.ctx, Call::make(Handle(), runtime::tally_profiler_thread_begin, {inst}, Call::Extern),
        Block::make(set_current(worker, slot),
                    append_inside(body, Evaluate::make(call_i32(runtime::tally_profiler_thread_end,
                                                                {worker})))));
    return LetStmt::make(
        names.inst,
        Call::make(Handle(), runtime::tally_profiler_current_instance, {}, Call::Extern), inner);
}

}  // namespace

static Module inject_profiling_impl(const Module &m, const ProfilingOptions &requested) {
    if (!m.target.profiling()) {
        return m;
    }
    // Timestamp mode never injects a sync, whatever the options ask for.
    ProfilingOptions opts = requested;
    opts.inject_device_sync = opts.inject_device_sync && !m.target.profile_timestamps();
    // 1. Pipelines are the entry points: neither Internal nor run as a parallel closure.
    std::set<std::string> closures = par_for_closures(m);
    const std::set<std::string> async_tasks = parallel_task_functions(m);
    // Functions Halide instrumented itself (-profile) are left as they are: the runtime serves
    // Halide's profiler ABI, so they report once, through Halide's probes.
    const std::set<std::string> markers = {runtime::tally_profiler_start,
                                           runtime::tally_profiler_thread_begin,
                                           runtime::tally_profiler_current_context,
                                           runtime::halide_profiler_pipeline_start,
                                           runtime::halide_profiler_instance_start,
                                           runtime::halide_profiler_incr_active_threads,
                                           runtime::halide_profiler_set_current_func};

    Module out = m;
    std::map<std::string, const SlotTable *> closure_tables;
    std::vector<SlotTable> tables(m.functions.size());
    for (size_t i = 0; i < m.functions.size(); i++) {
        const LoweredFunc &f = m.functions[i];
        if (!is_pipeline_function(f, closures) || calls_any(f.body, markers)) {
            continue;
        }
        // 2. The slot table, in walk order through the pipeline and its closures.
        CollectSlots collect(m, &tables[i]);
        collect.run(f.body);
        for (const auto &kv : tables[i].closure_slot) {
            closure_tables.emplace(kv.first, &tables[i]);
        }
        // 3-4. Probes, then the prologue.
        ProbeNames names = probe_names(f);
        Instrument inst(tables[i], opts, names, 0, false);
        out.functions[i].body = pipeline_prologue(f.name, m, tables[i], names, inst.mutate(f.body));
    }
    for (size_t i = 0; i < m.functions.size(); i++) {
        const LoweredFunc &f = m.functions[i];
        auto it = closure_tables.find(f.name);
        if (it == closure_tables.end() || calls_any(f.body, markers)) {
            continue;
        }
        int slot = it->second->closure_slot.at(f.name);
        ProbeNames names = probe_names(f);
        Instrument inst(*it->second, opts, names, slot, true);
        Stmt body = inst.mutate(f.body);
        out.functions[i].body = async_tasks.count(f.name) ? task_prologue(slot, names, body)
                                                          : par_for_prologue(names, body);
    }
    return out;
}

Module inject_profiling(const Module &m, const ProfilingOptions &opts) {
    return with_large_stack([&]() { return inject_profiling_impl(m, opts); });
}

}  // namespace tally
