// The argument binder (tally/Arguments.h): checks and packs the values of a call of a compiled
// pipeline. Its rules are stated once, in the header; this file keeps them in one place each:
//
//  - how the pipeline uses each buffer comes from buffer_uses (src/ir/RuntimeCalls.h), read
//    once when the binder is made;
//  - buffers are checked in check_buffer, in the order a caller fixes them: kind, element type,
//    rank, writability, layout; then marked host-dirty where the header says;
//  - scalars are checked and packed in pack_scalar: integers against their type's range and
//    masked to its width, floats against their type's largest finite value and rounded to it
//    (pack_narrow_float rounds from the double once, ties to even, as an IEEE conversion does);
//  - every message is made by where() + the check's own words, so that each names the
//    function and the argument the same way.

#include "tally/Arguments.h"

#include <cfloat>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ir/RuntimeCalls.h"

namespace tally {

namespace {

/** A type as messages name it: "bool" for uint1, else its IR spelling. */
std::string type_text(const Type &t) {
    return t.is_bool() ? "bool" : t.to_string();
}

/** The shortest decimal text that reads back as `d` (at most 17 significant digits); whole
 * numbers below 10^16 without an exponent. */
std::string shortest(double d) {
    char text[32];
    if (d == std::floor(d) && std::fabs(d) < 1e16) {
        std::snprintf(text, sizeof(text), "%.0f", d);
        return text;
    }
    for (int digits = 1; digits <= 17; digits++) {
        std::snprintf(text, sizeof(text), "%.*g", digits, d);
        if (std::strtod(text, nullptr) == d) {
            break;
        }
    }
    return text;
}

/** The largest finite value of a float type. */
double largest_finite(const Type &t) {
    if (t.code() == Type::BFloat) {
        return 0x1.fep127;  // (2 - 2^-7) * 2^127: bfloat16 keeps float32's exponent
    }
    switch (t.bits()) {
    case 16:
        return 65504.0;  // (2 - 2^-10) * 2^15
    case 32:
        return FLT_MAX;
    default:
        return DBL_MAX;
    }
}

/** `d` in an IEEE-style binary format of `exp_bits` exponent and `mant_bits` fraction bits
 * (float16: 5 and 10; bfloat16: 8 and 7), rounded to nearest with ties to even, straight from
 * the double's bits: rounding through float32 first would round twice, and get the halfway
 * cases of the narrow format wrong. A magnitude past the largest finite value gives infinity;
 * NaN stays NaN (quiet). */
uint64_t pack_narrow_float(double d, int exp_bits, int mant_bits) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    const uint64_t sign = (bits >> 63) << (exp_bits + mant_bits);
    const int64_t exp = int64_t((bits >> 52) & 0x7ff);
    const uint64_t frac = bits & ((uint64_t(1) << 52) - 1);
    const uint64_t inf = ((uint64_t(1) << exp_bits) - 1) << mant_bits;
    if (exp == 0x7ff) {
        return sign | inf | (frac ? uint64_t(1) << (mant_bits - 1) : 0);
    }
    if (exp == 0) {
        return sign;  // zero, or a double subnormal: far below the narrow format's smallest
    }
    const int bias = (1 << (exp_bits - 1)) - 1;
    int64_t e = exp - 1023 + bias;  // the biased exponent in the narrow format
    const uint64_t significand = frac | (uint64_t(1) << 52);
    // Drop the bits the narrow fraction has no room for; a subnormal result drops more.
    int64_t shift = 52 - mant_bits + (e < 1 ? 1 - e : 0);
    if (shift > 53) {
        return sign;  // below half the smallest subnormal: rounds to zero
    }
    uint64_t kept = significand >> shift;
    const uint64_t rest = significand & ((uint64_t(1) << shift) - 1);
    const uint64_t half = uint64_t(1) << (shift - 1);
    if (rest > half || (rest == half && (kept & 1))) {
        kept++;  // a carry into the exponent is the right rounding
    }
    // A normal result's `kept` holds its leading 1 at bit mant_bits, which adds one to the
    // exponent field: hence e - 1. A subnormal one's is its whole encoding.
    uint64_t magnitude = e >= 1 ? (uint64_t(e - 1) << mant_bits) + kept : kept;
    return sign | (magnitude >= inf ? inf : magnitude);
}

const char *kind_text(ScalarValue::Kind k) {
    switch (k) {
    case ScalarValue::Kind::Bool:
        return "bool";
    case ScalarValue::Kind::Int:
    case ScalarValue::Kind::UInt:
        return "int";
    case ScalarValue::Kind::Float:
        return "float";
    case ScalarValue::Kind::Handle:
        return "a pointer";
    }
    return "?";
}

/** A buffer's extents as tally-run writes them, dimension 0 first: "64x48" ("" for 0-D). */
std::string extents_text(const Buffer<> &b) {
    std::string s;
    for (int d = 0; d < b.dimensions(); d++) {
        s += (d ? "x" : "") + std::to_string(b.extent(d));
    }
    return s;
}

}  // namespace

std::string ScalarValue::to_string() const {
    switch (kind_) {
    case Kind::Bool:
        return as_bool() ? "true" : "false";
    case Kind::Int:
        return std::to_string(i_);
    case Kind::UInt:
        return std::to_string(u_);
    case Kind::Float:
        return shortest(f_);
    case Kind::Handle: {
        char text[24];
        std::snprintf(text, sizeof(text), "0x%" PRIx64, u_);
        return text;
    }
    }
    return "?";
}

ArgumentBinder::ArgumentBinder(const Module &m, const LoweredFunc &f) : function_(f.name) {
    std::map<std::string, BufferUse> uses = buffer_uses(m, f);
    for (const Argument &a : f.args) {
        ArgumentSpec spec{a};
        auto use = uses.find(a.name);
        if (a.is_buffer() && use != uses.end()) {
            spec.read = use->second.read;
            spec.written = use->second.written;
            spec.reads_strides = use->second.reads_strides;
        }
        args_.push_back(spec);
    }
}

int ArgumentBinder::find(const std::string &name) const {
    for (size_t i = 0; i < args_.size(); i++) {
        if (args_[i].arg.name == name) {
            return int(i);
        }
    }
    return -1;
}

BoundArguments ArgumentBinder::bind(const std::vector<ArgumentValue> &values) const {
    if (values.size() != args_.size()) {
        std::string names;
        for (const ArgumentSpec &s : args_) {
            names += (names.empty() ? "" : ", ") + s.arg.name;
        }
        throw ArgumentError(ArgumentError::Kind::Count, "",
                            function_ + "() takes " + std::to_string(args_.size()) +
                                " arguments (" + names + "), " + std::to_string(values.size()) +
                                " given");
    }
    BoundArguments out;
    out.scalars_.assign(args_.size(), 0);
    out.pointers_.assign(args_.size(), nullptr);
    for (size_t i = 0; i < args_.size(); i++) {
        if (values[i].is_buffer()) {
            check_buffer(i, *values[i].buffer());
            out.pointers_[i] = values[i].buffer()->raw();
        } else {
            out.scalars_[i] = pack_scalar(i, values[i].scalar());
            out.pointers_[i] = &out.scalars_[i];
        }
    }
    return out;
}

namespace {

std::string where(const std::string &function, const Argument &a) {
    return function + "(): argument '" + a.name + "'";
}

}  // namespace

void ArgumentBinder::check_buffer(size_t i, Buffer<> &b) const {
    const ArgumentSpec &spec = args_.at(i);
    const Argument &a = spec.arg;
    if (!a.is_buffer()) {
        type_error(i, "a buffer");
    }
    if (a.type.is_valid() &&
        (a.type.code() != b.type().code() || a.type.bits() != b.type().bits())) {
        throw ArgumentError(ArgumentError::Kind::ElementType, a.name,
                            where(function_, a) + " expects a buffer of " + type_text(a.type) +
                                ", got a buffer of " + type_text(b.type()));
    }
    if (a.dimensions >= 0 && b.dimensions() != a.dimensions) {
        throw ArgumentError(ArgumentError::Kind::Rank, a.name,
                            where(function_, a) + " expects a buffer with " +
                                std::to_string(a.dimensions) + " dimension" +
                                (a.dimensions == 1 ? "" : "s") + ", got " +
                                std::to_string(b.dimensions()) +
                                (b.dimensions() ? " (extents " + extents_text(b) + ")" : ""));
    }
    if (spec.written && b.is_read_only()) {
        throw ArgumentError(ArgumentError::Kind::ReadOnly, a.name,
                            where(function_, a) +
                                " is written by the pipeline, but the buffer given is read-only");
    }
    if (!spec.reads_strides && !b.is_dense()) {
        std::string want, got;
        int64_t stride = 1;
        for (int d = 0; d < b.dimensions(); d++) {
            want += (d ? ", " : "") + std::to_string(stride);
            got += (d ? ", " : "") + std::to_string(b.stride(d));
            stride *= b.extent(d);
        }
        throw ArgumentError(ArgumentError::Kind::Layout, a.name,
                            where(function_, a) + " must be dense (strides " + want +
                                "), got strides " + got +
                                ": the pipeline never reads its strides, so it indexes it as a "
                                "dense array");
    }
    // The host memory of a buffer with no device copy is the only copy: the truth for what the
    // pipeline reads. An output it only writes starts clean (Halide's convention).
    if (!b.raw()->device_interface && (spec.read || !spec.written)) {
        b.set_host_dirty(true);
    }
}

uint64_t ArgumentBinder::pack_scalar(size_t i, const ScalarValue &v) const {
    const ArgumentSpec &spec = args_.at(i);
    const Argument &a = spec.arg;
    const Type &t = a.type;
    using Kind = ScalarValue::Kind;
    if (a.is_buffer()) {
        type_error(i, kind_text(v.kind()));
    }
    if (!t.is_valid()) {
        throw ArgumentError(ArgumentError::Kind::ScalarType, a.name,
                            where(function_, a) +
                                " has no type the pipeline declares; give it one in the IR "
                                "(name: type)");
    }
    if (t.is_handle()) {
        if (v.kind() == Kind::Handle || v.kind() == Kind::UInt) {
            return v.as_uint();
        }
        if (v.kind() == Kind::Int) {
            if (v.as_int() < 0) {
                range_error(i, v.to_string());
            }
            return uint64_t(v.as_int());
        }
        type_error(i, kind_text(v.kind()));
    }
    if (t.is_int() || t.is_uint()) {
        uint64_t bits = 0;
        switch (v.kind()) {
        case Kind::Bool:
            bits = v.as_bool() ? 1 : 0;
            break;
        case Kind::Int:
            if (v.as_int() < t.min_int() ||
                (v.as_int() > 0 && uint64_t(v.as_int()) > t.max_uint())) {
                range_error(i, v.to_string());
            }
            bits = uint64_t(v.as_int());
            break;
        case Kind::UInt:
            if (v.as_uint() > t.max_uint()) {
                range_error(i, v.to_string());
            }
            bits = v.as_uint();
            break;
        default:
            type_error(i, kind_text(v.kind()));
        }
        // Two's complement in the type's own width, low bytes first.
        return t.bits() < 64 ? bits & ((uint64_t(1) << t.bits()) - 1) : bits;
    }
    // A float type.
    double d = 0;
    switch (v.kind()) {
    case Kind::Bool:
        d = v.as_bool() ? 1 : 0;
        break;
    case Kind::Int:
        d = double(v.as_int());
        break;
    case Kind::UInt:
        d = double(v.as_uint());
        break;
    case Kind::Float:
        d = v.as_float();
        break;
    default:
        type_error(i, kind_text(v.kind()));
    }
    if (std::isfinite(d) && std::fabs(d) > largest_finite(t)) {
        range_error(i, v.to_string());
    }
    if (t.code() == Type::BFloat) {
        return pack_narrow_float(d, 8, 7);
    }
    if (t.bits() == 16) {
        return pack_narrow_float(d, 5, 10);
    }
    uint64_t bits = 0;
    if (t.bits() == 32) {
        float f = float(d);  // the C++ conversion rounds to nearest, ties to even
        std::memcpy(&bits, &f, 4);
    } else {
        std::memcpy(&bits, &d, 8);
    }
    return bits;
}

void ArgumentBinder::type_error(size_t i, const std::string &given) const {
    const Argument &a = args_.at(i).arg;
    std::string want;
    if (a.is_buffer()) {
        want = "a buffer";
        if (a.type.is_valid()) {
            want += " of " + type_text(a.type);
        }
        if (a.dimensions >= 0) {
            want += std::string(a.type.is_valid() ? " with " : " of ") +
                    std::to_string(a.dimensions) + " dimension" + (a.dimensions == 1 ? "" : "s");
        }
    } else {
        want = type_text(a.type);
    }
    throw ArgumentError(a.is_buffer()         ? ArgumentError::Kind::NotABuffer
                        : given == "a buffer" ? ArgumentError::Kind::NotAScalar
                                              : ArgumentError::Kind::ScalarType,
                        a.name, where(function_, a) + " expects " + want + ", got " + given);
}

void ArgumentBinder::range_error(size_t i, const std::string &value) const {
    const Argument &a = args_.at(i).arg;
    const Type &t = a.type;
    std::string range;
    if (t.is_float()) {
        std::string m = shortest(largest_finite(t));
        range = "[-" + m + ", " + m + "]";
    } else if (t.is_handle()) {
        range = "[0, " + std::to_string(UINT64_MAX) + "]";
    } else {
        range = "[" + std::to_string(t.min_int()) + ", " + std::to_string(t.max_uint()) + "]";
    }
    throw ArgumentError(ArgumentError::Kind::Range, a.name,
                        where(function_, a) + " = " + value + " is out of range for " +
                            type_text(t) + " " + range);
}

}  // namespace tally
