// LoRA training on the GPU (LibTorch CUDA) against the fp64 reference, on the small model of
// test_lora_training.cpp: float32 within the tolerances after SGD steps, and bfloat16
// (the workload's dtype) loss within a bf16-sized tolerance.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "gpu_test_support.h"
#include "workloads/lora_model.h"
#include "workloads/lora_reference.h"
#include "workloads/lora_torch.h"

using namespace kg;

TEST(gpu_lora, cuda_float32_steps_match_the_fp64_reference) {
  KG_REQUIRE_GPU();
  const auto c = lora_small_config();
  const auto base = make_lora_base(c, 5);
  std::vector<lora_adapters> ref = {make_lora_adapters(c, 5, 0), make_lora_adapters(c, 5, 1)};
  const std::vector<lora_batch> batches = {make_lora_batch(c, 5, 0), make_lora_batch(c, 5, 1)};
  lora_trainer t(c, base, ref, {"cuda", "float32"});
  for (int step = 0; step < 2; ++step) {
    const auto s = t.step(batches, 0.5);
    for (std::size_t j = 0; j < ref.size(); ++j) {
      const double loss = lora_reference_loss(c, base, ref[j], batches[j]);
      const auto g = lora_reference_grad(c, base, ref[j], batches[j]);
      EXPECT_LT(std::fabs(s[j].loss - loss) / loss, 1e-3) << "step " << step << " job " << j;
      const double worst = worst_relative_difference(s[j].grad, g, 1e-3);
      EXPECT_LT(worst, 1e-2) << "step " << step << " job " << j;
      auto p = ref[j].flat();
      for (std::size_t k = 0; k < p.size(); ++k)
        p[k] -= 0.5 * g[k];
      ref[j].set_flat(p);
    }
  }
}

TEST(gpu_lora, cuda_bfloat16_loss_is_near_the_fp64_reference) {
  KG_REQUIRE_GPU();
  const auto c = lora_small_config();
  const auto base = make_lora_base(c, 9);
  const auto a = make_lora_adapters(c, 9, 0);
  const auto b = make_lora_batch(c, 9, 0);
  lora_trainer t(c, base, {a}, {"cuda", "bfloat16"});
  const double loss = lora_reference_loss(c, base, a, b);
  // bf16 keeps 8 bits of mantissa: a few parts in a thousand through two layers.
  EXPECT_LT(std::fabs(t.step({b}, 0.0)[0].loss - loss) / loss, 2e-2);
}
