/** \file
 * What the back ends read off the IR before they emit code: the names a statement uses (the host
 * captures them into parallel-loop closures; Vulkan marks buffers a kernel never stores to
 * readonly) and the launch dimension of every GPU loop of a kernel (PTX and Vulkan map gpu_block
 * and gpu_thread loops to block and thread ids with it). One implementation, so that every back
 * end maps the same loop to the same dimension.
 */
#ifndef TALLY_CODEGEN_ANALYSIS_H
#define TALLY_CODEGEN_ANALYSIS_H

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tally/IR.h"
#include "tally/Module.h"

namespace tally {

/** The names a statement refers to. */
struct UsedNames {
    std::set<std::string> vars;    // Variable nodes
    std::set<std::string> loaded;  // buffers of Load nodes
    std::set<std::string> stored;  // buffers of Store nodes
};

/** Collects the names `s` refers to. */
UsedNames used_names(const Stmt &s);

/** A gpu_block or gpu_thread loop (what becomes a block or thread id on the device). */
bool is_gpu_loop(const For *op);

/** The launch dimensions of a kernel's gpu_block and gpu_thread loops, by offload-gpu-loops'
 * rule: along each chain of nested loops of one kind the innermost is x (0), then y, then z. The
 * launch size of a dimension is the largest extent filed there. */
class GpuLoopDims {
public:
    /** Assigns every GPU loop of `k` its dimension. Throws CompileError, naming `back_end` and
     * the kernel, for a loop with chains of different depths below it (its dimension would be
     * ambiguous) or more than 3 nested loops of one kind. */
    GpuLoopDims(const Kernel &k, const std::string &back_end);

    /** The dimension (0 = x, 1 = y, 2 = z) of a GPU loop of the kernel. */
    int dim(const For *op) const;
    /** May the loop's extent be smaller than the launch size of its dimension (so that it needs
     * an `id < extent` guard)? */
    bool needs_guard(const For *op) const;
    /** Does the kernel have gpu_thread loops (allocations outside them are per block)? */
    bool has_thread_loops() const { return thread_loops; }

private:
    std::map<const For *, int> dims;
    // Per kind (0 block, 1 thread) and dimension, the distinct extents (as int32, as the launch
    // uses them).
    std::vector<Expr> extents[2][3];
    bool thread_loops = false;
};

}  // namespace tally

#endif  // TALLY_CODEGEN_ANALYSIS_H
