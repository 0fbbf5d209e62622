// Every PTX the CUDA back end generates assembles with the CUDA toolkit's ptxas: each kernel as
// the kernel table embeds it (compile_ptx_kernel, one PTX module per kernel) and each module's
// combined PTX (compile_to_ptx, what `tallyc -e ptx` writes), for the default target (sm_75
// PTX, assembled for sm_75 and sm_90) and for every cuda_capability_XX feature Tally knows from
// 80 up (assembled for its own sm). Inputs: the GPU apps (their Default_GPU loops take the
// target's API, CUDA), Halide 14's CUDA gpu_gpu_cpu, and the kernels of
// test/ir/cuda-ptx/kernels.stmt.
//
// Without ptxas (TALLY_PTXAS, /usr/local/cuda/bin/ptxas, or ptxas on PATH) the tests skip and
// say so. CUDA 13 toolkits dropped sm_70 and older; sm_75 is the oldest they assemble.

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/CodeGen_PTX.h"
#include "tally/Compiler.h"
#include "tally/Error.h"
#include "tally/Lower.h"
#include "tally/Parser.h"

#ifndef TALLY_APPS_DIR
#error "TALLY_APPS_DIR must name the apps/ source folder"
#endif
#ifndef TALLY_SOURCE_DIR
#error "TALLY_SOURCE_DIR must name the source tree"
#endif

namespace {

bool executable(const std::string &p) {
    return !p.empty() && access(p.c_str(), X_OK) == 0;
}

std::string find_ptxas() {
    if (const char *env = std::getenv("TALLY_PTXAS")) {
        return executable(env) ? env : "";
    }
    if (executable("/usr/local/cuda/bin/ptxas")) {
        return "/usr/local/cuda/bin/ptxas";
    }
    if (const char *path = std::getenv("PATH")) {
        std::istringstream dirs(path);
        std::string d;
        while (std::getline(dirs, d, ':')) {
            if (executable(d + "/ptxas")) {
                return d + "/ptxas";
            }
        }
    }
    return "";
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

struct Input {
    const char *name;
    std::string path;
};

std::vector<Input> inputs() {
    std::string apps = TALLY_APPS_DIR, src = TALLY_SOURCE_DIR;
    return {
        {"gpu_gpu_cpu", apps + "/gpu_gpu_cpu/gpu_gpu_cpu.stmt"},
        {"blur_gpu", apps + "/blur_gpu/blur_gpu.stmt"},
        {"bounce", apps + "/bounce/bounce.stmt"},
        {"halide_gpu_gpu_cpu", src + "/test/corpus/halide14/preoffload/gpu_gpu_cpu.cuda.stmt"},
        {"kernels", src + "/test/ir/cuda-ptx/kernels.stmt"},
    };
}

class CudaPtx : public ::testing::Test {
protected:
    std::string ptxas, dir;

    void SetUp() override {
        ptxas = find_ptxas();
        if (ptxas.empty()) {
            GTEST_SKIP() << "ptxas not found (set TALLY_PTXAS, or install the CUDA toolkit "
                            "under /usr/local/cuda): the PTX is not assembled";
        }
        char tmpl[] = "/tmp/tally_cuda_ptx_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
    }
    void TearDown() override {
        if (!dir.empty()) {
            std::string cmd = "rm -rf '" + dir + "'";
            (void)std::system(cmd.c_str());
        }
    }

    /** Assembles `ptx` for `sm`; on failure the result carries ptxas' output. */
    ::testing::AssertionResult assembles(const std::string &what, const std::string &ptx,
                                         const std::string &sm) {
        std::string base = dir + "/" + what + "." + sm;
        {
            std::ofstream out(base + ".ptx", std::ios::binary);
            out << ptx;
        }
        std::string cmd = "'" + ptxas + "' -arch=" + sm + " '" + base + ".ptx' -o '" + base +
                          ".cubin' > '" + base + ".log' 2>&1";
        int rc = std::system(cmd.c_str());
        if (rc != 0) {
            return ::testing::AssertionFailure()
                   << what << " does not assemble for " << sm << " (ptxas exit "
                   << (WIFEXITED(rc) ? WEXITSTATUS(rc) : -1) << "):\n"
                   << read_file(base + ".log");
        }
        return ::testing::AssertionSuccess();
    }

    /** Every kernel alone and the module's combined PTX, for `target`, on each of `sms`. */
    void check(const std::string &target, const std::vector<std::string> &sms) {
        for (const Input &in : inputs()) {
            SCOPED_TRACE(std::string(in.name) + " for " + target);
            tally::Module m;
            try {
                m = tally::lower(tally::parse_module_file(in.path), tally::Target::parse(target));
            } catch (const tally::CompileError &e) {
                FAIL() << e.what();
            }
            int kernels = 0;
            for (const tally::Kernel &k : m.kernels) {
                if (k.device_api != tally::DeviceAPI::CUDA) {
                    continue;
                }
                kernels++;
                tally::CompiledKernel ck = tally::compile_ptx_kernel(k, m.target);
                EXPECT_NE(ck.code.find(".visible .entry " + k.name + "("), std::string::npos)
                    << ck.code;
                for (const std::string &sm : sms) {
                    EXPECT_TRUE(assembles(std::string(in.name) + "." + k.name, ck.code, sm));
                }
            }
            EXPECT_GT(kernels, 0) << "no CUDA kernel in " << in.path;
            std::string all = tally::compile_to_ptx(m);
            for (const std::string &sm : sms) {
                EXPECT_TRUE(assembles(std::string(in.name) + ".module", all, sm));
            }
        }
    }
};

TEST_F(CudaPtx, DefaultTargetAssemblesForSm75AndSm90) {
    check("host-cuda", {"sm_75", "sm_90"});
}

TEST_F(CudaPtx, ProfilingTargetAssembles) {
    check("host-cuda-profile", {"sm_75"});
}

TEST_F(CudaPtx, EachCapabilityFeatureAssemblesForItsOwnSm) {
    for (const char *cc : {"80", "86", "89", "90"}) {
        check(std::string("host-cuda-cuda_capability_") + cc, {std::string("sm_") + cc});
    }
}

TEST(CudaPtxTarget, CapabilityFeaturesPickTheTargetSm) {
    // kernels.stmt calls exp, which the back end links from libdevice (test/CMakeLists.txt
    // passes the one it found as TALLY_LIBDEVICE).
    if (!std::getenv("TALLY_LIBDEVICE")) {
        GTEST_SKIP() << "libdevice.10.bc not found (set TALLY_LIBDEVICE)";
    }
    tally::Module m =
        tally::parse_module_file(std::string(TALLY_SOURCE_DIR) + "/test/ir/cuda-ptx/kernels.stmt");
    std::string dflt = tally::compile_to_ptx(tally::lower(m, tally::Target::parse("host-cuda")));
    EXPECT_NE(dflt.find(".target sm_75"), std::string::npos);
    std::string sm90 = tally::compile_to_ptx(
        tally::lower(m, tally::Target::parse("host-cuda-cuda_capability_90")));
    EXPECT_NE(sm90.find(".target sm_90"), std::string::npos);
    // Several features: the highest wins.
    std::string both = tally::compile_to_ptx(
        tally::lower(m, tally::Target::parse("host-cuda-cuda_capability_80-cuda_capability_89")));
    EXPECT_NE(both.find(".target sm_89"), std::string::npos);
}

}  // namespace
