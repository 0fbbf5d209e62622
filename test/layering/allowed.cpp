// A file of the text layer that includes only what the text layer may use: its own headers, the
// IR's internal and public headers, and the runtime's C header. It must compile: see
// test/layering/CMakeLists.txt.
#include "ir/Scope.h"
#include "tally/IRPrinter.h"
#include "tally/Parser.h"
#include "tally_runtime.h"
#include "text/Lexer.h"
