// Unit tests of src/ir/UniqueNames: Halide-style `$n` and kernel-style `_n` suffixes, names
// reserved by hand or from IR, and the prefix that bounds what is kept.

#include <string>

#include <gtest/gtest.h>

#include "ir/UniqueNames.h"
#include "tally/Error.h"

namespace tally {
namespace {

TEST(UniqueNames, BareNameFirstThenSuffixes) {
    UniqueNames names("$");
    EXPECT_EQ(names.make("r"), "r");
    EXPECT_EQ(names.make("r"), "r$1");
    EXPECT_EQ(names.make("r"), "r$2");
    EXPECT_EQ(names.make("s"), "s");
    EXPECT_TRUE(names.is_taken("r$2"));
}

TEST(UniqueNames, SkipsReservedNames) {
    UniqueNames names("_");
    names.reserve("k");
    names.reserve("k_1");
    names.reserve("k_3");
    EXPECT_EQ(names.make("k"), "k_2");
    EXPECT_EQ(names.make("k"), "k_4");
}

TEST(UniqueNames, ReservesTheNamesIRBindsAndUses) {
    UniqueNames names("$", "halide_");
    Expr used = Variable::make(Int(32), "halide_r$1");
    Stmt s = LetStmt::make("halide_r", IntImm::make(Int(32), 0), Evaluate::make(used));
    names.reserve_names_in(s);
    EXPECT_TRUE(names.is_taken("halide_r"));
    EXPECT_EQ(names.make("halide_r"), "halide_r$2");
}

TEST(UniqueNames, KeepsOnlyNamesWithThePrefix) {
    UniqueNames names("$", "halide_");
    names.reserve("x");
    EXPECT_FALSE(names.is_taken("x")) << "x cannot collide with a name made here";
    EXPECT_THROW(names.make("x"), InternalError);
}

}  // namespace
}  // namespace tally
