/** \file
 * Helpers shared by the end-to-end tests: deterministic random inputs, and compiling an app's
 * pipeline (apps/<name>/<name>.stmt) for a target. Buffers are tally::Buffer, and pipelines are
 * called through the argument binder (JITModule::call), as every caller calls them.
 */
#ifndef TALLY_TEST_E2E_E2EUTIL_H
#define TALLY_TEST_E2E_E2EUTIL_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tally/Buffer.h"
#include "tally/Compiler.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally_runtime.h"

#ifndef TALLY_APPS_DIR
#error "TALLY_APPS_DIR must name the apps/ source folder"
#endif

namespace tally_e2e {

/** The e2e tests' buffers are the library's: dense, extents[0] fastest, mins 0 unless given. */
using tally::Buffer;

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
