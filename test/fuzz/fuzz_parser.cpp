// libFuzzer target: the IR text front end (lexer, parser), the verifier and the printer, checked
// for the property in ParserRoundTrip.h (parse or CompileError; what parses prints back to the
// same text). A violated property aborts, so libFuzzer reports it and keeps the input; crashes,
// sanitizer reports, leaks and hangs (-timeout) are reported by libFuzzer itself.
//
// Built only from src/ir and src/text (no LLVM), by test/fuzz/CMakeLists.txt with clang-19 and
// -fsanitize=fuzzer,address,undefined; run by test/fuzz/run_fuzz.sh.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "LargeStackWorker.h"
#include "ParserRoundTrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    const std::string problem = tally_fuzz::LargeStackWorker::check(
        size, [&]() { return tally_fuzz::check_parser_round_trip(text); });
    if (!problem.empty()) {
        std::fprintf(stderr, "fuzz_parser: %s\n", problem.c_str());
        std::fflush(stderr);
        std::abort();
    }
    return 0;
}
