// The pass registry: one line per pass, alphabetical.

#include "driver/PassRegistry.h"

#include "tally/Lower.h"
#include "tally/Passes.h"
#include "tally/Verifier.h"

namespace tally {

const std::vector<PassInfo> &registered_passes() {
    static const std::vector<PassInfo> passes = {
        {"inject-host-dev-copies", "inserts host<->device copies, dirty bits, device allocations",
         [](const Module &m) { return inject_host_dev_copies(m); }},
        {"inject-profiling", "instruments pipelines for the Tally profiler (profiling targets)",
         [](const Module &m) { return inject_profiling(m); }},
        {"inject-profiling-no-sync",
         "inject-profiling without the device syncs (shows the misattribution they fix)",
         [](const Module &m) {
             ProfilingOptions o;
             o.inject_device_sync = false;
             return inject_profiling(m, o);
         }},
        {"lower", "the whole pipeline: copies, offload, profiling",
         [](const Module &m) { return lower(m, m.target); }},
        {"no-op", "returns the module unchanged", [](const Module &m) { return m; }},
        {"offload-gpu-loops", "turns gpu_block loop nests into device kernels and launches",
         [](const Module &m) { return offload_gpu_loops(m); }},
        {"retarget-gpu-api", "runs GPU loops written for another API on the target's",
         [](const Module &m) { return retarget_gpu_api(m); }},
        {"verify", "checks the module with the IR verifier",
         [](const Module &m) {
             verify(m);
             return m;
         }},
    };
    return passes;
}

const PassInfo *find_pass(const std::string &name) {
    for (const PassInfo &p : registered_passes()) {
        if (name == p.name) {
            return &p;
        }
    }
    return nullptr;
}

}  // namespace tally
