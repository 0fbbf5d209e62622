// Pretends to be a file of the text layer that reaches up into code generation. It must not
// compile: see test/layering/CMakeLists.txt.
#include "codegen/CodeGen_Host.h"
