#include <cmath>
#include <iostream>
#include <numeric>

#include <gtest/gtest.h>

#include "stats/bootstrap.h"
#include "stats/decision.h"
#include "stats/summary.h"
#include "base/rng.h"

using namespace kg;

TEST(summary, hand_computed) {
  const std::vector<double> x = {4, 1, 100, 3, 2};
  const auto s = summarize(x);
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_DOUBLE_EQ(s.mad, 1); // |x - 3| = 1, 2, 97, 0, 1
  EXPECT_DOUBLE_EQ(s.mean, 22);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  const std::vector<double> q = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(quantile_sorted(q, 0.25), 1.75); // type 7: 1 + 0.75 * (2 - 1)
  EXPECT_DOUBLE_EQ(median(q), 2.5);
  EXPECT_THROW(summarize(std::vector<double>{}), std::invalid_argument);
}

TEST(bootstrap, reproducible_for_a_seed) {
  rng r(1, 2);
  std::vector<double> x(200);
  for (auto& v : x)
    v = std::exp(r.normal());
  bootstrap_options a;
  a.resamples = 2000;
  const auto i1 = bootstrap_median(x, a), i2 = bootstrap_median(x, a);
  EXPECT_EQ(i1.lo, i2.lo);
  EXPECT_EQ(i1.hi, i2.hi);
  a.seed = 99;
  const auto i3 = bootstrap_median(x, a);
  EXPECT_TRUE(i3.lo != i1.lo || i3.hi != i1.hi);
  EXPECT_LE(i1.lo, i1.estimate);
  EXPECT_GE(i1.hi, i1.estimate);
}

TEST(bootstrap, fast_median_path_agrees_with_the_generic_path) {
  // Same replicate distribution by construction (both resample ranks uniformly); with many
  // resamples their percentile intervals agree closely.
  rng r(3, 4);
  std::vector<double> x(101);
  for (auto& v : x)
    v = r.normal();
  bootstrap_options o;
  o.method = ci_method::percentile;
  o.resamples = 20000;
  const auto fast = bootstrap_median(x, o);
  const auto slow = bootstrap(
      x, [](std::span<const double> v) { return median(v); }, o);
  EXPECT_DOUBLE_EQ(fast.estimate, slow.estimate);
  EXPECT_NEAR(fast.lo, slow.lo, 0.05);
  EXPECT_NEAR(fast.hi, slow.hi, 0.05);
}

// The acceptance criterion: the 95% interval of the median of a lognormal sample (n = 50) covers
// the true median (exp(0) = 1) in 93% to 97% of 1,000 replications.
TEST(bootstrap, median_interval_coverage_on_lognormal_samples) {
  for (ci_method m : {ci_method::percentile, ci_method::bca}) {
    rng r(2026, static_cast<std::uint64_t>(m));
    int covered = 0;
    bootstrap_options o;
    o.method = m;
    o.resamples = 2000;
    for (int rep = 0; rep < 1000; ++rep) {
      std::vector<double> x(50);
      for (auto& v : x)
        v = std::exp(r.normal());
      o.seed = static_cast<std::uint64_t>(rep);
      const auto ci = bootstrap_median(x, o);
      covered += ci.lo <= 1.0 && 1.0 <= ci.hi;
    }
    std::cout << ci_method_name(m) << " coverage: " << covered << "/1000\n";
    EXPECT_GE(covered, 930) << ci_method_name(m);
    EXPECT_LE(covered, 970) << ci_method_name(m);
  }
}

TEST(bootstrap, ratio_paired_and_geomean) {
  rng r(5, 6);
  std::vector<double> base(60), cand(60);
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double drift = 1.0 + 0.2 * r.uniform01(); // shared by both members of a pair
    base[i] = 10.0 * drift;
    cand[i] = 11.0 * drift;
  }
  const auto paired = bootstrap_paired_ratio(cand, base);
  EXPECT_DOUBLE_EQ(paired.estimate, 1.1);
  EXPECT_NEAR(paired.lo, 1.1, 1e-12); // drift cancels exactly within pairs
  EXPECT_NEAR(paired.hi, 1.1, 1e-12);
  const auto unpaired = bootstrap_ratio_of_medians(cand, base);
  EXPECT_NEAR(unpaired.estimate, 1.1, 0.02);
  EXPECT_LT(unpaired.lo, 1.1);
  EXPECT_GT(unpaired.hi, 1.1);
  EXPECT_GT(unpaired.hi - unpaired.lo, 0.01); // drift shows up when pairs are ignored
  const std::vector<double> g = {2, 8, 4};
  EXPECT_NEAR(bootstrap_geomean(g).estimate, 4.0, 1e-12);
  EXPECT_THROW(bootstrap_geomean(std::vector<double>{1, -1}), std::invalid_argument);
  EXPECT_THROW(bootstrap_paired_ratio(cand, std::vector<double>{1}), std::invalid_argument);
}

TEST(decision, boundaries) {
  EXPECT_EQ(decide(0.90, 0.969), decision::faster);
  EXPECT_EQ(decide(0.90, 0.97), decision::ambiguous); // touches the minimum effect
  EXPECT_EQ(decide(0.97, 1.03), decision::same);      // inside +-3%, edges included
  EXPECT_EQ(decide(0.969, 1.0), decision::ambiguous);
  EXPECT_EQ(decide(1.031, 1.2), decision::slower);
  EXPECT_EQ(decide(1.03, 1.2), decision::ambiguous);
  EXPECT_EQ(decide(0.5, 1.5), decision::ambiguous);
  EXPECT_EQ(decide(0.98, 0.99, 0.0), decision::faster); // no minimum effect: any clear gap
  EXPECT_THROW(decide(1.1, 1.0), std::invalid_argument);
}

// Ratio of means of two independent samples (the co-located workload's fraction of solo over
// repeated traces). Hand-computed: with den constant the replicates are the resampled means of
// num, whose extremes are certain to hold more than 2.5% of 10000 resamples each, so the
// percentile interval is exactly [min, max]; BCa's acceleration comes from the two-sample
// jackknife of means.
TEST(bootstrap, ratio_of_means_hand_computed) {
  const std::vector<double> num3 = {10, 20, 30}, den2 = {4, 6};
  EXPECT_DOUBLE_EQ(bootstrap_ratio_of_means(num3, den2).estimate, 20.0 / 5.0);

  bootstrap_options pct;
  pct.method = ci_method::percentile;
  // Means of two draws from {1, 3}: 1, 2, 3 with chances 1/4, 1/2, 1/4; over den's mean 2.
  const std::vector<double> a = {1, 3}, b = {2, 2};
  const auto ab = bootstrap_ratio_of_means(a, b, pct);
  EXPECT_DOUBLE_EQ(ab.estimate, 1.0);
  EXPECT_DOUBLE_EQ(ab.lo, 0.5);
  EXPECT_DOUBLE_EQ(ab.hi, 1.5);
  // Means of three draws from {1, 2, 6}: 1 and 6 each with chance 1/27 (3.7% > 2.5%).
  const std::vector<double> c = {1, 2, 6}, one = {1, 1};
  const auto cp = bootstrap_ratio_of_means(c, one, pct);
  EXPECT_DOUBLE_EQ(cp.estimate, 3.0);
  EXPECT_DOUBLE_EQ(cp.lo, 1.0);
  EXPECT_DOUBLE_EQ(cp.hi, 6.0);
  // Jackknife: leave-one-out ratios 4, 3.5, 1.5 (num) and 3, 3 (den), mean 3; deviations -1,
  // -0.5, 1.5, 0, 0: a = sum d^3 / (6 (sum d^2)^1.5) = 2.25 / (6 * 3.5^1.5).
  const auto cb = bootstrap_ratio_of_means(c, one);
  EXPECT_NEAR(cb.acceleration, 2.25 / (6.0 * std::pow(3.5, 1.5)), 1e-15);
  EXPECT_GE(cb.lo, 1.0);
  EXPECT_LE(cb.hi, 6.0);
  EXPECT_LE(cb.lo, cb.estimate);
  EXPECT_GE(cb.hi, cb.estimate);
  // Symmetric leave-one-out deviations: no acceleration.
  EXPECT_DOUBLE_EQ(bootstrap_ratio_of_means(a, b).acceleration, 0.0);

  EXPECT_THROW(bootstrap_ratio_of_means(std::vector<double>{1}, b), std::invalid_argument);
  EXPECT_THROW(bootstrap_ratio_of_means(a, std::vector<double>{1, 0}), std::invalid_argument);
}

TEST(bootstrap, ratio_of_means_reproducible_for_a_seed) {
  rng r(3, 4);
  std::vector<double> solo(5), shared(5);
  for (auto& v : solo)
    v = 2600 + 40 * r.normal();
  for (auto& v : shared)
    v = 1900 + 60 * r.normal();
  const auto i1 = bootstrap_ratio_of_means(shared, solo),
             i2 = bootstrap_ratio_of_means(shared, solo);
  EXPECT_EQ(i1.lo, i2.lo);
  EXPECT_EQ(i1.hi, i2.hi);
  EXPECT_LT(i1.lo, i1.estimate);
  EXPECT_GT(i1.hi, i1.estimate);
  bootstrap_options other;
  other.seed = 7;
  const auto i3 = bootstrap_ratio_of_means(shared, solo, other);
  EXPECT_EQ(i3.estimate, i1.estimate);
  EXPECT_TRUE(i3.lo != i1.lo || i3.hi != i1.hi);
}
