// bridge_corpus: runs one pipeline of the Halide 21 conformance corpus through the Halide bridge.
// The pipeline is built from its Halide source (tools/corpus/CorpusDefs.cpp, the definitions the
// corpus was generated from), compiled by tally::halide::compile, and run on the corpus's
// committed inputs; the outputs are written where the conformance harness
// (test/conformance/check.py, checks `bridge` and `bridge_gpu`) compares them with Halide's own.
//
//   bridge_corpus NAME PIPELINE_DIR OUT_DIR [--gpu] [--target T] [--extern-lib LIB.so] [--runs N]
//                 [--emit-stmt FILE]
//
// PIPELINE_DIR is test/conformance/halide21/NAME (input.<arg>.npy); OUT_DIR receives
// ref.<output>.npy, named as the corpus names Halide's outputs, and is the working directory of
// the runs (debug_to_file writes there). --gpu builds the pipeline's GPU schedule instead of its
// host one. The target (default host) gets the pipeline's own features added. What the pipeline
// prints goes to stdout, as with tally-run. --emit-stmt also writes the translated module as IR
// text (what tally-opt and tallyc read), before anything runs. Exit status: 0, 1 when the pipeline
// fails or cannot be compiled (the error on stderr), 2 on bad usage.

#include "CorpusDefs.h"
#include "tally/halide/Bridge.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "driver/NpyFile.h"
#include "tally/IRPrinter.h"

namespace {

/** A name as a corpus file name carries it: characters outside [A-Za-z0-9._-] become `_`. */
std::string file_safe(const std::string &name) {
    std::string s = name;
    for (char &ch : s) {
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' ||
              ch == '-')) {
            ch = '_';
        }
    }
    return s;
}

tally::Type tally_type(const Halide::Type &t) {
    return tally::halide::translate(t);
}

/** A Halide buffer of `t` with `extents` and `mins` (dimension 0 innermost), dense. */
Halide::Buffer<> make_buffer(const Halide::Type &t, const std::vector<int> &extents,
                             const std::vector<int> &mins) {
    Halide::Buffer<> b(t, extents);
    if (!mins.empty()) {
        b.set_min(mins);
    }
    return b;
}

tally::halide::Value scalar(const corpus::ScalarSpec &s) {
    const Halide::Type &t = s.type;
    if (t.is_bool()) {
        return tally::halide::Value(s.value == "true");
    }
    if (t.is_float()) {
        return tally::halide::Value(std::strtod(s.value.c_str(), nullptr));
    }
    if (t.is_uint()) {
        return tally::halide::Value(uint64_t(std::strtoull(s.value.c_str(), nullptr, 10)));
    }
    return tally::halide::Value(int64_t(std::strtoll(s.value.c_str(), nullptr, 10)));
}

int usage() {
    std::cerr << "usage: bridge_corpus NAME PIPELINE_DIR OUT_DIR [--gpu] [--target T] "
                 "[--extern-lib LIB.so] [--runs N] [--emit-stmt FILE]\n";
    return 2;
}

int run(int argc, char **argv) {
    if (argc < 4) {
        return usage();
    }
    const std::string name = argv[1], pdir = argv[2], out = argv[3];
    bool gpu = false;
    std::string target = "host";
    int runs = 1;
    std::string emit;
    tally::halide::Options options;
    options.name = name;
    for (int i = 4; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--gpu") {
            gpu = true;
        } else if (a == "--target" && i + 1 < argc) {
            target = argv[++i];
        } else if (a == "--extern-lib" && i + 1 < argc) {
            options.extern_libraries.push_back(argv[++i]);
        } else if (a == "--emit-stmt" && i + 1 < argc) {
            emit = argv[++i];
        } else if (a == "--runs" && i + 1 < argc) {
            runs = std::atoi(argv[++i]);
        } else {
            return usage();
        }
    }

    corpus::Def d;
    bool found = false;
    if (gpu) {
        auto g = corpus::gpu_defs().find(name);
        if (g != corpus::gpu_defs().end()) {
            d = g->second.make();
            found = true;
        }
    } else {
        for (const auto &kv : corpus::all_defs()) {
            if (kv.first == name) {
                d = kv.second();
                found = true;
            }
        }
    }
    if (!found) {
        std::cerr << "bridge_corpus: error: no " << (gpu ? "GPU schedule of the " : "")
                  << "pipeline '" << name << "'\n";
        return 2;
    }
    if (!corpus::set_output_types(name, d)) {
        return 1;
    }
    for (Halide::Target::Feature f : d.features) {
        target += "-" + Halide::Target::feature_to_name(f);
    }

    auto p = tally::halide::compile(d.pipeline, d.args, target, options);
    if (!emit.empty()) {
        std::ofstream(emit) << tally::to_string(p->translated());
    }
    const std::vector<tally::Argument> &args = p->translated().functions.at(0).args;

    // The values, in the function's argument order: inputs and scalars as the Def adds them,
    // then the outputs.
    std::vector<Halide::Buffer<>> buffers;
    buffers.reserve(d.inputs.size() + d.outputs.size());
    std::vector<tally::halide::Value> values;
    size_t next_input = 0, next_scalar = 0;
    for (char kind : d.order) {
        if (kind == 's') {
            values.push_back(scalar(d.scalars.at(next_scalar++)));
            continue;
        }
        const corpus::InputSpec &in = d.inputs.at(next_input++);
        std::vector<uint8_t> data;
        const std::string path = pdir + "/input." + file_safe(in.name) + ".npy";
        tally::npy::read(path, tally_type(in.type), &data);
        buffers.push_back(make_buffer(in.type, in.extents, in.mins));
        if (data.size() != buffers.back().size_in_bytes()) {
            std::cerr << "bridge_corpus: error: " << path << " holds " << data.size()
                      << " bytes, the input " << buffers.back().size_in_bytes() << "\n";
            return 1;
        }
        std::memcpy(buffers.back().data(), data.data(), data.size());
        values.emplace_back(buffers.back().raw_buffer());
    }
    const size_t first_output = buffers.size();
    for (const corpus::OutputSpec &o : d.outputs) {
        buffers.push_back(make_buffer(o.type, o.extents, o.mins));
        values.emplace_back(buffers.back().raw_buffer());
    }
    if (values.size() != args.size()) {
        std::cerr << "bridge_corpus: error: " << values.size() << " values for " << args.size()
                  << " arguments\n";
        return 1;
    }

    if (chdir(out.c_str()) != 0) {
        std::cerr << "bridge_corpus: error: cannot enter " << out << ": " << std::strerror(errno)
                  << "\n";
        return 1;
    }
    for (int r = 0; r < runs; r++) {
        int result = p->run(values);
        if (result != 0) {
            std::cerr << "bridge_corpus: error: " << name << " returned " << result << "\n";
            return 1;
        }
    }
    std::cout.flush();
    for (size_t i = 0; i < d.outputs.size(); i++) {
        const Halide::Buffer<> &b = buffers[first_output + i];
        const tally::Argument &a = args[args.size() - d.outputs.size() + i];
        std::vector<int> shape;
        for (int k = b.dimensions() - 1; k >= 0; k--) {
            shape.push_back(b.dim(k).extent());
        }
        tally::npy::write("ref." + file_safe(a.name) + ".npy", tally_type(b.type()), shape,
                          b.data(), b.size_in_bytes());
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::cerr << "bridge_corpus: error: " << e.what() << "\n";
        return 1;
    } catch (const Halide::Error &e) {
        std::cerr << "bridge_corpus: error: " << e.what() << "\n";
        return 1;
    }
}
