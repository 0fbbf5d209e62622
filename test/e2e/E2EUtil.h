/** \file
 * Helpers shared by the end-to-end tests: dense images wrapped in halide_buffer_t, deterministic
 * random inputs, and compiling an app's pipeline (apps/<name>/<name>.stmt) for a target.
 */
#ifndef TALLY_TEST_E2E_E2EUTIL_H
#define TALLY_TEST_E2E_E2EUTIL_H

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/Compiler.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"

#ifndef TALLY_APPS_DIR
#error "TALLY_APPS_DIR must name the apps/ source folder"
#endif

namespace tally_e2e {

template <typename T>
halide_type_t type_of() {
    halide_type_t t;
    t.code = std::is_floating_point<T>::value ? halide_type_float
             : std::is_signed<T>::value       ? halide_type_int
                                              : halide_type_uint;
    t.bits = uint8_t(sizeof(T) * 8);
    t.lanes = 1;
    return t;
}

/** A dense image: extents[0] is the fastest dimension, strides are the running products, all
 * mins are 0 (the apps' buffer convention). Not copyable: the buffer points into the object. */
template <typename T>
class Image {
public:
    explicit Image(const std::vector<int> &extents) {
        size_t n = 1;
        int32_t stride = 1;
        for (int e : extents) {
            halide_dimension_t d;
            d.min = 0;
            d.extent = e;
            d.stride = stride;
            d.flags = 0;
            dims.push_back(d);
            stride *= e;
            n *= size_t(e);
        }
        data.resize(n);
        buf.device = 0;
        buf.device_interface = nullptr;
        buf.host = reinterpret_cast<uint8_t *>(data.data());
        buf.flags = 0;
        buf.type = type_of<T>();
        buf.dimensions = int32_t(dims.size());
        buf.dim = dims.data();
        buf.padding = nullptr;
    }
    Image(const Image &) = delete;
    Image &operator=(const Image &) = delete;
    /** Releases the device copy a pipeline gave the buffer (as Halide::Buffer does): the runtime
     * never frees a caller's buffer by itself. */
    ~Image() {
        if (buf.device_interface) {
            halide_device_free(nullptr, &buf);
        }
    }

    halide_buffer_t *raw() { return &buf; }
    T *ptr() { return data.data(); }
    const T *ptr() const { return data.data(); }
    size_t size() const { return data.size(); }
    T &operator[](size_t i) { return data[i]; }
    const T &operator[](size_t i) const { return data[i]; }

    std::vector<T> data;

private:
    std::vector<halide_dimension_t> dims;
    halide_buffer_t buf;
};

/** A small deterministic generator (64-bit LCG, high bits out): the same seed gives the same
 * inputs on every platform and standard library. */
class Rng {
public:
    explicit Rng(uint64_t seed) : state(seed * 6364136223846793005ull + 1442695040888963407ull) {}
    uint32_t next() {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return uint32_t(state >> 32);
    }
    /** Uniform in [0, n). */
    uint32_t below(uint32_t n) { return uint32_t((uint64_t(next()) * n) >> 32); }
    /** Uniform in [lo, hi). */
    float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 8) / 16777216.0f; }

private:
    uint64_t state;
};

/** apps/<name>/<name>.stmt in the source tree. */
inline std::string app_stmt_path(const std::string &name) {
    return std::string(TALLY_APPS_DIR) + "/" + name + "/" + name + ".stmt";
}

/** Parses an app's pipeline. */
inline tally::Module parse_app(const std::string &name) {
    return tally::parse_module_file(app_stmt_path(name));
}

/** Lowers a module for `target` ("host", "host-profile", ...) and JIT-compiles it. */
inline std::unique_ptr<tally::JITModule> compile_module(const tally::Module &m,
                                                        const std::string &target) {
    return tally::compile_jit(tally::lower(m, tally::Target::parse(target)));
}

/** Parses, lowers and JIT-compiles an app's pipeline. */
inline std::unique_ptr<tally::JITModule> compile_app(const std::string &name,
                                                     const std::string &target) {
    return compile_module(parse_app(name), target);
}

}  // namespace tally_e2e

#endif  // TALLY_TEST_E2E_E2EUTIL_H
