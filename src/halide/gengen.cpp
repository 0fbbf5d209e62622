// The main of a Halide generator built through Tally (cmake/TallyHalideLibrary.cmake,
// tally_add_halide_library): where Halide's GenGen main would compile a registered generator
// with Halide, this one compiles it with the Halide bridge and writes what Halide's
// compile_to_static_library writes for it, an object and a C header with the same entry symbols
// (FUNCTION, FUNCTION_argv, FUNCTION_metadata), to be linked with Tally's static runtime.
//
//   <generator> -g NAME -f FUNCTION -o DIR [-t TARGET[,TARGET...]] [-p PLUGIN[,PLUGIN...]]
//               [PARAM=VALUE ...]
//   <generator> --list
//
// TARGET is a Tally target string (default host; `-profile` gives Tally's profiler, not
// Halide's); PARAM=VALUE sets a GeneratorParam as GenGen does, autoscheduler=NAME and
// autoscheduler.FIELD=VALUE included (the autoscheduler is applied as Halide's build_module
// applies it; -p loads its plugin, as GenGen's -p). Writes DIR/FUNCTION.o and
// DIR/FUNCTION.h. The generator's inputs in declaration order, then its outputs, are the
// function's arguments, as Halide's build_module makes them.
//
// Several targets make a multi-target library, as GenGen's `target=a,b,c` does: the generator is
// built for each target (its natural vector sizes and target queries are that target's), and
// compiled to DIR/FUNCTION.variant<k>.o, the k-th target's, whose function is FUNCTION_<the
// target string with every character but a letter or digit made '_'>; DIR/FUNCTION.o is then the
// wrapper (tally::halide::compile_multitarget_wrapper), which runs the first variant the CPU can
// run, the last target being the baseline.

#include "tally/halide/Bridge.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

namespace HI = Halide::Internal;

int usage() {
    std::cerr << "usage: <generator> -g NAME -f FUNCTION -o DIR [-t TARGET[,TARGET...]] "
                 "[-p PLUGIN[,PLUGIN...]] [PARAM=VALUE ...]\n"
                 "       <generator> --list\n";
    return 2;
}

/** The generator `name` built for `target` with `params`: its pipeline and its inputs (the
 * function's arguments before the outputs). */
struct Built {
    Halide::Pipeline pipeline;
    std::vector<Halide::Argument> args;
};
Built build(const std::string &name, const std::string &target,
            const std::vector<std::pair<std::string, std::string>> &params) {
    // The generator sees the Halide target Halide would lower with (its natural vector sizes,
    // its target queries); Tally compiles for the Tally target.
    Halide::GeneratorContext context(tally::halide::halide_target(target));
    HI::AbstractGeneratorPtr gen = HI::GeneratorRegistry::create(name, context);
    for (const auto &p : params) {
        gen->set_generatorparam_value(p.first, p.second);
    }
    Built b{gen->build_pipeline(), {}};
    // The autoscheduler the GeneratorParams name (autoscheduler=NAME, autoscheduler.FIELD=V), as
    // Halide's build_module applies it; its plugin is loaded by -p.
    const Halide::GeneratorContext used = gen->context();
    if (!used.autoscheduler_params().name.empty()) {
        b.pipeline.apply_autoscheduler(used.target(), used.autoscheduler_params());
    }
    for (const auto &info : gen->arginfos()) {
        if (info.dir != HI::ArgInfoDirection::Input) {
            continue;
        }
        for (const Halide::Parameter &p : gen->input_parameter(info.name)) {
            b.args.emplace_back(p.name(),
                                p.is_buffer() ? Halide::Argument::InputBuffer
                                              : Halide::Argument::InputScalar,
                                p.type(), p.dimensions(), p.get_argument_estimates());
        }
    }
    return b;
}

/** A multi-target library: each target's variant, and the wrapper (see the header comment).
 * Each variant is built and compiled in a child process of its own, as GenGen runs once per
 * target: Halide names Funcs uniquely per process, so a generator built a second time in one
 * process would name its output `output$1`, and the function's argument with it. */
int compile_multitarget(const std::string &name, const std::string &function,
                        const std::string &dir, const std::vector<std::string> &targets,
                        const std::vector<std::pair<std::string, std::string>> &params) {
    std::vector<std::pair<std::string, std::string>> variants;
    for (size_t k = 0; k < targets.size(); k++) {
        std::string suffix = tally::Target::parse(targets[k]).to_string();
        for (char &c : suffix) {
            if (!std::isalnum((unsigned char)c)) {
                c = '_';
            }
        }
        variants.emplace_back(function + "_" + suffix, targets[k]);
        std::cout.flush();
        std::cerr.flush();
        pid_t child = fork();
        if (child < 0) {
            std::cerr << "error: cannot start a process for the target " << targets[k] << ": "
                      << std::strerror(errno) << "\n";
            return 1;
        }
        if (child == 0) {
            int status = 1;
            try {
                Built b = build(name, targets[k], params);
                tally::halide::Options options;
                options.name = variants.back().first;
                tally::halide::compile_to_files(
                    b.pipeline, b.args, dir + "/" + function + ".variant" + std::to_string(k),
                    targets[k], options);
                status = 0;
            } catch (const std::exception &e) {
                std::cerr << "error: " << targets[k] << ": " << e.what() << "\n";
            } catch (const Halide::Error &e) {
                std::cerr << "error: " << targets[k] << ": " << e.what() << "\n";
            }
            std::cerr.flush();
            _exit(status);
        }
        int status = 0;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            return 1;  // the child said why
        }
    }
    // The wrapper takes the arguments of the pipeline as built once in this process.
    Built b = build(name, targets.back(), params);
    tally::Module base = tally::halide::translate(b.pipeline, b.args, targets.back());
    tally::halide::compile_multitarget_wrapper(base, function, variants, dir + "/" + function);
    return 0;
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
        if (a == "-p" && i + 1 < argc) {
            // Plugins (autoschedulers), comma-separated, as GenGen's -p.
            std::string list = argv[++i];
            for (size_t start = 0; start <= list.size();) {
                size_t comma = std::min(list.find(',', start), list.size());
                if (comma > start) {
                    Halide::load_plugin(list.substr(start, comma - start));
                }
                start = comma + 1;
            }
        } else if ((a == "-g" || a == "-f" || a == "-o" || a == "-t") && i + 1 < argc) {
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
    std::vector<std::string> targets;
    for (size_t start = 0;;) {
        size_t comma = target.find(',', start);
        targets.push_back(target.substr(start, comma - start));
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    if (targets.size() > 1) {
        return compile_multitarget(name, function, dir, targets, params);
    }
    Built b = build(name, target, params);
    tally::halide::Options options;
    options.name = function;
    tally::halide::compile_to_files(b.pipeline, b.args, dir + "/" + function, target, options);
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
