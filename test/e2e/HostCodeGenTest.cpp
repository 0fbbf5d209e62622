// Host code generation against plain C++: the vector loads and stores that are not dense ramps
// (reversed, strided, broadcast, clamped, looked up, predicated) give exactly the reference's
// results and are never gathers or scatters; and strict_float (the target feature, or the
// intrinsic) gives floats equal bit for bit to C++ that does each operation on its own, while
// the default contracts `a*b + c` (Halide 14's fast-math flags).

#include <gtest/gtest.h>

#include <cstring>

#include "E2EUtil.h"
#include "tally/IRMutator.h"

namespace tally_e2e {
namespace {

using namespace tally;

// out[x] for x in [0, 64), 8 lanes at a time, from in (128 int32s) and lut (16 int32s): each
// line is one kind of access; the sum keeps every one of them observable.
const char *const accesses = R"(module name=accesses, target=host
external func accesses (in: buffer<int32, 1>, lut: buffer<int32, 1>, out: buffer<int32, 1>, rev: buffer<int32, 1>, odd: buffer<int32, 1>) {
  produce out {
    for (x.v, 0, 8) {
      let x = x.v*8
      let reversed = in[ramp(x + 70, -1, 8)]
      let stride2 = in[ramp(x*2 + 1, 2, 8)]
      let stride3 = in[ramp(x, 3, 8)]
      let stride5 = in[ramp(x, 5, 8)]
      let bcast = in[x8(x + 3)]
      let clamped = in[max(min(ramp(x - 4, 1, 8), x8(60)), x8(0))]
      let looked_up = lut[ramp(x, 1, 8) % x8(16)]
      let masked = (in[ramp(x + 1, 1, 8)] if ramp(x, 1, 8) < x8(61))
      out[ramp(x, 1, 8)] = reversed + stride2*x8(3) + stride3*x8(5) + stride5*x8(7) + bcast*x8(11) + clamped*x8(13) + looked_up*x8(17) + masked*x8(19)
      rev[ramp(x + 7, -1, 8)] = in[ramp(x, 1, 8)]
      odd[ramp(x*2 + 1, 2, 8)] = in[ramp(x, 1, 8)]
      predicate (ramp(x, 1, 8) >= x8(62)) out[ramp(x, 1, 8)] = x8(-1)
    }
  }
}
)";

int32_t at(const Buffer<int32_t> &img, int i) {
    return img[size_t(i)];
}

TEST(HostCodeGen, IrregularVectorAccessesMatchScalarCpp) {
    Module m = lower(parse_module(accesses, "accesses.stmt"), Target::parse("host"));
    std::string ir = compile_to_llvm_ir(m);
    EXPECT_EQ(ir.find("masked.gather"), std::string::npos) << ir;
    EXPECT_EQ(ir.find("masked.scatter"), std::string::npos) << ir;
    auto jit = compile_jit(m);
    Buffer<int32_t> in({128}), lut({16}), out({64}), rev({64}), odd({128});
    Rng rng(7);
    for (size_t i = 0; i < in.size(); i++) {
        in[i] = int32_t(rng.below(1000));
    }
    for (size_t i = 0; i < lut.size(); i++) {
        lut[i] = int32_t(rng.below(1000));
    }
    std::memset(odd.data(), 0, odd.size() * sizeof(int32_t));
    ASSERT_EQ(jit->call({in, lut, out, rev, odd}), 0);
    for (int i = 0; i < 64; i++) {
        int x = i - i % 8, l = i % 8;
        int c = std::max(std::min(x - 4 + l, 60), 0);
        int masked = i < 61 ? at(in, i + 1) : 0;
        int want = at(in, x + 70 - l) + at(in, x * 2 + 1 + 2 * l) * 3 + at(in, x + 3 * l) * 5 +
                   at(in, x + 5 * l) * 7 + at(in, x + 3) * 11 + at(in, c) * 13 +
                   at(lut, i % 16) * 17 + masked * 19;
        EXPECT_EQ(out[size_t(i)], i >= 62 ? -1 : want) << "out[" << i << "]";
        EXPECT_EQ(rev[size_t(x + 7 - l)], at(in, i)) << "rev[" << x + 7 - l << "]";
        EXPECT_EQ(odd[size_t(2 * i + 1)], at(in, i)) << "odd[" << 2 * i + 1 << "]";
        EXPECT_EQ(odd[size_t(2 * i)], 0) << "odd[" << 2 * i << "]";
    }
}

const char *const muladd = R"(module name=muladd, target=host
external func muladd (a: buffer<float32, 1>, b: buffer<float32, 1>, c: buffer<float32, 1>, out: buffer<float32, 1>) {
  produce out {
    for (x.v, 0, 32) {
      out[ramp(x.v*8, 1, 8)] = (a[ramp(x.v*8, 1, 8)]*b[ramp(x.v*8, 1, 8)]) + (c[ramp(x.v*8, 1, 8)]*a[ramp(x.v*8, 1, 8)])
    }
  }
}
)";

/** Wraps every stored value in strict_float(), as Halide's strict_float lowering does. */
class WrapStrict : public IRMutator {
public:
    using IRMutator::visit;
    Stmt visit(const Store *op) override {
        Expr v = Call::make(op->value.type(), "strict_float", {op->value}, Call::PureIntrinsic);
        return Store::make(op->name, v, op->index, op->predicate);
    }
};

/** Runs muladd compiled from `m` and checks the result equals C++ rounding each operation. */
void expect_strict_results(const Module &m) {
    auto jit = compile_jit(m);
    Buffer<float> a({256}), b({256}), c({256}), out({256});
    Rng rng(11);
    for (size_t i = 0; i < a.size(); i++) {
        a[i] = rng.uniform(-3, 3);
        b[i] = rng.uniform(-3, 3);
        c[i] = rng.uniform(-3, 3);
    }
    ASSERT_EQ(jit->call({a, b, c, out}), 0);
    for (size_t i = 0; i < out.size(); i++) {
        volatile float ab = a[i] * b[i], ca = c[i] * a[i];
        float want = ab + ca;
        EXPECT_EQ(std::memcmp(&out[i], &want, sizeof(float)), 0)
            << "out[" << i << "] = " << out[i] << ", want " << want;
    }
}

TEST(HostCodeGen, FastMathContractsByDefault) {
    Module m = lower(parse_module(muladd, "muladd.stmt"), Target::parse("host"));
    std::string ir = compile_to_llvm_ir(m, CompileOptions{0});
    EXPECT_NE(ir.find("fmul reassoc nnan ninf nsz contract afn <8 x float>"), std::string::npos)
        << ir;
}

TEST(HostCodeGen, StrictFloatTargetEqualsCppBitForBit) {
    Module m = lower(parse_module(muladd, "muladd.stmt"), Target::parse("host-strict_float"));
    std::string ir = compile_to_llvm_ir(m, CompileOptions{0});
    EXPECT_EQ(ir.find("contract"), std::string::npos) << ir;
    expect_strict_results(m);
}

TEST(HostCodeGen, StrictFloatIntrinsicEqualsCppBitForBit) {
    Module m = lower(parse_module(muladd, "muladd.stmt"), Target::parse("host"));
    for (LoweredFunc &f : m.functions) {
        f.body = WrapStrict().mutate(f.body);
    }
    std::string ir = compile_to_llvm_ir(m, CompileOptions{0});
    EXPECT_EQ(ir.find("contract"), std::string::npos) << ir;
    expect_strict_results(m);
}

}  // namespace
}  // namespace tally_e2e
