// Type: construction, naming and the Halide runtime type code.

#include "tally/Type.h"

#include <cstdlib>

#include "tally/Error.h"

namespace tally {

Type::Type(Code code, int bits, int lanes, std::string handle_name)
    : code_(code), bits_(static_cast<uint8_t>(bits)), lanes_(static_cast<uint16_t>(lanes)),
      handle_name_(std::move(handle_name)) {
    internal_assert(bits > 0 && bits <= 64) << "bad type width " << bits;
    internal_assert(lanes > 0 && lanes <= max_lanes) << "bad lane count " << lanes;
    if (code == Handle && handle_name_.empty()) {
        handle_name_ = "void";
    }
    if (code != Handle) {
        handle_name_.clear();
    }
}

Type Type::with_lanes(int lanes) const {
    Type t(code_, bits_, lanes, handle_name_);
    t.pointer_typedef_ = pointer_typedef_;
    return t;
}

Type Type::pointer_typedef(const std::string &name, int lanes) {
    internal_assert(!name.empty()) << "a pointer typedef needs a name";
    Type t(Handle, 64, lanes, name);
    t.pointer_typedef_ = true;
    return t;
}

bool Type::is_handle_to(const std::string &pointee) const {
    return is_handle() && normalize_handle_name(handle_name_) == normalize_handle_name(pointee);
}

std::string normalize_handle_name(const std::string &name) {
    std::string out, word;
    auto flush = [&] {
        if (!word.empty() && word != "struct" && word != "const") {
            out += (out.empty() ? "" : " ") + word;
        }
        word.clear();
    };
    for (char c : name) {
        if (c == ' ' || c == '\t') {
            flush();
        } else {
            word.push_back(c);
        }
    }
    flush();
    return out;
}

int64_t Type::min_int() const {
    if (is_uint() || bits_ == 0) {
        return 0;
    }
    if (bits_ >= 64) {
        return INT64_MIN;
    }
    return -(int64_t(1) << (bits_ - 1));
}

uint64_t Type::max_uint() const {
    if (is_int()) {
        return bits_ >= 64 ? uint64_t(INT64_MAX) : (uint64_t(1) << (bits_ - 1)) - 1;
    }
    return bits_ >= 64 ? UINT64_MAX : (uint64_t(1) << bits_) - 1;
}

bool Type::can_represent(int64_t v) const {
    if (is_int()) {
        return v >= min_int() && (v < 0 || uint64_t(v) <= max_uint());
    }
    if (is_uint()) {
        return v >= 0 && uint64_t(v) <= max_uint();
    }
    return false;
}

std::string Type::to_string() const {
    if (!is_valid()) {
        return "<unknown>";
    }
    std::string s;
    switch (code_) {
    case Int:
        s = "int";
        break;
    case UInt:
        s = "uint";
        break;
    case Float:
        s = "float";
        break;
    case BFloat:
        s = "bfloat";
        break;
    case Handle:
        return pointer_typedef_ ? handle_name_ : handle_name_ + " *";
    }
    s += std::to_string(bits_);
    if (lanes_ > 1) {
        s += "x" + std::to_string(lanes_);
    }
    return s;
}

uint32_t Type::halide_type_code() const {
    return uint32_t(code_) | (uint32_t(bits_) << 8) | (uint32_t(lanes_) << 16);
}

namespace {

/** The widths a type of each code may have (Halide's: floats are 16, 32 or 64 bits wide). */
bool valid_bits(Type::Code code, int bits) {
    switch (code) {
    case Type::Int:
    case Type::UInt:
        return bits >= 1 && bits <= 64;
    case Type::Float:
        return bits == 16 || bits == 32 || bits == 64;
    case Type::BFloat:
        return bits == 16;
    case Type::Handle:
        return bits == 64;
    }
    return false;
}

}  // namespace

Type Type::from_halide_type_code(uint32_t c) {
    uint32_t code = c & 0xff, bits = (c >> 8) & 0xff, lanes = c >> 16;
    if (code > BFloat || !valid_bits(Code(code), int(bits)) || lanes == 0) {
        return Type();
    }
    if (code == Handle) {
        return tally::Handle("void", lanes);
    }
    return Type(Code(code), bits, lanes);
}

bool types_compatible(const Type &a, const Type &b) {
    if (a.is_handle() && b.is_handle()) {
        return a.lanes() == b.lanes();
    }
    return a == b;
}

Type parse_type_name(const std::string &s) {
    if (s == "bool") {
        return Bool();
    }
    Type::Code code;
    size_t pos;
    if (s.rfind("uint", 0) == 0) {
        code = Type::UInt;
        pos = 4;
    } else if (s.rfind("int", 0) == 0) {
        code = Type::Int;
        pos = 3;
    } else if (s.rfind("float", 0) == 0) {
        code = Type::Float;
        pos = 5;
    } else if (s.rfind("bfloat", 0) == 0) {
        code = Type::BFloat;
        pos = 6;
    } else {
        return Type();
    }
    auto read_num = [&](size_t &p, int *out) {
        size_t start = p;
        while (p < s.size() && s[p] >= '0' && s[p] <= '9' && p - start < 6) {
            p++;
        }
        if (p == start || (p - start > 1 && s[start] == '0')) {
            return false;
        }
        *out = std::atoi(s.substr(start, p - start).c_str());
        return true;
    };
    int bits = 0, lanes = 1;
    if (!read_num(pos, &bits)) {
        return Type();
    }
    if (pos < s.size()) {
        if (s[pos] != 'x') {
            return Type();
        }
        pos++;
        if (!read_num(pos, &lanes) || pos != s.size()) {
            return Type();
        }
    }
    if (!valid_bits(code, bits) || lanes < 1 || lanes > Type::max_lanes) {
        return Type();
    }
    return Type(code, bits, lanes);
}

}  // namespace tally
