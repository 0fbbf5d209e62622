// libFuzzer target: the .npy reader of tally-run (src/driver/NpyFile.cpp), checked for the
// property in NpyRoundTrip.h. A violated property aborts, so libFuzzer reports it and keeps the
// input; crashes, sanitizer reports, leaks, hangs and allocations over -malloc_limit_mb are
// reported by libFuzzer itself. Run by test/fuzz/run_fuzz.sh.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "NpyRoundTrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string problem = tally_fuzz::check_npy_round_trip(data, size);
    if (!problem.empty()) {
        std::fprintf(stderr, "fuzz_npy: %s\n", problem.c_str());
        std::fflush(stderr);
        std::abort();
    }
    return 0;
}
