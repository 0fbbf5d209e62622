// The Halide 14 corpus: every file parses, verifies, prints, and re-parses to an equal module,
// and printing is a fixed point. Also what parsing must keep from each file: the module name and
// target, kernel source blobs byte for byte, argument types, and the names of bare statements.

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/Parser.h"
#include "tally/Verifier.h"

namespace tally {
namespace {

namespace fs = std::filesystem;

const fs::path corpus_dir = TALLY_CORPUS_DIR;

std::vector<std::string> stmt_files_in(const fs::path &dir) {
    std::vector<std::string> out;
    if (!fs::is_directory(dir)) {
        return out;
    }
    for (const fs::directory_entry &e : fs::directory_iterator(dir)) {
        if (e.is_regular_file() && e.path().extension() == ".stmt") {
            out.push_back(fs::relative(e.path(), corpus_dir).string());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

/** Module files (with a `module` header), relative to the corpus folder. */
std::vector<std::string> module_files() {
    return stmt_files_in(corpus_dir);
}
/** Bare statements as Halide hands them to custom lowering passes. */
std::vector<std::string> bare_files() {
    return stmt_files_in(corpus_dir / "preoffload");
}

std::vector<std::string> all_files() {
    std::vector<std::string> all = module_files(), bare = bare_files();
    all.insert(all.end(), bare.begin(), bare.end());
    return all;
}

std::string read_file(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/** `name=` and `target=` of a module file's first line. */
void read_header(const std::string &text, std::string *name, std::string *target) {
    std::string line = text.substr(0, text.find('\n'));
    size_t n = line.find("name="), c = line.find(", target=");
    ASSERT_NE(n, std::string::npos) << line;
    ASSERT_NE(c, std::string::npos) << line;
    *name = line.substr(n + 5, c - n - 5);
    *target = line.substr(c + 9);
}

// ---------------------------------------------------------------------------------------------

TEST(Corpus, HoldsNineteenModulesAndFourteenBareStatements) {
    EXPECT_EQ(module_files().size(), 19u);
    EXPECT_EQ(bare_files().size(), 14u);
}

/** One instance per corpus file. */
class CorpusFile : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusFile, ParsesVerifiesPrintsAndReparsesToAnEqualModule) {
    const fs::path path = corpus_dir / GetParam();
    Module m;
    ASSERT_NO_THROW(m = parse_module_file(path.string()));
    ASSERT_FALSE(m.functions.empty());
    EXPECT_NO_THROW(verify(m));

    std::string printed = to_string(m);
    Module again;
    ASSERT_NO_THROW(again = parse_module(printed, "printed.stmt")) << printed;
    std::string why;
    EXPECT_TRUE(equal(m, again, &why)) << why;
    EXPECT_NO_THROW(verify(again));
    EXPECT_EQ(to_string(again), printed) << "printing is not a fixed point";
}

TEST_P(CorpusFile, ParsingIsDeterministic) {
    const fs::path path = corpus_dir / GetParam();
    EXPECT_EQ(to_string(parse_module_file(path.string())),
              to_string(parse_module_file(path.string())));
}

std::string test_name(const ::testing::TestParamInfo<std::string> &info) {
    std::string n;
    for (char c : info.param) {
        n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    }
    return n;
}

INSTANTIATE_TEST_SUITE_P(Halide14, CorpusFile, ::testing::ValuesIn(all_files()), test_name);

// ---------------------------------------------------------------------------------------------

TEST(Corpus, ModuleFilesKeepTheirNameAndTarget) {
    Module m = parse_module_file((corpus_dir / "blur3x3.profile.stmt").string());
    EXPECT_EQ(m.name, "blur_y");
    EXPECT_EQ(m.target.to_string(), "x86-64-linux-avx-avx2-profile-sse41");
    EXPECT_FALSE(m.target.host);
    EXPECT_EQ(m.target.arch, Target::X86);
    EXPECT_EQ(m.target.bits, 64);
    EXPECT_EQ(m.target.os, Target::Linux);
    EXPECT_TRUE(m.target.profiling());

    for (const std::string &file : module_files()) {
        std::string text = read_file(corpus_dir / file);
        std::string name, target;
        read_header(text, &name, &target);
        Module mod = parse_module(text, file);
        EXPECT_EQ(mod.name, name) << file;
        EXPECT_EQ(mod.target.to_string(), target) << file;
        EXPECT_NE(mod.find_function(name), nullptr) << file << ": the pipeline function";
    }
}

TEST(Corpus, KernelSourceBlobsArePreservedByteForByte) {
    const fs::path path = corpus_dir / "gpu_gpu_cpu.cuda.stmt";
    std::string text = read_file(path);
    const std::string open = "buffer cuda_gpu_source_kernels = {";
    size_t start = text.find(open);
    ASSERT_NE(start, std::string::npos);
    start += open.size();
    size_t nul = text.find('\0', start);
    ASSERT_NE(nul, std::string::npos);
    const std::string expected = text.substr(start, nul + 1 - start);

    Module m = parse_module(text, path.string());
    const BufferConstant *src = nullptr;
    for (const BufferConstant &b : m.buffers) {
        if (b.name == "cuda_gpu_source_kernels") {
            src = &b;
        }
    }
    ASSERT_NE(src, nullptr);
    EXPECT_FALSE(src->opaque);
    ASSERT_FALSE(src->bytes.empty());
    EXPECT_EQ(src->bytes.back(), '\0');
    EXPECT_EQ(src->bytes, expected);
    EXPECT_GT(src->bytes.size(), 1000u) << "the PTX itself";
    EXPECT_THAT(src->bytes, ::testing::HasSubstr(".entry"));

    // The `{...}` buffer stays opaque.
    bool saw_opaque = false;
    for (const BufferConstant &b : m.buffers) {
        if (b.name == "cuda_buf") {
            saw_opaque = b.opaque && b.bytes.empty();
        }
    }
    EXPECT_TRUE(saw_opaque);

    // And the bytes survive printing and re-parsing.
    Module again = parse_module(to_string(m), "printed.stmt");
    ASSERT_EQ(again.buffers.size(), m.buffers.size());
    for (const BufferConstant &b : again.buffers) {
        if (b.name == "cuda_gpu_source_kernels") {
            EXPECT_EQ(b.bytes, expected);
        }
    }
}

TEST(Corpus, ArgumentTypesAreInferredFromTheBody) {
    Module m = parse_module_file((corpus_dir / "blur3x3.profile.stmt").string());
    const LoweredFunc *f = m.find_function("blur_y");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->linkage, LinkageType::ExternalPlusMetadata);
    ASSERT_EQ(f->args.size(), 2u);
    const Argument &input = f->args[0];
    EXPECT_EQ(input.name, "input");
    EXPECT_TRUE(input.is_buffer());
    EXPECT_EQ(input.type, UInt(16));
    EXPECT_EQ(input.dimensions, 2);
    EXPECT_EQ(f->args[1].name, "blur_y");
    EXPECT_TRUE(f->args[1].is_buffer());
    EXPECT_EQ(f->args[1].type, UInt(16));

    // The closure keeps its scalar arguments, `__user_context` as a handle.
    const LoweredFunc *task = m.find_function("blur_y_par_for_blur_y_s0_y_y");
    ASSERT_NE(task, nullptr);
    ASSERT_EQ(task->args.size(), 3u);
    EXPECT_EQ(task->args[0].name, "__user_context");
    EXPECT_TRUE(task->args[0].type.is_handle());
    EXPECT_FALSE(task->args[1].is_buffer());
    EXPECT_EQ(task->args[1].type, Int(32));

    Module mandel = parse_module_file((corpus_dir / "mandelbrot.host.stmt").string());
    const LoweredFunc *mf = mandel.find_function("mandelbrot");
    ASSERT_NE(mf, nullptr);
    bool saw_float_scalar = false;
    for (const Argument &a : mf->args) {
        if (!a.is_buffer() && a.type == Float(32)) {
            saw_float_scalar = true;
        }
        if (a.name == "mandelbrot") {
            EXPECT_TRUE(a.is_buffer());
            EXPECT_EQ(a.type, UInt(8));
            EXPECT_EQ(a.dimensions, 2);
        }
    }
    EXPECT_TRUE(saw_float_scalar) << "mandelbrot takes float32 parameters";
}

TEST(Corpus, BareStatementsAreNamedAfterTheirLastOutermostProducer) {
    Module blur = parse_module_file((corpus_dir / "preoffload/blur3x3.host.stmt").string());
    EXPECT_EQ(blur.name, "blur_y");
    EXPECT_EQ(blur.target.to_string(), "host");
    ASSERT_EQ(blur.functions.size(), 1u);
    EXPECT_EQ(blur.functions[0].name, "blur_y");

    // Each bare file names the same pipeline as the module Halide printed for that target.
    for (const std::string &file : bare_files()) {
        std::string base = fs::path(file).filename().string();
        std::string name, target;
        read_header(read_file(corpus_dir / base), &name, &target);
        Module m = parse_module_file((corpus_dir / file).string());
        EXPECT_EQ(m.name, name) << file;
        ASSERT_EQ(m.functions.size(), 1u) << file;
        EXPECT_EQ(m.functions[0].name, name) << file;
        EXPECT_TRUE(m.kernels.empty()) << file;
        EXPECT_TRUE(m.buffers.empty()) << file;
    }

    // Nested producers do not count; the last outermost one does.
    Module m = parse_module("produce a {\n"
                            "  produce inner {\n"
                            "    f(1)\n"
                            "  }\n"
                            "}\n"
                            "produce b {\n"
                            "  produce inner2 {\n"
                            "    f(2)\n"
                            "  }\n"
                            "}\n");
    EXPECT_EQ(m.name, "b");
    EXPECT_EQ(parse_module("f(1)\n").name, "main") << "no producer at all";
}

TEST(Corpus, BareGpuStatementsKeepTheirGpuLoops) {
    Module m = parse_module_file((corpus_dir / "preoffload/gpu_gpu_cpu.cuda.stmt").string());
    std::string text = to_string(m);
    EXPECT_THAT(text, ::testing::HasSubstr("gpu_block<CUDA>"));
    EXPECT_THAT(text, ::testing::HasSubstr("gpu_thread<CUDA>"));
    EXPECT_THAT(text, ::testing::HasSubstr("halide_copy_to_device"));
}

}  // namespace
}  // namespace tally
