// Unit tests of src/ir/Scope.h: bindings shadow and unshadow in order, with and without values.

#include <string>

#include <gtest/gtest.h>

#include "ir/Scope.h"
#include "tally/Error.h"

namespace tally {
namespace {

TEST(Scope, CountsShadowingBindings) {
    Scope<> s;
    EXPECT_FALSE(s.contains("x"));
    s.push("x");
    s.push("x");
    s.pop("x");
    EXPECT_TRUE(s.contains("x")) << "the outer binding of x is still open";
    s.pop("x");
    EXPECT_FALSE(s.contains("x"));
    s.push("y");
    s.clear();
    EXPECT_FALSE(s.contains("y"));
}

TEST(Scope, FindsTheInnermostValue) {
    Scope<int> s;
    EXPECT_EQ(s.find("x"), nullptr);
    s.push("x", 1);
    s.push("x", 2);
    ASSERT_NE(s.find("x"), nullptr);
    EXPECT_EQ(*s.find("x"), 2);
    s.pop("x");
    EXPECT_EQ(*s.find("x"), 1);
    EXPECT_TRUE(s.contains("x"));
    s.pop("x");
    EXPECT_EQ(s.find("x"), nullptr);
}

TEST(Scope, PoppingAnUnboundNameIsAnInternalError) {
    Scope<> counts;
    EXPECT_THROW(counts.pop("x"), InternalError);
    Scope<int> values;
    EXPECT_THROW(values.pop("x"), InternalError);
}

}  // namespace
}  // namespace tally
