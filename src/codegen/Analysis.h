/** \file
 * What the back ends read off the IR before they emit code: the names a statement uses (the host
 * captures them into parallel-loop closures; Vulkan marks buffers a kernel never stores to
 * readonly), which loops are GPU loops, and whether floating point must be strict. The launch
 * dimension of a GPU loop is not worked out here: the kernel records it (Kernel::geometry).
 */
#ifndef TALLY_CODEGEN_ANALYSIS_H
#define TALLY_CODEGEN_ANALYSIS_H

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

/** The min_threads of an async task whose body (after its leading acquires) is `body`: how many
 * threads it needs to finish, 0 when it never blocks. As Halide counts them (its
 * LowerParallelTasks): a standalone acquire needs one more thread than its body; a fork, the
 * sum of its branches' needs plus one, unless every branch needs none and none starts with an
 * acquire; a parallel loop, one more than its body when its body needs any; any other
 * statement, the most any part of it needs. The runtime gives a task that may block a thread
 * of its own. */
int async_min_threads(const Stmt &body);

/** An atomic update without a mutex, as Halide writes one (`atomic { b[i] = f(b[i], ...) }`):
 * lets around one store, unpredicated, whose value reads the stored buffer only at the stored
 * index. */
struct AtomicUpdate {
    enum class Rmw { None, Add, Sub, Min, Max, And, Or, Xor };
    std::vector<const LetStmt *> lets;  // outermost first
    const Store *store = nullptr;
    /** The read-modify-write the value is, when it is one: b[i] + d, d + b[i] (Add), b[i] - d
     * (Sub), min or max of integers, bitwise and, or, xor of integers, d not reading b; None
     * for any other value, and for bool elements (bytes in memory: a compare-and-swap). */
    Rmw rmw = Rmw::None;
    Expr operand;  // d, with rmw
    /** The value with each read of the element replaced by the variable atomic_old_name: what a
     * compare-and-swap loop computes from the value it read. */
    Expr new_value;
};
/** The variable AtomicUpdate::new_value reads the old value of the element from. */
extern const char *const atomic_old_name;
/** Reads `op` (which has no mutex) as an AtomicUpdate into *out; returns "", or why it cannot
 * be one (several stores, a predicated store, a read of the buffer at another index). */
std::string read_atomic_update(const Atomic *op, AtomicUpdate *out);

/** A gpu_block or gpu_thread loop (what becomes a block or thread id on the device). */
bool is_gpu_loop(const For *op);

/** True when floating point in `m` must not be reassociated or fused anywhere: the target has
 * the strict_float feature, or some function calls the strict_float() intrinsic (as Halide 14
 * decides its module-wide FP fusion setting). */
bool uses_strict_float(const Module &m);

}  // namespace tally

#endif  // TALLY_CODEGEN_ANALYSIS_H
