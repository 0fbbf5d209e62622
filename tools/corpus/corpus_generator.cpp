// corpus_generator: defines the pipelines of Tally's conformance corpora and writes, for one of
// them, what the reference maker and the conformance harness need. The same source builds against
// Halide 14 (tools/halide14) and Halide 21 (tools/halide21): the Halide 14 corpus is every
// pipeline below but those under `TALLY_HALIDE_VERSION >= 21`; the Halide 21 corpus is all of
// them, in more forms (conceptual statements, GPU schedules).
//
//   corpus_generator --list                  prints the pipelines' names, one a line
//   corpus_generator --runtime OBJ           writes Halide's standalone runtime for the base target
//   corpus_generator --runtime-by-timer OBJ  the same with profile_by_timer (its profiler is a
//                                            timer signal's), for the NAME_profile_by_timer objects
//   corpus_generator NAME DIR                writes DIR/NAME.<variant>.stmt (below), DIR/NAME.o
//                                            (and DIR/NAME_strict.o for float pipelines) and
//                                            DIR/NAME.spec
//   corpus_generator --gpu NAME DIR          writes the GPU variants' DIR/NAME.<variant>.stmt
//                                            (nothing for a pipeline without a GPU schedule)
//                                            and, for truth_gpu, its Vulkan and OpenCL objects
//
// Each pipeline is compiled in its own process (the script runs this program once a pipeline,
// and once more for its GPU schedule): Halide numbers its temporaries with process-wide counters,
// so a fresh process makes each pipeline's text independent of the others and of their order.
//
// The base target is x86-64-linux-sse41-avx-avx2. The .stmt variants are `host` (the base),
// `profile` (base-profile), `debug` (base-debug) and, for pipelines that compute in floating
// point, `strict` (base-strict_float), each as compile_to_lowered_stmt prints it. Halide 21 adds
// the host variant as compile_to_conceptual_stmt prints it (NAME.host.conceptual.stmt: the
// statement before closures and GPU offload), and, for pipelines with a GPU schedule, the
// variants `cuda`, `opencl` and `vulkan` and their `-profile` twins in both forms (the GPU
// schedule is a second definition of the same algorithm; only its text is written). The objects
// are the host and strict twins, compiled with no_runtime (the runtime comes once, from --runtime)
// so that one shared object can hold them all; the strict twin's function is NAME_strict. Some
// pipelines (Def::profile_object: float_chain and the host truth pipelines) add a -profile twin,
// NAME_profile, and a -profile_by_timer twin, NAME_profile_by_timer, for the benchmarks that run
// Halide's profilers; a GPU schedule with
// GpuSchedule::objects (truth_gpu) adds its Vulkan and OpenCL objects NAME_vulkan,
// NAME_vulkan_profile, NAME_opencl and NAME_opencl_profile, and Halide 21's runtime (--runtime)
// then carries Vulkan and OpenCL.
//
// NAME.spec tells the reference maker how to call the pipeline (one record a line):
//   pipeline NAME
//   halide VERSION            the Halide major version that made it
//   float 0|1                 whether the pipeline has a strict twin
//   tolerance RTOL ATOL       for the host (non-strict) float outputs
//   funcs F...                Funcs the profiler's report must name
//   variants V...             the lowered host variants (host, profile, debug[, strict])
//   conceptual V...           (Halide 21) the variants also written in conceptual form (host)
//   gpu V...                  (Halide 21, GPU schedules) the GPU variants
//   input NAME TYPE DIMS EXTENTS... MINS... LO HI      a buffer, filled from [LO, HI]
//   scalar NAME TYPE VALUE
//   output TYPE DIMS EXTENTS... MINS...
// Inputs and scalars come in argument order; the outputs follow in the order the pipeline lists
// them (for a Tuple, one line per element).
//
// The pipelines themselves are in CorpusDefs.cpp (shared with the Halide bridge's conformance
// runner), with the rule their float constants keep.

#include "CorpusDefs.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

using namespace Halide;
using namespace corpus;

namespace {

std::string join_ints(const std::vector<int> &v) {
    std::string s;
    for (int e : v) {
        s += " " + std::to_string(e);
    }
    return s;
}

/** The variants of a pipeline that were written, by form. */
struct Variants {
    std::vector<std::string> lowered, conceptual, gpu;
};

/** `KEY W...` (nothing when `words` is empty). */
void write_words(std::ostream &out, const std::string &key, const std::vector<std::string> &words) {
    if (words.empty()) {
        return;
    }
    out << key;
    for (const std::string &w : words) {
        out << " " << w;
    }
    out << "\n";
}

void write_spec(const std::string &path, const std::string &name, const Def &d, const Variants &v) {
    std::ofstream out(path);
    char tol[64];
    std::snprintf(tol, sizeof(tol), "%.3g %.3g", d.rtol, d.atol);
    out << "pipeline " << name << "\n";
    out << "halide " << TALLY_HALIDE_VERSION << "\n";
    out << "float " << (d.is_float ? 1 : 0) << "\n";
    out << "tolerance " << tol << "\n";
    out << "funcs";
    for (const std::string &f : d.funcs) {
        out << " " << f;
    }
    out << "\n";
    write_words(out, "variants", v.lowered);
    write_words(out, "conceptual", v.conceptual);
    write_words(out, "gpu", v.gpu);
    size_t ii = 0, si = 0;
    for (char o : d.order) {
        if (o == 'i') {
            const InputSpec &in = d.inputs[ii++];
            char range[64];
            std::snprintf(range, sizeof(range), "%.17g %.17g", in.lo, in.hi);
            out << "input " << in.name << " " << type_name(in.type) << " " << in.extents.size()
                << join_ints(in.extents) << join_ints(in.mins) << " " << range << "\n";
        } else {
            const ScalarSpec &s = d.scalars[si++];
            out << "scalar " << s.name << " " << type_name(s.type) << " " << s.value << "\n";
        }
    }
    for (const std::string &f : d.files) {
        out << "file " << f << "\n";
    }
    // `constant NAME TYPE DIMS EXTENTS... MINS...`; the elements, dense, in PATH.const.NAME.bin.
    for (const Buffer<> &b : d.constants) {
        std::vector<int> extents, mins;
        for (int i = 0; i < b.dimensions(); i++) {
            extents.push_back(b.dim(i).extent());
            mins.push_back(b.dim(i).min());
        }
        out << "constant " << b.name() << " " << type_name(b.type()) << " " << b.dimensions()
            << join_ints(extents) << join_ints(mins) << "\n";
        std::ofstream bin(path.substr(0, path.size() - 5) + ".const." + b.name() + ".bin",
                          std::ios::binary);
        bin.write(reinterpret_cast<const char *>(b.data()), std::streamsize(b.size_in_bytes()));
    }
    for (const OutputSpec &o : d.outputs) {
        out << "output " << type_name(o.type) << " " << o.extents.size() << join_ints(o.extents)
            << join_ints(o.mins) << "\n";
    }
}

/** Writes the statements of `d` compiled for `t` as function `fn`: lowered to PREFIX.stmt and,
 * from Halide 21 on when `conceptual` is set, conceptual to PREFIX.conceptual.stmt. */
void write_stmts(Def &d, const Target &t, const std::string &fn, const std::string &prefix,
                 bool conceptual) {
    std::map<OutputFileType, std::string> files = {{OutputFileType::stmt, prefix + ".stmt"}};
#if TALLY_HALIDE_VERSION >= 21
    if (conceptual) {
        files[OutputFileType::conceptual_stmt] = prefix + ".conceptual.stmt";
    }
#else
    (void)conceptual;
#endif
    d.pipeline.compile_to_module(d.args, fn, t).compile(files);
}

/** The GPU variants (Halide 21's corpus): name and target features, each also with -profile. */
const std::vector<std::pair<std::string, std::vector<Target::Feature>>> &gpu_apis() {
    static const std::vector<std::pair<std::string, std::vector<Target::Feature>>> apis = {
#if TALLY_HALIDE_VERSION >= 21
        {"cuda", {Target::CUDA}},
        {"opencl", {Target::OpenCL}},
        // 8- and 16-bit integers in shaders are optional Vulkan features: the corpus's kernels
        // use them.
        {"vulkan", {Target::Vulkan, Target::VulkanInt8, Target::VulkanInt16}},
#endif
    };
    return apis;
}

/** The GPU variants of pipeline `name` (none without a GPU schedule), each with its target:
 * every API Halide can compile its schedule for, plain and -profile. */
std::vector<std::pair<std::string, Target>> gpu_variants(const std::string &name,
                                                         const Target &base) {
    std::vector<std::pair<std::string, Target>> variants;
    auto gpu = gpu_defs().find(name);
    if (gpu == gpu_defs().end()) {
        return variants;
    }
    const std::vector<std::string> &skip = gpu->second.unsupported;
    for (const auto &api : gpu_apis()) {
        if (std::find(skip.begin(), skip.end(), api.first) != skip.end()) {
            continue;
        }
        Target t = base;
        for (Target::Feature f : api.second) {
            t = t.with_feature(f);
        }
        variants.emplace_back(api.first, t);
        variants.emplace_back(api.first + "-profile", t.with_feature(Target::Profile));
    }
    return variants;
}

/** Writes the GPU variants of pipeline `name`, lowered and conceptual (nothing without a GPU
 * schedule). A process of its own, as the host variants: Halide would rename the schedule's
 * Funcs (`gm` to `gm$1`) if the host definition had been made in the same process, and the
 * argument names would no longer be the manifest's. */
int generate_gpu(const std::string &name, const std::string &dir) {
    auto gpu = gpu_defs().find(name);
    if (gpu == gpu_defs().end()) {
        return 0;
    }
    Def g = gpu->second.make();
    for (const auto &variant : gpu_variants(name, base_target(g))) {
        write_stmts(g, variant.second, name, dir + "/" + name + "." + variant.first, true);
    }
    if (gpu->second.objects) {
        // After the texts, so that they are numbered as without the objects.
        for (const auto &variant : gpu_variants(name, base_target(g))) {
            if (variant.first.rfind("vulkan", 0) != 0 && variant.first.rfind("opencl", 0) != 0) {
                continue;
            }
            std::string fn = name + "_" + variant.first;
            std::replace(fn.begin(), fn.end(), '-', '_');
            g.pipeline.compile_to_module(g.args, fn, variant.second.with_feature(Target::NoRuntime))
                .compile({{OutputFileType::object, dir + "/" + fn + ".o"}});
        }
    }
    return 0;
}

/** The target of Halide's standalone runtime in the library: the base, and (Halide 21) Vulkan
 * and OpenCL for the GPU objects. */
Target runtime_target() {
    Target t(kBaseTarget);
#if TALLY_HALIDE_VERSION >= 21
    for (const auto &api : gpu_apis()) {
        if (api.first == "vulkan" || api.first == "opencl") {
            for (Target::Feature f : api.second) {
                t = t.with_feature(f);
            }
        }
    }
#endif
    return t;
}

int generate(const std::string &name, const std::string &dir) {
    for (const auto &kv : all_defs()) {
        if (kv.first != name) {
            continue;
        }
        Def d = kv.second();
        if (!set_output_types(name, d)) {
            return 1;
        }
        // compile_to_module names the function (compile_to_lowered_stmt would name it after the
        // first output Func). The objects add no_runtime, which would show in the text's target.
        const Target base = base_target(d);
        std::string p = dir + "/" + name;
        Variants v;
        auto emit = [&](const std::string &variant, const Target &t, const std::string &fn,
                        const std::string &object) {
            // The conceptual form of the host variant only: the other host variants' differ
            // from it as their lowered forms do, and would double the corpus's size.
            const bool conceptual = TALLY_HALIDE_VERSION >= 21 && variant == "host";
            write_stmts(d, t, fn, p + "." + variant, conceptual);
            v.lowered.push_back(variant);
            if (conceptual) {
                v.conceptual.push_back(variant);
            }
            if (!object.empty()) {
                d.pipeline.compile_to_module(d.args, fn, t.with_feature(Target::NoRuntime))
                    .compile({{OutputFileType::object, object}});
            }
        };
        emit("host", base, name, p + ".o");
        emit("profile", base.with_feature(Target::Profile), name, "");
        emit("debug", base.with_feature(Target::Debug), name, "");
        if (d.is_float) {
            emit("strict", base.with_feature(Target::StrictFloat), name + "_strict",
                 p + "_strict.o");
        }
        if (d.profile_object) {
            // Last, so that the texts above are numbered as without it. The text's function
            // keeps the pipeline's name; the object's is NAME_profile.
            const Target profiled = base.with_feature(Target::Profile);
            d.pipeline
                .compile_to_module(d.args, name + "_profile",
                                   profiled.with_feature(Target::NoRuntime))
                .compile({{OutputFileType::object, p + "_profile.o"}});
            // And Halide's other profiler, a timer signal instead of its sampler thread. Its
            // runtime cannot share a library with the sampler thread's (both define the
            // profiler's entry points): the object goes to DIR/by_timer/, linked into a library
            // of its own with the runtime --runtime-by-timer writes.
            const Target by_timer = base.with_feature(Target::ProfileByTimer);
            mkdir((dir + "/by_timer").c_str(), 0755);  // EEXIST after the first pipeline
            d.pipeline
                .compile_to_module(d.args, name + "_profile_by_timer",
                                   by_timer.with_feature(Target::NoRuntime))
                .compile(
                    {{OutputFileType::object, dir + "/by_timer/" + name + "_profile_by_timer.o"}});
        }
        // The GPU schedule has the same arguments: the host references serve it too. Its text
        // comes from `--gpu NAME DIR`, in a process of its own.
        for (const auto &variant : gpu_variants(name, base)) {
            v.gpu.push_back(variant.first);
        }
        write_spec(p + ".spec", name, d, v);
        return 0;
    }
    std::cerr << "corpus_generator: error: no pipeline named '" << name << "'\n";
    return 2;
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 1 && args[0] == "--list") {
        for (const auto &kv : all_defs()) {
            std::cout << kv.first << "\n";
        }
        return 0;
    }
    if (args.size() == 2 && args[0] == "--runtime") {
        compile_standalone_runtime(args[1], runtime_target());
        return 0;
    }
    if (args.size() == 2 && args[0] == "--runtime-by-timer") {
        compile_standalone_runtime(args[1],
                                   Target(kBaseTarget).with_feature(Target::ProfileByTimer));
        return 0;
    }
    const bool gpu = args.size() == 3 && args[0] == "--gpu";
    if (args.size() == 2 || gpu) {
        const std::string &name = args[gpu ? 1 : 0], &dir = args[gpu ? 2 : 1];
        // Halide reports a schedule it cannot compile by throwing: say what and for which.
        try {
            return gpu ? generate_gpu(name, dir) : generate(name, dir);
        } catch (const Halide::Error &e) {
            std::cerr << "corpus_generator: error: " << name << ": " << e.what() << "\n";
            return 1;
        }
    }
    std::cerr << "usage: corpus_generator --list | --runtime OBJ | NAME DIR | --gpu NAME DIR\n";
    return 2;
}
