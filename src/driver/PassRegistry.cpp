// The pass registry: one line per pass, alphabetical.

#include "driver/PassRegistry.h"

#include "tally/Verifier.h"

namespace tally {

const std::vector<PassInfo> &registered_passes() {
    static const std::vector<PassInfo> passes = {
        {"no-op", "returns the module unchanged", [](const Module &m) { return m; }},
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
