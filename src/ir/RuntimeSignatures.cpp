// Every runtime entry point of ir/RuntimeCalls.h, checked against its declaration in
// runtime/include/tally_runtime.h while the library compiles (ir/RuntimeSignatureCheck.h says
// how). A list entry that drifts from the header fails the build here, naming the function.

#include "ir/RuntimeCalls.h"
#include "ir/RuntimeSignatureCheck.h"

TALLY_RUNTIME_SYMBOLS(TALLY_CHECK_RUNTIME_SIGNATURE)
