// The lowering pipeline: straight-line, one pass after another, the verifier after each.

#include "tally/Lower.h"
#include "ir/LargeStack.h"

#include <iostream>

#include "tally/IRPrinter.h"
#include "tally/Verifier.h"

namespace tally {

namespace {

void after_pass(const char *name, const Module &m, const LowerOptions &opts) {
    if (opts.verify_each_pass) {
        verify(m);
    }
    if (opts.debug_level >= 2) {
        std::cerr << "==== IR after " << name << " ====\n" << m << "\n";
    }
}

}  // namespace

static Module lower_impl(const Module &input, const Target &target, const LowerOptions &opts) {
    target.check_supported();
    Module m = input;
    m.target = target;
    // 0. GPU loops written for an API the target does not enable run on the target's.
    m = retarget_gpu_api(m);
    after_pass("retarget-gpu-api", m, opts);
    // 1. Host/device copies, while the GPU loops are still in place.
    m = inject_host_dev_copies(m);
    after_pass("inject-host-dev-copies", m, opts);
    // 2. GPU loop nests become kernels and launches.
    m = offload_gpu_loops(m);
    after_pass("offload-gpu-loops", m, opts);
    // 3. Profiling probes (a no-op unless the target asks for profiling: Target::profiling).
    m = inject_profiling(m, opts.profiling);
    after_pass("inject-profiling", m, opts);
    return m;
}

Module lower(const Module &input, const Target &target, const LowerOptions &opts) {
    return with_large_stack([&]() { return lower_impl(input, target, opts); });
}

}  // namespace tally
