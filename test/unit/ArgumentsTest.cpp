// Unit tests of the argument binder (tally/Arguments.h) and tally::Buffer (tally/Buffer.h): each
// check the binder makes, with the argument it names; the packing of every scalar type, float16
// and bfloat16 rounding included; the host-dirty marks; and that which buffers a pipeline reads
// and writes comes from buffer_uses (src/ir/RuntimeCalls.h), the rule Halide's metadata reads.

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/RuntimeCalls.h"
#include "tally/Arguments.h"
#include "tally/Buffer.h"
#include "tally/Parser.h"

namespace tally {
namespace {

// One argument of every kind the checks need: `in` is read densely, `out` only written densely,
// `strided` read through its strides; then one scalar of each type (`__user_context`, a handle).
const char *const args_module = R"(module name=m, target=host
external func f (in: buffer<uint16, 2>, out: buffer<uint16, 2>, strided: buffer<float32, 1>, i8: int8, i16: int16, i32: int32, i64: int64, u8: uint8, u16: uint16, u32: uint32, u64: uint64, b: bool, f16: float16, bf16: bfloat16, f32: float32, f64: float64, __user_context) {
  let strided.stride.0 = _halide_buffer_get_stride((halide_buffer_t *)strided.buffer, 0)
  out[0] = in[0] + uint16(strided[strided.stride.0] + float32(i8 + int8(u8)) + float32(f16) + float32(bf16))
  out[1] = uint16(i16) + uint16(i32) + uint16(i64) + uint16(u16) + uint16(u32) + uint16(u64)
  out[2] = uint16(select(b, f32, float32(f64))) + uint16((uint64)reinterpret(__user_context))
}
)";

class Binder : public ::testing::Test {
protected:
    Binder() : m(parse_module(args_module)), binder(m, *m.find_function("f")) {}

    size_t arg(const std::string &name) const {
        int i = binder.find(name);
        EXPECT_GE(i, 0) << name;
        return size_t(i);
    }
    uint64_t pack(const std::string &name, const ScalarValue &v) const {
        return binder.pack_scalar(arg(name), v);
    }
    /** The kind of the ArgumentError packing `v` for `name` throws; its message in *what. */
    ArgumentError::Kind pack_error(const std::string &name, const ScalarValue &v,
                                   std::string *what = nullptr) const {
        try {
            binder.pack_scalar(arg(name), v);
        } catch (const ArgumentError &e) {
            EXPECT_EQ(e.argument, name);
            if (what) {
                *what = e.what();
            }
            return e.kind;
        }
        ADD_FAILURE() << name << " took " << v.to_string();
        return ArgumentError::Kind::Count;
    }
    ArgumentError::Kind buffer_error(const std::string &name, Buffer<> &b,
                                     std::string *what = nullptr) const {
        try {
            binder.check_buffer(arg(name), b);
        } catch (const ArgumentError &e) {
            EXPECT_EQ(e.argument, name);
            if (what) {
                *what = e.what();
            }
            return e.kind;
        }
        ADD_FAILURE() << name << " took the buffer";
        return ArgumentError::Kind::Count;
    }

    Module m;
    ArgumentBinder binder;
};

using Kind = ArgumentError::Kind;

uint64_t bits_of(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

uint64_t bits_of(double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
}

// ---- buffers ------------------------------------------------------------------------------------

TEST(Buffer, OwnsDenseZeroedElementsWithHalidesLayout) {
    Buffer<int16_t> b({5, 3}, {-1, 2});
    EXPECT_EQ(b.type(), Int(16));
    EXPECT_EQ(b.dimensions(), 2);
    EXPECT_EQ(b.stride(0), 1);
    EXPECT_EQ(b.stride(1), 5);
    EXPECT_EQ(b.min(0), -1);
    EXPECT_EQ(b.min(1), 2);
    EXPECT_EQ(b.size(), 15u);
    EXPECT_TRUE(b.is_dense());
    EXPECT_FALSE(b.is_read_only());
    for (int16_t v : b) {
        EXPECT_EQ(v, 0);
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
    const halide_buffer_t *raw = b.raw();
    EXPECT_EQ(raw->host, reinterpret_cast<const uint8_t *>(b.data()));
    EXPECT_EQ(raw->type.code, halide_type_int);
    EXPECT_EQ(raw->type.bits, 16);
    EXPECT_EQ(raw->dimensions, 2);
    EXPECT_EQ(raw->dim[1].stride, 5);
    EXPECT_EQ(raw->flags, 0u);
    // A moved buffer keeps its halide_buffer_t pointing at its dimensions and elements.
    b[7] = 42;
    Buffer<int16_t> moved = std::move(b);
    EXPECT_EQ(moved[7], 42);
    EXPECT_EQ(moved.raw()->dim[1].extent, 3);
    EXPECT_EQ(Buffer<float>(std::vector<int32_t>{}).size(), 1u);  // 0-D: one element
}

TEST(Buffer, RefusesShapesHalidesBuffersCannotHold) {
    EXPECT_THROW(Buffer<int32_t>({4}, {0, 0}), CompileError);           // mins per dimension
    EXPECT_THROW(Buffer<int32_t>({-1}), CompileError);                  // negative extent
    EXPECT_THROW(Buffer<int32_t>({4}, {INT32_MAX - 2}), CompileError);  // ends past int32
    EXPECT_NO_THROW(Buffer<int32_t>({4}, {INT32_MAX - 3}));             // ends at INT32_MAX
    EXPECT_THROW(Buffer<uint8_t>({INT32_MAX, 2, 1}), CompileError);     // stride 2^32 - 2
    EXPECT_THROW(Buffer<uint8_t>(Float(16), {4}), CompileError);        // 2 bytes in 1
    EXPECT_NO_THROW(Buffer<uint16_t>(Float(16), {4}));
    EXPECT_NO_THROW(Buffer<uint8_t>(Bool(), {4}));
    int32_t storage[8] = {};
    EXPECT_THROW(Buffer<int32_t>(storage, {{0, -2, 1, 0}}), CompileError);
}

TEST(Buffer, WrapsCallerMemoryAndKnowsDensity) {
    float storage[12] = {};
    Buffer<float> rows(storage, {{0, 3, 1, 0}, {0, 4, 3, 0}});
    EXPECT_TRUE(rows.is_dense());
    EXPECT_FALSE(rows.is_read_only());
    EXPECT_EQ(rows.data(), storage);
    Buffer<float> cols(storage, {{0, 3, 4, 0}, {0, 4, 1, 0}});
    EXPECT_FALSE(cols.is_dense());
    // An extent-1 dimension never steps, so its stride does not matter (as in numpy).
    EXPECT_TRUE(Buffer<float>(storage, {{0, 3, 1, 0}, {0, 1, 99, 0}}).is_dense());
    const float *ro = storage;
    EXPECT_TRUE(Buffer<float>(ro, {{0, 12, 1, 0}}).is_read_only());
}

TEST_F(Binder, BuffersOfAnotherElementTypeOrRankAreRefused) {
    Buffer<float> f32({4, 4});
    std::string what;
    EXPECT_EQ(buffer_error("in", f32, &what), Kind::ElementType);
    EXPECT_EQ(what, "f(): argument 'in' expects a buffer of uint16, got a buffer of float32");
    Buffer<uint16_t> flat({16});
    EXPECT_EQ(buffer_error("in", flat, &what), Kind::Rank);
    EXPECT_EQ(what, "f(): argument 'in' expects a buffer with 2 dimensions, got 1 (extents 16)");
    Buffer<uint16_t> cube({2, 2, 2});
    EXPECT_EQ(buffer_error("out", cube), Kind::Rank);
    Buffer<int16_t> signedness({4, 4});
    EXPECT_EQ(buffer_error("out", signedness), Kind::ElementType);
    Buffer<uint16_t> ok({4, 4});
    EXPECT_NO_THROW(binder.check_buffer(arg("in"), ok));
}

TEST_F(Binder, ReadOnlyBuffersOnlyWhereThePipelineDoesNotWrite) {
    uint16_t storage[16] = {};
    const uint16_t *ro = storage;
    Buffer<uint16_t> in(ro, {{0, 4, 1, 0}, {0, 4, 4, 0}});
    EXPECT_NO_THROW(binder.check_buffer(arg("in"), in));
    Buffer<uint16_t> out(ro, {{0, 4, 1, 0}, {0, 4, 4, 0}});
    std::string what;
    EXPECT_EQ(buffer_error("out", out, &what), Kind::ReadOnly);
    EXPECT_EQ(what, "f(): argument 'out' is written by the pipeline, but the buffer given is "
                    "read-only");
}

TEST_F(Binder, StridedBuffersOnlyWhereThePipelineReadsStrides) {
    uint16_t storage[64] = {};
    // Every other element: a pipeline that never reads `in`'s strides would index it densely.
    Buffer<uint16_t> every_other(storage, {{0, 4, 2, 0}, {0, 4, 8, 0}});
    std::string what;
    EXPECT_EQ(buffer_error("in", every_other, &what), Kind::Layout);
    EXPECT_EQ(what, "f(): argument 'in' must be dense (strides 1, 4), got strides 2, 8: the "
                    "pipeline never reads its strides, so it indexes it as a dense array");
    float floats[16] = {};
    Buffer<float> strided(floats, {{0, 8, 2, 0}});
    EXPECT_NO_THROW(binder.check_buffer(arg("strided"), strided));
}

TEST_F(Binder, ValuesOfTheWrongKindAreRefused) {
    Buffer<uint16_t> b({4, 4});
    std::string what;
    EXPECT_EQ(pack_error("in", ScalarValue(3), &what), Kind::NotABuffer);
    EXPECT_EQ(what, "f(): argument 'in' expects a buffer of uint16 with 2 dimensions, got int");
    EXPECT_EQ(buffer_error("i32", b, &what), Kind::NotAScalar);
    EXPECT_EQ(what, "f(): argument 'i32' expects int32, got a buffer");
    EXPECT_EQ(pack_error("i32", ScalarValue(1.5), &what), Kind::ScalarType);
    EXPECT_EQ(what, "f(): argument 'i32' expects int32, got float");
    EXPECT_EQ(pack_error("u8", ScalarValue::handle(&b)), Kind::ScalarType);
    EXPECT_EQ(pack_error("f32", ScalarValue::handle(&b)), Kind::ScalarType);
    EXPECT_EQ(pack_error("__user_context", ScalarValue(0.5)), Kind::ScalarType);
    EXPECT_EQ(pack_error("b", ScalarValue(1.0)), Kind::ScalarType);
}

TEST_F(Binder, BindChecksTheCountAndPacksEveryArgument) {
    Buffer<uint16_t> in({4, 4}), out({4, 4});
    Buffer<float> strided({8});
    try {
        binder.bind({in, out});
        ADD_FAILURE() << "two values bound to 17 arguments";
    } catch (const ArgumentError &e) {
        EXPECT_EQ(e.kind, Kind::Count);
        EXPECT_EQ(std::string(e.what()).substr(0, 33), "f() takes 17 arguments (in, out, ");
    }
    int marker = 0;
    BoundArguments bound = binder.bind({in, out, strided, int8_t(-1), 2, 3, 4, 5u, 6u, 7u, 8u, true,
                                        0.5, 0.5, 0.5f, 0.25, ScalarValue::handle(&marker)});
    void **argv = bound.argv();
    EXPECT_EQ(argv[0], in.raw());
    EXPECT_EQ(argv[1], out.raw());
    EXPECT_EQ(argv[2], strided.raw());
    auto value = [&](const std::string &name) {
        uint64_t v;
        std::memcpy(&v, argv[arg(name)], 8);
        return v;
    };
    EXPECT_EQ(value("i8"), 0xffu);  // two's complement in its own width, zero above
    EXPECT_EQ(value("i16"), 2u);
    EXPECT_EQ(value("b"), 1u);
    EXPECT_EQ(value("f16"), 0x3800u);
    EXPECT_EQ(value("bf16"), 0x3f00u);
    EXPECT_EQ(value("f32"), bits_of(0.5f));
    EXPECT_EQ(value("f64"), bits_of(0.25));
    EXPECT_EQ(value("__user_context"), uint64_t(reinterpret_cast<uintptr_t>(&marker)));
    // The first value that does not fit is named.
    try {
        binder.bind({in, out, strided, 1, 70000, 3, 4, 5, 6, 7, 8, true, 0.5, 0.5, 0.5, 0.5, 0});
        ADD_FAILURE() << "70000 packed as int16";
    } catch (const ArgumentError &e) {
        EXPECT_EQ(e.kind, Kind::Range);
        EXPECT_EQ(e.argument, "i16");
    }
}

// ---- scalars ------------------------------------------------------------------------------------

TEST_F(Binder, IntegersAreCheckedAgainstTheirTypesRange) {
    struct Case {
        const char *name;
        int64_t lo;
        uint64_t hi;
    };
    const Case cases[] = {
        {"i8", INT8_MIN, INT8_MAX},    {"i16", INT16_MIN, INT16_MAX}, {"i32", INT32_MIN, INT32_MAX},
        {"i64", INT64_MIN, INT64_MAX}, {"u8", 0, UINT8_MAX},          {"u16", 0, UINT16_MAX},
        {"u32", 0, UINT32_MAX},        {"u64", 0, UINT64_MAX},        {"b", 0, 1}};
    for (const Case &c : cases) {
        SCOPED_TRACE(c.name);
        const Type t = m.find_function("f")->args[arg(c.name)].type;
        const uint64_t mask = t.bits() < 64 ? (uint64_t(1) << t.bits()) - 1 : ~uint64_t(0);
        EXPECT_EQ(pack(c.name, ScalarValue(c.lo)), uint64_t(c.lo) & mask);
        EXPECT_EQ(pack(c.name, ScalarValue(c.hi)), c.hi & mask);
        if (c.lo > INT64_MIN) {
            EXPECT_EQ(pack_error(c.name, ScalarValue(c.lo - 1)), Kind::Range);
        }
        if (c.hi < UINT64_MAX) {
            EXPECT_EQ(pack_error(c.name, ScalarValue(c.hi + 1)), Kind::Range);
        }
        // A bool is 0 or 1 for every integer type.
        EXPECT_EQ(pack(c.name, ScalarValue(true)), 1u);
    }
    std::string what;
    EXPECT_EQ(pack_error("i32", ScalarValue(int64_t(1) << 32), &what), Kind::Range);
    EXPECT_EQ(what, "f(): argument 'i32' = 4294967296 is out of range for int32 "
                    "[-2147483648, 2147483647]");
    EXPECT_EQ(pack_error("u8", ScalarValue(-1), &what), Kind::Range);
    EXPECT_EQ(what, "f(): argument 'u8' = -1 is out of range for uint8 [0, 255]");
    EXPECT_EQ(pack_error("b", ScalarValue(2), &what), Kind::Range);
    EXPECT_EQ(what, "f(): argument 'b' = 2 is out of range for bool [0, 1]");
    // 2^63 as an unsigned value is past int64, as a signed one it cannot be written.
    EXPECT_EQ(pack_error("i64", ScalarValue(uint64_t(1) << 63)), Kind::Range);
}

TEST_F(Binder, Float32And64AreRoundedOnceAndRangeChecked) {
    EXPECT_EQ(pack("f32", ScalarValue(0.1)), bits_of(0.1f));
    EXPECT_EQ(pack("f32", ScalarValue(3)), bits_of(3.0f));  // integers convert
    EXPECT_EQ(pack("f32", ScalarValue(double(FLT_MAX))), bits_of(FLT_MAX));
    EXPECT_EQ(pack_error("f32", ScalarValue(std::nextafter(double(FLT_MAX), 1e300))), Kind::Range);
    EXPECT_EQ(pack("f32", ScalarValue(-HUGE_VAL)), bits_of(-HUGE_VALF));
    EXPECT_TRUE(std::isnan([&] {
        float f;
        uint32_t b = uint32_t(pack("f32", ScalarValue(std::nan(""))));
        std::memcpy(&f, &b, 4);
        return f;
    }()));
    EXPECT_EQ(pack("f64", ScalarValue(1e300)), bits_of(1e300));
    EXPECT_EQ(pack("f64", ScalarValue(uint64_t(UINT64_MAX))), bits_of(double(UINT64_MAX)));
    std::string what;
    EXPECT_EQ(pack_error("f32", ScalarValue(1e39), &what), Kind::Range);
    EXPECT_EQ(what, "f(): argument 'f32' = 1e+39 is out of range for float32 "
                    "[-3.4028234663852886e+38, 3.4028234663852886e+38]");
}

// float16: 1 sign, 5 exponent and 10 fraction bits; largest finite 65504; subnormals down to
// 2^-24. Each value below is exactly where a wrong rounding shows.
TEST_F(Binder, Float16IsRoundedToNearestEvenFromTheDouble) {
    auto f16 = [&](double d) { return pack("f16", ScalarValue(d)); };
    EXPECT_EQ(f16(1.0), 0x3c00u);
    EXPECT_EQ(f16(-2.0), 0xc000u);
    EXPECT_EQ(f16(0.1), 0x2e66u);  // numpy.float16(0.1)
    EXPECT_EQ(f16(65504.0), 0x7bffu);
    EXPECT_EQ(f16(-0.0), 0x8000u);
    EXPECT_EQ(f16(std::ldexp(1.0, -14)), 0x0400u);  // the smallest normal
    EXPECT_EQ(f16(std::ldexp(1.0, -24)), 0x0001u);  // the smallest subnormal
    EXPECT_EQ(f16(std::ldexp(1.0, -25)), 0x0000u);  // half of it: a tie, to even (0)
    EXPECT_EQ(f16(std::ldexp(3.0, -26)), 0x0001u);  // above the half: up
    EXPECT_EQ(f16(std::ldexp(3.0, -25)), 0x0002u);  // 1.5 subnormal steps: a tie, to even (2)
    // Ties between normals go to the even fraction: 1 + 2^-11 is halfway between 1 and
    // 1 + 2^-10, 1 + 3 * 2^-11 halfway between 1 + 2^-10 and 1 + 2^-9.
    EXPECT_EQ(f16(1.0 + std::ldexp(1.0, -11)), 0x3c00u);
    EXPECT_EQ(f16(1.0 + std::ldexp(3.0, -11)), 0x3c02u);
    // Just above a tie rounds up. Through float32 first, the 2^-40 is lost and the value becomes
    // the tie itself, which rounds down: the double-rounding error this checks for.
    EXPECT_EQ(f16(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3c01u);
    // A carry from the fraction into the exponent: just under 2 rounds up to 2.
    EXPECT_EQ(f16(2.0 - std::ldexp(1.0, -12)), 0x4000u);
    EXPECT_EQ(f16(HUGE_VAL), 0x7c00u);
    EXPECT_EQ(f16(-HUGE_VAL), 0xfc00u);
    EXPECT_EQ(f16(std::nan("")) & 0x7e00u, 0x7e00u);  // a quiet NaN
    EXPECT_EQ(f16(std::nan("")) & 0x8000u, 0u);
    std::string what;
    EXPECT_EQ(pack_error("f16", ScalarValue(65505.0), &what), Kind::Range);
    EXPECT_EQ(what, "f(): argument 'f16' = 65505 is out of range for float16 [-65504, 65504]");
    EXPECT_EQ(pack_error("f16", ScalarValue(-70000)), Kind::Range);
}

// bfloat16: float32's 8 exponent bits with 7 fraction bits.
TEST_F(Binder, BFloat16IsRoundedToNearestEvenFromTheDouble) {
    auto bf16 = [&](double d) { return pack("bf16", ScalarValue(d)); };
    EXPECT_EQ(bf16(1.0), 0x3f80u);
    EXPECT_EQ(bf16(-2.5), 0xc020u);
    EXPECT_EQ(bf16(0.1), 0x3dcdu);                        // 0x3dcccccd rounded: up
    EXPECT_EQ(bf16(1.0 + std::ldexp(1.0, -8)), 0x3f80u);  // a tie, to even
    EXPECT_EQ(bf16(1.0 + std::ldexp(3.0, -8)), 0x3f82u);  // a tie, to even (up)
    // Above a tie by less than float32 can hold: rounding through float32 would make it the tie
    // and round down.
    EXPECT_EQ(bf16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)), 0x3f81u);
    EXPECT_EQ(bf16(std::ldexp(1.0, -133)), 0x0001u);  // the smallest subnormal
    EXPECT_EQ(bf16(std::ldexp(1.0, -134)), 0x0000u);  // half of it: to even
    const double largest = std::ldexp(255.0, 120);    // (2 - 2^-7) * 2^127
    EXPECT_EQ(bf16(largest), 0x7f7fu);
    EXPECT_EQ(bf16(-largest), 0xff7fu);
    EXPECT_EQ(pack_error("bf16", ScalarValue(std::nextafter(largest, HUGE_VAL))), Kind::Range);
    EXPECT_EQ(pack_error("bf16", ScalarValue(double(FLT_MAX))), Kind::Range);
    EXPECT_EQ(bf16(HUGE_VAL), 0x7f80u);
    EXPECT_EQ(bf16(std::nan("")) & 0x7fc0u, 0x7fc0u);
}

TEST_F(Binder, HandlesTakePointersAndAddresses) {
    int x = 0;
    EXPECT_EQ(pack("__user_context", ScalarValue::handle(&x)),
              uint64_t(reinterpret_cast<uintptr_t>(&x)));
    EXPECT_EQ(pack("__user_context", ScalarValue::handle(nullptr)), 0u);
    EXPECT_EQ(pack("__user_context", ScalarValue(4096)), 4096u);
    EXPECT_EQ(pack("__user_context", ScalarValue(UINT64_MAX)), UINT64_MAX);
    EXPECT_EQ(pack_error("__user_context", ScalarValue(-1)), Kind::Range);
}

TEST(ArgumentBinder, UntypedScalarsAreRefused) {
    // The parser types every scalar (int32 when nothing says otherwise); a module made in code
    // may leave one untyped.
    Module m = parse_module(R"(module name=m, target=host
external func g (out: buffer<int32, 1>, unused: int32) {
  out[0] = 1
}
)");
    m.functions[0].args[1].type = Type();
    ArgumentBinder binder(m, *m.find_function("g"));
    try {
        binder.pack_scalar(1, ScalarValue(1));
        ADD_FAILURE();
    } catch (const ArgumentError &e) {
        EXPECT_EQ(e.kind, Kind::ScalarType);
        EXPECT_NE(std::string(e.what()).find("argument 'unused' has no type"), std::string::npos);
    }
}

// ---- host-dirty marks and the rule behind them
// ---------------------------------------------------

TEST_F(Binder, HostMemoryIsMarkedDirtyWhereItIsTheTruth) {
    Buffer<uint16_t> in({4, 4}), out({4, 4});
    binder.check_buffer(arg("in"), in);
    binder.check_buffer(arg("out"), out);
    EXPECT_TRUE(in.host_dirty());    // read: its host memory is the only copy
    EXPECT_FALSE(out.host_dirty());  // only written: its copy to a device moves nothing
    // A buffer with a device copy keeps the bits its owner set.
    Buffer<uint16_t> on_device({4, 4});
    on_device.raw()->device_interface = halide_host_device_interface();
    binder.check_buffer(arg("in"), on_device);
    EXPECT_FALSE(on_device.host_dirty());
    on_device.raw()->device_interface = nullptr;
}

// The binder's reads and writes are buffer_uses' (src/ir/RuntimeCalls.h), argument by argument,
// on the module where the old copies disagreed: a store in a closure and a host-dirty mark write
// (the metadata's old rule missed both), a copy to the host does not (the Python module's old
// rule called it a write, refusing read-only inputs that Halide copies to the host).
TEST(ArgumentBinder, ReadsAndWritesComeFromBufferUses) {
    Module m = parse_module(R"(module name=u, target=host
external func u_par_for_y (__user_context, y, closure_arg) {
  par_out[y] = 1
}
external func u (in: buffer<int32, 1>, par_out: buffer<int32, 1>, marked: buffer<int32, 1>, fetched: buffer<int32, 1>) {
  let a = halide_do_par_for((void *)::u_par_for_y, 0, 8, (void *)reinterpret((uint64)0))
  let b = _halide_buffer_set_host_dirty((halide_buffer_t *)marked.buffer, (uint1)1)
  let c = halide_copy_to_host((halide_buffer_t *)fetched.buffer)
  marked[0] = in[0]
}
)");
    const LoweredFunc &f = *m.find_function("u");
    ArgumentBinder binder(m, f);
    std::map<std::string, BufferUse> uses = buffer_uses(m, f);
    for (const ArgumentSpec &s : binder.arguments()) {
        SCOPED_TRACE(s.arg.name);
        const BufferUse &u = uses[s.arg.name];
        EXPECT_EQ(s.read, u.read);
        EXPECT_EQ(s.written, u.written);
        EXPECT_EQ(s.reads_strides, u.reads_strides);
    }
    int32_t storage[8] = {};
    const int32_t *ro = storage;
    std::map<std::string, bool> takes_read_only;
    for (const char *name : {"in", "par_out", "marked", "fetched"}) {
        Buffer<int32_t> b(ro, {{0, 8, 1, 0}});
        try {
            binder.check_buffer(size_t(binder.find(name)), b);
            takes_read_only[name] = true;
        } catch (const ArgumentError &e) {
            EXPECT_EQ(e.kind, Kind::ReadOnly);
            takes_read_only[name] = false;
        }
    }
    EXPECT_EQ(takes_read_only,
              (std::map<std::string, bool>{
                  {"in", true}, {"par_out", false}, {"marked", false}, {"fetched", true}}));
}

}  // namespace
}  // namespace tally
