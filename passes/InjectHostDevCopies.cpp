// inject-host-dev-copies: makes data movement between host and device explicit.
//
// Where it runs: first in lower(), while GPU loops are still loop nests in the function body
// (offload-gpu-loops turns them into kernels afterwards). Device code is an outermost loop of a
// GPU for-type (normally a gpu_block nest); everything else is host code.
//
// Strategy. Only buffers that some device nest loads or stores are tracked ("device buffers":
// buffer arguments, module constants and allocations); a function that touches none is returned
// as it came, node for node. For each tracked buffer the pass knows where a current copy of its
// contents lives: on the host, on a device (one API), on both, or — after control flow that
// disagrees — on neither for sure. Function arguments start on the host only; a fresh
// allocation holds nothing yet, so both sides count as current. The walk visits host
// statements in program order, threading that state:
//  - a device nest that touches X (reads it, or writes it: a write may be partial, and the
//    device needs memory for X) copies X to the device first unless the device copy is current;
//    a write leaves X current on the device only and is followed by a device-dirty mark;
//  - a host statement that touches X copies it to the host first unless the host copy is
//    current; a write leaves X current on the host only and is followed by a host-dirty mark;
//  - `if`: both branches start from the same state and the results are merged (a side is
//    current only if it is current on both paths), so later touches copy where either path
//    needs it and the runtime's dirty bits make the possibly redundant copy cheap;
//  - a host loop that contains device code is walked to a fixpoint (entry state merged with the
//    state at the end of its body, until stable) by dry runs whose changes are rolled back,
//    and then once for real; buffers it reads but never writes are copied once, in front of
//    it. Other host loops are single host statements, so their copies land in front of them;
//  - at the end of the function, buffer arguments whose host copy is not current are copied
//    back.
// Copies are placed immediately before the statement that needs them, inside the innermost
// produce/consume, allocation, let chain or branch containing it. Each runtime call is checked
// in Halide's form, `let r = call(...)` then `assert(r == 0, r)`, and the let scopes over the
// rest of its block: statement lists are therefore built as sequences of items (statements,
// and let bindings that wrap everything after them) and folded into IR at the end of each
// block. That is also why the walker is not an IRMutator: a statement does not map to one
// statement, and a state has to be threaded through siblings in order. Result names are made
// unique per function with Halide's `$n` suffixes, handed out in walk order.
//
// Cost: linear in the size of the function, times the nesting depth of host loops that hold
// device code (their bodies are walked to a fixpoint). Which allocations and loops hold device
// code is found in one walk up front (IndexDeviceCode); the state is a map that changes are
// journaled against, so that an `if` or a loop joins only the buffers its body changed; fresh
// names resume their count per base name.
//
// Allocations that device code touches get a one-dimensional `X.buffer` descriptor over their
// host memory, `halide_device_free_as_destructor` registered on it (so that an error exit
// releases the device memory too, as in Halide's lowering), a `halide_device_malloc` right after
// it and a `halide_device_free` before their `free X` (or at the end of their scope when there is
// none).
//
// Idempotence: copies, dirty marks and descriptors already present (from an earlier run, or
// from Halide) are read as facts: a `halide_copy_to_*` let makes that side current, a dirty
// mark right where one would be placed is kept instead of adding another, and an allocation
// whose `X.buffer` is already bound gets no second descriptor. A second run therefore finds
// nothing to add.

#include "tally/Passes.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/LargeStack.h"
#include "ir/RuntimeCalls.h"
#include "ir/Scope.h"
#include "ir/UniqueNames.h"
#include "tally/Error.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

Type interface_ptr_type() {
    return Handle("halide_device_interface_t");
}
Type dimension_ptr_type() {
    return Handle("halide_dimension_t");
}

Expr int32(int64_t v) {
    return IntImm::make(Int(32), v);
}

Expr device_interface(DeviceAPI api) {
    user_assert(has_gpu_backend(api))
        << "inject-host-dev-copies: device API " << device_api_name(api)
        << " is not supported (Tally supports CUDA, OpenCL and Vulkan)";
    return device_interface_call(api);
}

/** The Call a `let` or `Evaluate` of a runtime call holds, if it is one named `fn`. */
const Call *call_named(const Expr &e, const char *fn) {
    const Call *c = e.as<Call>();
    return c && c->name == fn ? c : nullptr;
}

/** Where the current contents of one buffer live. `device` names the API holding a current
 * copy, or None. A fresh allocation is current everywhere (it holds nothing yet). */
struct Residency {
    bool host = true;
    DeviceAPI device = DeviceAPI::None;
    bool operator==(const Residency &o) const { return host == o.host && device == o.device; }
};
using State = std::map<std::string, Residency>;

/** One buffer after two paths join: a side is current only if it is current on both. A buffer
 * that the first path does not track stays untracked; one only the first tracks keeps its
 * residency there. (Tracking is scoped, so both paths track the same buffers in practice.) */
std::optional<Residency> join(const std::optional<Residency> &a,
                              const std::optional<Residency> &b) {
    if (!a || !b) {
        return a;
    }
    Residency out = *a;
    out.host = a->host && b->host;
    if (a->device != b->device) {
        out.device = DeviceAPI::None;
    }
    return out;
}

/** Buffers loaded and stored, each list in order of first touch; with `host_only`, those
 * touched outside GPU loops. */
class FindTouches : public IRVisitor {
public:
    explicit FindTouches(bool host_only = false) : host_only(host_only) {}
    std::vector<std::string> touched, written;

private:
    using IRVisitor::visit;
    bool host_only;
    std::set<std::string> seen, seen_written;

    void visit(const For *op) override {
        if (!host_only || !is_gpu_for_type(op->for_type)) {
            IRVisitor::visit(op);
        }
    }

    void touch(const std::string &n) {
        if (seen.insert(n).second) {
            touched.push_back(n);
        }
    }
    void visit(const Load *op) override {
        IRVisitor::visit(op);
        touch(op->name);
    }
    void visit(const Store *op) override {
        IRVisitor::visit(op);
        touch(op->name);
        if (seen_written.insert(op->name).second) {
            written.push_back(op->name);
        }
    }
};

template <typename T>
FindTouches touches_of(const T &node, bool host_only = false) {
    FindTouches f(host_only);
    if (node.defined()) {
        node.accept(&f);
    }
    return f;
}

/** For every buffer that device code touches, the device API of the first nest touching it
 * (unresolved: Default_GPU stays as written). Also says whether there is device code at all. */
class FindDeviceUse : public IRVisitor {
public:
    std::map<std::string, DeviceAPI> first_api;
    bool any = false;

private:
    using IRVisitor::visit;
    void visit(const For *op) override {
        if (!is_gpu_for_type(op->for_type)) {
            IRVisitor::visit(op);
            return;
        }
        any = true;
        FindTouches t;
        op->accept(&t);
        for (const std::string &n : t.touched) {
            first_api.emplace(n, op->device_api);
        }
    }
};

FindDeviceUse device_use_of(const Stmt &s) {
    FindDeviceUse f;
    if (s.defined()) {
        s.accept(&f);
    }
    return f;
}

/** What the walk asks about host allocations and loops, answered for a whole function in one
 * walk rather than by walking each allocation's or loop's body again when the walk reaches it
 * (allocations nest as deep as the pipeline is long). For each host allocation: the API of the
 * first device nest in its body that touches a buffer of its name (what device_use_of(body)
 * says for that name), or none. For each host loop: whether its body holds device code. Nodes
 * are keyed by address: a node shared between places has the same body, so the same answer. */
class IndexDeviceCode : public IRVisitor {
public:
    std::unordered_map<const Allocate *, std::optional<DeviceAPI>> alloc_api;
    std::unordered_set<const For *> loops_with_device_code;

private:
    using IRVisitor::visit;
    // The enclosing host allocations of each name, outermost first.
    std::unordered_map<std::string, std::vector<const Allocate *>> open;
    bool found = false;  // device code seen since the innermost enclosing loop began

    void visit(const Allocate *op) override {
        alloc_api.emplace(op, std::nullopt);
        std::vector<const Allocate *> &stack = open[op->name];
        stack.push_back(op);
        IRVisitor::visit(op);
        stack.pop_back();
    }

    void visit(const For *op) override {
        if (is_gpu_for_type(op->for_type)) {
            found = true;
            FindTouches t;
            op->accept(&t);
            for (const std::string &n : t.touched) {
                auto it = open.find(n);
                if (it == open.end()) {
                    continue;
                }
                for (const Allocate *a : it->second) {
                    std::optional<DeviceAPI> &api = alloc_api[a];
                    if (!api) {
                        api = op->device_api;
                    }
                }
            }
            return;
        }
        bool outer = found;
        found = false;
        IRVisitor::visit(op);
        if (found) {
            loops_with_device_code.insert(op);
        }
        found = found || outer;
    }
};

// Every name the pass generates (the results of runtime calls) starts with this, so only names
// that do can collide with one: the others need not be collected.
const char *const generated_prefix = "halide_";

/** One entry of a statement list under construction: a statement, or a let binding that
 * scopes over every item after it. */
struct Item {
    std::string let_name;
    Expr let_value;  // defined: a let binding
    Stmt stmt;
};

struct Seq {
    std::vector<Item> items;
    bool changed = false;  // anything inserted, or any statement rebuilt

    void let(const std::string &n, Expr v) { items.push_back({n, std::move(v), Stmt()}); }
    void stmt(Stmt s) { items.push_back({"", Expr(), std::move(s)}); }
};

/** Folds a sequence into IR: right-nested blocks, lets wrapping what follows them. */
Stmt fold(const Seq &seq) {
    Stmt rest;
    // Statements after the last let seen (walking backwards), last first until a let needs
    // them: reversing once keeps a long run linear.
    std::vector<Stmt> run;
    for (auto it = seq.items.rbegin(); it != seq.items.rend(); ++it) {
        if (!it->let_value.defined()) {
            run.push_back(it->stmt);
            continue;
        }
        std::reverse(run.begin(), run.end());
        if (rest.defined()) {
            run.push_back(rest);
        }
        Stmt body = Block::make(run);
        internal_assert(body.defined()) << "let " << it->let_name << " with nothing after it";
        rest = LetStmt::make(it->let_name, it->let_value, body);
        run.clear();
    }
    std::reverse(run.begin(), run.end());
    if (rest.defined()) {
        run.push_back(rest);
    }
    return Block::make(run);
}

/** What the walk needs to know about an allocation while inside it. */
struct AllocFrame {
    std::string name;
    bool owns_device_free = false;  // we added its device malloc, so we free it
    bool freed = false;
};

/** The walker: threads buffer residency through host statements in program order and builds
 * the rewritten statements. Loop fixpoints run dry walks on the walker itself: a dry walk
 * names nothing and frees nothing, and the residency changes it makes are rolled back from a
 * journal, so that the work at an `if` or a loop is proportional to what its body changes
 * rather than to the number of buffers tracked. */
class PlaceCopies {
public:
    PlaceCopies(const Target &target, UniqueNames names, const IndexDeviceCode &index)
        : target(target), names(std::move(names)), index(index) {}

    State state;

    /** Rewrites a function body; `args` are the buffer arguments, checked at the end. */
    Stmt run(const Stmt &body, const std::vector<std::string> &args) {
        SeqHook copy_back = [&](Seq &seq) {
            for (const std::string &x : args) {
                auto it = state.find(x);
                if (it != state.end() && !it->second.host) {
                    copy_to_host(seq, x);
                }
            }
        };
        return walk_body(body, nullptr, nullptr, &copy_back);
    }

private:
    using SeqHook = std::function<void(Seq &)>;

    Target target;
    UniqueNames names;  // result names, with the function's names that could collide with one
    const IndexDeviceCode &index;
    std::vector<AllocFrame> allocs;
    // Names of the lets in scope, innermost last, and the same names as a Scope.
    std::vector<std::string> lets_in_scope;
    Scope<> lets;
    // Residency changes, oldest first, as (buffer, residency before; none: untracked). Kept
    // while some `if` or loop is being walked, which rolls back and joins its branches by them.
    struct Change {
        std::string buffer;
        std::optional<Residency> before;
    };
    std::vector<Change> journal;
    int journal_users = 0;
    // Inside a loop's fixpoint iteration: the statements built are thrown away.
    bool dry = false;
    // What runs at the very end of the function (copying outputs back). It moves into an
    // allocation that ends the function, so that it lands inside that scope rather than after
    // it (which would need braces in the text).
    const SeqHook *tail_hook = nullptr;
    // Dirty marks owed to statements of the sequence being built. A mark goes right after the
    // statement that wrote the buffer (`at`, an index into the sequence); placing it waits
    // while only neutral statements follow, so that a mark already present a few statements
    // later (Halide puts its marks after the frees that follow a kernel) is recognised.
    struct PendingMark {
        std::string buffer;
        bool device;
        size_t at;
    };
    std::vector<PendingMark> pending_dirty;

    // -----------------------------------------------------------------------------------------
    // Building blocks

    /** `base`, or the first of `base$1`, `base$2`, ... that the function does not use. A dry
     * walk's statements are thrown away, so it takes no name. */
    std::string fresh_name(const std::string &base) { return dry ? base : names.make(base); }

    // -----------------------------------------------------------------------------------------
    // Residency, with the journal

    std::optional<Residency> residency_of(const std::string &x) const {
        auto it = state.find(x);
        return it == state.end() ? std::nullopt : std::optional<Residency>(it->second);
    }

    /** Sets (or, with none, removes) the residency of `x`, journaling the change. */
    void set_residency(const std::string &x, const std::optional<Residency> &r) {
        auto it = state.find(x);
        if (journal_users > 0) {
            journal.push_back(
                {x, it == state.end() ? std::nullopt : std::optional<Residency>(it->second)});
        }
        if (!r) {
            if (it != state.end()) {
                state.erase(it);
            }
        } else if (it == state.end()) {
            state.emplace(x, *r);
        } else {
            it->second = *r;
        }
    }

    /** The residency of `x`, tracked or not (untracked: the default, as `state[x]` gives). */
    Residency current(const std::string &x) const { return residency_of(x).value_or(Residency()); }

    /** Marks the journal for a later roll-back; pair with end_journal. */
    size_t begin_journal() {
        journal_users++;
        return journal.size();
    }
    void end_journal() {
        if (--journal_users == 0) {
            journal.clear();
        }
    }

    using Changes = std::map<std::string, std::optional<Residency>>;

    /** The buffers changed since `mark`, with their residency now. */
    Changes changes_since(size_t mark) const {
        Changes out;
        for (size_t i = mark; i < journal.size(); i++) {
            out.emplace(journal[i].buffer, std::nullopt);
        }
        for (auto &[x, r] : out) {
            r = residency_of(x);
        }
        return out;
    }

    /** Restores the state as it was at `mark`. */
    void roll_back(size_t mark) {
        while (journal.size() > mark) {
            Change &c = journal.back();
            if (c.before) {
                state[c.buffer] = *c.before;
            } else {
                state.erase(c.buffer);
            }
            journal.pop_back();
        }
    }

    void push_let(const std::string &n) {
        lets_in_scope.push_back(n);
        lets.push(n);
    }
    void pop_lets(size_t mark) {
        while (lets_in_scope.size() > mark) {
            lets.pop(lets_in_scope.back());
            lets_in_scope.pop_back();
        }
    }

    /** `let r = call` then `assert(r == 0, r)`. */
    void emit_checked(Seq &seq, const std::string &fn, Expr call) {
        std::string r = fresh_name(result_name(fn));
        seq.let(r, std::move(call));
        seq.stmt(result_check(r));
        seq.changed = true;
    }

    DeviceAPI resolve(DeviceAPI api) const {
        DeviceAPI resolved = resolve_device_api(api, target);
        user_assert(resolved != DeviceAPI::None)
            << "inject-host-dev-copies: a GPU loop uses Default_GPU, but target "
            << target.to_string() << " names no GPU API (add cuda, opencl or vulkan)";
        return resolved;
    }

    void copy_to_device(Seq &seq, const std::string &x, DeviceAPI api) {
        emit_checked(seq, runtime::halide_copy_to_device,
                     Call::make(Int(32), runtime::halide_copy_to_device,
                                {buffer_var(x), device_interface(api)}, Call::Extern));
        Residency r = current(x);
        r.device = api;
        set_residency(x, r);
    }

    void copy_to_host(Seq &seq, const std::string &x) {
        emit_checked(
            seq, runtime::halide_copy_to_host,
            Call::make(Int(32), runtime::halide_copy_to_host, {buffer_var(x)}, Call::Extern));
        Residency r = current(x);
        r.host = true;
        set_residency(x, r);
    }

    static Stmt dirty_mark(const std::string &x, bool device) {
        return Evaluate::make(Call::make(Int(32),
                                         device ? runtime::_halide_buffer_set_device_dirty
                                                : runtime::_halide_buffer_set_host_dirty,
                                         {buffer_var(x), make_one(Bool())}, Call::Extern));
    }

    /** Places the owed dirty marks where they belong. */
    void place_dirty_marks(Seq &seq) {
        // Back to front, so that earlier positions stay valid and equal ones keep their order.
        for (auto it = pending_dirty.rbegin(); it != pending_dirty.rend(); ++it) {
            internal_assert(it->at <= seq.items.size()) << "dirty mark past the sequence end";
            seq.items.insert(seq.items.begin() + it->at,
                             Item{"", Expr(), dirty_mark(it->buffer, it->device)});
            seq.changed = true;
        }
        pending_dirty.clear();
    }

    void owe_dirty_mark(const Seq &seq, const std::string &x, bool device) {
        pending_dirty.push_back({x, device, seq.items.size()});
    }

    bool pending_for(const std::string &x) const {
        return std::any_of(pending_dirty.begin(), pending_dirty.end(),
                           [&](const PendingMark &p) { return p.buffer == x; });
    }

    /** May an owed dirty mark move past `s`? Only if `s` neither touches a tracked buffer nor
     * moves or frees one, and holds no nested statements (a let that ends its list counts by
     * its value alone: its body is walked as the rest of the same sequence). */
    bool is_neutral(const Stmt &s, bool last) const {
        auto quiet = [&](const Expr &e) {
            return tracked(touches_of(e).touched).empty() && !as_copy_call(e);
        };
        switch (s.node_type()) {
        case IRNodeType::LetStmt:
            return last && quiet(s.as<LetStmt>()->value);
        case IRNodeType::AssertStmt:
            return quiet(s.as<AssertStmt>()->condition) && quiet(s.as<AssertStmt>()->message);
        case IRNodeType::Evaluate:
            return quiet(s.as<Evaluate>()->value);
        case IRNodeType::Free:
            return !pending_for(s.as<Free>()->name);
        default:
            return false;
        }
    }

    /** The buffers among `names` that this walk tracks, in order. */
    std::vector<std::string> tracked(const std::vector<std::string> &ns) const {
        std::vector<std::string> out;
        for (const std::string &n : ns) {
            if (state.count(n)) {
                out.push_back(n);
            }
        }
        return out;
    }

    /** Copies to the host whatever `node` reads or writes that is not current there. */
    template <typename T>
    void host_touch(Seq &seq, const T &node) {
        for (const std::string &x : tracked(touches_of(node).touched)) {
            if (!current(x).host) {
                copy_to_host(seq, x);
            }
        }
    }

    /** Does the body of host loop `op` hold device code? */
    bool contains_device_code(const For *op) const {
        return index.loops_with_device_code.count(op) > 0;
    }

    // -----------------------------------------------------------------------------------------
    // The walk

    /** Rewrites a nested statement list; returns `s` itself when nothing changed. `prologue`
     * and `epilogue` add items at its start and end; `tail` is the function-end hook, which an
     * allocation ending this list may take over. */
    Stmt walk_body(const Stmt &s, const SeqHook &prologue = nullptr,
                   const SeqHook &epilogue = nullptr, const SeqHook *tail = nullptr) {
        internal_assert(pending_dirty.empty()) << "dirty marks owed across a nested body";
        Seq seq;
        size_t lets_mark = lets_in_scope.size();
        const SeqHook *outer_tail = tail_hook;
        tail_hook = tail;
        if (prologue) {
            prologue(seq);
        }
        if (s.defined()) {
            walk(s, seq, true);
        }
        place_dirty_marks(seq);
        if (tail_hook) {
            (*tail_hook)(seq);
        }
        if (epilogue) {
            epilogue(seq);
        }
        tail_hook = outer_tail;
        pop_lets(lets_mark);
        return seq.changed ? fold(seq) : s;
    }

    /** Appends `s`, with what it needs before and after, to `seq`. `last`: nothing follows `s`
     * in its list, so a let chain starting at `s` may be spliced into `seq`. */
    void walk(Stmt s, Seq &seq, bool last) {
        // The tail of a list (the last statement of a block, the body of a let that ends its
        // list) is followed by a loop rather than recursion: let chains run thousands long.
        while (true) {
            if (const Evaluate *op = s.as<Evaluate>(); op && consume_dirty_mark(op)) {
                seq.stmt(s);
                return;
            }
            if (s.as<Block>()) {
                std::vector<Stmt> stmts = flatten_block(s);
                for (size_t i = 0; i + 1 < stmts.size(); i++) {
                    walk(stmts[i], seq, false);
                }
                s = stmts.back();
                continue;
            }
            if (!is_neutral(s, last)) {
                place_dirty_marks(seq);
            }
            const LetStmt *let = s.as<LetStmt>();
            if (!let) {
                return walk_one(s, seq, last);
            }
            walk_let_value(let, seq);
            if (!last) {
                size_t lets_mark = lets_in_scope.size();
                push_let(let->name);
                Stmt body = walk_body(let->body);
                pop_lets(lets_mark);
                push_rebuilt(seq, s,
                             body.same_as(let->body) ? s
                                                     : LetStmt::make(let->name, let->value, body));
                return;
            }
            seq.let(let->name, let->value);
            push_let(let->name);
            s = let->body;
        }
    }

    /** A statement other than a block or a let. */
    void walk_one(const Stmt &s, Seq &seq, bool last) {
        switch (s.node_type()) {
        case IRNodeType::ProducerConsumer: {
            const ProducerConsumer *op = s.as<ProducerConsumer>();
            Stmt body = walk_body(op->body);
            push_rebuilt(seq, s,
                         body.same_as(op->body)
                             ? s
                             : ProducerConsumer::make(op->name, op->is_producer, body));
            return;
        }
        case IRNodeType::Allocate:
            return walk_allocate(s.as<Allocate>(), s, seq, last);
        case IRNodeType::IfThenElse:
            return walk_if(s.as<IfThenElse>(), s, seq);
        case IRNodeType::For:
            return walk_for(s.as<For>(), s, seq);
        case IRNodeType::Free:
            return walk_free(s.as<Free>(), s, seq);
        default:
            return walk_host_leaf(s, seq);
        }
    }

    static void push_rebuilt(Seq &seq, const Stmt &old, const Stmt &now) {
        seq.stmt(now);
        seq.changed = seq.changed || !now.same_as(old);
    }

    /** A dirty mark we would have placed here already exists: keep it, owe nothing. */
    bool consume_dirty_mark(const Evaluate *op) {
        const Call *c = call_named(op->value, runtime::_halide_buffer_set_device_dirty);
        bool device = c != nullptr;
        if (!c) {
            c = call_named(op->value, runtime::_halide_buffer_set_host_dirty);
        }
        if (!c || c->args.empty()) {
            return false;
        }
        std::string x = buffer_name_of(c->args[0]);
        auto it =
            std::find_if(pending_dirty.begin(), pending_dirty.end(),
                         [&](const PendingMark &p) { return p.buffer == x && p.device == device; });
        if (it == pending_dirty.end()) {
            return false;
        }
        pending_dirty.erase(it);
        return true;
    }

    /** A let's value: host reads copy first; copies already in place (an earlier run, or
     * Halide's lowering) are facts. */
    void walk_let_value(const LetStmt *op, Seq &seq) {
        host_touch(seq, op->value);
        bool to_device;
        const Call *c = as_copy_call(op->value, &to_device);
        std::optional<Residency> r = c ? residency_of(buffer_name_of(c->args[0])) : std::nullopt;
        if (!r) {
            return;
        }
        if (to_device) {
            DeviceAPI api = c->args.size() > 1 ? device_interface_api(c->args[1]) : DeviceAPI::None;
            r->device = api == DeviceAPI::None ? resolve(DeviceAPI::DefaultGPU) : api;
        } else {
            r->host = true;
        }
        set_residency(buffer_name_of(c->args[0]), r);
    }

    void walk_allocate(const Allocate *op, const Stmt &s, Seq &seq, bool last) {
        const std::string &x = op->name;
        const SeqHook *tail = last ? tail_hook : nullptr;
        if (tail) {
            tail_hook = nullptr;
        }
        for (const Expr &e : op->extents) {
            host_touch(seq, e);
        }
        host_touch(seq, op->condition);
        host_touch(seq, op->new_expr);

        auto indexed = index.alloc_api.find(op);
        internal_assert(indexed != index.alloc_api.end())
            << "allocation " << x << " missed by the device-code index";
        const std::optional<DeviceAPI> &first_api = indexed->second;

        // Shadowing: the allocation hides any outer buffer of the same name while it lives.
        std::optional<Residency> outer = residency_of(x);
        set_residency(x, std::nullopt);

        Stmt body;
        if (!first_api) {
            body = walk_body(op->body, nullptr, nullptr, tail);
        } else {
            DeviceAPI api = resolve(*first_api);
            std::string desc = buffer_var_name(x);
            bool has_descriptor = lets.contains(desc);
            const Block *block = op->body.as<Block>();
            if (const LetStmt *first = (block ? block->first : op->body).as<LetStmt>()) {
                has_descriptor = has_descriptor || first->name == desc;
            }
            set_residency(x, Residency{true, api});
            allocs.push_back({x, !has_descriptor, false});
            SeqHook prologue = nullptr, epilogue = nullptr;
            if (!has_descriptor) {
                prologue = [&](Seq &inner) {
                    if (!dry) {
                        names.reserve(desc);
                    }
                    inner.let(desc, make_descriptor(op));
                    inner.changed = true;
                    push_let(desc);
                    // As Halide does: the device memory is released on every exit, the error
                    // exits included (freeing a buffer with no device allocation does nothing).
                    inner.stmt(Evaluate::make(
                        Call::make(Handle(), Call::register_destructor,
                                   {StringImm::make(runtime::halide_device_free_as_destructor),
                                    buffer_var(x)})));
                    emit_checked(inner, runtime::halide_device_malloc,
                                 Call::make(Int(32), runtime::halide_device_malloc,
                                            {buffer_var(x), device_interface(api)}, Call::Extern));
                };
                epilogue = [&](Seq &inner) {
                    if (!allocs.back().freed) {
                        emit_device_free(inner, x);
                    }
                };
            }
            body = walk_body(op->body, prologue, epilogue, tail);
            allocs.pop_back();
        }

        set_residency(x, outer);
        push_rebuilt(seq, s,
                     body.same_as(op->body)
                         ? s
                         : Allocate::make(x, op->type, op->memory_type, op->extents, op->condition,
                                          body, op->new_expr, op->free_function));
    }

    /** `let X.buffer = _halide_buffer_init(...)`: a 1-D descriptor over the allocation, whose
     * extent is the product of the allocation's (constant factors folded, last). */
    static Expr make_descriptor(const Allocate *op) {
        Expr total;
        int64_t constant = 1;
        for (const Expr &e : op->extents) {
            int64_t v;
            if (const_int_value(e, &v)) {
                constant *= v;
                user_assert(constant <= INT32_MAX)
                    << "inject-host-dev-copies: allocation " << op->name << " has more than "
                    << INT32_MAX << " elements, too many for a buffer descriptor";
                continue;
            }
            Expr e32 = e.type() == Int(32) ? e : Cast::make(Int(32), e);
            total = total.defined() ? Mul::make(total, e32) : e32;
        }
        if (!total.defined()) {
            total = int32(constant);
        } else if (constant != 1) {
            total = Mul::make(total, int32(constant));
        }
        auto shape = [&]() {
            return Call::make(dimension_ptr_type(), Call::make_struct,
                              {int32(0), total, int32(1), int32(0)});
        };
        Expr storage = Call::make(buffer_ptr_type(), Call::alloca,
                                  {Call::make(Int(32), Call::size_of_halide_buffer_t, {})});
        Expr no_interface = Reinterpret::make(interface_ptr_type(), make_zero(UInt(64)));
        return Call::make(buffer_ptr_type(), runtime::_halide_buffer_init,
                          {storage, shape(), Variable::make(Handle(), op->name),
                           make_zero(UInt(64)), no_interface, int32(op->type.code()),
                           int32(op->type.bits()), int32(1), shape(), make_zero(UInt(64))},
                          Call::Extern);
    }

    void emit_device_free(Seq &seq, const std::string &x) {
        emit_checked(
            seq, runtime::halide_device_free,
            Call::make(Int(32), runtime::halide_device_free, {buffer_var(x)}, Call::Extern));
    }

    void walk_free(const Free *op, const Stmt &s, Seq &seq) {
        for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) {
            if (it->name == op->name) {
                if (it->owns_device_free && !it->freed) {
                    emit_device_free(seq, op->name);
                    // A dry walk changes no frame: the frame may be outside the loop.
                    it->freed = !dry;
                }
                break;
            }
        }
        seq.stmt(s);
    }

    void walk_if(const IfThenElse *op, const Stmt &s, Seq &seq) {
        host_touch(seq, op->condition);
        // Both branches start from the state before the `if`; only the buffers a branch
        // changed can differ between them.
        size_t mark = begin_journal();
        Stmt then_case = walk_body(op->then_case);
        Changes after_then = changes_since(mark);
        roll_back(mark);
        Stmt else_case = walk_body(op->else_case);
        Changes after_else = changes_since(mark);
        roll_back(mark);
        auto at_end = [&](const Changes &c, const std::string &x) {
            auto it = c.find(x);
            return it == c.end() ? residency_of(x) : it->second;
        };
        auto join_branches = [&](const std::string &x) {
            std::optional<Residency> now = residency_of(x);
            std::optional<Residency> joined = join(at_end(after_then, x), at_end(after_else, x));
            if (!(joined == now)) {
                set_residency(x, joined);
            }
        };
        for (const auto &c : after_then) {
            join_branches(c.first);
        }
        for (const auto &c : after_else) {
            if (!after_then.count(c.first)) {
                join_branches(c.first);
            }
        }
        end_journal();
        bool same = then_case.same_as(op->then_case) && else_case.same_as(op->else_case);
        push_rebuilt(seq, s, same ? s : IfThenElse::make(op->condition, then_case, else_case));
    }

    void walk_for(const For *op, const Stmt &s, Seq &seq) {
        if (is_gpu_for_type(op->for_type)) {
            return walk_device_nest(op, s, seq);
        }
        if (!contains_device_code(op)) {
            return walk_host_leaf(s, seq);
        }
        host_touch(seq, op->min);
        host_touch(seq, op->extent);
        hoist_loop_invariant_copies(op->body, seq);
        // Fixpoint: the body may start in the state the loop was entered with or in the one a
        // previous iteration left. Dry runs name nothing, their statements are thrown away and
        // their changes rolled back; only the buffers they changed can move the entry state.
        begin_journal();
        while (true) {
            size_t mark = journal.size();
            bool was_dry = dry;
            dry = true;
            walk_body(op->body);
            dry = was_dry;
            if (!join_changes(mark)) {
                break;
            }
        }
        size_t mark = journal.size();
        Stmt body = walk_body(op->body);
        // The loop may run zero times; at the fixpoint, merging changes nothing more.
        join_changes(mark);
        end_journal();
        push_rebuilt(seq, s,
                     body.same_as(op->body) ? s
                                            : For::make(op->name, op->min, op->extent, op->for_type,
                                                        op->device_api, body));
    }

    /** Rolls the state back to `mark` and joins it, buffer by buffer, with the state as it
     * was before the roll-back. Says whether the state changed. */
    bool join_changes(size_t mark) {
        Changes after = changes_since(mark);
        roll_back(mark);
        bool changed = false;
        for (const auto &[x, r] : after) {
            std::optional<Residency> now = residency_of(x), joined = join(now, r);
            if (!(joined == now)) {
                set_residency(x, joined);
                changed = true;
            }
        }
        return changed;
    }

    /** A buffer the loop reads but never writes is copied once, in front of the loop, to
     * each side that reads it (for device reads, the API of the first nest), rather than on
     * every iteration. */
    void hoist_loop_invariant_copies(const Stmt &body, Seq &seq) {
        FindTouches all = touches_of(body);
        std::set<std::string> written(all.written.begin(), all.written.end());
        std::vector<std::string> host_touched = touches_of(body, true).touched;
        std::set<std::string> on_host(host_touched.begin(), host_touched.end());
        std::map<std::string, DeviceAPI> on_device = device_use_of(body).first_api;
        for (const std::string &x : tracked(all.touched)) {
            if (written.count(x)) {
                continue;
            }
            auto d = on_device.find(x);
            if (d != on_device.end() && current(x).device != resolve(d->second)) {
                copy_to_device(seq, x, resolve(d->second));
            }
            if (on_host.count(x) && !current(x).host) {
                copy_to_host(seq, x);
            }
        }
    }

    void walk_device_nest(const For *op, const Stmt &s, Seq &seq) {
        FindTouches t = touches_of(s);
        std::vector<std::string> touched = tracked(t.touched);
        if (touched.empty()) {
            seq.stmt(s);
            return;
        }
        DeviceAPI api = resolve(op->device_api);
        for (const std::string &x : touched) {
            if (current(x).device != api) {
                copy_to_device(seq, x, api);
            }
        }
        seq.stmt(s);
        for (const std::string &x : tracked(t.written)) {
            set_residency(x, Residency{false, api});
            owe_dirty_mark(seq, x, true);
        }
    }

    void walk_host_leaf(const Stmt &s, Seq &seq) {
        host_touch(seq, s);
        seq.stmt(s);
        for (const std::string &x : tracked(touches_of(s).written)) {
            set_residency(x, Residency{true, DeviceAPI::None});
            owe_dirty_mark(seq, x, false);
        }
    }
};

/** Result names for a function, unique against the names it already uses. */
UniqueNames result_names(const LoweredFunc &f) {
    UniqueNames names("$", generated_prefix);
    names.reserve_names_in(f.body);
    for (const Argument &a : f.args) {
        names.reserve(a.name);
        if (a.is_buffer()) {
            names.reserve(buffer_var_name(a.name));
        }
    }
    return names;
}

std::vector<std::string> buffer_args(const LoweredFunc &f) {
    std::vector<std::string> out;
    for (const Argument &a : f.args) {
        if (a.is_buffer()) {
            out.push_back(a.name);
        }
    }
    return out;
}

}  // namespace

static Module inject_host_dev_copies_impl(const Module &m) {
    Module out = m;
    for (LoweredFunc &f : out.functions) {
        // 1. Find the buffers that device code touches; without any, the function stays as it
        //    is (same nodes).
        FindDeviceUse use = device_use_of(f.body);
        if (use.first_api.empty()) {
            continue;
        }
        // 2. Index the allocations and loops that hold device code. Buffer arguments and module
        //    constants start with their contents on the host only.
        IndexDeviceCode index;
        f.body.accept(&index);
        PlaceCopies place(m.target, result_names(f), index);
        std::vector<std::string> args = buffer_args(f);
        for (const BufferConstant &b : m.buffers) {
            if (use.first_api.count(b.name)) {
                place.state[b.name] = Residency{true, DeviceAPI::None};
            }
        }
        for (const std::string &x : args) {
            if (use.first_api.count(x)) {
                place.state[x] = Residency{true, DeviceAPI::None};
            }
        }
        // 3. Walk the host code in program order placing copies, dirty marks and device
        //    allocations, then copy back the arguments last written on the device.
        f.body = place.run(f.body, args);
    }
    return out;
}

Module inject_host_dev_copies(const Module &m) {
    return with_large_stack([&]() { return inject_host_dev_copies_impl(m); });
}

}  // namespace tally
