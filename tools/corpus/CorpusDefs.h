// The pipelines of Tally's conformance corpora (tools/corpus/README.md), written with Halide's C++
// API against Halide 14 and Halide 21 (TALLY_HALIDE_VERSION): what only Halide 21 has is under
// `TALLY_HALIDE_VERSION >= 21`. Used by the corpus generator (corpus_generator.cpp), which lowers
// and compiles them with Halide, and by the Halide bridge's conformance runner
// (test/halide/bridge_corpus.cpp), which compiles the same pipelines through Tally.
//
// Float constants: Halide prints them with 6 decimals (1/255 becomes 0.003922f), so IR read back
// from the text differs from Halide's object in the low bits unless every float constant is exact
// in 6 decimals. Every float constant of these pipelines is a multiple of 1/64 (0.015625 is the
// finest), and no pipeline divides a float by a constant other than a power of two (Halide would
// print the reciprocal).
#ifndef TALLY_CORPUS_DEFS_H
#define TALLY_CORPUS_DEFS_H

#include "Halide.h"

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

// Halide 14's Halide.h defines no version macro; later ones define HALIDE_VERSION_MAJOR.
#if defined(HALIDE_VERSION_MAJOR)
#define TALLY_HALIDE_VERSION HALIDE_VERSION_MAJOR
#else
#define TALLY_HALIDE_VERSION 14
#endif

namespace corpus {

using Halide::Argument;
using Halide::Buffer;
using Halide::Pipeline;
using Halide::Target;
using Halide::Type;

/** The corpus's base target. */
extern const char *const kBaseTarget;

/** How the reference maker fills one input buffer. */
struct InputSpec {
    std::string name;
    Type type;
    std::vector<int> extents, mins;
    double lo, hi;
};

/** One scalar argument's value, spelled as tally-run's --scalar reads it. */
struct ScalarSpec {
    std::string name;
    Type type;
    std::string value;
};

/** One output buffer's shape. */
struct OutputSpec {
    Type type;
    std::vector<int> extents, mins;
};

/** A corpus pipeline: the Halide pipeline, its arguments and how to run and check it. */
struct Def {
    Pipeline pipeline;
    std::vector<Argument> args;
    std::vector<InputSpec> inputs;
    std::vector<ScalarSpec> scalars;
    std::vector<OutputSpec> outputs;
    std::vector<std::string> funcs;
    bool is_float = false;
    double rtol = 0, atol = 0;
    /** Argument order of inputs and scalars mixed: 'i' or 's' per argument. */
    std::string order;
    /** Files the pipeline writes in the working directory (debug_to_file). */
    std::vector<std::string> files;
    /** Target features the pipeline needs beyond the corpus's base target. */
    std::vector<Target::Feature> features;
    /** Buffers the pipeline embeds (Halide prints them `buffer NAME = {...}`, without their
     * data): the reference maker writes each to the corpus as a .npy file. */
    std::vector<Buffer<>> constants;
    /** Whether Halide's library also gets the pipeline compiled with -profile (function
     * NAME_profile), for the benchmarks that set Halide's profiler beside Tally's. */
    bool profile_object = false;
};

/** A pipeline's GPU schedule, the GPU APIs (gpu_apis() names) Halide cannot compile it for, and
 * whether Halide's library also gets its Vulkan and OpenCL objects, NAME_vulkan,
 * NAME_vulkan_profile, NAME_opencl and NAME_opencl_profile (for the benchmarks that run Halide's
 * GPU profiler; the runtime then carries Vulkan and OpenCL). */
struct GpuSchedule {
    std::function<Def()> make;
    std::vector<std::string> unsupported;
    bool objects = false;
};

/** Every pipeline of the corpus, by name, in the corpus's order. Each call of a maker builds
 * its pipeline anew (Halide numbers names process-wide: build one pipeline per process for
 * stable names). */
const std::vector<std::pair<std::string, std::function<Def()>>> &all_defs();
/** The GPU schedules of the pipelines that have one (none before Halide 21's corpus). */
const std::map<std::string, GpuSchedule> &gpu_defs();
/** Fills each OutputSpec's type from the pipeline's outputs; false (saying why on stderr) when
 * the Def lists another number of outputs than the pipeline has. */
bool set_output_types(const std::string &name, Def &d);
/** The target of `d`'s host variant: the base plus the features the pipeline needs. */
Target base_target(const Def &d);
/** "uint16", "float32", "bool": a type as the spec and the manifest name it. */
std::string type_name(const Type &t);

}  // namespace corpus

#endif  // TALLY_CORPUS_DEFS_H
