/** \file
 * Scalar and vector types of the IR, laid out like Halide's `halide_type_t` (code, bits, lanes).
 * Handles additionally carry the spelling of what they point to (`void`, `halide_buffer_t`, ...),
 * so that text printed by Halide round-trips; two handle types are interchangeable for type
 * checking (see types_compatible) but not structurally equal.
 */
#ifndef TALLY_TYPE_H
#define TALLY_TYPE_H

#include <cstdint>
#include <string>

namespace tally {

class Type {
public:
    /** Values match halide_type_code_t. */
    enum Code : uint8_t { Int = 0, UInt = 1, Float = 2, Handle = 3, BFloat = 4 };

    /** The most lanes a type has (halide_type_t's lanes are a uint16_t). */
    static constexpr int max_lanes = 65535;

    /** An invalid type (bits == 0); used for "not known". */
    Type() = default;
    Type(Code code, int bits, int lanes, std::string handle_name = "");

    Code code() const { return code_; }
    int bits() const { return bits_; }
    int lanes() const { return lanes_; }
    int bytes() const { return (bits_ + 7) / 8; }
    /** For handles, the pointee spelling as the text had it, e.g. "void", "halide_buffer_t" or
     * Halide 21's "struct halide_buffer_t"; for a handle spelled by a pointer typedef
     * (is_pointer_typedef), the typedef. Compare pointees with is_handle_to. */
    const std::string &handle_name() const { return handle_name_; }
    /** A handle to `pointee` (written as Halide 14 prints it: "halide_buffer_t", "char"),
     * whichever way the text spelled it: Halide 21 adds `struct` and `const`
     * (`struct halide_buffer_t *`, `char const *`), so names are compared after
     * normalize_handle_name. */
    bool is_handle_to(const std::string &pointee) const;
    /** A handle whose C type is a typedef of a pointer, spelled without a `*`: Halide 21
     * prints a task function as `(halide_task_t)::f`. The same 64-bit handle as any other; the
     * spelling is kept so that the text round-trips. */
    bool is_pointer_typedef() const { return pointer_typedef_; }
    static Type pointer_typedef(const std::string &name, int lanes = 1);

    bool is_valid() const { return bits_ != 0; }
    bool is_int() const { return code_ == Int; }
    bool is_uint() const { return code_ == UInt; }
    bool is_float() const { return code_ == Float || code_ == BFloat; }
    bool is_handle() const { return code_ == Handle; }
    bool is_bool() const { return code_ == UInt && bits_ == 1; }
    bool is_scalar() const { return lanes_ == 1; }
    bool is_vector() const { return lanes_ > 1; }

    Type with_lanes(int lanes) const;
    Type element_of() const { return with_lanes(1); }

    /** Smallest / largest values representable, for integer types of up to 64 bits. */
    int64_t min_int() const;
    uint64_t max_uint() const;
    /** Does the integer value fit in this (int or uint) type? */
    bool can_represent(int64_t v) const;

    bool operator==(const Type &o) const {
        return code_ == o.code_ && bits_ == o.bits_ && lanes_ == o.lanes_ &&
               handle_name_ == o.handle_name_ && pointer_typedef_ == o.pointer_typedef_;
    }
    bool operator!=(const Type &o) const { return !(*this == o); }

    /** "int32", "uint1", "float32x8", or for handles "void *" (a pointer typedef: its name). */
    std::string to_string() const;

    /** The Halide runtime's 32-bit type code: code | bits << 8 | lanes << 16. */
    uint32_t halide_type_code() const;
    /** Inverse of halide_type_code(); returns an invalid type for nonsense codes. */
    static Type from_halide_type_code(uint32_t code);

private:
    Code code_ = Int;
    uint8_t bits_ = 0;
    uint16_t lanes_ = 0;
    bool pointer_typedef_ = false;
    std::string handle_name_;
};

inline Type Int(int bits, int lanes = 1) {
    return Type(Type::Int, bits, lanes);
}
inline Type UInt(int bits, int lanes = 1) {
    return Type(Type::UInt, bits, lanes);
}
inline Type Float(int bits, int lanes = 1) {
    return Type(Type::Float, bits, lanes);
}
inline Type Bool(int lanes = 1) {
    return Type(Type::UInt, 1, lanes);
}
inline Type Handle(const std::string &pointee = "void", int lanes = 1) {
    return Type(Type::Handle, 64, lanes, pointee);
}

/** A handle's pointee spelling without the `struct` and `const` Halide 21 prints and Halide 14
 * does not: "struct halide_buffer_t" and "halide_buffer_t" are "halide_buffer_t", "char const"
 * and "const char" are "char" (words separated by one space). */
std::string normalize_handle_name(const std::string &name);

/** Equal types, except that any two handles of the same lane count are compatible. */
bool types_compatible(const Type &a, const Type &b);

/** Parses "int32", "uint8x8", "float16", "bool", "bfloat16"; returns an invalid type if not a
 * type name. Handles are not spelled this way (see the parser). */
Type parse_type_name(const std::string &s);

}  // namespace tally

#endif  // TALLY_TYPE_H
