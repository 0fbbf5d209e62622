/** \file
 * Halide-style target strings: `arch-bits-os` (or `host`) followed by features, e.g.
 * `host-cuda-profile` or `x86-64-linux-avx-avx2-cuda-profile-sse41`. Every feature name that
 * Halide 14 or Halide 21 prints is known (the list is TargetFeatures.def, one line a feature), so
 * corpus headers round-trip; Tally adds `profile_timestamps` (profiling without injected device
 * syncs) and two newer CUDA capabilities. Printing puts the features in alphabetical order, as
 * Halide does.
 *
 * Code asks for a feature by its enumerator (`t.has_feature(Target::Profile)`): a misspelt
 * feature does not compile. The overloads taking a name are for text from users (the CLIs, the
 * Python module); they throw CompileError for a name that is no feature instead of answering
 * false.
 */
#ifndef TALLY_TARGET_H
#define TALLY_TARGET_H

#include <bitset>
#include <optional>
#include <string>
#include <vector>

#include "tally/IR.h"

namespace tally {

struct Target {
    enum OS { OSUnknown, Linux, Windows, OSX, Android, IOS, QuRT, NoOS, Fuchsia, WebAssemblyRT };
    enum Arch { ArchUnknown, X86, ARM, MIPS, Hexagon, POWERPC, WebAssembly, RISCV };

    /** Every feature of TargetFeatures.def, in its order. */
    enum Feature {
#define TALLY_TARGET_FEATURE(E, NAME, DIALECTS) E,
#include "tally/TargetFeatures.def"
        FeatureEnd
    };

    /** True when the string said `host`: arch, bits and os are those of the compiling machine. */
    bool host = true;
    OS os = OSUnknown;
    Arch arch = ArchUnknown;
    int bits = 0;
    /** The features, one bit per Feature. */
    std::bitset<FeatureEnd> feature_set;

    /** Parses a target string; throws CompileError naming the first unknown part. */
    static Target parse(const std::string &s);
    /** The canonical string: features sorted by name, as Halide prints them. */
    std::string to_string() const;

    bool has_feature(Feature f) const {
        return feature_set.test(f);
    }
    Target with_feature(Feature f) const;
    Target without_feature(Feature f) const;
    /** By name: throw CompileError when `name` is no feature (a misspelling is not "absent"). */
    bool has_feature(const std::string &name) const {
        return has_feature(feature_named(name));
    }
    Target with_feature(const std::string &name) const {
        return with_feature(feature_named(name));
    }
    Target without_feature(const std::string &name) const {
        return without_feature(feature_named(name));
    }
    /** The names of the target's features, sorted. */
    std::vector<std::string> features() const;

    /** Profiling requested (`profile`, `profile_by_timer` or `profile_timestamps`). */
    bool profiling() const {
        return has_feature(Profile) || has_feature(ProfileByTimer) || profile_timestamps();
    }
    /** Profiling that must not serialise the device: no device sync is injected after launches
     * or copies; device time comes from device timestamps read where the pipeline blocks anyway.
     * `profile` (sync mode) stays the reference and the default. */
    bool profile_timestamps() const {
        return has_feature(ProfileTimestamps);
    }
    /** The GPU API the target asks for (CUDA, OpenCL, Vulkan, Metal, ...), or DeviceAPI::None. */
    DeviceAPI gpu_api() const;
    /** Does the target have the feature that enables GPU API `api` (`cuda` for CUDA, ...)? */
    bool enables(DeviceAPI api) const;
    /** Throws CompileError naming the API when the target asks for a device API that Tally has
     * no back end for (CUDA, OpenCL and Vulkan are supported). */
    void check_supported() const;

    bool operator==(const Target &o) const {
        return host == o.host && os == o.os && arch == o.arch && bits == o.bits &&
               feature_set == o.feature_set;
    }
    bool operator!=(const Target &o) const {
        return !(*this == o);
    }

    /** A feature's name as Halide prints it. */
    static const char *feature_name(Feature f);
    /** The feature of that name, or nullopt. */
    static std::optional<Feature> find_feature(const std::string &name);
    /** The feature of that name; throws CompileError (`unknown target feature 'x'`) if none. */
    static Feature feature_named(const std::string &name);
    /** Which dialects know the feature (a mask of tally::Dialects). */
    static unsigned feature_dialects(Feature f);
    /** Every feature name the parser accepts, in TargetFeatures.def's order. */
    static const std::vector<std::string> &known_features();
};

}  // namespace tally

#endif  // TALLY_TARGET_H
