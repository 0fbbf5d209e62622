// The OpenCL back end: one Kernel (device API OpenCL) to OpenCL C 1.2 source, which the runtime
// hands to the driver (clBuildProgram) on the kernel's first launch. The body is KernelSource.h's
// C-family source (its .cpp says how loops, values and arithmetic are generated); this file says
// how OpenCL C spells what C does not have, and how the arguments arrive.
//
// Interface (tally_kernel_source in tally_runtime.h): `__kernel void <kernel name>(...)`, the
// buffer arguments first as `__global <element> *` (const where the kernel only reads them),
// then the scalars by value, in the order of the kernel's arguments. A bool scalar arrives as
// one byte (OpenCL forbids bool kernel arguments) and is compared with 0 at entry. The work-group
// size is the launch's (clEnqueueNDRangeKernel's local size); ids are get_group_id and
// get_local_id; shared arrays are `__local` arrays at kernel scope, where OpenCL C requires them.
//
// Types: 8- to 64-bit integers (C's arithmetic on the narrow ones, wrapped back to their width
// after each operation), float32, float64 (cl_khr_fp64, enabled where a kernel uses it) and bool.
//
// Floats: FP_CONTRACT is OFF, so that every operation rounds as the IR says (no fused
// multiply-add the host code would not have), and literals carry the `f` suffix (an unsuffixed
// one is a double in OpenCL C).
//
// Debugging: with TALLY_DUMP_OPENCL=<dir> in the environment, each kernel's source is written to
// <dir>/<kernel>.cl.

#include "codegen/CodeGen_OpenCL.h"

#include "codegen/KernelSource.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tally/Error.h"

namespace tally {

namespace {

/** Is `s` a C identifier? */
bool is_identifier(const std::string &s) {
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) {
        return false;
    }
    for (char c : s) {
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        if (!ok) {
            return false;
        }
    }
    return true;
}

/** Generates the OpenCL C source of one kernel. */
class CodeGenOpenCLC : public KernelSourceGen {
public:
    explicit CodeGenOpenCLC(const Kernel &k) : KernelSourceGen(k) {}

    std::string generate() {
        user_assert(is_identifier(kernel.name)) << "OpenCL back end: kernel '" << kernel.name
                                                << "': its name is not an OpenCL C identifier";
        reserve(kernel.name);
        bind_arguments();
        generate_body();

        std::ostringstream src;
        src << "// Tally kernel " << kernel.name << " (OpenCL C 1.2)\n"
            << "#pragma OPENCL FP_CONTRACT OFF\n";
        if (uses_float64) {
            src << "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
        }
        // The helpers are guarded, so that kernels put one after the other
        // (compile_opencl_module) define them once.
        if (need_div_mod) {
            src << "#ifndef TALLY_DIV_MOD_HELPERS\n#define TALLY_DIV_MOD_HELPERS\n"
                << div_mod_helpers << "#endif\n";
        }
        if (need_div_mod_64) {
            src << "#ifndef TALLY_DIV_MOD_HELPERS_64\n#define TALLY_DIV_MOD_HELPERS_64\n"
                << div_mod_helpers_64 << "#endif\n";
        }
        src << "__kernel void " << kernel.name << "(";
        for (size_t i = 0; i < params.size(); i++) {
            src << (i ? ",\n    " : "\n    ") << params[i];
        }
        src << ") {\n";
        std::istringstream shared(shared_decls.str());
        for (std::string l; std::getline(shared, l);) {
            src << "    " << l << "\n";
        }
        src << prologue.str() << body.str() << "}\n";
        return src.str();
    }

protected:
    const char *api_name() const override { return "OpenCL"; }
    bool supports(const Type &e) const override {
        int b = e.bits();
        return e.is_bool() || ((e.is_int() || e.is_uint()) && b >= 8 && b <= 64) ||
               (e.code() == Type::Float && (b == 32 || b == 64));
    }
    const char *supported_types() const override {
        return "8- to 64-bit integers, float32, float64 (on devices with cl_khr_fp64) and bool";
    }
    std::string type_name(const Type &t) const override {
        Type e = t.element_of();
        if (e.is_bool()) {
            return "bool";
        }
        if (e.is_float()) {
            return e.bits() == 64 ? "double" : "float";
        }
        const char *names[] = {"char", "short", "int", "long"};
        int i = e.bits() == 8 ? 0 : e.bits() == 16 ? 1 : e.bits() == 32 ? 2 : 3;
        return (e.is_uint() ? "u" : "") + std::string(names[i]);
    }
    std::string cast(const std::string &v, const Type &, const Type &to) const override {
        return "((" + type_name(to) + ")(" + v + "))";
    }
    std::string bit_cast(const std::string &v, const Type &, const Type &to) const override {
        return "as_" + type_name(to) + "(" + v + ")";
    }
    std::string float_digits(const std::string &digits) const override { return digits + "f"; }
    std::string work_id(bool block, int d) const override {
        return std::string(block ? "((int)get_group_id(" : "((int)get_local_id(") +
               std::to_string(d) + "))";
    }
    std::vector<std::string> barrier() const override {
        return {"barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"};
    }
    std::string shared_array(const std::string &type, const std::string &name,
                             int64_t size) const override {
        return "__local " + type + " " + name + "[" + std::to_string(size) + "];";
    }
    std::string atomic_word_pointer(Space space, const Type &word) const override {
        return std::string(space == Space::Shared ? "volatile __local " : "volatile __global ") +
               type_name(word) + " *";
    }
    std::string atomic_function(AtomicUpdate::Rmw rmw, const Type &elem) const override {
        if (elem.is_float()) {
            return "";  // OpenCL 1.2 has no float atomics: compare and swap
        }
        // OpenCL C 1.2's, on int and uint (min and max compare as the pointer's type says).
        switch (rmw) {
        case AtomicUpdate::Rmw::Add:
            return "atomic_add";
        case AtomicUpdate::Rmw::Sub:
            return "atomic_sub";
        case AtomicUpdate::Rmw::Min:
            return "atomic_min";
        case AtomicUpdate::Rmw::Max:
            return "atomic_max";
        case AtomicUpdate::Rmw::And:
            return "atomic_and";
        case AtomicUpdate::Rmw::Or:
            return "atomic_or";
        case AtomicUpdate::Rmw::Xor:
            return "atomic_xor";
        default:
            return "";
        }
    }
    std::string atomic_compare_exchange(const std::string &pointer, const std::string &expected,
                                        const std::string &desired) const override {
        return "atomic_cmpxchg(" + pointer + ", " + expected + ", " + desired + ")";
    }

private:
    std::vector<std::string> params;
    std::ostringstream prologue;

    std::string buffer_argument(const std::string &name, const Type &elem, bool stored,
                                int index) override {
        user_assert(!elem.is_bool())
            << "OpenCL back end: kernel '" << kernel.name << "': buffer '" << name
            << "' holds bool, which OpenCL kernel arguments cannot (store uint8 instead)";
        std::string n = fresh("b" + std::to_string(index));
        params.push_back(std::string("__global ") + (stored ? "" : "const ") + type_name(elem) +
                         " *" + n + "  /* " + name + " */");
        return n;
    }

    std::string scalar_argument(const std::string &name, const Type &t) override {
        std::string n = fresh("v_" + kernel_source_name(name));
        if (t.is_bool()) {
            std::string byte = fresh(n + "_byte");
            params.push_back("const uchar " + byte + "  /* " + name + " */");
            prologue << "    bool " << n << " = " << byte << " != 0;\n";
        } else {
            params.push_back("const " + type_name(t) + " " + n + "  /* " + name + " */");
        }
        return n;
    }
};

/** TALLY_DUMP_OPENCL=<dir>: writes <dir>/<kernel>.cl. */
void dump(const std::string &kernel, const std::string &source) {
    const char *dir = std::getenv("TALLY_DUMP_OPENCL");
    if (!dir || !*dir) {
        return;
    }
    std::ofstream(std::string(dir) + "/" + kernel + ".cl", std::ios::binary) << source;
}

}  // namespace

CompiledKernel compile_opencl_kernel(const Kernel &k, const Target &) {
    user_assert(k.device_api == DeviceAPI::OpenCL)
        << "OpenCL back end: kernel '" << k.name << "' runs on " << device_api_name(k.device_api);
    CodeGenOpenCLC gen(k);
    std::string source = gen.generate();
    dump(k.name, source);
    CompiledKernel out;
    out.name = k.name;
    out.device_api = DeviceAPI::OpenCL;
    out.code = std::move(source);
    out.num_args = int(k.args.size());
    out.num_buffers = gen.num_buffers;
    return out;
}

std::string compile_opencl_module(const Module &lowered) {
    std::string out;
    for (const Kernel &k : lowered.kernels) {
        if (k.device_api == DeviceAPI::OpenCL) {
            out += (out.empty() ? "" : "\n") + compile_opencl_kernel(k, lowered.target).code;
        }
    }
    return out;
}

}  // namespace tally
