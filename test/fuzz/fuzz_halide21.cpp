// libFuzzer target: the Halide 21 dialect of the IR text (what Halide 21 prints: its spellings of
// intrinsics, vector reductions, tags and runtime calls, and `dialect=halide21` headers), checked
// for both IR properties in turn: the parser's (ParserRoundTrip.h: parse or CompileError, and
// what parses prints back to the same text and an equal module) and the lowering's
// (LoweringRoundTrip.h: what verifies lowers for every target of lowering_targets, or is rejected
// with a CompileError, and the lowered module round-trips too). Its seeds are cut from the
// Halide 21 listings (test/conformance/halide21: whole modules up to the length limit and every
// block of the longer ones, stmt_blocks.py), where fuzz_parser's and fuzz_lowering's are Halide
// 14's; run_fuzz.sh seeds it. A violated property aborts, so libFuzzer reports it and keeps the
// input.
//
// Built only from src/ir, src/text and passes (no LLVM), by test/fuzz/CMakeLists.txt with
// clang-19 and -fsanitize=fuzzer,address,undefined.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "LargeStackWorker.h"
#include "LoweringRoundTrip.h"
#include "ParserRoundTrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    const std::string problem = tally_fuzz::LargeStackWorker::check(size, [&]() {
        std::string p = tally_fuzz::check_parser_round_trip(text);
        return p.empty() ? tally_fuzz::check_lowering_round_trip(text) : "parser property: " + p;
    });
    if (!problem.empty()) {
        std::fprintf(stderr, "fuzz_halide21: %s\n", problem.c_str());
        std::fflush(stderr);
        std::abort();
    }
    return 0;
}
