// Does not compile, by design (layering.RuntimeSignatureMismatchFails): halide_copy_to_host takes
// no device interface, so a list entry saying it does disagrees with tally_runtime.h.
#include "ir/RuntimeSignatureCheck.h"

TALLY_CHECK_RUNTIME_SIGNATURE(halide_copy_to_host, "i:UBD")
