// Target strings. The features are TargetFeatures.def's: every name Halide 14 or Halide 21 knows
// (so that every target Halide prints parses and prints back the same), plus Tally's own.

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

namespace {

struct FeatureInfo {
    const char *name;
    unsigned dialects;
};

constexpr unsigned H14 = Dialects::H14, H21 = Dialects::H21, Tally = Dialects::Tally;
const FeatureInfo feature_infos[] = {
#define TALLY_TARGET_FEATURE(E, NAME, DIALECTS) {NAME, DIALECTS},
#include "tally/TargetFeatures.def"
};
static_assert(sizeof(feature_infos) / sizeof(feature_infos[0]) == Target::FeatureEnd,
              "one FeatureInfo per Target::Feature");

}  // namespace

const char *Target::feature_name(Feature f) {
    internal_assert(f >= 0 && f < FeatureEnd) << "feature " << int(f) << " out of range";
    return feature_infos[f].name;
}

unsigned Target::feature_dialects(Feature f) {
    internal_assert(f >= 0 && f < FeatureEnd) << "feature " << int(f) << " out of range";
    return feature_infos[f].dialects;
}

std::optional<Target::Feature> Target::find_feature(const std::string &name) {
    for (int i = 0; i < FeatureEnd; i++) {
        if (name == feature_infos[i].name) {
            return Feature(i);
        }
    }
    return std::nullopt;
}

Target::Feature Target::feature_named(const std::string &name) {
    std::optional<Feature> f = find_feature(name);
    user_assert(f.has_value()) << "unknown target feature '" << name << "'";
    return *f;
}

const std::vector<std::string> &Target::known_features() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const FeatureInfo &f : feature_infos) {
            v.emplace_back(f.name);
        }
        return v;
    }();
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
    for (; i < parts.size(); i++) {
        const std::string &f = parts[i];
        user_assert(!f.empty()) << "target '" << s << "' has an empty feature";
        std::optional<Feature> feature = find_feature(f);
        user_assert(feature.has_value())
            << "unknown target feature '" << f << "' in target '" << s << "'";
        t.feature_set.set(*feature);
    }
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
    for (const std::string &f : features()) {
        s += "-" + f;
    }
    return s;
}

std::vector<std::string> Target::features() const {
    std::vector<std::string> names;
    for (int i = 0; i < FeatureEnd; i++) {
        if (feature_set.test(i)) {
            names.emplace_back(feature_infos[i].name);
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

Target Target::with_feature(Feature f) const {
    Target t = *this;
    t.feature_set.set(f);
    return t;
}

Target Target::without_feature(Feature f) const {
    Target t = *this;
    t.feature_set.reset(f);
    return t;
}

namespace {

// The GPU APIs and the features that enable them, in the order gpu_api() prefers them.
const std::pair<Target::Feature, DeviceAPI> gpu_api_features[] = {
    {Target::CUDA, DeviceAPI::CUDA},
    {Target::Vulkan, DeviceAPI::Vulkan},
    {Target::OpenCL, DeviceAPI::OpenCL},
    {Target::Metal, DeviceAPI::Metal},
    {Target::OpenGLCompute, DeviceAPI::OpenGLCompute},
    {Target::D3D12Compute, DeviceAPI::D3D12Compute},
    {Target::WebGPU, DeviceAPI::WebGPU},
    {Target::HexagonDma, DeviceAPI::HexagonDma},
};

}  // namespace

DeviceAPI Target::gpu_api() const {
    // The first the target names, in this order (check_supported rejects cuda with vulkan).
    for (const auto &[feature, api] : gpu_api_features) {
        if (has_feature(feature)) {
            return api;
        }
    }
    return DeviceAPI::None;
}

bool Target::enables(DeviceAPI api) const {
    for (const auto &[feature, a] : gpu_api_features) {
        if (a == api) {
            return has_feature(feature);
        }
    }
    return false;
}

void Target::check_supported() const {
    for (Feature f : {Metal, OpenGLCompute, D3D12Compute, WebGPU}) {
        user_assert(!has_feature(f))
            << "target '" << to_string() << "' asks for device API '" << feature_name(f)
            << "', for which Tally has no back end (supported: cuda, opencl, vulkan)";
    }
    int apis = int(has_feature(CUDA)) + int(has_feature(Vulkan)) + int(has_feature(OpenCL));
    user_assert(apis <= 1) << "target '" << to_string()
                           << "' asks for more than one of cuda, opencl and vulkan; pick one";
}

}  // namespace tally
