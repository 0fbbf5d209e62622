// tally-run: JIT-compile a pipeline and run it, so that one command profiles a pipeline.
//
//   tally-run PIPELINE.stmt -target T [--size name=WxH[@X,Y]...] [--input name=FILE.npy]
//             [--output name=FILE.npy] [--scalar name=VALUE] [--runs N] [--seed S]
//             [--extern-lib LIB.so...] [--buffer-constant NAME=FILE.npy[@X,Y]...]
//
// Buffers default to 64 per dimension with mins 0 (--size sets extents and, after `@`, mins;
// `--size name=` makes a 0-D buffer; an --input file sets its buffer's extents, and a --size
// given with it must repeat them and may set the mins) and are filled with seeded random data.
// With a profiling target, the runtime prints its report when the process exits.
// --extern-lib (repeatable) names a shared object holding C functions the pipeline calls, such
// as the functions of Halide's extern stages (define_extern); the JIT resolves calls in them.
// --buffer-constant (repeatable) gives a Buffer Halide embedded in the pipeline (printed
// `buffer NAME = {...}`, without its data) its contents: the array in FILE.npy, with the mins
// after `@` (0 without).
//
// Every option value is checked: a number that does not parse whole or is out of range for what
// it sets (a scalar's type, an extent, a count), or a name that is not an argument of the
// pipeline, is an error naming the option, with exit status 2.

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "driver/NpyFile.h"
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

/** `text` as a whole floating-point number (finite, or inf/nan spelled as strtod reads them). */
double parse_real(const std::string &text, const std::string &option) {
    const char *begin = text.c_str();
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(begin, &end);
    if (text.empty() || end != begin + text.size() || text.find_first_of(" \t") == 0) {
        option_error(option, "'" + text + "' is not a number");
    }
    if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL)) {
        option_error(option, "'" + text + "' is out of range for float64");
    }
    return v;
}

/** `d` as an IEEE half (round to nearest even; overflow gives infinity). */
uint16_t to_half_bits(double d) {
    float f = float(d);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    uint32_t sign = (b >> 16) & 0x8000, mant = b & 0x7fffff;
    int32_t exp = int32_t((b >> 23) & 0xff) - 127 + 15;
    if (((b >> 23) & 0xff) == 0xff) {
        return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
    }
    if (exp >= 31) {
        return uint16_t(sign | 0x7c00);
    }
    uint32_t half, rest, mid;
    if (exp <= 0) {
        if (exp < -10) {
            return uint16_t(sign);
        }
        int shift = 14 - exp;  // subnormal: the implicit bit joins the mantissa
        mant |= 0x800000;
        half = mant >> shift;
        rest = mant & ((1u << shift) - 1);
        mid = 1u << (shift - 1);
    } else {
        half = (uint32_t(exp) << 10) | (mant >> 13);
        rest = mant & 0x1fff;
        mid = 0x1000;
    }
    if (rest > mid || (rest == mid && (half & 1))) {
        half++;  // a carry into the exponent is the right rounding
    }
    return uint16_t(sign | half);
}

/** A scalar argument's value, as the bytes of its type (little-endian, in 8 bytes). */
std::vector<uint8_t> scalar_bytes(const std::string &text, const std::string &option, Type t) {
    std::vector<uint8_t> out(8, 0);
    if (t.is_float()) {
        double d = parse_real(text, option);
        if (t.bits() == 16 && t.code() == Type::Float) {
            if (std::isfinite(d) && std::fabs(d) > 65504.0) {
                option_error(option, "'" + text + "' is out of range for float16");
            }
            uint16_t h = to_half_bits(d);
            std::memcpy(out.data(), &h, 2);
        } else if (t.bits() == 32) {
            if (std::isfinite(d) && std::fabs(d) > FLT_MAX) {
                option_error(option, "'" + text + "' is out of range for float32");
            }
            float x = float(d);
            std::memcpy(out.data(), &x, 4);
        } else {
            std::memcpy(out.data(), &d, 8);
        }
    } else if (t.is_bool()) {
        uint8_t b = text == "true"    ? 1
                    : text == "false" ? 0
                                      : uint8_t(parse_integer(text, option, 0, 1));
        out[0] = b;
    } else if (t.is_uint()) {
        uint64_t x = parse_unsigned(text, option, t.max_uint());
        std::memcpy(out.data(), &x, 8);
    } else if (t.is_int()) {
        int64_t hi = t.bits() == 64 ? INT64_MAX : (int64_t(1) << (t.bits() - 1)) - 1;
        int64_t x = parse_integer(text, option, -hi - 1, hi);
        std::memcpy(out.data(), &x, 8);
    } else {
        option_error(option, "scalar arguments of type " + t.to_string() + " cannot be set");
    }
    return out;
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
    for (size_t d = 0; d < out.mins.size(); d++) {
        // Halide's buffers address min .. min + extent - 1 in int32.
        if (int64_t(out.mins[d]) + out.extents[d] - 1 > INT32_MAX) {
            option_error(option, "'" + text + "': dimension " + std::to_string(d) + " ends past " +
                                     std::to_string(INT32_MAX) + " (min " +
                                     std::to_string(out.mins[d]) + " + extent " +
                                     std::to_string(out.extents[d]) + " - 1)");
        }
    }
    return out;
}

struct HostBuffer {
    std::vector<uint8_t> data;
    std::vector<halide_dimension_t> dims;
    halide_buffer_t buf{};

    HostBuffer() = default;
    HostBuffer(const HostBuffer &) = delete;
    HostBuffer &operator=(const HostBuffer &) = delete;
    /** The caller owns a buffer's device allocation, as with Halide: a pipeline that copied an
     * input to the device (or computed an output there) leaves it for the caller to free. */
    ~HostBuffer() {
        if (buf.device) {
            halide_device_free(nullptr, &buf);
        }
    }
};

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

}  // namespace

int main(int argc, char **argv) {
    std::string input, target = "host";
    std::vector<std::string> constants;  // --buffer-constant values
    std::map<std::string, BufferShape> sizes;
    std::map<std::string, std::string> inputs, outputs, scalars;
    int runs = 1;
    unsigned seed = 1;
    CompileOptions options;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "tally-run: error: " << a << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "-target" || a == "--target") {
            target = value();
        } else if (a == "--size") {
            auto kv = split_eq(value(), "--size");
            once(sizes.count(kv.first) != 0, "--size", kv.first);
            sizes[kv.first] = parse_shape(kv.second, "--size " + kv.first);
        } else if (a == "--input") {
            auto kv = split_eq(value(), "--input");
            once(inputs.count(kv.first) != 0, "--input", kv.first);
            inputs[kv.first] = kv.second;
        } else if (a == "--output") {
            auto kv = split_eq(value(), "--output");
            once(outputs.count(kv.first) != 0, "--output", kv.first);
            outputs[kv.first] = kv.second;
        } else if (a == "--scalar") {
            auto kv = split_eq(value(), "--scalar");
            once(scalars.count(kv.first) != 0, "--scalar", kv.first);
            scalars[kv.first] = kv.second;
        } else if (a == "--runs") {
            runs = int(parse_integer(value(), "--runs", 1, INT32_MAX));
        } else if (a == "--seed") {
            seed = unsigned(parse_unsigned(value(), "--seed", UINT32_MAX));
        } else if (a == "--buffer-constant") {
            constants.push_back(value());
        } else if (a == "--extern-lib") {
            options.extern_libraries.push_back(extern_library(value()));
        } else if (a == "-h" || a == "--help") {
            std::cout << "usage: tally-run PIPELINE.stmt -target T [--size name=WxH[@X,Y]...] "
                         "[--input name=FILE.npy] [--output name=FILE.npy] "
                         "[--scalar name=VALUE] [--runs N] [--seed S] "
                         "[--extern-lib LIB.so...] [--buffer-constant NAME=FILE.npy[@X,Y]...]\n";
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            std::cerr << "tally-run: error: unknown option '" << a << "'\n";
            return 2;
        } else {
            input = a;
        }
    }
    if (input.empty()) {
        std::cerr << "tally-run: error: no pipeline given\n";
        return 2;
    }
    try {
        Module parsed = parse_module_file(input);
        if (!npy::define_buffer_constants(parsed, constants, "tally-run")) {
            return 2;  // a bad option value
        }
        Module m = lower(parsed, Target::parse(target));
        std::unique_ptr<JITModule> jit = compile_jit(m, options);
        const LoweredFunc &f = jit->entry();
        check_argument_names(f, sizes, inputs, outputs, scalars);
        std::mt19937 rng(seed);
        std::vector<HostBuffer> bufs(f.args.size());
        std::vector<std::vector<uint8_t>> scalar_storage(f.args.size());
        std::vector<void *> args(f.args.size());
        for (size_t i = 0; i < f.args.size(); i++) {
            const Argument &a = f.args[i];
            if (!a.is_buffer()) {
                Type t = a.type.is_valid() ? a.type : Int(32);
                if (t.is_handle() && !scalars.count(a.name)) {
                    // A pointer (`__user_context`, a Param<void *>) is null, as Halide's
                    // RunGen passes it; there is no text to give one.
                    scalar_storage[i].assign(8, 0);
                } else {
                    scalar_storage[i] = scalar_bytes(scalars.count(a.name) ? scalars[a.name] : "1",
                                                     "--scalar " + a.name, t);
                }
                args[i] = scalar_storage[i].data();
                continue;
            }
            user_assert(a.type.is_valid())
                << "buffer argument '" << a.name << "' has no element type";
            HostBuffer &b = bufs[i];
            BufferShape shape;  // Halide order: dim 0 innermost
            if (inputs.count(a.name)) {
                std::vector<int> np = npy::read(inputs[a.name], a.type, &b.data);
                shape.extents.assign(np.rbegin(), np.rend());
                shape.mins.assign(np.size(), 0);
                if (sizes.count(a.name)) {
                    if (sizes[a.name].extents != shape.extents) {
                        option_error("--size " + a.name,
                                     "the extents differ from those of " + inputs[a.name]);
                    }
                    shape.mins = sizes[a.name].mins;
                }
            } else {
                // A buffer whose rank the text does not tell (Halide's 0-D outputs) takes the rank
                // --size gives it.
                int dims = a.dimensions >= 0          ? a.dimensions
                           : sizes.count(a.name) != 0 ? int(sizes[a.name].extents.size())
                                                      : 1;
                if (sizes.count(a.name)) {
                    shape = sizes[a.name];
                } else {
                    shape.extents.assign(dims, 64);
                    shape.mins.assign(dims, 0);
                }
                if (int(shape.extents.size()) != dims) {
                    option_error("--size " + a.name, "gives " +
                                                         std::to_string(shape.extents.size()) +
                                                         " dimensions, the pipeline's buffer has " +
                                                         std::to_string(dims));
                }
                // Strides are int32 in halide_buffer_t: every dimension's stride (the product of
                // the extents below it) must fit, and the whole buffer must be allocatable.
                uint64_t count = 1;
                for (int32_t e : shape.extents) {
                    if (count > uint64_t(INT32_MAX)) {
                        option_error("--size " + a.name, "the strides would exceed int32");
                    }
                    count *= uint64_t(e);
                }
                if (count > (uint64_t(1) << 34) / uint64_t(a.type.bytes())) {
                    option_error("--size " + a.name, "the buffer would exceed 16 GiB");
                }
                b.data.resize(count * a.type.bytes());
                for (size_t k = 0; k < count; k++) {
                    uint8_t *p = b.data.data() + k * a.type.bytes();
                    if (a.type.is_float() && a.type.bits() == 32) {
                        float x = std::uniform_real_distribution<float>(0, 1)(rng);
                        std::memcpy(p, &x, 4);
                    } else if (a.type.is_float() && a.type.bits() == 64) {
                        double x = std::uniform_real_distribution<double>(0, 1)(rng);
                        std::memcpy(p, &x, 8);
                    } else {
                        uint64_t x = rng() & (a.type.bits() >= 16 ? 0xfff : 0x7f);
                        std::memcpy(p, &x, a.type.bytes());
                    }
                }
            }
            int32_t stride = 1;
            for (size_t d = 0; d < shape.extents.size(); d++) {
                b.dims.push_back({shape.mins[d], shape.extents[d], stride, 0});
                stride *= shape.extents[d];
            }
            b.buf.host = b.data.data();
            b.buf.type = {uint8_t(a.type.code()), uint8_t(a.type.bits()), 1};
            b.buf.dimensions = int(b.dims.size());
            b.buf.dim = b.dims.data();
            b.buf.flags = halide_buffer_flag_host_dirty;
            args[i] = &b.buf;
        }
        for (int r = 0; r < runs; r++) {
            int rc = jit->run(args.data());
            if (rc != 0) {
                std::cerr << "tally-run: pipeline '" << f.name << "' failed with error " << rc
                          << " (" << tally_error_code_name(rc) << ") in run " << r + 1 << "\n";
                return 1;
            }
        }
        for (size_t i = 0; i < f.args.size(); i++) {
            if (f.args[i].is_buffer() && outputs.count(f.args[i].name)) {
                int rc = halide_copy_to_host(nullptr, &bufs[i].buf);
                user_assert(rc == 0) << "copy of '" << f.args[i].name << "' to the host failed";
                const HostBuffer &out = bufs[i];
                std::vector<int> shape;  // numpy order: the last axis is dimension 0
                for (auto d = out.dims.rbegin(); d != out.dims.rend(); ++d) {
                    shape.push_back(d->extent);
                }
                npy::write(outputs[f.args[i].name], f.args[i].type, shape, out.data.data(),
                           out.data.size());
            }
        }
    } catch (const CompileError &e) {
        std::cerr << e.what() << "\n";
        return 1;
    } catch (const InternalError &e) {
        std::cerr << "tally-run: internal error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
