// Target strings. The feature list is Halide 14's (so that every target Halide prints parses and
// prints back the same), plus `vulkan`, the newer CUDA capabilities and `profile_timestamps`
// that Tally adds.

#include "tally/Target.h"

#include <algorithm>
#include <sstream>

#include "tally/Error.h"

namespace tally {

namespace {

struct NamedOS {
    const char *name;
    Target::OS os;
};
const NamedOS os_names[] = {
    {"linux", Target::Linux},     {"windows", Target::Windows}, {"osx", Target::OSX},
    {"android", Target::Android}, {"ios", Target::IOS},         {"qurt", Target::QuRT},
    {"noos", Target::NoOS},       {"fuchsia", Target::Fuchsia}, {"wasmrt", Target::WebAssemblyRT},
};

struct NamedArch {
    const char *name;
    Target::Arch arch;
};
const NamedArch arch_names[] = {
    {"x86", Target::X86},         {"arm", Target::ARM},         {"mips", Target::MIPS},
    {"hexagon", Target::Hexagon}, {"powerpc", Target::POWERPC}, {"wasm", Target::WebAssembly},
    {"riscv", Target::RISCV},
};

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep)) {
        out.push_back(cur);
    }
    return out;
}

}  // namespace

const std::vector<std::string> &Target::known_features() {
    static const std::vector<std::string> names = {"jit",
                                                   "debug",
                                                   "no_asserts",
                                                   "no_bounds_query",
                                                   "sse41",
                                                   "avx",
                                                   "avx2",
                                                   "fma",
                                                   "fma4",
                                                   "f16c",
                                                   "armv7s",
                                                   "no_neon",
                                                   "vsx",
                                                   "power_arch_2_07",
                                                   "cuda",
                                                   "cuda_capability_30",
                                                   "cuda_capability_32",
                                                   "cuda_capability_35",
                                                   "cuda_capability_50",
                                                   "cuda_capability_61",
                                                   "cuda_capability_70",
                                                   "cuda_capability_75",
                                                   "cuda_capability_80",
                                                   "cuda_capability_86",
                                                   "cuda_capability_89",
                                                   "cuda_capability_90",
                                                   "opencl",
                                                   "cl_doubles",
                                                   "cl_half",
                                                   "cl_atomics64",
                                                   "openglcompute",
                                                   "egl",
                                                   "user_context",
                                                   "matlab",
                                                   "profile",
                                                   "profile_by_timer",
                                                   "profile_timestamps",
                                                   "no_runtime",
                                                   "metal",
                                                   "c_plus_plus_name_mangling",
                                                   "large_buffers",
                                                   "hvx",
                                                   "hvx_128",
                                                   "hvx_v62",
                                                   "hvx_v65",
                                                   "hvx_v66",
                                                   "hvx_shared_object",
                                                   "hexagon_dma",
                                                   "fuzz_float_stores",
                                                   "soft_float_abi",
                                                   "msan",
                                                   "avx512",
                                                   "avx512_knl",
                                                   "avx512_skylake",
                                                   "avx512_cannonlake",
                                                   "avx512_sapphirerapids",
                                                   "trace_loads",
                                                   "trace_stores",
                                                   "trace_realizations",
                                                   "trace_pipeline",
                                                   "d3d12compute",
                                                   "strict_float",
                                                   "tsan",
                                                   "asan",
                                                   "check_unsafe_promises",
                                                   "embed_bitcode",
                                                   "enable_llvm_loop_opt",
                                                   "disable_llvm_loop_opt",
                                                   "wasm_simd128",
                                                   "wasm_signext",
                                                   "wasm_sat_float_to_int",
                                                   "wasm_threads",
                                                   "wasm_bulk_memory",
                                                   "sve",
                                                   "sve2",
                                                   "arm_dot_prod",
                                                   "arm_fp16",
                                                   "llvm_large_code_model",
                                                   "rvv",
                                                   "armv81a",
                                                   "sanitizer_coverage",
                                                   "spirv",
                                                   "semihosting",
                                                   "vulkan",
                                                   "webgpu"};
    return names;
}

Target Target::parse(const std::string &s) {
    user_assert(!s.empty()) << "empty target string";
    std::vector<std::string> parts = split(s, '-');
    Target t;
    size_t i = 0;
    if (parts[0] == "host") {
        t.host = true;
        i = 1;
    } else {
        t.host = false;
        // arch-bits-os, as Halide prints it; each part is optional in Halide's parser but
        // printed in this order.
        for (const NamedArch &a : arch_names) {
            if (i < parts.size() && parts[i] == a.name) {
                t.arch = a.arch;
                i++;
                break;
            }
        }
        if (i < parts.size() && (parts[i] == "32" || parts[i] == "64")) {
            t.bits = std::stoi(parts[i]);
            i++;
        }
        for (const NamedOS &o : os_names) {
            if (i < parts.size() && parts[i] == o.name) {
                t.os = o.os;
                i++;
                break;
            }
        }
        user_assert(t.arch != ArchUnknown || t.bits != 0 || t.os != OSUnknown)
            << "target '" << s << "' must start with 'host' or an architecture (x86, arm, ...)";
    }
    const auto &known = known_features();
    for (; i < parts.size(); i++) {
        const std::string &f = parts[i];
        user_assert(!f.empty()) << "target '" << s << "' has an empty feature";
        user_assert(std::find(known.begin(), known.end(), f) != known.end())
            << "unknown target feature '" << f << "' in target '" << s << "'";
        if (!t.has_feature(f)) {
            t.features.push_back(f);
        }
    }
    std::sort(t.features.begin(), t.features.end());
    return t;
}

std::string Target::to_string() const {
    std::string s;
    if (host) {
        s = "host";
    } else {
        std::vector<std::string> head;
        for (const NamedArch &a : arch_names) {
            if (a.arch == arch) {
                head.push_back(a.name);
            }
        }
        if (bits) {
            head.push_back(std::to_string(bits));
        }
        for (const NamedOS &o : os_names) {
            if (o.os == os) {
                head.push_back(o.name);
            }
        }
        for (size_t i = 0; i < head.size(); i++) {
            s += (i ? "-" : "") + head[i];
        }
    }
    for (const std::string &f : features) {
        s += "-" + f;
    }
    return s;
}

bool Target::has_feature(const std::string &f) const {
    return std::find(features.begin(), features.end(), f) != features.end();
}

Target Target::with_feature(const std::string &f) const {
    const auto &known = known_features();
    user_assert(std::find(known.begin(), known.end(), f) != known.end())
        << "unknown target feature '" << f << "'";
    Target t = *this;
    if (!t.has_feature(f)) {
        t.features.push_back(f);
        std::sort(t.features.begin(), t.features.end());
    }
    return t;
}

Target Target::without_feature(const std::string &f) const {
    Target t = *this;
    t.features.erase(std::remove(t.features.begin(), t.features.end(), f), t.features.end());
    return t;
}

DeviceAPI Target::gpu_api() const {
    if (has_feature("cuda")) {
        return DeviceAPI::CUDA;
    }
    if (has_feature("vulkan")) {
        return DeviceAPI::Vulkan;
    }
    if (has_feature("opencl")) {
        return DeviceAPI::OpenCL;
    }
    if (has_feature("metal")) {
        return DeviceAPI::Metal;
    }
    if (has_feature("openglcompute")) {
        return DeviceAPI::OpenGLCompute;
    }
    if (has_feature("d3d12compute")) {
        return DeviceAPI::D3D12Compute;
    }
    if (has_feature("webgpu")) {
        return DeviceAPI::WebGPU;
    }
    if (has_feature("hexagon_dma")) {
        return DeviceAPI::HexagonDma;
    }
    return DeviceAPI::None;
}

void Target::check_supported() const {
    for (const char *f : {"opencl", "metal", "openglcompute", "d3d12compute", "webgpu"}) {
        user_assert(!has_feature(f)) << "target '" << to_string() << "' asks for device API '" << f
                                     << "', for which Tally has no back end (supported: cuda, "
                                        "vulkan)";
    }
    user_assert(!(has_feature("cuda") && has_feature("vulkan")))
        << "target '" << to_string() << "' asks for both cuda and vulkan; pick one";
}

}  // namespace tally
