// The IR facts the back ends share (see Analysis.h).
//
// GPU loop dimensions: a loop's dimension is one more than that of the nearest loops of its kind
// below it (0 when there are none), so the innermost loop of a chain is x. Computed bottom-up,
// with one stack per kind holding, for every open loop, the dimensions of the nearest same-kind
// loops found below it so far; they must all agree.

#include "codegen/Analysis.h"

#include <algorithm>

#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

class CollectNames : public IRVisitor {
public:
    explicit CollectNames(UsedNames &out) : out(out) {}
    using IRVisitor::visit;

private:
    UsedNames &out;

    void visit(const Variable *op) override { out.vars.insert(op->name); }
    void visit(const Load *op) override {
        out.loaded.insert(op->name);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        out.stored.insert(op->name);
        IRVisitor::visit(op);
    }
};

/** The extent of a GPU loop as the launch uses it: int32. */
Expr launch_extent(const For *op) {
    return op->extent.type() == Int(32) ? op->extent : Cast::make(Int(32), op->extent);
}

class AssignGpuDims : public IRVisitor {
public:
    AssignGpuDims(const std::string &where, std::map<const For *, int> &dims,
                  std::vector<Expr> (&extents)[2][3], bool &thread_loops)
        : where(where), dims(dims), extents(extents), thread_loops(thread_loops) {}
    using IRVisitor::visit;

private:
    const std::string &where;
    std::map<const For *, int> &dims;
    std::vector<Expr> (&extents)[2][3];
    bool &thread_loops;
    // Per kind, a stack of the open loops' lists of nearest same-kind descendants' dimensions.
    std::vector<std::vector<int>> below[2];

    void visit(const For *op) override {
        if (!is_gpu_loop(op)) {
            IRVisitor::visit(op);
            return;
        }
        int kind = op->for_type == ForType::GPUBlock ? 0 : 1;
        thread_loops = thread_loops || kind == 1;
        below[kind].emplace_back();
        IRVisitor::visit(op);
        std::vector<int> inner = below[kind].back();
        below[kind].pop_back();
        int mine = inner.empty() ? 0 : inner[0] + 1;
        for (int d : inner) {
            user_assert(d + 1 == mine)
                << where << ": " << for_type_name(op->for_type) << " loop '" << op->name
                << "' has nested loop chains of different depths below it, so its launch "
                   "dimension is ambiguous";
        }
        user_assert(mine < 3) << where << ": more than 3 nested " << for_type_name(op->for_type)
                              << " loops around '" << op->name << "'";
        dims[op] = mine;
        if (!below[kind].empty()) {
            below[kind].back().push_back(mine);
        }
        Expr e = launch_extent(op);
        std::vector<Expr> &slot = extents[kind][mine];
        if (std::none_of(slot.begin(), slot.end(), [&](const Expr &o) { return equal(o, e); })) {
            slot.push_back(e);
        }
    }
};

}  // namespace

UsedNames used_names(const Stmt &s) {
    UsedNames out;
    CollectNames collect(out);
    s.accept(&collect);
    return out;
}

bool is_gpu_loop(const For *op) {
    return op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread;
}

GpuLoopDims::GpuLoopDims(const Kernel &k, const std::string &back_end) {
    std::string where = back_end + ": kernel '" + k.name + "'";
    AssignGpuDims assign(where, dims, extents, thread_loops);
    k.body.accept(&assign);
}

int GpuLoopDims::dim(const For *op) const {
    auto it = dims.find(op);
    internal_assert(it != dims.end()) << "GPU loop '" << op->name << "' without a dimension";
    return it->second;
}

bool GpuLoopDims::needs_guard(const For *op) const {
    int kind = op->for_type == ForType::GPUBlock ? 0 : 1;
    const std::vector<Expr> &slot = extents[kind][dim(op)];
    // One distinct extent: the launch is exactly it.
    if (slot.size() == 1) {
        return false;
    }
    // All constant: the launch is the largest.
    int64_t largest = 0, v;
    for (const Expr &c : slot) {
        if (!const_int_value(c, &v)) {
            return true;
        }
        largest = std::max(largest, v);
    }
    return !(const_int_value(launch_extent(op), &v) && v == largest);
}

}  // namespace tally
