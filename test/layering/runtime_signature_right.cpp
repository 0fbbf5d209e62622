// Compiles (layering.RuntimeSignatureMatchCompiles): the same check with the right signatures,
// so that the failure of runtime_signature_wrong.cpp is the mismatch, not a broken setup. The
// user context must come first; a void * elsewhere is a plain pointer.
#include "ir/RuntimeSignatureCheck.h"

TALLY_CHECK_RUNTIME_SIGNATURE(halide_copy_to_host, "i:UB")
TALLY_CHECK_RUNTIME_SIGNATURE(halide_copy_to_device, "i:UBD")
TALLY_CHECK_RUNTIME_SIGNATURE(halide_device_free_as_destructor, "v:Up")
TALLY_CHECK_RUNTIME_SIGNATURE(halide_string_to_string, "p:pps")
static_assert(!::tally::runtime_signature::matches("v:pU", "v:VV"), "U only first");
static_assert(!::tally::runtime_signature::matches("i:UB", "i:VBD"), "arity");
static_assert(!::tally::runtime_signature::matches("i:Ui", "i:Vu"), "signedness");
