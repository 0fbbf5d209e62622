// Cost of the lowering passes on generated modules of 10^4, 10^5 and 10^6 IR nodes (every fourth
// stage on the GPU). The time per node, ns_per_node, must stay flat as the module grows (linear
// cost); bench/run_benchmarks.py reports the medians.

#include <benchmark/benchmark.h>

#include <sstream>
#include <string>

#include "tally/IRVisitor.h"
#include "tally/Lower.h"
#include "tally/Parser.h"
#include "tally/Passes.h"

using namespace tally;

namespace {

/** A pipeline of `stages` independent blocks, as Halide scopes them: each allocates an
 * intermediate, produces it (every fourth on the GPU, so lowering has copies and launches to
 * add), consumes it into the output, and frees it. Nesting stays shallow however long the
 * pipeline is. */
std::string generate(int stages) {
    std::ostringstream s;
    s << "module name=gen, target=host-cuda-profile\n"
         "external func gen (in: buffer<float32, 1>, out: buffer<float32, 1>, n: int32) {\n";
    for (int i = 0; i < stages; i++) {
        std::string f = "f" + std::to_string(i);
        s << "{\nallocate " << f << "[float32 * 1024] in Heap\n"
          << "produce " << f << " {\n";
        if (i % 4 == 3) {
            s << " gpu_block<CUDA> (" << f << ".s0.b, 0, 4) {\n"
              << "  gpu_thread<CUDA> (" << f << ".s0.t, 0, 256) {\n"
              << "   " << f << "[" << f << ".s0.b*256 + " << f << ".s0.t] = ((float32)in[" << f
              << ".s0.b*256 + " << f << ".s0.t]*1.5f) + 2.0f\n  }\n }\n";
        } else {
            s << " for (" << f << ".s0.x, 0, 1024) {\n"
              << "  " << f << "[" << f << ".s0.x] = (((float32)in[" << f
              << ".s0.x]*1.5f) + float32(" << f << ".s0.x % 7)) - ((float32)in[" << f
              << ".s0.x]/3.0f)\n }\n";
        }
        s << "}\nconsume " << f << " {\n for (out.s" << i << ".x, 0, 1024) {\n  out[out.s" << i
          << ".x] = (float32)out[out.s" << i << ".x] + " << f << "[out.s" << i << ".x]\n }\n}\n"
          << "free " << f << "\n}\n";
    }
    s << "}\n";
    return s.str();
}

struct Count : IRVisitor {
    int64_t nodes = 0;
    using IRVisitor::visit;
#define TALLY_COUNT(N)                                                                             \
    void visit(const N *op) override {                                                             \
        nodes++;                                                                                   \
        IRVisitor::visit(op);                                                                      \
    }
    TALLY_COUNT(Add)
    TALLY_COUNT(Sub)
    TALLY_COUNT(Mul)
    TALLY_COUNT(Div)
    TALLY_COUNT(Mod)
    TALLY_COUNT(Cast)
    TALLY_COUNT(Load)
    TALLY_COUNT(Call)
    TALLY_COUNT(Let)
    TALLY_COUNT(LetStmt)
    TALLY_COUNT(Store)
    TALLY_COUNT(For)
    TALLY_COUNT(Allocate)
    TALLY_COUNT(Free)
    TALLY_COUNT(Block)
    TALLY_COUNT(ProducerConsumer)
    TALLY_COUNT(AssertStmt)
    TALLY_COUNT(Evaluate)
#undef TALLY_COUNT
    void visit(const Variable *) override {
        nodes++;
    }
    void visit(const IntImm *) override {
        nodes++;
    }
    void visit(const FloatImm *) override {
        nodes++;
    }
    void visit(const UIntImm *) override {
        nodes++;
    }
    void visit(const StringImm *) override {
        nodes++;
    }
};

int64_t count_nodes(const Module &m) {
    Count c;
    for (const LoweredFunc &f : m.functions) {
        f.body.accept(&c);
    }
    return c.nodes;
}

// Roughly 36 nodes per stage: 10^4, 10^5 and 10^6 nodes.
int stages_for(int64_t nodes) {
    return int(nodes / 36);
}

void BM_InjectProfiling(benchmark::State &state) {
    Module m = offload_gpu_loops(
        inject_host_dev_copies(parse_module(generate(stages_for(state.range(0))))));
    int64_t nodes = count_nodes(m);
    for (auto _ : state) {
        Module out = inject_profiling(m);
        benchmark::DoNotOptimize(out.functions[0].body.get());
    }
    state.counters["nodes"] = double(nodes);
    state.counters["ns_per_node"] =
        benchmark::Counter(double(nodes) * state.iterations(),
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Lower(benchmark::State &state) {
    Module m = parse_module(generate(stages_for(state.range(0))));
    int64_t nodes = count_nodes(m);
    Target t = m.target;
    LowerOptions opts;
    opts.verify_each_pass = false;
    for (auto _ : state) {
        Module out = lower(m, t, opts);
        benchmark::DoNotOptimize(out.functions[0].body.get());
    }
    state.counters["nodes"] = double(nodes);
    state.counters["ns_per_node"] =
        benchmark::Counter(double(nodes) * state.iterations(),
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

// The passes may run on a helper thread with a large stack (see src/ir/LargeStack.h): CPU time is
// measured for the whole process, and ns_per_node is per process CPU time (which, unlike wall
// time, other processes on a loaded machine do not inflate).
BENCHMARK(BM_InjectProfiling)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();
BENCHMARK(BM_Lower)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

BENCHMARK_MAIN();
