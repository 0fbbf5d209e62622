// .npy reading and writing (see NpyFile.h). The format: a 6-byte magic "\x93NUMPY", a major
// and minor version byte, a little-endian header length (2 bytes in version 1, 4 after), and a
// Python dict literal with 'descr', 'fortran_order' and 'shape', padded so that the data starts
// at a multiple of 64 bytes.

#include "driver/NpyFile.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tally/Error.h"

namespace tally {
namespace npy {

namespace {

/** The largest array read: 2^40 bytes. */
constexpr uint64_t max_bytes = uint64_t(1) << 40;

}  // namespace

std::string descr(const Type &t) {
    if (t.is_bool()) {
        return "|b1";
    }
    std::string kind = t.is_float() ? "f" : t.is_uint() ? "u" : "i";
    return (t.bytes() == 1 ? "|" : "<") + kind + std::to_string(t.bytes());
}

std::vector<int> read(const std::string &path, const Type &t, std::vector<uint8_t> *data) {
    std::ifstream in(path, std::ios::binary);
    user_assert(in.good()) << path << ": error: cannot open file";
    char magic[8];
    in.read(magic, 8);
    user_assert(in.gcount() == 8 && std::memcmp(magic, "\x93NUMPY", 6) == 0 && magic[6] >= 1 &&
                magic[6] <= 3)
        << path << ": error: not a .npy file (format 1.0 to 3.0)";
    uint32_t hlen = 0;
    if (magic[6] == 1) {
        uint8_t h[2] = {0, 0};
        in.read(reinterpret_cast<char *>(h), 2);
        hlen = uint32_t(h[0]) | uint32_t(h[1]) << 8;
    } else {
        uint8_t h[4] = {0, 0, 0, 0};
        in.read(reinterpret_cast<char *>(h), 4);
        hlen = uint32_t(h[0]) | uint32_t(h[1]) << 8 | uint32_t(h[2]) << 16 | uint32_t(h[3]) << 24;
    }
    // numpy writes headers of a few hundred bytes; a larger claim is a damaged file.
    user_assert(in.good() && hlen <= (1u << 20)) << path << ": error: damaged .npy header length";
    std::string header(hlen, ' ');
    in.read(&header[0], hlen);
    user_assert(in.gcount() == std::streamsize(hlen)) << path << ": error: truncated header";
    user_assert(header.find("'" + descr(t) + "'") != std::string::npos)
        << path << ": error: element type does not match the pipeline's " << t.to_string()
        << " (header: " << header << ")";
    user_assert(header.find("'fortran_order': False") != std::string::npos)
        << path << ": error: only C-order arrays are supported";
    size_t key = header.find("'shape':");
    size_t lp = key == std::string::npos ? key : header.find('(', key);
    size_t rp = lp == std::string::npos ? lp : header.find(')', lp);
    user_assert(rp != std::string::npos) << path << ": error: the header has no shape";
    std::vector<int> shape;
    std::istringstream s(header.substr(lp + 1, rp - lp - 1));
    std::string part;
    uint64_t count = 1;
    while (std::getline(s, part, ',')) {
        size_t first = part.find_first_not_of(' '), last = part.find_last_not_of(' ');
        if (first == std::string::npos) {
            continue;
        }
        int extent = -1;
        const char *b = part.data() + first, *e = part.data() + last + 1;
        auto [end, ec] = std::from_chars(b, e, extent);
        user_assert(ec == std::errc() && end == e && extent >= 0)
            << path << ": error: bad extent '" << std::string(b, e) << "' in the shape";
        shape.push_back(extent);
        count *= uint64_t(extent);
        user_assert(count <= max_bytes / uint64_t(t.bytes()))
            << path << ": error: the array is too large";
    }
    data->resize(count * t.bytes());
    in.read(reinterpret_cast<char *>(data->data()), data->size());
    user_assert(in.gcount() == std::streamsize(data->size())) << path << ": error: truncated";
    return shape;
}

void write(const std::string &path, const Type &t, const std::vector<int> &shape, const void *data,
           size_t bytes) {
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
    std::ofstream out(path, std::ios::binary);
    user_assert(out.good()) << path << ": error: cannot write file";
    out.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = header.size();
    out.write(reinterpret_cast<const char *>(&len), 2);
    out << header;
    out.write(static_cast<const char *>(data), bytes);
    user_assert(out.good()) << path << ": error: cannot write file";
}

}  // namespace npy
}  // namespace tally
