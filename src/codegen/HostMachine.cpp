// The machine host code is compiled for (see HostMachine.h).
//
// The CPU and attributes of an explicit target follow Halide 14's x86 back end (its mcpu and
// mattrs choices), with two differences forced by LLVM 19: the Xeon Phi attributes avx512pf
// and avx512er no longer exist (knl is still a CPU), and the ISA features are listed besides
// the CPU that implies them. Code can run here when the target's ISA attributes name no feature
// this CPU lacks.

#include "codegen/HostMachine.h"

#include <mutex>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include "tally/Error.h"

namespace tally {

namespace {

/** Sets LLVM's option `name` (a cl::opt of its passes) to `value`, unless the process's own
 * command line already gave it one. */
void set_llvm_option(const char *name, const char *value) {
    llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
    auto it = options.find(name);
    if (it != options.end() && it->second->getNumOccurrences() == 0) {
        it->second->addOccurrence(0, name, value);
    }
}

void init_llvm() {
    static std::once_flag once;
    std::call_once(once, []() {
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        llvm::InitializeNativeTargetAsmParser();
        // Loops Halide left scalar are vectorized by LLVM's loop vectorizer, which on x86 runs 4
        // vectors an iteration (AVX2 float: 32 elements) and leaves the rest to a scalar loop. On
        // the short rows of small images that rest is most of the row: memoize_p's 24-wide rows
        // ran all scalar, 1.5x Halide's time (whose LLVM interleaves 2 vectors). LLVM 19
        // vectorizes that rest too only for vectors of 16 elements or more; from 8 it covers AVX2
        // floats, and rows of any width run a scalar tail of at most one vector.
        set_llvm_option("epilogue-vectorization-minimum-VF", "8");
    });
}

/** Never prefer gathers and scatters (LLVM's SLP vectorizer would otherwise turn lane-by-lane
 * accesses back into them on AVX-512 CPUs, where they are legal but slow). */
const char *const no_gathers = "+prefer-no-gather,+prefer-no-scatter";

bool has_any(const Target &t, std::initializer_list<Target::Feature> fs) {
    for (Target::Feature f : fs) {
        if (t.has_feature(f)) {
            return true;
        }
    }
    return false;
}

/** Halide 14's CPU for the highest ISA feature of an x86 target. */
std::string x86_cpu(const Target &t) {
    if (t.has_feature(Target::AVX512_SapphireRapids)) {
        return "sapphirerapids";
    }
    if (t.has_feature(Target::AVX512_Cannonlake)) {
        return "cannonlake";
    }
    if (t.has_feature(Target::AVX512_Skylake)) {
        return "skylake-avx512";
    }
    if (t.has_feature(Target::AVX512_KNL)) {
        return "knl";
    }
    if (t.has_feature(Target::AVX2)) {
        return "haswell";
    }
    if (t.has_feature(Target::AVX)) {
        return "corei7-avx";
    }
    if (t.has_feature(Target::SSE41)) {
        return "penryn";  // SSE4.1 without SSE4.2
    }
    return "k8";  // SSE2 without SSSE3
}

/** Halide 14's attributes for an x86 target, the ISA features spelled out: LLVM's names,
 * without the '+'. */
std::vector<std::string> x86_isa(const Target &t) {
    std::vector<std::string> fs;
    if (has_any(t, {Target::SSE41, Target::AVX, Target::AVX2})) {
        fs.push_back("sse4.1");
    }
    if (has_any(t, {Target::AVX, Target::AVX2})) {
        fs.push_back("avx");
    }
    if (t.has_feature(Target::AVX2)) {
        fs.insert(fs.end(), {"avx2", "fma", "f16c"});
    }
    if (t.has_feature(Target::FMA) && !t.has_feature(Target::AVX2)) {
        fs.push_back("fma");
    }
    if (t.has_feature(Target::FMA4)) {
        fs.push_back("fma4");
    }
    if (t.has_feature(Target::F16C) && !t.has_feature(Target::AVX2)) {
        fs.push_back("f16c");
    }
    if (has_any(t, {Target::AVX512, Target::AVX512_KNL, Target::AVX512_Skylake,
                    Target::AVX512_Cannonlake})) {
        fs.insert(fs.end(), {"avx512f", "avx512cd"});
        if (has_any(t, {Target::AVX512_Skylake, Target::AVX512_Cannonlake})) {
            fs.insert(fs.end(), {"avx512vl", "avx512bw", "avx512dq"});
        }
        if (t.has_feature(Target::AVX512_Cannonlake)) {
            fs.insert(fs.end(), {"avx512ifma", "avx512vbmi"});
        }
    }
    if (t.has_feature(Target::AVX512_SapphireRapids)) {
        fs.insert(fs.end(), {"avx512bf16", "avx512vnni"});
    }
    return fs;
}

/** The attributes: the ISA features, then the tuning. */
std::string x86_features(const std::vector<std::string> &isa) {
    std::string s;
    for (const std::string &f : isa) {
        s += "+" + f + ",";
    }
    return s + no_gathers;
}

std::string host_features() {
    std::string s;
    for (const auto &kv : llvm::sys::getHostCPUFeatures()) {
        s += (kv.second ? "+" : "-") + kv.first().str() + ",";
    }
    return s + no_gathers;
}

const llvm::Target &llvm_target(const std::string &triple) {
    init_llvm();
    std::string err;
    const llvm::Target *t = llvm::TargetRegistry::lookupTarget(triple, err);
    user_assert(t) << "cannot compile for '" << triple << "': " << err;
    return *t;
}

}  // namespace

HostMachine host_machine(const Target &t) {
    HostMachine hm;
    if (t.host) {
        hm.triple = llvm::sys::getProcessTriple();
        hm.cpu = llvm::sys::getHostCPUName().str();
        hm.features = host_features();
        return hm;
    }
    const std::string name = t.to_string();
    user_assert(t.arch == Target::X86)
        << "target '" << name << "': Tally compiles host code for x86-64 only";
    user_assert(t.bits == 64) << "target '" << name
                              << "': Tally compiles host code for 64-bit x86 only (say x86-64)";
    user_assert(t.os == Target::Linux)
        << "target '" << name << "': Tally compiles host code for Linux only (say x86-64-linux)";
    // x86 ISA features newer than Halide 14 that this back end does not map to a CPU and
    // attributes yet: compiling without them would silently give older code than asked for.
    for (Target::Feature f : {Target::AVX512_Zen4, Target::AVX512_Zen5, Target::AVXVNNI,
                              Target::AVX10_1, Target::X86APX}) {
        user_assert(!t.has_feature(f))
            << "target '" << name << "': Tally's x86 code generation does not support the feature '"
            << Target::feature_name(f) << "' yet";
    }
    hm.triple = "x86_64-unknown-linux-gnu";
    hm.cpu = x86_cpu(t);
    hm.isa = x86_isa(t);
    hm.features = x86_features(hm.isa);
    return hm;
}

std::unique_ptr<llvm::TargetMachine> host_target_machine(const Target &t, int opt_level,
                                                         bool strict_float) {
    HostMachine hm = host_machine(t);
    const llvm::Target &target = llvm_target(hm.triple);
    llvm::TargetOptions options;
    options.AllowFPOpFusion = strict_float ? llvm::FPOpFusion::Strict : llvm::FPOpFusion::Fast;
    options.UnsafeFPMath = !strict_float;
    options.NoInfsFPMath = !strict_float;
    options.NoNaNsFPMath = !strict_float;
    options.HonorSignDependentRoundingFPMathOption = !strict_float;
    options.FunctionSections = true;
    llvm::CodeGenOptLevel level =
        opt_level <= 0 ? llvm::CodeGenOptLevel::None : llvm::CodeGenOptLevel::Aggressive;
    std::unique_ptr<llvm::TargetMachine> tm(target.createTargetMachine(
        hm.triple, hm.cpu, hm.features, options, llvm::Reloc::PIC_, std::nullopt, level));
    user_assert(tm) << "cannot create a target machine for '" << t.to_string() << "'";
    return tm;
}

void check_runs_here(const Target &t) {
    if (t.host) {
        return;
    }
    HostMachine hm = host_machine(t);
    llvm::Triple want(hm.triple), here(llvm::sys::getProcessTriple());
    user_assert(want.getArch() == here.getArch() && want.getOS() == here.getOS())
        << "target '" << t.to_string() << "' cannot run in this process (" << here.str() << ")";
    // The ISA features the target names (the CPU also implies system features such as invpcid,
    // which virtual machines often hide and generated code never uses).
    llvm::StringMap<bool> have = llvm::sys::getHostCPUFeatures();
    std::string missing;
    for (const std::string &a : hm.isa) {
        if (!have.lookup(a)) {
            missing += (missing.empty() ? "" : ", ") + a;
        }
    }
    user_assert(missing.empty()) << "target '" << t.to_string()
                                 << "' needs CPU features this machine lacks: " << missing;
}

}  // namespace tally
