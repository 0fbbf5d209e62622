// The launch rule (see KernelGeometry.h), and KernelGeometry's lookups.
//
// Dimensions are assigned bottom-up: one stack per kind holds, for every open loop of that kind,
// the dimensions of the nearest loops of its kind found inside it so far; they must all agree,
// and the loop's own dimension is one more (0 when there are none). A loop's dimension is known
// when its visit ends; loops of one dimension are disjoint subtrees, so they finish in walk
// order.

#include "ir/KernelGeometry.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** 0 for gpu_block, 1 for gpu_thread, -1 for any other loop. */
int kind_index(ForType t) {
    return t == ForType::GPUBlock ? 0 : t == ForType::GPUThread ? 1 : -1;
}

/** The extent of a GPU loop as the launch uses it: int32. */
Expr int32_extent(const For *op) {
    return op->extent.type() == Int(32) ? op->extent : Cast::make(Int(32), op->extent);
}

/** The launch size of distinct extents, in walk order: the largest constant when all are
 * constant, else their `max`. */
Expr combine_extents(const std::vector<Expr> &extents) {
    Expr e;
    bool all_const = true;
    int64_t largest = 0;
    for (const Expr &c : extents) {
        int64_t v;
        if (const_int_value(c, &v)) {
            largest = e.defined() ? std::max(largest, v) : v;
        } else {
            all_const = false;
        }
        e = e.defined() ? Max::make(e, c) : c;
    }
    return all_const ? make_const(Int(32), largest) : e;
}

class AssignDims : public IRVisitor {
public:
    AssignDims(const std::string &who, const std::string &where) : who(who), where(where) {}

    KernelGeometry geometry() const {
        KernelGeometry g;
        for (int kind = 0; kind < 2; kind++) {
            std::vector<KernelGeometry::Dim> &dims = kind == 0 ? g.blocks : g.threads;
            for (size_t d = 0; d < loops[kind].size(); d++) {
                dims.push_back({loops[kind][d], combine_extents(extents[kind][d])});
            }
        }
        return g;
    }

    using IRVisitor::visit;

private:
    const std::string &who, &where;
    /** What the nearest loops of one kind inside an open loop say. */
    struct Inside {
        std::vector<int> dims;
        const For *innermost = nullptr;  // the innermost loop of the first chain
    };
    std::vector<Inside> open[2];
    // Per kind and dimension: the loop names and the distinct int32 extents, in walk order.
    std::vector<std::vector<std::string>> loops[2];
    std::vector<std::vector<Expr>> extents[2];
    std::map<std::string, std::pair<int, int>> dim_of_name;  // name -> (kind, dimension)

    void record(const For *op, int kind, int dim) {
        if (loops[kind].size() <= size_t(dim)) {
            loops[kind].resize(dim + 1);
            extents[kind].resize(dim + 1);
        }
        auto seen = dim_of_name.emplace(op->name, std::make_pair(kind, dim));
        user_assert(seen.second || seen.first->second == std::make_pair(kind, dim)).at(op->loc)
            << who << ": two GPU loops named '" << op->name << "' in " << where
            << " have different launch dimensions";
        if (seen.second) {
            loops[kind][dim].push_back(op->name);
        }
        Expr e = int32_extent(op);
        std::vector<Expr> &slot = extents[kind][dim];
        if (std::none_of(slot.begin(), slot.end(), [&](const Expr &o) { return equal(o, e); })) {
            slot.push_back(e);
        }
    }

    void visit(const For *op) override {
        int kind = kind_index(op->for_type);
        if (kind < 0) {
            IRVisitor::visit(op);
            return;
        }
        open[kind].emplace_back();
        IRVisitor::visit(op);
        Inside inside = std::move(open[kind].back());
        open[kind].pop_back();
        int dim = inside.dims.empty() ? 0 : inside.dims[0] + 1;
        for (int d : inside.dims) {
            user_assert(d + 1 == dim).at(op->loc)
                << who << ": " << for_type_name(op->for_type) << " loop '" << op->name << "' in "
                << where
                << " has nested loop chains of different lengths inside it, so its launch "
                   "dimension is ambiguous";
        }
        const For *innermost = inside.innermost ? inside.innermost : op;
        user_assert(dim < 3).at(op->loc)
            << who << ": " << dim + 1 << " nested " << for_type_name(op->for_type)
            << " loops around '" << innermost->name << "' in " << where
            << "; a GPU launch has at most 3 dimensions";
        record(op, kind, dim);
        if (!open[kind].empty()) {
            Inside &outer = open[kind].back();
            outer.dims.push_back(dim);
            if (!outer.innermost) {
                outer.innermost = innermost;
            }
        }
    }
};

}  // namespace

KernelGeometry derive_kernel_geometry(const Stmt &nest, const std::string &who,
                                      const std::string &where) {
    AssignDims assign(who, where);
    nest.accept(&assign);
    return assign.geometry();
}

bool equal(const KernelGeometry &a, const KernelGeometry &b) {
    auto same = [](const std::vector<KernelGeometry::Dim> &x,
                   const std::vector<KernelGeometry::Dim> &y) {
        return std::equal(x.begin(), x.end(), y.begin(), y.end(),
                          [](const KernelGeometry::Dim &p, const KernelGeometry::Dim &q) {
                              return p.loops == q.loops && equal(p.extent, q.extent);
                          });
    };
    return same(a.blocks, b.blocks) && same(a.threads, b.threads);
}

const std::vector<KernelGeometry::Dim> &KernelGeometry::dims(ForType kind) const {
    internal_assert(kind_index(kind) >= 0) << "launch dimensions of a non-GPU loop kind";
    return kind == ForType::GPUBlock ? blocks : threads;
}

int KernelGeometry::dim(const For *op) const {
    const std::vector<Dim> &ds = dims(op->for_type);
    for (size_t d = 0; d < ds.size(); d++) {
        if (std::find(ds[d].loops.begin(), ds[d].loops.end(), op->name) != ds[d].loops.end()) {
            return int(d);
        }
    }
    internal_error << "GPU loop '" << op->name << "' has no launch dimension";
}

Expr KernelGeometry::launch_extent(ForType kind, int d) const {
    const std::vector<Dim> &ds = dims(kind);
    return size_t(d) < ds.size() ? ds[d].extent : make_one(Int(32));
}

bool KernelGeometry::needs_guard(const For *op) const {
    Expr launched = launch_extent(op->for_type, dim(op)), mine = int32_extent(op);
    int64_t a, b;
    if (equal(launched, mine) ||
        (const_int_value(launched, &a) && const_int_value(mine, &b) && a == b)) {
        return false;
    }
    return true;
}

}  // namespace tally
