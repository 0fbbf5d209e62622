/** \file
 * The launch rule of GPU loop nests, in one place: which block or thread dimension each
 * gpu_block and gpu_thread loop is, and how many blocks and threads each dimension launches.
 * offload-gpu-loops calls it for every kernel it makes (and builds the launch call from the
 * result), the elaborator for a kernel written without its geometry, and the verifier to check
 * a kernel's recorded geometry against its body. The back ends only read Kernel::geometry.
 */
#ifndef TALLY_IR_KERNELGEOMETRY_H
#define TALLY_IR_KERNELGEOMETRY_H

#include <string>

#include "tally/Module.h"

namespace tally {

/** The geometry of a GPU loop nest. Along every chain of nested loops of one kind the innermost
 * is x, the next y, then z (Halide's `__block_id_x` is innermost); so a loop's dimension is one
 * more than that of the nearest loops of its kind inside it. Loops of one kind and dimension
 * launch the largest of their extents: the largest constant when all are constant, else their
 * `max`, in walk order. Throws CompileError, located at the loop and naming it and `where`
 * (e.g. "function 'f'"), for a loop with chains of different lengths inside it (its dimension
 * would be ambiguous), more than 3 nested loops of one kind, or two loops of one name at
 * different dimensions. `who` starts each message (e.g. "offload-gpu-loops"). */
KernelGeometry derive_kernel_geometry(const Stmt &nest, const std::string &who,
                                      const std::string &where);

/** Do two geometries record the same loops and structurally equal extents? */
bool equal(const KernelGeometry &a, const KernelGeometry &b);

}  // namespace tally

#endif  // TALLY_IR_KERNELGEOMETRY_H
