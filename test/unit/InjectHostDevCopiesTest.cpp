// inject-host-dev-copies: identity for host-only pipelines, a copy at every bounce, the loop
// fixpoint, unique result names, verifier-clean output, idempotence, and Halide's own copies in
// the corpus recognised as already there.

#include <gtest/gtest.h>

#include <map>
#include <set>
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

const char *const host_only = R"(module name=h, target=host-vulkan
external func h (in: buffer<float32, 1>, out: buffer<float32, 1>) {
allocate T[float32 * 64]
produce T {
 for (T.s0.x, 0, 64) {
  T[T.s0.x] = (float32)in[T.s0.x] + 1.000000f
 }
}
produce out {
 consume T {
  for (out.s0.x, 0, 64) {
   out[out.s0.x] = T[out.s0.x]*2.000000f
  }
  free T
 }
}
}
)";

// X: written on the host, updated on the device, updated on the host, read on the device.
const char *const bounce = R"(module name=b, target=host-cuda
external func b (in: buffer<float32, 1>, out: buffer<float32, 1>) {
allocate X[float32 * 64]
produce X {
 for (X.s0.x, 0, 64) {
  X[X.s0.x] = (float32)in[X.s0.x]
 }
 gpu_block<CUDA> (X.s1.b, 0, 4) {
  gpu_thread<CUDA> (X.s1.t, 0, 16) {
   X[(X.s1.b*16) + X.s1.t] = X[(X.s1.b*16) + X.s1.t]*2.000000f
  }
 }
 for (X.s2.x, 0, 64) {
  X[X.s2.x] = X[X.s2.x] + 1.000000f
 }
}
produce out {
 gpu_block<CUDA> (out.s0.b, 0, 4) {
  gpu_thread<CUDA> (out.s0.t, 0, 16) {
   out[(out.s0.b*16) + out.s0.t] = X[(out.s0.b*16) + out.s0.t]
  }
 }
}
free X
}
)";

// The kernel reads X, which the host stage writes: from the second iteration on it needs a copy.
const char *const loop = R"(module name=l, target=host-vulkan
external func l (out: buffer<float32, 1>, n: int32) {
allocate X[float32 * 16]
allocate Y[float32 * 16]
for (i, 0, n) {
 gpu_block<Vulkan> (Y.b, 0, 1) {
  gpu_thread<Vulkan> (Y.t, 0, 16) {
   Y[Y.t] = X[Y.t] + 1.000000f
  }
 }
 for (X.s0.x, 0, 16) {
  X[X.s0.x] = Y[X.s0.x]
 }
}
free Y
free X
}
)";

/** The checked runtime calls of a statement, by callee, with the buffer each names. */
struct RuntimeCalls : public IRVisitor {
    std::multimap<std::string, std::string> calls;  // callee -> first argument's name
    std::vector<std::string> let_names;

    using IRVisitor::visit;

    void visit(const Call *op) override {
        IRVisitor::visit(op);
        if (op->name.rfind("halide_", 0) == 0 || op->name.rfind("_halide_buffer_set", 0) == 0) {
            std::string arg;
            if (!op->args.empty()) {
                if (const Variable *v = op->args[0].as<Variable>()) {
                    arg = v->name;
                }
            }
            calls.emplace(op->name, arg);
        }
    }
    void visit(const LetStmt *op) override {
        let_names.push_back(op->name);
        IRVisitor::visit(op);
    }

    size_t count(const std::string &callee, const std::string &arg) const {
        size_t n = 0;
        auto range = calls.equal_range(callee);
        for (auto it = range.first; it != range.second; ++it) {
            n += it->second == arg;
        }
        return n;
    }
    size_t count(const std::string &callee) const { return calls.count(callee); }
};

RuntimeCalls runtime_calls(const Module &m) {
    RuntimeCalls r;
    for (const LoweredFunc &f : m.functions) {
        f.body.accept(&r);
    }
    return r;
}

/** Does `m` print, re-parse and compare equal? */
void expect_round_trip(const Module &m) {
    std::string why;
    Module back = parse_module(to_string(m), "<printed>");
    EXPECT_TRUE(equal(m, back, &why)) << why << "\n" << m;
}

}  // namespace

TEST(InjectHostDevCopies, LeavesHostOnlyPipelinesPointerIdentical) {
    Module m = parse_module(host_only);
    Module out = inject_host_dev_copies(m);
    ASSERT_EQ(out.functions.size(), 1u);
    EXPECT_TRUE(out.functions[0].body.same_as(m.functions[0].body));
}

TEST(InjectHostDevCopies, LeavesHalideHostPipelinesPointerIdentical) {
    for (const char *name : {"blur3x3.host", "conv_chain.host", "histogram_equalize.host",
                             "mandelbrot.host", "memory_heavy.host"}) {
        Module m = parse_module_file(corpus + "/preoffload/" + name + ".stmt");
        Module out = inject_host_dev_copies(m);
        ASSERT_EQ(out.functions.size(), m.functions.size()) << name;
        for (size_t i = 0; i < m.functions.size(); i++) {
            EXPECT_TRUE(out.functions[i].body.same_as(m.functions[i].body))
                << name << ": " << m.functions[i].name;
        }
    }
}

TEST(InjectHostDevCopies, CopiesABouncedBufferAtEveryBounce) {
    Module out = inject_host_dev_copies(parse_module(bounce));
    RuntimeCalls r = runtime_calls(out);
    EXPECT_EQ(r.count("halide_copy_to_device", "X.buffer"), 2u) << out;
    EXPECT_EQ(r.count("halide_copy_to_host", "X.buffer"), 1u) << out;
    EXPECT_EQ(r.count("_halide_buffer_set_host_dirty", "X.buffer"), 2u) << out;
    EXPECT_EQ(r.count("_halide_buffer_set_device_dirty", "X.buffer"), 1u) << out;
    // The input, read only on the host, is never copied; the output, written on the device, is
    // copied back at the end.
    EXPECT_EQ(r.count("halide_copy_to_device", "in.buffer"), 0u) << out;
    EXPECT_EQ(r.count("halide_copy_to_host", "out.buffer"), 1u) << out;
    EXPECT_EQ(r.count("halide_device_malloc", "X.buffer"), 1u) << out;
    EXPECT_EQ(r.count("halide_device_free", "X.buffer"), 1u) << out;
    EXPECT_NO_THROW(verify(out));
    expect_round_trip(out);
}

TEST(InjectHostDevCopies, ResultNamesAreUniquePerFunction) {
    Module out = inject_host_dev_copies(parse_module(bounce));
    RuntimeCalls r = runtime_calls(out);
    std::set<std::string> seen;
    for (const std::string &n : r.let_names) {
        EXPECT_TRUE(seen.insert(n).second) << "let " << n << " bound twice\n" << out;
    }
    EXPECT_TRUE(seen.count("halide_copy_to_device_result"));
    EXPECT_TRUE(seen.count("halide_copy_to_device_result$1"));
}

TEST(InjectHostDevCopies, CopiesInsideALoopWhenALaterIterationNeedsIt) {
    Module out = inject_host_dev_copies(parse_module(loop));
    const LoweredFunc &f = out.functions[0];
    // The copy of X to the device sits inside the loop body, before the kernel.
    struct FindLoopCopy : public IRVisitor {
        int depth = 0;
        bool copy_in_loop = false, copy_outside = false;
        using IRVisitor::visit;
        void visit(const For *op) override {
            depth += op->name == "i";
            IRVisitor::visit(op);
            depth -= op->name == "i";
        }
        void visit(const Call *op) override {
            if (op->name == "halide_copy_to_device") {
                (depth ? copy_in_loop : copy_outside) = true;
            }
            IRVisitor::visit(op);
        }
    } find;
    f.body.accept(&find);
    EXPECT_TRUE(find.copy_in_loop) << out;
    EXPECT_FALSE(find.copy_outside) << out;
    EXPECT_NO_THROW(verify(out));
    expect_round_trip(out);
}

TEST(InjectHostDevCopies, SecondRunChangesNothing) {
    for (const char *text : {bounce, loop}) {
        Module once = inject_host_dev_copies(parse_module(text));
        Module twice = inject_host_dev_copies(once);
        std::string why;
        EXPECT_TRUE(equal(once, twice, &why)) << why << "\n" << twice;
        // Nothing rebuilt either: the second run returns the same nodes.
        EXPECT_TRUE(twice.functions[0].body.same_as(once.functions[0].body)) << twice;
        // Also after a trip through the text, as a second tally-opt run would see it.
        Module reparsed = parse_module(to_string(once));
        Module again = inject_host_dev_copies(reparsed);
        EXPECT_TRUE(again.functions[0].body.same_as(reparsed.functions[0].body)) << again;
    }
}

TEST(InjectHostDevCopies, RecognisesHalidesOwnCopies) {
    for (const char *name : {"gpu_gpu_cpu.cuda", "gpu_gpu_cpu.cuda-profile"}) {
        Module m = parse_module_file(corpus + "/preoffload/" + name + ".stmt");
        Module out = inject_host_dev_copies(m);
        for (size_t i = 0; i < m.functions.size(); i++) {
            EXPECT_TRUE(out.functions[i].body.same_as(m.functions[i].body))
                << name << ": " << m.functions[i].name;
        }
    }
}

TEST(InjectHostDevCopies, RejectsDefaultGpuWithoutAGpuTarget) {
    Module m = parse_module(R"(module name=d, target=host
external func d (out: buffer<float32, 1>) {
gpu_block<Default_GPU> (b, 0, 1) {
 gpu_thread<Default_GPU> (t, 0, 16) {
  out[t] = 0.000000f
 }
}
}
)");
    EXPECT_THROW(inject_host_dev_copies(m), CompileError);
}
