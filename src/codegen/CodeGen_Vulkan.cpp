// Placeholder until the back end lands: kernels for this API cannot be compiled yet.

#include "codegen/CodeGen_Vulkan.h"

#include "tally/Error.h"

namespace tally {

CompiledKernel compile_vulkan_kernel(const Kernel &k, const Target &) {
    user_error << "kernel '" << k.name << "': the Vulkan back end is not implemented yet";
    return {};
}

}  // namespace tally
