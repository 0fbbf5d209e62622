// The device-kernel dispatcher (see DeviceKernels.h): the one place that knows every device back
// end, so the dependencies inside src/codegen/ run one way: DeviceKernels -> CodeGen_PTX,
// CodeGen_OpenCL, CodeGen_Vulkan -> CompiledKernel, and CodeGen_Host -> CompiledKernel.

#include "codegen/DeviceKernels.h"

#include "codegen/CodeGen_OpenCL.h"
#include "codegen/CodeGen_PTX.h"
#include "codegen/CodeGen_Vulkan.h"
#include "tally/Error.h"

namespace tally {

std::vector<CompiledKernel> compile_kernels(const Module &m) {
    std::vector<CompiledKernel> out;
    for (const Kernel &k : m.kernels) {
        switch (k.device_api) {
        case DeviceAPI::Vulkan:
            out.push_back(compile_vulkan_kernel(k, m.target));
            break;
        case DeviceAPI::CUDA:
            out.push_back(compile_ptx_kernel(k, m.target));
            break;
        case DeviceAPI::OpenCL:
            out.push_back(compile_opencl_kernel(k, m.target));
            break;
        default:
            user_error << "kernel '" << k.name << "': Tally has no back end for device API "
                       << device_api_name(k.device_api);
        }
    }
    return out;
}

}  // namespace tally
