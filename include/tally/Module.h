/** \file
 * A Module: what one lowering produces and one codegen consumes. It holds the pipeline
 * function(s) with their typed arguments, the target, constant buffers (Halide embeds kernel
 * sources this way) and, after offload-gpu-loops, the device kernels.
 */
#ifndef TALLY_MODULE_H
#define TALLY_MODULE_H

#include <string>
#include <vector>

#include "tally/IR.h"
#include "tally/Target.h"

namespace tally {

/** A function or kernel argument: a scalar of some type, or a buffer of some element type. */
struct Argument {
    enum Kind : uint8_t { Scalar, Buffer };
    std::string name;
    Kind kind = Scalar;
    /** The scalar's type, or the buffer's element type (invalid when not known). */
    Type type;
    /** Buffer rank, or -1 when not known. Always -1 for scalars. */
    int dimensions = -1;

    bool is_buffer() const { return kind == Buffer; }
    bool operator==(const Argument &o) const {
        return name == o.name && kind == o.kind && type == o.type && dimensions == o.dimensions;
    }
};

enum class LinkageType : uint8_t { External, ExternalPlusMetadata, Internal };
const char *linkage_name(LinkageType l);

struct LoweredFunc {
    std::string name;
    LinkageType linkage = LinkageType::External;
    std::vector<Argument> args;
    Stmt body;
};

/** A constant buffer embedded in the module; `opaque` ones were printed as `{...}`. */
struct BufferConstant {
    std::string name;
    bool opaque = true;
    std::string bytes;
};

/** A device kernel produced by offload-gpu-loops: the loop nest it came from and the
 * arguments it needs (buffers and free scalars). */
struct Kernel {
    std::string name;
    DeviceAPI device_api = DeviceAPI::None;
    std::vector<Argument> args;
    Stmt body;
};

struct Module {
    std::string name;
    Target target;
    std::vector<BufferConstant> buffers;
    std::vector<Kernel> kernels;
    std::vector<LoweredFunc> functions;

    LoweredFunc *find_function(const std::string &n);
    const LoweredFunc *find_function(const std::string &n) const;
    const Kernel *find_kernel(const std::string &n) const;
};

}  // namespace tally

#endif  // TALLY_MODULE_H
