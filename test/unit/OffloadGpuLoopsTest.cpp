// offload-gpu-loops: identity without GPU loops, kernel arguments, the launch's shape,
// idempotence, and the Halide 14 corpus, whose launch grids are compared with the ones Halide's
// own offload wrote.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"
#include "tally/Parser.h"
#include "tally/Passes.h"
#include "tally/Verifier.h"

using namespace tally;

namespace {

const std::string corpus = TALLY_CORPUS_DIR;

const char *const two_funcs = R"(module name=m, target=host-cuda
external func cpu (out: buffer<int32, 1>) {
produce out {
 for (out.s0.x, 0, 8) {
  out[out.s0.x] = out.s0.x
 }
}
}

external func gpu (in: buffer<uint8, 1>, out: buffer<float32, 1>, n: int32, k: float32) {
let base = n*2
produce out {
 gpu_block<CUDA> (out.s0.y.__block_id_y, 0, n) {
  gpu_block<CUDA> (out.s0.x.__block_id_x, 0, 4) {
   allocate shared[float32 * 16] in GPUShared
   gpu_thread<CUDA> (.__thread_id_x, 0, 16) {
    let i = (out.s0.x.__block_id_x*16) + .__thread_id_x
    shared[.__thread_id_x] = float32((uint8)in[i + base])
    out[i] = (float32)shared[.__thread_id_x]*(float32)k
   }
   free shared
  }
 }
 out[0] = 0.000000f
}
}
)";

/** The halide_<api>_run calls of a module's functions, in walk order. */
struct Launches : public IRVisitor {
    std::vector<const Call *> calls;

    using IRVisitor::visit;

    void visit(const Call *op) override {
        if (op->name == "halide_cuda_run" || op->name == "halide_vulkan_run") {
            calls.push_back(op);
        }
        IRVisitor::visit(op);
    }

    static std::vector<const Call *> of(const Module &m) {
        Launches l;
        for (const LoweredFunc &f : m.functions) {
            f.body.accept(&l);
        }
        return l.calls;
    }
};

/** Finds the first For of the given type in a statement. */
struct FirstLoop : public IRVisitor {
    ForType type;
    const For *found = nullptr;

    explicit FirstLoop(ForType t) : type(t) {}

    using IRVisitor::visit;

    void visit(const For *op) override {
        if (!found && op->for_type == type) {
            found = op;
        }
        IRVisitor::visit(op);
    }
};

Argument buffer(const std::string &n, Type t) {
    Argument a;
    a.name = n;
    a.kind = Argument::Buffer;
    a.type = t;
    a.dimensions = 1;
    return a;
}

Argument scalar(const std::string &n, Type t) {
    Argument a;
    a.name = n;
    a.kind = Argument::Scalar;
    a.type = t;
    return a;
}

TEST(OffloadGpuLoops, ReturnsFunctionsWithoutGpuLoopsPointerIdentical) {
    Module m = parse_module(two_funcs);
    Module out = offload_gpu_loops(m);
    ASSERT_EQ(out.functions.size(), 2u);
    EXPECT_TRUE(out.functions[0].body.same_as(m.functions[0].body));
    EXPECT_FALSE(out.functions[1].body.same_as(m.functions[1].body));

    // A module with no GPU loop at all: every body is the same node and no kernel appears.
    Module cpu = parse_module_file(corpus + "/preoffload/blur3x3.host.stmt");
    Module cpu_out = offload_gpu_loops(cpu);
    EXPECT_TRUE(cpu_out.kernels.empty());
    ASSERT_EQ(cpu_out.functions.size(), cpu.functions.size());
    for (size_t i = 0; i < cpu.functions.size(); i++) {
        EXPECT_TRUE(cpu_out.functions[i].body.same_as(cpu.functions[i].body));
    }
}

TEST(OffloadGpuLoops, KernelArgsAreUnallocatedBuffersThenFreeScalarsInFirstUseOrder) {
    Module out = offload_gpu_loops(parse_module(two_funcs));
    ASSERT_EQ(out.kernels.size(), 1u);
    const Kernel &k = out.kernels[0];
    EXPECT_EQ(k.name, "out_out_s0_y___block_id_y");
    EXPECT_EQ(k.device_api, DeviceAPI::CUDA);
    // `shared` is allocated inside the nest; `i` and the loop variables are bound inside.
    std::vector<Argument> expected = {buffer("in", UInt(8)), buffer("out", Float(32)),
                                      scalar("n", Int(32)), scalar("base", Int(32)),
                                      scalar("k", Float(32))};
    EXPECT_EQ(k.args, expected);
    EXPECT_NO_THROW(verify(out));
}

TEST(OffloadGpuLoops, KernelBodyIsTheOriginalNest) {
    Module m = parse_module(two_funcs);
    FirstLoop outer(ForType::GPUBlock);
    m.functions[1].body.accept(&outer);
    ASSERT_NE(outer.found, nullptr);
    Module out = offload_gpu_loops(m);
    ASSERT_EQ(out.kernels.size(), 1u);
    EXPECT_TRUE(out.kernels[0].body.same_as(Stmt(outer.found)));
    // And no gpu_block loop is left in the function.
    FirstLoop left(ForType::GPUBlock);
    out.functions[1].body.accept(&left);
    EXPECT_EQ(left.found, nullptr);
}

TEST(OffloadGpuLoops, LaunchIsACheckedLetWithGridAndArgumentArrays) {
    Module out = offload_gpu_loops(parse_module(two_funcs));
    std::vector<const Call *> calls = Launches::of(out);
    ASSERT_EQ(calls.size(), 1u);
    const Call *c = calls[0];
    EXPECT_EQ(c->name, "halide_cuda_run");
    EXPECT_EQ(c->type, Int(32));
    ASSERT_EQ(c->args.size(), 12u);
    const Call *table = c->args[0].as<Call>();
    ASSERT_NE(table, nullptr);
    EXPECT_EQ(table->name, "tally_kernel_table");
    EXPECT_EQ(table->call_type, Call::Intrinsic);
    EXPECT_EQ(table->type, Handle());
    const StringImm *name = c->args[1].as<StringImm>();
    ASSERT_NE(name, nullptr);
    EXPECT_EQ(name->value, "out_out_s0_y___block_id_y");
    // Blocks: the inner block loop (4) is X, the outer (n) is Y. Threads: 16, 1, 1.
    const char *grid[] = {"4", "n", "1", "16", "1", "1", "0"};
    for (int i = 0; i < 7; i++) {
        EXPECT_EQ(to_string(c->args[2 + i]), grid[i]) << "launch argument " << 2 + i;
    }
    EXPECT_EQ(to_string(c->args[9]),
              "(void *)make_struct((int64)8, (int64)8, (int64)4, (int64)4, (int64)4, (int64)0)");
    EXPECT_EQ(to_string(c->args[10]),
              "(void *)make_struct((halide_buffer_t *)in.buffer, (halide_buffer_t *)out.buffer, "
              "(void *)make_struct(n), (void *)make_struct(base), (void *)make_struct((float32)k), "
              "(void *)reinterpret((uint64)0))");
    EXPECT_EQ(to_string(c->args[11]),
              "(void *)make_struct((uint8)1, (uint8)1, (uint8)0, (uint8)0, (uint8)0, (uint8)0)");

    // let r = launch; then assert(r == 0, r) and the statement that followed the nest.
    std::string printed = to_string(out.functions[1].body);
    EXPECT_NE(printed.find(" let halide_cuda_run_result = halide_cuda_run("), std::string::npos)
        << printed;
    EXPECT_NE(printed.find("\n assert(halide_cuda_run_result == 0, halide_cuda_run_result)\n"
                           " out[0] = 0.000000f\n"),
              std::string::npos)
        << printed;
}

TEST(OffloadGpuLoops, SecondRunChangesNothing) {
    Module once = offload_gpu_loops(parse_module(two_funcs));
    Module twice = offload_gpu_loops(once);
    std::string why;
    EXPECT_TRUE(equal(once, twice, &why)) << why;
    ASSERT_EQ(twice.kernels.size(), once.kernels.size());
    for (size_t i = 0; i < once.functions.size(); i++) {
        EXPECT_TRUE(twice.functions[i].body.same_as(once.functions[i].body));
    }
    EXPECT_TRUE(twice.kernels[0].body.same_as(once.kernels[0].body));
}

TEST(OffloadGpuLoops, SameInputGivesSameOutput) {
    Module a = offload_gpu_loops(parse_module(two_funcs));
    Module b = offload_gpu_loops(parse_module(two_funcs));
    EXPECT_EQ(to_string(a), to_string(b));
}

TEST(OffloadGpuLoops, PrintedResultParsesBackEqual) {
    Module out = offload_gpu_loops(parse_module(two_funcs));
    Module again = parse_module(to_string(out));
    std::string why;
    EXPECT_TRUE(equal(out, again, &why)) << why;
}

TEST(OffloadGpuLoops, UnsupportedApiIsAUserErrorNamingIt) {
    const char *ocl = R"(module name=m, target=host-opencl
external func f (out: buffer<int32, 1>) {
gpu_block<OpenCL> (x, 0, 4) {
 out[x] = x
}
}
)";
    try {
        offload_gpu_loops(parse_module(ocl));
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("OpenCL"), std::string::npos) << e.what();
    }
    const char *no_gpu = R"(module name=m, target=host
external func f (out: buffer<int32, 1>) {
gpu_block<Default_GPU> (x, 0, 4) {
 out[x] = x
}
}
)";
    EXPECT_THROW(offload_gpu_loops(parse_module(no_gpu)), CompileError);
}

// Halide 14 offloaded this very pipeline itself: our launches must use the same grid.
TEST(OffloadGpuLoops, CorpusLaunchGridsMatchHalidesOwnOffload) {
    Module pre = parse_module_file(corpus + "/preoffload/gpu_gpu_cpu.cuda.stmt");
    Module ours = offload_gpu_loops(pre);
    EXPECT_NO_THROW(verify(ours));
    ASSERT_EQ(ours.kernels.size(), 2u);
    EXPECT_EQ(ours.kernels[0].name, "A_A_s0_y_yo___block_id_y");
    EXPECT_EQ(ours.kernels[1].name, "B_B_s0_y_yo___block_id_y");

    Module halide = parse_module_file(corpus + "/gpu_gpu_cpu.cuda.stmt");
    std::vector<const Call *> mine = Launches::of(ours), theirs = Launches::of(halide);
    ASSERT_EQ(mine.size(), 2u);
    ASSERT_EQ(theirs.size(), 2u);
    for (size_t i = 0; i < 2; i++) {
        ASSERT_EQ(theirs[i]->args.size(), mine[i]->args.size());
        for (size_t a = 2; a <= 8; a++) {
            EXPECT_TRUE(equal(mine[i]->args[a], theirs[i]->args[a]))
                << "launch " << i << " argument " << a << ": ours " << mine[i]->args[a]
                << ", Halide's " << theirs[i]->args[a];
        }
    }
}

}  // namespace
