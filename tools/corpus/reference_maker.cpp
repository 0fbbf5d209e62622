// reference_maker: runs Halide's own compiled pipelines on fixed inputs and writes a conformance
// corpus's data. The same source serves the Halide 14 and the Halide 21 corpus.
//
//   reference_maker LIB.so GENDIR OUTDIR NAME...
//
// LIB.so is libhalide<V>_corpus.so (every pipeline's Halide object and Halide's runtime, built by
// tools/corpus/CorpusTools.cmake); GENDIR holds the generator's NAME.spec files, which name the
// Halide version and the variants written. For each NAME it
// reads the spec, makes the inputs, calls NAME_argv from LIB.so (and NAME_strict_argv for float
// pipelines) and writes OUTDIR/NAME/: input.<arg>.npy, ref.<output>.npy, ref_strict.<output>.npy
// and manifest.json. It needs Halide's runtime header only; the code comes from LIB.so by dlopen.
//
// Inputs (documented in the manifest too): element i of input buffer A of pipeline P (dense,
// dimension 0 innermost) is the i-th draw of a 64-bit LCG, s = s * 6364136223846793005 +
// 1442695040888963407 (Knuth's MMIX constants), seeded with the 64-bit FNV-1a hash of "P/A" and
// stepped once before the first draw. A draw r is the state's top 32 bits (two draws, high word
// first, for 64-bit types). Integers and bool: lo + r mod (hi - lo + 1). Floats: lo + (hi - lo) *
// (r >> 8) / 2^24, computed in double and rounded to the element type (round to nearest even).
//
// Argument names come from the pipeline's halide_filter_metadata_t (NAME_metadata()); the spec's
// types and dimensions are checked against it.

#include "HalideRuntime.h"

#include <dlfcn.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string &msg) {
    std::cerr << "reference_maker: error: " << msg << "\n";
    std::exit(1);
}

struct ArgSpec {
    std::string kind;  // "input", "scalar" or "output"
    std::string name, type, value;
    std::vector<int> extents, mins;
    double lo = 0, hi = 0;
};

struct Spec {
    std::string name;
    std::string halide;
    /** The variants of the .stmt files, by form (Halide 14's corpus has lowered ones only). */
    std::vector<std::string> variants, conceptual, gpu;
    bool is_float = false;
    std::string rtol = "0", atol = "0";
    std::vector<std::string> funcs;
    std::vector<ArgSpec> args;
    std::vector<std::string> files;  // written by the pipeline in the working directory
    std::vector<ArgSpec> constants;  // buffers the pipeline embeds (kind "constant")
};

/** The pipeline entry point `name` in the library: a C symbol, or, for a pipeline built with
 * c_plus_plus_name_mangling (C++ extern stages need it), Halide's C++-mangled one, `_Z<len>name`
 * and the mangled parameters `params` (`PPv` for `_argv`'s void **, `v` for none). */
void *entry_point(void *lib, const std::string &name, const std::string &params) {
    if (void *p = dlsym(lib, name.c_str())) {
        return p;
    }
    return dlsym(lib, ("_Z" + std::to_string(name.size()) + name + params).c_str());
}

/** `TYPE DIMS EXTENTS... MINS...` of a spec record, into `a`. */
void read_shape(std::istringstream &l, ArgSpec &a) {
    int dims = 0;
    l >> a.type >> dims;
    a.extents.resize(size_t(std::max(dims, 0)));
    a.mins.resize(a.extents.size());
    for (int &e : a.extents) {
        l >> e;
    }
    for (int &m : a.mins) {
        l >> m;
    }
}

Spec read_spec(const std::string &path) {
    std::ifstream in(path);
    if (!in) {
        fail("cannot open " + path);
    }
    Spec s;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream l(line);
        std::string key;
        l >> key;
        if (key == "pipeline") {
            l >> s.name;
        } else if (key == "float") {
            int f = 0;
            l >> f;
            s.is_float = f != 0;
        } else if (key == "tolerance") {
            l >> s.rtol >> s.atol;
        } else if (key == "file") {
            std::string f;
            l >> f;
            s.files.push_back(f);
            continue;
        } else if (key == "halide") {
            l >> s.halide;
        } else if (key == "funcs" || key == "variants" || key == "conceptual" || key == "gpu") {
            std::vector<std::string> &words = key == "funcs"        ? s.funcs
                                              : key == "variants"   ? s.variants
                                              : key == "conceptual" ? s.conceptual
                                                                    : s.gpu;
            std::string f;
            while (l >> f) {
                words.push_back(f);
            }
            continue;
        } else if (key == "input" || key == "output") {
            ArgSpec a;
            a.kind = key;
            if (key == "input") {
                l >> a.name;
            }
            read_shape(l, a);
            if (key == "input") {
                l >> a.lo >> a.hi;
            }
            s.args.push_back(a);
        } else if (key == "constant") {
            // `constant NAME TYPE DIMS EXTENTS... MINS...`
            ArgSpec a;
            a.kind = key;
            l >> a.name;
            read_shape(l, a);
            s.constants.push_back(a);
        } else if (key == "scalar") {
            ArgSpec a;
            a.kind = key;
            l >> a.name >> a.type >> a.value;
            s.args.push_back(a);
        } else if (!key.empty()) {
            fail(path + ": unknown record '" + key + "'");
        }
        if (l.fail()) {
            fail(path + ": malformed line '" + line + "'");
        }
    }
    return s;
}

/** Element type name -> halide_type_t. */
halide_type_t parse_type(const std::string &t) {
    if (t == "bool") {
        return halide_type_t(halide_type_uint, 1);
    }
    struct {
        const char *prefix;
        halide_type_code_t code;
    } kinds[] = {
        {"uint", halide_type_uint}, {"int", halide_type_int}, {"float", halide_type_float}};
    for (const auto &k : kinds) {
        size_t n = std::strlen(k.prefix);
        if (t.compare(0, n, k.prefix) == 0) {
            return halide_type_t(k.code, uint8_t(std::atoi(t.c_str() + n)));
        }
    }
    fail("unknown type '" + t + "'");
}

int type_bytes(const halide_type_t &t) {
    return (t.bits + 7) / 8;
}

std::string npy_descr(const std::string &type) {
    halide_type_t t = parse_type(type);
    if (t.bits == 1) {
        return "|b1";
    }
    std::string kind = t.code == halide_type_float ? "f" : t.code == halide_type_uint ? "u" : "i";
    return (t.bits == 8 ? "|" : "<") + kind + std::to_string(t.bits / 8);
}

/** float -> IEEE half, round to nearest even (subnormals included). */
uint16_t to_half(double d) {
    float f = float(d);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    uint32_t sign = (b >> 16) & 0x8000;
    int32_t exp = int32_t((b >> 23) & 0xff) - 127 + 15;
    uint32_t mant = b & 0x7fffff;
    if (((b >> 23) & 0xff) == 0xff) {
        return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
    }
    if (exp >= 31) {
        return uint16_t(sign | 0x7c00);
    }
    if (exp <= 0) {
        if (exp < -10) {
            return uint16_t(sign);
        }
        mant |= 0x800000;
        int shift = 14 - exp;
        uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1))) {
            half++;
        }
        return uint16_t(sign | half);
    }
    uint32_t half = (uint32_t(exp) << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) {
        half++;  // may carry into the exponent, which is the right rounding
    }
    return uint16_t(sign | half);
}

/** Stores `v` (an integer in range, or any float) as an element of type `t` at `p`. */
void store_int(void *p, const halide_type_t &t, uint64_t bits) {
    std::memcpy(p, &bits, type_bytes(t));  // little-endian: the low bytes
}

void store_real(void *p, const halide_type_t &t, double v) {
    if (t.bits == 16) {
        uint16_t h = to_half(v);
        std::memcpy(p, &h, 2);
    } else if (t.bits == 32) {
        float f = float(v);
        std::memcpy(p, &f, 4);
    } else {
        std::memcpy(p, &v, 8);
    }
}

uint64_t fnv1a(const std::string &s) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char ch : s) {
        h = (h ^ ch) * 1099511628211ull;
    }
    return h;
}

struct Lcg {
    uint64_t s;
    uint32_t draw() {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return uint32_t(s >> 32);
    }
};

/** A dense host buffer. */
struct Buffer {
    std::vector<uint8_t> data;
    std::vector<halide_dimension_t> dims;
    halide_buffer_t buf{};
    size_t count = 1;
};

void make_buffer(Buffer &b, const ArgSpec &a) {
    halide_type_t t = parse_type(a.type);
    int32_t stride = 1;
    for (size_t d = 0; d < a.extents.size(); d++) {
        b.dims.push_back({a.mins[d], a.extents[d], stride, 0});
        stride *= a.extents[d];
    }
    b.count = size_t(stride);
    b.data.assign(b.count * type_bytes(t), 0);
    b.buf.host = b.data.data();
    b.buf.type = t;
    b.buf.dimensions = int32_t(b.dims.size());
    b.buf.dim = b.dims.empty() ? nullptr : b.dims.data();
}

void fill_input(Buffer &b, const ArgSpec &a, const std::string &pipeline) {
    halide_type_t t = parse_type(a.type);
    Lcg rng{fnv1a(pipeline + "/" + a.name)};
    rng.draw();
    for (size_t i = 0; i < b.count; i++) {
        uint8_t *p = b.data.data() + i * type_bytes(t);
        if (t.code == halide_type_float) {
            double u = double(rng.draw() >> 8) / 16777216.0;
            store_real(p, t, a.lo + (a.hi - a.lo) * u);
            continue;
        }
        uint64_t r = rng.draw();
        if (t.bits == 64) {
            r = (r << 32) | rng.draw();
        }
        // The span, hi - lo + 1, as uint64 (0 means all 2^64 values).
        uint64_t lo_bits, span;
        if (t.code == halide_type_int) {
            int64_t lo = int64_t(a.lo), hi = int64_t(a.hi);
            lo_bits = uint64_t(lo);
            span = uint64_t(hi) - uint64_t(lo) + 1;
        } else {
            uint64_t lo = uint64_t(a.lo), hi = uint64_t(a.hi);
            lo_bits = lo;
            span = hi - lo + 1;
        }
        store_int(p, t, lo_bits + (span ? r % span : r));
    }
}

/** A scalar's value as the bytes of its type. */
std::vector<uint8_t> scalar_bytes(const ArgSpec &a) {
    halide_type_t t = parse_type(a.type);
    std::vector<uint8_t> out(8, 0);
    if (a.type == "bool") {
        out[0] = a.value == "true" || a.value == "1";
    } else if (t.code == halide_type_float) {
        store_real(out.data(), t, std::strtod(a.value.c_str(), nullptr));
    } else if (t.code == halide_type_int) {
        store_int(out.data(), t, uint64_t(std::strtoll(a.value.c_str(), nullptr, 10)));
    } else {
        store_int(out.data(), t, std::strtoull(a.value.c_str(), nullptr, 10));
    }
    return out;
}

void write_npy(const std::string &path, const std::string &type, const Buffer &b) {
    std::ostringstream h;
    h << "{'descr': '" << npy_descr(type) << "', 'fortran_order': False, 'shape': (";
    for (int d = int(b.dims.size()) - 1; d >= 0; d--) {
        h << b.dims[d].extent << (b.dims.size() == 1 || d > 0 ? "," : "") << (d ? " " : "");
    }
    h << "), }";
    std::string header = h.str();
    while ((10 + header.size() + 1) % 64) {
        header += ' ';
    }
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    if (!out) {
        fail("cannot write " + path);
    }
    out.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = uint16_t(header.size());
    out.write(reinterpret_cast<const char *>(&len), 2);
    out << header;
    out.write(reinterpret_cast<const char *>(b.data.data()), std::streamsize(b.data.size()));
}

/** `name` with every character outside [A-Za-z0-9._-] replaced by '_' (Halide's names may hold
 * '$'), for file names. */
std::string file_safe(std::string name) {
    for (char &ch : name) {
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' ||
              ch == '-')) {
            ch = '_';
        }
    }
    return name;
}

std::string json_ints(const std::vector<int> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++) {
        s += (i ? ", " : "") + std::to_string(v[i]);
    }
    return s + "]";
}

std::string json_strings(const std::vector<std::string> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++) {
        s += (i ? ", \"" : "\"") + v[i] + "\"";
    }
    return s + "]";
}

std::string json_real(double v) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return buf;
}

/** What the pipeline printed through halide_print (print, print_when, tracing) while captured. */
std::string printed;

void capture_print(void *, const char *msg) {
    printed += msg;
}

/** What Halide's runtime reported through halide_error: its default handler prints (into
 * `printed`, while that is captured) and aborts; this one keeps the message, so that a failing
 * pipeline returns its error code and the message is shown. */
std::string halide_errors;

void keep_error(void *, const char *msg) {
    halide_errors += msg;
}

/** Runs `fn` on freshly made arguments; returns the output buffers (in spec order). */
std::vector<Buffer> run(void *lib, const std::string &fn, const Spec &s,
                        const std::vector<ArgSpec> &named) {
    using Argv = int (*)(void **);
    using Meta = const halide_filter_metadata_t *(*)();
    Argv argv = reinterpret_cast<Argv>(entry_point(lib, fn + "_argv", "PPv"));
    Meta meta = reinterpret_cast<Meta>(entry_point(lib, fn + "_metadata", "v"));
    if (!argv || !meta) {
        fail("the library has no " + fn + "_argv/_metadata");
    }
    const halide_filter_metadata_t *md = meta();
    if (md->num_arguments != int(named.size())) {
        fail(fn + ": the spec has " + std::to_string(named.size()) + " arguments, Halide " +
             std::to_string(md->num_arguments));
    }
    std::vector<Buffer> bufs(named.size());
    std::vector<std::vector<uint8_t>> scalars(named.size());
    std::vector<void *> args(named.size());
    for (size_t i = 0; i < named.size(); i++) {
        const ArgSpec &a = named[i];
        const halide_filter_argument_t &m = md->arguments[i];
        halide_type_t t = parse_type(a.type);
        if (m.type != t || (a.kind != "scalar" && m.dimensions != int(a.extents.size()))) {
            fail(fn + ": argument " + std::to_string(i) + " (" + m.name +
                 ") does not match the spec");
        }
        if (a.kind == "scalar") {
            scalars[i] = scalar_bytes(a);
            args[i] = scalars[i].data();
            continue;
        }
        make_buffer(bufs[i], a);
        if (a.kind == "input") {
            fill_input(bufs[i], a, s.name);
        }
        args[i] = &bufs[i].buf;
    }
    halide_errors.clear();
    int rc = argv(args.data());
    if (rc != 0) {
        fail(fn + " failed with error " + std::to_string(rc) + ": " + halide_errors);
    }
    std::vector<Buffer> outs;
    for (size_t i = 0; i < named.size(); i++) {
        if (named[i].kind == "output") {
            outs.push_back(std::move(bufs[i]));
        }
    }
    return outs;
}

/** The number of times the harness runs each pipeline, and so the references: the second run
 * finds what the first left (a memoized Func's cache entry) as a user's program would. */
constexpr int kRuns = 2;

void make_reference(void *lib, const std::string &gendir, const std::string &outdir,
                    const std::string &name) {
    Spec s = read_spec(gendir + "/" + name + ".spec");
    if (s.name != name) {
        fail(name + ".spec names pipeline '" + s.name + "'");
    }
    if (s.halide.empty() || s.variants.empty()) {
        fail(name + ".spec names no Halide version or no variants");
    }
    using Meta = const halide_filter_metadata_t *(*)();
    Meta meta = reinterpret_cast<Meta>(entry_point(lib, name + "_metadata", "v"));
    if (!meta) {
        fail("the library has no " + name + "_metadata");
    }
    std::vector<ArgSpec> named = s.args;
    const halide_filter_metadata_t *md = meta();
    for (size_t i = 0; i < named.size() && int(i) < md->num_arguments; i++) {
        if (named[i].kind == "output") {
            named[i].name = md->arguments[i].name;
        } else if (named[i].name != md->arguments[i].name) {
            fail(name + ": argument " + std::to_string(i) + " is '" + md->arguments[i].name +
                 "' in Halide, '" + named[i].name + "' in the spec");
        }
    }
    using PrintFn = void (*)(void *, const char *);
    using SetPrint = PrintFn (*)(PrintFn);
    SetPrint set_print = reinterpret_cast<SetPrint>(dlsym(lib, "halide_set_custom_print"));
    if (!set_print) {
        fail("the library has no halide_set_custom_print");
    }
    using SetError = PrintFn (*)(PrintFn);
    SetError set_error = reinterpret_cast<SetError>(dlsym(lib, "halide_set_error_handler"));
    if (!set_error) {
        fail("the library has no halide_set_error_handler");
    }
    printed.clear();
    PrintFn previous = set_print(capture_print);
    PrintFn previous_error = set_error(keep_error);
    // The files the pipeline writes (debug_to_file) land in a scratch folder, from which the
    // host runs' are kept as debug.<file>.
    const std::string scratch = gendir + "/run." + name;
    std::filesystem::remove_all(scratch);
    std::filesystem::create_directories(scratch);
    const std::filesystem::path home = std::filesystem::current_path();
    std::filesystem::current_path(scratch);
    std::vector<Buffer> host;
    for (int r = 0; r < kRuns; r++) {
        host = run(lib, name, s, named);
    }
    std::filesystem::current_path(home);
    const std::string host_printed = printed;
    std::string dir = outdir + "/" + name;
    for (const std::string &f : s.files) {
        if (!std::filesystem::exists(scratch + "/" + f)) {
            fail(name + " wrote no " + f);
        }
        std::filesystem::copy_file(scratch + "/" + f, dir + "/debug." + f,
                                   std::filesystem::copy_options::overwrite_existing);
    }
    std::vector<Buffer> strict;
    if (s.is_float) {
        for (int r = 0; r < kRuns; r++) {
            strict = run(lib, name + "_strict", s, named);
        }
    }
    set_print(previous);
    set_error(previous_error);
    std::ostringstream j;
    j << "{\n  \"pipeline\": \"" << name << "\",\n";
    j << "  \"halide\": \"" << s.halide << "\",\n";
    j << "  \"base_target\": \"x86-64-linux-sse41-avx-avx2\",\n";
    j << "  \"variants\": " << json_strings(s.variants) << ",\n";
    if (!s.conceptual.empty()) {
        // NAME.<variant>.conceptual.stmt: what compile_to_conceptual_stmt printed.
        j << "  \"conceptual\": " << json_strings(s.conceptual) << ",\n";
    }
    if (!s.gpu.empty()) {
        // NAME.<variant>.stmt and NAME.<variant>.conceptual.stmt of the GPU schedule.
        j << "  \"gpu\": " << json_strings(s.gpu) << ",\n";
    }
    j << "  \"float\": " << (s.is_float ? "true" : "false") << ",\n";
    j << "  \"runs\": " << kRuns << ",\n";
    if (!s.files.empty()) {
        j << "  \"files\": " << json_strings(s.files) << ",\n";
    }
    if (!s.constants.empty()) {
        // The buffers the pipeline embeds, which Tally is given (--buffer-constant): the
        // generator's NAME.const.<buffer>.bin, as .npy files.
        j << "  \"buffer_constants\": [";
        for (size_t i = 0; i < s.constants.size(); i++) {
            const ArgSpec &a = s.constants[i];
            Buffer b;
            make_buffer(b, a);
            const std::string bin = gendir + "/" + name + ".const." + a.name + ".bin";
            std::ifstream in(bin, std::ios::binary);
            in.read(reinterpret_cast<char *>(b.data.data()), std::streamsize(b.data.size()));
            if (!in || in.peek() != EOF) {
                fail(bin + " does not hold " + std::to_string(b.data.size()) + " bytes");
            }
            const std::string file = "const." + file_safe(a.name) + ".npy";
            write_npy(dir + "/" + file, a.type, b);
            j << (i ? ", " : "") << "{\"name\": \"" << a.name << "\", \"type\": \"" << a.type
              << "\", \"extents\": " << json_ints(a.extents) << ", \"mins\": " << json_ints(a.mins)
              << ", \"file\": \"" << file << "\"}";
        }
        j << "],\n";
    }
    if (!host_printed.empty()) {
        // The text Halide's host code printed in those runs, which Tally's must equal.
        std::ofstream pt(dir + "/print.txt", std::ios::binary);
        pt << host_printed;
        if (!pt) {
            fail("cannot write " + dir + "/print.txt");
        }
        j << "  \"printed\": \"print.txt\",\n";
    }
    j << "  \"tolerance\": {\"rtol\": " << s.rtol << ", \"atol\": " << s.atol
      << ", \"applies_to\": \"host, profile and debug outputs of float type; integer outputs and "
         "strict outputs must match exactly\"},\n";
    j << "  \"funcs\": " << json_strings(s.funcs) << ",\n";
    // What Halide's <name>_metadata() returns (Tally's must describe the arguments the same):
    // the name, and per argument its name, kind (0 scalar, 1 input, 2 output buffer), rank, type
    // [code, bits, lanes], whether it has a buffer_estimates array, how many range bounds it has
    // (scalar_min, scalar_max), and how many of its other values are given (default, estimates).
    j << "  \"metadata\": {\"version\": " << md->version << ", \"name\": \"" << md->name
      << "\", \"arguments\": [";
    for (int i = 0; i < md->num_arguments; i++) {
        const halide_filter_argument_t &a = md->arguments[i];
        j << (i ? ", " : "") << "{\"name\": \"" << a.name << "\", \"kind\": " << a.kind
          << ", \"dimensions\": " << a.dimensions << ", \"type\": [" << int(a.type.code) << ", "
          << int(a.type.bits) << ", " << a.type.lanes
          << "], \"buffer_estimates\": " << (a.buffer_estimates ? "true" : "false");
        j << ", \"range\": " << (a.scalar_min != nullptr) + (a.scalar_max != nullptr);
        int given = (a.scalar_def != nullptr) + (a.scalar_estimate != nullptr);
        for (int k = 0; a.buffer_estimates && k < 2 * a.dimensions; k++) {
            given += a.buffer_estimates[k] != nullptr;
        }
        j << ", \"given\": " << given << "}";
    }
    j << "]},\n";
    j << "  \"input_generator\": \"64-bit LCG s = s*6364136223846793005 + 1442695040888963407, "
         "seeded with FNV-1a-64 of '<pipeline>/<arg>', stepped once; draw = top 32 bits (two, "
         "high first, for 64-bit types); ints: lo + draw mod (hi-lo+1); floats: lo + (hi-lo) * "
         "(draw>>8)/2^24 rounded to the type\",\n";
    j << "  \"args\": [\n";
    size_t out_index = 0;
    for (size_t i = 0; i < named.size(); i++) {
        const ArgSpec &a = named[i];
        j << "    {\"name\": \"" << a.name << "\", \"kind\": \"" << a.kind << "\", \"type\": \""
          << a.type << "\"";
        if (a.kind == "scalar") {
            j << ", \"value\": \"" << a.value << "\"";
        } else {
            j << ", \"extents\": " << json_ints(a.extents) << ", \"mins\": " << json_ints(a.mins);
        }
        if (a.kind == "input") {
            Buffer b;
            make_buffer(b, a);
            fill_input(b, a, s.name);
            std::string file = "input." + file_safe(a.name) + ".npy";
            write_npy(dir + "/" + file, a.type, b);
            j << ", \"lo\": " << json_real(a.lo) << ", \"hi\": " << json_real(a.hi)
              << ", \"file\": \"" << file << "\"";
        } else if (a.kind == "output") {
            std::string file = "ref." + file_safe(a.name) + ".npy";
            write_npy(dir + "/" + file, a.type, host[out_index]);
            j << ", \"ref\": \"" << file << "\"";
            if (s.is_float) {
                std::string sfile = "ref_strict." + file_safe(a.name) + ".npy";
                write_npy(dir + "/" + sfile, a.type, strict[out_index]);
                j << ", \"ref_strict\": \"" << sfile << "\"";
            }
            out_index++;
        }
        j << "}" << (i + 1 < named.size() ? "," : "") << "\n";
    }
    j << "  ]\n}\n";
    std::ofstream m(dir + "/manifest.json");
    m << j.str();
    if (!m) {
        fail("cannot write " + dir + "/manifest.json");
    }
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 5) {
        std::cerr << "usage: reference_maker LIB.so GENDIR OUTDIR NAME...\n";
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fail(std::string("dlopen: ") + dlerror());
    }
    for (int i = 4; i < argc; i++) {
        make_reference(lib, argv[2], argv[3], argv[i]);
    }
    return 0;
}
