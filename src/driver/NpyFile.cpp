// .npy reading and writing (see NpyFile.h). The format: a 6-byte magic "\x93NUMPY", a major
// and minor version byte, a little-endian header length (2 bytes in version 1, 4 after), and a
// Python dict literal with 'descr', 'fortran_order' and 'shape', padded so that the data starts
// at a multiple of 64 bytes.

#include "driver/NpyFile.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tally/Error.h"

namespace tally {
namespace npy {

namespace {

/** The largest array read: 2^40 bytes. */
constexpr uint64_t max_bytes = uint64_t(1) << 40;

/** The contents of the file `path`. */
std::string read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    user_assert(in.good()) << path << ": error: cannot open file";
    std::ostringstream contents;
    contents << in.rdbuf();
    user_assert(!in.bad()) << path << ": error: cannot read file";
    return contents.str();
}

}  // namespace

std::string descr(const Type &t) {
    if (t.is_bool()) {
        return "|b1";
    }
    std::string kind = t.is_float() ? "f" : t.is_uint() ? "u" : "i";
    return (t.bytes() == 1 ? "|" : "<") + kind + std::to_string(t.bytes());
}

namespace {

/** A reader of the header's Python dict literal, `{'descr': '<f4', 'fortran_order': False,
 * 'shape': (3, 4), }`, then spaces and a newline: exactly the three keys, once each. */
class HeaderReader {
public:
    HeaderReader(const std::string &text, const std::string &name) : s(text), name(name) {}

    void read(std::string *descr, bool *fortran, std::vector<int64_t> *shape) {
        bool seen_descr = false, seen_fortran = false, seen_shape = false;
        expect('{', "to open the header dict");
        while (skip_space(), peek() != '}') {
            std::string key = read_string("as a header key");
            expect(':', "after the key '" + key + "'");
            if (key == "descr" && !seen_descr) {
                seen_descr = true;
                *descr = read_string("as the 'descr' value");
            } else if (key == "fortran_order" && !seen_fortran) {
                seen_fortran = true;
                *fortran = read_bool();
            } else if (key == "shape" && !seen_shape) {
                seen_shape = true;
                read_shape(shape);
            } else {
                fail("unexpected key '" + key + "' in the header (or a key given twice)");
            }
            skip_space();
            if (peek() != ',') {
                break;
            }
            pos++;
        }
        expect('}', "to close the header dict");
        while (pos < s.size() && s[pos] == ' ') {
            pos++;
        }
        if (pos + 1 != s.size() || s[pos] != '\n') {
            fail("the header does not end in spaces and a newline");
        }
        if (!seen_descr || !seen_fortran || !seen_shape) {
            fail("the header lacks one of 'descr', 'fortran_order' and 'shape'");
        }
    }

private:
    const std::string &s;
    const std::string &name;
    size_t pos = 0;

    [[noreturn]] void fail(const std::string &msg) {
        user_error << name << ": error: damaged .npy header: " << msg;
        abort();  // not reached: user_error throws
    }
    char peek() const { return pos < s.size() ? s[pos] : '\0'; }
    void skip_space() {
        while (pos < s.size() && s[pos] == ' ') {
            pos++;
        }
    }
    void expect(char c, const std::string &context) {
        skip_space();
        if (peek() != c) {
            fail(std::string("expected '") + c + "' " + context);
        }
        pos++;
    }
    std::string read_string(const char *context) {
        skip_space();
        char q = peek();
        if (q != '\'' && q != '"') {
            fail(std::string("expected a quoted string ") + context);
        }
        size_t end = s.find(q, pos + 1);
        if (end == std::string::npos) {
            fail("unterminated string");
        }
        std::string out = s.substr(pos + 1, end - pos - 1);
        pos = end + 1;
        return out;
    }
    bool read_bool() {
        skip_space();
        for (const char *word : {"True", "False"}) {
            if (s.compare(pos, std::strlen(word), word) == 0) {
                pos += std::strlen(word);
                return word[0] == 'T';
            }
        }
        fail("expected True or False as the 'fortran_order' value");
    }
    void read_shape(std::vector<int64_t> *shape) {
        expect('(', "to open the shape");
        while (skip_space(), peek() != ')') {
            size_t start = pos;
            while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
                pos++;
            }
            int64_t extent = 0;
            auto [end, ec] = std::from_chars(s.data() + start, s.data() + pos, extent);
            if (start == pos || ec != std::errc() || end != s.data() + pos || extent > INT32_MAX) {
                fail("bad extent '" + s.substr(start, std::max(pos, start + 1) - start) +
                     "' in the shape");
            }
            shape->push_back(extent);
            skip_space();
            if (peek() != ',') {
                break;
            }
            pos++;
        }
        expect(')', "to close the shape");
    }
};

}  // namespace

namespace {

/** The element type whose descr() is `d`, or an invalid Type. */
Type type_of_descr(const std::string &d) {
    std::vector<Type> all = {Bool(), Float(16), Float(32), Float(64)};
    for (int bits : {8, 16, 32, 64}) {
        all.push_back(Int(bits));
        all.push_back(UInt(bits));
    }
    for (const Type &t : all) {
        if (descr(t) == d) {
            return t;
        }
    }
    return Type();
}

/** parse() and parse_any(): the element type must be `*want`, or (null) is any and is
 * stored to `*got`. */
std::vector<int> parse_impl(const std::string &bytes, const std::string &name, const Type *want,
                            Type *got, std::vector<uint8_t> *data);

}  // namespace

std::vector<int> parse(const std::string &bytes, const std::string &name, const Type &t,
                       std::vector<uint8_t> *data) {
    Type got;
    return parse_impl(bytes, name, &t, &got, data);
}

std::vector<int> read_any(const std::string &path, Type *t, std::vector<uint8_t> *data) {
    return parse_impl(read_bytes(path), path, nullptr, t, data);
}

namespace {

std::vector<int> parse_impl(const std::string &bytes, const std::string &name, const Type *want,
                            Type *got, std::vector<uint8_t> *data) {
    user_assert(bytes.size() >= 10 && std::memcmp(bytes.data(), "\x93NUMPY", 6) == 0 &&
                bytes[6] >= 1 && bytes[6] <= 3)
        << name << ": error: not a .npy file (format 1.0 to 3.0)";
    const auto byte = [&](size_t i) { return uint32_t(uint8_t(bytes[i])); };
    size_t at = bytes[6] == 1 ? 10 : 12;
    user_assert(bytes.size() >= at) << name << ": error: truncated header";
    uint32_t hlen = byte(8) | byte(9) << 8;
    if (bytes[6] != 1) {
        hlen |= byte(10) << 16 | byte(11) << 24;
    }
    user_assert(hlen <= bytes.size() - at) << name << ": error: truncated header";
    const std::string header = bytes.substr(at, hlen);
    std::string type;
    bool fortran = false;
    std::vector<int64_t> extents;
    HeaderReader(header, name).read(&type, &fortran, &extents);
    if (want) {
        user_assert(type == descr(*want))
            << name << ": error: element type '" << type << "' does not match the pipeline's "
            << want->to_string() << " ('" << descr(*want) << "')";
    }
    const Type t = want ? *want : type_of_descr(type);
    user_assert(t.is_valid()) << name << ": error: element type '" << type
                              << "' is none of bool, int8 to int64, uint8 to uint64, float16, "
                                 "float32 and float64";
    *got = t;
    user_assert(!fortran) << name << ": error: only C-order arrays are supported";
    // The element count, checked against what the file holds before anything is allocated.
    const uint64_t available = bytes.size() - at - hlen;
    uint64_t count = 1;
    std::vector<int> shape;
    for (int64_t e : extents) {
        user_assert(e == 0 || count <= max_bytes / uint64_t(t.bytes()) / uint64_t(e))
            << name << ": error: the array is too large";
        count *= uint64_t(e);
        shape.push_back(int(e));
    }
    const uint64_t size = count * uint64_t(t.bytes());
    user_assert(available >= size) << name << ": error: truncated: the shape needs " << size
                                   << " bytes of data, the file has " << available;
    user_assert(available == size)
        << name << ": error: " << (available - size) << " bytes after the array's data";
    data->assign(bytes.begin() + std::ptrdiff_t(at + hlen), bytes.end());
    return shape;
}

}  // namespace

std::vector<int> read(const std::string &path, const Type &t, std::vector<uint8_t> *data) {
    return parse(read_bytes(path), path, t, data);
}

std::string encode(const Type &t, const std::vector<int> &shape, const void *data, size_t bytes) {
    std::ostringstream h;
    h << "{'descr': '" << descr(t) << "', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < shape.size(); i++) {
        h << shape[i] << (shape.size() == 1 || i + 1 < shape.size() ? "," : "")
          << (i + 1 < shape.size() ? " " : "");
    }
    h << "), }";
    std::string header = h.str();
    while ((10 + header.size() + 1) % 64) {
        header += ' ';
    }
    header += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += char(header.size() & 0xff);
    out += char(header.size() >> 8);
    out += header;
    out.append(static_cast<const char *>(data), bytes);
    return out;
}

void write(const std::string &path, const Type &t, const std::vector<int> &shape, const void *data,
           size_t bytes) {
    const std::string contents = encode(t, shape, data, bytes);
    std::ofstream out(path, std::ios::binary);
    user_assert(out.good()) << path << ": error: cannot write file";
    out.write(contents.data(), std::streamsize(contents.size()));
    user_assert(out.good()) << path << ": error: cannot write file";
}

void define_buffer_constant(Module &m, const std::string &spec) {
    size_t eq = spec.find('=');
    user_assert(eq != std::string::npos && eq > 0)
        << "--buffer-constant: expected NAME=FILE.npy[@X,Y,...], not '" << spec << "'";
    const std::string name = spec.substr(0, eq);
    std::string file = spec.substr(eq + 1);
    std::vector<int32_t> mins;
    size_t at = file.rfind('@');
    if (at != std::string::npos) {
        std::string text = file.substr(at + 1);
        file.resize(at);
        size_t start = 0;
        for (size_t k = 0; k <= text.size() && !text.empty(); k++) {  // `@` alone: no mins (0-D)
            if (k == text.size() || text[k] == ',') {
                const std::string part = text.substr(start, k - start);
                int64_t v = 0;
                auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
                user_assert(!part.empty() && ec == std::errc() &&
                            end == part.data() + part.size() && v >= INT32_MIN && v <= INT32_MAX)
                    << "--buffer-constant " << name << ": bad min '" << part << "' in '@" << text
                    << "'";
                mins.push_back(int32_t(v));
                start = k + 1;
            }
        }
    }
    Type t;
    std::vector<uint8_t> data;
    std::vector<int> shape = read_any(file, &t, &data);
    std::vector<int32_t> extents(shape.rbegin(), shape.rend());
    if (at == std::string::npos) {
        mins.assign(extents.size(), 0);
    }
    user_assert(mins.size() == extents.size())
        << "--buffer-constant " << name << ": " << file << " has " << extents.size()
        << " dimensions, '@' gives " << mins.size() << " mins";
    m.define_buffer_constant(name, t, std::move(mins), std::move(extents),
                             std::string(data.begin(), data.end()));
}

bool define_buffer_constants(Module &m, const std::vector<std::string> &specs, const char *tool) {
    for (const std::string &spec : specs) {
        try {
            define_buffer_constant(m, spec);
        } catch (const CompileError &e) {
            std::cerr << tool << ": error: " << e.what() << "\n";
            return false;
        }
    }
    return true;
}

}  // namespace npy
}  // namespace tally
