// Halide 21's intrinsics (saturating_cast, round, widen_right_*, concat_bits, extract_bits,
// strict_*) compiled by Tally and run on edge inputs, against the values Halide 21 itself
// computed for the same calls (data/halide21_intrinsics.txt, written by
// tools/halide21/intrinsic_reference.py, so that this test needs no Halide). Each case runs
// once as scalars and once as 8-lane vectors. Results must be the same bits, except that any
// NaN matches any NaN (a NaN's payload is not part of Halide's meaning).

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "E2EUtil.h"

#ifndef TALLY_E2E_DATA_DIR
#error "TALLY_E2E_DATA_DIR must name test/e2e/data"
#endif

namespace tally_e2e {
namespace {

/** One case of the data file: a call with $a and $b for the operands, its types, and the
 * operands' and results' bit patterns. */
struct Case {
    std::string call, out_type;
    std::vector<std::string> in_types;
    std::vector<std::vector<uint64_t>> inputs;
    std::vector<uint64_t> expected;
    std::string label() const {
        std::string s = call + " -> " + out_type + " of";
        for (const std::string &t : in_types) {
            s += " " + t;
        }
        return s;
    }
};

std::vector<uint64_t> read_hex(std::istringstream &in) {
    std::vector<uint64_t> v;
    std::string w;
    while (in >> w) {
        v.push_back(std::stoull(w, nullptr, 16));
    }
    return v;
}

std::vector<Case> read_cases() {
    std::ifstream f(std::string(TALLY_E2E_DATA_DIR) + "/halide21_intrinsics.txt");
    EXPECT_TRUE(f.good()) << "cannot read halide21_intrinsics.txt";
    std::vector<Case> cases;
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string tag;
        in >> tag;
        if (tag == "case") {
            Case c;
            in >> c.call >> c.out_type;
            std::string t;
            while (in >> t) {
                c.in_types.push_back(t);
            }
            cases.push_back(c);
        } else if (tag == "a" || tag == "b") {
            cases.back().inputs.push_back(read_hex(in));
        } else if (tag == "out") {
            cases.back().expected = read_hex(in);
        }
    }
    return cases;
}

tally::Type type_of(const std::string &name) {
    return name == "bool" ? tally::Bool() : tally::parse_type_name(name);
}

int bytes_of(const std::string &name) {
    return name == "bool" ? 1 : type_of(name).bytes();
}

bool is_nan(uint64_t bits, const std::string &type) {
    if (type == "float32") {
        float f;
        uint32_t b = uint32_t(bits);
        std::memcpy(&f, &b, 4);
        return f != f;
    }
    if (type == "float64") {
        double d;
        std::memcpy(&d, &bits, 8);
        return d != d;
    }
    return false;
}

/** A 1-D buffer of `n` elements of a named type over its own bytes. */
struct Column {
    std::string type;
    std::vector<uint8_t> bytes;
    tally::Buffer<> buf;
    Column(const std::string &type, size_t n)
        : type(type), bytes(n * size_t(bytes_of(type))),
          buf(type_of(type), static_cast<void *>(bytes.data()), {{0, int32_t(n), 1, 0}}) {}
    void put(size_t i, uint64_t v) { std::memcpy(&bytes[i * bytes_of(type)], &v, bytes_of(type)); }
    uint64_t get(size_t i) const {
        uint64_t v = 0;
        std::memcpy(&v, &bytes[i * bytes_of(type)], bytes_of(type));
        return v;
    }
};

/** The call of case c on operands `a` and `b` (text), typed `type`. */
std::string call_text(const Case &c, const std::string &a, const std::string &b,
                      const std::string &type) {
    // The data file has no spaces in a call; Tally's text reads a space after each comma.
    std::string s = c.call;
    for (size_t p = 0; (p = s.find(',', p)) != std::string::npos; p += 2) {
        s.insert(p + 1, " ");
    }
    for (auto [k, v] : {std::pair<std::string, std::string>{"$a", a}, {"$b", b}}) {
        for (size_t p; (p = s.find(k)) != std::string::npos;) {
            s.replace(p, 2, v);
        }
    }
    return "(" + type + ")" + s;
}

/** Where a case runs: the host (scalar and 8-lane loops), or a GPU kernel of one API. */
enum class Where { Host, Vulkan, Cuda };

/** Types Tally's Vulkan kernels have (CodeGen_Vulkan.cpp: 32-bit integers and floats, bool)... */
bool vulkan_has(const std::string &t) {
    return t == "int32" || t == "uint32" || t == "float32" || t == "bool";
}
/** ... of which a Vulkan storage buffer holds all but bool. */
bool vulkan_stores(const std::string &t) {
    return vulkan_has(t) && t != "bool";
}

/** Compiles `out_s[i] = call(a[i], b[i])` and, on the host, the same 8 lanes at a time into
 * out_v; runs them and compares every lane with Halide's value. On a GPU the loop is a kernel
 * of 64-thread blocks and only out_s is compared. */
void check(const Case &c, Where where = Where::Host) {
    SCOPED_TRACE(c.label());
    ASSERT_FALSE(c.expected.empty());
    size_t n = c.expected.size(), padded = (n + 7) / 8 * 8;
    std::vector<Column> in;
    for (size_t k = 0; k < c.in_types.size(); k++) {
        in.emplace_back(c.in_types[k], padded);
        ASSERT_EQ(c.inputs[k].size(), n);
        for (size_t i = 0; i < padded; i++) {
            in[k].put(i, c.inputs[k][std::min(i, n - 1)]);
        }
    }
    Column out_s(c.out_type, padded), out_v(c.out_type, padded);
    // Tally's text spells a vector of bools uint1xN.
    const std::string vt = (c.out_type == "bool" ? "uint1" : c.out_type) + "x8";
    const std::string dense = "[ramp(j * 8, 1, 8)]";
    const bool gpu = where != Where::Host;
    const std::string api = where == Where::Vulkan ? "Vulkan" : "CUDA";
    const std::string target = where == Where::Vulkan ? "host-vulkan"
                               : where == Where::Cuda ? "host-cuda"
                                                      : "host";
    std::ostringstream ir;
    ir << "module name=h21, target=" << target << "\nexternal func h21 (";
    const char *names[] = {"a", "b"};
    for (size_t k = 0; k < in.size(); k++) {
        ir << names[k] << ": buffer<" << c.in_types[k] << ", 1>, ";
    }
    ir << "out_s: buffer<" << c.out_type << ", 1>, out_v: buffer<" << c.out_type
       << ", 1>, n: int32) {\n";
    if (gpu) {
        ir << " produce out_s {\n"
           << "  gpu_block<" << api << "> (blk, 0, (n + 63) / 64) {\n"
           << "   gpu_thread<" << api << "> (thr, 0, 64) {\n"
           << "    let i = blk * 64 + thr\n"
           << "    if (i < n) {\n"
           << "     out_s[i] = " << call_text(c, "a[i]", "b[i]", c.out_type) << "\n"
           << "    }\n"
           << "   }\n"
           << "  }\n"
           << " }\n";
    } else {
        ir << " for (i, 0, n) {\n"
           << "  out_s[i] = " << call_text(c, "a[i]", "b[i]", c.out_type) << "\n"
           << " }\n"
           << " for (j, 0, n / 8) {\n"
           << "  out_v" << dense << " = " << call_text(c, "a" + dense, "b" + dense, vt) << "\n"
           << " }\n";
    }
    ir << "}\n";
    std::unique_ptr<tally::JITModule> jit;
    try {
        jit = compile_module(tally::parse_module(ir.str()), target);
    } catch (const std::exception &e) {
        FAIL() << e.what() << "\n" << ir.str();
    }
    int32_t count = int32_t(padded);
    if (in.size() == 1) {
        ASSERT_EQ(jit->call({in[0].buf, out_s.buf, out_v.buf, count}), 0);
    } else {
        ASSERT_EQ(jit->call({in[0].buf, in[1].buf, out_s.buf, out_v.buf, count}), 0);
    }
    // Halide's x86 `<=` is unordered (true for NaN, as Tally's host); its NVPTX and SPIR-V
    // back ends compare ordered, as Tally's kernels do. The data is x86's.
    const bool ordered_le = gpu && c.call.compare(0, 9, "strict_le") == 0;
    int bad = 0;
    for (size_t i = 0; i < n && bad < 5; i++) {
        uint64_t want = c.expected[i];
        if (ordered_le &&
            (is_nan(c.inputs[0][i], c.in_types[0]) || is_nan(c.inputs[1][i], c.in_types[1]))) {
            want = 0;
        }
        std::vector<const Column *> outs = {&out_s};
        if (!gpu) {
            outs.push_back(&out_v);
        }
        for (const Column *got : outs) {
            uint64_t g = got->get(i);
            bool same = g == want || (is_nan(g, c.out_type) && is_nan(want, c.out_type));
            if (!same) {
                std::ostringstream msg;
                msg << (got == &out_s ? "scalar" : "vector") << " lane " << i << ", inputs";
                for (size_t k = 0; k < in.size(); k++) {
                    msg << " 0x" << std::hex << c.inputs[k][i];
                }
                msg << ": Halide 0x" << std::hex << want << ", Tally 0x" << g;
                ADD_FAILURE() << msg.str();
                bad++;
            }
        }
    }
}

/** The cases of one intrinsic family (calls starting with `prefix`) that `where` can run. */
void check_family(const std::string &prefix, Where where = Where::Host) {
    int found = 0;
    for (const Case &c : read_cases()) {
        if (c.call.compare(0, prefix.size(), prefix) != 0) {
            continue;
        }
        if (where == Where::Vulkan) {
            bool ok = vulkan_stores(c.out_type);
            for (const std::string &t : c.in_types) {
                ok = ok && vulkan_has(t);
            }
            if (!ok) {
                continue;
            }
        }
        check(c, where);
        found++;
    }
    EXPECT_GT(found, 0) << "no case of " << prefix << " in the data file";
}

TEST(Halide21Intrinsics, SaturatingCastMatchesHalide) {
    check_family("saturating_cast");
}

TEST(Halide21Intrinsics, RoundIsHalfToEvenAsHalide) {
    check_family("round");
}

TEST(Halide21Intrinsics, WidenRightArithmeticMatchesHalide) {
    check_family("widen_right_");
}

TEST(Halide21Intrinsics, ConcatBitsMatchesHalide) {
    check_family("concat_bits");
}

TEST(Halide21Intrinsics, ExtractBitsMatchesHalide) {
    check_family("extract_bits");
}

TEST(Halide21Intrinsics, StrictFloatOperationsMatchHalide) {
    check_family("strict_");
}

// The same cases in Vulkan kernels (those of 32-bit types, all Tally's kernels have; no bool
// results, which Vulkan buffers cannot hold), on lavapipe where there is no GPU.
TEST(Halide21Intrinsics, VulkanKernelsMatchHalide) {
    if (!halide_vulkan_device_interface()) {
        GTEST_SKIP() << "no Vulkan device";
    }
    for (const char *f : {"saturating_cast", "round", "strict_"}) {
        check_family(f, Where::Vulkan);
    }
}

// The same cases in CUDA kernels (NVPTX shares the host's expression generator), where a CUDA
// driver is present (test/gpu on a lent GPU).
TEST(Halide21Intrinsics, CudaKernelsMatchHalide) {
    if (!halide_cuda_device_interface()) {
        GTEST_SKIP() << "no CUDA driver or device";
    }
    for (const char *f :
         {"saturating_cast", "round", "widen_right_", "concat_bits", "extract_bits", "strict_"}) {
        check_family(f, Where::Cuda);
    }
}

}  // namespace
}  // namespace tally_e2e
