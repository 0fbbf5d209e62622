// Replays every input kept in test/fuzz/regressions/ (inputs the parser fuzzer found, and hand-made
// edge cases) through the fuzzer's property in the main build: each parses or is rejected with a
// CompileError, and what parses prints back to the same text (test/fuzz/ParserRoundTrip.h).
// Crashes and sanitizer reports fail the unit_tests binary itself (and the ASan job).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../fuzz/ParserRoundTrip.h"

namespace tally {
namespace {

namespace fs = std::filesystem;

// TALLY_CORPUS_DIR is <repo>/test/corpus/halide14.
const fs::path regressions_dir = fs::path(TALLY_CORPUS_DIR) / ".." / ".." / "fuzz" / "regressions";

std::vector<fs::path> regression_files() {
    std::vector<fs::path> out;
    for (const fs::directory_entry &e : fs::directory_iterator(regressions_dir)) {
        if (e.is_regular_file() && e.path().extension() != ".md") {
            out.push_back(e.path());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

TEST(FuzzRegression, EveryKeptInputParsesOrIsACompileErrorAndRoundTrips) {
    ASSERT_TRUE(fs::is_directory(regressions_dir)) << regressions_dir;
    std::vector<fs::path> files = regression_files();
    EXPECT_FALSE(files.empty());
    for (const fs::path &f : files) {
        std::ifstream in(f, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        EXPECT_EQ(tally_fuzz::check_parser_round_trip(ss.str()), "") << f.filename();
    }
}

}  // namespace
}  // namespace tally
