// tally-run: JIT-compile a pipeline and run it, so that one command profiles a pipeline.
//
//   tally-run PIPELINE.stmt -target T [--size name=WxH[@X,Y]...] [--input name=FILE.npy]
//             [--output name=FILE.npy] [--scalar name=VALUE] [--runs N] [--seed S]
//             [--extern-lib LIB.so...] [--buffer-constant NAME=FILE.npy[@X,Y]...]
//
// Buffers default to 64 per dimension with mins 0 (--size sets extents and, after `@`, mins;
// `--size name=` makes a 0-D buffer; an --input file sets its buffer's extents, and a --size
// given with it must repeat them and may set the mins) and are filled with seeded random data.
// Scalars default to 1 (handles to null). With a profiling target, the runtime prints its report
// when the process exits.
// --extern-lib (repeatable) names a shared object holding C functions the pipeline calls, such
// as the functions of Halide's extern stages (define_extern); the JIT resolves calls in them.
// --buffer-constant (repeatable) gives a Buffer Halide embedded in the pipeline (printed
// `buffer NAME = {...}`, without its data) its contents: the array in FILE.npy, with the mins
// after `@` (0 without).
//
// Every option value is checked: a number that does not parse whole or is out of range for what
// it sets (an extent, a count), or a name that is not an argument of the pipeline, is an error
// naming the option, with exit status 2. The values then go through the argument binder
// (tally/Arguments.h), as every caller's do: a scalar out of its type's range, or a buffer of
// another rank than the pipeline's, is its error naming the argument, with exit status 2 too.
//
// main() runs the jobs in order, one function each: parse_options, compile, make_buffers (from
// --input files, or random data), bind (scalars parsed for their types, then the binder),
// run_pipeline, write_outputs.

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "driver/NpyFile.h"
#include "tally/Arguments.h"
#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"

using namespace tally;

namespace {

/** Ends the program: `tally-run: error: <option>: <msg>`, exit status 2 (a usage error). */
[[noreturn]] void option_error(const std::string &option, const std::string &msg) {
    std::cerr << "tally-run: error: " << option << ": " << msg << "\n";
    std::exit(2);
}

/** A per-argument option (--size, --input, --output, --scalar) given twice for one argument is
 * an error rather than the last one silently winning. */
void once(bool seen, const std::string &option, const std::string &name) {
    if (seen) {
        option_error(option + " " + name, "given more than once");
    }
}

/** `text` as a whole decimal integer in [lo, hi]; anything else is an error naming `option`. */
int64_t parse_integer(const std::string &text, const std::string &option, int64_t lo, int64_t hi) {
    const char *begin = text.c_str();
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(begin, &end, 10);
    // Decimal digits with an optional '-', nothing else (strtoll alone takes leading white space
    // and a '+').
    size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
    if (digits == text.size() ||
        text.find_first_not_of("0123456789", digits) != std::string::npos ||
        end != begin + text.size()) {
        option_error(option, "'" + text + "' is not an integer");
    }
    if (errno == ERANGE || v < lo || v > hi) {
        option_error(option, "'" + text + "' is out of range [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "]");
    }
    return v;
}

/** `text` as a whole unsigned decimal integer up to `hi`. */
uint64_t parse_unsigned(const std::string &text, const std::string &option, uint64_t hi) {
    const char *begin = text.c_str();
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(begin, &end, 10);
    if (text.empty() || end != begin + text.size() || !(text[0] >= '0' && text[0] <= '9')) {
        option_error(option, "'" + text + "' is not an unsigned integer");
    }
    if (errno == ERANGE || v > hi) {
        option_error(option, "'" + text + "' is out of range [0, " + std::to_string(hi) + "]");
    }
    return v;
}

/** The path given to --extern-lib, which must name a readable file (what it holds is checked
 * when the JIT loads it: a file that is not a shared object is a compile error naming it). */
std::string extern_library(const std::string &path) {
    struct stat st;
    if (path.empty()) {
        option_error("--extern-lib", "needs the path of a shared object");
    }
    if (stat(path.c_str(), &st) != 0) {
        option_error("--extern-lib " + path, std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        option_error("--extern-lib " + path, "not a regular file");
    }
    return path;
}

/** A buffer's shape from `--size`: extents, and mins (0 unless given after `@`). */
struct BufferShape {
    std::vector<int32_t> extents, mins;
};

/** Reads `WxH...[@X,Y...]` (Halide order: the first is dimension 0); an empty text is a 0-D
 * buffer (one element, no dimensions). */
BufferShape parse_shape(const std::string &text, const std::string &option) {
    BufferShape out;
    if (text.empty()) {
        return out;
    }
    size_t at = text.find('@');
    std::string extents = text.substr(0, at);
    auto split = [](const std::string &s, char sep) {
        std::vector<std::string> parts;
        size_t start = 0;
        for (size_t k = 0; k <= s.size(); k++) {
            if (k == s.size() || s[k] == sep) {
                parts.push_back(s.substr(start, k - start));
                start = k + 1;
            }
        }
        return parts;
    };
    for (const std::string &e : split(extents, 'x')) {
        out.extents.push_back(int32_t(parse_integer(e, option + " (extent)", 0, INT32_MAX)));
    }
    if (at == std::string::npos) {
        out.mins.assign(out.extents.size(), 0);
        return out;
    }
    for (const std::string &m : split(text.substr(at + 1), ',')) {
        out.mins.push_back(int32_t(parse_integer(m, option + " (min)", INT32_MIN, INT32_MAX)));
    }
    if (out.mins.size() != out.extents.size()) {
        option_error(option, "'" + text + "' gives " + std::to_string(out.extents.size()) +
                                 " extents but " + std::to_string(out.mins.size()) + " mins");
    }
    return out;  // tally::Buffer checks that each dimension's coordinates fit int32
}

std::pair<std::string, std::string> split_eq(const std::string &s, const char *flag) {
    size_t eq = s.find('=');
    if (eq == std::string::npos) {
        std::cerr << "tally-run: error: " << flag << " expects name=value, got '" << s << "'\n";
        std::exit(2);
    }
    return {s.substr(0, eq), s.substr(eq + 1)};
}

/** Every name given to --size, --input, --output and --scalar must be an argument of the
 * pipeline of the right kind; a misspelt name would otherwise be ignored without a word. */
void check_argument_names(const LoweredFunc &f, const std::map<std::string, BufferShape> &sizes,
                          const std::map<std::string, std::string> &inputs,
                          const std::map<std::string, std::string> &outputs,
                          const std::map<std::string, std::string> &scalars) {
    std::string buffers, values;
    for (const Argument &a : f.args) {
        std::string &list = a.is_buffer() ? buffers : values;
        list += (list.empty() ? "" : ", ") + a.name;
    }
    auto check = [&](const std::string &option, const std::string &name, bool buffer) {
        for (const Argument &a : f.args) {
            if (a.name == name && a.is_buffer() == buffer) {
                return;
            }
        }
        const std::string &list = buffer ? buffers : values;
        option_error(option, "pipeline '" + f.name + "' has no " + (buffer ? "buffer" : "scalar") +
                                 " argument '" + name + "' (" +
                                 (list.empty() ? "it has none" : "it has: " + list) + ")");
    };
    for (const auto &kv : sizes) {
        check("--size", kv.first, true);
    }
    for (const auto &kv : inputs) {
        check("--input", kv.first, true);
    }
    for (const auto &kv : outputs) {
        check("--output", kv.first, true);
    }
    for (const auto &kv : scalars) {
        check("--scalar", kv.first, false);
    }
}

/** What the command line asks for. */
struct Options {
    std::string pipeline, target = "host";
    std::vector<std::string> constants;  // --buffer-constant values
    std::map<std::string, BufferShape> sizes;
    std::map<std::string, std::string> inputs, outputs, scalars;
    int runs = 1;
    unsigned seed = 1;
    CompileOptions compile;
};

const char *const usage =
    "usage: tally-run PIPELINE.stmt -target T [--size name=WxH[@X,Y]...] "
    "[--input name=FILE.npy] [--output name=FILE.npy] [--scalar name=VALUE] [--runs N] "
    "[--seed S] [--extern-lib LIB.so...] [--buffer-constant NAME=FILE.npy[@X,Y]...]\n";

/** Reads the command line; a bad option ends the program with status 2, --help with 0. */
Options parse_options(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "tally-run: error: " << a << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        // A per-argument option: name=VALUE, once per name.
        auto named = [&](const char *option, std::map<std::string, std::string> &into) {
            auto kv = split_eq(value(), option);
            once(into.count(kv.first) != 0, option, kv.first);
            into[kv.first] = kv.second;
        };
        if (a == "-target" || a == "--target") {
            o.target = value();
        } else if (a == "--size") {
            auto kv = split_eq(value(), "--size");
            once(o.sizes.count(kv.first) != 0, "--size", kv.first);
            o.sizes[kv.first] = parse_shape(kv.second, "--size " + kv.first);
        } else if (a == "--input") {
            named("--input", o.inputs);
        } else if (a == "--output") {
            named("--output", o.outputs);
        } else if (a == "--scalar") {
            named("--scalar", o.scalars);
        } else if (a == "--runs") {
            o.runs = int(parse_integer(value(), "--runs", 1, INT32_MAX));
        } else if (a == "--seed") {
            o.seed = unsigned(parse_unsigned(value(), "--seed", UINT32_MAX));
        } else if (a == "--buffer-constant") {
            o.constants.push_back(value());
        } else if (a == "--extern-lib") {
            o.compile.extern_libraries.push_back(extern_library(value()));
        } else if (a == "-h" || a == "--help") {
            std::cout << usage;
            std::exit(0);
        } else if (!a.empty() && a[0] == '-') {
            std::cerr << "tally-run: error: unknown option '" << a << "'\n";
            std::exit(2);
        } else {
            o.pipeline = a;
        }
    }
    if (o.pipeline.empty()) {
        std::cerr << "tally-run: error: no pipeline given\n";
        std::exit(2);
    }
    return o;
}

/** Parses, lowers and JIT-compiles the pipeline, with its buffer constants' contents. */
std::unique_ptr<JITModule> compile(const Options &o) {
    Module parsed = parse_pipeline_file(o.pipeline);
    if (!npy::define_buffer_constants(parsed, o.constants, "tally-run")) {
        std::exit(2);  // a bad option value
    }
    Module lowered = lower(parsed, Target::parse(o.target));
    for (const std::string &n : lowered.notes) {
        std::cerr << o.pipeline << ": note: " << n << "\n";
    }
    std::unique_ptr<JITModule> jit = compile_jit(lowered, o.compile);
    const LoweredFunc &f = jit->entry();
    check_argument_names(f, o.sizes, o.inputs, o.outputs, o.scalars);
    return jit;
}

/** Fills a new buffer with seeded random data: floats in [0, 1), integers small enough that
 * sums of a few stay in range. */
void fill_random(Buffer<> &b, std::mt19937 &rng) {
    const Type &t = b.type();
    uint8_t *p = static_cast<uint8_t *>(b.host());
    for (size_t k = 0, n = b.number_of_elements(); k < n; k++, p += t.bytes()) {
        if (t.is_float() && t.bits() == 32) {
            float x = std::uniform_real_distribution<float>(0, 1)(rng);
            std::memcpy(p, &x, 4);
        } else if (t.is_float() && t.bits() == 64) {
            double x = std::uniform_real_distribution<double>(0, 1)(rng);
            std::memcpy(p, &x, 8);
        } else {
            uint64_t x = rng() & (t.bits() >= 16 ? 0xfff : 0x7f);
            std::memcpy(p, &x, t.bytes());
        }
    }
}

/** A dense buffer of `shape`; a shape tally::Buffer refuses is an error naming `option`. */
std::unique_ptr<Buffer<>> new_buffer(const Type &t, const BufferShape &shape,
                                     const std::string &option) {
    try {
        return std::make_unique<Buffer<>>(t, shape.extents, shape.mins);
    } catch (const CompileError &e) {
        option_error(option, e.what());
    }
}

/** Each buffer argument's buffer (nullptr for scalars): the --input file's array, or random data
 * of the --size shape (64 per dimension without one). */
std::vector<std::unique_ptr<Buffer<>>> make_buffers(const LoweredFunc &f, const Options &o) {
    std::mt19937 rng(o.seed);
    std::vector<std::unique_ptr<Buffer<>>> out(f.args.size());
    for (size_t i = 0; i < f.args.size(); i++) {
        const Argument &a = f.args[i];
        if (!a.is_buffer()) {
            continue;
        }
        user_assert(a.type.is_valid()) << "buffer argument '" << a.name << "' has no element type";
        auto size = o.sizes.find(a.name);
        auto input = o.inputs.find(a.name);
        BufferShape shape;  // Halide order: dimension 0 innermost
        if (input != o.inputs.end()) {
            std::vector<uint8_t> data;
            std::vector<int> np = npy::read(input->second, a.type, &data);
            shape.extents.assign(np.rbegin(), np.rend());
            if (size != o.sizes.end()) {
                if (size->second.extents != shape.extents) {
                    option_error("--size " + a.name,
                                 "the extents differ from those of " + input->second);
                }
                shape.mins = size->second.mins;
            }
            out[i] = new_buffer(a.type, shape, "--input " + a.name);
            std::memcpy(out[i]->host(), data.data(), data.size());
            continue;
        }
        // A buffer whose rank the text does not tell (Halide's 0-D outputs) takes the rank
        // --size gives it, else 1. A --size of another rank than the pipeline's is the binder's
        // to refuse.
        if (size != o.sizes.end()) {
            shape = size->second;
        } else {
            shape.extents.assign(size_t(a.dimensions >= 0 ? a.dimensions : 1), 64);
        }
        uint64_t bytes = uint64_t(a.type.bytes());
        for (int32_t e : shape.extents) {
            if (__builtin_mul_overflow(bytes, uint64_t(e), &bytes)) {
                bytes = UINT64_MAX;
            }
        }
        if (bytes > (uint64_t(1) << 34)) {
            option_error("--size " + a.name, "the buffer would exceed 16 GiB");
        }
        out[i] = new_buffer(a.type, shape, "--size " + a.name);
        fill_random(*out[i], rng);
    }
    return out;
}

/** The value of scalar argument `i` for the text given to --scalar, parsed as its type reads
 * (an integer, a float, true/false for bool); the binder checks the range. */
ScalarValue scalar_value(const ArgumentBinder &binder, size_t i, const std::string &text) {
    const Argument &a = binder.arguments()[i].arg;
    const std::string option = "--scalar " + a.name;
    if (a.type.is_float()) {
        const char *begin = text.c_str();
        char *end = nullptr;
        errno = 0;
        double v = std::strtod(begin, &end);
        if (text.empty() || end != begin + text.size() || text.find_first_of(" \t") == 0) {
            option_error(option, "'" + text + "' is not a number");
        }
        if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL)) {
            binder.range_error(i, text);
        }
        return ScalarValue(v);
    }
    if (a.type.is_bool() && (text == "true" || text == "false")) {
        return ScalarValue(text == "true");
    }
    // Decimal digits with an optional '-', nothing else (strtoll alone takes leading white space
    // and a '+').
    size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
    if (digits == text.size() ||
        text.find_first_not_of("0123456789", digits) != std::string::npos) {
        option_error(option, "'" + text + "' is not an integer");
    }
    errno = 0;
    ScalarValue v = digits ? ScalarValue(int64_t(std::strtoll(text.c_str(), nullptr, 10)))
                           : ScalarValue(uint64_t(std::strtoull(text.c_str(), nullptr, 10)));
    if (errno == ERANGE) {
        binder.range_error(i, text);  // beyond any 64-bit integer
    }
    return v;
}

/** The arguments of one run: the buffers, and the scalars --scalar gives (1 by default; a
 * handle is null, as Halide's RunGen passes it), through the binder. */
BoundArguments bind(const ArgumentBinder &binder, const Options &o,
                    const std::vector<std::unique_ptr<Buffer<>>> &buffers) {
    std::vector<ArgumentValue> values;
    for (size_t i = 0; i < buffers.size(); i++) {
        const Argument &a = binder.arguments()[i].arg;
        auto given = o.scalars.find(a.name);
        if (buffers[i]) {
            values.emplace_back(*buffers[i]);
        } else if (given == o.scalars.end() && a.type.is_handle()) {
            values.emplace_back(ScalarValue::handle(nullptr));
        } else {
            values.emplace_back(
                scalar_value(binder, i, given != o.scalars.end() ? given->second : "1"));
        }
    }
    return binder.bind(values);
}

/** Runs the pipeline `runs` times; false after the first failure, which it reports. */
bool run_pipeline(const JITModule &jit, BoundArguments &args, int runs) {
    for (int r = 0; r < runs; r++) {
        int rc = jit.run(args.argv());
        if (rc != 0) {
            std::cerr << "tally-run: pipeline '" << jit.entry().name << "' failed with error " << rc
                      << " (" << tally_error_code_name(rc) << ") in run " << r + 1 << "\n";
            return false;
        }
    }
    return true;
}

/** Writes each --output buffer to its file, after bringing it back from the device. */
void write_outputs(const LoweredFunc &f, const Options &o,
                   const std::vector<std::unique_ptr<Buffer<>>> &buffers) {
    for (size_t i = 0; i < f.args.size(); i++) {
        auto path = o.outputs.find(f.args[i].name);
        if (!buffers[i] || path == o.outputs.end()) {
            continue;
        }
        Buffer<> &b = *buffers[i];
        user_assert(b.copy_to_host() == 0)
            << "copy of '" << f.args[i].name << "' to the host failed";
        std::vector<int> shape;  // numpy order: the last axis is dimension 0
        for (int d = b.dimensions() - 1; d >= 0; d--) {
            shape.push_back(b.extent(d));
        }
        npy::write(path->second, b.type(), shape, b.host(),
                   b.number_of_elements() * size_t(b.type().bytes()));
    }
}

}  // namespace

int main(int argc, char **argv) {
    Options o = parse_options(argc, argv);
    try {
        std::unique_ptr<JITModule> jit = compile(o);
        std::vector<std::unique_ptr<Buffer<>>> buffers = make_buffers(jit->entry(), o);
        BoundArguments args = bind(jit->binder(), o, buffers);
        if (!run_pipeline(*jit, args, o.runs)) {
            return 1;
        }
        write_outputs(jit->entry(), o, buffers);
        // The report and the exports the environment asks for, now rather than at exit, so that
        // a file that cannot be written fails the command (status 3) and not a later step.
        if (int rc = tally_profiler_write_exit_outputs(nullptr); rc != 0) {
            std::cerr << "tally-run: error: the profile could not be written ("
                      << tally_error_code_name(rc) << ")\n";
            return 3;
        }
    } catch (const ArgumentError &e) {
        std::cerr << "tally-run: error: " << e.what() << "\n";
        return 2;
    } catch (const CompileError &e) {
        std::cerr << e.what() << "\n";
        return 1;
    } catch (const InternalError &e) {
        std::cerr << "tally-run: internal error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
