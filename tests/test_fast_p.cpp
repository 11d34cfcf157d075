// fast_p against KernelBench's own golden vectors (peers.md) and the four-task example of
// targets.md section 2.
#include <gtest/gtest.h>

#include "reports/fast_p.h"

using namespace kg;

namespace {
std::vector<task_outcome> from_vectors(const std::vector<int>& correct,
                                       const std::vector<double>& baseline,
                                       const std::vector<double>& actual) {
  std::vector<task_outcome> t;
  for (std::size_t i = 0; i < correct.size(); ++i)
    t.push_back({"t" + std::to_string(i), true, correct[i] == 1, baseline[i], actual[i]});
  return t;
}
} // namespace

TEST(fast_p, kernelbench_golden_vectors_one) {
  const auto t =
      from_vectors({1, 0, 1, 1, 0}, {0.1, 0.15, 0.2, 0.05, 0.3}, {0.2, 0.15, 0.3, 0.01, 0.2});
  EXPECT_NEAR(*geomean_speedup(t), 1.185631101, 1e-9);
  EXPECT_DOUBLE_EQ(score_fast_p(t, 1.0).fast_p_aligned, 0.2);
  EXPECT_DOUBLE_EQ(score_fast_p(t, 0.5).fast_p_aligned, 0.4);
}

TEST(fast_p, kernelbench_golden_vectors_two) {
  const auto t = from_vectors({1, 1, 1, 1, 0}, {0.24, 0.31, 100.0, 0.0001, 0.3},
                              {0.3, 0.3, 200.0, 0.0001, 0.3});
  EXPECT_NEAR(*geomean_speedup(t), 0.801816719, 1e-9);
  EXPECT_DOUBLE_EQ(score_fast_p(t, 1.0).fast_p_aligned, 0.2);
  EXPECT_DOUBLE_EQ(score_fast_p(t, 0.5).fast_p_aligned, 0.6);
}

// targets.md section 2: A correct at 1.5 (counts), B correct at 1.0 (a tie: does not count at
// p = 1), C incorrect, D no result. fast_1 = 1/4; D is missing, not a measured failure.
TEST(fast_p, strict_tie_and_missing_results) {
  const std::vector<task_outcome> t = {{"A", true, true, 1.5, 1.0},
                                       {"B", true, true, 1.0, 1.0},
                                       {"C", true, false, 1.0, 0.5},
                                       {"D", false, false, 1.0, std::nullopt}};
  const auto s = score_fast_p(t, 1.0);
  EXPECT_EQ(s.fast, 1);
  EXPECT_EQ(s.intended, 4);
  EXPECT_EQ(s.aligned, 4);
  EXPECT_DOUBLE_EQ(s.fast_p_intended, 0.25);
  EXPECT_DOUBLE_EQ(s.fast_p_aligned, 0.25);
  EXPECT_EQ(s.missing, 1);
  EXPECT_EQ(s.incorrect, 1);
  EXPECT_EQ(s.correct, 2);
  EXPECT_LE(s.ci_intended.lo, 0.25);
  EXPECT_GE(s.ci_intended.hi, 0.25);
}

TEST(fast_p, tasks_without_a_baseline_leave_the_aligned_denominator_with_a_reason) {
  const std::vector<task_outcome> t = {{"A", true, true, 2.0, 1.0},
                                       {"L4", true, true, std::nullopt, 1.0},
                                       {"B", true, true, 1.0, 2.0}};
  const auto s = score_fast_p(t, 1.0);
  EXPECT_EQ(s.intended, 3);
  EXPECT_EQ(s.aligned, 2);
  EXPECT_DOUBLE_EQ(s.fast_p_aligned, 0.5);
  EXPECT_DOUBLE_EQ(s.fast_p_intended, 1.0 / 3.0);
  ASSERT_EQ(s.exclusions.size(), 1u);
  EXPECT_EQ(s.exclusions[0].first, "L4");
  EXPECT_NE(s.exclusions[0].second.find("no baseline"), std::string::npos);
  EXPECT_EQ(s.to_json()["exclusions"][0]["task"], "L4");
  EXPECT_FALSE(geomean_speedup(std::vector<task_outcome>{}).has_value());
}
