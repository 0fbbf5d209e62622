// Module lookups.

#include "tally/Module.h"

namespace tally {

const char *linkage_name(LinkageType l) {
    switch (l) {
    case LinkageType::External:
        return "external";
    case LinkageType::ExternalPlusMetadata:
        return "external_plus_metadata";
    case LinkageType::Internal:
        return "internal";
    }
    return "?";
}

LoweredFunc *Module::find_function(const std::string &n) {
    for (LoweredFunc &f : functions) {
        if (f.name == n) {
            return &f;
        }
    }
    return nullptr;
}

const LoweredFunc *Module::find_function(const std::string &n) const {
    for (const LoweredFunc &f : functions) {
        if (f.name == n) {
            return &f;
        }
    }
    return nullptr;
}

const Kernel *Module::find_kernel(const std::string &n) const {
    for (const Kernel &k : kernels) {
        if (k.name == n) {
            return &k;
        }
    }
    return nullptr;
}

}  // namespace tally
