// fast_p against KernelBench's own golden vectors and the four-task example, both in
// docs/result-schema.md (fast_p results).
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

// docs/result-schema.md's example: A correct at 1.5 (counts), B correct at 1.0 (a tie: does not count at
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

// The exact task-level bootstrap, by hand. Binomial(4, 0.25): P(0..4) = 0.3164, 0.4219, 0.2109,
// 0.0469, 0.0039; CDF 0.3164, 0.7383, 0.9492, 0.9961, 1 -> 2.5% quantile 0, 97.5% quantile 3.
// Binomial(5, 0.4): CDF 0.0778, 0.3370, 0.6826, 0.9130, 0.9898, 1 -> [0, 4/5].
// Binomial(20, 0.5): CDF(5) = 0.0207, CDF(6) = 0.0577 -> lo 6/20; by symmetry CDF(13) = 0.9423,
// CDF(14) = 0.9793 -> hi 14/20.
TEST(fast_p, task_bootstrap_interval_is_the_binomial_quantiles) {
  auto check = [](int k, int n, double lo, double hi) {
    const auto i = task_bootstrap_interval(k, n);
    EXPECT_DOUBLE_EQ(i.lo, lo) << k << "/" << n;
    EXPECT_DOUBLE_EQ(i.hi, hi) << k << "/" << n;
  };
  check(1, 4, 0.0, 0.75);
  check(2, 5, 0.0, 0.8);
  check(10, 20, 0.3, 0.7);
  check(0, 7, 0.0, 0.0); // no fast task in any resample
  check(7, 7, 1.0, 1.0);
  check(0, 0, 0.0, 1.0);
  // Large n does not underflow: 5000 of 10000 gives an interval around 0.5 of half-width about
  // 1.96 * sqrt(0.25 / 10000) = 0.0098.
  const auto big = task_bootstrap_interval(5000, 10000);
  EXPECT_NEAR(big.lo, 0.4902, 0.0002);
  EXPECT_NEAR(big.hi, 0.5098, 0.0002);
  EXPECT_THROW(task_bootstrap_interval(3, 2), std::invalid_argument);
}

// Noise-aware counting and near-ties on the library level. At p = 1 with min effect 3%:
// A 1.5 [1.2, 1.8] counts both ways; B 1.02 [0.99, 1.05] counts strictly only and is a near-tie
// both ways (interval contains 1, |0.02| <= 0.03); C 0.98 [0.96, 0.99] is a near-tie by the
// point rule only (|-0.02| <= 0.03). Strict fast 2/3, noise-aware 1/3.
TEST(fast_p, noise_aware_count_and_near_ties) {
  std::vector<task_outcome> t = {
      {"A", true, true, 1.5, 1.0}, {"B", true, true, 1.02, 1.0}, {"C", true, true, 0.98, 1.0}};
  t[0].speedup_ci95 = interval{1.2, 1.8};
  t[1].speedup_ci95 = interval{0.99, 1.05};
  t[2].speedup_ci95 = interval{0.96, 0.99};
  const auto s = score_fast_p(t, 1.0);
  EXPECT_EQ(s.fast, 2);
  ASSERT_TRUE(s.noise_aware.available);
  EXPECT_EQ(s.noise_aware.fast, 1);
  EXPECT_DOUBLE_EQ(s.noise_aware.fast_p_aligned, 1.0 / 3.0);
  ASSERT_EQ(s.near_ties.size(), 2u);
  EXPECT_EQ(s.near_ties[0].task, "B");
  EXPECT_TRUE(s.near_ties[0].interval_contains_p && s.near_ties[0].within_min_effect);
  EXPECT_EQ(s.near_ties[1].task, "C");
  EXPECT_FALSE(s.near_ties[1].interval_contains_p);
  EXPECT_TRUE(s.near_ties[1].within_min_effect);
  // Without C's interval the noise-aware count is withheld, not taken as 0.
  t[2].speedup_ci95.reset();
  const auto u = score_fast_p(t, 1.0);
  EXPECT_FALSE(u.noise_aware.available);
  EXPECT_EQ(u.noise_aware.reason, "1 of 3 correct timed tasks have no speedup interval (first: C)");
  fast_p_options opt;
  opt.no_interval_reason = "this format has no intervals";
  EXPECT_EQ(score_fast_p(t, 1.0, opt).noise_aware.reason, "this format has no intervals");
}

// A reader's explicit alignment wins over "has a baseline": a missing task with an unknown
// baseline stays aligned; a task with a baseline but an invalid reference is excluded.
TEST(fast_p, explicit_alignment_and_unjudged_tasks) {
  std::vector<task_outcome> t = {{"A", true, true, 2.0, 1.0}, {"M"}, {"R", true, false, 1.0}};
  t[1].exclusion = "";
  t[2].exclusion = "INVALID_REFERENCE: NaN in the reference";
  t[2].judged = false;
  const auto s = score_fast_p(t, 1.0);
  EXPECT_EQ(s.intended, 3);
  EXPECT_EQ(s.aligned, 2);
  EXPECT_EQ(s.missing, 1);
  EXPECT_EQ(s.unjudged, 1);
  EXPECT_EQ(s.incorrect, 0);
  EXPECT_DOUBLE_EQ(s.fast_p_aligned, 0.5);
  ASSERT_EQ(s.exclusions.size(), 1u);
  EXPECT_EQ(s.exclusions[0].second, "INVALID_REFERENCE: NaN in the reference");
  // Empty denominators give null fractions in JSON, never a made-up number.
  const auto e = score_fast_p(std::vector<task_outcome>{}, 1.0).to_json();
  EXPECT_TRUE(e["fast_p_aligned"].is_null());
  EXPECT_TRUE(e["wilson95_intended"].is_null());
}
