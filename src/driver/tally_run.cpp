// tally-run: JIT-compile a pipeline and run it, so that one command profiles a pipeline.
//
//   tally-run PIPELINE.stmt -target T [--size name=WxH...] [--input name=FILE.npy]
//             [--output name=FILE.npy] [--scalar name=VALUE] [--runs N] [--seed S]
//
// Buffers default to 64 per dimension (--size sets them; an --input file sets its buffer's
// shape) and are filled with seeded random data. With a profiling target, the runtime prints
// its report when the process exits.

#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"

using namespace tally;

namespace {

struct HostBuffer {
    std::vector<uint8_t> data;
    std::vector<halide_dimension_t> dims;
    halide_buffer_t buf{};
};

std::string npy_descr(const Type &t) {
    std::string kind = t.is_float() ? "f" : t.is_uint() ? "u" : "i";
    if (t.is_bool()) {
        return "|b1";
    }
    return (t.bytes() == 1 ? "|" : "<") + kind + std::to_string(t.bytes());
}

/** Reads a .npy file (C order, little-endian); returns the shape (numpy order). */
std::vector<int> read_npy(const std::string &path, const Type &t, std::vector<uint8_t> *data) {
    std::ifstream in(path, std::ios::binary);
    user_assert(in.good()) << path << ": error: cannot open file";
    char magic[8];
    in.read(magic, 8);
    user_assert(in.good() && std::memcmp(magic, "\x93NUMPY", 6) == 0)
        << path << ": error: not a .npy file";
    uint32_t hlen = 0;
    if (magic[6] == 1) {
        uint16_t h;
        in.read(reinterpret_cast<char *>(&h), 2);
        hlen = h;
    } else {
        in.read(reinterpret_cast<char *>(&hlen), 4);
    }
    std::string header(hlen, ' ');
    in.read(&header[0], hlen);
    user_assert(header.find("'" + npy_descr(t) + "'") != std::string::npos)
        << path << ": error: element type does not match the pipeline's " << t.to_string()
        << " (header: " << header << ")";
    user_assert(header.find("'fortran_order': False") != std::string::npos)
        << path << ": error: only C-order arrays are supported";
    size_t lp = header.find('('), rp = header.find(')');
    std::vector<int> shape;
    std::istringstream s(header.substr(lp + 1, rp - lp - 1));
    std::string part;
    size_t count = 1;
    while (std::getline(s, part, ',')) {
        if (part.find_first_not_of(" ") != std::string::npos) {
            shape.push_back(std::stoi(part));
            count *= shape.back();
        }
    }
    data->resize(count * t.bytes());
    in.read(reinterpret_cast<char *>(data->data()), data->size());
    user_assert(in.gcount() == std::streamsize(data->size())) << path << ": error: truncated";
    return shape;
}

void write_npy(const std::string &path, const Type &t, const HostBuffer &b) {
    std::ostringstream h;
    h << "{'descr': '" << npy_descr(t) << "', 'fortran_order': False, 'shape': (";
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
    user_assert(out.good()) << path << ": error: cannot write file";
    out.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = header.size();
    out.write(reinterpret_cast<const char *>(&len), 2);
    out << header;
    out.write(reinterpret_cast<const char *>(b.data.data()), b.data.size());
}

std::pair<std::string, std::string> split_eq(const std::string &s, const char *flag) {
    size_t eq = s.find('=');
    if (eq == std::string::npos) {
        std::cerr << "tally-run: error: " << flag << " expects name=value, got '" << s << "'\n";
        std::exit(2);
    }
    return {s.substr(0, eq), s.substr(eq + 1)};
}

}  // namespace

int main(int argc, char **argv) {
    std::string input, target = "host";
    std::map<std::string, std::vector<int>> sizes;
    std::map<std::string, std::string> inputs, outputs, scalars;
    int runs = 1;
    unsigned seed = 1;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "tally-run: error: " << a << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "-target" || a == "--target") {
            target = value();
        } else if (a == "--size") {
            auto kv = split_eq(value(), "--size");
            std::vector<int> dims;
            std::istringstream s(kv.second);
            std::string d;
            while (std::getline(s, d, 'x')) {
                dims.push_back(std::atoi(d.c_str()));
            }
            sizes[kv.first] = dims;
        } else if (a == "--input") {
            auto kv = split_eq(value(), "--input");
            inputs[kv.first] = kv.second;
        } else if (a == "--output") {
            auto kv = split_eq(value(), "--output");
            outputs[kv.first] = kv.second;
        } else if (a == "--scalar") {
            auto kv = split_eq(value(), "--scalar");
            scalars[kv.first] = kv.second;
        } else if (a == "--runs") {
            runs = std::atoi(value().c_str());
        } else if (a == "--seed") {
            seed = unsigned(std::atoi(value().c_str()));
        } else if (a == "-h" || a == "--help") {
            std::cout << "usage: tally-run PIPELINE.stmt -target T [--size name=WxH...] "
                         "[--input name=FILE.npy] [--output name=FILE.npy] "
                         "[--scalar name=VALUE] [--runs N] [--seed S]\n";
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            std::cerr << "tally-run: error: unknown option '" << a << "'\n";
            return 2;
        } else {
            input = a;
        }
    }
    if (input.empty()) {
        std::cerr << "tally-run: error: no pipeline given\n";
        return 2;
    }
    try {
        Module m = lower(parse_module_file(input), Target::parse(target));
        std::unique_ptr<JITModule> jit = compile_jit(m);
        const LoweredFunc &f = jit->entry();
        std::mt19937 rng(seed);
        std::vector<HostBuffer> bufs(f.args.size());
        std::vector<std::vector<uint8_t>> scalar_storage(f.args.size());
        std::vector<void *> args(f.args.size());
        for (size_t i = 0; i < f.args.size(); i++) {
            const Argument &a = f.args[i];
            if (!a.is_buffer()) {
                Type t = a.type.is_valid() ? a.type : Int(32);
                std::vector<uint8_t> &st = scalar_storage[i];
                st.assign(8, 0);
                std::string v = scalars.count(a.name) ? scalars[a.name] : "1";
                if (t.is_float()) {
                    double d = std::atof(v.c_str());
                    if (t.bits() == 32) {
                        float x = float(d);
                        std::memcpy(st.data(), &x, 4);
                    } else {
                        std::memcpy(st.data(), &d, 8);
                    }
                } else {
                    int64_t x = std::atoll(v.c_str());
                    std::memcpy(st.data(), &x, 8);  // little-endian: low bytes first
                }
                args[i] = st.data();
                continue;
            }
            user_assert(a.type.is_valid())
                << "buffer argument '" << a.name << "' has no element type";
            HostBuffer &b = bufs[i];
            std::vector<int> shape;  // Halide order: dim 0 innermost
            if (inputs.count(a.name)) {
                std::vector<int> np = read_npy(inputs[a.name], a.type, &b.data);
                shape.assign(np.rbegin(), np.rend());
            } else {
                int dims = a.dimensions < 0 ? 1 : a.dimensions;
                shape = sizes.count(a.name) ? sizes[a.name] : std::vector<int>(dims, 64);
                user_assert(int(shape.size()) == dims)
                    << "--size for '" << a.name << "' has " << shape.size()
                    << " dimensions, the pipeline's buffer has " << dims;
                size_t count = 1;
                for (int e : shape) {
                    count *= size_t(e);
                }
                b.data.resize(count * a.type.bytes());
                for (size_t k = 0; k < count; k++) {
                    uint8_t *p = b.data.data() + k * a.type.bytes();
                    if (a.type.is_float() && a.type.bits() == 32) {
                        float x = std::uniform_real_distribution<float>(0, 1)(rng);
                        std::memcpy(p, &x, 4);
                    } else if (a.type.is_float() && a.type.bits() == 64) {
                        double x = std::uniform_real_distribution<double>(0, 1)(rng);
                        std::memcpy(p, &x, 8);
                    } else {
                        uint64_t x = rng() & (a.type.bits() >= 16 ? 0xfff : 0x7f);
                        std::memcpy(p, &x, a.type.bytes());
                    }
                }
            }
            int stride = 1;
            for (int e : shape) {
                b.dims.push_back({0, e, stride, 0});
                stride *= e;
            }
            b.buf.host = b.data.data();
            b.buf.type = {uint8_t(a.type.code()), uint8_t(a.type.bits()), 1};
            b.buf.dimensions = int(b.dims.size());
            b.buf.dim = b.dims.data();
            b.buf.flags = halide_buffer_flag_host_dirty;
            args[i] = &b.buf;
        }
        for (int r = 0; r < runs; r++) {
            int rc = jit->run(args.data());
            if (rc != 0) {
                std::cerr << "tally-run: pipeline '" << f.name << "' failed with error " << rc
                          << " (" << tally_error_code_name(rc) << ") in run " << r + 1 << "\n";
                return 1;
            }
        }
        for (size_t i = 0; i < f.args.size(); i++) {
            if (f.args[i].is_buffer() && outputs.count(f.args[i].name)) {
                int rc = halide_copy_to_host(nullptr, &bufs[i].buf);
                user_assert(rc == 0) << "copy of '" << f.args[i].name << "' to the host failed";
                write_npy(outputs[f.args[i].name], f.args[i].type, bufs[i]);
            }
        }
    } catch (const CompileError &e) {
        std::cerr << e.what() << "\n";
        return 1;
    } catch (const InternalError &e) {
        std::cerr << "tally-run: internal error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
