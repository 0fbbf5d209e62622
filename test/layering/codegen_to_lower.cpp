// Pretends to be a file of the codegen layer that runs the lowering passes. It must not
// compile: see test/layering/CMakeLists.txt.
#include "tally/Lower.h"
