// tally-opt: the IR driver behind the golden tests.
//
//   tally-opt [FILE|-] [--passes=a,b,...] [--target=T] [--split-input-file] [--verify-roundtrip]
//
// Reads IR text, optionally sets the module's target, runs the named passes in order and prints
// the module to stdout. With --split-input-file the input is cut at lines `// -----` and each
// piece is processed on its own (line numbers in diagnostics stay those of the whole file);
// the outputs are separated by `// -----`. Diagnostics go to stderr as
// `file:line:col: error: message` (a pass's error about a statement points at the statement);
// the exit status is 1 if any piece failed.

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "driver/PassRegistry.h"
#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/Parser.h"
#include "tally/Target.h"

using namespace tally;

namespace {

struct Options {
    std::string input = "-";
    std::vector<std::string> passes;
    std::string target;
    bool split = false;
    bool verify_roundtrip = false;
};

void usage(std::ostream &os) {
    os << "usage: tally-opt [FILE|-] [--passes=a,b,...] [--target=T] [--split-input-file]\n"
          "                 [--verify-roundtrip]\n"
          "passes:\n";
    for (const PassInfo &p : registered_passes()) {
        os << "  " << p.name << ": " << p.description << "\n";
    }
}

std::vector<std::string> split_list(const std::string &s) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, ',')) {
        if (!cur.empty()) {
            out.push_back(cur);
        }
    }
    return out;
}

/** Processes one piece of input; returns false after printing a diagnostic. */
bool process(const std::string &text, const std::string &filename, const Options &opt,
             std::ostream &out) {
    try {
        Module m = parse_module(text, filename);
        if (!opt.target.empty()) {
            m.target = Target::parse(opt.target);
        }
        for (const std::string &name : opt.passes) {
            const PassInfo *p = find_pass(name);
            m = p->run(m);
        }
        std::string printed = to_string(m);
        if (opt.verify_roundtrip) {
            Module again = parse_module(printed, filename + " (printed)");
            std::string why;
            if (!equal(m, again, &why)) {
                std::cerr << filename << ": error: printed IR does not parse back to the same "
                          << "module: " << why << "\n";
                return false;
            }
        }
        out << printed;
        return true;
    } catch (const CompileError &e) {
        std::string msg = e.what();
        // Parser diagnostics already carry `file:line:col: error:`; a pass's error about a
        // statement gets the statement's location, others the file.
        if (e.loc.known()) {
            msg = filename + ":" + std::to_string(e.loc.line) + ":" + std::to_string(e.loc.col) +
                  ": error: " + msg;
        } else if (msg.compare(0, filename.size(), filename) != 0) {
            msg = filename + ": error: " + msg;
        }
        std::cerr << msg << "\n";
        return false;
    } catch (const InternalError &e) {
        std::cerr << filename << ": internal error: " << e.what() << "\n";
        return false;
    }
}

}  // namespace

int main(int argc, char **argv) {
    Options opt;
    bool have_input = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(std::cout);
            return 0;
        } else if (a.rfind("--passes=", 0) == 0) {
            opt.passes = split_list(a.substr(9));
        } else if (a.rfind("--target=", 0) == 0) {
            opt.target = a.substr(9);
        } else if (a == "--split-input-file") {
            opt.split = true;
        } else if (a == "--verify-roundtrip") {
            opt.verify_roundtrip = true;
        } else if (a.size() > 1 && a[0] == '-') {
            std::cerr << "tally-opt: error: unknown option '" << a << "'\n";
            usage(std::cerr);
            return 2;
        } else if (!have_input) {
            opt.input = a;
            have_input = true;
        } else {
            std::cerr << "tally-opt: error: more than one input file\n";
            return 2;
        }
    }
    for (const std::string &p : opt.passes) {
        if (!find_pass(p)) {
            std::cerr << "tally-opt: error: unknown pass '" << p << "'\n";
            usage(std::cerr);
            return 2;
        }
    }
    if (!opt.target.empty()) {
        try {
            Target::parse(opt.target);
        } catch (const CompileError &e) {
            std::cerr << "tally-opt: error: " << e.what() << "\n";
            return 2;
        }
    }

    std::string text, filename = opt.input == "-" ? "<stdin>" : opt.input;
    {
        std::stringstream ss;
        if (opt.input == "-") {
            ss << std::cin.rdbuf();
        } else {
            try {
                ss << read_text_file(opt.input);
            } catch (const CompileError &e) {
                std::cerr << e.what() << "\n";
                return 1;
            }
        }
        text = ss.str();
    }

    if (!opt.split) {
        return process(text, filename, opt, std::cout) ? 0 : 1;
    }
    // Cut at `// -----` lines; pad each piece with newlines so line numbers match the file.
    std::vector<std::string> pieces;
    std::string cur;
    int line = 0, piece_start = 0;
    std::istringstream in(text);
    std::string l;
    while (std::getline(in, l)) {
        std::string trimmed = l;
        trimmed.erase(0, trimmed.find_first_not_of(" \t"));
        if (trimmed.rfind("// -----", 0) == 0) {
            pieces.push_back(std::string(piece_start, '\n') + cur);
            cur.clear();
            piece_start = line + 1;
        } else {
            cur += l + "\n";
        }
        line++;
    }
    pieces.push_back(std::string(piece_start, '\n') + cur);
    bool ok = true;
    for (size_t i = 0; i < pieces.size(); i++) {
        if (i) {
            std::cout << "// -----\n";
        }
        ok = process(pieces[i], filename, opt, std::cout) && ok;
    }
    return ok ? 0 : 1;
}
