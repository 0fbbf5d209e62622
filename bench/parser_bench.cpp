// Parser and printer throughput, on the largest corpus file (conv_chain.profile.stmt, what Halide
// prints for a four-layer convolution with profiling) and on a generated module of about a
// million IR nodes (many small loops, each a chain of lets and stores over nested arithmetic:
// the shape of real lowered code, scaled up). Rates are per IR node, counted by an IRVisitor,
// and per input byte.
//
// The generated module keeps nesting shallow on purpose: statement lists stay under ~1000 long
// and expressions under ~10 deep, so that the benchmark measures throughput and not the
// recursion limits of the visitors.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tally/IR.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"
#include "tally/Parser.h"
#include "tally/Verifier.h"

namespace {

using namespace tally;

/** Counts every node, expressions and statements alike. */
class CountNodes : public IRVisitor {
public:
    int64_t count = 0;

private:
    using IRVisitor::visit;
#define TALLY_COUNT(N)                                                                             \
    void visit(const N *op) override {                                                             \
        count++;                                                                                   \
        IRVisitor::visit(op);                                                                      \
    }
    TALLY_COUNT(IntImm)
    TALLY_COUNT(UIntImm)
    TALLY_COUNT(FloatImm)
    TALLY_COUNT(StringImm)
    TALLY_COUNT(Cast)
    TALLY_COUNT(Reinterpret)
    TALLY_COUNT(Variable)
    TALLY_COUNT(Add)
    TALLY_COUNT(Sub)
    TALLY_COUNT(Mul)
    TALLY_COUNT(Div)
    TALLY_COUNT(Mod)
    TALLY_COUNT(Min)
    TALLY_COUNT(Max)
    TALLY_COUNT(EQ)
    TALLY_COUNT(NE)
    TALLY_COUNT(LT)
    TALLY_COUNT(LE)
    TALLY_COUNT(GT)
    TALLY_COUNT(GE)
    TALLY_COUNT(And)
    TALLY_COUNT(Or)
    TALLY_COUNT(Not)
    TALLY_COUNT(Select)
    TALLY_COUNT(Load)
    TALLY_COUNT(Ramp)
    TALLY_COUNT(Broadcast)
    TALLY_COUNT(Let)
    TALLY_COUNT(Call)
    TALLY_COUNT(Shuffle)
    TALLY_COUNT(LetStmt)
    TALLY_COUNT(AssertStmt)
    TALLY_COUNT(ProducerConsumer)
    TALLY_COUNT(For)
    TALLY_COUNT(Store)
    TALLY_COUNT(Allocate)
    TALLY_COUNT(Free)
    TALLY_COUNT(Block)
    TALLY_COUNT(IfThenElse)
    TALLY_COUNT(Evaluate)
#undef TALLY_COUNT
};

int64_t count_nodes(const Module &m) {
    CountNodes c;
    for (const Kernel &k : m.kernels) {
        k.body.accept(&c);
    }
    for (const LoweredFunc &f : m.functions) {
        f.body.accept(&c);
    }
    return c.count;
}

std::string read_corpus(const std::string &name) {
    std::string path = std::string(TALLY_CORPUS_DIR) + "/" + name;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", path.c_str());
        std::exit(1);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/** Text of a module with `loops` producers, each a loop whose body is `stmts` lets and stores
 * over nested float arithmetic, loads from a typed input buffer and an int index: about 765 IR
 * nodes per loop of 40 statements. */
std::string generate_module(int loops, int stmts) {
    std::ostringstream os;
    os << "module name=generated, target=host-profile\n"
          "external func generated (in: buffer<float32, 1>, out: buffer<float32, 1>, "
          "n: int32) {\n";
    for (int l = 0; l < loops; l++) {
        const std::string f = "f" + std::to_string(l);
        const std::string x = f + ".s0.x";
        os << "produce " << f << " {\n";
        os << " for (" << x << ", 0, n) {\n";
        // Each let reads the two before it; every fourth statement is a store of the latest.
        std::string a = f + ".t0", b = f + ".t1";
        os << "  let " << a << " = in[" << x << "]*1.5f\n";
        os << "  let " << b << " = in[" << x << " + 1] + 0.25f\n";
        for (int s = 2; s < stmts; s++) {
            if (s % 4 == 3 || s == stmts - 1) {
                os << "  out[(" << x << "*" << stmts << ") + " << s << "] = select(" << b
                   << " < 0.000000f, " << a << "*2.000000f, min(" << b << ", " << a
                   << " + 1.000000f))\n";
                continue;
            }
            std::string t = f + ".t" + std::to_string(s);
            os << "  let " << t << " = ((" << b << " + (" << a << "*in[((" << x << " + " << s
               << ") % n)])) - max(" << a << ", float32(" << x << " + " << s << ")))*0.500000f\n";
            a = b;
            b = t;
        }
        os << " }\n";
        os << "}\n";
    }
    os << "}\n";
    return os.str();
}

const std::string &conv_chain_text() {
    static const std::string text = read_corpus("conv_chain.profile.stmt");
    return text;
}

const std::string &generated_text() {
    // 1300 loops of 40 statements: about 10^6 nodes (the benchmarks report the exact count).
    static const std::string text = generate_module(1300, 40);
    return text;
}

/** The module parsed from one of the static texts above, parsed once. */
const Module &parsed(const std::string &text) {
    static std::map<const std::string *, Module> cache;
    auto it = cache.find(&text);
    if (it == cache.end()) {
        it = cache.emplace(&text, parse_module(text, "bench.stmt")).first;
    }
    return it->second;
}

void set_rates(benchmark::State &state, int64_t nodes, size_t bytes) {
    state.counters["nodes"] = double(nodes);
    state.counters["nodes_per_second"] =
        benchmark::Counter(double(nodes) * double(state.iterations()), benchmark::Counter::kIsRate);
    state.SetBytesProcessed(int64_t(bytes) * int64_t(state.iterations()));
}

void parse_bench(benchmark::State &state, const std::string &text) {
    int64_t nodes = count_nodes(parsed(text));
    for (auto _ : state) {
        Module m = parse_module(text, "bench.stmt");
        benchmark::DoNotOptimize(m.functions.data());
        // Releasing the tree is not parsing.
        state.PauseTiming();
        m = Module();
        state.ResumeTiming();
    }
    set_rates(state, nodes, text.size());
}

void print_bench(benchmark::State &state, const std::string &text) {
    const Module &m = parsed(text);
    int64_t nodes = count_nodes(m);
    size_t bytes = 0;
    for (auto _ : state) {
        std::string out = to_string(m);
        bytes = out.size();
        benchmark::DoNotOptimize(out.data());
    }
    set_rates(state, nodes, bytes);
}

void BM_ParseConvChain(benchmark::State &state) {
    parse_bench(state, conv_chain_text());
}
void BM_PrintConvChain(benchmark::State &state) {
    print_bench(state, conv_chain_text());
}
void BM_ParseGenerated1M(benchmark::State &state) {
    parse_bench(state, generated_text());
}
void BM_PrintGenerated1M(benchmark::State &state) {
    print_bench(state, generated_text());
}

void BM_VerifyGenerated1M(benchmark::State &state) {
    const Module &m = parsed(generated_text());
    int64_t nodes = count_nodes(m);
    for (auto _ : state) {
        verify(m);
    }
    set_rates(state, nodes, generated_text().size());
}

void BM_CountNodesGenerated1M(benchmark::State &state) {
    const Module &m = parsed(generated_text());
    int64_t nodes = 0;
    for (auto _ : state) {
        nodes = count_nodes(m);
        benchmark::DoNotOptimize(nodes);
    }
    set_rates(state, nodes, generated_text().size());
}

// Parsing, printing and verifying may run on a helper thread with a large stack (see
// src/ir/LargeStack.h), so CPU time is measured for the whole process and rates use wall time.
#define TALLY_BENCH(fn)                                                                            \
    BENCHMARK(fn)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime()
TALLY_BENCH(BM_ParseConvChain)->MinTime(0.2);
TALLY_BENCH(BM_PrintConvChain)->MinTime(0.2);
TALLY_BENCH(BM_ParseGenerated1M)->Iterations(1);
TALLY_BENCH(BM_PrintGenerated1M)->Iterations(3);
TALLY_BENCH(BM_VerifyGenerated1M)->Iterations(3);
TALLY_BENCH(BM_CountNodesGenerated1M)->Iterations(5);
#undef TALLY_BENCH

}  // namespace

BENCHMARK_MAIN();
