// The Vulkan back end: one Kernel (device API Vulkan) to a GLSL 450 compute shader, compiled to
// SPIR-V for Vulkan 1.1 with shaderc's C API. The body is KernelSource.h's C-family source (its
// .cpp says how loops, values and arithmetic are generated); this file says how GLSL spells
// what C does not have, and how the arguments arrive.
//
// Types: int32, uint32, float32 and bool, and 8- and 16-bit integers. The narrow integers are
// stored narrow (buffers of int8_t ... uint16_t, GL_EXT_shader_8bit_storage and
// GL_EXT_shader_16bit_storage: the runtime enables storageBuffer8BitAccess and
// storageBuffer16BitAccess where the device has them) and computed as int or uint, every value
// kept in its type's range: sign- or zero-extended from its low bits after each operation and
// conversion (bitfieldExtract, a mask), which is C's arithmetic on them wrapped back to their
// width, as the OpenCL back end computes them. Arrays in shared and private memory hold them as
// int or uint. Atomic updates (Halide's `atomic()` without a mutex) of 32-bit integers use
// GLSL's atomic functions, or an atomicCompSwap loop.
//
// Interface (tally_kernel_source in tally_runtime.h): the kernel's buffer arguments come first
// and become std430 storage buffers at bindings 0..n-1 of set 0 (`b<i>.data[]`, element type from
// the argument); the scalars follow, each at the next byte offset aligned to its own size, in one
// push-constant block. The block is declared as an array of 32-bit words and main() unpacks every
// scalar from its word at entry (bitcasts for float, byte extraction for bool), so that the
// layout is exactly the runtime's whatever the mix of sizes. The work group size is
// `local_size_{x,y,z}_id = 0, 1, 2`: the runtime sets those specialization constants to the
// launch's thread counts. Entry point "main". Work-group ids are gl_WorkGroupID and
// gl_LocalInvocationID; shared arrays are `shared` globals.
//
// Debugging: with TALLY_DUMP_GLSL=<dir> in the environment, each kernel's GLSL is written to
// <dir>/<kernel>.comp and its SPIR-V to <dir>/<kernel>.spv.

#include "codegen/CodeGen_Vulkan.h"

#include "codegen/Analysis.h"
#include "codegen/KernelSource.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <shaderc/shaderc.h>

#include "tally/Error.h"

namespace tally {

namespace {

/** Generates the GLSL source of one kernel. */
class CodeGenGLSL : public KernelSourceGen {
public:
    explicit CodeGenGLSL(const Kernel &k) : KernelSourceGen(k) {}

    std::string generate() {
        bind_arguments();
        if (offset > 0) {
            reserve("pc");
            decls << "layout(push_constant) uniform Args {\n    uint w[" << (offset + 3) / 4
                  << "];\n} pc;\n";
        }

        generate_body();

        std::ostringstream src;
        src << "#version 450\n";
        if (need_8bit_storage) {
            src << "#extension GL_EXT_shader_8bit_storage : require\n";
        }
        if (need_16bit_storage) {
            src << "#extension GL_EXT_shader_16bit_storage : require\n";
        }
        src << "// Tally kernel " << kernel.name << " (Vulkan compute shader)\n"
            << "layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;\n"
            << decls.str() << shared_decls.str();
        if (need_div_mod) {
            src << div_mod_helpers;
        }
        src << "void main() {\n" << unpack.str() << body.str() << "}\n";
        return src.str();
    }

private:
    // Buffers: storage-buffer blocks at bindings in order. Scalars: push-constant words,
    // unpacked at entry.
    std::ostringstream decls, unpack;
    int offset = 0;
    bool need_8bit_storage = false, need_16bit_storage = false;

    static bool narrow(const Type &t) {
        Type e = t.element_of();
        return (e.is_int() || e.is_uint()) && e.bits() < 32 && !e.is_bool();
    }
    /** The GLSL type a buffer stores elements of `e` as. */
    std::string storage_type(const Type &e) {
        if (!narrow(e)) {
            return type_name(e);
        }
        (e.bits() == 8 ? need_8bit_storage : need_16bit_storage) = true;
        return std::string(e.is_int() ? "int" : "uint") + std::to_string(e.bits()) + "_t";
    }
    /** `v`, an int or uint, brought into the range of the narrow type `e`: its low bits, sign-
     * or zero-extended. */
    static std::string normalize(const std::string &v, const Type &e) {
        return e.is_int() ? "bitfieldExtract(int(" + v + "), 0, " + std::to_string(e.bits()) + ")"
                          : "(uint(" + v + ") & " + std::to_string((1u << e.bits()) - 1) + "u)";
    }

    std::string buffer_argument(const std::string &name, const Type &elem, bool stored,
                                int index) override {
        user_assert(!elem.is_bool())
            << "Vulkan back end: kernel '" << kernel.name << "': buffer '" << name
            << "' holds bool, which Vulkan storage buffers cannot (store uint8 instead)";
        std::string block = "b" + std::to_string(index);
        reserve(block);
        decls << "// " << name << ": buffer<" << elem.to_string() << ">\n"
              << "layout(std430, set = 0, binding = " << index << ") "
              << (stored ? "" : "readonly ") << "buffer B" << index << " {\n    "
              << storage_type(elem) << " data[];\n} " << block << ";\n";
        return block + ".data";
    }

    std::string scalar_argument(const std::string &name, const Type &t) override {
        int size = t.bytes();
        offset = (offset + size - 1) / size * size;
        std::string word = "pc.w[" + std::to_string(offset / 4) + "]";
        std::string v;
        if (t.is_bool()) {
            v = "((" + word + " >> " + std::to_string(8 * (offset % 4)) + "u) & 0xffu) != 0u";
        } else if (narrow(t)) {
            // Its bytes of the word, extended as its type is (bitfieldExtract of an int
            // sign-extends, of a uint zero-extends).
            v = std::string("bitfieldExtract(") + (t.is_int() ? "int(" + word + ")" : word) + ", " +
                std::to_string(8 * (offset % 4)) + ", " + std::to_string(t.bits()) + ")";
        } else if (t.is_float()) {
            v = "uintBitsToFloat(" + word + ")";
        } else if (t.is_int()) {
            v = "int(" + word + ")";
        } else {
            v = word;
        }
        std::string n = fresh("v_" + kernel_source_name(name));
        unpack << "    " << type_name(t) << " " << n << " = " << v << ";  // " << name
               << " at byte " << offset << "\n";
        offset += size;
        return n;
    }

protected:
    const char *api_name() const override { return "Vulkan"; }
    std::string type_name(const Type &t) const override {
        Type e = t.element_of();
        if (e.is_bool()) {
            return "bool";
        }
        if (e.is_float()) {
            return "float";
        }
        return e.is_int() ? "int" : "uint";
    }
    bool supports(const Type &e) const override {
        return KernelSourceGen::supports(e) || narrow(e);
    }
    const char *supported_types() const override {
        return "8-, 16- and 32-bit integers, float32 and bool";
    }
    std::string cast(const std::string &v, const Type &, const Type &to) const override {
        return narrow(to) ? normalize(v, to.element_of()) : type_name(to) + "(" + v + ")";
    }
    std::string from_storage(const BufferRef &b, const std::string &e) const override {
        // int8_t and int16_t widen to int sign-extended, the unsigned ones zero-extended.
        return b.space == Space::Global && narrow(b.elem) ? type_name(b.elem) + "(" + e + ")" : e;
    }
    std::string to_storage(const BufferRef &b, const std::string &v) const override {
        if (b.space != Space::Global || !narrow(b.elem)) {
            return v;
        }
        return std::string(b.elem.is_int() ? "int" : "uint") + std::to_string(b.elem.bits()) +
               "_t(" + v + ")";
    }
    std::string bit_cast(const std::string &v, const Type &from, const Type &to) const override {
        if (from.is_float()) {
            return (to.is_int() ? "floatBitsToInt(" : "floatBitsToUint(") + v + ")";
        }
        if (to.is_float()) {
            return (from.is_int() ? "intBitsToFloat(" : "uintBitsToFloat(") + v + ")";
        }
        return narrow(to) ? normalize(v, to) : type_name(to) + "(" + v + ")";
    }
    std::string work_id(bool block, int d) const override {
        return std::string(block ? "int(gl_WorkGroupID." : "int(gl_LocalInvocationID.") + "xyz"[d] +
               ")";
    }
    std::vector<std::string> barrier() const override {
        return {"memoryBarrierShared();", "memoryBarrierBuffer();", "barrier();"};
    }
    std::string math_function(const std::string &name) const override {
        if (name == "round") {
            return "roundEven";
        }
        if (name == "fabs" || name == "abs") {
            return "abs";
        }
        if (name == "atan2") {
            return "atan";  // GLSL's two-argument atan(y, x)
        }
        return KernelSourceGen::math_function(name);
    }
    std::string shared_array(const std::string &type, const std::string &name,
                             int64_t size) const override {
        return "shared " + type + " " + name + "[" + std::to_string(size) + "];";
    }
    // Atomic updates: GLSL's atomic functions on int and uint elements of storage buffers and
    // shared arrays, named as the element itself; a compare-and-swap loop (atomicCompSwap) for
    // any other update of them. Floats have none in core GLSL.
    bool atomics_take_elements() const override { return true; }
    std::string atomic_function(AtomicUpdate::Rmw rmw, const Type &) const override {
        switch (rmw) {
        case AtomicUpdate::Rmw::Add:
            return "atomicAdd";
        case AtomicUpdate::Rmw::Min:
            return "atomicMin";
        case AtomicUpdate::Rmw::Max:
            return "atomicMax";
        case AtomicUpdate::Rmw::And:
            return "atomicAnd";
        case AtomicUpdate::Rmw::Or:
            return "atomicOr";
        case AtomicUpdate::Rmw::Xor:
            return "atomicXor";
        case AtomicUpdate::Rmw::Sub:
        case AtomicUpdate::Rmw::None:
            break;
        }
        return "";  // compare and swap
    }
    std::string atomic_compare_exchange(const std::string &element, const std::string &expected,
                                        const std::string &desired) const override {
        return "atomicCompSwap(" + element + ", " + expected + ", " + desired + ")";
    }
};

/** Compiles GLSL to SPIR-V (Vulkan 1.1) with shaderc; errors are internal (we wrote the source),
 * reported with the source. */
std::string compile_glsl(const std::string &kernel, const std::string &glsl) {
    shaderc_compiler_t compiler = shaderc_compiler_initialize();
    internal_assert(compiler) << "shaderc_compiler_initialize failed";
    shaderc_compile_options_t opts = shaderc_compile_options_initialize();
    shaderc_compile_options_set_source_language(opts, shaderc_source_language_glsl);
    shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan,
                                           shaderc_env_version_vulkan_1_1);
    shaderc_compile_options_set_target_spirv(opts, shaderc_spirv_version_1_3);
    shaderc_compile_options_set_optimization_level(opts, shaderc_optimization_level_performance);
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(compiler, glsl.data(), glsl.size(), shaderc_compute_shader,
                                 (kernel + ".comp").c_str(), "main", opts);
    bool ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    std::string spirv, message = shaderc_result_get_error_message(r);
    if (ok) {
        spirv.assign(shaderc_result_get_bytes(r), shaderc_result_get_length(r));
    }
    shaderc_result_release(r);
    shaderc_compile_options_release(opts);
    shaderc_compiler_release(compiler);
    if (!ok) {
        std::ostringstream numbered;
        std::istringstream in(glsl);
        std::string l;
        for (int i = 1; std::getline(in, l); i++) {
            numbered << i << ": " << l << "\n";
        }
        internal_error << "Vulkan back end: shaderc rejected the GLSL of kernel '" << kernel
                       << "':\n"
                       << message << "\n"
                       << numbered.str();
    }
    return spirv;
}

/** TALLY_DUMP_GLSL=<dir>: writes <dir>/<kernel>.comp and .spv. */
void dump(const std::string &kernel, const std::string &glsl, const std::string &spirv) {
    const char *dir = std::getenv("TALLY_DUMP_GLSL");
    if (!dir || !*dir) {
        return;
    }
    std::string base = std::string(dir) + "/" + kernel;
    std::ofstream(base + ".comp", std::ios::binary) << glsl;
    if (!spirv.empty()) {
        std::ofstream(base + ".spv", std::ios::binary) << spirv;
    }
}

}  // namespace

CompiledKernel compile_vulkan_kernel(const Kernel &k, const Target &) {
    user_assert(k.device_api == DeviceAPI::Vulkan)
        << "Vulkan back end: kernel '" << k.name << "' runs on " << device_api_name(k.device_api);
    CodeGenGLSL gen(k);
    std::string glsl = gen.generate();
    dump(k.name, glsl, "");
    std::string spirv = compile_glsl(k.name, glsl);
    dump(k.name, glsl, spirv);
    CompiledKernel out;
    out.name = k.name;
    out.device_api = DeviceAPI::Vulkan;
    out.code = std::move(spirv);
    out.num_args = int(k.args.size());
    out.num_buffers = gen.num_buffers;
    return out;
}

}  // namespace tally
