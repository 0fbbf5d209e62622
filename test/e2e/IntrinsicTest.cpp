// Halide 14's intrinsics compiled for the host and run, against scalar C++ references written
// from Halide's definitions (exact integer arithmetic in 128 bits, never the generated code's
// formulas). Each intrinsic runs on every pair of edge values of each integer type (all pairs
// for 8-bit types), once as scalars and once as 8-lane vectors, so both code paths are checked.
// Atomic updates run under a parallel loop, where a non-atomic update loses counts.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "E2EUtil.h"

namespace tally_e2e {
namespace {

using i128 = __int128;

struct IntType {
    bool is_signed;
    int bits;
    std::string name() const { return (is_signed ? "int" : "uint") + std::to_string(bits); }
    i128 min() const { return is_signed ? -(i128(1) << (bits - 1)) : 0; }
    i128 max() const { return is_signed ? (i128(1) << (bits - 1)) - 1 : (i128(1) << bits) - 1; }
    /** v reduced modulo 2^bits into this type's range (two's complement wrap). */
    i128 wrap(i128 v) const {
        i128 m = i128(1) << bits;
        i128 r = ((v % m) + m) % m;
        return is_signed && r > max() ? r - m : r;
    }
    i128 clamp(i128 v) const { return v < min() ? min() : v > max() ? max() : v; }
    IntType widen() const { return {is_signed, bits * 2}; }
    IntType as_unsigned() const { return {false, bits}; }
};

i128 floor_div(i128 a, i128 b) {
    i128 q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
i128 pow2(int k) {
    return i128(1) << k;
}

/** Raw element storage for any integer type, one int64 per element on the test side. */
struct Column {
    IntType t;
    std::vector<int64_t> values;
};

/** Writes `v` (of type t) as t's bytes at element i of `bytes`. */
void put(std::vector<uint8_t> &bytes, const IntType &t, size_t i, int64_t v) {
    uint64_t u = uint64_t(v);
    for (int k = 0; k < t.bits / 8; k++) {
        bytes[i * (t.bits / 8) + k] = uint8_t(u >> (8 * k));
    }
}
int64_t get(const std::vector<uint8_t> &bytes, const IntType &t, size_t i) {
    uint64_t u = 0;
    for (int k = 0; k < t.bits / 8; k++) {
        u |= uint64_t(bytes[i * (t.bits / 8) + k]) << (8 * k);
    }
    if (t.is_signed && t.bits < 64 && (u >> (t.bits - 1)) & 1) {
        u |= ~uint64_t(0) << t.bits;
    }
    return int64_t(u);
}

/** A 1-D buffer of one integer type over raw bytes. */
struct Buf {
    IntType t;
    std::vector<uint8_t> bytes;
    tally::Buffer<> buf;
    Buf(IntType t, size_t n)
        : t(t), bytes(n * (t.bits / 8)),
          buf(t.is_signed ? tally::Int(t.bits) : tally::UInt(t.bits),
              static_cast<void *>(bytes.data()), {{0, int32_t(n), 1, 0}}) {}
};

/** Interesting values of a type: its ends, around zero, around the middle, alternating bits,
 * or every value for 8-bit types. */
std::vector<int64_t> edge_values(const IntType &t) {
    std::vector<int64_t> v;
    if (t.bits == 8) {
        for (i128 x = t.min(); x <= t.max(); x++) {
            v.push_back(int64_t(x));
        }
        return v;
    }
    for (i128 x : {t.min(),
                   t.min() + 1,
                   t.min() + 2,
                   i128(-2),
                   i128(-1),
                   i128(0),
                   i128(1),
                   i128(2),
                   i128(3),
                   i128(7),
                   i128(127),
                   i128(128),
                   i128(255),
                   i128(256),
                   t.max() / 2,
                   t.max() / 2 + 1,
                   t.max() - 1,
                   t.max(),
                   i128(0x5555555555555555ll),
                   i128(-0x2aaaaaaaaaaaaaabll)}) {
        v.push_back(int64_t(t.wrap(x)));
    }
    Rng rng(uint64_t(t.bits) * 31 + t.is_signed);
    for (int i = 0; i < 12; i++) {
        v.push_back(int64_t(t.wrap((i128(rng.next()) << 32) | rng.next())));
    }
    return v;
}

/** One intrinsic: its IR call for operand expressions (or the operator `/` or `%`), the types,
 * and the reference. */
struct Case {
    std::string name;
    IntType a, b, out;
    /** Values the second operand takes (default: edge values of b). */
    std::vector<int64_t> b_values;
    /** The third argument, a constant, or empty. */
    std::string third;
    std::function<i128(i128, i128)> ref;
    /** Lanes whose inputs the intrinsic does not define are skipped. */
    std::function<bool(i128, i128)> defined = [](i128, i128) { return true; };
    /** When set, the second operand is this constant (of type b, broadcast for the vector form)
     * instead of a load; b_values must then hold just its value, for the reference. */
    std::string constant_b = {};
};

/** Builds the pipeline `out_s[i] = f(a[i], b[i])` (scalar) and the same 8 lanes at a time into
 * out_v, JIT-compiles it, runs it on every pair of values and compares with the reference. */
void check(const Case &c) {
    SCOPED_TRACE(c.name + "(" + c.a.name() + ", " + c.b.name() + ") -> " + c.out.name());
    std::vector<int64_t> av = edge_values(c.a);
    std::vector<int64_t> bv = c.b_values.empty() ? edge_values(c.b) : c.b_values;
    size_t n = av.size() * bv.size();
    n = (n + 7) / 8 * 8;
    Buf a(c.a, n), b(c.b, n), out_s(c.out, n), out_v(c.out, n);
    for (size_t i = 0; i < n; i++) {
        put(a.bytes, c.a, i, av[(i / bv.size()) % av.size()]);
        put(b.bytes, c.b, i, bv[i % bv.size()]);
    }
    auto call = [&](const std::string &x, std::string y, const std::string &type) {
        bool vec = type.find('x') != std::string::npos;
        if (!c.constant_b.empty()) {
            std::string k = "(" + c.b.name() + ")" + c.constant_b;
            y = vec ? "x8(" + k + ")" : k;
        }
        if (c.name == "/" || c.name == "%") {
            return "(" + x + " " + c.name + " " + y + ")";
        }
        std::string third = c.third.empty() ? "" : vec ? ", x8(" + c.third + ")" : ", " + c.third;
        return "(" + type + ")" + c.name + "(" + x + ", " + y + third + ")";
    };
    std::string vt = c.out.name() + "x8";
    std::ostringstream ir;
    ir << "module name=intrin, target=host\n"
       << "external func intrin (a: buffer<" << c.a.name() << ", 1>, b: buffer<" << c.b.name()
       << ", 1>, out_s: buffer<" << c.out.name() << ", 1>, out_v: buffer<" << c.out.name()
       << ", 1>, n: int32) {\n"
       << " for (i, 0, n) {\n"
       << "  out_s[i] = " << call("a[i]", "b[i]", c.out.name()) << "\n"
       << " }\n"
       << " for (j, 0, n / 8) {\n"
       << "  out_v[ramp(j * 8, 1, 8)] = "
       << call("a[ramp(j * 8, 1, 8)]", "b[ramp(j * 8, 1, 8)]", vt) << "\n"
       << " }\n"
       << "}\n";
    std::unique_ptr<tally::JITModule> jit;
    try {
        jit = compile_module(tally::parse_module(ir.str()), "host");
    } catch (const std::exception &e) {
        FAIL() << e.what() << "\n" << ir.str();
    }
    int32_t count = int32_t(n);
    ASSERT_EQ(jit->call({a.buf, b.buf, out_s.buf, out_v.buf, count}), 0);
    int bad = 0;
    for (size_t i = 0; i < n && bad < 5; i++) {
        i128 x = get(a.bytes, c.a, i), y = get(b.bytes, c.b, i);
        if (!c.defined(x, y)) {
            continue;
        }
        int64_t want = int64_t(c.out.wrap(c.ref(x, y)));
        int64_t gs = get(out_s.bytes, c.out, i), gv = get(out_v.bytes, c.out, i);
        if (gs != want || gv != want) {
            ADD_FAILURE() << c.name << "(" << int64_t(x) << ", " << int64_t(y) << "): want " << want
                          << ", scalar gave " << gs << ", vector gave " << gv;
            bad++;
        }
    }
}

std::vector<IntType> int_types() {
    return {{false, 8}, {true, 8}, {false, 16}, {true, 16}, {false, 32}, {true, 32}};
}

std::vector<int64_t> range(int64_t lo, int64_t hi) {
    std::vector<int64_t> v;
    for (int64_t i = lo; i <= hi; i++) {
        v.push_back(i);
    }
    return v;
}

/** Halide's integer division: rounds so that the remainder is never negative; x / 0 == 0 (and
 * x % 0 == 0). */
i128 euclid_div(i128 a, i128 b) {
    if (b == 0) {
        return 0;
    }
    i128 q = floor_div(a, b < 0 ? -b : b);
    return b < 0 ? -q : q;
}

TEST(Intrinsics, EuclideanDivisionByAVariableIsExact) {
    // Vectors of 8- and 16-bit integers are divided in single precision (the lane-by-lane
    // integer division is far slower); every pair of 8-bit values and the edge pairs of the
    // wider types, the most negative value over -1 included, give the integer quotient.
    for (IntType t : int_types()) {
        check({"/", t, t, t, {}, "", euclid_div});
        check({"%", t, t, t, {}, "", [](i128 a, i128 b) {
                   return b == 0 ? 0 : a - b * euclid_div(a, b);
               }});
    }
}

TEST(Intrinsics, EuclideanDivisionByAConstantIsExact) {
    // A constant divisor takes other code paths than a variable one (a positive constant: the
    // sign-folded unsigned division, a power of two: a shift and a mask): every 8-bit value and
    // the edge values of the wider types, the most negative ones included, over divisors from 1
    // to the type's maximum.
    for (IntType t : int_types()) {
        for (i128 k :
             {i128(1), i128(2), i128(3), i128(7), i128(64), i128(100), i128(3072), t.max()}) {
            if (k > t.max()) {
                continue;
            }
            Case div{"/", t, t, t, {int64_t(k)}, "", euclid_div};
            Case mod{"%",
                     t,
                     t,
                     t,
                     {int64_t(k)},
                     "",
                     [](i128 a, i128 b) {
                         return a - b * euclid_div(a, b); }};
            div.constant_b = mod.constant_b = std::to_string(int64_t(k));
            check(div);
            check(mod);
        }
    }
}

TEST(Intrinsics, WideningArithmeticIsExact) {
    for (IntType t : int_types()) {
        check({"widening_add", t, t, t.widen(), {}, "", [](i128 a, i128 b) { return a + b; }});
        check({"widening_sub", t, t, IntType{true, t.bits * 2}, {}, "", [](i128 a, i128 b) {
                   return a - b;
               }});
        check({"widening_mul", t, t, t.widen(), {}, "", [](i128 a, i128 b) { return a * b; }});
        IntType u = t.as_unsigned();
        check({"widening_shift_left", t, u, t.widen(), range(0, t.bits), "",
               [](i128 a, i128 b) { return a * pow2(int(b)); }});
        check({"widening_shift_right", t, u, t.widen(), range(0, t.bits - 1), "",
               [](i128 a, i128 b) { return floor_div(a, pow2(int(b))); }});
    }
}

TEST(Intrinsics, HalvingArithmeticRoundsDownWithoutOverflow) {
    for (IntType t : int_types()) {
        check({"halving_add", t, t, t, {}, "", [](i128 a, i128 b) { return floor_div(a + b, 2); }});
        check({"halving_sub", t, t, t, {}, "", [](i128 a, i128 b) { return floor_div(a - b, 2); }});
        check({"rounding_halving_add", t, t, t, {}, "", [](i128 a, i128 b) {
                   return floor_div(a + b + 1, 2);
               }});
        check({"rounding_halving_sub", t, t, t, {}, "", [](i128 a, i128 b) {
                   return floor_div(a - b + 1, 2);
               }});
        Case avg{"sorted_avg", t, t, t, {}, "", [](i128 a, i128 b) { return floor_div(a + b, 2); }};
        // Halide's sorted_avg is a + ((b - a) >> 1): defined where b - a does not overflow.
        avg.defined = [t](i128 a, i128 b) { return a <= b && b - a <= t.max(); };
        check(avg);
    }
}

TEST(Intrinsics, SaturatingArithmeticClamps) {
    for (IntType t : int_types()) {
        check({"saturating_add", t, t, t, {}, "", [t](i128 a, i128 b) { return t.clamp(a + b); }});
        check({"saturating_sub", t, t, t, {}, "", [t](i128 a, i128 b) { return t.clamp(a - b); }});
    }
}

TEST(Intrinsics, ShiftsByNegativeAmountsGoTheOtherWay) {
    for (IntType t : int_types()) {
        IntType s{true, t.bits};
        auto shl = [](i128 a, i128 b) {
            return b >= 0 ? a * pow2(int(b)) : floor_div(a, pow2(int(-b)));
        };
        check({"shift_left", t, s, t, range(-(t.bits - 1), t.bits - 1), "", shl});
        check({"shift_right", t, s, t, range(-(t.bits - 1), t.bits - 1), "",
               [shl](i128 a, i128 b) { return shl(a, -b); }});
        check({"shift_right", t, t.as_unsigned(), t, range(0, t.bits - 1), "",
               [](i128 a, i128 b) { return floor_div(a, pow2(int(b))); }});
    }
}

TEST(Intrinsics, RoundingShiftsRoundHalfUp) {
    for (IntType t : int_types()) {
        IntType s{true, t.bits};
        auto rshr = [](i128 a, i128 b) {
            return b > 0 ? floor_div(a + pow2(int(b) - 1), pow2(int(b))) : a * pow2(int(-b));
        };
        check({"rounding_shift_right", t, s, t, range(-(t.bits - 1), t.bits - 1), "", rshr});
        check({"rounding_shift_right", t, t.as_unsigned(), t, range(0, t.bits - 1), "", rshr});
        check({"rounding_shift_left", t, s, t, range(-(t.bits - 1), t.bits - 1), "",
               [rshr](i128 a, i128 b) { return rshr(a, -b); }});
    }
}

TEST(Intrinsics, MulShiftRightSaturatesTheShiftedProduct) {
    for (IntType t : int_types()) {
        for (int q : {0, 1, t.bits - 1, t.bits, t.bits + 3}) {
            std::string qs = "(" + t.as_unsigned().name() + ")" + std::to_string(q);
            check({"mul_shift_right", t, t, t, {}, qs, [t, q](i128 a, i128 b) {
                       return t.clamp(floor_div(a * b, pow2(q)));
                   }});
            check({"rounding_mul_shift_right", t, t, t, {}, qs, [t, q](i128 a, i128 b) {
                       i128 p = a * b;
                       return t.clamp(q > 0 ? floor_div(p + pow2(q - 1), pow2(q)) : p);
                   }});
        }
    }
}

/** Halide's integer lerp: zero + (one - zero) * w / (2^n - 1), rounded to nearest (never a
 * tie), computed on values biased to unsigned for signed types; weights of another width are
 * rescaled as w * (2^n - 1) / (2^m - 1) (exact for the widths Halide uses). */
i128 lerp_reference(const IntType &t, i128 zero, i128 one, i128 w, int weight_bits) {
    i128 m = pow2(t.bits) - 1;
    i128 wm = pow2(weight_bits) - 1;
    i128 tw = weight_bits <= t.bits ? w * (m / wm) : w / (wm / m);
    i128 bias = t.is_signed ? pow2(t.bits - 1) : 0;
    i128 z = zero + bias, o = one + bias;
    i128 r = (z * (m - tw) + o * tw + m / 2) / m;
    return r - bias;
}

TEST(Intrinsics, LerpMatchesHalidesIntegerLerpBitForBit) {
    for (IntType t : {IntType{false, 8}, IntType{true, 8}, IntType{false, 16}, IntType{true, 16},
                      IntType{false, 32}, IntType{true, 32}}) {
        for (int wbits : {8, 16, 32}) {
            for (int64_t w : {int64_t(0), int64_t(1), int64_t(77), int64_t(128), int64_t(255),
                              int64_t(257), int64_t(65535), int64_t(0x7fffffff)}) {
                if (w >= (int64_t(1) << wbits)) {
                    continue;
                }
                std::string ws = "(uint" + std::to_string(wbits) + ")" + std::to_string(w);
                if (wbits != 8 || t.bits != 8) {
                    // The two ends only, against the wider weights.
                    check({"lerp",
                           t,
                           t,
                           t,
                           {int64_t(t.min()), int64_t(t.max()), 0, 1, -1},
                           ws,
                           [t, w, wbits](i128 a, i128 b) {
                               return lerp_reference(t, a, b, w, wbits);
                           }});
                } else {
                    check({"lerp", t, t, t, {}, ws, [t, w, wbits](i128 a, i128 b) {
                               return lerp_reference(t, a, b, w, wbits);
                           }});
                }
            }
        }
    }
}

/** Runs a float pipeline of one output `out[i] = EXPR` over inputs a, b. */
std::vector<float> run_float(const std::string &expr, const std::vector<float> &av,
                             const std::vector<float> &bv) {
    std::ostringstream ir;
    ir << "module name=f, target=host\n"
       << "external func f (a: buffer<float32, 1>, b: buffer<float32, 1>, "
       << "out: buffer<float32, 1>, n: int32) {\n"
       << " for (i, 0, n) {\n  out[i] = " << expr << "\n }\n}\n";
    auto jit = compile_module(tally::parse_module(ir.str()), "host");
    Buffer<float> a({int(av.size())}), b({int(bv.size())}), out({int(av.size())});
    std::copy(av.begin(), av.end(), a.begin());
    std::copy(bv.begin(), bv.end(), b.begin());
    int32_t n = int32_t(av.size());
    EXPECT_EQ(jit->call({a, b, out, n}), 0);
    return out.to_vector();
}

TEST(Intrinsics, FloatLerpIsZeroTimesOneMinusWPlusOneTimesW) {
    std::vector<float> a = {0.f, 1.f, -3.5f, 100.f, 1e-3f}, b = {1.f, 0.f, 2.f, -100.f, 7.f};
    for (float w : {0.f, 0.25f, 0.5f, 1.f}) {
        std::ostringstream e;
        e << std::fixed << "(float32)lerp(a[i], b[i], " << w << "f)";
        std::vector<float> got = run_float(e.str(), a, b);
        for (size_t i = 0; i < a.size(); i++) {
            EXPECT_EQ(got[i], a[i] * (1.f - w) + b[i] * w) << "w " << w << " lane " << i;
        }
    }
    // A uint8 weight of a float lerp is w / 255.
    std::vector<float> got = run_float("(float32)lerp(a[i], b[i], (uint8)51)", a, b);
    for (size_t i = 0; i < a.size(); i++) {
        float w = 51.f / 255.f;
        EXPECT_FLOAT_EQ(got[i], a[i] * (1.f - w) + b[i] * w) << "lane " << i;
    }
}

TEST(Intrinsics, FloatLerpWeightScalesIntegerRange) {
    // A float weight of a uint8 lerp is scaled to 0..255 and truncated, as Halide does.
    for (float w : {0.f, 0.3f, 0.5f, 1.f}) {
        IntType u8{false, 8};
        std::ostringstream ws;
        ws << std::fixed << w << "f";
        int64_t tw = int64_t(255.f * w);
        check({"lerp", u8, u8, u8, {}, ws.str(), [u8, tw](i128 a, i128 b) {
                   return lerp_reference(u8, a, b, tw, 8);
               }});
    }
}

/** Runs `out[i] = float32(fn(args))` for Halide's float math function `fn` ("exp", "log",
 * "pow") over a and b under strict_float, in `lanes`-wide vectors (1: scalars); `half` computes
 * it on float16 (`exp_f16` of the narrowed inputs). */
std::vector<float> run_math(const std::string &fn, bool half, int lanes,
                            const std::vector<float> &av, const std::vector<float> &bv) {
    std::string vt = lanes == 1 ? "" : "x" + std::to_string(lanes);
    std::string index =
        lanes == 1 ? "i"
                   : "ramp(i*" + std::to_string(lanes) + ", 1, " + std::to_string(lanes) + ")";
    std::string t = half ? "float16" + vt : "float32" + vt;
    auto arg = [&](const char *buf) {
        std::string load = std::string(buf) + "[" + index + "]";
        return half ? t + "(" + load + ")" : load;
    };
    std::string call = "(" + t + ")" + fn + (half ? "_f16(" : "_f32(") + arg("a") +
                       (fn == "pow" ? ", " + arg("b") : "") + ")";
    std::string value = half ? "float32" + vt + "(" + call + ")" : call;
    std::ostringstream ir;
    ir << "module name=m, target=host\n"
       << "external func m (a: buffer<float32, 1>, b: buffer<float32, 1>, "
       << "out: buffer<float32, 1>, n: int32) {\n"
       << " for (i, 0, n) {\n  out[" << index << "] = " << value << "\n }\n}\n";
    auto jit = compile_module(tally::parse_module(ir.str()), "host-strict_float");
    Buffer<float> a({int(av.size())}), b({int(bv.size())}), out({int(av.size())});
    std::copy(av.begin(), av.end(), a.begin());
    std::copy(bv.begin(), bv.end(), b.begin());
    int32_t n = int32_t(av.size()) / lanes;
    EXPECT_EQ(jit->call({a, b, out, n}), 0) << ir.str();
    return out.to_vector();
}

uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

TEST(Intrinsics, ExpLogPowAreHalidesPolynomialsBitForBit) {
    // Halide 14 evaluates exp_f32, log_f32 and pow_f32 with its own polynomials, not libm
    // (exp(1) is 0x402df855 where libm's correctly rounded expf gives 0x402df854). The expected
    // bits are Halide 14's own results for these inputs: Func f(x) = cast<float>(exp(a(x)))
    // (log, pow(a(x), b(x)); float16: of cast<float16_t>(a(x))), realized by Halide's JIT for
    // x86-64-linux-avx-avx2-sse41-strict_float, scalar and vectorized by 8 alike.
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    struct Case {
        std::string fn;
        std::vector<float> a, b;
        std::vector<uint32_t> f32, f16;
    };
    const std::vector<float> pow_y = {10.f, 0.5f,    3.f,  2.f,  0.5f,    2.f,   0.f,   3.f,
                                      -1.f, 2.25f,   7.f,  38.f, 2.f,     inf,   -2.5f, 0.f,
                                      -3.f, 1.f / 3, -3.f, 2.f,  1.f / 3, -30.f, nan,   1e10f};
    const std::vector<Case> cases = {
        {"exp",
         {0.f,      -0.f,  1.f, -1.f, 0.5f, 10.f,   -10.f, 88.5f,  89.f, -87.f, -104.f, 1e-8f,
          3.14159f, -0.3f, inf, -inf, nan,  20.25f, -5.5f, 0.125f, 2.f,  -2.f,  60.f,   -60.f},
         pow_y,
         {0x3f800000, 0x3f800000, 0x402df855, 0x3ebc5ab2, 0x3fd3094c, 0x46ac14ef,
          0x383e6bce, 0x7f4cdcc3, 0x7f800000, 0x00b33686, 0x00000000, 0x3f800000,
          0x41b92005, 0x3f3da643, 0x00000000, 0x00000000, 0x00000000, 0x4e1486bb,
          0x3b85ea53, 0x3f910b02, 0x40ec7326, 0x3e0a9555, 0x6abcede5, 0x142d70c9},
         {0x3f800000, 0x3f800000, 0x402e0000, 0x3ebc6000, 0x3fd30000, 0x46ac2000,
          0x383e8000, 0x7f800000, 0x7f800000, 0x00000000, 0x00000000, 0x3f800000,
          0x41b90000, 0x3f3da000, 0x00000000, 0x00000000, 0x00000000, 0x7f800000,
          0x3b85e000, 0x3f910000, 0x40ec8000, 0x3e0aa000, 0x7f800000, 0x00000000}},
        {"log",
         {1.f, 2.f, 0.5f,   0.f, -0.f,  -1.f, 1e-30f, 3e38f,   10.f, 0.75f, 1.5f, 1.49f,
          inf, nan, 1e-40f, 7.f, 100.f, 0.1f, 1e-3f,  1234.5f, -inf, 0.9f,  1.1f, 3.f},
         pow_y,
         {0x00000000, 0x3f317218, 0xbf317218, 0xff800000, 0xff800000, 0x7fc00000,
          0xc28a27b5, 0x42b13196, 0x40135d8e, 0xbe934b10, 0x3ecf9920, 0x3ecc2c62,
          0x42b17218, 0x42b241b1, 0xc2b00ade, 0x3ff91396, 0x40935d8e, 0xc0135d8e,
          0xc0dd0c55, 0x40e3ca1c, 0x7fc00000, 0xbdd7c745, 0x3dc331ff, 0x3f8c9f54},
         {0x00000000, 0x3f318000, 0xbf318000, 0xff800000, 0xff800000, 0x7f800000,
          0xff800000, 0x42b18000, 0x40136000, 0xbe934000, 0x3ecfa000, 0x3ecc4000,
          0x42b18000, 0x42b18000, 0xff800000, 0x3ff92000, 0x40936000, 0xc0136000,
          0xc0dd0000, 0x40e3c000, 0x7f800000, 0xbdd80000, 0x3dc28000, 0x3f8ca000}},
        {"pow",
         {2.f, 2.f, -2.f, -2.f, -2.f, 0.f, 0.f,  -0.f,   5.f,  1.5f,  -1.5f, 10.f,
          nan, 2.f, 3.f,  -3.f, 0.5f, 7.f, -0.f, 1e-20f, -8.f, 100.f, 0.25f, -1.f},
         pow_y,
         {0x44800000, 0x3fb504f4, 0xc1000000, 0x40800000, 0x7fc00000, 0x00000000,
          0x3f800000, 0x00000000, 0x3e4ccccd, 0x401f5cb9, 0xc188b001, 0x7e9676c2,
          0x7f800000, 0x00000000, 0x3d836117, 0x3f800000, 0x41000000, 0x3ff4daee,
          0x00000000, 0x00000000, 0x7fc00000, 0x00000000, 0x00000000, 0x3f800000},
         {0x44800000, 0x3fb50000, 0xc1000000, 0x40800000, 0x7f800000, 0x00000000,
          0x3f800000, 0x00000000, 0x3e4cc000, 0x401f6000, 0xc188c000, 0x7f800000,
          0x7f800000, 0x00000000, 0x3d836000, 0x3f800000, 0x41000000, 0x3ff4e000,
          0x00000000, 0x00000000, 0x7f800000, 0x00000000, 0x00000000, 0x00000000}},
    };
    for (const Case &c : cases) {
        for (int lanes : {1, 8}) {
            std::vector<float> got = run_math(c.fn, false, lanes, c.a, c.b);
            for (size_t i = 0; i < c.a.size(); i++) {
                EXPECT_EQ(float_bits(got[i]), c.f32[i])
                    << c.fn << "_f32 lanes " << lanes << " input " << i << " (" << c.a[i] << ")";
            }
            // float16 computes in float32. Halide 14's emulated float16 conversions turn a NaN
            // into inf; Tally keeps it NaN. Those lanes (a NaN input, a NaN float32 result) only
            // have to be NaN.
            got = run_math(c.fn, true, lanes, c.a, c.b);
            for (size_t i = 0; i < c.a.size(); i++) {
                if (std::isnan(c.a[i]) || (c.fn == "pow" && std::isnan(c.b[i]))) {
                    continue;
                }
                uint32_t f32 = c.f32[i];
                float expected_f32;
                std::memcpy(&expected_f32, &f32, sizeof f32);
                if (std::isnan(expected_f32)) {
                    EXPECT_TRUE(std::isnan(got[i])) << c.fn << "_f16 input " << i;
                } else {
                    EXPECT_EQ(float_bits(got[i]), c.f16[i])
                        << c.fn << "_f16 lanes " << lanes << " input " << i << " (" << c.a[i]
                        << ")";
                }
            }
        }
    }
}

TEST(Intrinsics, LibmSpellingsOfExpStayLibm) {
    // Only Halide's own names (exp_f32) are its polynomials; an extern call to libm's expf is
    // libm's, correctly rounded here: expf(1) is 0x402df854.
    std::vector<float> got = run_float("(float32)expf(a[i])", {1.f}, {0.f});
    EXPECT_EQ(float_bits(got[0]), float_bits(std::exp(1.f)));
    EXPECT_EQ(float_bits(got[0]), 0x402df854u);
}

TEST(Intrinsics, BufferAccessorsReadTheFieldsAsTheRuntimeDoes) {
    // Host code reads halide_buffer_t's fields itself for Halide's _halide_buffer_get_* calls
    // (as Halide inlines them): each must equal the runtime function of the same name.
    std::string ir =
        "module name=acc, target=host\n"
        "external func acc (b: buffer<uint16, 2>, out: buffer<int64, 1>) {\n"
        " out[0] = int64(_halide_buffer_get_min((halide_buffer_t *)b.buffer, 1))\n"
        " out[1] = int64(_halide_buffer_get_max((halide_buffer_t *)b.buffer, 1))\n"
        " out[2] = int64(_halide_buffer_get_extent((halide_buffer_t *)b.buffer, 0))\n"
        " out[3] = int64(_halide_buffer_get_stride((halide_buffer_t *)b.buffer, 1))\n"
        " out[4] = int64(_halide_buffer_get_dimensions((halide_buffer_t *)b.buffer))\n"
        " out[5] = int64((uint32)_halide_buffer_get_type((halide_buffer_t *)b.buffer))\n"
        " out[6] = int64((uint1)_halide_buffer_get_host_dirty((halide_buffer_t *)b.buffer))\n"
        " out[7] = int64((uint1)_halide_buffer_get_device_dirty((halide_buffer_t *)b.buffer))\n"
        " out[8] = int64((uint1)_halide_buffer_is_bounds_query((halide_buffer_t *)b.buffer))\n"
        " out[9] = (int64)_halide_buffer_get_device((halide_buffer_t *)b.buffer)\n"
        "}\n";
    auto jit = compile_module(tally::parse_module(ir), "host");
    halide_dimension_t dims[2] = {{-3, 17, 1, 0}, {5, 9, 17, 0}};
    uint8_t data[4] = {};
    for (int variant = 0; variant < 4; variant++) {
        halide_buffer_t b{};
        b.dimensions = 2;
        b.dim = dims;
        b.type = {halide_type_uint, 16, 1};
        b.flags = uint64_t(variant);  // host dirty (1), device dirty (2), both, neither
        b.host = variant == 3 ? nullptr : data;
        b.device = variant == 1 ? 0x1234 : 0;
        Buffer<int64_t> out({10});
        void *args[] = {&b, out.raw()};
        ASSERT_EQ(jit->run(args), 0);
        EXPECT_EQ(out[0], _halide_buffer_get_min(&b, 1));
        EXPECT_EQ(out[1], _halide_buffer_get_max(&b, 1));
        EXPECT_EQ(out[2], _halide_buffer_get_extent(&b, 0));
        EXPECT_EQ(out[3], _halide_buffer_get_stride(&b, 1));
        EXPECT_EQ(out[4], _halide_buffer_get_dimensions(&b));
        EXPECT_EQ(out[5], int64_t(_halide_buffer_get_type(&b)));
        EXPECT_EQ(out[6], int64_t(_halide_buffer_get_host_dirty(&b))) << variant;
        EXPECT_EQ(out[7], int64_t(_halide_buffer_get_device_dirty(&b))) << variant;
        EXPECT_EQ(out[8], int64_t(_halide_buffer_is_bounds_query(&b))) << variant;
        EXPECT_EQ(out[9], int64_t(_halide_buffer_get_device(&b))) << variant;
    }
}

TEST(Intrinsics, MuxPicksByIndexAndDefaultsToTheLast) {
    IntType i32{true, 32};
    // mux(b, a, a + 1, a + 2): index b picks; out of range picks the last.
    auto ref = [](i128 a, i128 b) { return b == 0 ? a : b == 1 ? a + 1 : a + 2; };
    std::vector<int64_t> av = {5, -7, 1000};
    std::vector<int64_t> idx = range(-2, 5);
    size_t n = 64;
    Buf a(i32, n), b(i32, n), out(i32, n), out2(i32, n);
    for (size_t i = 0; i < n; i++) {
        put(a.bytes, i32, i, av[i % av.size()]);
        put(b.bytes, i32, i, idx[i % idx.size()]);
    }
    std::string ir = "module name=m, target=host\n"
                     "external func m (a: buffer<int32, 1>, b: buffer<int32, 1>, "
                     "out_s: buffer<int32, 1>, out_v: buffer<int32, 1>) {\n"
                     " for (i, 0, 64) {\n"
                     "  out_s[i] = mux(b[i], a[i], a[i] + 1, a[i] + 2)\n"
                     " }\n"
                     " for (j, 0, 8) {\n"
                     "  out_v[ramp(j * 8, 1, 8)] = (int32x8)mux(b[ramp(j * 8, 1, 8)], "
                     "a[ramp(j * 8, 1, 8)], a[ramp(j * 8, 1, 8)] + x8(1), "
                     "a[ramp(j * 8, 1, 8)] + x8(2))\n"
                     " }\n"
                     "}\n";
    auto jit = compile_module(tally::parse_module(ir), "host");
    ASSERT_EQ(jit->call({a.buf, b.buf, out.buf, out2.buf}), 0);
    for (size_t i = 0; i < n; i++) {
        int64_t want = int64_t(ref(get(a.bytes, i32, i), get(b.bytes, i32, i)));
        EXPECT_EQ(get(out.bytes, i32, i), want) << i;
        EXPECT_EQ(get(out2.bytes, i32, i), want) << i;
    }
}

TEST(Intrinsics, IfThenElseComputesOnlyTheChosenValue) {
    // The false branch would read far outside the buffer: it must never run.
    std::string ir = "module name=ite, target=host\n"
                     "external func ite (a: buffer<int32, 1>, out: buffer<int32, 1>) {\n"
                     " for (i, 0, 16) {\n"
                     "  out[i] = if_then_else(i < 16, a[i] * 2, a[i + 1000000000])\n"
                     " }\n"
                     "}\n";
    auto jit = compile_module(tally::parse_module(ir), "host");
    Buffer<int32_t> a({16}), out({16});
    for (int i = 0; i < 16; i++) {
        a[i] = i * 3 - 7;
    }
    ASSERT_EQ(jit->call({a, out}), 0);
    for (int i = 0; i < 16; i++) {
        EXPECT_EQ(out[i], a[i] * 2);
    }
}

TEST(Intrinsics, RequireFailsThePipelineWithItsErrorCode) {
    std::string ir = "module name=req, target=host\n"
                     "external func req (out: buffer<int32, 1>, k: int32) {\n"
                     " out[0] = require(k < 10, k + 1, -17)\n"
                     "}\n";
    auto jit = compile_module(tally::parse_module(ir), "host");
    Buffer<int32_t> out({1});
    ASSERT_EQ(jit->call({out, 3}), 0);
    EXPECT_EQ(out[0], 4);
    EXPECT_EQ(jit->call({out, 12}), -17);
}

TEST(Intrinsics, GetUserContextAndPrefetchCompile) {
    // prefetch has no visible effect; get_user_context is the pipeline's (null here).
    std::string ir = "module name=uc, target=host\n"
                     "external func uc (a: buffer<int32, 1>, out: buffer<int32, 1>) {\n"
                     " allocate t[int32 * 12]\n"
                     " for (i, 0, 12) {\n"
                     "  t[i] = a[i]\n"
                     " }\n"
                     " for (i, 0, 8) {\n"
                     "  (uint8)prefetch(t, (i*4) + 4, 1, 64)\n"
                     "  out[i] = t[i] + select((uint64)reinterpret((void *)get_user_context()) "
                     "== (uint64)0, 1, 2)\n"
                     " }\n"
                     " free t\n"
                     "}\n";
    auto jit = compile_module(tally::parse_module(ir), "host");
    Buffer<int32_t> a({12}), out({8});
    for (int i = 0; i < 12; i++) {
        a[i] = 10 * i;
    }
    ASSERT_EQ(jit->call({a, out}), 0);
    for (int i = 0; i < 8; i++) {
        EXPECT_EQ(out[i], 10 * i + 1);
    }
    std::string llvm_ir = tally::compile_to_llvm_ir(
        tally::lower(tally::parse_module(ir), tally::Target::parse("host")));
    EXPECT_NE(llvm_ir.find("llvm.prefetch"), std::string::npos);
}

/** A histogram updated from a parallel loop: 16 long tasks update h[v % 4], so threads running
 * at once keep hitting the same elements; only atomic updates keep every count. */
void check_atomic_histogram(const std::string &type, const std::string &update,
                            const std::function<double(double, int)> &ref, double init,
                            const std::string &instruction) {
    SCOPED_TRACE(type + ": " + update);
    std::string ir = "module name=hist, target=host\n"
                     "external func hist (in: buffer<int32, 1>, h: buffer<" +
                     type +
                     ", 1>) {\n"
                     " parallel (y, 0, 16) {\n"
                     "  for (x, 0, 65536) {\n"
                     "   let v = in[(y * 65536) + x]\n"
                     "   atomic {\n"
                     "    let k = v % 4\n"
                     "    h[k] = " +
                     update +
                     "\n"
                     "   }\n"
                     "  }\n"
                     " }\n"
                     "}\n";
    tally::Module lowered = tally::lower(tally::parse_module(ir), tally::Target::parse("host"));
    // On a busy machine threads may rarely overlap: the instruction is checked as well.
    std::string llvm_ir = tally::compile_to_llvm_ir(lowered);
    EXPECT_NE(llvm_ir.find(instruction), std::string::npos) << "no '" << instruction << "'";
    auto jit = tally::compile_jit(lowered);
    Buffer<int32_t> in({16 * 65536});
    Rng rng(99);
    for (size_t i = 0; i < in.size(); i++) {
        in[i] = int32_t(rng.below(1000));
    }
    std::vector<double> want(4, init);
    for (size_t i = 0; i < in.size(); i++) {
        want[in[i] % 4] = ref(want[in[i] % 4], in[i]);
    }
    auto run_with = [&](auto &h) {
        for (int k = 0; k < 4; k++) {
            h[k] = decltype(h[0] + 0)(init);
        }
        ASSERT_EQ(jit->call({in, h}), 0);
        for (int k = 0; k < 4; k++) {
            EXPECT_EQ(double(h[k]), want[k]) << "bin " << k;
        }
    };
    if (type == "int32") {
        Buffer<int32_t> h({4});
        run_with(h);
    } else if (type == "float32") {
        Buffer<float> h({4});
        run_with(h);
    } else {
        Buffer<uint16_t> h({4});
        run_with(h);
    }
}

TEST(Atomic, ParallelUpdatesLoseNothing) {
    auto add = [](double a, int) { return a + 1; };
    check_atomic_histogram("int32", "h[k] + 1", add, 0, "atomicrmw add");
    check_atomic_histogram("int32", "1 + h[k]", add, 0, "atomicrmw add");
    check_atomic_histogram("float32", "h[k] + 1.000000f", add, 0, "atomicrmw fadd");
    check_atomic_histogram(
        "int32", "h[k] - v", [](double a, int v) { return a - v; }, 0, "atomicrmw sub");
    check_atomic_histogram(
        "int32", "max(h[k], v)", [](double a, int v) { return std::max(a, double(v)); }, 0,
        "atomicrmw max");
    check_atomic_histogram(
        "int32", "bitwise_xor(h[k], v)", [](double a, int v) { return double(int32_t(a) ^ v); }, 0,
        "atomicrmw xor");
    // No atomic instruction: a compare-and-swap loop (a multiply, and a 16-bit add of a
    // product that wraps).
    check_atomic_histogram(
        "int32", "(h[k] * 3) + 1",
        [](double a, int) { return double(int32_t(uint32_t(int64_t(a)) * 3u + 1u)); }, 0,
        "cmpxchg");
    check_atomic_histogram(
        "uint16", "h[k] + (uint16)1", [](double a, int) { return double(uint16_t(a + 1)); }, 0,
        "atomicrmw add");
}

TEST(Atomic, AnUpdateThatIsNotOneStoreIsAnError) {
    std::string ir = "module name=bad, target=host\n"
                     "external func bad (h: buffer<int32, 1>) {\n"
                     " atomic {\n"
                     "  h[0] = h[1] + 1\n"
                     " }\n"
                     "}\n";
    try {
        compile_module(tally::parse_module(ir), "host");
        FAIL() << "compiled";
    } catch (const tally::CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("reads h at another index"), std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace tally_e2e
