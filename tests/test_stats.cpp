#include <cmath>

#include <gtest/gtest.h>

#include "stats/proportion.h"

using namespace kg;

// Published values: Wilson 95% for 5/10 is [0.2366, 0.7634]; Clopper-Pearson 95% for 5/10 is
// [0.1871, 0.8129]; for 0/n the exact upper bound is 1 - 0.025^(1/n).
TEST(proportion, wilson_matches_published_values) {
  const auto w = wilson_interval(5, 10);
  EXPECT_NEAR(w.lo, 0.2366, 1e-4);
  EXPECT_NEAR(w.hi, 0.7634, 1e-4);
  const auto z = wilson_interval(0, 20);
  EXPECT_DOUBLE_EQ(z.lo, 0.0);
  EXPECT_NEAR(z.hi, 0.1611, 1e-4);
}

TEST(proportion, clopper_pearson_matches_published_values) {
  const auto c = clopper_pearson_interval(5, 10);
  EXPECT_NEAR(c.lo, 0.1871, 1e-4);
  EXPECT_NEAR(c.hi, 0.8129, 1e-4);
  const auto zero = clopper_pearson_interval(0, 108);
  EXPECT_DOUBLE_EQ(zero.lo, 0.0);
  EXPECT_NEAR(zero.hi, 1.0 - std::pow(0.025, 1.0 / 108.0), 1e-12);
  const auto all = clopper_pearson_interval(108, 108);
  EXPECT_DOUBLE_EQ(all.hi, 1.0);
  EXPECT_NEAR(all.lo, std::pow(0.025, 1.0 / 108.0), 1e-12);
}

TEST(proportion, rejects_bad_arguments) {
  EXPECT_THROW(wilson_interval(3, 2), std::invalid_argument);
  EXPECT_THROW(clopper_pearson_interval(1, 2, 1.5), std::invalid_argument);
  const auto empty = wilson_interval(0, 0);
  EXPECT_EQ(empty.lo, 0.0);
  EXPECT_EQ(empty.hi, 1.0);
}
