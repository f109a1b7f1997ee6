#include "validate/validate.h"
#include <gtest/gtest.h>
TEST(V, Smoke) { EXPECT_FALSE(mle::validate::Config::Defaults().regions.empty()); }
