// tally-report: profiler reports (the JSON that TALLY_PROFILE_JSON writes) on the command line.
//
//   tally-report show REPORT.json
//       prints the report's text, as the runtime prints it at exit
//   tally-report diff BASE.json NEW.json [--max-time-regression P%] [--max-func-time-regression P%]
//                     [--max-sync-increase N] [--max-copy-increase N] [--max-launch-increase N]
//                     [--max-memory-regression P%]
//       prints per-pipeline and per-slot deltas (per run) and checks the thresholds given
//
// Exit status: 0 (shown; diff within every threshold), 1 (a threshold crossed, a pipeline of BASE
// missing from NEW or without finished runs), 2 (usage error, or a file that is not a readable
// report: the message names the file and the field, or the line and column of bad JSON).
// Options take their value as the next argument or after '='; percentages may end in '%'.

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "driver/ReportFile.h"

using namespace tally;

namespace {

const char *const kUsage =
    "usage: tally-report show REPORT.json\n"
    "       tally-report diff BASE.json NEW.json [--max-time-regression P%]\n"
    "                         [--max-func-time-regression P%] [--max-sync-increase N]\n"
    "                         [--max-copy-increase N] [--max-launch-increase N]\n"
    "                         [--max-memory-regression P%]\n";

[[noreturn]] void usage_error(const std::string &msg) {
    std::cerr << "tally-report: error: " << msg << "\n" << kUsage;
    std::exit(2);
}

/** A non-negative number, optionally followed by '%' when `percent`. */
double parse_limit(const std::string &option, std::string text, bool percent) {
    std::string original = text;
    if (percent && !text.empty() && text.back() == '%') {
        text.pop_back();
    }
    const char *begin = text.c_str();
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(begin, &end);
    if (text.empty() || end != begin + text.size() || errno == ERANGE || !std::isfinite(v) ||
        v < 0 || !(text[0] >= '0' && text[0] <= '9')) {
        usage_error(option + ": '" + original + "' is not a non-negative " +
                    (percent ? "percentage" : "number"));
    }
    return v;
}

int show(const std::vector<std::string> &args) {
    if (args.size() != 1) {
        usage_error("show takes one report");
    }
    std::cout << format_report_text(load_report(args[0]));
    return 0;
}

int diff(const std::vector<std::string> &args) {
    std::vector<std::string> files;
    DiffThresholds limits;
    struct Option {
        const char *name;
        std::optional<double> DiffThresholds::*field;
        bool percent;
    };
    const Option options[] = {
        {"--max-time-regression", &DiffThresholds::max_time_regression_percent, true},
        {"--max-func-time-regression", &DiffThresholds::max_func_time_regression_percent, true},
        {"--max-sync-increase", &DiffThresholds::max_sync_increase, false},
        {"--max-copy-increase", &DiffThresholds::max_copy_increase, false},
        {"--max-launch-increase", &DiffThresholds::max_launch_increase, false},
        {"--max-memory-regression", &DiffThresholds::max_memory_regression_percent, true},
    };
    for (size_t i = 0; i < args.size(); i++) {
        const std::string &a = args[i];
        if (a.rfind("--", 0) != 0) {
            files.push_back(a);
            continue;
        }
        std::string name = a, value;
        bool has_value = false;
        if (size_t eq = a.find('='); eq != std::string::npos) {
            name = a.substr(0, eq);
            value = a.substr(eq + 1);
            has_value = true;
        }
        const Option *opt = nullptr;
        for (const Option &o : options) {
            if (name == o.name) {
                opt = &o;
            }
        }
        if (!opt) {
            usage_error("unknown option '" + name + "'");
        }
        if (!has_value) {
            if (i + 1 >= args.size()) {
                usage_error(name + ": missing value");
            }
            value = args[++i];
        }
        limits.*(opt->field) = parse_limit(name, value, opt->percent);
    }
    if (files.size() != 2) {
        usage_error("diff takes two reports, BASE.json and NEW.json");
    }
    Report base = load_report(files[0]);
    Report now = load_report(files[1]);
    DiffResult r = diff_reports(base, now, limits);
    std::cout << r.text;
    return r.passed() ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "-h" || args[0] == "--help") {
        std::cout << kUsage;
        return args.empty() ? 2 : 0;
    }
    std::string command = args[0];
    args.erase(args.begin());
    try {
        if (command == "show") {
            return show(args);
        }
        if (command == "diff") {
            return diff(args);
        }
    } catch (const ReportError &e) {
        std::cerr << e.what() << "\n";
        return 2;
    }
    usage_error("unknown command '" + command + "'");
}
