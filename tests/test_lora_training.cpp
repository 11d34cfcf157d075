// LoRA training (issue: workloads under test) against its independent reference: LibTorch
// autograd (workloads/lora_torch.h) vs plain fp64 loops with finite-difference gradients
// (workloads/lora_reference.h), on a small Qwen3-shaped model, two jobs over one frozen base.
// The issue's gates: loss within rtol 1e-3, adapter parameters and gradients within rtol 1e-2.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "workloads/lora_model.h"
#include "workloads/lora_reference.h"
#include "workloads/lora_torch.h"

using namespace kg;

TEST(lora_training, the_reference_loss_is_that_of_a_uniform_guess_for_a_flat_model) {
  // Independent of both implementations: with lm_head = 0 every logit is 0, so the loss is
  // exactly log(vocab) whatever the rest of the model does.
  const auto c = lora_small_config();
  auto base = make_lora_base(c, 7);
  std::fill(base.lm_head.begin(), base.lm_head.end(), 0.0);
  const auto a = make_lora_adapters(c, 7, 0);
  const auto b = make_lora_batch(c, 7, 0);
  EXPECT_NEAR(lora_reference_loss(c, base, a, b), std::log(40.0), 1e-12);
  lora_trainer t(c, base, {a}, {"cpu", "float64"});
  EXPECT_NEAR(t.step({b}, 0.0)[0].loss, std::log(40.0), 1e-12);
}

TEST(lora_training, autograd_in_float64_matches_the_reference_loss_and_finite_differences) {
  const auto c = lora_small_config();
  const auto base = make_lora_base(c, 11);
  const std::vector<lora_adapters> jobs = {make_lora_adapters(c, 11, 0),
                                           make_lora_adapters(c, 11, 1)};
  const std::vector<lora_batch> batches = {make_lora_batch(c, 11, 0), make_lora_batch(c, 11, 1)};
  lora_trainer t(c, base, jobs, {"cpu", "float64"});
  const auto steps = t.step(batches, 0.0);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const double ref = lora_reference_loss(c, base, jobs[j], batches[j]);
    EXPECT_NEAR(steps[j].loss, ref, 1e-10 * std::fabs(ref)) << "job " << j;
    const auto g = lora_reference_grad(c, base, jobs[j], batches[j]);
    ASSERT_EQ(steps[j].grad.size(), g.size());
    EXPECT_LT(worst_relative_difference(steps[j].grad, g, 1e-6), 1e-4) << "job " << j;
    // Every adapter matrix has a gradient (B drawn nonzero): none of them is silently detached.
    const std::int64_t H = c.model.hidden, qd = 4 * 8, kd = 2 * 8;
    std::size_t at = 0;
    for (std::int64_t l = 0; l < c.model.layers; ++l)
      for (const std::int64_t n : {c.rank * H, qd * c.rank, c.rank * H, kd * c.rank}) {
        double biggest = 0;
        for (std::int64_t k = 0; k < n; ++k)
          biggest = std::max(biggest, std::fabs(g[at++]));
        EXPECT_GT(biggest, 1e-6) << "layer " << l << " block of " << n;
      }
    EXPECT_EQ(at, g.size());
  }
  // The two jobs differ (own adapters, own data) and do not leak into each other.
  EXPECT_NE(steps[0].loss, steps[1].loss);
}

TEST(lora_training, float32_training_steps_stay_within_the_issue_tolerances) {
  const auto c = lora_small_config();
  const auto base = make_lora_base(c, 3);
  std::vector<lora_adapters> ref = {make_lora_adapters(c, 3, 0), make_lora_adapters(c, 3, 1)};
  const std::vector<lora_batch> batches = {make_lora_batch(c, 3, 0), make_lora_batch(c, 3, 1)};
  lora_trainer t(c, base, ref, {"cpu", "float32"});
  const double lr = 0.5;
  for (int step = 0; step < 3; ++step) {
    const auto s = t.step(batches, lr);
    for (std::size_t j = 0; j < ref.size(); ++j) {
      const double loss = lora_reference_loss(c, base, ref[j], batches[j]);
      const auto g = lora_reference_grad(c, base, ref[j], batches[j]);
      EXPECT_LT(std::fabs(s[j].loss - loss) / loss, 1e-3) << "step " << step << " job " << j;
      EXPECT_LT(worst_relative_difference(s[j].grad, g, 1e-3), 1e-2)
          << "step " << step << " job " << j;
      auto p = ref[j].flat();
      for (std::size_t k = 0; k < p.size(); ++k)
        p[k] -= lr * g[k];
      ref[j].set_flat(p);
    }
  }
  const auto got = t.adapters();
  for (std::size_t j = 0; j < ref.size(); ++j)
    EXPECT_LT(worst_relative_difference(got[j].flat(), ref[j].flat(), 1e-3), 1e-2) << "job " << j;
  // Training moved the loss (the updates reached the model).
  EXPECT_LT(t.step(batches, 0.0)[0].loss,
            lora_reference_loss(c, base, make_lora_adapters(c, 3, 0), batches[0]));
}

// The device-drawn base (for the real model): the same seed gives the same model, in any dtype
// up to rounding; another seed another model.
TEST(lora_training, a_device_drawn_base_is_reproducible_from_its_seed) {
  const auto c = lora_small_config();
  const std::vector<lora_adapters> a = {make_lora_adapters(c, 4, 0)};
  const std::vector<lora_batch> b = {make_lora_batch(c, 4, 0)};
  lora_trainer t1(c, 77, a, {"cpu", "float32"}), t2(c, 77, a, {"cpu", "float32"});
  lora_trainer t64(c, 77, a, {"cpu", "float64"}), other(c, 78, a, {"cpu", "float32"});
  const double l1 = t1.step(b, 0.0)[0].loss;
  EXPECT_EQ(l1, t2.step(b, 0.0)[0].loss);
  EXPECT_NEAR(t64.step(b, 0.0)[0].loss, l1, 1e-5 * l1); // float32 draws, float64 arithmetic
  EXPECT_NE(other.step(b, 0.0)[0].loss, l1);
}
