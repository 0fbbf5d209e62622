// The Tally side of the Halide bridge: lowering, compiling and running a translated module.
// Kept apart from Bridge.cpp because Halide's HalideRuntime.h and Tally's tally_runtime.h both
// define halide_buffer_t and its kin (the same layout, by design): a file may include one of the
// two, so this header includes neither and names the buffer by its tag alone.
#ifndef TALLY_HALIDE_RUNNER_H
#define TALLY_HALIDE_RUNNER_H

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tally/Module.h"

struct halide_buffer_t;

namespace tally {
namespace halide {
namespace detail {

/** One argument value (tally::halide::Value, read by Bridge.cpp). */
struct RunValue {
    enum Kind : uint8_t { Buffer, Bool, Int, UInt, Float } kind = Int;
    halide_buffer_t *buffer = nullptr;
    int64_t i = 0;
    uint64_t u = 0;
    double f = 0;
};

/** A translated module lowered for its target and JIT-compiled. */
class Runner {
public:
    Runner(Module translated, int opt_level, std::vector<std::string> extern_libraries);
    ~Runner();
    Runner(const Runner &) = delete;
    Runner &operator=(const Runner &) = delete;

    /** tally::halide::Pipeline::run. */
    int run(const std::vector<RunValue> &args) const;
    const Module &translated() const;
    const Module &lowered() const;

private:
    struct State;
    std::unique_ptr<State> s;
};

/** Lowers `translated` and writes `<prefix>.o` and `<prefix>.h`. */
void write_files(const Module &translated, const std::string &prefix, int opt_level);

/** tally::halide::compile_multitarget_wrapper. */
void write_multitarget_wrapper(const Module &translated, const std::string &name,
                               const std::vector<std::pair<std::string, std::string>> &variants,
                               const std::string &prefix);

/** tally::halide::report. */
std::string report(bool json);

}  // namespace detail
}  // namespace halide
}  // namespace tally

#endif  // TALLY_HALIDE_RUNNER_H
