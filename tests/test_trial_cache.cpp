// The CPU side of strict trials: timing's variant sets and the condition term of the tolerance,
// against values worked out by hand.
#include <cmath>

#include <gtest/gtest.h>

#include "oracles/comparators.h"
#include "oracles/task_oracles.h"
#include "suite/task_catalog.h"
#include "sandbox/trial_cache.h"

using namespace kg;

namespace {
task_def task(const char* id) {
  return load_task(std::string(KG_SOURCE_DIR) + "/data/tasks/" + id + ".json");
}
} // namespace

// A variant keeps the first eighth of every activation and redraws exactly one block of an eighth.
TEST(trial_cache, a_variant_shares_the_first_elements_and_differs_in_one_block) {
  const auto t = task("softmax_lastdim");
  const auto& shape = t.shapes.front();
  const auto base = make_task_inputs(t, shape, 11);
  auto v = base;
  apply_variant(t, v, 99);
  const auto& a = base[0];
  const auto& b = v[0];
  const std::int64_t n = a.numel(), len = n / 8;
  for (std::int64_t i = 0; i < len; ++i)
    ASSERT_EQ(a.at(i), b.at(i)) << i;
  std::int64_t first = -1, last = -1, changed = 0;
  for (std::int64_t i = 0; i < n; ++i)
    if (a.at(i) != b.at(i)) {
      if (first < 0) first = i;
      last = i;
      ++changed;
    }
  ASSERT_GE(first, len);
  EXPECT_LE(last - first + 1, len); // one block
  EXPECT_GT(changed, len * 9 / 10); // N(0,1) redraws all but never-equal values
  auto w = base;
  apply_variant(t, w, 100);
  EXPECT_NE(w[0].bytes, v[0].bytes); // another variant seed, another block or values
}

// exp: perturbing x by u|x| moves exp(x) by exp(x) u |x| to first order; the term is 8x the larger
// of two such moves, i.e. 8 u |x| exp(x) whatever the directions.
TEST(trial_cache, the_condition_term_of_exp_is_eight_unit_roundoffs_of_its_sensitivity) {
  const auto t = task("exp_fp32");
  const auto& shape = t.shapes.front();
  const auto in = make_task_inputs(t, shape, 5);
  const auto oracle = run_task_oracle(t, shape, in);
  const auto extra = condition_tolerance(t, shape, in, oracle, 77);
  ASSERT_EQ(extra.size(), 1u);
  const double u = std::ldexp(1.0, -24);
  for (std::int64_t i = 0; i < in[0].numel(); i += 97) {
    const double x = in[0].at(i), want = 8.0 * u * std::fabs(x) * std::exp(x);
    // (the fp64 difference of two nearby exps carries ~2^-53 exp(x) of its own rounding)
    EXPECT_NEAR(extra[0].at(i), want, 1e-4 * want + 32 * std::ldexp(std::exp(x), -53))
        << "x = " << x;
  }
}

// Shifted LayerNorm rows are ill-conditioned in float: the term grows with |mean| / sd, and an
// exact task (abs) gets none.
TEST(trial_cache, the_condition_term_grows_with_the_shift_and_exact_tasks_have_none) {
  const auto t = task("layernorm_affine_fp32");
  const auto& shape = t.shapes.back();
  auto in = make_task_inputs(t, shape, 3);
  const auto base = condition_tolerance(t, shape, in, run_task_oracle(t, shape, in), 1);
  for (std::int64_t i = 0; i < in[0].numel(); ++i)
    in[0].set(i, in[0].at(i) + 1000.0);
  const auto shifted = condition_tolerance(t, shape, in, run_task_oracle(t, shape, in), 1);
  double b = 0, s = 0;
  for (std::int64_t i = 0; i < base[0].numel(); ++i) {
    b = std::max(b, base[0].at(i));
    s = std::max(s, shifted[0].at(i));
  }
  // Each x moved by u |x|: ~u before the shift, ~1000 u after; over sd 1 that is the output's move.
  EXPECT_GT(s, 100 * b);
  EXPECT_LT(s, 8 * 4 * 1000 * std::ldexp(1.0, -24) * 10);
  const auto a = task("abs_fp32");
  const auto ain = make_task_inputs(a, a.shapes.front(), 3);
  EXPECT_TRUE(
      condition_tolerance(a, a.shapes.front(), ain, run_task_oracle(a, a.shapes.front(), ain), 1)
          .empty());
}

// A strict trial in a regime other than normal carries the term; draw 0 (normal) does not.
TEST(trial_cache, only_regimes_other_than_normal_carry_the_condition_term) {
  const auto t = task("softmax_lastdim");
  trial_key k{&t, &t.shapes.front(), 9, {}, false};
  k.regime.strict_regime = 0;
  EXPECT_FALSE(compute_trial(k).has_condition_term());
  EXPECT_TRUE(compute_trial(k).extra_atol().empty());
  k.regime.strict_regime = 1;
  const auto d = compute_trial(k);
  ASSERT_TRUE(d.has_condition_term());
  ASSERT_EQ(d.extra_atol().size(), 1u); // computed on first use, then the same
  EXPECT_EQ(d.extra_atol()[0].numel(), d.oracle[0].numel());
  EXPECT_EQ(&d.extra_atol()[0], &d.extra_atol()[0]);
}

// compare_allclose's per-element extra atol: an element passes exactly when within atol + extra.
TEST(trial_cache, compare_allclose_adds_the_extra_term_element_by_element) {
  const auto ref = host_tensor::from_doubles(dtype::float64, {3}, std::vector<double>{1, 2, 3});
  const auto got = host_tensor::from_doubles(dtype::float64, {3}, std::vector<double>{1.5, 2, 3.5});
  const auto extra =
      host_tensor::from_doubles(dtype::float64, {3}, std::vector<double>{0.5, 0, 0.4});
  const auto r = compare_allclose(ref, got, 0.0, 0.0, tolerance_side::reference, &extra);
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_EQ(r.first_mismatch, 2);
}
