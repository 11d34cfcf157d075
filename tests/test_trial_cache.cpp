// The CPU side of strict trials: timing's variant sets and the condition term of the tolerance,
// against values worked out by hand.
#include <cmath>

#include <gtest/gtest.h>

#include "kernels/task_torch_refs.h"
#include "oracles/comparators.h"
#include "oracles/task_oracles.h"
#include "sandbox/trial_cache.h"
#include "scratch_dir.h"
#include "suite/task_catalog.h"

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

// y = x + bias + residual with x = 1000, residual = -1000, bias = 0.5: y = 0.5, but each input
// moved by u in magnitude moves y by u |input|, and those moves do not cancel in a float kernel.
// The per-input moves are summed: 8 u (1000 + 0.5 + 1000) at every element, whatever the signs.
TEST(trial_cache, the_condition_term_sums_each_inputs_move_so_cancelling_inputs_count) {
  const auto t = task("fused_bias_dropout_free_residual");
  const auto& shape = t.shapes.back();
  auto in = make_task_inputs(t, shape, 4);
  for (std::int64_t i = 0; i < in[0].numel(); ++i) {
    in[0].set(i, 1000.0); // exact in bfloat16 (1.953125 x 2^9)
    in[2].set(i, -1000.0);
  }
  for (std::int64_t i = 0; i < in[1].numel(); ++i)
    in[1].set(i, 0.5);
  const auto oracle = run_task_oracle(t, shape, in);
  const auto extra = condition_tolerance(t, shape, in, oracle, 21);
  ASSERT_EQ(extra.size(), 1u);
  const double want = 8.0 * std::ldexp(1.0, -8) * 2000.5; // bfloat16's unit roundoff 2^-8
  for (std::int64_t i = 0; i < oracle[0].numel(); ++i)
    ASSERT_NEAR(extra[0].at(i), want, 1e-9 * want) << i;
}

// The floor at the reference's error, by hand: factor 4, cap 256 x (atol + rtol |oracle|) with
// the task's bfloat16 tolerance (atol 1e-2, rtol 1.6e-2); a NaN reference element is left alone.
TEST(trial_cache, the_reference_floor_is_four_times_its_error_capped_at_the_bound) {
  const auto t = task("fused_bias_dropout_free_residual");
  const auto oracle = std::vector<host_tensor>{
      host_tensor::from_doubles(dtype::float64, {5}, std::vector<double>{1, 2, 3, 0, -4})};
  const auto ref = std::vector<host_tensor>{
      host_tensor::from_doubles(dtype::float64, {5}, std::vector<double>{1.1, 2, NAN, 5, -4.25})};
  std::vector<host_tensor> extra{
      host_tensor::from_doubles(dtype::float64, {5}, std::vector<double>{0, 0.5, 0, 0, 0.1})};
  floor_at_reference_error(t, oracle, ref, extra);
  EXPECT_NEAR(extra[0].at(0), 0.4, 1e-12);  // 4 x 0.1
  EXPECT_EQ(extra[0].at(1), 0.5);           // the reference is exact; the term stays
  EXPECT_EQ(extra[0].at(2), 0.0);           // NaN reference: no floor
  EXPECT_NEAR(extra[0].at(3), 2.56, 1e-12); // 4 x 5 = 20, capped at 256 x 0.01
  EXPECT_NEAR(extra[0].at(4), 1.0, 1e-12);  // 4 x 0.25
}

// A strict trial's term is at least the floor at the LibTorch reference's error, which rounds the
// rotary angle to float32 (no input move reaches it): checked against the reference run here.
TEST(trial_cache, a_strict_trials_term_is_never_below_the_reference_floor) {
  const auto t = task("fused_rope_qk");
  int shifted = -1;
  for (std::size_t r = 0; r < t.regimes.size(); ++r)
    if (t.regimes[r].name() == "shifted") shifted = static_cast<int>(r);
  ASSERT_GE(shifted, 0);
  trial_key k{&t, &t.shapes.back(), 31, {}, false};
  k.regime.strict_regime = shifted;
  const auto d = compute_trial(k);
  const auto ref = run_torch_reference(t, d.inputs);
  ASSERT_TRUE(ref && ref->error.empty());
  const auto& tol = t.tolerance.at(dtype::bfloat16);
  std::int64_t raised = 0;
  for (std::size_t o = 0; o < d.oracle.size(); ++o)
    for (std::int64_t i = 0; i < d.oracle[o].numel(); ++i) {
      const double x = d.oracle[o].at(i), e = std::fabs(ref->outputs[o].at(i) - x);
      const double floor = std::min(4 * e, 256 * (tol.atol + tol.rtol * std::fabs(x)));
      ASSERT_GE(d.extra_atol()[o].at(i), floor) << o << " " << i;
      raised += e > 0 ? 1 : 0;
    }
  EXPECT_GT(raised, 0); // the reference does err somewhere, so the check above bites
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

// A trial's files name its inputs by content: keys that draw the same bytes -- the checker
// protocols' N(0,1) first trials and the witness plan's configurations of one seed and shape --
// share a digest, so the audit calls a candidate once for them (sandbox/mutant_audit.cpp).
TEST(trial_cache, keys_that_draw_the_same_inputs_share_their_digest) {
  const auto relu = task("relu");                // no weight or bias
  const auto ln = task("layernorm_affine_fp32"); // weight and bias
  trial_cache cache(kg::test::scratch_dir("trial-cache") / "digest", 1);
  task_input_regime strict0, sol, flashinfer, uniform, witness_identity;
  strict0.strict_regime = 0;       // strict's first draw, the witness plan's first configuration
  sol.identity_params = true;      // N(0,1) activations, parameters 1 and 0
  flashinfer.normal_params = true; // everything N(0,1)
  uniform.uniform01_activations = true;
  uniform.identity_params = true; // kernelbench's
  witness_identity.strict_regime = 0;
  witness_identity.identity_params = true;
  const auto digest = [&](const task_def& t, const task_shape& s, std::uint64_t seed,
                          const task_input_regime& r) {
    return cache.files({&t, &s, seed, r, false}).inputs_sha256;
  };
  const auto& r0 = relu.shapes.back(); // (1M elements: the first shape has 16M)
  const auto a = digest(relu, r0, 5, strict0);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(digest(relu, r0, 5, sol), a);
  EXPECT_EQ(digest(relu, r0, 5, flashinfer), a);
  EXPECT_NE(digest(relu, r0, 5, uniform), a);
  EXPECT_NE(digest(relu, r0, 6, strict0), a);
  ASSERT_GT(relu.shapes.size(), 1u);
  EXPECT_NE(digest(relu, relu.shapes.front(), 5, strict0), a);
  // With a weight and a bias the parameter draws tell them apart, and match where they agree.
  const auto& l0 = ln.shapes.front();
  EXPECT_NE(digest(ln, l0, 5, sol), digest(ln, l0, 5, strict0));
  EXPECT_NE(digest(ln, l0, 5, sol), digest(ln, l0, 5, flashinfer));
  EXPECT_EQ(digest(ln, l0, 5, witness_identity), digest(ln, l0, 5, sol));
}
