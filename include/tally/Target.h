/** \file
 * Halide-style target strings: `arch-bits-os` (or `host`) followed by features, e.g.
 * `host-cuda-profile` or `x86-64-linux-avx-avx2-cuda-profile-sse41`. Every feature name that
 * Halide 14 prints is known, so corpus headers round-trip; Tally adds `vulkan` and
 * `profile_timestamps` (profiling without injected device syncs). Printing puts
 * the features in alphabetical order, as Halide does.
 */
#ifndef TALLY_TARGET_H
#define TALLY_TARGET_H

#include <string>
#include <vector>

#include "tally/IR.h"

namespace tally {

struct Target {
    enum OS { OSUnknown, Linux, Windows, OSX, Android, IOS, QuRT, NoOS, Fuchsia, WebAssemblyRT };
    enum Arch { ArchUnknown, X86, ARM, MIPS, Hexagon, POWERPC, WebAssembly, RISCV };

    /** True when the string said `host`: arch, bits and os are those of the compiling machine. */
    bool host = true;
    OS os = OSUnknown;
    Arch arch = ArchUnknown;
    int bits = 0;
    /** Feature names, sorted and unique. */
    std::vector<std::string> features;

    /** Parses a target string; throws CompileError naming the first unknown part. */
    static Target parse(const std::string &s);
    /** The canonical string: features sorted, as Halide prints them. */
    std::string to_string() const;

    bool has_feature(const std::string &f) const;
    Target with_feature(const std::string &f) const;
    Target without_feature(const std::string &f) const;

    /** Profiling requested (`profile`, `profile_by_timer` or `profile_timestamps`). */
    bool profiling() const {
        return has_feature("profile") || has_feature("profile_by_timer") || profile_timestamps();
    }
    /** Profiling that must not serialise the device: no device sync is injected after launches
     * or copies; device time comes from device timestamps read where the pipeline blocks anyway.
     * `profile` (sync mode) stays the reference and the default. */
    bool profile_timestamps() const { return has_feature("profile_timestamps"); }
    /** The GPU API the target asks for (CUDA, OpenCL, Vulkan, Metal, ...), or DeviceAPI::None. */
    DeviceAPI gpu_api() const;
    /** Throws CompileError naming the API when the target asks for a device API that Tally has
     * no back end for (only CUDA and Vulkan are supported). */
    void check_supported() const;

    bool operator==(const Target &o) const {
        return host == o.host && os == o.os && arch == o.arch && bits == o.bits &&
               features == o.features;
    }
    bool operator!=(const Target &o) const { return !(*this == o); }

    /** Every feature name the parser accepts. */
    static const std::vector<std::string> &known_features();
};

}  // namespace tally

#endif  // TALLY_TARGET_H
