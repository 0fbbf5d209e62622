// Placeholder until the back end lands: kernels for this API cannot be compiled yet.

#include "codegen/CodeGen_PTX.h"

#include "tally/Error.h"

namespace tally {

CompiledKernel compile_ptx_kernel(const Kernel &k, const Target &) {
    user_error << "kernel '" << k.name << "': the PTX back end is not implemented yet";
    return {};
}

}  // namespace tally
