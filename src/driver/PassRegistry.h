/** \file
 * The table from CLI pass names (kebab-case, the same as the pass's file and test folder) to
 * pass entry points, used by tally-opt and the Python bindings.
 */
#ifndef TALLY_DRIVER_PASSREGISTRY_H
#define TALLY_DRIVER_PASSREGISTRY_H

#include <functional>
#include <string>
#include <vector>

#include "tally/Module.h"

namespace tally {

struct PassInfo {
    const char *name;
    const char *description;
    /** Runs the pass on a module; the target is the module's unless overridden by the caller. */
    std::function<Module(const Module &)> run;
};

/** Every registered pass, in alphabetical order. */
const std::vector<PassInfo> &registered_passes();

/** The pass with this CLI name, or nullptr. */
const PassInfo *find_pass(const std::string &name);

}  // namespace tally

#endif  // TALLY_DRIVER_PASSREGISTRY_H
