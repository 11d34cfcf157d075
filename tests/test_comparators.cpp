#include <cmath>

#include <gtest/gtest.h>

#include "oracles/comparators.h"

using namespace kg;

namespace {
host_tensor f32(std::vector<double> v) {
  return host_tensor::from_doubles(dtype::float32, {static_cast<std::int64_t>(v.size())}, v);
}
host_tensor f64(std::vector<double> v) {
  return host_tensor::from_doubles(dtype::float64, {static_cast<std::int64_t>(v.size())}, v);
}
} // namespace

TEST(allclose, kernelbench_scales_rtol_by_the_candidate) {
  // |10 - 11.05| = 1.05. Reference side: 0.1 * 10 = 1.0 -> fails; candidate side (KernelBench's
  // torch.allclose(ref, cand)): 0.1 * 11.05 = 1.105 -> passes.
  const auto ref = f64({10.0}), cand = f64({11.05});
  EXPECT_FALSE(compare_allclose(ref, cand, 0.0, 0.1, tolerance_side::reference).pass);
  EXPECT_TRUE(compare_allclose(ref, cand, 0.0, 0.1, tolerance_side::candidate).pass);
}

TEST(allclose, nan_fails_equal_infinities_pass) {
  EXPECT_FALSE(
      compare_allclose(f32({1, NAN}), f32({1, NAN}), 1, 1, tolerance_side::reference).pass);
  EXPECT_TRUE(
      compare_allclose(f32({INFINITY}), f32({INFINITY}), 0, 0, tolerance_side::reference).pass);
  EXPECT_FALSE(
      compare_allclose(f32({INFINITY}), f32({-INFINITY}), 1, 1, tolerance_side::reference).pass);
}

TEST(allclose, statistics_and_first_mismatch) {
  const auto r =
      compare_allclose(f64({1, 2, 3, 4}), f64({1, 2.5, 3, 3}), 0.1, 0.0, tolerance_side::reference);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.reason, "tolerance");
  EXPECT_EQ(r.first_mismatch, 1);
  EXPECT_EQ(r.mismatches, 2);
  EXPECT_DOUBLE_EQ(r.max_abs_err, 1.0);
  EXPECT_DOUBLE_EQ(r.max_rel_err, 0.25);
  EXPECT_DOUBLE_EQ(r.matched_ratio, 0.5);
  // ||(0, .5, 0, 1)|| / ||(1, 2, 3, 4)|| = sqrt(1.25 / 30)
  EXPECT_NEAR(r.relative_norm_err, std::sqrt(1.25 / 30.0), 1e-15);
}

TEST(allclose, shape_mismatch_fails) {
  const auto r = compare_allclose(f32({1, 2}), f32({1, 2, 3}), 1, 1, tolerance_side::reference);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.reason, "shape_mismatch");
}

TEST(allclose, first_mismatch_alone_stops_where_the_full_comparison_counts_its_first) {
  // Hand-made pairs, each element chosen for a branch of the rule: within atol, within rtol on
  // the reference side only, NaN, equal and opposite infinities, a finite value against an
  // infinite one, and a per-element extra atol that admits element 5 only.
  const auto ref = f64({1.0, 10.0, NAN, INFINITY, INFINITY, 2.0, 3.0});
  const auto cand = f64({1.05, 10.9, NAN, INFINITY, -INFINITY, 2.5, 4.0});
  const auto extra = f64({0, 0, 0, 0, 0, 0.45, 0});
  for (const auto side : {tolerance_side::reference, tolerance_side::candidate})
    for (const host_tensor* x : {static_cast<const host_tensor*>(nullptr), &extra})
      for (int from = 0; from < 7; ++from) { // every suffix: each element in turn comes first
        std::vector<double> r, c, e;
        for (int i = from; i < 7; ++i) {
          r.push_back(ref.at(i));
          c.push_back(cand.at(i));
          e.push_back(extra.at(i));
        }
        const auto er = f64(e);
        const host_tensor* xe = x ? &er : nullptr;
        const auto full = compare_allclose(f64(r), f64(c), 0.1, 0.1, side, xe);
        EXPECT_EQ(first_allclose_mismatch(f64(r), f64(c), 0.1, 0.1, side, xe), full.first_mismatch)
            << "from " << from;
      }
  // By hand, reference side, no extra term: 1 passes (0.05 <= 0.1 + 0.1), 10.9 passes
  // (0.9 <= 0.1 + 1.0), NaN fails first.
  EXPECT_EQ(first_allclose_mismatch(ref, cand, 0.1, 0.1, tolerance_side::reference), 2);
  EXPECT_EQ(first_allclose_mismatch(f64({1, 2}), f64({1, 2}), 0, 0, tolerance_side::reference), -1);
  EXPECT_EQ(first_allclose_mismatch(f64({1, 2}), f64({1}), 1, 1, tolerance_side::reference), 0);
}

TEST(matched_ratio, sol_lets_one_percent_be_wrong_by_any_amount) {
  std::vector<double> ref(100, 1.0), one(100, 1.0), two(100, 1.0);
  one[17] = 1e6;
  two[17] = two[50] = -1e6;
  const auto r1 = compare_matched_ratio(f32(ref), f32(one), 0.01, 0.01, 0.99);
  EXPECT_TRUE(r1.pass); // 99/100 matched
  EXPECT_DOUBLE_EQ(r1.matched_ratio, 0.99);
  EXPECT_EQ(r1.first_mismatch, 17);
  const auto r2 = compare_matched_ratio(f32(ref), f32(two), 0.01, 0.01, 0.99);
  EXPECT_FALSE(r2.pass);
  EXPECT_EQ(r2.reason, "matched_ratio");
}

TEST(matched_ratio, element_rule_uses_reference_magnitude) {
  // bound = 0.01 + 0.01 * |ref| = 0.03 for ref 2: 2.029 passes, 2.031 fails.
  EXPECT_TRUE(compare_matched_ratio(f32({2.0}), f32({2.029}), 0.01, 0.01, 1.0).pass);
  EXPECT_FALSE(compare_matched_ratio(f32({2.0}), f32({2.031}), 0.01, 0.01, 1.0).pass);
}

TEST(matched_ratio, any_nonfinite_fails_even_within_the_slack) {
  std::vector<double> ref(200, 1.0), cand(200, 1.0);
  cand[3] = NAN;
  const auto r = compare_matched_ratio(f32(ref), f32(cand), 0.01, 0.01, 0.99);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.reason, "nonfinite");
  ref[4] = INFINITY;
  EXPECT_EQ(compare_matched_ratio(f32(ref), f32(ref), 0.01, 0.01, 0.99).reason, "nonfinite");
  std::vector<double> ninf(200, 1.0);
  ninf[9] = -INFINITY;
  EXPECT_FALSE(compare_matched_ratio(f32(ninf), f32(ninf), 0.01, 0.01, 0.99).pass);
  EXPECT_TRUE(compare_matched_ratio(f32(ninf), f32(ninf), 0.01, 0.01, 0.99, true).pass);
}

TEST(matched_ratio, all_zero_output_fails_against_a_nonzero_reference) {
  // Every element is within atol of zero, so only the all-zero check can reject it.
  std::vector<double> ref(100, 0.001), zeros(100, 0.0);
  const auto r = compare_matched_ratio(f32(ref), f32(zeros), 0.01, 0.01, 0.99);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.reason, "all_zero");
  EXPECT_TRUE(compare_matched_ratio(f32(zeros), f32(zeros), 0.01, 0.01, 0.99).pass);
}

TEST(matched_ratio, dtype_is_checked) {
  const auto h = f32({1.0}).cast(dtype::float16);
  EXPECT_EQ(compare_matched_ratio(f32({1.0}), h, 0.01, 0.01, 0.99).reason, "dtype_mismatch");
}

TEST(both_exceed, flashinfer_fails_only_when_both_tolerances_are_exceeded) {
  // abs 0.5 > 0.01 but rel 0.005 < 0.01: passes.
  EXPECT_TRUE(compare_both_exceed(f64({100.0}), f64({100.5}), 0.01, 0.01, 1.0).pass);
  // rel 4 > 0.01 but abs 0.004 < 0.01: passes.
  EXPECT_TRUE(compare_both_exceed(f64({0.001}), f64({0.005}), 0.01, 0.01, 1.0).pass);
  // abs 0.02 and rel 0.02 both exceed: fails.
  EXPECT_FALSE(compare_both_exceed(f64({1.0}), f64({1.02}), 0.01, 0.01, 1.0).pass);
  // reference 0: any abs error above atol fails (relative error is infinite).
  EXPECT_FALSE(compare_both_exceed(f64({0.0}), f64({0.02}), 0.01, 0.01, 1.0).pass);
  EXPECT_FALSE(compare_both_exceed(f64({1.0}), f64({NAN}), 0.01, 0.01, 1.0).pass);
  // 100% must match by default, but the ratio is configurable.
  EXPECT_TRUE(compare_both_exceed(f64({1.0, 1.0}), f64({1.0, 9.0}), 0.01, 0.01, 0.5).pass);
}

TEST(bitwise, compares_bytes) {
  EXPECT_TRUE(compare_bitwise(f32({1.5, -2}), f32({1.5, -2})).pass);
  EXPECT_FALSE(compare_bitwise(f32({0.0}), f32({-0.0})).pass); // equal values, other bytes
  EXPECT_EQ(compare_bitwise(f32({1.0}), f64({1.0})).reason, "dtype_mismatch");
}

TEST(relative_norm, against_fp64_oracle) {
  // ||(0, 0.05)|| / ||(3, 4)|| = 0.01
  const auto oracle = f64({3.0, 4.0}), cand = f64({3.0, 4.05});
  EXPECT_TRUE(compare_relative_norm(oracle, cand, 0.0101).pass);
  EXPECT_FALSE(compare_relative_norm(oracle, cand, 0.0099).pass);
  EXPECT_FALSE(compare_relative_norm(oracle, f64({3.0, INFINITY}), 1.0).pass);
}

TEST(oracle_bound, tolerance_derives_from_the_reference_error) {
  // Oracle (1, -2); a float32 reference 2^-20 above it at the first element. Then
  // atol = max(2 * 2^-20, 4 * 2^-24 * 2) = 2^-19 and rtol = 4 * 2^-24 = 2^-22, so the bound at
  // the first element is 2^-19 + 2^-22.
  const auto oracle = f64({1.0, -2.0});
  const double e = std::ldexp(1.0, -20);
  auto f32_at = [](double first) {
    host_tensor t(dtype::float32, {2});
    t.set(0, first);
    t.set(1, -2.0);
    return t;
  };
  const auto ref = f32_at(1.0 + e);
  const auto tol = oracle_bound_tolerance(ref, oracle, 2.0, 4.0);
  EXPECT_DOUBLE_EQ(tol.reference_error, e);
  EXPECT_DOUBLE_EQ(tol.atol, 2 * e);
  EXPECT_DOUBLE_EQ(tol.rtol, std::ldexp(1.0, -22));
  comparator_spec spec;
  spec.kind = comparator_kind::oracle_bound;
  EXPECT_TRUE(compare(spec, ref, ref, &oracle).pass);                  // the reference itself
  EXPECT_TRUE(compare(spec, ref, f32_at(1.0 + 2 * e), &oracle).pass);  // error 2^-19: inside
  EXPECT_FALSE(compare(spec, ref, f32_at(1.0 + 3 * e), &oracle).pass); // 1.5 * 2^-19: outside
  EXPECT_THROW(compare(spec, ref, ref, nullptr), std::invalid_argument);
}
