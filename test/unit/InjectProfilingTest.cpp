// inject-profiling: entry-point behaviour (identity, idempotence) and the Halide 14 corpus as
// real input, compared structurally with what Halide's own -profile lowering instrumented.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tally/IREquality.h"
#include "tally/IRPrinter.h"
#include "tally/IRVisitor.h"
#include "tally/Parser.h"
#include "tally/Passes.h"
#include "tally/Verifier.h"

using namespace tally;

namespace {

const std::string corpus = TALLY_CORPUS_DIR;

/** What a (possibly instrumented) module looks like, profiler-wise. */
struct Probes : public IRVisitor {
    std::set<std::string> produces;       // every producer
    std::set<std::string> switched;       // producers whose first statement switches slot
    std::vector<std::string> slot_names;  // from tally_profiler_start
    std::set<std::string> halide_funcs;   // from Halide's profiling_func_names stores
    int launches = 0, launch_syncs = 0;   // checked launches; syncs right after their check
    int copies_to_device = 0, to_device_syncs = 0;
    int copies_to_host = 0, to_host_syncs = 0;
    int starts = 0;

    using IRVisitor::visit;

    static bool is_switch(const Stmt &s) {
        Stmt first = s;
        if (const Block *b = s.as<Block>()) {
            first = b->first;
        }
        const Evaluate *e = first.as<Evaluate>();
        const Call *c = e ? e->value.as<Call>() : nullptr;
        return c && (c->name == "tally_profiler_set_current" ||
                     c->name == "halide_profiler_set_current_func");
    }

    static bool sync_follows_check(const Stmt &let_body) {
        // body = assert; then (maybe) let halide_device_sync_global_result = ...
        const Block *b = let_body.as<Block>();
        if (!b || !b->first.as<AssertStmt>()) {
            return false;
        }
        Stmt next = b->rest;
        if (const Block *nb = next.as<Block>()) {
            next = nb->first;
        }
        const LetStmt *l = next.as<LetStmt>();
        const Call *c = l ? l->value.as<Call>() : nullptr;
        return c && c->name == "halide_device_sync_global";
    }

    void visit(const ProducerConsumer *op) override {
        if (op->is_producer) {
            produces.insert(op->name);
            if (is_switch(op->body)) {
                switched.insert(op->name);
            }
        }
        IRVisitor::visit(op);
    }
    void visit(const LetStmt *op) override {
        if (const Call *c = op->value.as<Call>()) {
            const std::string &n = c->name;
            bool launch = n.size() > 11 && n.compare(0, 7, "halide_") == 0 &&
                          n.compare(n.size() - 4, 4, "_run") == 0 && n != "halide_do_par_for";
            bool synced = sync_follows_check(op->body);
            if (launch) {
                launches++;
                launch_syncs += synced;
            } else if (n == "halide_copy_to_device") {
                copies_to_device++;
                to_device_syncs += synced;
            } else if (n == "halide_copy_to_host") {
                copies_to_host++;
                to_host_syncs += synced;
            } else if (n == "tally_profiler_start") {
                starts++;
                if (const Call *names = c->args[3].as<Call>()) {
                    for (const Expr &e : names->args) {
                        slot_names.push_back(e.as<StringImm>()->value);
                    }
                }
            }
        }
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        if (op->name == "profiling_func_names") {
            if (const StringImm *s = op->value.as<StringImm>()) {
                if (s->value != "overhead" && s->value != "halide_malloc" &&
                    s->value != "halide_free") {
                    halide_funcs.insert(s->value);
                }
            }
        }
        IRVisitor::visit(op);
    }
};

Probes probe(const Module &m) {
    Probes p;
    for (const LoweredFunc &f : m.functions) {
        f.body.accept(&p);
    }
    return p;
}

Module with_profile(Module m) {
    m.target = m.target.with_feature("profile");
    return m;
}

std::vector<std::string> corpus_files(const std::string &dir) {
    std::vector<std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(dir)) {
        std::string p = e.path().string();
        if (p.size() > 5 && p.compare(p.size() - 5, 5, ".stmt") == 0 &&
            p.find("profile") == std::string::npos) {
            out.push_back(p);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

/** The -profile file Halide printed for the same pipeline and API, if any. */
std::string halide_profile_twin(const std::string &path) {
    std::string p = path;
    for (const char *tag : {".host.stmt", ".debug.stmt"}) {
        size_t at = p.find(tag);
        if (at != std::string::npos) {
            return p.substr(0, at) + ".profile.stmt";
        }
    }
    for (const char *api : {"cuda", "opencl"}) {
        std::string tag = std::string(".") + api + ".stmt";
        size_t at = p.find(tag);
        if (at != std::string::npos) {
            return p.substr(0, at) + "." + api + "-profile.stmt";
        }
    }
    return "";
}

}  // namespace

TEST(InjectProfiling, ReturnsTheSameNodesWithoutAProfilingTarget) {
    Module m = parse_module_file(corpus + "/blur3x3.host.stmt");
    Module out = inject_profiling(m);
    ASSERT_EQ(out.functions.size(), m.functions.size());
    for (size_t i = 0; i < m.functions.size(); i++) {
        EXPECT_TRUE(out.functions[i].body.same_as(m.functions[i].body));
    }
}

TEST(InjectProfiling, SecondRunChangesNothing) {
    Module once =
        inject_profiling(with_profile(parse_module_file(corpus + "/conv_chain.host.stmt")));
    Module twice = inject_profiling(once);
    for (size_t i = 0; i < once.functions.size(); i++) {
        EXPECT_TRUE(twice.functions[i].body.same_as(once.functions[i].body))
            << once.functions[i].name;
    }
}

TEST(InjectProfiling, IsDeterministic) {
    Module m = with_profile(parse_module_file(corpus + "/gpu_gpu_cpu.cuda.stmt"));
    EXPECT_EQ(to_string(inject_profiling(m)), to_string(inject_profiling(m)));
}

TEST(InjectProfiling, KeepsFunctionsWithoutProducersValid) {
    Module m = parse_module("module name=e, target=host-profile\n"
                            "external func e (out: buffer<int32, 1>) {\n out[0] = 1\n}\n");
    Module out = inject_profiling(m);
    Probes p = probe(out);
    EXPECT_EQ(p.starts, 1);
    EXPECT_EQ(p.slot_names, std::vector<std::string>{"overhead"});
    EXPECT_NO_THROW(verify(out));
}

// Every top-level corpus file that Halide did not profile goes through the pass with a
// profiling target and verifies. Every producer Halide's own -profile lowering instrumented is
// instrumented here too, the Funcs in the slot table are the Funcs Halide profiled, and the GPU
// pipelines get one sync per launch and per copy to the device (which Halide 14 lacks), none
// per copy to the host.
TEST(InjectProfiling, CorpusMatchesHalideInstrumentationAndSyncsEveryLaunch) {
    int compared = 0, gpu = 0;
    for (const std::string &path : corpus_files(corpus)) {
        SCOPED_TRACE(path);
        Module out = inject_profiling(with_profile(parse_module_file(path)));
        ASSERT_NO_THROW(verify(out));
        Probes ours = probe(out);
        EXPECT_EQ(ours.starts, 1);

        std::string twin = halide_profile_twin(path);
        ASSERT_FALSE(twin.empty());
        Probes theirs = probe(parse_module_file(twin));
        ASSERT_FALSE(theirs.switched.empty());
        for (const std::string &f : theirs.switched) {
            EXPECT_TRUE(ours.switched.count(f)) << "Halide instruments produce " << f;
        }
        std::set<std::string> our_funcs;
        for (const std::string &n : ours.slot_names) {
            if (n != "overhead" && n.find(" (copy to ") == std::string::npos) {
                our_funcs.insert(n);
            }
        }
        EXPECT_EQ(our_funcs, theirs.halide_funcs);
        compared++;

        EXPECT_EQ(ours.launch_syncs, ours.launches);
        EXPECT_EQ(ours.to_device_syncs, ours.copies_to_device);
        EXPECT_EQ(ours.to_host_syncs, 0);
        if (ours.launches > 0) {
            gpu++;
            // Halide 14's own profiling adds no sync after launches.
            EXPECT_EQ(theirs.launch_syncs, 0);
            // Copies have their own slots, named after the buffer's Func.
            bool host_copy_slot = false;
            for (const std::string &n : ours.slot_names) {
                host_copy_slot = host_copy_slot || n == "B (copy to host)";
            }
            EXPECT_TRUE(host_copy_slot);
        }
    }
    EXPECT_EQ(compared, 12);  // 19 top-level files, 7 of them profiled by Halide
    EXPECT_EQ(gpu, 2);        // gpu_gpu_cpu for cuda and opencl
}

// `profile_timestamps` on the corpus GPU pipelines: the same probes and slots as `profile`, and
// not one injected sync, even when the options ask for them (the target decides).
TEST(InjectProfiling, ProfileTimestampsInjectsNoSyncButTheSameProbes) {
    int gpu = 0;
    for (const std::string &path : corpus_files(corpus)) {
        Module m = parse_module_file(path);
        if (m.target.profiling()) {
            continue;
        }
        SCOPED_TRACE(path);
        Module ts = m;
        ts.target = ts.target.with_feature("profile_timestamps");
        ProfilingOptions with_syncs;
        with_syncs.inject_device_sync = true;
        Module out = inject_profiling(ts, with_syncs);
        ASSERT_NO_THROW(verify(out));
        Probes timestamps = probe(out);
        Probes sync = probe(inject_profiling(with_profile(m)));
        EXPECT_EQ(timestamps.starts, 1);
        EXPECT_EQ(timestamps.slot_names, sync.slot_names);
        EXPECT_EQ(timestamps.switched, sync.switched);
        EXPECT_EQ(timestamps.launches, sync.launches);
        EXPECT_EQ(timestamps.copies_to_device, sync.copies_to_device);
        EXPECT_EQ(timestamps.launch_syncs, 0);
        EXPECT_EQ(timestamps.to_device_syncs, 0);
        EXPECT_EQ(timestamps.to_host_syncs, 0);
        EXPECT_EQ(to_string(out).find("halide_device_sync_global("), std::string::npos);
        if (sync.launches > 0) {
            gpu++;
            EXPECT_EQ(sync.launch_syncs, sync.launches) << "sync mode is unchanged";
        }
    }
    EXPECT_EQ(gpu, 2);
}

// The bare statements of preoffload/ go through offload-gpu-loops then inject-profiling.
TEST(InjectProfiling, PreoffloadCorpusLowersAndVerifies) {
    int n = 0;
    for (const std::string &path : corpus_files(corpus + "/preoffload")) {
        SCOPED_TRACE(path);
        Module m = parse_module_file(path);
        m.target = Target::parse(path.find("opencl") != std::string::npos ? "host-profile"
                                 : path.find("cuda") != std::string::npos ? "host-cuda-profile"
                                                                          : "host-profile");
        if (path.find("opencl") != std::string::npos) {
            continue;  // no OpenCL back end: offloading it is an error (tested elsewhere)
        }
        Module out = inject_profiling(offload_gpu_loops(m));
        ASSERT_NO_THROW(verify(out));
        Probes ours = probe(out);
        EXPECT_EQ(ours.starts, 1);
        EXPECT_EQ(ours.switched, ours.produces);
        EXPECT_EQ(ours.launch_syncs, ours.launches);
        EXPECT_EQ(ours.to_device_syncs, ours.copies_to_device);
        n++;
    }
    EXPECT_EQ(n, 6);  // the 7 unprofiled preoffload files, less the OpenCL one
}
