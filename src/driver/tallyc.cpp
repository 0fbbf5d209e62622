// tallyc: ahead-of-time compiler.
//
//   tallyc PIPELINE.stmt -target T -o DIR [-e object,header,llvm,asm,stmt,ptx,cl] [-O N]
//          [--buffer-constant NAME=FILE.npy[@X,Y,...]...]
//
// Lowers the pipeline for the target and writes DIR/<module>.o (link it with the static runtime
// library, libtally_runtime.a), DIR/<module>.h (the entry points), DIR/<module>.ll (LLVM IR),
// DIR/<module>.stmt (the lowered module), DIR/<module>.ptx (the PTX of its CUDA kernels, one
// PTX module; an error if it has none) and DIR/<module>.cl (the OpenCL C of its OpenCL kernels,
// one program; an error if it has none). Default outputs: object and header. --buffer-constant
// gives a buffer Halide embedded (`buffer NAME = {...}`, printed without its data) its contents.

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "driver/NpyFile.h"
#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/Lower.h"
#include "tally/Parser.h"

using namespace tally;

namespace {

void usage(std::ostream &os) {
    os << "usage: tallyc PIPELINE.stmt -target T -o DIR [-e object,header,llvm,asm,stmt,ptx,cl] "
          "[-O N] [--buffer-constant NAME=FILE.npy[@X,Y,...]...]\n";
}

}  // namespace

int main(int argc, char **argv) {
    std::string input, target = "host", dir;
    std::vector<std::string> emit = {"object", "header"};
    int opt = 3;
    std::vector<std::string> constants;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&](const char *flag) -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "tallyc: error: " << flag << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            usage(std::cout);
            return 0;
        } else if (a == "-target" || a == "--target") {
            target = value("-target");
        } else if (a == "-o") {
            dir = value("-o");
        } else if (a == "-e") {
            emit.clear();
            std::istringstream in(value("-e"));
            std::string e;
            while (std::getline(in, e, ',')) {
                if (e != "object" && e != "header" && e != "llvm" && e != "asm" && e != "stmt" &&
                    e != "ptx" && e != "cl") {
                    std::cerr << "tallyc: error: unknown output '" << e
                              << "' (expected object, header, llvm, asm, stmt, ptx or cl)\n";
                    return 2;
                }
                emit.push_back(e);
            }
        } else if (a == "-O") {
            opt = std::atoi(value("-O").c_str());
        } else if (a == "--buffer-constant") {
            constants.push_back(value("--buffer-constant"));
        } else if (!a.empty() && a[0] == '-') {
            std::cerr << "tallyc: error: unknown option '" << a << "'\n";
            usage(std::cerr);
            return 2;
        } else if (input.empty()) {
            input = a;
        } else {
            std::cerr << "tallyc: error: more than one input\n";
            return 2;
        }
    }
    if (input.empty() || dir.empty()) {
        usage(std::cerr);
        return 2;
    }
    try {
        Module parsed = parse_pipeline_file(input);
        if (!npy::define_buffer_constants(parsed, constants, "tallyc")) {
            return 2;  // a bad option value
        }
        Module m = lower(parsed, Target::parse(target));
        for (const std::string &n : m.notes) {
            std::cerr << input << ": note: " << n << "\n";
        }
        OutputFiles out;
        std::string base = dir + "/" + m.name;
        bool ptx = false, cl = false;
        for (const std::string &e : emit) {
            if (e == "ptx") {
                ptx = true;
            } else if (e == "cl") {
                cl = true;
            } else if (e == "object") {
                out.object = base + ".o";
            } else if (e == "header") {
                out.header = base + ".h";
            } else if (e == "llvm") {
                out.llvm_ir = base + ".ll";
            } else if (e == "asm") {
                out.assembly = base + ".s";
            } else {
                out.stmt = base + ".stmt";
            }
        }
        CompileOptions co;
        co.opt_level = opt;
        compile_to_files(m, out, co);
        // -e ptx and -e cl: the device code of one API, an error when the module has none.
        struct DeviceOutput {
            bool wanted;
            const char *ext, *api;
            std::string (*compile)(const Module &);
        };
        for (const DeviceOutput &d : {DeviceOutput{ptx, "ptx", "CUDA", compile_to_ptx},
                                      DeviceOutput{cl, "cl", "OpenCL", compile_to_opencl_c}}) {
            if (!d.wanted) {
                continue;
            }
            std::string text = d.compile(m);
            if (text.empty()) {
                std::cerr << "tallyc: error: -e " << d.ext << ": module '" << m.name << "' has no "
                          << d.api << " kernels for target " << m.target.to_string() << "\n";
                return 1;
            }
            std::ofstream f(base + "." + d.ext, std::ios::binary);
            f << text;
            if (!f.good()) {
                std::cerr << base << "." << d.ext << ": error: cannot write file\n";
                return 1;
            }
        }
    } catch (const CompileError &e) {
        std::cerr << e.what() << "\n";
        return 1;
    } catch (const InternalError &e) {
        std::cerr << "tallyc: internal error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
