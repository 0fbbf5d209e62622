/** \file
 * A device kernel compiled by its back end: what the device back ends (CodeGen_PTX,
 * CodeGen_Vulkan) produce, DeviceKernels collects, and the host code generator embeds in the
 * module's kernel table. Its own header, so that the back ends and the host code generator
 * share it without including one another.
 */
#ifndef TALLY_CODEGEN_COMPILEDKERNEL_H
#define TALLY_CODEGEN_COMPILEDKERNEL_H

#include <string>

#include "tally/Module.h"

namespace tally {

/** A device kernel compiled by its back end, ready to embed. */
struct CompiledKernel {
    std::string name;
    DeviceAPI device_api = DeviceAPI::None;
    std::string code;  // SPIR-V bytes, or PTX text (embedded with a terminating NUL)
    int num_args = 0;
    int num_buffers = 0;
};

}  // namespace tally

#endif  // TALLY_CODEGEN_COMPILEDKERNEL_H
