// retarget-gpu-api: runs GPU loops written for one device API on the target's.
//
// Why: Halide writes the device API into the statement it prints (`gpu_block<CUDA>`, the
// `halide_cuda_device_interface()` of its copies), so a pipeline lowered for CUDA or OpenCL
// would otherwise need its text edited before it runs on Tally's Vulkan back end, and Halide 14
// has no Vulkan at all. The target given to Tally says where the pipeline is to run; the text
// says where Halide meant it to.
//
// Where it runs: first in lower(), before inject-host-dev-copies, so every later pass sees one
// API per module.
//
// What it does: an API the text names (on a loop, or as the interface of a device call) that the
// target does not enable is replaced everywhere by the target's GPU API (Target::gpu_api()),
// when Tally has a back end for it, and the module gets a note saying so (Module::notes: the
// drivers print it, and the profiler's report shows it next to the target). An API the target
// enables stays as written. Nothing can be retargeted when
//  - the target has no GPU API Tally can run (the error names the text's API and the target), or
//  - the text is past Halide's own offload for that API: its kernels are compiled already
//    (`halide_<api>_run` launches), so the error names both APIs and asks for the statement
//    before offload (Halide's compile_to_conceptual_stmt), which Tally offloads itself.
// Default_GPU and loops without an API are the target's already; they are left alone.
//
// Running it again changes nothing: after one run the text names only enabled APIs.

#include "tally/Passes.h"

#include <map>
#include <set>
#include <string>

#include "ir/RuntimeCalls.h"
#include "tally/Error.h"
#include "tally/IRMutator.h"
#include "tally/IRVisitor.h"

namespace tally {

namespace {

/** Does `api` name a real GPU API (not None, Host or Default_GPU)? */
bool is_named_gpu_api(DeviceAPI api) {
    return api != DeviceAPI::None && api != DeviceAPI::Host && api != DeviceAPI::DefaultGPU;
}

/** The named APIs of a module, each with where it was first seen, and the APIs it launches
 * compiled kernels on. */
class FindApis : public IRVisitor {
public:
    std::map<DeviceAPI, std::string> named;
    std::map<DeviceAPI, std::string> launched;
    std::string func;

    void visit(const For *op) override {
        if (is_named_gpu_api(op->device_api)) {
            named.emplace(op->device_api, "loop '" + op->name + "' in function '" + func + "'");
        }
        IRVisitor::visit(op);
    }
    void visit(const Call *op) override {
        DeviceAPI api = device_interface_api(Expr(op));
        if (is_named_gpu_api(api)) {
            named.emplace(api, "call " + op->name + "() in function '" + func + "'");
        }
        api = launch_api(op);
        if (is_named_gpu_api(api)) {
            launched.emplace(api, "call " + op->name + " in function '" + func + "'");
        }
        IRVisitor::visit(op);
    }
};

/** Replaces the APIs of `from` by `to`: loop APIs and device interface calls. */
class Retarget : public IRMutator {
public:
    Retarget(const std::set<DeviceAPI> &from, DeviceAPI to) : from(from), to(to) {}

    Stmt visit(const For *op) override {
        Stmt s = IRMutator::visit(op);
        if (!from.count(op->device_api)) {
            return s;
        }
        const For *f = s.as<For>();
        return For::make(f->name, f->min, f->extent, f->for_type, to, f->body);
    }
    Expr visit(const Call *op) override {
        if (from.count(device_interface_api(Expr(op)))) {
            return device_interface_call(to);
        }
        return IRMutator::visit(op);
    }

private:
    const std::set<DeviceAPI> &from;
    DeviceAPI to;
};

}  // namespace

Module retarget_gpu_api(const Module &m) {
    FindApis find;
    for (const LoweredFunc &f : m.functions) {
        find.func = f.name;
        f.body.accept(&find);
    }
    std::set<DeviceAPI> from;
    std::string first_seen;
    for (const auto &[api, where] : find.named) {
        if (!m.target.enables(api)) {
            from.insert(api);
            if (first_seen.empty()) {
                first_seen = where;
            }
        }
    }
    if (from.empty()) {
        return m;
    }
    std::string names;
    for (DeviceAPI api : from) {
        names += (names.empty() ? "" : " and ") + std::string(device_api_name(api));
    }
    const DeviceAPI to = m.target.gpu_api();
    user_assert(to != DeviceAPI::None && has_gpu_backend(to))
        << "retarget-gpu-api: the text runs GPU code on " << names << " (" << first_seen
        << "), which target '" << m.target.to_string() << "' does not enable, and "
        << (to == DeviceAPI::None
                ? std::string("the target names no GPU API")
                : std::string("Tally has no back end for its ") + device_api_name(to))
        << " to run it on instead: add cuda, opencl or vulkan to the target";
    for (DeviceAPI api : from) {
        auto l = find.launched.find(api);
        user_assert(l == find.launched.end())
            << "retarget-gpu-api: the text launches kernels Halide compiled for "
            << device_api_name(api) << " (" << l->second << "), but target '"
            << m.target.to_string() << "' runs GPU code on " << device_api_name(to)
            << "; compiled kernels cannot be retargeted: give Tally Halide's statement before "
            << "its GPU offload (compile_to_conceptual_stmt), or a target with "
            << runtime_api_name(api);
    }
    Module out = m;
    Retarget r(from, to);
    for (LoweredFunc &f : out.functions) {
        f.body = r.mutate(f.body);
    }
    out.notes.push_back("GPU code written for " + names + " runs on " + device_api_name(to) +
                        ", the target's GPU API");
    return out;
}

}  // namespace tally
