// The main of a Halide generator built through Tally (cmake/TallyHalideLibrary.cmake,
// tally_add_halide_library): where Halide's GenGen main would compile a registered generator
// with Halide, this one compiles it with the Halide bridge and writes what Halide's
// compile_to_static_library writes for it, an object and a C header with the same entry symbols
// (FUNCTION, FUNCTION_argv, FUNCTION_metadata), to be linked with Tally's static runtime.
//
//   <generator> -g NAME -f FUNCTION -o DIR [-t TARGET] [PARAM=VALUE ...]
//   <generator> --list
//
// TARGET is a Tally target string (default host; `-profile` gives Tally's profiler, not
// Halide's); PARAM=VALUE sets a GeneratorParam as GenGen does. Writes DIR/FUNCTION.o and
// DIR/FUNCTION.h. The generator's inputs in declaration order, then its outputs, are the
// function's arguments, as Halide's build_module makes them.

#include "tally/halide/Bridge.h"

#include <iostream>
#include <string>
#include <vector>

namespace {

namespace HI = Halide::Internal;

int usage() {
    std::cerr << "usage: <generator> -g NAME -f FUNCTION -o DIR [-t TARGET] [PARAM=VALUE ...]\n"
                 "       <generator> --list\n";
    return 2;
}

int run(int argc, char **argv) {
    std::string name, function, dir, target = "host";
    std::vector<std::pair<std::string, std::string>> params;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--list") {
            for (const std::string &g : HI::GeneratorRegistry::enumerate()) {
                std::cout << g << "\n";
            }
            return 0;
        }
        if ((a == "-g" || a == "-f" || a == "-o" || a == "-t") && i + 1 < argc) {
            std::string &v = a == "-g" ? name : a == "-f" ? function : a == "-o" ? dir : target;
            v = argv[++i];
        } else if (a.find('=') != std::string::npos && a[0] != '-') {
            params.emplace_back(a.substr(0, a.find('=')), a.substr(a.find('=') + 1));
        } else {
            return usage();
        }
    }
    if (name.empty() || dir.empty()) {
        return usage();
    }
    if (function.empty()) {
        function = name;
    }
    // The generator sees the Halide target Halide would lower with (its natural vector sizes,
    // its target queries); Tally compiles for the Tally target.
    Halide::GeneratorContext context(tally::halide::halide_target(target));
    HI::AbstractGeneratorPtr gen = HI::GeneratorRegistry::create(name, context);
    for (const auto &p : params) {
        gen->set_generatorparam_value(p.first, p.second);
    }
    Halide::Pipeline pipeline = gen->build_pipeline();
    std::vector<Halide::Argument> args;
    for (const auto &info : gen->arginfos()) {
        if (info.dir != HI::ArgInfoDirection::Input) {
            continue;
        }
        for (const Halide::Parameter &p : gen->input_parameter(info.name)) {
            args.emplace_back(p.name(),
                              p.is_buffer() ? Halide::Argument::InputBuffer
                                            : Halide::Argument::InputScalar,
                              p.type(), p.dimensions(), p.get_argument_estimates());
        }
    }
    tally::halide::Options options;
    options.name = function;
    tally::halide::compile_to_files(pipeline, args, dir + "/" + function, target, options);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::cerr << "error: " << e.what() << "\n";
    } catch (const Halide::Error &e) {
        std::cerr << "error: " << e.what() << "\n";
    }
    return 1;
}
