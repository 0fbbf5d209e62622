// Replays every input kept in test/fuzz/regressions/ (inputs the fuzzers found, and hand-made
// edge cases) through both IR fuzzers' properties in the main build: each parses or is rejected
// with a CompileError, and what parses prints back to the same text and an equal module
// (test/fuzz/ParserRoundTrip.h); what verifies lowers for every target kind or is rejected, and
// the lowered module verifies and reads back equal (test/fuzz/LoweringRoundTrip.h).
// Crashes and sanitizer reports fail the unit_tests binary itself (and the ASan job).

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../fuzz/LoweringRoundTrip.h"
#include "../fuzz/NpyRoundTrip.h"
#include "../fuzz/ParserRoundTrip.h"

namespace tally {
namespace {

namespace fs = std::filesystem;

// TALLY_CORPUS_DIR is <repo>/test/corpus/halide14.
const fs::path regressions_dir = fs::path(TALLY_CORPUS_DIR) / ".." / ".." / "fuzz" / "regressions";

std::vector<fs::path> regression_files(const fs::path &dir = regressions_dir) {
    std::vector<fs::path> out;
    if (!fs::is_directory(dir)) {
        return out;
    }
    for (const fs::directory_entry &e : fs::directory_iterator(dir)) {
        if (e.is_regular_file() && e.path().extension() != ".md") {
            out.push_back(e.path());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string read_all(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(FuzzRegression, TheFolderHasInputs) {
    ASSERT_TRUE(fs::is_directory(regressions_dir)) << regressions_dir;
    EXPECT_FALSE(regression_files().empty());
}

// Two tests per kept input, named after the file (e.g. FuzzRegression/Kept.Input/deep_parens and
// FuzzRegression/Kept.Lowering/deep_parens).
class Kept : public ::testing::TestWithParam<fs::path> {};

TEST_P(Kept, Input) {
    EXPECT_EQ(tally_fuzz::check_parser_round_trip(read_all(GetParam())), "");
}

TEST_P(Kept, Lowering) {
    EXPECT_EQ(tally_fuzz::check_lowering_round_trip(read_all(GetParam())), "");
}

std::string test_name(const ::testing::TestParamInfo<fs::path> &info) {
    std::string name = info.param.stem().string();
    for (char &c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) {
            c = '_';
        }
    }
    return name;
}

INSTANTIATE_TEST_SUITE_P(FuzzRegression, Kept, ::testing::ValuesIn(regression_files()), test_name);

// The .npy reader's kept inputs (test/fuzz/regressions/npy/, first byte: the element type, see
// NpyRoundTrip.h) are all damaged files: each holds the fuzzer's property and is rejected.
class KeptNpy : public ::testing::TestWithParam<fs::path> {};

TEST_P(KeptNpy, Input) {
    const std::string bytes = read_all(GetParam());
    ASSERT_FALSE(bytes.empty());
    const auto *data = reinterpret_cast<const uint8_t *>(bytes.data());
    EXPECT_EQ(tally_fuzz::check_npy_round_trip(data, bytes.size()), "");
    for (const Type &t : {Int(32), UInt(8), Float(32)}) {
        SCOPED_TRACE(t.to_string());
        std::vector<uint8_t> values;
        try {
            npy::parse(bytes.substr(1), "in.npy", t, &values);
            ADD_FAILURE() << "a damaged file was read";
        } catch (const CompileError &e) {
            EXPECT_EQ(std::string(e.what()).rfind("in.npy: error: ", 0), 0u) << e.what();
        }
    }
}

TEST(FuzzRegression, TheNpyFolderHasInputs) {
    EXPECT_GE(regression_files(regressions_dir / "npy").size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(FuzzRegression, KeptNpy,
                         ::testing::ValuesIn(regression_files(regressions_dir / "npy")), test_name);

}  // namespace
}  // namespace tally
