// CPU side of the co-located decode + training workload: the SM split it aims for, the choice
// among the driver's grants, the bitwise gate's shapes and the repeat seeds. Worked by hand.
#include <set>

#include <gtest/gtest.h>

#include "workloads/colocation.h"
#include "workloads/decode_engine_plan.h"

using namespace kg;

TEST(colocation, target_is_33_of_132_for_training_scaled_to_other_devices) {
  EXPECT_EQ(colocation_target(132).training, 33u);
  EXPECT_EQ(colocation_target(132).decode, 99u);
  EXPECT_EQ(colocation_target(114).training, 29u); // 28.5 rounds up
  EXPECT_EQ(colocation_target(114).decode, 85u);
  EXPECT_EQ(colocation_target(113).training, 28u); // 28.25
  EXPECT_EQ(colocation_target(8).training, 2u);
}

TEST(colocation, nearest_grant_weighs_both_groups) {
  // The H200 in 8-SM steps: asking 99 gets 104 + 28 (5 + 5 off), asking 96 gets 96 + 36 (3 + 3).
  const sm_split want{99, 33};
  std::vector<green_grant> g = {{99, 104, 28}, {96, 96, 36}};
  EXPECT_EQ(nearest_grant(g, want), 1u);
  // A tie keeps the earlier grant.
  g = {{99, 104, 28}, {94, 94, 38}};
  EXPECT_EQ(nearest_grant(g, want), 0u);
  // A grant that leaves SMs idle counts them against it: 96 + 30 is 3 + 3 off, 104 + 28 10.
  g = {{99, 104, 28}, {96, 96, 30}};
  EXPECT_EQ(nearest_grant(g, want), 1u);
  EXPECT_THROW(nearest_grant({}, want), std::invalid_argument);
}

TEST(colocation, bitwise_shapes_cover_every_batch_and_context_and_fit_the_engine) {
  const auto s = colocated_bitwise_shapes();
  ASSERT_EQ(s.size(), 12u);
  std::set<std::pair<int, int>> seen;
  for (const auto& x : s)
    seen.insert({x.batch, x.context});
  for (const int b : {1, 4, 8, 32})
    for (const int c : {512, 2048, 8192})
      EXPECT_EQ(seen.count({b, c}), 1u) << "batch " << b << ", context " << c;
  EXPECT_EQ(s.front().batch, 1);
  EXPECT_EQ(s.front().context, 512);
  EXPECT_EQ(s.back().batch, 32);
  EXPECT_EQ(s.back().context, 8192);
  // Each row needs its own slot holding context + 1 tokens (the decoded one).
  const decode_engine_config c;
  for (const auto& x : s) {
    EXPECT_LE(x.batch, c.max_batch);
    EXPECT_LT(x.context, c.max_context);
  }
}

TEST(colocation, repeat_seeds_are_distinct_and_not_the_searchs) {
  const auto s = repeat_arrival_seeds(20261129, 5);
  EXPECT_EQ(s, (std::vector<std::uint64_t>{20261130, 20261131, 20261132, 20261133, 20261134}));
  EXPECT_TRUE(repeat_arrival_seeds(1, 0).empty());
  EXPECT_THROW(repeat_arrival_seeds(1, -1), std::invalid_argument);
}
