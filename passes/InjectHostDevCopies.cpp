// Placeholder: returns its input until the pass lands.

#include "InjectHostDevCopies.h"

namespace tally {

Module inject_host_dev_copies(const Module &m) { return m; }

}  // namespace tally
