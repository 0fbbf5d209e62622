// offload-gpu-loops: identity without GPU loops, kernel arguments, the launch's shape,
// idempotence, and the Halide 14 corpus, whose launch grids are compared with the ones Halide's
// own offload wrote. Also the launch rule itself (derive_kernel_geometry): dimensions, launch
// extents and guards, the ambiguous case as a located error, and the geometry's round trip
// through the text.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/KernelGeometry.h"
#include "tally/Error.h"
#include "tally/IREquality.h"
#include "tally/IRMutator.h"
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

Stmt gpu_loop(const std::string &n, ForType t, Expr extent, Stmt body) {
    return For::make(n, make_zero(Int(32)), std::move(extent), t, DeviceAPI::CUDA, std::move(body));
}

Stmt gpu_loop(const std::string &n, ForType t, int extent, Stmt body) {
    return gpu_loop(n, t, make_const(Int(32), extent), std::move(body));
}

Stmt store_at(const std::string &v) {
    return Store::make("out", make_zero(Int(32)), Variable::make(Int(32), v));
}

/** The For nodes of a statement, outermost first. */
std::vector<const For *> loops_of(const Stmt &s) {
    struct Collect : IRVisitor {
        std::vector<const For *> out;
        using IRVisitor::visit;
        void visit(const For *op) override {
            out.push_back(op);
            IRVisitor::visit(op);
        }
    } c;
    s.accept(&c);
    return c.out;
}

int64_t const_of(const Expr &e) {
    int64_t v = -1;
    EXPECT_TRUE(const_int_value(e, &v)) << e;
    return v;
}

TEST(KernelGeometry, InnermostLoopOfAChainIsX) {
    Stmt s = gpu_loop("by", ForType::GPUBlock, 4,
                      gpu_loop("bx", ForType::GPUBlock, 8,
                               gpu_loop("tx", ForType::GPUThread, 16, store_at("tx"))));
    KernelGeometry g = derive_kernel_geometry(s, "test", "the nest");
    std::vector<const For *> l = loops_of(s);
    ASSERT_EQ(l.size(), 3u);
    EXPECT_EQ(g.dim(l[0]), 1);
    EXPECT_EQ(g.dim(l[1]), 0);
    EXPECT_EQ(g.dim(l[2]), 0);
    ASSERT_EQ(g.blocks.size(), 2u);
    ASSERT_EQ(g.threads.size(), 1u);
    EXPECT_EQ(g.blocks[0].loops, std::vector<std::string>{"bx"});
    EXPECT_EQ(const_of(g.launch_extent(ForType::GPUBlock, 0)), 8);
    EXPECT_EQ(const_of(g.launch_extent(ForType::GPUBlock, 1)), 4);
    EXPECT_EQ(const_of(g.launch_extent(ForType::GPUBlock, 2)), 1);  // a missing dimension
    EXPECT_EQ(const_of(g.launch_extent(ForType::GPUThread, 0)), 16);
    EXPECT_FALSE(g.needs_guard(l[2]));
}

TEST(KernelGeometry, SiblingsShareADimensionAndTheSmallerIsGuarded) {
    Stmt s = gpu_loop("bx", ForType::GPUBlock, 4,
                      Block::make(gpu_loop("t0", ForType::GPUThread, 16, store_at("t0")),
                                  gpu_loop("t1", ForType::GPUThread, 8, store_at("t1"))));
    KernelGeometry g = derive_kernel_geometry(s, "test", "the nest");
    std::vector<const For *> l = loops_of(s);
    ASSERT_EQ(g.threads.size(), 1u);
    EXPECT_EQ(g.threads[0].loops, (std::vector<std::string>{"t0", "t1"}));
    EXPECT_EQ(const_of(g.threads[0].extent), 16);  // constants fold to the largest
    EXPECT_FALSE(g.needs_guard(l[1]));
    EXPECT_TRUE(g.needs_guard(l[2]));
}

TEST(KernelGeometry, NonConstantSiblingExtentsCombineWithMaxInWalkOrder) {
    Expr n = Variable::make(Int(32), "n"), m = Variable::make(Int(32), "m");
    Stmt s = gpu_loop("bx", ForType::GPUBlock, 4,
                      Block::make(gpu_loop("t0", ForType::GPUThread, n, store_at("t0")),
                                  gpu_loop("t1", ForType::GPUThread, m, store_at("t1"))));
    KernelGeometry g = derive_kernel_geometry(s, "test", "the nest");
    ASSERT_EQ(g.threads.size(), 1u);
    EXPECT_TRUE(equal(g.threads[0].extent, Max::make(n, m))) << g.threads[0].extent;
    std::vector<const For *> l = loops_of(s);
    EXPECT_TRUE(g.needs_guard(l[1]));
    EXPECT_TRUE(g.needs_guard(l[2]));
}

// The case the pass and the back ends used to disagree on: the pass launched it (filing 'outer'
// under two dimensions), both back ends refused it. Now the rule refuses it, at the loop.
TEST(KernelGeometry, ChainsOfDifferentLengthsAreALocatedError) {
    const char *ragged = R"(module name=m, target=host-cuda
external func f (out: buffer<float32, 1>) {
gpu_block<CUDA> (outer, 0, 2) {
 gpu_block<CUDA> (b0, 0, 4) {
  gpu_block<CUDA> (b1, 0, 4) {
   out[b1] = 0.000000f
  }
 }
 gpu_block<CUDA> (b2, 0, 2) {
  out[b2] = 0.000000f
 }
}
}
)";
    try {
        offload_gpu_loops(parse_module(ragged));
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_EQ(e.loc.line, 3);
        EXPECT_EQ(e.loc.col, 1);
        EXPECT_NE(std::string(e.what()).find("gpu_block loop 'outer' in function 'f'"),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("ambiguous"), std::string::npos) << e.what();
    }
}

TEST(KernelGeometry, TheLaunchPassesTheRecordedExtents) {
    Module out = offload_gpu_loops(parse_module(two_funcs));
    ASSERT_EQ(out.kernels.size(), 1u);
    const KernelGeometry &g = out.kernels[0].geometry;
    std::vector<const Call *> calls = Launches::of(out);
    ASSERT_EQ(calls.size(), 1u);
    for (int d = 0; d < 3; d++) {
        EXPECT_TRUE(equal(calls[0]->args[2 + d], g.launch_extent(ForType::GPUBlock, d)));
        EXPECT_TRUE(equal(calls[0]->args[5 + d], g.launch_extent(ForType::GPUThread, d)));
    }
    EXPECT_EQ(g.blocks[1].loops, std::vector<std::string>{"out.s0.y.__block_id_y"});
}

TEST(KernelGeometry, AKernelWrittenWithoutGeometryGetsTheDerivedOne) {
    Module out = offload_gpu_loops(parse_module(two_funcs));
    std::string printed = to_string(out);
    EXPECT_NE(printed.find(" blocks(x: out.s0.x.__block_id_x < 4, y: out.s0.y.__block_id_y < n) "
                           "threads(x: .__thread_id_x < 16) {"),
              std::string::npos)
        << printed;
    // The same text without the geometry parses to the same module.
    size_t at = printed.find(" blocks(");
    std::string bare = printed.substr(0, at) + printed.substr(printed.find(" {", at));
    std::string why;
    EXPECT_TRUE(equal(out, parse_module(bare), &why)) << why;
}

TEST(KernelGeometry, TheVerifierRejectsAGeometryThatIsNotTheBodys) {
    Module out = offload_gpu_loops(parse_module(two_funcs));
    std::string printed = to_string(out);
    size_t at = printed.find("x: .__thread_id_x < 16");
    ASSERT_NE(at, std::string::npos);
    std::string wrong = printed;
    wrong.replace(at, 22, "x: .__thread_id_x < 32");
    EXPECT_THROW(verify(parse_module(wrong)), CompileError);
    size_t threads = printed.find(" threads(");
    std::string unrecorded =
        printed.substr(0, threads) + printed.substr(printed.find(" {", threads));
    try {
        verify(parse_module(unrecorded));
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("has no launch dimension"), std::string::npos)
            << e.what();
    }
}

TEST(SourceLocations, TheParserSetsThemAndMutatorsKeepThem) {
    Module m = parse_module(two_funcs);
    FirstLoop first(ForType::GPUBlock);
    m.functions[1].body.accept(&first);
    const For *block = first.found;
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(block->loc.line, 13);
    EXPECT_EQ(block->loc.col, 2);
    // A mutator that rebuilds the loop (here: a new extent) keeps the location.
    struct NewExtent : IRMutator {
        using IRMutator::visit;
        Expr visit(const IntImm *op) override { return make_const(op->type, op->value + 1); }
    } rebuild;
    Stmt s = rebuild.mutate(Stmt(block));
    ASSERT_FALSE(s.same_as(Stmt(block)));
    EXPECT_EQ(s.get()->loc.line, 13);
    EXPECT_EQ(s.get()->loc.col, 2);
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
    const char *metal = R"(module name=m, target=host-metal
external func f (out: buffer<int32, 1>) {
gpu_block<Metal> (x, 0, 4) {
 out[x] = x
}
}
)";
    try {
        offload_gpu_loops(parse_module(metal));
        FAIL() << "expected a CompileError";
    } catch (const CompileError &e) {
        EXPECT_NE(std::string(e.what()).find("Metal"), std::string::npos) << e.what();
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
